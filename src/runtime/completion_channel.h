// A completion channel: armed CQs attached to it report one event each time they fire; the
// channel's fd is readable while events are undelivered (ibv_comp_channel semantics).
#pragma once

#include <chrono>

#include "runtime/event_queue.h"
#include "verbs/completion_queue.h"

namespace uwarp::runtime {

class CompletionChannel final : public verbs::CqEventSink {
 public:
  void cq_event(verbs::CompletionQueue& cq) override { queue_.push(&cq); }
  int fd() const { return queue_.fd(); }
  // The CQ that fired, or null on timeout. timeout_ms: 0 polls, -1 waits without limit.
  verbs::CompletionQueue* wait(int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      auto e = queue_.take(timeout_ms);
      if (!e) return nullptr;
      if (*e != nullptr) return *e;
      // A forgotten CQ's event: keep waiting for the rest of the time.
      if (timeout_ms > 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return nullptr;
        timeout_ms = static_cast<int>(left.count());
      }
    }
  }
  // One blocking read() of the fd, honouring O_NONBLOCK set on it (OFA's ibv_get_cq_event).
  // Null when nothing was taken (errno says why: EAGAIN when non-blocking) or when the event
  // taken belonged to a forgotten CQ (errno untouched); callers loop.
  verbs::CompletionQueue* wait_honouring_fd_mode() {
    auto e = queue_.take_honouring_fd_mode();
    return e ? *e : nullptr;
  }
  // Drops the undelivered events of `cq` (it is being destroyed). Each leaves a tombstone that
  // wait() skips, so the fd stays readable until it is consumed.
  std::size_t forget(const verbs::CompletionQueue* cq) {
    return queue_.replace_if([cq](verbs::CompletionQueue* e) { return e == cq; }, nullptr);
  }

 private:
  EventQueue<verbs::CompletionQueue*> queue_;
};

// Asynchronous events of a device, with a pollable fd.
class AsyncEventQueue final : public verbs::AsyncEventSink {
 public:
  void async_event(const uwarp::AsyncEvent& e) override { queue_.push(e); }
  int fd() const { return queue_.fd(); }
  std::optional<uwarp::AsyncEvent> take(int timeout_ms) { return queue_.take(timeout_ms); }
  // One blocking read() honouring O_NONBLOCK set on fd() (OFA's ibv_get_async_event); see
  // EventQueue::take_honouring_fd_mode.
  std::optional<uwarp::AsyncEvent> take_honouring_fd_mode() {
    return queue_.take_honouring_fd_mode();
  }

 private:
  EventQueue<uwarp::AsyncEvent> queue_;
};

}  // namespace uwarp::runtime
