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
  // Takes one count. blocking: waits for one (respects O_NONBLOCK set on fd() by the owner:
  // then returns false at once). Returns false if none could be taken.
  bool take(bool blocking);
  // Waits until readable or timeout_ms passes (-1: forever). True if readable.
  bool wait_readable(int timeout_ms) const;

 private:
  Fd fd_;
};

}  // namespace uwarp::io
