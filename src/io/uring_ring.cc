#include "io/uring_ring.h"

namespace uwarp::io {
namespace {
constexpr unsigned kRingEntries = 256;
constexpr unsigned kCompletionEntries = 8192;  // 1000 QPs: a watch and a send each, with room
}  // namespace

std::unique_ptr<UringRing> UringRing::create() {
  // The kernel may lack io_uring or these flags, or refuse it (kernel.io_uring_disabled,
  // seccomp): then nullptr. Linux 6.1 has all flags; older kernels get the ring without them.
  io_uring ring{};
  io_uring_params p{};
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  p.cq_entries = kCompletionEntries;
  if (io_uring_queue_init_params(kRingEntries, &ring, &p) == 0) {
    return std::make_unique<UringRing>(ring);
  }
  p = io_uring_params{};
  p.flags = IORING_SETUP_CQSIZE;
  p.cq_entries = kCompletionEntries;
  if (io_uring_queue_init_params(kRingEntries, &ring, &p) == 0) {
    return std::make_unique<UringRing>(ring);
  }
  return nullptr;
}

io_uring_sqe* UringRing::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void UringRing::submit_and_wait(std::chrono::microseconds timeout) {
  if (timeout.count() == 0) {
    io_uring_submit_and_get_events(&ring_);
    return;
  }
  io_uring_cqe* cqe = nullptr;
  if (timeout.count() < 0) {
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, nullptr, nullptr);
    return;
  }
  __kernel_timespec ts{};
  ts.tv_sec = timeout.count() / 1000000;
  ts.tv_nsec = (timeout.count() % 1000000) * 1000;
  io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
}

}  // namespace uwarp::io
