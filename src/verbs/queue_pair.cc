// QueuePair: application calls, the verbs state machine, completions and flush rules.
// What the protocol engine asks of the QP (proto::RdmapPort) is in queue_pair_rx.cc (memory and
// receives for inbound messages, Terminates) and queue_pair_tx.cc (the send queue).
#include "verbs/queue_pair.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace uwarp::verbs {

QueuePair::QueuePair(Device& device, const QpConfig& config)
    : device_(device),
      config_(config),
      reporter_(device, device.allocate_qp_num(), config.user_context, config.send_cq,
                config.recv_cq),
      protection_(device.stags(), config.pd) {
  if (config_.srq != nullptr) {
    rq_ = config_.srq;
  } else {
    own_rq_ = std::make_unique<ReceiveQueue>(config_.pd, config_.caps.max_recv_wr,
                                             config_.caps.max_recv_sge);
    rq_ = own_rq_.get();
  }
  rx_scatter_.reserve(16);
  if (config_.pd != nullptr) config_.pd->users.fetch_add(1);
}

QueuePair::~QueuePair() {
  if (config_.pd != nullptr) config_.pd->users.fetch_sub(1);
}

QpState QueuePair::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

std::uint16_t QueuePair::ird() const {
  std::lock_guard lock(mu_);
  return ird_;
}

std::uint16_t QueuePair::ord() const {
  std::lock_guard lock(mu_);
  return ord_;
}

Status QueuePair::check_transition(QpState target) const {
  if (target == QpState::kReset || target == QpState::kError) return Status::ok();
  const QpState s = state_;
  const bool ok = (s == QpState::kReset && target == QpState::kInit) ||
                  (s == QpState::kInit && (target == QpState::kInit || target == QpState::kRtr)) ||
                  (s == QpState::kRtr && target == QpState::kRts) ||
                  (s == QpState::kRts && (target == QpState::kRts || target == QpState::kSqd)) ||
                  (s == QpState::kSqd && (target == QpState::kRts || target == QpState::kSqd)) ||
                  (s == QpState::kSqe && target == QpState::kRts);
  if (!ok) {
    return Status(Errc::kInvalidState, std::string("QP cannot go from ") +
                                           std::string(to_string(s)) + " to " +
                                           std::string(to_string(target)));
  }
  return Status::ok();
}

Status QueuePair::modify_state(QpState target) {
  std::lock_guard lock(mu_);
  if (Status s = check_transition(target); !s) return s;
  switch (target) {
    case QpState::kError:
      if (state_ != QpState::kError) {
        enter_error(std::nullopt, 0);
        if (link_ != nullptr) link_->shutdown_requested();
      }
      break;
    case QpState::kReset:
      if (state_ != QpState::kError && state_ != QpState::kReset) enter_error(std::nullopt, 0);
      if (link_ != nullptr) link_->shutdown_requested();
      sq_.clear();
      sq_next_ = 0;
      if (own_rq_) own_rq_->drain();
      // The engine stays until the next attach: a Terminate it queued may still go out; it
      // receives nothing more (rx_open_locked).
      state_ = QpState::kReset;
      break;
    default: {
      const bool resume = state_ == QpState::kSqd && target == QpState::kRts;
      state_ = target;
      if (resume && link_ != nullptr) link_->tx_ready();
      break;
    }
  }
  return Status::ok();
}

Status QueuePair::post_send(const SendWr& wr) {
  std::lock_guard lock(mu_);
  bool kick = false;
  const Status s = post_send_locked(wr, kick);
  if (kick) link_->tx_ready();
  return s;
}

Status QueuePair::post_send(std::span<const SendWr> wrs, std::size_t* posted) {
  std::lock_guard lock(mu_);
  bool kick = false;
  Status s = Status::ok();
  std::size_t n = 0;
  for (; n < wrs.size(); ++n) {
    // Out of memory fails this request alone (the ones before it stay posted), so that the
    // count is exact.
    try {
      s = post_send_locked(wrs[n], kick);
    } catch (const std::bad_alloc&) {
      s = Status(Errc::kNoResources, "out of memory");
    }
    if (!s) break;
  }
  if (posted != nullptr) *posted = n;
  // One transmit for all: consecutive messages leave in as few sendmsg calls as fit.
  if (kick) link_->tx_ready();
  return s;
}

Status QueuePair::post_send_locked(const SendWr& wr, bool& kick) {
  if (state_ == QpState::kReset || state_ == QpState::kInit || state_ == QpState::kRtr) {
    return Status(Errc::kInvalidState, "post_send needs a QP in RTS, SQD or ERROR");
  }
  const bool is_inline = (wr.flags & send_flags::kInline) != 0 && wr.opcode != WrOpcode::kRdmaRead;
  if (!is_inline && wr.sg_list.size() > config_.caps.max_send_sge) {
    return Status(Errc::kInvalidArgument, "work request has more SGEs than max_send_sge");
  }
  if (sq_.size() >= config_.caps.max_send_wr)
    return Status(Errc::kNoResources, "send queue is full");
  if (wr.opcode == WrOpcode::kRdmaRead && link_ != nullptr && ord_ == 0) {
    return Status(Errc::kInvalidArgument, "the connection allows no RDMA Reads (ORD 0)");
  }
  std::uint64_t length = 0;
  for (const Sge& s : wr.sg_list) length += s.length;
  if (length > device_.limits().max_msg_size)
    return Status(Errc::kInvalidArgument, "message too long");
  if (is_inline && length > device_.limits().max_inline_data) {
    return Status(Errc::kInvalidArgument, "inline data longer than the device maximum");
  }
  SqEntry& e = sq_.push_back();  // a reused slot, as new but with its vectors' storage
  e.seq = next_seq_++;
  e.wr_id = wr.wr_id;
  e.opcode = wr.opcode;
  e.flags = wr.flags;
  e.remote_addr = wr.remote_addr;
  e.rkey = wr.rkey;
  e.invalidate_rkey = wr.invalidate_rkey;
  e.signaled = config_.signal_all || (wr.flags & send_flags::kSignaled) != 0;
  e.length = static_cast<std::uint32_t>(length);
  if (is_inline) {
    // Inline data is copied now: the application may reuse its buffer when post_send returns.
    e.inline_data.resize(length);
    std::size_t at = 0;
    for (const Sge& s : wr.sg_list) {
      if (s.length > 0)
        std::memcpy(e.inline_data.data() + at, reinterpret_cast<const void*>(s.addr), s.length);
      at += s.length;
    }
  } else {
    e.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
  }
  if (state_ == QpState::kError) {
    // Posting to a QP in error completes the request at once with a flush error.
    e.phase = Phase::kDone;
    e.status = WcStatus::kWrFlushError;
    complete_in_order();
    return Status::ok();
  }
  if (link_ != nullptr && state_ == QpState::kRts) kick = true;
  return Status::ok();
}

Status QueuePair::post_recv(const RecvWr& wr) {
  std::lock_guard lock(mu_);
  if (config_.srq != nullptr)
    return Status(Errc::kInvalidArgument, "QP uses a shared receive queue");
  if (state_ == QpState::kReset)
    return Status(Errc::kInvalidState, "post_recv needs a QP out of RESET");
  if (state_ == QpState::kError) {
    reporter_.recv_failed(wr.wr_id, WcStatus::kWrFlushError);
    return Status::ok();
  }
  return rq_->post(wr);
}

void QueuePair::attach_link_locked(QpLink* link, const LinkParams& p) {
  // A new stream: a new engine, so every per-stream counter starts afresh (RFC 5041: MSNs
  // start at 1), also for a QP used before and taken back through RESET.
  disconnecting_ = false;
  rx_recv_ = ActiveReceive{};
  link_ = link;
  ird_ = p.ird;
  ord_ = p.ord;
  engine_ = std::make_unique<proto::RdmapEngine>(static_cast<proto::RdmapPort&>(*this), p);
  if (state_ == QpState::kReset) state_ = QpState::kInit;
  state_ = QpState::kRts;
  if (p.send_rtr != proto::RtrType::kNone || !sq_.empty()) link_->tx_ready();
}

void QueuePair::detach_link_locked() {
  link_ = nullptr;
}

void QueuePair::queue_nudge_locked() {
  if (state_ != QpState::kRts || !engine_) return;
  engine_->queue_nudge();
  if (link_ != nullptr) link_->tx_ready();
}

void QueuePair::disconnect_locked() {
  if (disconnecting_) return;
  disconnecting_ = true;
  if (state_ != QpState::kError) enter_error(std::nullopt, 0);
  if (link_ != nullptr) link_->shutdown_requested();
}

void QueuePair::link_lost_locked(bool graceful, const std::string& why) {
  if (state_ == QpState::kError || state_ == QpState::kReset) return;
  enter_error(std::nullopt, 0);
  if (!graceful) reporter_.event(AsyncEventType::kQpFatal, why);
}

QueuePair::SqEntry* QueuePair::find_sq(std::uint64_t seq) {
  if (sq_.empty() || seq < sq_.front().seq) return nullptr;
  const std::size_t i = static_cast<std::size_t>(seq - sq_.front().seq);
  return i < sq_.size() ? &sq_[i] : nullptr;
}

void QueuePair::push_send_completion(const SqEntry& e) {
  WorkCompletion wc;
  wc.wr_id = e.wr_id;
  wc.status = e.status;
  wc.vendor_err = e.vendor_err;
  wc.qp_num = qp_num();
  switch (e.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithInvalidate:
      wc.opcode = WcOpcode::kSend;
      break;
    case WrOpcode::kRdmaWrite:
      wc.opcode = WcOpcode::kRdmaWrite;
      break;
    case WrOpcode::kRdmaRead:
      wc.opcode = WcOpcode::kRdmaRead;
      wc.byte_len = e.length;
      break;
  }
  reporter_.send_completion(wc);
}

void QueuePair::complete_in_order() {
  // Send completions are reported in posting order, as the verbs require of an RC QP.
  while (!sq_.empty() && sq_.front().phase == Phase::kDone) {
    const SqEntry& e = sq_.front();
    if (e.signaled || e.status != WcStatus::kSuccess) push_send_completion(e);
    sq_.pop_front();
    if (sq_next_ > 0) --sq_next_;
  }
}

void QueuePair::flush_receive_side() {
  if (rx_recv_.active) {
    reporter_.recv_failed(rx_recv_.entry.wr_id, WcStatus::kWrFlushError);
    rx_recv_.end();
  }
  if (own_rq_) {
    for (const RecvEntry& r : own_rq_->drain()) {
      reporter_.recv_failed(r.wr_id, WcStatus::kWrFlushError);
    }
  } else {
    // SRQ entries stay with the SRQ; tell the application this QP consumes no more of them.
    reporter_.event(AsyncEventType::kQpLastWqeReached, "QP left the SRQ");
  }
}

void QueuePair::enter_error(std::optional<WcStatus> first_status, std::uint32_t vendor_err) {
  state_ = QpState::kError;
  // Before any completion tells the application its memory is free again.
  if (link_ != nullptr) link_->tx_abandon();
  if (engine_) engine_->abandon();
  bool first = true;
  for (std::size_t i = 0; i < sq_.size(); ++i) {
    SqEntry& e = sq_[i];
    if (e.phase == Phase::kDone) continue;
    // A Send or Write already handed to TCP (in flight) counts as sent unless the first error
    // belongs to it; everything else is flushed.
    if (first && first_status &&
        (e.phase == Phase::kAwaitingResponse || e.phase == Phase::kInFlight)) {
      e.status = *first_status;
      e.vendor_err = vendor_err;
    } else {
      e.status = WcStatus::kWrFlushError;
    }
    first = false;
    if (e.phase == Phase::kInFlight && !e.inline_data.empty())
      retired_inline_.push_back(std::move(e.inline_data));
    e.phase = Phase::kDone;
    e.mrs.clear();
  }
  complete_in_order();
  flush_receive_side();
}

}  // namespace uwarp::verbs
