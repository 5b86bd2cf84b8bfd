#include "runtime/stream.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "io/receive_buffer.h"
#include "io/socket.h"
#include "runtime/progress_activity.h"
#include "runtime/silent_peer.h"
#include "runtime/stream_end.h"
#include "stats/count.h"

namespace uwarp::runtime {
namespace {

constexpr auto kLinger = std::chrono::seconds(3);

// Whether this thread has polled a CQ, and the streams whose posts it left queued
// (DoorbellBatching): they go out at its next poll (send_posts_left_queued).
thread_local bool t_polls_cqs = false;
// One entry per stream (so at most as many as there are streams), never keeping one alive.
thread_local std::vector<std::pair<const Stream*, std::weak_ptr<Stream>>> t_left_queued;

}  // namespace

Stream::Stream(Engine& engine, Engine& observer_engine, io::Fd fd, verbs::QueuePair& qp,
               std::weak_ptr<StreamObserver> observer)
    : engine_(engine),
      observer_engine_(observer_engine),
      fd_(std::move(fd)),
      qp_(&qp),
      observer_(std::move(observer)),
      rx_(engine.backend(), fd_.get()),
      tx_(engine, fd_.get()) {}

void Stream::start(const verbs::LinkParams& params, ConstByteSpan early_bytes) {
  // Before the data: a short path's receive queue stays within the caches (io/receive_buffer.h).
  if (io::TcpInfo info; io::tcp_info(fd_.get(), info)) {
    io::bound_short_path_receive_buffer(fd_.get(), info.rtt_us);
  }
  if (Status s = engine_.backend().attach(fd_.get(), this); !s) {
    teardown(false, s.to_string());
    return;
  }
  MutexLock lock(mu_);
  MutexLock qlock(qp_->mutex());
  // Counted from here until unbinding the QP uncounts it; before the first transmit below, so
  // that the stream's first share counts itself.
  engine_.stream_started();
  counted_ = true;
  verbs::LinkParams p = params;
  p.max_ulpdu = tx_.first_max_ulpdu(p.fpdu_size);
  rdmap_ = std::make_unique<RdmapDriver>(*qp_, this, p);  // the QP enters RTS
  pump_tx_locked(*qp_);  // our RTR, and requests posted before the connection was up
  // Application threads polling the QP's CQs may receive from now on.
  poll_sources_.add(qp_->config(), shared_from_this());
  if (p.initiator) check_silent_peer(0);
  stats_.connected(*qp_, fd_.get());
  sample_tcp_later();
  if (!early_bytes.empty() && rx_.feed_early(*qp_, *rdmap_, early_bytes)) wait_for_receive_locked();
  pump_tx_locked(*qp_);
  // Bytes may already wait in the socket (sent right after the MPA exchange): look at once.
  watch_locked(true);
}

void Stream::check_silent_peer(int round) {
  // Called with the locks held at start, then from a timer on the engine thread.
  std::weak_ptr<Stream> weak = weak_from_this();
  engine_.add_timer(Clock::now() + kSilentPeerQuiet, [weak, round] {
    auto self = weak.lock();
    if (!self) return;
    MutexLock lock(self->mu_);
    if (self->qp_ == nullptr) return;
    MutexLock qlock(self->qp_->mutex());
    const SilentPeerStep step = silent_peer_step(round, self->rx_.bytes(), self->tx_.bytes());
    if (step == SilentPeerStep::kLookAgain) self->check_silent_peer(round + 1);
    if (step != SilentPeerStep::kNudge) return;
    self->rdmap_->queue_nudge(*self->qp_);
    self->pump_tx_locked(*self->qp_);
  });
}

void Stream::sample_tcp_later() {
  engine_.add_timer(Clock::now() + StreamStats::kTcpInfoPeriod, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    MutexLock lock(self->mu_);
    if (self->qp_ == nullptr) return;
    self->stats_.sample_tcp(*self->qp_, self->fd_.get());
    self->sample_tcp_later();
  });
}

void send_posts_left_queued() {
  t_polls_cqs = true;
  if (t_left_queued.empty()) return;
  std::erase_if(t_left_queued, [](const auto& entry) {
    const std::shared_ptr<Stream> s = entry.second.lock();
    return s == nullptr || s->send_left_queued();
  });
}

void Stream::note_left_queued() {
  const auto it = std::find_if(t_left_queued.begin(), t_left_queued.end(),
                               [this](const auto& entry) { return entry.first == this; });
  // An entry for this address may be a stream that ended, whose memory this one took.
  if (it == t_left_queued.end()) {
    t_left_queued.emplace_back(this, weak_from_this());
  } else {
    it->second = weak_from_this();
  }
}

bool Stream::send_left_queued() {
  if (!mu_.try_lock()) return false;  // the engine thread is inside: the next poll tries again
  MutexLock lock(mu_, std::adopt_lock);
  if (qp_ == nullptr) return true;
  MutexLock qlock(qp_->mutex());
  if (batching_.deferred()) pump_tx_locked(*qp_);
  return true;
}

void Stream::doorbell(verbs::QueuePair& qp, verbs::Doorbell kind) {
  // Only a thread that polls CQs flushes what it left queued.
  const bool may_wait = kind == verbs::Doorbell::kMayWait && t_polls_cqs;
  if (may_wait) {
    const Clock::time_point now = Clock::now();
    switch (batching_.ring(now)) {
      case DoorbellBatching::Ring::kDeferAndArm:
        note_left_queued();
        arm_batch_deadline_locked(qp);
        stats::add(qp.counters(), stats::Counter::kPostsLeftForPoll);
        return;
      case DoorbellBatching::Ring::kDefer:
        stats::add(qp.counters(), stats::Counter::kPostsLeftForPoll);
        return;
      case DoorbellBatching::Ring::kSend:
        break;
    }
  }
  // The sends release the QP lock, and another thread may unbind the QP and let the stream go
  // meanwhile: it lives until this call returns. The application keeps the QP alive across its
  // own call.
  const std::shared_ptr<Stream> keep = shared_from_this();
  pump_tx_locked(qp, Transmitter::SendMode::kReleasing);
  if (may_wait) batching_.doorbell_ended(Clock::now());
}

void Stream::arm_batch_deadline_locked(verbs::QueuePair&) {
  if (batch_timer_ != 0) return;  // it looks again when it fires
  batch_timer_ = engine_.add_timer(batching_.deadline(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->check_batch_deadline();
  });
}

void Stream::check_batch_deadline() {
  MutexLock lock(mu_);
  if (qp_ == nullptr) return;
  verbs::QueuePair& qp = *qp_;
  MutexLock qlock(qp.mutex());
  batch_timer_ = 0;
  if (batching_.deadline_passed(Clock::now())) {
    stats::add(qp.counters(), stats::Counter::kBatchDeadlines);
    pump_tx_locked(qp);  // no poll came: the posts go now (batching may back off)
  } else if (batching_.deferred()) {
    arm_batch_deadline_locked(qp);  // a later burst's posts: their own deadline
  }
}

void Stream::pump_tx_locked(verbs::QueuePair& qp, Transmitter::SendMode mode) {
  if (!rdmap_) return;  // not started yet
  batching_.sent();     // whatever posts were left queued go now
  if (qp.take_rtr_received_locked()) {
    observer_engine_.post([observer = observer_] {
      if (auto o = observer.lock()) o->stream_rtr_received();
    });
  }
  const Transmitter::Outcome outcome = tx_.pump(qp, *rdmap_, mode);
  if (!rdmap_) return;  // unbound while a send ran without the QP lock
  after_tx_locked(outcome);
  if (rdmap_->take_wait_abandoned()) end_wait_soon();  // the QP failed: receive and drop
}

void Stream::revoke(verbs::QueuePair& qp, const proto::RevokedRegion& revoked, bool qp_in_use) {
  if (!rdmap_) return;  // not started: nothing was accessed
  rdmap_->revoke(qp, revoked, qp_in_use || tx_.reads_from(qp, revoked));
  // The QP's abandon trims the batch (the rest of an FPDU partly sent is copied now, while the
  // memory is still the application's); then the Terminate goes out.
  pump_tx_locked(qp);
}

void Stream::receive_posted(verbs::QueuePair&) { end_wait_soon(); }

void Stream::end_wait_soon() {
  // The QP lock may be held, and mu_ comes first: the engine thread ends the wait.
  engine_.post([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->check_receive_wait(true);
  });
}

void Stream::wait_for_receive_locked() {
  if (!rx_waiting_) {
    wait_.begin(Clock::now(), qp_->receive_wait_limit_locked());
    // A post to an SRQ takes no QP lock: it wakes the wait itself, and one that came before
    // this registration is seen here.
    qp_->wake_on_shared_post_locked([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->end_wait_soon();
    });
    if (qp_->has_posted_receive_locked()) end_wait_soon();
  }
  rx_waiting_ = true;
  if (wait_timer_ != 0) return;
  wait_timer_ = engine_.add_timer(wait_.next_look(Clock::now()), [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->check_receive_wait(false);
  });
}

void Stream::check_receive_wait(bool may_go_on) {
  MutexLock lock(mu_);
  if (!may_go_on) wait_timer_ = 0;
  if (qp_ == nullptr || !rx_waiting_) return;
  {
    MutexLock qlock(qp_->mutex());
    // The peer gives up first (it disconnects): as on InfiniBand, the connection ends.
    if (!may_go_on && io::peer_closed(fd_.get())) {
      lost_locked(false, "the peer closed the connection while a message waited for a receive");
      return;
    }
    const bool limit_passed = wait_.limit_passed(Clock::now());
    if (!may_go_on && !limit_passed && qp_->receiving_locked() &&
        !qp_->has_posted_receive_locked()) {
      wait_for_receive_locked();  // look again later
      return;
    }
    if (limit_passed) qp_->receive_wait_expired_locked();
    if (qp_->receiving_locked()) rdmap_->resume_rx(*qp_);
  }
  if (wait_timer_ != 0) engine_.cancel_timer(wait_timer_);
  wait_timer_ = 0;
  rx_waiting_ = false;
  engine_receive_locked();  // the held bytes first; it waits again or watches
}

void Stream::after_tx_locked(Transmitter::Outcome outcome) {
  if (tx_.closing() && linger_timer_ == 0) arm_close_deadline();
  if (outcome != Transmitter::Outcome::kFailed) return;
  // The posting thread gets here with the QP lock only, and ending the stream (lost_locked)
  // needs mu_ as well: the engine thread ends it.
  std::weak_ptr<Stream> weak = weak_from_this();
  engine_.post([weak] {
    auto self = weak.lock();
    if (!self) return;
    MutexLock lock(self->mu_);
    if (self->qp_ == nullptr) return;  // ended meanwhile (the receive saw the reset too)
    MutexLock qlock(self->qp_->mutex());
    self->lost_locked(false, self->tx_.failure());
  });
}

void Stream::arm_close_deadline() {
  std::weak_ptr<Stream> weak = weak_from_this();
  linger_timer_ = engine_.add_timer(Clock::now() + kLinger, [weak] {
    auto self = weak.lock();
    if (!self) return;
    bool shut = false;
    {
      MutexLock lock(self->mu_);
      if (self->qp_ == nullptr) return;  // ended otherwise meanwhile
      MutexLock qlock(self->qp_->mutex());
      shut = self->tx_.write_shut();
    }
    // Bytes (or our FIN) the peer did not take: a reset tells it at once (a FIN would wait
    // behind them, and a peer that waits for a receive never reads them).
    self->reset_on_close_ = !shut || io::unacknowledged(self->fd_.get()) > 0;
    self->teardown(shut, shut ? "closed (the peer did not close its side in time)"
                              : "closed before the peer took the queued bytes (its window stayed "
                                "shut)");
  });
}

void Stream::on_writable() {
  MutexLock lock(mu_);
  if (qp_ == nullptr) return;
  MutexLock qlock(qp_->mutex());
  const Transmitter::Outcome outcome = tx_.on_writable(*qp_, *rdmap_);
  if (outcome == Transmitter::Outcome::kFailed) {
    lost_locked(false, tx_.failure());  // mu_ is held here: the stream ends at once
    return;
  }
  after_tx_locked(outcome);
}

StreamReceiver::Outcome Stream::received_locked(StreamReceiver::Outcome out) {
  if (out.progress) stats_.received(*qp_, rx_.bytes(), rdmap_->fpdus_received());
  if (out.ended) {
    receive_ended_locked(out.status);
  } else if (out.progress) {
    // The bytes may have queued transmit work (a Read Response, a Terminate) or freed the
    // window for it.
    pump_tx_locked(*qp_);
  }
  return out;
}

void Stream::receive_ended_locked(long status) {
  // A send made without the QP lock may have taken the socket's error (the peer's reset, which
  // then leaves the receive only the end of the stream): its result decides whether this end
  // was orderly, so it is settled first.
  tx_.settle_send(*qp_);
  const RxStopped stopped = rdmap_->terminated()          ? RxStopped::kByTerminate
                            : !qp_->receiving_locked() ? RxStopped::kByQp
                                                       : RxStopped::kNo;
  const StreamEnd end = judge_stream_end(status, tx_.error(), stopped, rdmap_->rx_at_boundary());
  lost_locked(end.graceful, end.why);
}

void Stream::watch_locked(bool maybe_readable) {
  // One watch at a time (io::IoBackend::watch_readable). One may still be armed here: a poller
  // emptied the socket under it and then waited for a receive, and the engine resumed.
  if (torn_down_ || rx_waiting_ || watching_) return;
  watching_ = true;
  handback_checks_ = 0;
  // Not while an application spins on the CQ: the bytes the watch received would wait for
  // this thread, while a readiness watch leaves them to the poller.
  const ByteSpan into = maybe_readable || handoff_.spinning() ? ByteSpan{} : rx_.watch_buffer();
  engine_.backend().watch_readable(fd_.get(), maybe_readable, into);
}

void Stream::engine_receive_locked() {
  MutexLock qlock(qp_->mutex());
  const StreamReceiver::Outcome out = received_locked(rx_.receive(*qp_, *rdmap_));
  if (qp_ == nullptr) return;
  if (out.waiting) return wait_for_receive_locked();
  rx_.note_direct_target(*qp_, *rdmap_);
  watch_locked(out.more);
}

void Stream::on_readable(std::optional<long> received) {
  MutexLock lock(mu_);
  watching_ = false;
  if (qp_ == nullptr) return;
  // The backend may have received the first bytes already; after a short receive the socket
  // is empty and only needs watching again.
  bool maybe_more = true;
  if (received) {
    MutexLock qlock(qp_->mutex());
    const StreamReceiver::Outcome out = received_locked(rx_.take_watched(*qp_, *rdmap_, *received));
    if (qp_ != nullptr && out.waiting) return wait_for_receive_locked();
    maybe_more = out.more;
    if (!out.ended && out.progress) rx_.note_direct_target(*qp_, *rdmap_);
  }
  if (qp_ == nullptr) return;
  if (left_to_poller_locked(Clock::now())) {
    // An application is polling this stream: leave the bytes to it, stop watching (no more
    // wake-ups for this socket) and check back once its claim may have lapsed.
    schedule_handback_locked();
    return;
  }
  if (maybe_more) {
    engine_receive_locked();
  } else {
    watch_locked(false);
  }
}

bool Stream::left_to_poller_locked(Clock::time_point now) {
  return handoff_.leave_to_poller(now, poll_sources_.completions_taken());
}

void Stream::schedule_handback_locked() {
  if (handback_timer_ != 0) return;
  const Clock::time_point due = handoff_.next_check(handback_checks_++);
  std::weak_ptr<Stream> weak = weak_from_this();
  handback_timer_ = engine_.add_timer(due, [weak] {
    auto self = weak.lock();
    if (!self) return;
    MutexLock lock(self->mu_);
    self->handback_timer_ = 0;
    if (self->qp_ == nullptr || self->watching_) return;  // handed back already (CQ armed)
    if (self->left_to_poller_locked(Clock::now())) {
      self->schedule_handback_locked();  // still polled: look again later
      return;
    }
    self->engine_receive_locked();
  });
}

bool Stream::poll_rx(bool claim, Clock::time_point now) {
  handoff_.polled(claim, now);
  if (!mu_.try_lock()) return false;  // another thread is inside the stream
  MutexLock lock(mu_, std::adopt_lock);
  if (qp_ == nullptr) return false;
  MutexLock qlock(qp_->mutex());
  const StreamReceiver::Outcome out = received_locked(rx_.receive(*qp_, *rdmap_));
  if (qp_ == nullptr) return out.progress;
  if (out.waiting) wait_for_receive_locked();
  // And what waits: posts left for this poll (DoorbellBatching), or send space (Read
  // Responses, Writes posted while the socket was full).
  const std::uint64_t sent_before = tx_.bytes();
  if (batching_.deferred()) {
    pump_tx_locked(*qp_);
  } else {
    after_tx_locked(tx_.poll_send(*qp_, *rdmap_));
  }
  const bool progress = out.progress || tx_.bytes() != sent_before;
  if (claim && progress) handoff_.busy_until(now, Clock::now());
  return progress;
}

void Stream::cq_armed() {
  // The application is going to sleep: the engine thread receives again, at once.
  handoff_.release();
  MutexLock lock(mu_);
  if (qp_ == nullptr) return;
  {
    MutexLock qlock(qp_->mutex());
    if (batching_.deferred()) pump_tx_locked(*qp_);  // posts left for a poll that will not come
  }
  if (watching_) return;
  watch_locked(true);
}

void Stream::unbind_qp_locked() {
  tx_.stop(*qp_);  // no more sends, and none still reading the QP's memory
  if (counted_) engine_.stream_ended();
  counted_ = false;
  poll_sources_.remove(this);
  if (rdmap_) stats_.sample_tcp(*qp_, fd_.get());  // the connection's last TCP_INFO
  rdmap_.reset();
  qp_->detach_link_locked();
  qp_ = nullptr;
}

void Stream::end_link_locked(bool graceful, const std::string& why) {
  // Messages TCP took whole completed; the QP flushes only the rest.
  if (rdmap_) tx_.settle_and_report(*qp_, *rdmap_);
  qp_->link_lost_locked(graceful, why);
  unbind_qp_locked();
}

void Stream::lost_locked(bool graceful, const std::string& why) {
  end_link_locked(graceful, why);
  auto self = shared_from_this();
  engine_.post([self, graceful, why] { self->teardown(graceful, why); });
}

void Stream::abort() {
  {
    MutexLock lock(mu_);
    if (qp_ != nullptr) {
      MutexLock qlock(qp_->mutex());
      unbind_qp_locked();
    }
  }
  auto self = shared_from_this();
  engine_.post([self] { self->teardown(false, "aborted"); });
}

void Stream::disconnect() {
  MutexLock lock(mu_);
  if (qp_ == nullptr) return;
  MutexLock qlock(qp_->mutex());
  qp_->disconnect_locked();
  pump_tx_locked(*qp_);
}

void Stream::teardown(bool graceful, const std::string& why) {
  // Engine thread.
  {
    MutexLock lock(mu_);
    if (torn_down_) return;
    torn_down_ = true;
    if (qp_ != nullptr) {
      MutexLock qlock(qp_->mutex());
      end_link_locked(graceful, why);
    }
    if (handback_timer_ != 0) engine_.cancel_timer(handback_timer_);
    if (wait_timer_ != 0) engine_.cancel_timer(wait_timer_);
    handback_timer_ = wait_timer_ = 0;
  }
  if (linger_timer_ != 0) engine_.cancel_timer(linger_timer_);
  engine_.backend().detach(fd_.get());
  if (reset_on_close_) {
    io::close_with_reset(std::move(fd_));
  } else {
    fd_.reset();
  }
  if (&observer_engine_ == &engine_) {
    if (auto o = observer_.lock()) o->stream_closed(graceful, why);
  } else {
    observer_engine_.post([observer = observer_, graceful, why] {
      if (auto o = observer.lock()) o->stream_closed(graceful, why);
    });
  }
  observer_.reset();
}

}  // namespace uwarp::runtime
