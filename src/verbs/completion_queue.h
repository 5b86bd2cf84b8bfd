// A completion queue with OFA semantics: bounded, polled from any thread, armed for one event at
// a time (next completion, or solicited only), overflow reported as an asynchronous CQ error.
//
// Memory ordering: producers (QPs, on the progress thread or a posting thread) append under
// mu_ and then publish the new count with a release store to count_; poll() first reads count_
// with acquire, so that an empty queue costs a spinning application no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>

#include "uwarp/types.h"

namespace uwarp::verbs {

class CompletionQueue;

// Told when an armed CQ fires (the completion channel behind it, in the runtime).
class CqEventSink {
 public:
  virtual ~CqEventSink() = default;
  virtual void cq_event(CompletionQueue& cq) = 0;
};

class CompletionQueue {
 public:
  CompletionQueue(std::uint32_t capacity, CqEventSink* events, void* user_context)
      : capacity_(capacity), events_(events), user_context_(user_context) {}

  // Moves up to out.size() completions into `out`; returns how many.
  std::size_t poll(std::span<WorkCompletion> out);
  // Arms the CQ: the next completion (or the next solicited or error completion when
  // solicited_only) fires one event through the CqEventSink.
  void arm(bool solicited_only);

  // Appends a completion; `solicited` marks a receive of a Send with Solicited Event. Returns
  // false if the queue is full (the completion is lost and the CQ is in overflow).
  bool push(const WorkCompletion& wc, bool solicited);

  std::uint32_t capacity() const { return capacity_; }
  std::size_t size() const { return count_.load(std::memory_order_acquire); }
  bool overflowed() const { return overflowed_.load(std::memory_order_acquire); }
  void* user_context() const { return user_context_; }
  void set_event_sink(CqEventSink* sink) { events_ = sink; }

 private:
  enum class Arm : std::uint8_t { kNone, kNext, kSolicited };
  const std::uint32_t capacity_;
  CqEventSink* events_;
  void* const user_context_;
  std::mutex mu_;
  std::deque<WorkCompletion> queue_;
  Arm arm_ = Arm::kNone;
  std::atomic<std::size_t> count_{0};
  std::atomic<bool> overflowed_{false};
};

}  // namespace uwarp::verbs
