// RdmapEngine: construction, the receive side's answers (RFC 5040 section 5.2: Read Responses
// matched to the oldest outstanding Read, Read Requests queued for their response, and RFC 7306
// Atomic Requests and Responses alike; RFC 5040
// section 7: a violation becomes one Terminate) and abandoning outstanding work. The transmit
// side is RdmapTransmitter.
#include "proto/rdmap_engine.h"

#include "proto/atomic_operation.h"

namespace uwarp::proto {

RdmapEngine::RdmapEngine(RdmapPort& port, const Params& params)
    : port_(port),
      orq_(params.ord),
      receiver_(*this, params.ird),
      reader_(receiver_, params.crc, params.receive_markers),
      tx_(RdmapTransmitter::Links{port_, orq_, irq_, terminate_},
          Framing{params.crc, params.send_markers}, params.max_ulpdu, params.send_rtr,
          params.expect_rtr != RtrType::kNone) {
  receiver_.expect_rtr(params.expect_rtr);
}

RdmapEngine::~RdmapEngine() = default;

std::size_t RdmapEngine::feed(ConstByteSpan bytes) {
  if (!rx_open()) return bytes.size();
  const std::size_t n = reader_.feed(bytes);
  if (reader_.failed()) handle_rx_failure();
  return n;
}

void RdmapEngine::commit_direct(std::size_t n) {
  reader_.commit_direct(n);
  if (reader_.failed()) handle_rx_failure();
}

std::size_t RdmapEngine::take_in_place(ByteSpan bytes) {
  if (!rx_open()) return 0;
  const std::size_t n = reader_.take_in_place(bytes);
  if (reader_.failed()) handle_rx_failure();
  return n;
}

void RdmapEngine::resume_rx() {
  if (!rx_open()) return;
  reader_.resume();
  if (reader_.failed()) handle_rx_failure();
}

bool RdmapEngine::rx_open() const {
  return !reader_.failed() && !receiver_.terminated() && !terminate_.queued();
}

bool RdmapEngine::revoke(const RevokedRegion& revoked, bool in_use_elsewhere) {
  const ConstByteSpan memory = revoked.memory;
  if (terminate_.queued()) return false;  // failed already: its work is abandoned
  if (reader_.places_into(memory)) {
    reader_.abort(reader_.segment_tagged() ? wire::term::kDdpTaggedInvalidStag
                                           : wire::term::kRdmapLocalCatastrophic);
    handle_rx_failure();
    return true;
  }
  RxFailure failure;  // no header: the Terminate names no received segment
  if (irq_.reads_through(revoked.region)) {
    failure.code = wire::term::kRdmapInvalidStag;
  } else if (tx_.reads_from(revoked) || in_use_elsewhere) {
    failure.code = wire::term::kRdmapLocalCatastrophic;
  } else {
    return false;
  }
  port_.terminate_queued(terminate_.queue(failure));
  return true;
}

void RdmapEngine::abandon() {
  tx_.abandon();
  orq_.clear();
  irq_.clear();
}

ScatterResult RdmapEngine::resolve_write(wire::Stag stag, wire::TaggedOffset to,
                                         std::size_t length) {
  return port_.resolve_write(stag, to, length);
}

ScatterResult RdmapEngine::resolve_read_response(wire::Stag stag, wire::TaggedOffset to,
                                                 std::size_t length) {
  const auto target = orq_.match_segment(stag, to, length);
  if (!target) return Unexpected{target.error()};
  if (target->rtr) return Scatter{};
  ScatterResult r = port_.resolve_read_sink(target->seq, target->offset, length);
  if (r) orq_.placed(length);
  return r;
}

ByteSpan RdmapEngine::read_response_ahead(std::size_t skip, std::size_t length) {
  const auto target = orq_.ahead(skip, length);
  if (!target) return {};
  return port_.read_sink_piece(target->seq, target->offset, length);
}

std::optional<wire::TerminateCode> RdmapEngine::read_response_complete() {
  const auto read = orq_.complete();
  if (!read) return read.error();
  if (!read->rtr) port_.read_complete(read->seq);
  return std::nullopt;
}

ScatterResult RdmapEngine::resolve_receive(wire::Msn msn, wire::MessageOffset mo,
                                           std::size_t length, bool first_segment) {
  return port_.resolve_receive(msn, mo, length, first_segment);
}

std::optional<wire::TerminateCode> RdmapEngine::receive_complete(const InboundSend& send) {
  return port_.receive_complete(send);
}

std::optional<wire::TerminateCode> RdmapEngine::read_request(const wire::ReadRequest& rr) {
  InboundRead in;
  in.sink_stag = wire::Stag{rr.sink_stag};
  in.sink_offset = wire::TaggedOffset{rr.sink_to};
  if (rr.size > 0) {
    auto source = port_.resolve_read_source(wire::Stag{rr.source_stag},
                                            wire::TaggedOffset{rr.source_to}, rr.size);
    if (!source) return source.error();
    in.source = std::move(*source);
  }
  irq_.push(std::move(in));
  return std::nullopt;
}

// RFC 7306: an Atomic Request naming an operation it does not define is an unexpected opcode;
// its target is checked now and operated on when its response goes (in the order of the
// requests before it).
std::optional<wire::TerminateCode> RdmapEngine::atomic_request(const wire::AtomicRequest& request) {
  if (!is_known_atomic(request.opcode)) return wire::term::kRdmapUnexpectedOpcode;
  auto target = port_.resolve_atomic_target(wire::Stag{request.remote_stag},
                                            wire::TaggedOffset{request.remote_to});
  if (!target) return target.error();
  InboundRead in;
  in.source = std::move(*target);
  in.atomic = request;
  irq_.push(std::move(in));
  return std::nullopt;
}

std::optional<wire::TerminateCode> RdmapEngine::atomic_response(const wire::AtomicResponse& response) {
  const auto seq = orq_.complete_atomic(response.original_request_id);
  if (!seq) return seq.error();
  port_.atomic_complete(*seq, response.original_value);
  return std::nullopt;
}

void RdmapEngine::terminate_received(const wire::TerminateMessage& message) {
  port_.terminate_received(message);
}

void RdmapEngine::rtr_received() {
  tx_.rtr_received();
  port_.rtr_received();
}

void RdmapEngine::handle_rx_failure() {
  if (terminate_.queued()) return;
  port_.terminate_queued(terminate_.queue(*reader_.failure()));
}

}  // namespace uwarp::proto
