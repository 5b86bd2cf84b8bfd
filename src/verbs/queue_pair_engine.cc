// QueuePair and the engine of its connection: what the engine tells the QP through proto::RdmapPort
// that acts on the QP itself (a request whose memory failed its check, Terminates, the RTR). Where
// inbound segments go and what goes out next are the protection checks', the inbound receive's and
// the send queue's (the forwards in queue_pair.h); the RDMAP rules are the engine's.
#include "verbs/queue_pair.h"

namespace uwarp::verbs {

bool QueuePair::start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) {
  if (sq_.start(r, payload)) return true;
  // A local protection error fails this request and, as the verbs require, the QP.
  enter_error(std::nullopt, 0);
  reporter_.event(AsyncEventType::kQpFatal, "local protection error on a send work request");
  request_shutdown();
  return false;
}

void QueuePair::terminate_received(const wire::TerminateMessage& m) {
  const WcStatus status = status_for_remote_terminate(m.raw_control);
  const std::string detail = describe_remote_terminate(m);
  enter_error(status, m.raw_control);
  reporter_.event(status == WcStatus::kRemoteAccessError ? AsyncEventType::kQpAccessError
                                                         : AsyncEventType::kQpFatal,
                  detail);
  request_shutdown();
}

void QueuePair::rtr_received() {
  rtr_received_ = true;
}

void QueuePair::terminate_queued(const wire::TerminateCode& code) {
  const bool access = code.layer != wire::TermLayer::kLlp && code.etype == 1;
  enter_error(std::nullopt, 0);
  reporter_.event(access ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
                  "sent Terminate " + wire::describe(code));
}

void QueuePair::terminate_sent() {
  request_shutdown();
}

}  // namespace uwarp::verbs
