// QueuePair send queue, as the protocol engine takes from it (proto::RdmapPort): the next
// request, its local memory resolved and checked, and its completion once TCP has all of it (a
// Send or Write) or its response has arrived (an RDMA Read, queue_pair_rx.cc). Which message
// goes when (fences, ORD, Read Responses first) is the engine's.
#include "verbs/queue_pair.h"

namespace uwarp::verbs {
namespace {

proto::OutboundRequest::Kind kind_of(WrOpcode opcode) {
  switch (opcode) {
    case WrOpcode::kSend: return proto::OutboundRequest::Kind::kSend;
    case WrOpcode::kSendWithInvalidate: return proto::OutboundRequest::Kind::kSendInvalidate;
    case WrOpcode::kRdmaWrite: return proto::OutboundRequest::Kind::kWrite;
    case WrOpcode::kRdmaRead: return proto::OutboundRequest::Kind::kRead;
  }
  return proto::OutboundRequest::Kind::kSend;
}

}  // namespace

bool QueuePair::tx_fill_locked(proto::TxBatch& batch) {
  if (!engine_) return false;
  proto::RdmapEngine::TxGate gate;
  gate.responses = state_ == QpState::kRts || state_ == QpState::kSqd;
  gate.requests = state_ == QpState::kRts;
  return engine_->fill(batch, gate);
}

bool QueuePair::peek_request(proto::OutboundRequest& next) {
  if (sq_next_ >= sq_.size()) return false;
  const SqEntry& e = sq_[sq_next_];
  next.seq = e.seq;
  next.kind = kind_of(e.opcode);
  next.fence = (e.flags & send_flags::kFence) != 0;
  return true;
}

bool QueuePair::start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) {
  SqEntry& e = sq_[sq_next_];
  if (!e.inline_data.empty()) {
    payload.push_back(ConstByteSpan(e.inline_data));
  } else {
    const std::uint32_t needed = e.opcode == WrOpcode::kRdmaRead ? access::kLocalWrite : 0;
    if (!protection_.resolve_local(e.sges, needed, e.spans, e.mrs)) {
      // A local protection error fails this request and, as the verbs require, the QP.
      e.phase = Phase::kDone;
      e.status = WcStatus::kLocalProtectionError;
      ++sq_next_;
      enter_error(std::nullopt, 0);
      reporter_.event(AsyncEventType::kQpFatal, "local protection error on a send work request");
      if (link_ != nullptr) link_->shutdown_requested();
      return false;
    }
    if (e.opcode != WrOpcode::kRdmaRead) {
      for (const ByteSpan& s : e.spans) payload.push_back(s);
    }
  }
  r.solicited = (e.flags & send_flags::kSolicited) != 0;
  r.length = e.length;
  r.remote_stag = e.rkey;
  r.remote_offset = e.remote_addr;
  r.invalidate_stag = e.invalidate_rkey;
  // A Read's sink is advertised as the first SGE's STag and address; a multi-SGE sink is
  // scattered locally by offset (resolve_read_sink), so the peer sees one tagged buffer.
  r.sink_stag = e.sges.empty() ? 0 : e.sges.front().lkey;
  r.sink_offset = e.sges.empty() ? 0 : e.sges.front().addr;
  e.phase = Phase::kInFlight;
  ++sq_next_;
  return true;
}

void QueuePair::request_sent(std::uint64_t seq) {
  SqEntry* e = find_sq(seq);
  if (e == nullptr || e->phase != Phase::kInFlight) return;  // flushed (or answered) meanwhile
  if (e->opcode == WrOpcode::kRdmaRead) {
    e->phase = Phase::kAwaitingResponse;
    return;
  }
  e->phase = Phase::kDone;
  e->status = WcStatus::kSuccess;
  e->mrs.clear();
  complete_in_order();
}

}  // namespace uwarp::verbs
