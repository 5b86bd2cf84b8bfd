// A queue of events with a pollable fd: readable exactly while undelivered events exist (the
// contract of OFA's completion and event channels). Producers push from any thread; consumers
// take from any thread, blocking or not.
#pragma once

#include <deque>
#include <optional>

#include "base/mutex.h"
#include "io/event_fd.h"

namespace uwarp::runtime {

template <typename T>
class EventQueue {
 public:
  int fd() const { return efd_.fd(); }
  void push(T event) {
    {
      MutexLock lock(mu_);
      events_.push_back(std::move(event));
    }
    efd_.signal();
  }
  // timeout_ms: 0 polls, -1 waits without limit.
  std::optional<T> take(int timeout_ms) {
    if (timeout_ms != 0 && !efd_.wait_readable(timeout_ms)) return std::nullopt;
    if (!efd_.try_take()) return std::nullopt;
    MutexLock lock(mu_);
    if (events_.empty()) return std::nullopt;
    T e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // Replaces every undelivered event for which pred(event) holds by `replacement` (a
  // tombstone the consumer skips), so that the fd's count keeps matching the queue. Returns how
  // many were replaced. Used when the object an event names goes away before delivery.
  template <typename Pred>
  std::size_t replace_if(Pred pred, const T& replacement) {
    MutexLock lock(mu_);
    std::size_t n = 0;
    for (T& e : events_) {
      if (pred(e)) {
        e = replacement;
        ++n;
      }
    }
    return n;
  }
  // Blocking take that honours O_NONBLOCK set on fd() and signals (for OFA's read()-like calls:
  // io::EventFd::read_one). Returns nullopt with errno from read() (EAGAIN when non-blocking and
  // empty, EINTR when a signal handler interrupted it), or with errno untouched when another
  // consumer took the event first.
  std::optional<T> take_honouring_fd_mode() {
    if (!efd_.read_one()) return std::nullopt;
    MutexLock lock(mu_);
    if (events_.empty()) return std::nullopt;
    T e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  io::EventFd efd_;
  Mutex mu_;
  std::deque<T> events_ GUARDED_BY(mu_);
};

}  // namespace uwarp::runtime
