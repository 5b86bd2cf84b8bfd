// The transmit side of one connection's RDMAP engine: which message goes next (the queued
// Terminate, our RTR, a nudge, Read and Atomic Responses, then the send queue in order, held by
// fences and ORD), its DDP header and MSN (RFC 5041 section 5.3: each untagged queue's MSN
// starts at 1), its segmentation into the transmit batch, and what follows once TCP has taken it.
//
// Owner: RdmapEngine. The Read queues and the Terminate it takes messages from (and adds our
// Reads to) are the engine's too, and the port is the engine's; all outlive the transmitter.
// Thread: not thread-safe; the engine's owner thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "proto/outbound_terminate.h"
#include "proto/rdmap_port.h"
#include "proto/read_queues.h"
#include "proto/read_request_bodies.h"
#include "proto/rtr.h"
#include "proto/tx_batch.h"
#include "wire/quantities.h"

namespace uwarp::proto {

// Which messages the QP's state lets out (RTS: all; SQD: no new requests; else only a
// Terminate).
struct TxGate {
  bool responses = false;  // RTR, nudge, Read Responses
  bool requests = false;   // the send queue
};

class RdmapTransmitter {
 public:
  struct Links {
    RdmapPort& port;
    OutboundReadQueue& orq;
    InboundReadQueue& irq;
    OutboundTerminate& terminate;
  };
  // `send_rtr`: initiator, the RTR to send first; `await_rtr`: responder, nothing but a
  // Terminate goes before the peer's RTR.
  RdmapTransmitter(const Links& links, Framing framing, std::size_t max_ulpdu, RtrType send_rtr,
                   bool await_rtr);

  // Appends FPDUs to `batch`; true if it added any.
  bool fill(TxBatch& batch, TxGate gate);
  // The message of `cookie` (from fill) has been handed to TCP completely. True if it was a
  // Read Response: its Read Request no longer counts against IRD.
  bool sent(std::uint64_t cookie);

  // FPDUs carry at most `max_ulpdu` bytes of ULPDU (capped with markers: wire/mpa_marker.h).
  void set_max_ulpdu(std::size_t max_ulpdu) { max_ulpdu_ = ulpdu_limit(max_ulpdu); }
  // One zero-length RDMA Write to the RTR STag at the next message boundary.
  void queue_nudge() { nudge_pending_ = true; }
  // Responder: the peer's RTR has arrived; transmission may begin.
  void rtr_received() { awaiting_rtr_ = false; }
  // Some payload byte of the message being segmented is still to be read from the revoked
  // region (MessageSegmenter::reads_from).
  bool reads_from(const RevokedRegion& revoked) const { return segmenter_.reads_from(revoked); }
  // The QP failed: the message being segmented is not continued.
  void abandon() {
    segmenter_ = MessageSegmenter{};
    pending_immediate_.reset();
    read_responses_unsent_ = 0;
  }

 private:
  using Message = MessageSegmenter::Message;

  // The next message to segment, in priority order; false if none may go now. Each next_*
  // step fills `m` from gather_ (cleared by next_message).
  bool next_message(Message& m, TxGate gate);
  bool next_terminate(Message& m);
  bool next_rtr(Message& m);
  bool next_nudge(Message& m);
  bool next_read_response(Message& m);
  // RFC 7306: the response to the oldest inbound Atomic Request, whose operation is carried out
  // now; false (nothing goes yet) while a Read Response before it has not left: that response
  // reads its source when TCP takes it, and must not see the operation's result.
  bool next_atomic_response(Message& m);
  bool next_request(Message& m);
  void atomic_request(Message& m, const OutboundRequest& r);
  // RFC 7306: the Immediate Data message of request `seq` (its completion goes with it).
  void immediate_message(Message& m, std::uint64_t seq, bool solicited, std::uint64_t data);
  // `max_ulpdu`, capped with markers so that an FPDU stays within wire::kMaxFpduWithMarkers.
  std::size_t ulpdu_limit(std::size_t max_ulpdu) const {
    return framing_.markers
               ? std::min(max_ulpdu, wire::max_ulpdu_for_fpdu_size(wire::kMaxFpduWithMarkers))
               : max_ulpdu;
  }

  RdmapPort& port_;
  OutboundReadQueue& orq_;
  InboundReadQueue& irq_;
  OutboundTerminate& terminate_;
  const Framing framing_;
  std::size_t max_ulpdu_;

  // RFC 6581.
  RtrType send_rtr_;   // initiator: the RTR still to send (kNone once sent)
  bool awaiting_rtr_;  // responder: no transmission before the peer's RTR
  bool nudge_pending_ = false;

  // The next MSN of each of the three untagged queues.
  wire::Msn send_msn_ = wire::kInitialMsn;
  wire::Msn read_msn_ = wire::kInitialMsn;
  wire::Msn term_msn_ = wire::kInitialMsn;
  wire::Msn atomic_response_msn_ = wire::kInitialMsn;

  // The message being segmented and its gather list.
  MessageSegmenter segmenter_;
  std::vector<ConstByteSpan> gather_;
  ReadRequestBodies read_request_bodies_;
  ImmediateDataBodies immediate_bodies_;
  AtomicRequestBodies atomic_request_bodies_;
  AtomicResponseBodies atomic_response_bodies_;
  // Read Responses started and not yet handed to TCP completely.
  std::size_t read_responses_unsent_ = 0;
  // An RDMA Write with Immediate whose Write message has been started: its Immediate Data
  // message goes next, ahead of Read Responses, so that the peer finds it right after the Write.
  struct PendingImmediate {
    std::uint64_t seq = 0;
    bool solicited = false;
    std::uint64_t data = 0;
  };
  std::optional<PendingImmediate> pending_immediate_;
};

}  // namespace uwarp::proto
