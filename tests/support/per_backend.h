// Test support: integration tests that run once per I/O backend. The parameter names the
// backend of the Context the test opens ("epoll" or "uring"): SetUp sets UWARP_IO before the test
// body runs, and skips the io_uring run where the kernel or its policy refuses io_uring (a
// Context would silently fall back to epoll there).
//
// Process-wide (the environment): CTest runs each test in a process of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "io/backend.h"

namespace uwarp::testing {

// Whether this machine gives uwarp an io_uring. The probe ring is made and destroyed on a
// thread of its own: tearing a ring down interrupts the blocking calls of the threads that made
// it (io/backend_uring.cc).
inline bool uring_available() {
  bool ok = false;
  std::thread([&ok] { ok = io::make_uring_backend() != nullptr; }).join();
  return ok;
}

// A backend by name ("uring" or "epoll"), made on this thread (null where io_uring is refused).
inline std::unique_ptr<io::IoBackend> make_backend(const std::string& name) {
  return name == "uring" ? io::make_uring_backend() : io::make_epoll_backend();
}

class PerBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "uring") {
      if (!uring_available()) GTEST_SKIP() << "io_uring is refused on this machine (kernel or policy)";
      ::unsetenv("UWARP_IO");  // io_uring is the default
    } else {
      ::setenv("UWARP_IO", GetParam().c_str(), 1);
    }
  }
};

inline std::string backend_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace uwarp::testing
