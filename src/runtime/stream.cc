#include "runtime/stream.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace uwarp::runtime {
namespace {
constexpr auto kLinger = std::chrono::seconds(3);
// Receives per call before the thread lets others run (each up to the bounce buffer's size, or
// a direct-placement round).
constexpr int kRxRounds = 16;

std::int64_t now_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

std::chrono::microseconds Stream::handoff() {
  static const std::chrono::microseconds value = [] {
    const char* v = std::getenv("UWARP_POLL_HANDOFF_US");
    return v != nullptr ? std::chrono::microseconds(std::strtol(v, nullptr, 10)) : kHandoff;
  }();
  return value;
}

std::size_t max_ulpdu_for_mss(std::size_t mss) {
  if (mss == 0) mss = 1448;
  return wire::max_ulpdu_for_fpdu_size(mss & ~std::size_t{7});
}

Stream::Stream(Engine& engine, io::Fd fd, verbs::QueuePair& qp,
               std::weak_ptr<StreamObserver> observer)
    : engine_(engine),
      fd_(std::move(fd)),
      qp_(&qp),
      observer_(std::move(observer)),
      bounce_(kBounceInitial) {}

Stream::~Stream() = default;

void Stream::start(const verbs::LinkParams& params, ConstByteSpan early_bytes) {
  if (Status s = engine_.backend().attach(fd_.get(), this); !s) {
    teardown(false, s.to_string());
    return;
  }
  std::lock_guard lock(mu_);
  std::lock_guard qlock(qp_->mutex());
  // Counted from here until unbinding the QP uncounts it; before the first transmit below, so
  // that the stream's first share counts itself.
  engine_.stream_started();
  counted_ = true;
  mss_ = io::tcp_mss(fd_.get());
  mss_checked_ = Clock::now();
  verbs::LinkParams p = params;
  p.max_ulpdu = max_ulpdu_for_mss(mss_);
  qp_->attach_link_locked(this, p);
  initiator_ = p.initiator;
  // Application threads polling the QP's CQs may receive from now on.
  std::shared_ptr<verbs::CqPollSource> self = shared_from_this();
  cqs_[0] = qp_->config().send_cq;
  cqs_[1] = qp_->config().recv_cq != cqs_[0] ? qp_->config().recv_cq : nullptr;
  for (verbs::CompletionQueue* cq : cqs_) {
    if (cq != nullptr) cq->add_source(self);
  }
  if (initiator_) check_silent_peer(0);
  if (!early_bytes.empty()) qp_->rx_feed_locked(early_bytes);
  pump_tx_locked();
  // Bytes may already wait in the socket (sent right after the MPA exchange): look at once.
  if (qp_ != nullptr) watch_locked(true);
}

void Stream::check_silent_peer(int round) {
  // Called with the locks held at start, then from a timer on the engine thread.
  constexpr auto kQuiet = std::chrono::milliseconds(200);
  constexpr int kRounds = 25;  // watch the first 5 s of the connection
  std::weak_ptr<Stream> weak = weak_from_this();
  engine_.add_timer(Clock::now() + kQuiet, [weak, round] {
    auto self = weak.lock();
    if (!self) return;
    std::lock_guard lock(self->mu_);
    if (self->qp_ == nullptr || self->rx_bytes_ > 0) return;  // the peer is alive: done
    std::lock_guard qlock(self->qp_->mutex());
    if (self->tx_bytes_ > 0) {
      self->qp_->queue_nudge_locked();  // once: the peer had something to answer
      return;
    }
    if (round + 1 < kRounds) self->check_silent_peer(round + 1);
  });
}

void Stream::refresh_fpdu_size_locked() {
  // Linux siw reads the MSS before each FPDU. A path MTU change is rare, and an FPDU sized for
  // the old MSS is still correct (TCP splits it; the peer reassembles), so the system call is
  // made at most every kMssRecheck: it was the most frequent one on the small-message path.
  const Clock::time_point now = Clock::now();
  if (now - mss_checked_ < kMssRecheck) return;
  mss_checked_ = now;
  const std::size_t mss = io::tcp_mss(fd_.get());
  if (mss != 0 && mss != mss_) {
    mss_ = mss;
    qp_->set_max_ulpdu_locked(max_ulpdu_for_mss(mss));
  }
}

void Stream::apply_send_share_locked() {
  const std::size_t lowat = engine_.notsent_lowat();
  if (lowat == notsent_lowat_) return;
  notsent_lowat_ = lowat;
  io::set_notsent_lowat(fd_.get(), lowat);  // best effort: without it TCP takes all it can
}

void Stream::tx_ready() {
  pump_tx_locked();
}

void Stream::rtr_received() {
  engine_.post([observer = observer_] {
    if (auto o = observer.lock()) o->stream_rtr_received();
  });
}

void Stream::shutdown_requested() {
  shutdown_requested_ = true;
  maybe_shut_write_locked();
}

void Stream::tx_abandon() {
  // While the backend sends from the batch it must not change; it is trimmed once that send
  // completes (the bytes of that one send may still be read after the flush completions).
  if (send_armed_) {
    abandon_pending_ = true;
    return;
  }
  batch_.abandon_after_current_fpdu();
}

void Stream::pump_tx_locked() {
  if (pumping_) {
    pump_again_ = true;
    return;
  }
  pumping_ = true;
  do {
    pump_again_ = false;
    while (qp_ != nullptr && !send_armed_ && !write_shut_ && !torn_down_ && send_error_ == 0) {
      if (batch_.empty()) {
        refresh_fpdu_size_locked();
        apply_send_share_locked();
        if (!qp_->tx_fill_locked(batch_)) break;
      }
      const long n = io::send_iov(fd_.get(), batch_.pending());
      if (n >= 0) {
        tx_bytes_ += static_cast<std::size_t>(n);
        batch_.consume(static_cast<std::size_t>(n));
        deliver_sent_locked();
        continue;
      }
      if (n == -EAGAIN || n == -EWOULDBLOCK) {
        send_armed_ = true;
        engine_.backend().send(fd_.get(), batch_.pending());
        break;
      }
      if (n == -EINTR) continue;
      send_failed_locked(n);
      break;
    }
  } while (pump_again_ && !torn_down_);
  pumping_ = false;
  maybe_shut_write_locked();
}

std::string Stream::send_failure() const {
  return std::string("send failed: ") + std::strerror(static_cast<int>(-send_error_));
}

void Stream::send_failed_locked(long error) {
  // The posting thread gets here through tx_ready with the QP lock only, and ending the stream
  // (lost_locked) needs mu_ as well: stop transmitting and let the engine thread end it.
  if (send_error_ != 0) return;
  send_error_ = error;
  std::weak_ptr<Stream> weak = weak_from_this();
  engine_.post([weak] {
    auto self = weak.lock();
    if (!self) return;
    std::lock_guard lock(self->mu_);
    if (self->qp_ == nullptr) return;  // ended meanwhile (the receive saw the reset too)
    std::lock_guard qlock(self->qp_->mutex());
    self->lost_locked(false, self->send_failure());
  });
}

void Stream::deliver_sent_locked() {
  std::uint64_t cookie;
  while (batch_.pop_sent(cookie)) qp_->tx_sent_locked(cookie);
}

void Stream::maybe_shut_write_locked() {
  if (!shutdown_requested_ || write_shut_ || send_armed_ || !batch_.empty() || pumping_) return;
  write_shut_ = true;
  io::shutdown_write(fd_.get());
  // Wait a bounded time for the peer to close its side too.
  std::weak_ptr<Stream> weak = weak_from_this();
  linger_timer_ = engine_.add_timer(Clock::now() + kLinger, [weak] {
    if (auto self = weak.lock()) self->teardown(true, "closed");
  });
}

void Stream::on_send(long result) {
  std::lock_guard lock(mu_);
  if (qp_ == nullptr) return;
  std::lock_guard qlock(qp_->mutex());
  send_armed_ = false;
  if (abandon_pending_ && result >= 0) {
    abandon_pending_ = false;
    batch_.consume(static_cast<std::size_t>(result));
    result = 0;
    batch_.abandon_after_current_fpdu();
  }
  if (result < 0) {
    send_error_ = result;  // mu_ is held here: the stream ends at once
    lost_locked(false, send_failure());
    return;
  }
  tx_bytes_ += static_cast<std::size_t>(result);
  batch_.consume(static_cast<std::size_t>(result));
  deliver_sent_locked();
  pump_tx_locked();
}

bool Stream::receive_direct_locked(long& status) {
  // Receive straight into the placement target while one is pending and large. Any call into
  // the QP may end the stream (a send failing inside it), so qp_ is checked on every round.
  bool progress = false;
  for (int i = 0; i < 64 && status > 0 && qp_ != nullptr; ++i) {
    const ByteSpan target = qp_->rx_direct_target_locked();
    if (target.size() < kDirectMin || !qp_->rx_open_locked()) break;
    large_payloads_ = true;
    const long n = engine_.backend().try_recv(fd_.get(), target);
    if (n > 0) {
      rx_bytes_ += static_cast<std::size_t>(n);
      qp_->rx_commit_locked(static_cast<std::size_t>(n));
      progress = true;
      if (static_cast<std::size_t>(n) < target.size()) status = -EAGAIN;  // a short read: empty
      continue;
    }
    if (n == -EINTR) continue;
    status = n;  // -EAGAIN: drained; -EBUSY: a watch's receive has them; 0: EOF; < 0: error
  }
  return progress;
}

bool Stream::receive_locked(bool* more) {
  bool progress = false;
  *more = false;
  long status = 1;
  for (int round = 0; qp_ != nullptr; ++round) {
    if (round == kRxRounds) {
      *more = true;
      return progress;
    }
    if (qp_->rx_open_locked()) progress |= receive_direct_locked(status);
    if (qp_ == nullptr) return true;  // the stream ended while the QP handled the bytes
    if (status > 0) {
      // With large payloads, read little into the bounce buffer (trailer, next header) so that
      // the payload itself goes straight to its place.
      const std::size_t want = large_payloads_ ? kSmallRead : bounce_.size();
      large_payloads_ = false;
      status = engine_.backend().try_recv(fd_.get(), ByteSpan(bounce_.data(), want));
      if (status == -EINTR) {
        status = 1;
        continue;
      }
      if (status > 0) {
        progress = true;
        if (!feed_bounce_locked(static_cast<std::size_t>(status), want)) return progress;
        continue;
      }
    }
    if (status == -EAGAIN || status == -EWOULDBLOCK || status == -EBUSY) return progress;
    if (qp_ == nullptr) return progress;  // the stream ended while the QP handled the bytes
    receive_ended_locked(status);
    return true;
  }
  return progress;
}

bool Stream::feed_bounce_locked(std::size_t n, std::size_t want) {
  rx_bytes_ += n;
  // After a Terminate (either way) incoming bytes are read and dropped until the peer closes.
  if (qp_->rx_open_locked()) qp_->rx_feed_locked(ConstByteSpan(bounce_.data(), n));
  if (n == bounce_.size() && bounce_.size() < kBounceSize) {
    bounce_.resize(bounce_.size() * 2);  // receives into it only happen under mu_
  }
  // A short read emptied the socket (io::IoBackend::watch_readable): no receive that would only
  // say EAGAIN.
  return n >= want;
}

void Stream::receive_ended_locked(long status) {
  if (status == 0 && send_error_ != 0) {
    // The send that failed took the socket's error (a reset): the end of the stream is not an
    // orderly close.
    lost_locked(false, send_failure());
    return;
  }
  if (status == 0) {
    // An orderly close only between FPDUs; a stream cut inside one is a failure.
    // After a Terminate the stream was only being drained: its end is the expected close.
    const bool terminated = !qp_->rx_open_locked();
    const bool graceful = terminated || qp_->rx_at_boundary_locked();
    lost_locked(graceful, terminated ? "closed after a Terminate"
                          : graceful ? "the peer closed the connection"
                                     : "the peer closed the connection in the middle of an FPDU");
    return;
  }
  lost_locked(false, std::string("receive failed: ") + std::strerror(static_cast<int>(-status)));
}

void Stream::watch_locked(bool maybe_readable) {
  if (torn_down_) return;
  watching_ = true;
  handback_checks_ = 0;
  ByteSpan into;
  // Not while a payload is on its way to its place: the handler receives it there directly
  // (one copy), where the watch's receive would take it through the bounce buffer. Nor while
  // an application spins on the CQ: the bytes the watch received would wait for this thread,
  // while a readiness watch leaves them to the poller.
  if (!maybe_readable && !direct_pending_ && !application_spinning()) {
    // As receive_locked sizes its reads into the bounce buffer.
    watch_want_ = large_payloads_ ? kSmallRead : bounce_.size();
    large_payloads_ = false;
    into = ByteSpan(bounce_.data(), watch_want_);
  }
  engine_.backend().watch_readable(fd_.get(), maybe_readable, into);
}

bool Stream::application_spinning() const {
  const std::int64_t last_poll = last_poll_ns_.load(std::memory_order_relaxed);
  return now_ns(Clock::now()) - last_poll < std::chrono::nanoseconds(kSpinGap).count();
}

bool Stream::take_watched_locked(long received) {
  std::lock_guard qlock(qp_->mutex());
  if (received == -EINTR || received == -EAGAIN || received == -EWOULDBLOCK) return true;
  if (received <= 0) {
    receive_ended_locked(received);
    return false;
  }
  const bool more = feed_bounce_locked(static_cast<std::size_t>(received), watch_want_);
  // The bytes may have queued transmit work (a Read Response, a Terminate) or freed the window.
  if (qp_ != nullptr) pump_tx_locked();
  if (qp_ != nullptr) direct_pending_ = direct_target_pending_locked();
  return more;
}

bool Stream::claimed(Clock::time_point now) const {
  const std::int64_t at = claimed_at_ns_.load(std::memory_order_relaxed);
  return at != 0 && now_ns(now) - at < std::chrono::nanoseconds(handoff()).count();
}

void Stream::engine_receive_locked() {
  std::lock_guard qlock(qp_->mutex());
  bool more = false;
  // A receive may have queued transmit work (a Read Response, a Terminate) or freed the
  // window for it.
  if (receive_locked(&more) && qp_ != nullptr) pump_tx_locked();
  if (qp_ == nullptr) return;
  direct_pending_ = direct_target_pending_locked();
  watch_locked(more);
}

bool Stream::direct_target_pending_locked() {
  return qp_->rx_open_locked() && qp_->rx_direct_target_locked().size() >= kDirectMin;
}

void Stream::on_readable(std::optional<long> received) {
  std::lock_guard lock(mu_);
  watching_ = false;
  if (qp_ == nullptr) return;
  // The backend may have received the first bytes already; after a short receive the socket
  // is empty and only needs watching again.
  const bool maybe_more = !received || take_watched_locked(*received);
  if (qp_ == nullptr) return;
  if (claimed(Clock::now())) {
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

void Stream::schedule_handback_locked() {
  if (handback_timer_ != 0) return;
  // First check when the claim seen lapses; while the application keeps polling, every
  // kRecheck (each check is a wake-up that takes the core from a poller for a moment).
  const std::int64_t at = claimed_at_ns_.load(std::memory_order_relaxed);
  const auto lapse = Clock::time_point(std::chrono::nanoseconds(at)) + handoff();
  const auto due = handback_checks_++ == 0 ? lapse : std::max(lapse, Clock::now() + kRecheck);
  std::weak_ptr<Stream> weak = weak_from_this();
  handback_timer_ = engine_.add_timer(due, [weak] {
    auto self = weak.lock();
    if (!self) return;
    std::lock_guard lock(self->mu_);
    self->handback_timer_ = 0;
    if (self->qp_ == nullptr || self->watching_) return;  // handed back already (CQ armed)
    if (self->claimed(Clock::now())) {
      self->schedule_handback_locked();  // still polled: look again later
      return;
    }
    self->engine_receive_locked();
  });
}


bool Stream::poll_rx(bool claim) {
  if (claim) {
    // Only a poll that follows another one closely claims the stream: an application that
    // spins on the CQ, not one that polls now and then and waits on memory meanwhile (as
    // ib_write_lat does; it needs the engine thread to place its data).
    const std::int64_t now = now_ns(Clock::now());
    const std::int64_t prev = last_poll_ns_.exchange(now, std::memory_order_relaxed);
    if (now - prev < std::chrono::nanoseconds(kSpinGap).count()) {
      claimed_at_ns_.store(now, std::memory_order_relaxed);
    }
  }
  std::unique_lock lock(mu_, std::try_to_lock);
  // While the backend receives for an armed watch, the bytes come with on_readable (receives
  // here say -EBUSY meanwhile).
  if (!lock.owns_lock() || qp_ == nullptr) return false;
  std::lock_guard qlock(qp_->mutex());
  bool more = false;
  const bool progress = receive_locked(&more);
  if (progress && qp_ != nullptr) pump_tx_locked();
  return progress;
}

void Stream::cq_armed() {
  // The application is going to sleep: the engine thread receives again, at once.
  claimed_at_ns_.store(0, std::memory_order_relaxed);
  last_poll_ns_.store(0, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  if (qp_ == nullptr || watching_) return;
  watch_locked(true);
}

void Stream::unbind_qp_locked() {
  if (counted_) engine_.stream_ended();
  counted_ = false;
  for (verbs::CompletionQueue*& cq : cqs_) {
    if (cq != nullptr) cq->remove_source(this);
    cq = nullptr;
  }
  qp_->detach_link_locked();
  qp_ = nullptr;
}

void Stream::lost_locked(bool graceful, const std::string& why) {
  qp_->link_lost_locked(graceful, why);
  unbind_qp_locked();
  auto self = shared_from_this();
  engine_.post([self, graceful, why] { self->teardown(graceful, why); });
}

void Stream::abort() {
  {
    std::lock_guard lock(mu_);
    if (qp_ != nullptr) {
      std::lock_guard qlock(qp_->mutex());
      unbind_qp_locked();
    }
  }
  auto self = shared_from_this();
  engine_.post([self] { self->teardown(false, "aborted"); });
}

void Stream::disconnect() {
  std::lock_guard lock(mu_);
  if (qp_ == nullptr) return;
  std::lock_guard qlock(qp_->mutex());
  qp_->disconnect_locked();
}

void Stream::teardown(bool graceful, const std::string& why) {
  // Engine thread.
  {
    std::lock_guard lock(mu_);
    if (torn_down_) return;
    torn_down_ = true;
    if (qp_ != nullptr) {
      std::lock_guard qlock(qp_->mutex());
      qp_->link_lost_locked(graceful, why);
      unbind_qp_locked();
    }
    if (handback_timer_ != 0) engine_.cancel_timer(handback_timer_);
    handback_timer_ = 0;
  }
  if (linger_timer_ != 0) engine_.cancel_timer(linger_timer_);
  engine_.backend().detach(fd_.get());
  fd_.reset();
  if (auto o = observer_.lock()) o->stream_closed(graceful, why);
  observer_.reset();
}

}  // namespace uwarp::runtime
