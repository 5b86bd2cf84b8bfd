// How long a listening socket waits before it accepts again after an accept failed for want of
// resources. Out of file descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM), the
// connection stays queued, and an accept retried at once fails again at once: without a pause
// the loop thread would do nothing else. The pause doubles with each such failure in a row, from
// kFirst up to kMax; a successful accept starts again from kFirst. Other errors (the peer reset
// the queued connection) are retried at once.
//
// Owner: the backend, one per listening fd. Thread: the backend's (its lock or its loop thread).
// Sans I/O: the backend keeps the deadline.
#pragma once

#include <cerrno>
#include <chrono>

namespace uwarp::io {

// An accept failed with `err` (an errno) because the process or the kernel is out of resources.
constexpr bool accept_out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

// A wait of the loop (negative: no limit), shortened so that it ends by `deadline`.
inline std::chrono::microseconds wait_at_most_until(std::chrono::microseconds timeout,
                                                    std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
  const std::chrono::microseconds bound = left.count() > 0 ? left : std::chrono::microseconds(0);
  return timeout.count() < 0 || bound < timeout ? bound : timeout;
}

class AcceptBackoff {
 public:
  static constexpr std::chrono::milliseconds kFirst{1};
  static constexpr std::chrono::milliseconds kMax{100};

  // An accept failed for want of resources: the pause before the next one.
  std::chrono::milliseconds next() {
    const std::chrono::milliseconds pause = pause_;
    pause_ = pause_ * 2 < kMax ? pause_ * 2 : kMax;
    return pause;
  }
  // An accept succeeded.
  void reset() { pause_ = kFirst; }

 private:
  std::chrono::milliseconds pause_ = kFirst;
};

}  // namespace uwarp::io
