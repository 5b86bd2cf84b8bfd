#include "verbs/qp_state.h"

#include <string>

namespace uwarp::verbs {

Status check_qp_transition(QpState from, QpState to) {
  if (to == QpState::kReset || to == QpState::kError) return Status::ok();
  const bool ok = (from == QpState::kReset && to == QpState::kInit) ||
                  (from == QpState::kInit && (to == QpState::kInit || to == QpState::kRtr)) ||
                  (from == QpState::kRtr && to == QpState::kRts) ||
                  (from == QpState::kRts && (to == QpState::kRts || to == QpState::kSqd)) ||
                  (from == QpState::kSqd && (to == QpState::kRts || to == QpState::kSqd)) ||
                  (from == QpState::kSqe && to == QpState::kRts);
  if (ok) return Status::ok();
  return Status(Errc::kInvalidState, std::string("QP cannot go from ") +
                                         std::string(to_string(from)) + " to " +
                                         std::string(to_string(to)));
}

}  // namespace uwarp::verbs
