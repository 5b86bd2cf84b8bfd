// QueuePair receive side, as the protocol engine asks for it (proto::RdmapPort): where inbound
// segments go (RFC 5041 section 5, RFC 5040 section 5: registered memory checked for the access,
// the next receive), receive completions, and what a Terminate does to the QP (docs/interop.md).
// The RDMAP rules themselves (versions, opcodes, MSN/MO, the Read queues) are the engine's.
#include <algorithm>

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

std::size_t QueuePair::rx_feed_locked(ConstByteSpan bytes) {
  // The engine drops bytes itself once it has stopped receiving (a Terminate either way).
  if (!engine_ || !receiving_state()) return bytes.size();
  return engine_->feed(bytes);
}

bool QueuePair::rx_open_locked() const {
  return engine_ && engine_->rx_open() && receiving_state();
}

proto::ScatterResult QueuePair::resolve_write(std::uint32_t stag, std::uint64_t to, std::size_t length) {
  // The segments of one Write all name its STag.
  if (!find_region(rx_mr_, stag)) return Unexpected{term::kDdpTaggedInvalidStag};
  auto r = rx_mr_->resolve(config_.pd, to, length, access::kRemoteWrite);
  if (!r) return Unexpected{write_error(r.error())};
  rx_scatter_.assign(1, *r);
  return proto::Scatter(rx_scatter_);
}

proto::ScatterResult QueuePair::resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                                  std::size_t length) {
  SqEntry* e = find_sq(seq);
  if (e == nullptr || !slice(e->spans, offset, length, rx_scatter_)) {
    return Unexpected{term::kDdpTaggedBaseBounds};
  }
  return proto::Scatter(rx_scatter_);
}

void QueuePair::read_complete(std::uint64_t seq) {
  SqEntry* e = find_sq(seq);
  if (e == nullptr) return;
  e->phase = Phase::kDone;
  e->status = WcStatus::kSuccess;
  e->mrs.clear();
  complete_in_order();
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

Expected<proto::ReadSource, wire::TerminateCode> QueuePair::resolve_read_source(
    std::uint32_t stag, std::uint64_t offset, std::uint32_t length) {
  MemoryRegionRef mr = device_.stags().find(stag);
  if (!mr) return Unexpected{term::kRdmapInvalidStag};
  auto r = mr->resolve(config_.pd, offset, length, access::kRemoteRead);
  if (!r) return Unexpected{read_source_error(r.error())};
  return proto::ReadSource{*r, std::move(mr)};
}

void QueuePair::terminate_received(const wire::TerminateMessage& m) {
  const WcStatus status = status_for_remote_terminate(m.raw_control);
  const std::string detail = describe_remote_terminate(m);
  enter_error(status, m.raw_control);
  report(status == WcStatus::kRemoteAccessError ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
         detail);
  if (link_ != nullptr) link_->shutdown_requested();
}

void QueuePair::rtr_received() {
  if (link_ != nullptr) link_->rtr_received();
}

void QueuePair::terminate_queued(const wire::TerminateCode& code) {
  const bool access = code.layer != wire::TermLayer::kLlp && code.etype == 1;
  enter_error(std::nullopt, 0);
  report(access ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
         "sent Terminate " + wire::describe(code));
}

void QueuePair::terminate_sent() {
  if (link_ != nullptr) link_->shutdown_requested();
}

}  // namespace uwarp::verbs
