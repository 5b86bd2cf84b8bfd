// A completion channel: armed CQs attached to it report one event each time they fire; the
// channel's fd is readable while events are undelivered (ibv_comp_channel semantics).
#pragma once

#include "runtime/event_queue.h"
#include "verbs/completion_queue.h"

namespace uwarp::runtime {

class CompletionChannel final : public verbs::CqEventSink {
 public:
  void cq_event(verbs::CompletionQueue& cq) override { queue_.push(&cq); }
  int fd() const { return queue_.fd(); }
  // The CQ that fired, or null on timeout. timeout_ms: 0 polls, -1 waits without limit.
  verbs::CompletionQueue* wait(int timeout_ms) {
    auto e = queue_.take(timeout_ms);
    return e ? *e : nullptr;
  }
  verbs::CompletionQueue* wait_honouring_fd_mode() {
    auto e = queue_.take_honouring_fd_mode();
    return e ? *e : nullptr;
  }

 private:
  EventQueue<verbs::CompletionQueue*> queue_;
};

// Asynchronous events of a device, with a pollable fd.
class AsyncEventQueue final : public verbs::AsyncEventSink {
 public:
  void async_event(const verbs::AsyncEvent& e) override { queue_.push(e); }
  int fd() const { return queue_.fd(); }
  std::optional<verbs::AsyncEvent> take(int timeout_ms) { return queue_.take(timeout_ms); }

 private:
  EventQueue<verbs::AsyncEvent> queue_;
};

}  // namespace uwarp::runtime
