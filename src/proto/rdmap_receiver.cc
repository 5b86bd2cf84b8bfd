#include "proto/rdmap_receiver.h"

#include "wire/rdmap_ext.h"

namespace uwarp::proto {

using wire::RdmapOpcode;
namespace term = wire::term;

Placement RdmapReceiver::on_segment_header(const wire::DdpHeader& h, std::size_t payload_length) {
  header_ = h;
  payload_length_ = payload_length;
  segment_ = Segment::kIgnore;
  if (terminated_) return Placement::discard();  // drain quietly after a Terminate

  if (h.ddp_version != wire::kDdpVersion) {
    return Placement::reject(h.tagged ? term::kDdpTaggedBadVersion : term::kDdpUntaggedBadVersion);
  }
  if (h.rdmap_version != wire::kRdmapVersion) return Placement::reject(term::kRdmapBadVersion);
  if (!h.tagged && h.queue >= wire::kUntaggedQueues) return Placement::reject(term::kDdpUntaggedInvalidQn);

  if (expected_rtr_ != RtrType::kNone) return on_rtr_header(h, payload_length);

  const auto op = static_cast<RdmapOpcode>(h.opcode);
  if (h.tagged) {
    if (op == RdmapOpcode::kRdmaWrite) {
      segment_ = Segment::kWrite;
      if (payload_length == 0) return Placement::into({});  // zero-length: touches no memory
      // A page of the region that cannot be written is outside what the STag reaches.
      return from(delegate_.resolve_write(wire::Stag{h.stag}, wire::TaggedOffset{h.tagged_offset},
                                          payload_length),
                  term::kDdpTaggedBaseBounds);
    }
    if (op == RdmapOpcode::kReadResponse) {
      segment_ = Segment::kReadResponse;
      return from(delegate_.resolve_read_response(
                      wire::Stag{h.stag}, wire::TaggedOffset{h.tagged_offset}, payload_length),
                  term::kRdmapLocalCatastrophic);
    }
    return Placement::reject(term::kRdmapUnexpectedOpcode);
  }
  switch (h.queue) {
    case wire::kQueueSend:
      if (wire::is_immediate_data(op)) return on_immediate_header(h, payload_length);
      if (!wire::is_send_opcode(op)) return Placement::reject(term::kRdmapUnexpectedOpcode);
      return on_send_header(h, payload_length);
    case wire::kQueueReadRequest:
      if (op == RdmapOpcode::kAtomicRequest) {
        segment_ = Segment::kAtomicRequest;
        return on_queue_message_header(h, payload_length, wire::kQueueReadRequest,
                                       wire::kAtomicRequestSize);
      }
      if (op != RdmapOpcode::kReadRequest) return Placement::reject(term::kRdmapUnexpectedOpcode);
      segment_ = Segment::kReadRequest;
      return on_queue_message_header(h, payload_length, wire::kQueueReadRequest, wire::kReadRequestSize);
    case wire::kQueueAtomicResponse:
      if (op != RdmapOpcode::kAtomicResponse) return Placement::reject(term::kRdmapUnexpectedOpcode);
      segment_ = Segment::kAtomicResponse;
      return on_queue_message_header(h, payload_length, wire::kQueueAtomicResponse,
                                     wire::kAtomicResponseSize);
    default:  // kQueueTerminate
      if (op != RdmapOpcode::kTerminate) return Placement::reject(term::kRdmapUnexpectedOpcode);
      segment_ = Segment::kTerminate;
      return on_queue_message_header(h, payload_length, wire::kQueueTerminate, 0);
  }
}

Placement RdmapReceiver::on_rtr_header(const wire::DdpHeader& h, std::size_t payload_length) {
  const auto op = static_cast<RdmapOpcode>(h.opcode);
  bool match = payload_length == 0 && h.last && h.message_offset == 0;
  switch (expected_rtr_) {
    case RtrType::kWrite:
      match = match && h.tagged && op == RdmapOpcode::kRdmaWrite;
      break;
    case RtrType::kSend:
      match = match && !h.tagged && op == RdmapOpcode::kSend && h.queue == wire::kQueueSend &&
              wire::Msn{h.msn} == expected_msn_[wire::kQueueSend];
      break;
    case RtrType::kRead:
      // A Read Request whose body says "zero bytes" (checked when the body is in); it is
      // answered like any other Read but does not count against IRD.
      if (!h.tagged && op == RdmapOpcode::kReadRequest && h.queue == wire::kQueueReadRequest) {
        segment_ = Segment::kRtrRead;
        return on_queue_message_header(h, payload_length, wire::kQueueReadRequest, wire::kReadRequestSize);
      }
      match = false;
      break;
    case RtrType::kNone:
      break;
  }
  if (!match) return Placement::reject(term::kLlpNoMatchingRtr);
  segment_ = Segment::kRtr;
  return Placement::into({});
}

Placement RdmapReceiver::on_send_header(const wire::DdpHeader& h, std::size_t payload_length) {
  const wire::Msn msn{h.msn};
  if (msn != expected_msn_[wire::kQueueSend]) {
    return Placement::reject(term::kDdpUntaggedInvalidMsn);
  }
  const bool first = !send_in_progress_;
  const wire::MessageOffset mo{h.message_offset};
  if (mo != (first ? wire::MessageOffset{0} : send_placed_)) {
    return Placement::reject(term::kDdpUntaggedInvalidMo);
  }
  segment_ = Segment::kSend;
  auto r = delegate_.resolve_receive(msn, mo, payload_length, first);
  if (!r) return first ? no_receive(r.error()) : Placement::reject(r.error());
  send_in_progress_ = true;
  // The receive's memory failed this side, not the peer: a local catastrophic error.
  return from(r, term::kRdmapLocalCatastrophic);
}

// RFC 7306: an Immediate Data message is one untagged message of exactly eight bytes on queue
// 0, in the Send queue's MSN sequence; it consumes the next receive (no buffer: DDP / untagged
// / 0x02, as a Send). It cannot come between the segments of a Send.
Placement RdmapReceiver::on_immediate_header(const wire::DdpHeader& h, std::size_t payload_length) {
  Placement checked = on_queue_message_header(h, payload_length, wire::kQueueSend,
                                              wire::kImmediateDataSize);
  if (checked.kind == Placement::Kind::kReject) return checked;
  if (send_in_progress_) return Placement::reject(term::kRdmapUnexpectedOpcode);
  auto r = delegate_.resolve_receive(wire::Msn{h.msn}, wire::MessageOffset{0}, 0, true);
  if (!r) return no_receive(r.error());
  segment_ = Segment::kImmediate;
  return checked;
}

Placement RdmapReceiver::no_receive(const wire::TerminateCode& code) {
  if (code == term::kDdpUntaggedNoBuffer && delegate_.wait_for_receive()) return Placement::wait();
  return Placement::reject(code);
}

Placement RdmapReceiver::on_queue_message_header(const wire::DdpHeader& h, std::size_t payload_length,
                                                 std::uint32_t queue, std::size_t exact_length) {
  if (wire::Msn{h.msn} != expected_msn_[queue]) {
    return Placement::reject(term::kDdpUntaggedInvalidMsn);
  }
  if (h.message_offset != 0) return Placement::reject(term::kDdpUntaggedInvalidMo);
  // Both messages are short and must come whole, in one segment.
  if (!h.last) return Placement::reject(term::kDdpUntaggedTooLong);
  if (exact_length != 0 && payload_length != exact_length) {
    return Placement::reject(payload_length > exact_length ? term::kDdpUntaggedTooLong
                                                           : term::kRdmapUnspecified);
  }
  if (payload_length > kMaxBufferedPayload) return Placement::reject(term::kDdpUntaggedTooLong);
  return Placement::buffered();
}

std::optional<wire::TerminateCode> RdmapReceiver::on_segment_end(ConstByteSpan buffered) {
  if (segment_ == Segment::kWrite) {
    write_bytes_ += static_cast<std::uint32_t>(payload_length_);
    if (header_.last) {
      last_write_length_ = write_bytes_;
      write_bytes_ = 0;
    }
    return std::nullopt;
  }
  const std::uint32_t write_before = last_write_length_;
  if (segment_ != Segment::kIgnore && segment_ != Segment::kReadResponse) last_write_length_ = 0;
  switch (segment_) {
    case Segment::kIgnore:
    case Segment::kWrite:
      return std::nullopt;
    case Segment::kImmediate:
      return end_immediate(buffered, write_before);
    case Segment::kReadResponse:
      if (header_.last) return delegate_.read_response_complete();
      return std::nullopt;
    case Segment::kSend:
      return end_send_segment();
    case Segment::kRtr:
      end_rtr();
      return std::nullopt;
    case Segment::kRtrRead:
      return end_rtr_read(buffered);
    case Segment::kReadRequest:
      return end_read_request(buffered);
    case Segment::kAtomicRequest:
      return end_atomic_request(buffered);
    case Segment::kAtomicResponse:
      return end_atomic_response(buffered);
    case Segment::kTerminate:
      end_terminate(buffered);
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<wire::TerminateCode> RdmapReceiver::end_send_segment() {
  send_placed_ = send_placed_ + static_cast<std::uint32_t>(payload_length_);
  if (!header_.last) return std::nullopt;
  InboundSend s;
  s.msn = wire::Msn{header_.msn};
  s.length = send_placed_.value();
  s.opcode = static_cast<RdmapOpcode>(header_.opcode);
  s.invalidate_stag = wire::Stag{header_.ulp_reserved};
  send_in_progress_ = false;
  send_placed_ = wire::MessageOffset{0};
  ++expected_msn_[wire::kQueueSend];
  return delegate_.receive_complete(s);
}

std::optional<wire::TerminateCode> RdmapReceiver::end_immediate(ConstByteSpan buffered,
                                                                std::uint32_t write_length) {
  ++expected_msn_[wire::kQueueSend];
  auto imm = wire::decode_immediate_data(buffered);
  if (!imm) return term::kRdmapUnspecified;  // length was checked in the header; defensive
  InboundSend s;
  s.msn = wire::Msn{header_.msn};
  s.length = write_length;
  s.opcode = static_cast<RdmapOpcode>(header_.opcode);
  s.immediate = imm->data;
  return delegate_.receive_complete(s);
}

void RdmapReceiver::end_rtr() {
  expected_rtr_ = RtrType::kNone;
  // An RTR Send uses MSN 1 but no receive buffer; an RTR Write consumes nothing.
  if (!header_.tagged) ++expected_msn_[wire::kQueueSend];
  delegate_.rtr_received();
}

std::optional<wire::TerminateCode> RdmapReceiver::end_rtr_read(ConstByteSpan buffered) {
  ++expected_msn_[wire::kQueueReadRequest];
  auto rr = wire::decode_read_request(buffered);
  if (!rr || rr->size != 0) return term::kLlpNoMatchingRtr;
  expected_rtr_ = RtrType::kNone;
  rtr_read_unanswered_ = true;
  delegate_.rtr_received();
  return delegate_.read_request(*rr);
}

std::optional<wire::TerminateCode> RdmapReceiver::end_read_request(ConstByteSpan buffered) {
  ++expected_msn_[wire::kQueueReadRequest];
  auto rr = wire::decode_read_request(buffered);
  if (!rr) return term::kRdmapUnspecified;  // length was checked in the header; defensive
  if (auto beyond = take_ird_slot()) return beyond;
  return delegate_.read_request(*rr);
}

// RFC 7306: an Atomic Request takes a place in the Read Request queue's MSN sequence and one of
// the IRD slots its Read Requests take, until its response has been sent.
std::optional<wire::TerminateCode> RdmapReceiver::end_atomic_request(ConstByteSpan buffered) {
  ++expected_msn_[wire::kQueueReadRequest];
  auto request = wire::decode_atomic_request(buffered);
  if (!request) return term::kRdmapUnspecified;  // length was checked in the header; defensive
  if (auto beyond = take_ird_slot()) return beyond;
  return delegate_.atomic_request(*request);
}

std::optional<wire::TerminateCode> RdmapReceiver::end_atomic_response(ConstByteSpan buffered) {
  ++expected_msn_[wire::kQueueAtomicResponse];
  auto response = wire::decode_atomic_response(buffered);
  if (!response) return term::kRdmapUnspecified;  // length was checked in the header; defensive
  return delegate_.atomic_response(*response);
}

void RdmapReceiver::end_terminate(ConstByteSpan buffered) {
  ++expected_msn_[wire::kQueueTerminate];
  terminated_ = true;
  auto t = wire::decode_terminate(buffered);
  wire::TerminateMessage msg;
  if (t) {
    msg = *t;
  } else if (buffered.size() >= wire::kTerminateControlSize) {
    msg.raw_control = load_be32(buffered.data());
  } else {
    msg.has_control = false;
  }
  delegate_.terminate_received(msg);
}

}  // namespace uwarp::proto
