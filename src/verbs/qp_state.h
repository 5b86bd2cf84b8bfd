// The QP state machine's transitions that a modify may ask for (the verbs' modify-QP table for
// an RC QP, as uwarp uses it: RTR is passed through on the way to RTS, ERROR and RESET are
// reachable from everywhere). What each transition does to the queues is QueuePair's.
#pragma once

#include "uwarp/status.h"
#include "uwarp/types.h"

namespace uwarp::verbs {

// OK if a QP in `from` may be moved to `to`; else kInvalidState naming both.
Status check_qp_transition(QpState from, QpState to);

}  // namespace uwarp::verbs
