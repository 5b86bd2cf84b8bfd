#include "runtime/rdmap_driver.h"

#include <utility>

namespace uwarp::runtime {

RdmapDriver::RdmapDriver(verbs::QueuePair& qp, verbs::QpLink* link, const verbs::LinkParams& params)
    : engine_(qp.port_locked(), params) {
  qp.attach_link_locked(link, params);
}

void RdmapDriver::queue_nudge(verbs::QueuePair& qp) {
  if (qp.tx_gate_locked().requests) engine_.queue_nudge();
}

void RdmapDriver::revoke(verbs::QueuePair& qp, const proto::RevokedRegion& revoked,
                         bool in_use_elsewhere) {
  collect(qp);
  // A QP that failed or was reset has had the engine's work abandoned; it places nothing more.
  if (!qp.receiving_locked()) return;
  engine_.revoke(revoked, in_use_elsewhere);
  collect(qp);
}

verbs::TxRequests RdmapDriver::take_requests(verbs::QueuePair& qp) {
  collect(qp);
  return std::exchange(pending_, verbs::TxRequests{});
}

void RdmapDriver::apply(const verbs::TxRequests& r) {
  if (r.abandon) engine_.abandon();
  if (r.abandon && engine_.rx_waiting()) wait_abandoned_ = true;
  pending_.abandon = pending_.abandon || r.abandon;
  pending_.shutdown = pending_.shutdown || r.shutdown;
  pending_.sweep = pending_.sweep || r.sweep;
}

}  // namespace uwarp::runtime
