// UringRing: one io_uring (liburing), its submission slots, its waits and its completions.
//
// Thread: the thread that creates it is its only user, and destroys it (the ring is set up
// with IORING_SETUP_SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them: completions are
// then processed when that thread waits, not by interrupting it). See backend_uring.cc for why
// that thread must never be an application's.
#pragma once

#include <liburing.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace uwarp::io {

struct UringCompletion {
  std::uint64_t user_data;
  int res;
  unsigned flags;
};

class UringRing {
 public:
  // nullptr if this kernel or its policy (kernel.io_uring_disabled, seccomp) refuses io_uring.
  static std::unique_ptr<UringRing> create();
  explicit UringRing(const io_uring& ring) : ring_(ring) {}
  ~UringRing() { io_uring_queue_exit(&ring_); }
  UringRing(const UringRing&) = delete;
  UringRing& operator=(const UringRing&) = delete;

  // A free submission slot (submitting what is queued if the ring is full), to be prepared and
  // given its user data by the caller.
  io_uring_sqe* next_sqe();
  // Submits what is queued and waits up to `timeout` for a completion (0: only submits and
  // collects what has arrived; negative: no limit; microsecond resolution).
  void submit_and_wait(std::chrono::microseconds timeout);
  // Hands every completion that has arrived to `take`, then returns their slots to the kernel.
  template <typename F>
  void reap(F&& take) {
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned count = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      take(UringCompletion{io_uring_cqe_get_data64(cqe), cqe->res, cqe->flags});
      ++count;
    }
    io_uring_cq_advance(&ring_, count);
  }

 private:
  io_uring ring_;
};

}  // namespace uwarp::io
