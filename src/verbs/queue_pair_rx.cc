// QueuePair receive side, as the protocol engine asks for it (proto::RdmapPort): where inbound
// segments go (RFC 5041 section 5, RFC 5040 section 5: registered memory checked for the access,
// the next receive), receive completions, and what a Terminate does to the QP (docs/interop.md).
// The RDMAP rules themselves (versions, opcodes, MSN/MO, the Read queues) are the engine's.
#include <algorithm>

#include "verbs/queue_pair.h"

namespace uwarp::verbs {
namespace term = wire::term;

std::size_t QueuePair::rx_feed_locked(ConstByteSpan bytes) {
  // The engine drops bytes itself once it has stopped receiving (a Terminate either way).
  if (!engine_ || !receiving_state()) return bytes.size();
  return engine_->feed(bytes);
}

bool QueuePair::rx_open_locked() const {
  return engine_ && engine_->rx_open() && receiving_state();
}

proto::ScatterResult QueuePair::resolve_write(std::uint32_t stag, std::uint64_t to, std::size_t length) {
  return protection_.resolve_write(stag, to, length);
}

proto::ScatterResult QueuePair::resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                                  std::size_t length) {
  return protection_.resolve_read_sink(sq_.read_sink(seq), offset, length);
}

void QueuePair::read_complete(std::uint64_t seq) {
  sq_.read_complete(seq);
}

proto::ScatterResult QueuePair::resolve_receive(std::uint32_t /*msn*/, std::uint32_t mo, std::size_t length,
                                                bool first_segment) {
  if (first_segment) {
    rx_recv_.end();
    const bool taken = rq_->take(rx_recv_.entry);
    if (config_.srq != nullptr && config_.srq->consume_limit_event()) {
      reporter_.event(AsyncEventType::kSrqLimitReached, "SRQ below its limit");
    }
    if (!taken) return Unexpected{term::kDdpUntaggedNoBuffer};
    rx_recv_.active = true;
    if (!protection_.resolve_local(rx_recv_.entry.sges, access::kLocalWrite, rx_recv_.spans, rx_recv_.mrs)) {
      reporter_.recv_failed(rx_recv_.entry.wr_id, WcStatus::kLocalProtectionError);
      rx_recv_.end();
      return Unexpected{term::kRdmapCatastrophicStream};
    }
    for (const ByteSpan& s : rx_recv_.spans) rx_recv_.capacity += s.size();
  }
  if (!rx_recv_.active) return Unexpected{term::kDdpUntaggedNoBuffer};
  if (mo + length > rx_recv_.capacity || !slice(rx_recv_.spans, mo, length, rx_scatter_)) {
    reporter_.recv_failed(rx_recv_.entry.wr_id, WcStatus::kLocalLengthError);
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
  wc.qp_num = qp_num();
  rx_recv_.end();
  const bool solicited = wire::is_solicited(send.opcode);
  if (solicited) wc.flags |= wc_flags::kSolicited;
  if (wire::carries_invalidate(send.opcode)) {
    if (!protection_.invalidate_remote(send.invalidate_stag)) {
      wc.status = WcStatus::kRemoteInvalidRequestError;
      reporter_.recv_completion(wc, solicited);
      return term::kRdmapCannotInvalidateProtection;
    }
    wc.flags |= wc_flags::kWithInvalidate;
    wc.invalidated_rkey = send.invalidate_stag;
  }
  reporter_.recv_completion(wc, solicited);
  return std::nullopt;
}

Expected<proto::ReadSource, wire::TerminateCode> QueuePair::resolve_read_source(
    std::uint32_t stag, std::uint64_t offset, std::uint32_t length) {
  return protection_.resolve_read_source(stag, offset, length);
}

void QueuePair::terminate_received(const wire::TerminateMessage& m) {
  const WcStatus status = status_for_remote_terminate(m.raw_control);
  const std::string detail = describe_remote_terminate(m);
  enter_error(status, m.raw_control);
  reporter_.event(status == WcStatus::kRemoteAccessError ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
         detail);
  if (link_ != nullptr) link_->shutdown_requested();
}

void QueuePair::rtr_received() {
  if (link_ != nullptr) link_->rtr_received();
}

void QueuePair::terminate_queued(const wire::TerminateCode& code) {
  const bool access = code.layer != wire::TermLayer::kLlp && code.etype == 1;
  enter_error(std::nullopt, 0);
  reporter_.event(access ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
         "sent Terminate " + wire::describe(code));
}

void QueuePair::terminate_sent() {
  if (link_ != nullptr) link_->shutdown_requested();
}

}  // namespace uwarp::verbs
