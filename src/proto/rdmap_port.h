// The RDMAP engine's contract with the verbs layer: one posted work request as the engine
// transmits it (OutboundRequest), and what the engine asks of the QP that owns it (RdmapPort):
// memory behind STags, the receive queue, the send queue, completions and the Terminate events.
// verbs::QueuePair implements the port; the engine holds it by reference for its lifetime.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/bytes.h"
#include "proto/read_queues.h"
#include "proto/rdmap_receiver.h"
#include "uwarp/expected.h"
#include "wire/quantities.h"
#include "wire/rdmap.h"
#include "wire/rdmap_ext.h"

namespace uwarp::proto {

// One posted work request, as the engine transmits it.
struct OutboundRequest {
  // kWriteImmediate: RFC 7306's RDMA Write with Immediate Data, an RDMA Write message followed
  // by an Immediate Data message; kImmediate: the Immediate Data message alone. kLocal: an
  // operation of the port's own (a memory bind or invalidation) that takes effect when its turn
  // comes and puts nothing on the wire. kAtomic: an RFC 7306 Atomic Request on the 64-bit word
  // at remote_stag / remote_offset, whose result the port takes in atomic_complete().
  enum class Kind : std::uint8_t {
    kSend, kSendInvalidate, kWrite, kRead, kWriteImmediate, kImmediate, kLocal, kAtomic
  };
  std::uint64_t seq = 0;  // the port's name for it, increasing in posting order
  Kind kind = Kind::kSend;
  bool solicited = false;       // Sends, Immediate Data: the Solicited Event variant
  bool fence = false;           // waits until every earlier RDMA Read has completed
  std::uint32_t length = 0;     // payload bytes (Reads: bytes to read)
  wire::Stag remote_stag;            // Write: the sink; Read: the source
  wire::TaggedOffset remote_offset;  // its Tagged Offset
  wire::Stag invalidate_stag;        // kSendInvalidate
  wire::Stag sink_stag;              // Read: the local sink advertised to the peer
  wire::TaggedOffset sink_offset;
  std::uint64_t immediate = 0;       // kWriteImmediate, kImmediate: the eight bytes, big-endian
  // kAtomic: the operation and operands come from RdmapPort::atomic_request (kept out of here:
  // this is built for every request, on the path of every message).
};

// What the engine needs of the verbs layer. Called from inside the engine's calls, on the
// engine's owner thread; implementations must not call back into the engine except abandon().
class RdmapPort {
 public:
  virtual ~RdmapPort() = default;

  // Receive: where a tagged Write's bytes go, or the DDP tagged-buffer error.
  virtual ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset offset,
                                      std::size_t length) = 0;
  // An untagged Send segment at message offset `mo`: where it goes in the receive buffer the
  // message consumes (the first segment takes the next receive).
  virtual ScatterResult resolve_receive(wire::Msn msn, wire::MessageOffset mo, std::size_t length,
                                        bool first_segment) = 0;
  virtual std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) = 0;
  // No receive is posted for the next message: true to wait for one (RxDelegate::
  // wait_for_receive; the engine's owner resumes it, RdmapEngine::resume_rx), false for the
  // Terminate.
  virtual bool wait_for_receive() = 0;
  // A Read Request's source [offset, offset + length) of `stag`, checked for remote read.
  virtual Expected<ReadSource, wire::TerminateCode> resolve_read_source(wire::Stag stag,
                                                                        wire::TaggedOffset offset,
                                                                        std::uint32_t length) = 0;
  // Bytes [offset, offset + length) of the sink of outbound Read `seq` (checked by the engine
  // against the sink it advertised); false if the sink cannot hold them.
  virtual ScatterResult resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                          std::size_t length) = 0;
  // The same bytes if they lie in one piece of that sink, else empty; unlike resolve_read_sink,
  // it changes nothing (what resolve_read_sink returned stays valid). For a receive that puts
  // response bytes in place before their headers are read (FpduSink::placement_ahead).
  virtual ByteSpan read_sink_piece(std::uint64_t /*seq*/, std::size_t /*offset*/,
                                   std::size_t /*length*/) {
    return {};
  }
  // Outbound Read `seq` has its whole response.
  virtual void read_complete(std::uint64_t seq) = 0;
  // RFC 7306: an Atomic Request's target, the 64-bit word at `offset` of `stag`, checked for
  // remote atomic access and natural alignment; its span is writable memory.
  virtual Expected<ReadSource, wire::TerminateCode> resolve_atomic_target(
      wire::Stag stag, wire::TaggedOffset offset) = 0;
  // Outbound Atomic Request `seq` was answered: the word held `original_value` before. The
  // port stores it in the request's local memory and completes it.
  virtual void atomic_complete(std::uint64_t seq, std::uint64_t original_value) = 0;

  // Transmit: the oldest posted request not yet started (kind and fence are enough), or false.
  virtual bool peek_request(OutboundRequest& next) = 0;
  // Starts that request: resolves its local memory, appends a Send's or Write's bytes to
  // `payload` (valid until request_sent or abandon) and fills in the rest of `r` (a Read's
  // sink). False if that failed; the port then has completed it in error and moved the QP to
  // ERROR.
  virtual bool start_request(OutboundRequest& r, std::vector<ConstByteSpan>& payload) = 0;
  // Request `seq` has been handed to TCP completely (a Read: its Read Request).
  virtual void request_sent(std::uint64_t seq) = 0;
  // Started request `seq`, a kAtomic: its operation and operands, masks included (the engine
  // fills in the identifier and the target).
  virtual wire::AtomicRequest atomic_request(std::uint64_t seq) = 0;

  // The engine found a protocol violation and queued this Terminate (the QP fails).
  virtual void terminate_queued(const wire::TerminateCode& code) = 0;
  // The peer sent a Terminate; reception has ended.
  virtual void terminate_received(const wire::TerminateMessage& message) = 0;
  // Our Terminate has been handed to TCP: the connection may close.
  virtual void terminate_sent() = 0;
  // Responder in peer-to-peer mode: the RTR the engine waited for has arrived.
  virtual void rtr_received() = 0;
};

}  // namespace uwarp::proto
