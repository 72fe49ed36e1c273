// SPDX-License-Identifier: Apache-2.0
/// @file
/// The machine a benchmark ran on, recorded in the JSON context so results name their hardware.
#pragma once

#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

namespace audiokv::bench {

/// "model name" from /proc/cpuinfo, or "unknown".
inline std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

/// The body of every CPU benchmark's main(): the CPU model in the JSON context, then Google
/// Benchmark's own flags and run. Returns main's exit status.
inline int run_benchmarks(int argc, char** argv) {
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace audiokv::bench
