// What binds a queue pair to the stream of its connection: the parameters the CM negotiated,
// the runtime's side of the stream (runtime::Stream implements QpLink), and what the QP asks of
// the stream (TxRequests, collected by the stream; QueuePair::take_tx_requests_locked).
#pragma once

#include <cstdint>

#include "proto/rdmap_engine.h"

namespace uwarp::verbs {

class QueuePair;

// Connection parameters the CM negotiated, handed over when the stream is attached: the
// engine's (CRC, IRD/ORD, RTR, FPDU size) and which side this is.
struct LinkParams : proto::RdmapEngine::Params {
  bool initiator = false;  // this side sent the MPA request
  // The FPDU size the stream's transmitter aims for where the MSS is smaller (0: the MSS):
  // proto::MpaParams::fpdu_size of this side.
  std::size_t fpdu_size = 0;
};

// What the QP asks of its stream's transmit side since the stream last collected.
struct TxRequests {
  // The QP entered ERROR and completes its work requests as flushed: from now on the stream
  // must not read their memory (drop what is queued, keep FPDU alignment) before it sends again.
  bool abandon = false;
  bool shutdown = false;  // close the stream once the bytes queued are sent
  // Local operations took bindings away (QueuePair::take_sweeps): the progress thread is to cut
  // off every access through them, with no QP lock held (verbs::sweep_invalidations).
  bool sweep = false;
};

// What a doorbell asks of the stream. kMayWait: every request of the post is little
// (verbs::posts_little: Reads of at most 256 KiB, atomics, messages of at most 64 KiB and 16
// FPDUs), so the stream may leave it for the application's next poll to send along with the
// posts after it (runtime/doorbell_batching.h). kNow: transmit now.
enum class Doorbell : std::uint8_t { kNow, kMayWait };

// The runtime's side of an attached stream. The QP calls it with its own lock held
// (qp.mutex()), from the application's calls only (post_send, post_recv, modify_state, a
// deregistration), never from inside a call the stream makes into the QP; so the stream is never
// re-entered. settle_send is the exception. Must not block, except settle_send (below).
class QpLink {
 public:
  virtual ~QpLink() = default;
  // The stream transmits and collects the QP's requests. Its sends may release the QP lock
  // and take it back (runtime::Transmitter): the QP relies on nothing it read before.
  virtual void doorbell(QueuePair& qp, Doorbell kind) = 0;
  // The QP is about to give memory back (its flush): returns once no send the stream made
  // without the QP lock is still in its system call (a wait as long as one non-blocking send).
  // The one call the QP may make from inside a call the stream makes into it: it touches only
  // the stream's transmit batch, which no such call is changing.
  virtual void settle_send(QueuePair& qp) = 0;
  // The application revokes a region: on return the stream holds no reference into it and
  // touches it no more; if its engine or its queued bytes were using it, or `qp_in_use` (the
  // QP's own resolved memory is), the connection fails with a Terminate (RdmapEngine::revoke).
  virtual void revoke(QueuePair& qp, const proto::RevokedRegion& revoked, bool qp_in_use) = 0;
  // Reception waits for a receive (verbs/receive_wait.h), and the application posted one: the
  // stream resumes reception (on its own thread: it must not block here).
  virtual void receive_posted(QueuePair& qp) = 0;
};

}  // namespace uwarp::verbs
