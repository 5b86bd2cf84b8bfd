// PollHandoff: which thread receives on a stream, the engine thread or an application that
// busy-polls one of the QP's CQs (docs/threading.md, "Busy polling").
//
// An application that spins on a CQ (polls again within kSpinGap) claims the stream for
// handoff() (kHandoff by default). A readiness report that finds the stream claimed is left to
// the poller: the engine thread does not watch again and checks back when the claim lapses,
// then every kRecheck while it is renewed. A claiming poll that received or sent for the stream
// renews its claim when it ends (busy_until), since receiving a megabyte can outlast handoff().
// Once the application has not polled for handoff(),
// or arms the CQ (release: at once), the engine thread receives and watches again. So bytes
// wait for a receiver at most handoff() after the application's last poll, or kRecheck after
// the engine's previous check, even if the application stops polling for good.
//
// Only empty polls claim. An application working through a batch of completions (posting more
// work for each, as perftest does) can go longer than handoff() between two empty polls, and an
// engine thread that took the stream meanwhile held the QP lock that its posts then waited for,
// so that it could not poll and claim again: the requester of 64 KiB Reads received a third of
// their bytes on its progress thread. So a claim that lapsed runs on while its application
// still polls: it made an empty poll within kRecheck and has taken completions from the
// stream's CQs since the engine thread last looked (leave_to_poller). An application that
// stops polling without arming its CQ (it waits on memory now) leaves bytes waiting up to about
// handoff() + kRecheck after its last empty poll.
//
// Threads: any, but leave_to_poller (the engine thread); the shared state is two
// atomics (relaxed: a stale reading only delays a hand-over by one check).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "runtime/engine.h"
#include "verbs/completion_queue.h"
#include "verbs/qp_config.h"

namespace uwarp::runtime {

class PollHandoff {
 public:
  // How long a claim keeps the engine thread from receiving: UWARP_POLL_HANDOFF_US from the
  // environment (0: no hand-off), else kHandoff.
  static constexpr std::chrono::microseconds kHandoff{100};
  static std::chrono::microseconds handoff();
  // A poll within kSpinGap of the previous one claims the stream.
  static constexpr std::chrono::microseconds kSpinGap{20};
  // While an application keeps polling, how often the engine thread checks the claim.
  static constexpr std::chrono::microseconds kRecheck{1000};

  // An application polled (claim: it will keep polling). Only a poll that follows another one
  // closely claims the stream: an application that spins on the CQ, not one that polls now and
  // then and waits on memory meanwhile (as ib_write_lat does; it needs the engine thread to
  // place its data). now: when the poll began.
  void polled(bool claim, Clock::time_point now);
  // A poll that began at `start` received or sent for the stream and ended at `end`. If the
  // stream was claimed at `start`, the claim runs from `end`, and so does the spin gap to the
  // next poll: a poll that receives for long (a megabyte arriving) would otherwise see its own
  // claim lapse under it and the engine thread take the stream from the spinning poller. A poll
  // that held no claim (an application that polls now and then) gains none.
  void busy_until(Clock::time_point start, Clock::time_point end);
  // The application is going to sleep (it armed the CQ): the claim ends at once.
  void release();
  // An application polled within kSpinGap.
  bool spinning() const;
  bool claimed(Clock::time_point now) const;
  // How many kRecheck periods after it lapsed a claim may still run on: an engine thread's
  // timer on a busy machine fires late, and the look after kRecheck must still find it.
  static constexpr int kRunOnWithin = 4;
  // Engine thread: are the stream's bytes left to the application at `now`? While its claim
  // holds. Once it lapsed (less than kRunOnWithin kRecheck periods ago), the claim runs on from
  // `now` if the application made an empty poll within kRecheck and has taken completions from
  // the stream's CQs since the engine thread last asked (`taken`: how many have left them in
  // all). A claim released, or lapsed longer ago, leaves nothing.
  bool leave_to_poller(Clock::time_point now, std::uint64_t taken);
  // When the engine thread should look at a claimed stream again: when the claim lapses for
  // the first check of a hand-off period, and no sooner than kRecheck from now for later ones.
  Clock::time_point next_check(int checks_so_far) const;

 private:
  // When an application last claimed the stream (steady clock, ns; 0: none or handed back).
  std::atomic<std::int64_t> claimed_at_ns_{0};
  std::atomic<std::int64_t> last_poll_ns_{0};
  std::uint64_t taken_seen_ = 0;  // leave_to_poller's `taken` when last asked (engine thread)
};

// The CQs of a QP (send and receive, once each) that a stream is registered with as a poll
// source (verbs::CqPollSource), so that applications polling them receive for the stream; and
// the process's set of every stream (verbs/poll_sources.h), which polls of other CQs drive when
// theirs are idle. Guarded by the stream's mutex.
class PollSourceRegistration {
 public:
  void add(const verbs::QpConfig& config, const std::shared_ptr<verbs::CqPollSource>& source);
  void remove(verbs::CqPollSource* source);
  // How many completions have left the registered CQs in all (CompletionQueue::left_total, each
  // CQ once): PollHandoff::leave_to_poller's `taken`.
  std::uint64_t completions_taken() const;

 private:
  verbs::CompletionQueue* cqs_[2] = {nullptr, nullptr};
};

}  // namespace uwarp::runtime
