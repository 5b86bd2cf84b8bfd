#include "verbs/inbound_receive.h"

#include "wire/rdmap_ext.h"

namespace uwarp::verbs {
namespace term = wire::term;

InboundReceive::InboundReceive(ReceiveQueue& rq, ReceiveQueue* srq, MemoryProtection& protection,
                               QpReporter& reporter)
    : rq_(rq), srq_(srq), protection_(protection), reporter_(reporter) {
  scatter_.reserve(16);
}

std::optional<wire::TerminateCode> InboundReceive::begin() {
  end();
  const bool taken = rq_.take(entry_);
  if (srq_ != nullptr && srq_->consume_limit_event()) {
    reporter_.event(AsyncEventType::kSrqLimitReached, "SRQ below its limit");
  }
  if (!taken) return term::kDdpUntaggedNoBuffer;
  active_ = true;
  for (const Sge& s : entry_.sges) capacity_ += s.length;
  return std::nullopt;
}

std::optional<wire::TerminateCode> InboundReceive::resolve_through(std::size_t until) {
  while (resolved_ < until && next_sge_ < entry_.sges.size()) {
    const Sge& s = entry_.sges[next_sge_++];
    if (s.length == 0) continue;
    if (!protection_.resolve_local(std::span<const Sge>(&s, 1), access::kLocalWrite, spans_,
                                   mrs_)) {
      reporter_.recv_failed(entry_.wr_id, WcStatus::kLocalProtectionError);
      end();
      return term::kRdmapCatastrophicStream;
    }
    resolved_ += s.length;
    on_demand_ = on_demand_ || mrs_.back()->on_demand();
  }
  return std::nullopt;
}

proto::ScatterResult InboundReceive::too_long() {
  reporter_.recv_failed(entry_.wr_id, WcStatus::kLocalLengthError);
  end();
  return Unexpected{term::kDdpUntaggedTooLong};
}

std::optional<wire::TerminateCode> InboundReceive::complete(const proto::InboundSend& send) {
  WorkCompletion wc;
  wc.wr_id = entry_.wr_id;
  wc.status = WcStatus::kSuccess;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = send.length;
  wc.qp_num = reporter_.qp_num();
  end();
  if (wire::is_immediate_data(send.opcode)) {
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.flags |= wc_flags::kWithImm;
    wc.imm_data = wire::ImmediateData{send.immediate}.verbs_value();
  }
  const bool solicited = wire::is_solicited(send.opcode);
  if (solicited) wc.flags |= wc_flags::kSolicited;
  if (wire::carries_invalidate(send.opcode)) {
    if (auto refused = protection_.invalidate_remote(send.invalidate_stag)) {
      wc.status = WcStatus::kRemoteInvalidRequestError;
      reporter_.recv_completion(wc, solicited);
      return refused;
    }
    wc.flags |= wc_flags::kWithInvalidate;
    wc.invalidated_rkey = send.invalidate_stag.value();
  }
  reporter_.recv_completion(wc, solicited);
  return std::nullopt;
}

void InboundReceive::flush() {
  if (active_) {
    reporter_.recv_failed(entry_.wr_id, WcStatus::kWrFlushError);
    end();
  }
  if (srq_ == nullptr) {
    for (const RecvEntry& r : rq_.drain()) reporter_.recv_failed(r.wr_id, WcStatus::kWrFlushError);
  } else {
    // SRQ entries stay with the SRQ; tell the application this QP consumes no more of them.
    reporter_.event(AsyncEventType::kQpLastWqeReached, "QP left the SRQ");
  }
}

}  // namespace uwarp::verbs
