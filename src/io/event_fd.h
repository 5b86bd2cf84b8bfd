// A counting eventfd: readable exactly while its count is nonzero; each take() consumes one.
// Backs completion channels and event queues whose fd applications poll.
#pragma once

#include <cstdint>

#include "io/socket.h"

namespace uwarp::io {

class EventFd {
 public:
  EventFd();
  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  void signal();
  // Takes one count if there is one now; false if none.
  bool try_take();
  // Takes one count with one read() of fd(), as the OFA calls that are a read() of their fd in
  // rdma-core make it (ibv_get_cq_event, ibv_get_async_event): waits for a count unless the
  // owner set O_NONBLOCK on fd() (then false with EAGAIN), and, like read(), fails with EINTR
  // when a signal handler interrupts it (the kernel restarts it for one installed with
  // SA_RESTART). False with errno set if no count was taken.
  bool read_one();
  // Waits until readable or timeout_ms passes (-1: forever). True if readable.
  bool wait_readable(int timeout_ms) const;

 private:
  Fd fd_;
};

}  // namespace uwarp::io
