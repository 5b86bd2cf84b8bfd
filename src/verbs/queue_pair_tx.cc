// QueuePair transmit path: which message goes next (a pending Terminate, our RTR, Read
// Responses, then the send queue in order, held by fences and ORD), and what happens when a
// message has been handed to TCP (RFC 5040 sections 5.1-5.3; completions as Linux siw: a Send
// or Write completes once TCP has all of it, an RDMA Read when its response has arrived).
#include "verbs/queue_pair.h"

namespace uwarp::verbs {
namespace {

enum class CookieKind : std::uint64_t { kSq = 0, kReadResponse = 1, kTerminate = 2, kRtr = 3 };
constexpr int kKindShift = 60;
constexpr std::uint64_t make_cookie(CookieKind k, std::uint64_t seq = 0) {
  return (static_cast<std::uint64_t>(k) << kKindShift) | seq;
}
constexpr CookieKind cookie_kind(std::uint64_t c) {
  return static_cast<CookieKind>(c >> kKindShift);
}
constexpr std::uint64_t cookie_seq(std::uint64_t c) {
  return c & ((std::uint64_t{1} << kKindShift) - 1);
}

wire::DdpHeader untagged(wire::RdmapOpcode op, std::uint32_t queue, std::uint32_t msn) {
  wire::DdpHeader h;
  h.tagged = false;
  h.opcode = static_cast<std::uint8_t>(op);
  h.queue = queue;
  h.msn = msn;
  return h;
}

wire::DdpHeader tagged(wire::RdmapOpcode op, std::uint32_t stag, std::uint64_t to) {
  wire::DdpHeader h;
  h.tagged = true;
  h.opcode = static_cast<std::uint8_t>(op);
  h.stag = stag;
  h.tagged_offset = to;
  return h;
}

}  // namespace

bool QueuePair::tx_fill_locked(proto::TxBatch& batch) {
  bool added = false;
  if (state_ == QpState::kError && segmenter_.active() && !segmenting_terminate_) {
    // The QP failed mid-message: the rest of that message is not sent.
    segmenter_ = proto::MessageSegmenter{};
  }
  while (true) {
    if (!segmenter_.active()) {
      proto::MessageSegmenter::Message m;
      if (!next_message(m)) break;
      segmenter_.start(m);
    }
    const std::size_t before = batch.pending_bytes();
    const bool done = segmenter_.fill(batch, max_ulpdu_, crc_);
    added = added || batch.pending_bytes() != before;
    if (!done) break;  // the batch is full
  }
  return added;
}

bool QueuePair::next_message(proto::MessageSegmenter::Message& m) {
  gather_.clear();
  segmenting_terminate_ = false;
  if (terminate_queued_) {
    if (terminate_started_) return false;
    terminate_started_ = true;
    segmenting_terminate_ = true;
    gather_.push_back(ConstByteSpan(terminate_body_.data(), terminate_size_));
    m.header = untagged(wire::RdmapOpcode::kTerminate, wire::kQueueTerminate, term_msn_++);
    m.gather = gather_;
    m.length = terminate_size_;
    m.cookie = make_cookie(CookieKind::kTerminate);
    return true;
  }
  if (state_ != QpState::kRts && state_ != QpState::kSqd) return false;
  if (send_rtr_ != proto::RtrType::kNone) {
    // RFC 6581: the initiator's first message is the zero-length RTR the responder chose.
    switch (send_rtr_) {
      case proto::RtrType::kWrite:
        m.header = tagged(wire::RdmapOpcode::kRdmaWrite, proto::kRtrStag, 0);
        break;
      case proto::RtrType::kRead: {
        wire::ReadRequest rr;
        rr.source_stag = proto::kRtrStag;
        auto& body = read_request_bodies_[next_read_request_body_++ % read_request_bodies_.size()];
        wire::encode_read_request(rr, body);
        gather_.push_back(ConstByteSpan(body));
        m.header = untagged(wire::RdmapOpcode::kReadRequest, wire::kQueueReadRequest, read_msn_++);
        m.length = wire::kReadRequestSize;
        rtr_read_pending_ = true;
        break;
      }
      default:
        m.header = untagged(wire::RdmapOpcode::kSend, wire::kQueueSend, send_msn_++);
        break;
    }
    send_rtr_ = proto::RtrType::kNone;
    m.gather = gather_;
    m.cookie = make_cookie(CookieKind::kRtr);
    return true;
  }
  if (awaiting_rtr_) return false;
  if (nudge_pending_) {
    nudge_pending_ = false;
    m.header = tagged(wire::RdmapOpcode::kRdmaWrite, proto::kRtrStag, 0);
    m.gather = gather_;
    m.cookie = make_cookie(CookieKind::kRtr);
    return true;
  }
  if (!irq_.empty()) {
    responding_ = std::move(irq_.front());
    irq_.pop_front();
    if (!responding_.source.empty()) gather_.push_back(responding_.source);
    m.header = tagged(wire::RdmapOpcode::kReadResponse, responding_.sink_stag, responding_.sink_to);
    m.gather = gather_;
    m.length = responding_.source.size();
    m.cookie = make_cookie(CookieKind::kReadResponse);
    return true;
  }
  if (state_ != QpState::kRts || sq_next_ >= sq_.size()) return false;
  SqEntry& e = sq_[sq_next_];
  if ((e.flags & send_flags::kFence) != 0 && !orq_.empty()) return false;
  if (e.opcode == WrOpcode::kRdmaRead && orq_.size() >= ord_) return false;
  if (!start_sq_entry(e, m)) return false;
  ++sq_next_;
  return true;
}

bool QueuePair::start_sq_entry(SqEntry& e, proto::MessageSegmenter::Message& m) {
  if (!e.inline_data.empty()) {
    gather_.push_back(ConstByteSpan(e.inline_data));
  } else {
    const std::uint32_t needed = e.opcode == WrOpcode::kRdmaRead ? access::kLocalWrite : 0;
    if (!resolve_local(e.sges, needed, e.spans, e.mrs)) {
      // A local protection error fails this request and, as the verbs require, the QP.
      e.phase = Phase::kDone;
      e.status = WcStatus::kLocalProtectionError;
      ++sq_next_;
      enter_error(std::nullopt, 0);
      report(AsyncEventType::kQpFatal, "local protection error on a send work request");
      if (link_ != nullptr) link_->shutdown_requested();
      return false;
    }
    if (e.opcode != WrOpcode::kRdmaRead) {
      for (const ByteSpan& s : e.spans) gather_.push_back(s);
    }
  }
  m.length = e.length;
  m.cookie = make_cookie(CookieKind::kSq, e.seq);
  e.phase = Phase::kInFlight;
  switch (e.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithInvalidate: {
      const bool se = (e.flags & send_flags::kSolicited) != 0;
      const bool inv = e.opcode == WrOpcode::kSendWithInvalidate;
      const auto op =
          inv ? (se ? wire::RdmapOpcode::kSendSeInvalidate : wire::RdmapOpcode::kSendInvalidate)
              : (se ? wire::RdmapOpcode::kSendSe : wire::RdmapOpcode::kSend);
      m.header = untagged(op, wire::kQueueSend, send_msn_++);
      if (inv) m.header.ulp_reserved = e.invalidate_rkey;
      break;
    }
    case WrOpcode::kRdmaWrite:
      m.header = tagged(wire::RdmapOpcode::kRdmaWrite, e.rkey, e.remote_addr);
      break;
    case WrOpcode::kRdmaRead: {
      // The sink is advertised as the first SGE's STag and address; a multi-SGE sink is
      // scattered locally by offset, so the peer sees one tagged buffer.
      e.sink_stag = e.sges.empty() ? 0 : e.sges.front().lkey;
      e.sink_to = e.sges.empty() ? 0 : e.sges.front().addr;
      wire::ReadRequest rr;
      rr.sink_stag = e.sink_stag;
      rr.sink_to = e.sink_to;
      rr.size = e.length;
      rr.source_stag = e.rkey;
      rr.source_to = e.remote_addr;
      auto& body = read_request_bodies_[next_read_request_body_++ % read_request_bodies_.size()];
      wire::encode_read_request(rr, body);
      gather_.push_back(ConstByteSpan(body));
      m.header = untagged(wire::RdmapOpcode::kReadRequest, wire::kQueueReadRequest, read_msn_++);
      m.length = wire::kReadRequestSize;
      orq_.push_back(e.seq);
      break;
    }
  }
  m.gather = gather_;
  return true;
}

void QueuePair::tx_sent_locked(std::uint64_t cookie) {
  switch (cookie_kind(cookie)) {
    case CookieKind::kSq: {
      SqEntry* e = find_sq(cookie_seq(cookie));
      if (e == nullptr || e->phase != Phase::kInFlight) return;  // flushed meanwhile
      if (e->opcode == WrOpcode::kRdmaRead) {
        e->phase = Phase::kAwaitingResponse;
        return;
      }
      e->phase = Phase::kDone;
      e->status = WcStatus::kSuccess;
      e->mrs.clear();
      complete_in_order();
      return;
    }
    case CookieKind::kReadResponse:
      responding_ = InboundRead{};
      if (receiver_) receiver_->read_response_sent();
      return;
    case CookieKind::kTerminate:
      if (link_ != nullptr) link_->shutdown_requested();
      return;
    case CookieKind::kRtr:
      return;
  }
}

}  // namespace uwarp::verbs
