// The RDMAP engine of one connection, sans I/O: bytes of the TCP stream in, FPDUs to send out,
// and the RDMAP/DDP state between them (RFC 5040 sections 5-7, RFC 5041 sections 5-7, RFC 6581
// section 3). It puts together, as members:
// - receiving: the FPDU reader and the RDMAP receive rules (RdmapReceiver), answered here: a
//   Write or Send placed through the port, a Read Response matched against the outbound Read
//   queue, a Read Request queued on the inbound Read queue (read_queues.h);
// - transmitting: RdmapTransmitter (what goes next, MSNs, segmentation into the batch);
// - Terminates: a protocol violation found on receive becomes one OutboundTerminate, sent once.
//
// It has no sockets, threads or clocks. Memory and work queues belong to the verbs layer, which
// the engine reaches through RdmapPort (rdmap_port.h); the caller (runtime::RdmapDriver, for the
// stream) feeds received bytes, fills transmit batches and reports what TCP has taken.
//
// Thread: not thread-safe; one owner. The stream's runtime::RdmapDriver owns it and drives it
// under the QP lock (the port's lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "proto/fpdu_reader.h"
#include "proto/outbound_terminate.h"
#include "proto/rdmap_port.h"
#include "proto/rdmap_receiver.h"
#include "proto/rdmap_transmitter.h"
#include "proto/read_queues.h"
#include "proto/revoked_region.h"
#include "proto/rtr.h"
#include "proto/tx_batch.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

class RdmapEngine final : private RxDelegate {
 public:
  struct Params {
    bool crc = false;
    bool send_markers = false;     // the peer asked for MPA markers in what it receives
    bool receive_markers = false;  // we asked for them in what we receive
    std::uint16_t ird = 0;
    std::uint16_t ord = 0;
    RtrType send_rtr = RtrType::kNone;    // initiator: the RTR to send first
    RtrType expect_rtr = RtrType::kNone;  // responder: the RTR to wait for
    std::size_t max_ulpdu = 1442;
  };
  // Which messages the QP's state lets out (rdmap_transmitter.h).
  using TxGate = proto::TxGate;

  RdmapEngine(RdmapPort& port, const Params& params);
  ~RdmapEngine() override;
  RdmapEngine(const RdmapEngine&) = delete;
  RdmapEngine& operator=(const RdmapEngine&) = delete;

  // Receive. feed(): bytes received into a bounce buffer; direct_target() / commit_direct():
  // bytes received straight into their place (FpduReader). After a protocol violation the
  // engine queues a Terminate and rx_open() turns false.
  std::size_t feed(ConstByteSpan bytes);
  ByteSpan direct_target() const { return reader_.direct_target(); }
  void commit_direct(std::size_t n);
  // A receive scattered ahead of the headers, and its bytes taken in place (FpduReader).
  std::size_t plan_ahead(std::span<FpduReader::Piece> out, std::size_t most,
                         std::size_t min_ahead) {
    return rx_open() ? reader_.plan_ahead(out, most, min_ahead) : 0;
  }
  std::size_t take_in_place(ByteSpan bytes);
  bool rx_in_payload() const { return reader_.in_payload(); }
  bool rx_open() const;
  // No FPDU is partly received (an end of stream here is an orderly close).
  bool rx_at_boundary() const { return reader_.at_boundary(); }
  // Reception waits for a receive (RdmapPort::wait_for_receive): feed() takes no byte until
  // resume_rx(), which asks the port again (and may end in the Terminate for no buffer).
  bool rx_waiting() const { return reader_.waiting(); }
  // FPDUs received whole so far (statistics).
  std::uint64_t fpdus_received() const { return reader_.fpdus(); }
  void resume_rx();

  // Transmit: appends FPDUs to `batch`; true if it added any.
  bool fill(TxBatch& batch, TxGate gate) { return tx_.fill(batch, gate); }
  // A message that fill() queued (its batch cookie) has been handed to TCP completely.
  void sent(std::uint64_t cookie) {
    if (tx_.sent(cookie)) receiver_.read_response_sent();
  }
  void set_max_ulpdu(std::size_t max_ulpdu) { tx_.set_max_ulpdu(max_ulpdu); }
  // Queues one zero-length RDMA Write to the RTR STag at the next message boundary: it touches
  // no memory at the peer and wakes a Linux siw responder that missed the first FPDUs of a
  // connection (docs/interop.md).
  void queue_nudge() { tx_.queue_nudge(); }

  // The QP failed: the message being segmented is not continued and the Read queues are
  // emptied (their memory may be released once this returns). A queued Terminate still goes.
  void abandon();
  // The application revokes `memory` (deregistration). If an access in progress reaches into it,
  // the engine fails at once with a Terminate (and the port hears terminate_queued, so the QP
  // fails and abandons the engine's work), so that it touches that memory no more:
  // - the payload being placed: a tagged segment gets the DDP "invalid STag" Terminate (as one
  //   that arrived after the deregistration), an untagged one RDMAP "local catastrophic";
  // - a Read Request queued or being answered through that region (not through another region
  //   over the same bytes): RDMAP "invalid STag" (as a Read Request that arrived after the
  //   deregistration);
  // - the message being segmented, or (says the caller, `in_use_elsewhere`) FPDUs queued in its
  //   batch or memory its port resolved earlier (a Send's receive, a Read's sink): RDMAP
  //   "local catastrophic".
  // Returns true if it failed. Call only while the QP receives (not after it failed: its work
  // was abandoned then).
  bool revoke(const RevokedRegion& revoked, bool in_use_elsewhere);

 private:
  // RxDelegate.
  ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset to, std::size_t length) override;
  ScatterResult resolve_read_response(wire::Stag stag, wire::TaggedOffset to,
                                      std::size_t length) override;
  ByteSpan read_response_ahead(std::size_t skip, std::size_t length) override;
  std::optional<wire::TerminateCode> read_response_complete() override;
  ScatterResult resolve_receive(wire::Msn msn, wire::MessageOffset mo, std::size_t length,
                                bool first_segment) override;
  std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) override;
  bool wait_for_receive() override { return port_.wait_for_receive(); }
  std::optional<wire::TerminateCode> read_request(const wire::ReadRequest& request) override;
  std::optional<wire::TerminateCode> atomic_request(const wire::AtomicRequest& request) override;
  std::optional<wire::TerminateCode> atomic_response(const wire::AtomicResponse& response) override;
  void terminate_received(const wire::TerminateMessage& message) override;
  void rtr_received() override;

  // Reception failed: queue the Terminate that answers it (once) and tell the port.
  void handle_rx_failure();

  RdmapPort& port_;
  OutboundReadQueue orq_;
  InboundReadQueue irq_;
  OutboundTerminate terminate_;
  RdmapReceiver receiver_;
  FpduReader reader_;
  RdmapTransmitter tx_;  // refers to port_, orq_, irq_ and terminate_
};

}  // namespace uwarp::proto
