// DoorbellBatching: whether a post's doorbell sends at once, or leaves its work requests queued
// for the posting thread's next poll of a CQ, so that a burst of posts leaves in one send
// (docs/threading.md, "Doorbell batching").
//
// Each doorbell that sends costs a system call and, on a short path, a trip of a small segment
// through both TCP stacks; a burst of posts of Read Requests (ib_read_bw posts a hundred between
// two polls of its CQ) then costs one of each per Read. A post is left queued (kDefer) when all
// of these hold:
// - it is little (verbs::Doorbell::kMayWait, verbs::posts_little: Reads of at most 256 KiB,
//   atomics, messages of at most 64 KiB that take at most 16 FPDUs);
// - the posting thread polls CQs (the stream checks), so its next poll sends what it left;
// - it came within kBurstGap of the stream's previous doorbell: it is part of a burst. The
//   first post after a pause (a ping-pong's, a latency test's) sends at once.
// What is left queued goes out with the posting thread's next poll of any CQ
// (runtime/progress_activity.h, send_posts_left_queued), with the next pump for any other
// reason (a poll that drives the stream, the engine receiving), or with the post that would be
// the kMaxDeferred-th left queued; and at the latest kDeadline after the first was left, from
// the engine thread (the caller arms a timer when ring() says kDeferAndArm). A deadline that
// finds posts queued shows an application that posts and then waits elsewhere (or a posting
// thread the scheduler took the core from): batching stays off for kBackoff, so that such an
// application waits for a deadline at most once per kBackoff.
//
// Threads: any; every call is made with the QP lock held (the stream's transmit state).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "runtime/engine.h"

namespace uwarp::runtime {

class DoorbellBatching {
 public:
  static constexpr std::chrono::microseconds kBurstGap{2};
  static constexpr std::size_t kMaxDeferred = 32;
  static constexpr std::chrono::microseconds kDeadline{100};
  static constexpr std::chrono::milliseconds kBackoff{10};

  // Whether UWARP_DOORBELL_BATCHING in the environment leaves it on (unset or not "0").
  static bool enabled_by_environment();

  explicit DoorbellBatching(bool enabled = enabled_by_environment()) : enabled_(enabled) {}

  enum class Ring : std::uint8_t {
    kSend,         // send now (and with it whatever was left queued)
    kDefer,        // leave it queued
    kDeferAndArm,  // leave it queued; the first one left: arm a deadline at deadline()
  };
  // A post of kind verbs::Doorbell::kMayWait, by a thread that polls CQs, rang at `now`.
  Ring ring(Clock::time_point now);
  // What was queued went to the transmitter (a pump ran).
  void sent() { deferred_ = 0; }
  // A doorbell that sent ended at `now` (the next post's burst gap counts from here: its send
  // may have taken longer than the gap).
  void doorbell_ended(Clock::time_point now) { last_doorbell_ = now; }
  bool deferred() const { return deferred_ != 0; }
  // When the posts left queued now must have gone out.
  Clock::time_point deadline() const { return first_deferred_ + kDeadline; }
  // The engine thread's deadline check at `now`: true if posts left queued are due (the caller
  // sends them; batching backs off).
  bool deadline_passed(Clock::time_point now);

 private:
  const bool enabled_;
  std::size_t deferred_ = 0;               // posts left queued now
  Clock::time_point first_deferred_{};     // when the first of them was
  Clock::time_point last_doorbell_{};      // the previous little post's doorbell (its end)
  Clock::time_point backoff_until_{};
};

}  // namespace uwarp::runtime
