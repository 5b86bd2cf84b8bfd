// Stream: drives one connected QP over its TCP socket: its lifetime (start, disconnect, abort,
// teardown), its I/O callbacks, and who receives when. StreamReceiver receives (bounce buffer,
// direct placement), Transmitter sends, PollHandoff tracks busy-polling claims.
//
// Receiving happens under mu_ and the QP lock, on whichever thread gets mu_: the engine thread
// on a readiness report (on_readable), or an application thread polling a CQ of the QP
// (poll_rx), which only try-locks mu_ and so never waits for the engine thread. A report that
// finds the stream claimed by a poller is left to it: the engine thread stops watching (no more
// wake-ups for this socket) and checks back when the claim may have lapsed. Transmitting
// happens inline on the posting thread while the socket takes the bytes, else on the engine
// thread once it is writable, or on a polling application thread that finds it writable first.
//
// The connection's protocol is an RdmapDriver (its RDMAP engine), from start() until the QP is
// unbound; StreamReceiver feeds it, Transmitter fills and sends its batches.
//
// Locking (docs/threading.md): mu_ guards qp_ and the receive state; I/O callbacks and poll_rx
// take mu_ and then the QP lock; the QP's doorbell (QpLink) rings with the QP lock held and
// never takes mu_.
// All other state (rdmap_, tx_) is guarded by the QP lock while qp_ is set, and belongs to the
// engine thread after detach.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "io/backend.h"
#include "runtime/doorbell_batching.h"
#include "runtime/engine.h"
#include "runtime/poll_handoff.h"
#include "runtime/rdmap_driver.h"
#include "runtime/stream_observer.h"
#include "runtime/stream_receiver.h"
#include "runtime/stream_stats.h"
#include "runtime/transmitter.h"
#include "runtime/wait_clock.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class Stream final : public io::IoHandler,
                     public verbs::QpLink,
                     public verbs::CqPollSource,
                     public std::enable_shared_from_this<Stream> {
 public:
  // `engine` carries the stream; the observer is told on `observer_engine`'s thread (the same
  // engine, or the context's control engine: runtime/engine_pool.h).
  Stream(Engine& engine, Engine& observer_engine, io::Fd fd, verbs::QueuePair& qp,
         std::weak_ptr<StreamObserver> observer);

  // Engine thread: binds the QP with the negotiated parameters (it enters RTS), feeds bytes that
  // arrived with the MPA exchange, and starts I/O.
  void start(const verbs::LinkParams& params, ConstByteSpan early_bytes);
  // Any thread: unbinds the QP now (it must not be used by this stream again) and closes.
  void abort();
  // Graceful disconnect: flush, close the write side, wait for the peer's close (bounded).
  void disconnect();
  int fd() const { return fd_.get(); }

  // verbs::QpLink (QP lock held): transmits and collects what the QP asks. The doorbell's
  // sends release the QP lock (Transmitter::SendMode::kReleasing). A post of kind kMayWait may
  // be left queued for the next poll (DoorbellBatching).
  void doorbell(verbs::QueuePair& qp, verbs::Doorbell kind) override REQUIRES(qp.mutex());
  void settle_send(verbs::QueuePair& qp) override REQUIRES(qp.mutex()) { tx_.settle_send(qp); }
  void revoke(verbs::QueuePair& qp, const proto::RevokedRegion& revoked, bool qp_in_use) override
      REQUIRES(qp.mutex());
  void receive_posted(verbs::QueuePair& qp) override REQUIRES(qp.mutex());

  // io::IoHandler (engine thread).
  void on_readable(std::optional<long> received) override;
  void on_writable() override;

  // Any thread, no locks held: receives and processes what the socket holds, exactly as the
  // engine thread would, and sends what waited for send space, unless another thread is inside
  // the stream (then returns false at once). claim: the caller will keep polling
  // (PollHandoff); now: when the poll began. Returns true if bytes were received or sent, or the
  // stream ended.
  bool poll_rx(bool claim, Clock::time_point now);

  // verbs::CqPollSource.
  bool cq_poll_rx(bool claim, verbs::PollTime now) override { return poll_rx(claim, now); }
  void cq_armed() override;

 private:
  // mu_ and the QP lock held: acts on what a receive (StreamReceiver::receive or take_watched)
  // found: the end of the stream ends it; bytes may have queued transmit work, which is sent.
  // Returns `out`.
  StreamReceiver::Outcome received_locked(StreamReceiver::Outcome out) REQUIRES(mu_, qp_->mutex());
  // QP lock held: tells the observer of an RTR the QP received, sends, and acts on what the
  // transmitter reports (nothing before start()). Runs after every call into the QP that may have
  // queued work. It never unbinds the QP (a failed send ends the stream from the engine thread).
  // kReleasing: only from the doorbell (Transmitter::SendMode).
  void pump_tx_locked(verbs::QueuePair& qp,
                      Transmitter::SendMode mode = Transmitter::SendMode::kUnderLock)
      REQUIRES(qp.mutex());
  void after_tx_locked(Transmitter::Outcome outcome);
  // The close began (a disconnect, a failed QP): the stream ends within kLinger whatever the peer
  // does, gracefully only if all was sent (docs/errors.md, "Waits a peer controls").
  void arm_close_deadline();
  // A receive found the end of the stream (0) or failed (-errno): the stream ends.
  void receive_ended_locked(long status) REQUIRES(mu_, qp_->mutex());
  // Watches for readability, naming the bounce buffer for the backend to receive into unless
  // maybe_readable, a large payload is next, or an application spins on the CQ.
  void watch_locked(bool maybe_readable) REQUIRES(mu_);
  // Engine thread: an application polls the stream, so its bytes are left to it
  // (PollHandoff::leave_to_poller, with the completions taken from the QP's CQs, which
  // poll_sources_ names once each).
  bool left_to_poller_locked(Clock::time_point now) REQUIRES(mu_);
  // Engine thread, mu_ held: receive and watch again unless an application claims the stream.
  void engine_receive_locked() REQUIRES(mu_);
  // Reception waits for a receive (StreamReceiver's `waiting`): no watch until it resumes, on
  // the engine thread, when a receive is posted, the QP stops receiving (its bytes are then
  // dropped) or the QP's wait limit passes (then the engine sends the Terminate for no buffer).
  // Meanwhile it looks at the socket now and then: a peer that closes ends the stream.
  void wait_for_receive_locked() REQUIRES(mu_, qp_->mutex());
  // Engine thread: looks at the wait. may_go_on: a receive was posted or the QP stopped
  // receiving (else the look the timer brings: the limit, and the peer's socket).
  void check_receive_wait(bool may_go_on);
  // Any thread, any lock: check_receive_wait(true) soon, on the engine thread.
  void end_wait_soon();
  void schedule_handback_locked() REQUIRES(mu_);
  // A poll of the thread that left this stream's posts queued: sends them. False if it could not
  // (another thread is inside the stream; the next poll tries again).
  bool send_left_queued();
  // This thread left posts of this stream queued: its next poll is to send them.
  void note_left_queued();
  friend void send_posts_left_queued();  // runtime/progress_activity.h
  // QP lock held: makes sure posts DoorbellBatching left queued go out by its deadline (one
  // engine timer at a time, batch_timer_), and the check that timer runs.
  void arm_batch_deadline_locked(verbs::QueuePair& qp) REQUIRES(qp.mutex());
  void check_batch_deadline();
  // Initiator only: the watch for a silent peer (silent_peer.h).
  void check_silent_peer(int round);
  // TCP_INFO into the QP's statistics every StreamStats::kTcpInfoPeriod, on the engine thread,
  // while the QP is bound.
  void sample_tcp_later();
  void unbind_qp_locked() REQUIRES(mu_, qp_->mutex());
  // The connection is gone: the messages TCP took whole are reported sent, the QP flushes the
  // rest (link_lost_locked) and is unbound.
  void end_link_locked(bool graceful, const std::string& why) REQUIRES(mu_, qp_->mutex());
  // end_link_locked, then the teardown, on the engine thread.
  void lost_locked(bool graceful, const std::string& why) REQUIRES(mu_, qp_->mutex());
  void teardown(bool graceful, const std::string& why);

  Engine& engine_;
  Engine& observer_engine_;
  io::Fd fd_;
  Mutex mu_;
  verbs::QueuePair* qp_ GUARDED_BY(mu_);
  std::weak_ptr<StreamObserver> observer_;
  std::unique_ptr<RdmapDriver> rdmap_;  // the QP lock; from start() until unbound
  StreamReceiver rx_ GUARDED_BY(mu_);   // and the QP lock
  Transmitter tx_;                      // the QP lock
  DoorbellBatching batching_;           // the QP lock
  std::uint64_t batch_timer_ = 0;       // the QP lock: the pending deadline check of batching_
  PollHandoff handoff_;
  StreamStats stats_ GUARDED_BY(mu_);

  bool watching_ GUARDED_BY(mu_) = false;             // a readiness watch is armed
  bool rx_waiting_ GUARDED_BY(mu_) = false;           // reception waits for a receive
  WaitClock wait_ GUARDED_BY(mu_);                    // since when, until when
  std::uint64_t wait_timer_ GUARDED_BY(mu_) = 0;      // its next check
  std::uint64_t handback_timer_ GUARDED_BY(mu_) = 0;  // pending hand-back check
  int handback_checks_ GUARDED_BY(mu_) = 0;           // checks in this hand-off period
  PollSourceRegistration poll_sources_ GUARDED_BY(mu_);
  bool counted_ GUARDED_BY(mu_) = false;  // counted in the engine's streams (send budget)
  bool torn_down_ = false;
  bool reset_on_close_ = false;  // the close deadline passed with bytes unsent
  std::uint64_t linger_timer_ = 0;
};

}  // namespace uwarp::runtime
