// What binds a queue pair to the stream of its connection: the parameters the CM negotiated
// and the runtime's side of the stream (runtime::Stream implements QpLink). The QP calls its
// link with the QP lock held, from QueuePair::attach_link_locked until detach_link_locked.
#pragma once

#include "proto/rdmap_engine.h"

namespace uwarp::verbs {

// Connection parameters the CM negotiated, handed over when the stream is attached: the
// engine's (CRC, IRD/ORD, RTR, FPDU size) and which side this is.
struct LinkParams : proto::RdmapEngine::Params {
  bool initiator = false;  // this side sent the MPA request
};

// The runtime's side of an attached stream. Called with the QP lock held; must not block.
class QpLink {
 public:
  virtual ~QpLink() = default;
  virtual void tx_ready() = 0;            // there is transmit work
  virtual void rtr_received() = 0;        // responder: the peer's RTR arrived
  virtual void shutdown_requested() = 0;  // close the stream once queued bytes are sent
  // The QP entered ERROR and completes its work requests as flushed: from now on the stream
  // must not read their memory (drop what is queued, keep FPDU alignment).
  virtual void tx_abandon() = 0;
};

}  // namespace uwarp::verbs
