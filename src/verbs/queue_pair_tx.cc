// QueuePair transmit side, as the protocol engine takes from it (proto::RdmapPort): batches
// filled as the QP's state allows, and the send queue's requests (SendQueue). Which message
// goes when (fences, ORD, Read Responses first) is the engine's.
#include "verbs/queue_pair.h"

namespace uwarp::verbs {

bool QueuePair::tx_fill_locked(proto::TxBatch& batch) {
  if (!engine_) return false;
  proto::RdmapEngine::TxGate gate;
  gate.responses = state_ == QpState::kRts || state_ == QpState::kSqd;
  gate.requests = state_ == QpState::kRts;
  return engine_->fill(batch, gate);
}

bool QueuePair::peek_request(proto::OutboundRequest& next) {
  return sq_.peek(next);
}

bool QueuePair::start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) {
  if (sq_.start(r, payload)) return true;
  // A local protection error fails this request and, as the verbs require, the QP.
  enter_error(std::nullopt, 0);
  reporter_.event(AsyncEventType::kQpFatal, "local protection error on a send work request");
  if (link_ != nullptr) link_->shutdown_requested();
  return false;
}

void QueuePair::request_sent(std::uint64_t seq) {
  sq_.sent(seq);
}

}  // namespace uwarp::verbs
