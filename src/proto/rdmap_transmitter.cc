// RdmapTransmitter: the message order and headers of RFC 5040 sections 5.1-5.3, RFC 6581
// section 3 and RFC 7306 (an RDMA Write with Immediate is the Write message, then at once the
// Immediate Data message on queue 0; Atomic Requests go in the Read Request queue's order and
// their responses in the Read Responses'); completions as Linux siw: a Send or Write completes
// once TCP has all of it, an RDMA Read or Atomic when its response has arrived.
#include "proto/rdmap_transmitter.h"

#include "proto/atomic_operation.h"

namespace uwarp::proto {
namespace {

// A batch cookie: what kind of message ended, and for the send queue which request.
// kPart: a message whose request completes with a later one (the Write of a Write with
// Immediate).
enum class CookieKind : std::uint64_t {
  kRequest = 0, kReadResponse = 1, kTerminate = 2, kRtr = 3, kPart = 4, kAtomicResponse = 5
};
constexpr int kKindShift = 60;
constexpr std::uint64_t make_cookie(CookieKind k, std::uint64_t seq = 0) {
  return (static_cast<std::uint64_t>(k) << kKindShift) | seq;
}
constexpr CookieKind cookie_kind(std::uint64_t c) { return static_cast<CookieKind>(c >> kKindShift); }
constexpr std::uint64_t cookie_seq(std::uint64_t c) {
  return c & ((std::uint64_t{1} << kKindShift) - 1);
}

using wire::tagged_header;
using wire::untagged_header;

wire::RdmapOpcode send_opcode(const OutboundRequest& r) {
  if (r.kind == OutboundRequest::Kind::kSendInvalidate) {
    return r.solicited ? wire::RdmapOpcode::kSendSeInvalidate : wire::RdmapOpcode::kSendInvalidate;
  }
  return r.solicited ? wire::RdmapOpcode::kSendSe : wire::RdmapOpcode::kSend;
}

}  // namespace

RdmapTransmitter::RdmapTransmitter(const Links& links, Framing framing, std::size_t max_ulpdu,
                                   RtrType send_rtr, bool await_rtr)
    : port_(links.port),
      orq_(links.orq),
      irq_(links.irq),
      terminate_(links.terminate),
      framing_(framing),
      max_ulpdu_(ulpdu_limit(max_ulpdu)),
      send_rtr_(send_rtr),
      awaiting_rtr_(await_rtr) {
  gather_.reserve(16);
}

bool RdmapTransmitter::fill(TxBatch& batch, TxGate gate) {
  bool added = false;
  while (true) {
    if (!segmenter_.active()) {
      Message m;
      if (!next_message(m, gate)) break;
      segmenter_.start(m);
    }
    const std::size_t before = batch.pending_bytes();
    const bool done = segmenter_.fill(batch, max_ulpdu_, framing_);
    added = added || batch.pending_bytes() != before;
    if (!done) break;  // the batch is full
  }
  return added;
}

bool RdmapTransmitter::next_message(Message& m, TxGate gate) {
  gather_.clear();
  if (terminate_.queued()) return next_terminate(m);
  if (!gate.responses) return false;
  if (pending_immediate_) {
    const PendingImmediate p = *pending_immediate_;
    pending_immediate_.reset();
    immediate_message(m, p.seq, p.solicited, p.data);
    return true;
  }
  if (send_rtr_ != RtrType::kNone) return next_rtr(m);
  if (awaiting_rtr_) return false;
  if (nudge_pending_) return next_nudge(m);
  if (!irq_.empty()) return next_read_response(m);
  if (!gate.requests) return false;
  return next_request(m);
}

bool RdmapTransmitter::next_terminate(Message& m) {
  ConstByteSpan body;
  if (!terminate_.start(body)) return false;  // sent once
  gather_.push_back(body);
  m.header = untagged_header(wire::RdmapOpcode::kTerminate, wire::kQueueTerminate, term_msn_++);
  m.gather = gather_;
  m.length = body.size();
  m.cookie = make_cookie(CookieKind::kTerminate);
  return true;
}

// RFC 6581: the initiator's first message is the zero-length RTR the responder chose.
bool RdmapTransmitter::next_rtr(Message& m) {
  switch (send_rtr_) {
    case RtrType::kWrite:
      m.header =
          tagged_header(wire::RdmapOpcode::kRdmaWrite, wire::Stag{kRtrStag}, wire::TaggedOffset{0});
      break;
    case RtrType::kRead: {
      wire::ReadRequest rr;
      rr.source_stag = kRtrStag;
      gather_.push_back(read_request_bodies_.encode(rr));
      m.header =
          untagged_header(wire::RdmapOpcode::kReadRequest, wire::kQueueReadRequest, read_msn_++);
      m.length = wire::kReadRequestSize;
      orq_.push_rtr_read();
      break;
    }
    default:
      m.header = untagged_header(wire::RdmapOpcode::kSend, wire::kQueueSend, send_msn_++);
      break;
  }
  send_rtr_ = RtrType::kNone;
  m.gather = gather_;
  m.cookie = make_cookie(CookieKind::kRtr);
  return true;
}

bool RdmapTransmitter::next_nudge(Message& m) {
  nudge_pending_ = false;
  m.header =
      tagged_header(wire::RdmapOpcode::kRdmaWrite, wire::Stag{kRtrStag}, wire::TaggedOffset{0});
  m.gather = gather_;
  m.cookie = make_cookie(CookieKind::kRtr);
  return true;
}

bool RdmapTransmitter::next_read_response(Message& m) {
  if (irq_.next_is_atomic()) return next_atomic_response(m);
  ++read_responses_unsent_;
  const InboundRead& read = irq_.start_response();
  if (!read.source.bytes.empty()) gather_.push_back(read.source.bytes);
  m.header = tagged_header(wire::RdmapOpcode::kReadResponse, read.sink_stag, read.sink_offset);
  m.gather = gather_;
  m.length = read.source.bytes.size();
  m.cookie = make_cookie(CookieKind::kReadResponse);
  m.region = read.source.keep.get();
  return true;
}

bool RdmapTransmitter::next_atomic_response(Message& m) {
  if (read_responses_unsent_ > 0) return false;
  const InboundRead& request = irq_.start_response();
  // The word is writable memory, naturally aligned (RdmapPort::resolve_atomic_target).
  auto* word = reinterpret_cast<std::uint64_t*>(const_cast<std::uint8_t*>(request.source.bytes.data()));
  wire::AtomicResponse response;
  response.original_request_id = request.atomic->request_id;
  response.original_value = execute_atomic(*request.atomic, *word);
  gather_.push_back(atomic_response_bodies_.encode(response));
  m.header = untagged_header(wire::RdmapOpcode::kAtomicResponse, wire::kQueueAtomicResponse,
                             atomic_response_msn_++);
  m.gather = gather_;
  m.length = wire::kAtomicResponseSize;
  // Its source is released and its IRD slot freed once TCP has it, as a Read Response's.
  m.cookie = make_cookie(CookieKind::kAtomicResponse);
  return true;
}

bool RdmapTransmitter::next_request(Message& m) {
  OutboundRequest r;
  // Bounded by the port's queue: each local operation started is one request fewer.
  while (true) {
    if (!port_.peek_request(r)) return false;
    const bool read = r.kind == OutboundRequest::Kind::kRead || r.kind == OutboundRequest::Kind::kAtomic;
    if (!orq_.may_start(read, r.fence)) return false;
    if (!port_.start_request(r, gather_)) return false;
    if (r.kind != OutboundRequest::Kind::kLocal) break;
    port_.request_sent(r.seq);  // in effect now; nothing to send
  }
  m.length = r.length;
  m.cookie = make_cookie(CookieKind::kRequest, r.seq);
  switch (r.kind) {
    case OutboundRequest::Kind::kSend:
    case OutboundRequest::Kind::kSendInvalidate:
      m.header = untagged_header(send_opcode(r), wire::kQueueSend, send_msn_++);
      if (r.kind == OutboundRequest::Kind::kSendInvalidate) {
        m.header.ulp_reserved = r.invalidate_stag.value();
      }
      break;
    case OutboundRequest::Kind::kWrite:
      m.header = tagged_header(wire::RdmapOpcode::kRdmaWrite, r.remote_stag, r.remote_offset);
      break;
    case OutboundRequest::Kind::kLocal:
      break;  // not reached: handled above
    case OutboundRequest::Kind::kWriteImmediate:
      m.header = tagged_header(wire::RdmapOpcode::kRdmaWrite, r.remote_stag, r.remote_offset);
      m.cookie = make_cookie(CookieKind::kPart);
      pending_immediate_ = PendingImmediate{r.seq, r.solicited, r.immediate};
      break;
    case OutboundRequest::Kind::kImmediate:
      immediate_message(m, r.seq, r.solicited, r.immediate);
      return true;
    case OutboundRequest::Kind::kRead: {
      wire::ReadRequest rr;
      rr.sink_stag = r.sink_stag.value();
      rr.sink_to = r.sink_offset.value();
      rr.size = r.length;
      rr.source_stag = r.remote_stag.value();
      rr.source_to = r.remote_offset.value();
      gather_.push_back(read_request_bodies_.encode(rr));
      m.header =
          untagged_header(wire::RdmapOpcode::kReadRequest, wire::kQueueReadRequest, read_msn_++);
      m.length = wire::kReadRequestSize;
      orq_.push(OutboundRead{r.seq, r.sink_stag, r.sink_offset, r.length, 0});
      break;
    }
    case OutboundRequest::Kind::kAtomic:
      atomic_request(m, r);
      break;
  }
  m.gather = gather_;
  return true;
}

// RFC 7306: the Atomic Request takes the next MSN of the Read Request queue; its identifier is
// the request's seq (32 bits suffice: at most ORD are outstanding).
void RdmapTransmitter::atomic_request(Message& m, const OutboundRequest& r) {
  wire::AtomicRequest request = port_.atomic_request(r.seq);
  request.request_id = static_cast<std::uint32_t>(r.seq);
  request.remote_stag = r.remote_stag.value();
  request.remote_to = r.remote_offset.value();
  gather_.push_back(atomic_request_bodies_.encode(request));
  m.header = untagged_header(wire::RdmapOpcode::kAtomicRequest, wire::kQueueReadRequest, read_msn_++);
  m.length = wire::kAtomicRequestSize;
  OutboundRead pending;
  pending.seq = r.seq;
  pending.atomic = true;
  pending.request_id = request.request_id;
  orq_.push(pending);
}

void RdmapTransmitter::immediate_message(Message& m, std::uint64_t seq, bool solicited,
                                         std::uint64_t data) {
  gather_.clear();
  gather_.push_back(immediate_bodies_.encode(wire::ImmediateData{data}));
  const auto op = solicited ? wire::RdmapOpcode::kImmediateDataSe : wire::RdmapOpcode::kImmediateData;
  m.header = untagged_header(op, wire::kQueueSend, send_msn_++);
  m.gather = gather_;
  m.length = wire::kImmediateDataSize;
  m.cookie = make_cookie(CookieKind::kRequest, seq);
}

bool RdmapTransmitter::sent(std::uint64_t cookie) {
  switch (cookie_kind(cookie)) {
    case CookieKind::kRequest:
      port_.request_sent(cookie_seq(cookie));
      return false;
    case CookieKind::kReadResponse:
      --read_responses_unsent_;
      irq_.response_sent();
      return true;
    case CookieKind::kAtomicResponse:
      irq_.response_sent();
      return true;
    case CookieKind::kTerminate:
      port_.terminate_sent();
      return false;
    case CookieKind::kRtr:
    case CookieKind::kPart:
      return false;
  }
  return false;
}

}  // namespace uwarp::proto
