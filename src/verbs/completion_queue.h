// A completion queue with OFA semantics: bounded, polled from any thread, armed for one event at
// a time (next completion, or solicited only), overflow reported as an asynchronous CQ error.
//
// Memory ordering: producers (QPs, on the progress thread or a posting thread) append under
// mu_ and then publish the new count with a release store to count_; poll() first reads count_
// with acquire, so that an empty queue costs a spinning application no lock.
//
// Busy polling (docs/threading.md): the streams of the QPs that use this CQ register as poll
// sources (verbs/poll_sources.h). An application that finds the CQ empty calls drive_sources()
// to receive on them itself instead of waiting for the progress thread, and on the process's
// other streams when these are idle.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/slot_ring.h"
#include "uwarp/types.h"
#include "verbs/poll_sources.h"

namespace uwarp::verbs {

class CompletionQueue;

// Told when an armed CQ fires (the completion channel behind it, in the runtime). Called with the
// CQ's lock held, before the completion that fired it can be polled: it must not call into the
// CQ.
class CqEventSink {
 public:
  virtual ~CqEventSink() = default;
  virtual void cq_event(CompletionQueue& cq) = 0;
};

// Something an application thread polling a CQ may drive: the stream of a QP that completes
// work on this CQ (runtime::Stream).
class CqPollSource {
 public:
  virtual ~CqPollSource() = default;
  // Any thread, no locks held. Receives and processes what is waiting, unless another thread is
  // doing so right now (then returns false at once). claim: the caller will keep polling (the
  // CQ is not armed), so the source may leave receiving to it for a short while. Returns true
  // if it made progress (bytes were received or the stream ended). now: when the poll began.
  virtual bool cq_poll_rx(bool claim, PollTime now) = 0;
  // The CQ was armed: the application is about to block on its completion channel, so the
  // progress thread must receive again at once. Any thread, no locks held.
  virtual void cq_armed() = 0;
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
  // Drops the completions of QP `qp_num` not yet polled (a destroyed QP's: their wr_ids name
  // buffers the application may have freed with it, as providers that clean a destroyed QP's
  // completions from its CQs promise). Returns how many went.
  std::size_t purge(std::uint32_t qp_num);

  // How many completions were ever pushed, and how many have left (polled or purged). Completions
  // leave in order, so once left_total() reaches an earlier pushed_total(), the completions
  // pushed before that moment are gone (a purge of later ones may make it reach it early). Any
  // thread, no lock.
  std::uint64_t pushed_total() const { return pushed_total_.load(std::memory_order_acquire); }
  std::uint64_t left_total() const { return left_total_.load(std::memory_order_acquire); }

  // Poll sources (see above and verbs/poll_sources.h). add/remove: any thread; a source is added
  // at most once per CQ (adding it again is ignored) and removed before it stops being usable.
  void add_source(const std::shared_ptr<CqPollSource>& source) { sources_.add(source); }
  void remove_source(const CqPollSource* source) { sources_.remove(source); }
  // Drives up to PollSources::kDrivePerCall of this CQ's sources on the calling thread, and if
  // none made progress, as many of the process's others. Returns true if any made progress.
  // No locks may be held by the caller. now: when the poll began.
  bool drive_sources(PollTime now);
  static constexpr std::size_t kDrivePerCall = PollSources::kDrivePerCall;

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
  Mutex mu_;
  SlotRing<WorkCompletion> queue_ GUARDED_BY(mu_);
  Arm arm_ GUARDED_BY(mu_) = Arm::kNone;
  std::atomic<std::size_t> count_{0};
  std::atomic<std::uint64_t> pushed_total_{0};  // written under mu_
  std::atomic<std::uint64_t> left_total_{0};    // written under mu_
  std::atomic<bool> overflowed_{false};
  std::atomic<bool> armed_{false};  // arm_ != kNone, for drive_sources without mu_

  PollSources sources_;
};

}  // namespace uwarp::verbs
