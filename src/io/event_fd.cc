#include "io/event_fd.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace uwarp::io {

EventFd::EventFd() : fd_(::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC)) {}

void EventFd::signal() {
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof one);
}

bool EventFd::try_take() {
  if (!wait_readable(0)) return false;
  std::uint64_t v = 0;
  while (true) {
    // Readable, so this returns at once unless another consumer took the count meanwhile.
    const ssize_t n = ::read(fd_.get(), &v, sizeof v);
    if (n == sizeof v) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool EventFd::read_one() {
  std::uint64_t v = 0;
  return ::read(fd_.get(), &v, sizeof v) == sizeof v;
}

bool EventFd::wait_readable(int timeout_ms) const {
  pollfd p{fd_.get(), POLLIN, 0};
  while (true) {
    const int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    return rc > 0;
  }
}

}  // namespace uwarp::io
