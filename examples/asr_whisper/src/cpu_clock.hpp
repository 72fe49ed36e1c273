// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <time.h>

namespace asr {

/// CPU seconds this process has used (CLOCK_PROCESS_CPUTIME_ID). A cost measured as the
/// difference of two readings does not grow with the load other processes put on the machine,
/// so runs made at different times (or re-run later) compare; wall-clock time does not.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace asr
