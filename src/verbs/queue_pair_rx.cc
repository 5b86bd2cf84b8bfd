// QueuePair receive path: placement of inbound segments (RFC 5041 section 5, RFC 5040 section
// 5) and the Terminate table of docs/interop.md. The RDMAP rules themselves (versions, opcodes,
// MSN/MO) are checked by proto::RdmapReceiver before these calls.
#include <algorithm>
#include <cstdio>

#include "verbs/queue_pair.h"

namespace uwarp::verbs {
namespace term = wire::term;

namespace {

// The part [offset, offset + length) of a list of spans, into `out`; false if it runs past the end.
bool slice(const std::vector<ByteSpan>& spans, std::size_t offset, std::size_t length, std::vector<ByteSpan>& out) {
  out.clear();
  for (const ByteSpan& s : spans) {
    if (length == 0) break;
    if (offset >= s.size()) {
      offset -= s.size();
      continue;
    }
    const std::size_t take = std::min(s.size() - offset, length);
    out.push_back(s.subspan(offset, take));
    length -= take;
    offset = 0;
  }
  return length == 0;
}

wire::TerminateCode write_error(AccessError e) {
  switch (e) {
    case AccessError::kInvalidStag: return term::kDdpTaggedInvalidStag;
    case AccessError::kWrongPd: return term::kDdpTaggedStagNotAssociated;
    case AccessError::kAccessRights: return term::kDdpTaggedInvalidStag;  // DDP has no access-rights code
    case AccessError::kBounds: return term::kDdpTaggedBaseBounds;
    case AccessError::kWrap: return term::kDdpTaggedToWrap;
  }
  return term::kDdpTaggedInvalidStag;
}

wire::TerminateCode read_source_error(AccessError e) {
  switch (e) {
    case AccessError::kInvalidStag: return term::kRdmapInvalidStag;
    case AccessError::kWrongPd: return term::kRdmapStagNotAssociated;
    case AccessError::kAccessRights: return term::kRdmapAccessRights;
    case AccessError::kBounds: return term::kRdmapBaseBounds;
    case AccessError::kWrap: return term::kRdmapToWrap;
  }
  return term::kRdmapInvalidStag;
}

}  // namespace

ByteSpan QueuePair::rx_direct_target_locked() { return reader_ ? reader_->direct_target() : ByteSpan{}; }

void QueuePair::rx_commit_locked(std::size_t n) {
  reader_->commit_direct(n);
  if (reader_->failed()) handle_rx_failure();
}

std::size_t QueuePair::rx_feed_locked(ConstByteSpan bytes) {
  if (!rx_open_locked()) return bytes.size();
  const std::size_t n = reader_->feed(bytes);
  if (reader_->failed()) handle_rx_failure();
  return n;
}

bool QueuePair::rx_open_locked() const {
  return reader_ && !reader_->failed() && !receiver_->terminated() && !terminate_queued_ &&
         state_ != QpState::kError;
}

proto::ScatterResult QueuePair::resolve_write(std::uint32_t stag, std::uint64_t to, std::size_t length) {
  // The segments of one Write all name its STag.
  if (!find_region(rx_mr_, stag)) return Unexpected{term::kDdpTaggedInvalidStag};
  auto r = rx_mr_->resolve(config_.pd, to, length, access::kRemoteWrite);
  if (!r) return Unexpected{write_error(r.error())};
  rx_scatter_.assign(1, *r);
  return proto::Scatter(rx_scatter_);
}

proto::ScatterResult QueuePair::resolve_read_response(std::uint32_t stag, std::uint64_t to, std::size_t length) {
  if (rtr_read_pending_) {
    // The answer to our own zero-length RTR Read.
    if (length != 0) return Unexpected{term::kDdpTaggedBaseBounds};
    return proto::Scatter{};
  }
  SqEntry* e = orq_.empty() ? nullptr : find_sq(orq_.front());
  if (e == nullptr || stag != e->sink_stag) return Unexpected{term::kDdpTaggedInvalidStag};
  if (to < e->sink_to || to - e->sink_to + length > e->length) return Unexpected{term::kDdpTaggedBaseBounds};
  if (!slice(e->spans, static_cast<std::size_t>(to - e->sink_to), length, rx_scatter_)) {
    return Unexpected{term::kDdpTaggedBaseBounds};
  }
  e->response_bytes += static_cast<std::uint32_t>(length);
  return proto::Scatter(rx_scatter_);
}

std::optional<wire::TerminateCode> QueuePair::read_response_complete() {
  if (rtr_read_pending_) {
    rtr_read_pending_ = false;
    return std::nullopt;
  }
  SqEntry* e = orq_.empty() ? nullptr : find_sq(orq_.front());
  if (e == nullptr) return term::kDdpTaggedInvalidStag;
  if (e->response_bytes != e->length) return term::kDdpTaggedBaseBounds;  // a short Read Response
  orq_.pop_front();
  e->phase = Phase::kDone;
  e->status = WcStatus::kSuccess;
  e->mrs.clear();
  complete_in_order();
  if (link_ != nullptr) link_->tx_ready();  // a fence or ORD may have held the send queue
  return std::nullopt;
}

proto::ScatterResult QueuePair::resolve_receive(std::uint32_t /*msn*/, std::uint32_t mo, std::size_t length,
                                                bool first_segment) {
  if (first_segment) {
    rx_recv_.end();
    const bool taken = rq_->take(rx_recv_.entry);
    if (config_.srq != nullptr && config_.srq->consume_limit_event()) {
      report(AsyncEventType::kSrqLimitReached, "SRQ below its limit");
    }
    if (!taken) return Unexpected{term::kDdpUntaggedNoBuffer};
    rx_recv_.active = true;
    if (!resolve_local(rx_recv_.entry.sges, access::kLocalWrite, rx_recv_.spans, rx_recv_.mrs)) {
      fail_recv(rx_recv_.entry.wr_id, WcStatus::kLocalProtectionError);
      rx_recv_.end();
      return Unexpected{term::kRdmapCatastrophicStream};
    }
    for (const ByteSpan& s : rx_recv_.spans) rx_recv_.capacity += s.size();
  }
  if (!rx_recv_.active) return Unexpected{term::kDdpUntaggedNoBuffer};
  if (mo + length > rx_recv_.capacity || !slice(rx_recv_.spans, mo, length, rx_scatter_)) {
    fail_recv(rx_recv_.entry.wr_id, WcStatus::kLocalLengthError);
    rx_recv_.end();
    return Unexpected{term::kDdpUntaggedTooLong};
  }
  return proto::Scatter(rx_scatter_);
}

std::optional<wire::TerminateCode> QueuePair::receive_complete(const proto::InboundSend& send) {
  WorkCompletion wc;
  wc.wr_id = rx_recv_.entry.wr_id;
  wc.status = WcStatus::kSuccess;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = send.length;
  wc.qp_num = qp_num_;
  rx_recv_.end();
  const bool solicited = wire::is_solicited(send.opcode);
  if (solicited) wc.flags |= wc_flags::kSolicited;
  if (wire::carries_invalidate(send.opcode)) {
    MemoryRegionRef mr = device_.stags().find(send.invalidate_stag);
    if (!mr || mr->pd != config_.pd) {
      wc.status = WcStatus::kRemoteInvalidRequestError;
      push_recv(wc, solicited);
      return term::kRdmapCannotInvalidateProtection;
    }
    mr->valid.store(false, std::memory_order_release);
    wc.flags |= wc_flags::kWithInvalidate;
    wc.invalidated_rkey = send.invalidate_stag;
  }
  push_recv(wc, solicited);
  return std::nullopt;
}

std::optional<wire::TerminateCode> QueuePair::read_request(const wire::ReadRequest& rr) {
  InboundRead in;
  in.sink_stag = rr.sink_stag;
  in.sink_to = rr.sink_to;
  if (rr.size > 0) {
    in.mr = device_.stags().find(rr.source_stag);
    if (!in.mr) return term::kRdmapInvalidStag;
    auto r = in.mr->resolve(config_.pd, rr.source_to, rr.size, access::kRemoteRead);
    if (!r) return read_source_error(r.error());
    in.source = *r;
  }
  irq_.push_back(std::move(in));
  if (link_ != nullptr) link_->tx_ready();
  return std::nullopt;
}

void QueuePair::terminate_received(const wire::TerminateMessage& m) {
  const WcStatus status = status_for_remote_terminate(m.raw_control);
  char detail[96];
  if (m.has_control) {
    std::snprintf(detail, sizeof detail, "peer sent Terminate, control word 0x%08x (%s)",
                  m.raw_control, wire::describe(m.code).c_str());
  } else {
    std::snprintf(detail, sizeof detail, "peer sent Terminate without a control word");
  }
  enter_error(status, m.raw_control);
  report(status == WcStatus::kRemoteAccessError ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
         detail);
  if (link_ != nullptr) link_->shutdown_requested();
}

void QueuePair::rtr_received() {
  awaiting_rtr_ = false;
  if (link_ != nullptr) {
    link_->rtr_received();
    link_->tx_ready();
  }
}

void QueuePair::handle_rx_failure() {
  if (terminate_queued_) return;
  const proto::RxFailure& f = *reader_->failure();
  wire::TerminateMessage m;
  m.code = f.code;
  if (f.have_header) {
    m.has_segment_length = true;
    m.segment_length = f.ulpdu_length;
    m.ddp_header = ConstByteSpan(f.header.data(), f.header_size);
    if (f.have_rdmap_header) m.rdmap_header = ConstByteSpan(f.rdmap_header.data(), f.rdmap_header.size());
  }
  queue_terminate(m);
}

void QueuePair::queue_terminate(const wire::TerminateMessage& m) {
  terminate_size_ = wire::encode_terminate(m, terminate_body_);
  terminate_queued_ = true;
  const bool access = m.code.layer != wire::TermLayer::kLlp && m.code.etype == 1;
  enter_error(std::nullopt, 0);
  report(access ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
         "sent Terminate " + wire::describe(m.code));
  if (link_ != nullptr) link_->tx_ready();
}

}  // namespace uwarp::verbs
