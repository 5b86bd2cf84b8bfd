// A steady-clock time point as nanoseconds since the clock's epoch: the form in which time
// points live in atomics (busy-poll claims, progress activity). Threads: any (a pure function).
#pragma once

#include <chrono>
#include <cstdint>

namespace uwarp::runtime {

inline std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace uwarp::runtime
