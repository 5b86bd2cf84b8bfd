// RdmapDriver: the protocol of one stream's connection. It owns the proto::RdmapEngine that
// speaks RDMAP for a bound verbs::QueuePair, and drives it as the QP's state allows: bytes are
// fed only while the QP receives (not ERROR, not RESET), FPDUs are filled through the QP's
// transmit gate (RTS: all; SQD: no new requests; else only a Terminate). The engine reaches the
// QP's queues and memory through the QP's proto::RdmapPort.
//
// Before and after each call into the engine the driver collects what the QP asked meanwhile
// (verbs::TxRequests: an application call such as modify_state, or the engine's own call into the
// port, may have failed it) and applies the engine's part at once: a QP that entered ERROR has
// its engine abandon the message in progress and its Read queues before the engine runs again,
// so no flushed request's memory is read again. The rest (drop the queued bytes, close) is kept for
// the stream's transmitter (take_requests).
//
// Lifetime: created when the stream binds the QP (the QP enters RTS), destroyed when it unbinds
// it; the QP outlives it. Lock: the QP lock, for every call, with `qp` the bound QP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "base/bytes.h"
#include "proto/rdmap_engine.h"
#include "proto/tx_batch.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class RdmapDriver {
 public:
  // Binds `qp` to `link` with the negotiated parameters and starts its engine (RFC 5041: MSNs
  // start afresh on every connection, also for a QP taken back through RESET).
  RdmapDriver(verbs::QueuePair& qp, verbs::QpLink* link, const verbs::LinkParams& params)
      REQUIRES(qp.mutex());
  RdmapDriver(const RdmapDriver&) = delete;
  RdmapDriver& operator=(const RdmapDriver&) = delete;

  // Receive. feed(): bytes received into a bounce buffer (dropped once the QP stopped
  // receiving); direct_target() / commit_direct(): bytes received straight into their place.
  std::size_t feed(verbs::QueuePair& qp, ConstByteSpan bytes) REQUIRES(qp.mutex()) {
    collect(qp);
    // The engine drops bytes itself once it has stopped receiving (a Terminate either way).
    if (!qp.receiving_locked()) return bytes.size();
    const std::size_t used = engine_.feed(bytes);
    collect(qp);
    return used;
  }
  ByteSpan direct_target() const { return engine_.direct_target(); }
  void commit_direct(verbs::QueuePair& qp, std::size_t n) REQUIRES(qp.mutex()) {
    collect(qp);
    engine_.commit_direct(n);
    collect(qp);
  }
  // A receive scattered ahead of the headers (proto::FpduReader::plan_ahead), and bytes received
  // into one of its places taken there (take_in_place; the rest is fed).
  std::size_t plan_ahead(verbs::QueuePair& qp, std::span<proto::FpduReader::Piece> out,
                         std::size_t most, std::size_t min_ahead) REQUIRES(qp.mutex()) {
    collect(qp);
    return qp.receiving_locked() ? engine_.plan_ahead(out, most, min_ahead) : 0;
  }
  std::size_t take_in_place(verbs::QueuePair& qp, ByteSpan bytes) REQUIRES(qp.mutex()) {
    collect(qp);
    if (!qp.receiving_locked()) return 0;
    const std::size_t n = engine_.take_in_place(bytes);
    collect(qp);
    return n;
  }
  // The next bytes are payload: fed, they would be placed.
  bool rx_in_payload() const { return engine_.rx_in_payload(); }
  // Bytes received now would be placed (no Terminate either way, the QP receives).
  bool rx_open(const verbs::QueuePair& qp) const REQUIRES(qp.mutex()) {
    return engine_.rx_open() && qp.receiving_locked();
  }
  // A Terminate (either way) stopped reception.
  bool terminated() const { return !engine_.rx_open(); }
  // No FPDU is partly received (an end of stream here is an orderly close).
  bool rx_at_boundary() const { return engine_.rx_at_boundary(); }
  // FPDUs received whole on this connection so far (statistics: runtime/stream_stats.h).
  std::uint64_t fpdus_received() const { return engine_.fpdus_received(); }
  // Reception waits for a receive (verbs/receive_wait.h): feed() takes no byte until
  // resume_rx(), after which the engine asks the QP again. A QP that stopped receiving (ERROR)
  // waits no more: its bytes are dropped.
  bool rx_waiting(const verbs::QueuePair& qp) const REQUIRES(qp.mutex()) {
    return engine_.rx_waiting() && qp.receiving_locked();
  }
  // Reception waited when the QP entered ERROR: true once, for the stream to go on receiving
  // (and dropping) until the peer closes.
  bool take_wait_abandoned() { return std::exchange(wait_abandoned_, false); }
  void resume_rx(verbs::QueuePair& qp) REQUIRES(qp.mutex()) {
    collect(qp);
    engine_.resume_rx();
    collect(qp);
  }

  // Transmit: appends FPDUs to `batch` as the QP's state lets them out; true if it added any.
  bool fill(verbs::QueuePair& qp, proto::TxBatch& batch) REQUIRES(qp.mutex()) {
    collect(qp);
    const bool added = engine_.fill(batch, qp.tx_gate_locked());
    collect(qp);  // a request whose memory failed its check failed the QP meanwhile
    return added;
  }
  // A message that fill() queued (its batch cookie) has been handed to TCP completely.
  void sent(verbs::QueuePair& qp, std::uint64_t cookie) REQUIRES(qp.mutex()) {
    collect(qp);
    engine_.sent(cookie);
    collect(qp);  // our Terminate has gone: close
  }
  void set_max_ulpdu(std::size_t max_ulpdu) { engine_.set_max_ulpdu(max_ulpdu); }
  // In RTS, queues one zero-length RDMA Write to STag 1, TO 0 (the RFC 6581 RTR Write) at the
  // next message boundary. It touches no memory at the peer; runtime::Stream uses it to wake a
  // Linux siw responder that missed the first FPDUs of a connection (docs/interop.md).
  void queue_nudge(verbs::QueuePair& qp) REQUIRES(qp.mutex());

  // The application revokes a region (runtime::Stream::revoke, under the QP lock): if the engine,
  // or the caller (`in_use_elsewhere`: its queued bytes, the QP's resolved memory), is using it,
  // the engine fails the connection with a Terminate (RdmapEngine::revoke) and abandons its work.
  void revoke(verbs::QueuePair& qp, const proto::RevokedRegion& revoked, bool in_use_elsewhere)
      REQUIRES(qp.mutex());

  // What the QP asked of the transmit side since the last take (the engine has acted on it).
  verbs::TxRequests take_requests(verbs::QueuePair& qp) REQUIRES(qp.mutex());

 private:
  // Around each call into the engine: collects the QP's requests (rarely any: one test on the
  // common path); abandons the engine's work if the QP failed.
  void collect(verbs::QueuePair& qp) REQUIRES(qp.mutex()) {
    if (qp.has_tx_requests_locked()) apply(qp.take_tx_requests_locked());
  }
  void apply(const verbs::TxRequests& r);

  proto::RdmapEngine engine_;  // its port is the bound QP
  verbs::TxRequests pending_;  // collected, not yet taken by the transmitter
  bool wait_abandoned_ = false;
};

}  // namespace uwarp::runtime
