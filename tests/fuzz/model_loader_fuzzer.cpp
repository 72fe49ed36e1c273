// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: bytes -> a CTranslate2 model.bin (examples/asr_whisper): ct2_model_file
// loading, every variable's to_float() and scalar_int(), then whisper_weights::load(). Every
// input either loads or raises asr_error naming the file; nothing else may happen (no crash,
// no out-of-bounds read, no std::out_of_range or other exception, no leak).
//
// ct2_model_file only loads from a path, so the bytes go to an in-memory file (memfd) read back
// through /proc/self/fd: no disk traffic, one descriptor for the whole run.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ct2_model_file.hpp"
#include "whisper_weights.hpp"

namespace {

const std::string& model_path() {
  static const std::string path = [] {
    const int fd = memfd_create("model.bin", 0);
    if (fd < 0) std::abort();
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

void write_model(const std::uint8_t* data, std::size_t size) {
  const int fd = std::stoi(model_path().substr(sizeof("/proc/self/fd/") - 1));
  if (ftruncate(fd, 0) != 0) std::abort();
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
}

[[noreturn]] void unexpected(const char* what) {
  std::fprintf(stderr, "unexpected exception: %s\n", what);
  std::abort();
}

void check_names_file(const asr::asr_error& e) {
  if (std::string(e.what()).find(model_path()) == std::string::npos) {
    std::fprintf(stderr, "asr_error does not name the file: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_model(data, size);
  try {
    const asr::ct2_model_file f = asr::ct2_model_file::load(model_path());
    bool skip_weights = false;
    for (const auto& [name, v] : f.variables()) {
      try {
        const std::vector<float> values = f.to_float(name);
        if (values.size() != v.numel()) std::abort();
        if (v.numel() == 1) (void)f.scalar_int(name);
      } catch (const asr::asr_error& e) {
        check_names_file(e);
      }
    }
    for (const auto& [alias, target] : f.aliases()) (void)f.has(alias);
    if (skip_weights) return 0;
    try {
      const asr::whisper_weights w = asr::whisper_weights::load(f);
      (void)w;
    } catch (const asr::asr_error& e) {
      check_names_file(e);
    }
  } catch (const asr::asr_error& e) {
    check_names_file(e);
  } catch (const std::exception& e) {
    unexpected(e.what());
  }
  return 0;
}
