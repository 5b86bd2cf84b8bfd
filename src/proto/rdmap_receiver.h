// RDMAP/DDP receive semantics on top of FpduReader: RFC 5041 sections 5 and 7 (tagged and
// untagged placement, QN/MSN/MO rules, DDP errors) and RFC 5040 sections 5 and 7 (message types,
// Read Requests, Terminate reception, RDMAP errors), the RFC 7306 messages (Immediate Data,
// Atomic Request and Response), plus the RFC 6581 RTR message that a peer-to-peer initiator
// sends first. Every violation maps to exactly one Terminate code here.
//
// Memory and queues belong to the verbs layer, which the receiver reaches through RxDelegate.
// Thread: not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <optional>

#include "uwarp/expected.h"
#include "proto/fpdu_reader.h"
#include "proto/rtr.h"
#include "wire/quantities.h"
#include "wire/rdmap.h"
#include "wire/rdmap_ext.h"

namespace uwarp::proto {

// Where a segment's payload goes: memory of registered regions, in order. `on_demand`: some of it
// belongs to a region registered for on-demand paging, which the application may have
// unmapped; the reader then places it by copies that report a fault (base/faulting_memory.h).
struct Scatter {
  Scatter() = default;
  Scatter(std::span<const ByteSpan> s, bool od = false) : spans(s), on_demand(od) {}  // NOLINT
  std::span<const ByteSpan> spans;
  bool on_demand = false;
};
using ScatterResult = Expected<Scatter, wire::TerminateCode>;

// A completed inbound Send or RFC 7306 Immediate Data message, for the receive completion.
struct InboundSend {
  wire::Msn msn;
  // Send: the bytes placed. Immediate Data: the length of the RDMA Write message that came
  // just before it on the stream (an RDMA Write with Immediate), 0 if another came between.
  std::uint32_t length = 0;
  wire::RdmapOpcode opcode = wire::RdmapOpcode::kSend;
  wire::Stag invalidate_stag;  // valid for the "with Invalidate" opcodes
  std::uint64_t immediate = 0;  // the Immediate Data opcodes: its eight bytes, big-endian
};

class RxDelegate {
 public:
  virtual ~RxDelegate() = default;
  // Tagged RDMA Write of [to, to + length) in `stag`: where it goes, or the DDP tagged-buffer
  // error of the Terminate table.
  virtual ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset to,
                                      std::size_t length) = 0;
  // Tagged Read Response segment for the oldest outstanding RDMA Read.
  virtual ScatterResult resolve_read_response(wire::Stag stag, wire::TaggedOffset to,
                                              std::size_t length) = 0;
  // Where `length` bytes of the oldest Read's response would go that follow `skip` bytes after
  // those placed so far: memory its sink holds in one piece, cut where the sink ends; empty if
  // unknown. Changes nothing (for FpduSink::placement_ahead).
  virtual ByteSpan read_response_ahead(std::size_t /*skip*/, std::size_t /*length*/) { return {}; }
  // The last segment of a Read Response was placed: the oldest outstanding Read is complete.
  virtual std::optional<wire::TerminateCode> read_response_complete() = 0;
  // An untagged Send segment at message offset `mo` of message `msn`: where it goes in the
  // receive buffer that message consumes (the first segment of a message claims one). An
  // Immediate Data message claims one too (length 0: its eight bytes go to the completion).
  virtual ScatterResult resolve_receive(wire::Msn msn, wire::MessageOffset mo, std::size_t length,
                                        bool first_segment) = 0;
  virtual std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) = 0;
  // No receive is posted for the next message (resolve_receive answered DDP / untagged / no
  // buffer): true if reception is to wait for one (a receiver not ready) rather than end with
  // that Terminate. Asked again each time the waiting reception resumes.
  virtual bool wait_for_receive() = 0;
  // A valid Read Request within IRD: validate the source and queue the Read Response.
  virtual std::optional<wire::TerminateCode> read_request(const wire::ReadRequest& request) = 0;
  // RFC 7306: an Atomic Request within IRD (queued with the Read Requests, in order), and the
  // Atomic Response to our oldest outstanding Atomic Request.
  virtual std::optional<wire::TerminateCode> atomic_request(const wire::AtomicRequest& request) = 0;
  virtual std::optional<wire::TerminateCode> atomic_response(const wire::AtomicResponse& response) = 0;
  // The peer sent a Terminate. Reception ends after this call.
  virtual void terminate_received(const wire::TerminateMessage& message) = 0;
  // The RTR the receiver was told to expect has arrived (RFC 6581).
  virtual void rtr_received() = 0;
};

class RdmapReceiver final : public FpduSink {
 public:
  RdmapReceiver(RxDelegate& delegate, std::uint32_t ird) : delegate_(delegate), ird_(ird) {}

  // RFC 6581: the first message must be this zero-length RTR (kNone: no RTR expected).
  void expect_rtr(RtrType type) { expected_rtr_ = type; }
  // A Read Response for one received Read Request was completely sent: frees one IRD slot.
  // Responses go out in the order the requests came, so the first one after an RTR Read
  // answers it; it held no slot (the RTR does not count against IRD) and frees none.
  void read_response_sent() {
    if (rtr_read_unanswered_) {
      rtr_read_unanswered_ = false;
      return;
    }
    if (reads_in_progress_ > 0) --reads_in_progress_;
  }
  bool terminated() const { return terminated_; }

  Placement on_segment_header(const wire::DdpHeader& header, std::size_t payload_length) override;
  std::optional<wire::TerminateCode> on_segment_end(ConstByteSpan buffered) override;
  // Ahead only of a Read Response segment that is not its response's last: the requester knows
  // the Read's length, so its sink is written in full whatever the responder's segments.
  ByteSpan placement_ahead(std::size_t skip, std::size_t length) override {
    if (segment_ != Segment::kReadResponse || header_.last || terminated_) return {};
    return delegate_.read_response_ahead(skip, length);
  }

 private:
  Placement on_rtr_header(const wire::DdpHeader& h, std::size_t payload_length);
  Placement on_send_header(const wire::DdpHeader& h, std::size_t payload_length);
  Placement on_immediate_header(const wire::DdpHeader& h, std::size_t payload_length);
  // resolve_receive refused a message's first segment with `code`: the Terminate, or a wait for
  // a receive (RxDelegate::wait_for_receive).
  Placement no_receive(const wire::TerminateCode& code);
  Placement on_queue_message_header(const wire::DdpHeader& h, std::size_t payload_length,
                                    std::uint32_t queue, std::size_t exact_length);
  // The placement for `r`; `fault`: the Terminate if on-demand memory faults.
  static Placement from(const ScatterResult& r, const wire::TerminateCode& fault) {
    if (!r) return Placement::reject(r.error());
    return Placement{Placement::Kind::kScatter, r->spans, fault, r->on_demand};
  }
  // on_segment_end, by what the segment was.
  std::optional<wire::TerminateCode> end_send_segment();
  std::optional<wire::TerminateCode> end_immediate(ConstByteSpan buffered,
                                                   std::uint32_t write_length);
  void end_rtr();
  std::optional<wire::TerminateCode> end_rtr_read(ConstByteSpan buffered);
  std::optional<wire::TerminateCode> end_read_request(ConstByteSpan buffered);
  std::optional<wire::TerminateCode> end_atomic_request(ConstByteSpan buffered);
  std::optional<wire::TerminateCode> end_atomic_response(ConstByteSpan buffered);
  void end_terminate(ConstByteSpan buffered);
  // A Read or Atomic Request takes an IRD slot until its response has been sent; the Terminate
  // if none is free.
  std::optional<wire::TerminateCode> take_ird_slot() {
    if (reads_in_progress_ >= ird_) return wire::term::kRdmapCatastrophicStream;
    ++reads_in_progress_;
    return std::nullopt;
  }

  RxDelegate& delegate_;
  std::uint32_t ird_;
  std::uint32_t reads_in_progress_ = 0;
  bool rtr_read_unanswered_ = false;  // the peer's RTR Read awaits its (empty) response
  RtrType expected_rtr_ = RtrType::kNone;
  bool terminated_ = false;

  // Per untagged queue: next expected MSN (RFC 5041 section 5.3: starts at 1).
  wire::Msn expected_msn_[wire::kUntaggedQueues] = {wire::kInitialMsn, wire::kInitialMsn,
                                                    wire::kInitialMsn, wire::kInitialMsn};
  // Send queue: the message in progress and bytes already placed (the MO its next segment
  // carries).
  bool send_in_progress_ = false;
  wire::MessageOffset send_placed_;
  // RDMA Write with Immediate (RFC 7306): the bytes of the Write message in progress, and of
  // the one that ended with the last segment received (cleared by any other message).
  std::uint32_t write_bytes_ = 0;
  std::uint32_t last_write_length_ = 0;

  // What the segment being received is, for on_segment_end.
  enum class Segment : std::uint8_t {
    kIgnore, kWrite, kReadResponse, kSend, kImmediate, kReadRequest, kAtomicRequest,
    kAtomicResponse, kTerminate, kRtr, kRtrRead
  };
  Segment segment_ = Segment::kIgnore;
  wire::DdpHeader header_;
  std::size_t payload_length_ = 0;
};

}  // namespace uwarp::proto
