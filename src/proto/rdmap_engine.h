// The RDMAP engine of one connection, sans I/O: bytes of the TCP stream in, FPDUs to send out,
// and the RDMAP/DDP state between them (RFC 5040 sections 5-7, RFC 5041 sections 5-7, RFC 6581
// section 3). It owns:
// - receiving: the FPDU reader and the RDMAP receive rules (RdmapReceiver), the outbound Read
//   queue (ORQ) that Read Responses are matched against, and the inbound Read queue (IRQ) of
//   Read Requests waiting for their response (bounded by IRD) (read_queues.h);
// - transmitting: what goes next (a pending Terminate, our RTR, a nudge, Read Responses, then
//   the send queue in order, held by fences and ORD), MSNs, Read Request and Terminate encoding,
//   and segmentation into the transmit batch;
// - Terminates: a protocol violation found on receive becomes one Terminate, sent once
//   (OutboundTerminate).
//
// It has no sockets, threads or clocks. Memory and work queues belong to the verbs layer, which
// the engine reaches through RdmapPort; the caller (runtime::Stream, through the QP) feeds
// received bytes, fills transmit batches and reports what TCP has taken.
//
// Thread: not thread-safe; one owner. The verbs QP owns it and drives it under the QP lock.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "proto/fpdu_reader.h"
#include "proto/outbound_terminate.h"
#include "proto/rdmap_receiver.h"
#include "proto/read_queues.h"
#include "proto/read_request_bodies.h"
#include "proto/rtr.h"
#include "proto/tx_batch.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

// One posted work request, as the engine transmits it.
struct OutboundRequest {
  enum class Kind : std::uint8_t { kSend, kSendInvalidate, kWrite, kRead };
  std::uint64_t seq = 0;  // the port's name for it, increasing in posting order
  Kind kind = Kind::kSend;
  bool solicited = false;       // Sends: the Solicited Event variant
  bool fence = false;           // waits until every earlier RDMA Read has completed
  std::uint32_t length = 0;     // payload bytes (Reads: bytes to read)
  std::uint32_t remote_stag = 0;     // Write: the sink; Read: the source
  std::uint64_t remote_offset = 0;   // its Tagged Offset
  std::uint32_t invalidate_stag = 0;  // kSendInvalidate
  std::uint32_t sink_stag = 0;       // Read: the local sink advertised to the peer
  std::uint64_t sink_offset = 0;
};

// What the engine needs of the verbs layer. Called from inside the engine's calls, on the
// engine's owner thread; implementations must not call back into the engine except abandon().
class RdmapPort {
 public:
  virtual ~RdmapPort() = default;

  // Receive: where a tagged Write's bytes go, or the DDP tagged-buffer error.
  virtual ScatterResult resolve_write(std::uint32_t stag, std::uint64_t offset,
                                      std::size_t length) = 0;
  // An untagged Send segment at message offset `mo`: where it goes in the receive buffer the
  // message consumes (the first segment takes the next receive).
  virtual ScatterResult resolve_receive(std::uint32_t msn, std::uint32_t mo, std::size_t length,
                                        bool first_segment) = 0;
  virtual std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) = 0;
  // A Read Request's source [offset, offset + length) of `stag`, checked for remote read.
  virtual Expected<ReadSource, wire::TerminateCode> resolve_read_source(std::uint32_t stag,
                                                                        std::uint64_t offset,
                                                                        std::uint32_t length) = 0;
  // Bytes [offset, offset + length) of the sink of outbound Read `seq` (checked by the engine
  // against the sink it advertised); false if the sink cannot hold them.
  virtual ScatterResult resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                          std::size_t length) = 0;
  // Outbound Read `seq` has its whole response.
  virtual void read_complete(std::uint64_t seq) = 0;

  // Transmit: the oldest posted request not yet started (kind and fence are enough), or false.
  virtual bool peek_request(OutboundRequest& next) = 0;
  // Starts that request: resolves its local memory, appends a Send's or Write's bytes to
  // `payload` (valid until request_sent or abandon) and fills in the rest of `r` (a Read's
  // sink). False if that failed; the port then has completed it in error and moved the QP to
  // ERROR.
  virtual bool start_request(OutboundRequest& r, std::vector<ConstByteSpan>& payload) = 0;
  // Request `seq` has been handed to TCP completely (a Read: its Read Request).
  virtual void request_sent(std::uint64_t seq) = 0;

  // The engine found a protocol violation and queued this Terminate (the QP fails).
  virtual void terminate_queued(const wire::TerminateCode& code) = 0;
  // The peer sent a Terminate; reception has ended.
  virtual void terminate_received(const wire::TerminateMessage& message) = 0;
  // Our Terminate has been handed to TCP: the connection may close.
  virtual void terminate_sent() = 0;
  // Responder in peer-to-peer mode: the RTR the engine waited for has arrived.
  virtual void rtr_received() = 0;
};

class RdmapEngine final : private RxDelegate {
 public:
  struct Params {
    bool crc = false;
    std::uint16_t ird = 0;
    std::uint16_t ord = 0;
    RtrType send_rtr = RtrType::kNone;    // initiator: the RTR to send first
    RtrType expect_rtr = RtrType::kNone;  // responder: the RTR to wait for
    std::size_t max_ulpdu = 1442;
  };
  // Which messages the QP's state lets out (RTS: all; SQD: no new requests; else only a
  // Terminate).
  struct TxGate {
    bool responses = false;  // RTR, nudge, Read Responses
    bool requests = false;   // the send queue
  };

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
  bool rx_open() const;
  // No FPDU is partly received (an end of stream here is an orderly close).
  bool rx_at_boundary() const { return reader_.at_boundary(); }

  // Transmit: appends FPDUs to `batch`; true if it added any.
  bool fill(TxBatch& batch, TxGate gate);
  // A message that fill() queued (its batch cookie) has been handed to TCP completely.
  void sent(std::uint64_t cookie);
  void set_max_ulpdu(std::size_t max_ulpdu) { max_ulpdu_ = max_ulpdu; }
  // Queues one zero-length RDMA Write to the RTR STag at the next message boundary: it touches
  // no memory at the peer and wakes a Linux siw responder that missed the first FPDUs of a
  // connection (docs/interop.md).
  void queue_nudge() { nudge_pending_ = true; }

  // The QP failed: the message being segmented is not continued and the Read queues are
  // emptied (their memory may be released once this returns). A queued Terminate still goes.
  void abandon();

 private:
  // RxDelegate.
  ScatterResult resolve_write(std::uint32_t stag, std::uint64_t to, std::size_t length) override;
  ScatterResult resolve_read_response(std::uint32_t stag, std::uint64_t to,
                                      std::size_t length) override;
  std::optional<wire::TerminateCode> read_response_complete() override;
  ScatterResult resolve_receive(std::uint32_t msn, std::uint32_t mo, std::size_t length,
                                bool first_segment) override;
  std::optional<wire::TerminateCode> receive_complete(const InboundSend& send) override;
  std::optional<wire::TerminateCode> read_request(const wire::ReadRequest& request) override;
  void terminate_received(const wire::TerminateMessage& message) override;
  void rtr_received() override;

  // Reception failed: queue the Terminate that answers it (once) and tell the port.
  void handle_rx_failure();
  // The next message to segment, in priority order; false if none may go now.
  bool next_message(MessageSegmenter::Message& m, TxGate gate);
  bool next_request(MessageSegmenter::Message& m);

  RdmapPort& port_;
  const bool crc_;
  std::size_t max_ulpdu_;
  RdmapReceiver receiver_;
  FpduReader reader_;

  // RFC 6581.
  RtrType send_rtr_;
  bool awaiting_rtr_;              // responder: no transmission before the peer's RTR
  bool nudge_pending_ = false;

  // MSNs of the three untagged queues (RFC 5041 section 5.3: each starts at 1).
  std::uint32_t send_msn_ = 1;
  std::uint32_t read_msn_ = 1;
  std::uint32_t term_msn_ = 1;

  OutboundReadQueue orq_;
  InboundReadQueue irq_;

  OutboundTerminate terminate_;

  // The message being segmented and its gather list.
  MessageSegmenter segmenter_;
  std::vector<ConstByteSpan> gather_;
  ReadRequestBodies read_request_bodies_;
};

}  // namespace uwarp::proto
