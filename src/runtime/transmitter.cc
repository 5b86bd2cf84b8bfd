#include "runtime/transmitter.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/pcap_recorder.h"
#include "io/race_annotations.h"
#include "stats/count.h"
#include "verbs/revocation.h"

namespace uwarp::runtime {

std::size_t max_ulpdu_for_mss(std::size_t mss) {
  if (mss == 0) mss = 1448;
  return wire::max_ulpdu_for_fpdu_size(mss & ~std::size_t{7});
}

std::size_t max_ulpdu_for(std::size_t mss, std::size_t fpdu_size) {
  return std::max(max_ulpdu_for_mss(mss), wire::max_ulpdu_for_fpdu_size(fpdu_size));
}

Transmitter::Transmitter(Engine& engine, int fd) : engine_(engine), fd_(fd) {}

std::size_t Transmitter::first_max_ulpdu(std::size_t fpdu_size) {
  fpdu_size_ = fpdu_size;
  mss_ = io::tcp_mss(fd_);
  mss_checked_ = Clock::now();
  return max_ulpdu_for(mss_, fpdu_size_);
}

void Transmitter::refresh_fpdu_size(RdmapDriver& rdmap) {
  // A path MTU change is rare, and an FPDU sized for the old MSS is still correct (TCP splits
  // it; the peer reassembles), so the system call is made at most every kMssRecheck: it was the
  // most frequent one on the small-message path.
  const Clock::time_point now = Clock::now();
  if (now - mss_checked_ < kMssRecheck) return;
  mss_checked_ = now;
  const std::size_t mss = io::tcp_mss(fd_);
  if (mss != 0 && mss != mss_) {
    mss_ = mss;
    rdmap.set_max_ulpdu(max_ulpdu_for(mss, fpdu_size_));
  }
}

void Transmitter::apply_send_share() {
  const std::size_t lowat = engine_.notsent_lowat();
  if (lowat == notsent_lowat_) return;
  notsent_lowat_ = lowat;
  io::set_notsent_lowat(fd_, lowat);  // best effort: without it TCP takes all it can
}

Transmitter::Outcome Transmitter::pump(verbs::QueuePair& qp, RdmapDriver& rdmap, SendMode mode) {
  if (!settle(qp, /*wait=*/false)) return Outcome::kNone;  // its thread carries on
  report_sent(qp, rdmap);
  fill_and_send(qp, rdmap, mode);
  return finish();
}

void Transmitter::collect(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  const verbs::TxRequests r = rdmap.take_requests(qp);
  if (r.abandon) {
    abandon();
    qp_failed_ = true;  // the stream closes once its Terminate (if any) is sent
  }
  if (r.shutdown) shutdown_requested_ = true;
  if (r.sweep) {
    // Revocation visits every QP under its own lock: not from here, where this one's is held.
    engine_.post([&device = qp.device(), qp_num = qp.qp_num()] { verbs::sweep_invalidations(device, qp_num); });
  }
}

void Transmitter::fill_and_send(verbs::QueuePair& qp, RdmapDriver& rdmap, SendMode mode) {
  while (!write_watched_ && !write_shut_ && !stopped_ && error_ == 0) {
    if (batch_.empty()) {
      refresh_fpdu_size(rdmap);
      apply_send_share();
      const bool filled = rdmap.fill(qp, batch_);
      collect(qp, rdmap);  // a request whose memory failed its check failed the QP meanwhile
      if (!filled) return;
      stats::add(qp.counters(), stats::Counter::kTxFpdus, batch_.fpdus());
    }
    if (mode == SendMode::kReleasing) {
      if (!send_releasing(qp)) return;
    } else {
      apply_result(qp, io::send_iov(fd_, batch_.pending()));
    }
    report_sent(qp, rdmap);
  }
}

bool Transmitter::send_releasing(verbs::QueuePair& qp) {
  const std::span<const iovec> pending = batch_.pending();
  unsettled_ = true;
  wire_mu_.lock();
  qp.mutex().unlock();
  const long n = io::send_iov(fd_, pending);
  if constexpr (io::kRaceAnnotations) {
    // The batch's own bytes and its iovecs, read without the QP lock: no thread may change them
    // before the send is settled, which TSan checks.
    io::annotate_sent_bytes(pending.data(), pending.size_bytes());
    for (const iovec& v : pending) {
      if (batch_.owns(v.iov_base)) io::annotate_sent_bytes(v.iov_base, v.iov_len);
    }
  }
  wire_result_ = n;
  wire_mu_.unlock();
  qp.mutex().lock();
  // Meanwhile a thread may have settled this send (and made one of its own), or unbound the QP.
  return settle(qp, /*wait=*/false) && !stopped_;
}

bool Transmitter::settle(verbs::QueuePair& qp, bool wait) {
  if (!unsettled_) return true;
  if (wait) {
    wire_mu_.lock();
  } else if (!wire_mu_.try_lock()) {
    return false;
  }
  const long n = wire_result_;
  wire_mu_.unlock();
  unsettled_ = false;
  apply_result(qp, n);
  return true;
}

void Transmitter::apply_result(verbs::QueuePair& qp, long n) {
  if (n >= 0) {
    io::pcap_sent(fd_, batch_.pending(), static_cast<std::size_t>(n));
    bytes_ += static_cast<std::size_t>(n);
    stats::add(qp.counters(), stats::Counter::kTxBytes, static_cast<std::size_t>(n));
    batch_.consume(static_cast<std::size_t>(n));
    return;
  }
  if (n == -EAGAIN || n == -EWOULDBLOCK) {
    // The socket is full: send again once it has space (no system call reads the batch's
    // memory meanwhile).
    write_watched_ = true;
    if (!watch_armed_) {  // once per stall: a polling thread's retries (poll_send) add none
      watch_armed_ = true;
      stats::add(qp.counters(), stats::Counter::kSendStalls);
      engine_.backend().watch_writable(fd_);
    }
    return;
  }
  if (n == -EINTR) return;  // sent again
  error_ = n;
  failed_now_ = true;
}

void Transmitter::report_sent(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  std::uint64_t cookie;
  while (batch_.pop_sent(cookie)) rdmap.sent(qp, cookie);
  collect(qp, rdmap);  // our Terminate has gone: close
}

Transmitter::Outcome Transmitter::on_writable(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  watch_armed_ = false;
  write_watched_ = false;
  return pump(qp, rdmap);
}

Transmitter::Outcome Transmitter::poll_send(verbs::QueuePair& qp, RdmapDriver& rdmap) {
  if (!write_watched_) return Outcome::kNone;
  write_watched_ = false;
  return pump(qp, rdmap);
}

void Transmitter::abandon() {
  // Called with no send unsettled, so no system call holds the batch: it is trimmed at once.
  batch_.abandon_after_current_fpdu();
}

Transmitter::Outcome Transmitter::finish() {
  // Another thread's send is under way (it finishes), or the QP was unbound meanwhile.
  if (unsettled_ || stopped_) return Outcome::kNone;
  if (failed_now_) {
    failed_now_ = false;
    return Outcome::kFailed;
  }
  if (error_ != 0) return Outcome::kNone;
  if (shutdown_requested_ && !write_shut_ && !write_watched_ && batch_.empty()) {
    write_shut_ = true;
    io::shutdown_write(fd_);
  }
  return Outcome::kNone;
}

std::string Transmitter::failure() const {
  return std::string("send failed: ") + std::strerror(static_cast<int>(-error_));
}

}  // namespace uwarp::runtime
