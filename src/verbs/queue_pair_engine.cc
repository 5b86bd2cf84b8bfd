// QueuePair and the engine of its connection: what the engine tells the QP through proto::RdmapPort
// that acts on the QP itself (a request whose memory failed its check, Terminates, the RTR). Where
// inbound segments go and what goes out next are the protection checks', the inbound receive's and
// the send queue's (the forwards in queue_pair.h); the RDMAP rules are the engine's.
#include "verbs/queue_pair.h"

namespace uwarp::verbs {

bool QueuePair::start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) {
  MemoryRegionRef revoked;
  if (sq_.start(r, payload, revoked)) {
    if (revoked) binding_.sweep_later(r.seq, std::move(revoked));
    return true;
  }
  request_failed_locked(r.kind == proto::OutboundRequest::Kind::kLocal);
  return false;
}

void QueuePair::run_ready_local_locked() {
  std::vector<Sweep> revoked;
  const bool started = sq_.run_ready_local(revoked);
  for (Sweep& s : revoked) binding_.sweep_later(s.first, std::move(s.second));
  if (!started) request_failed_locked(/*local=*/true);
}

void QueuePair::request_failed_locked(bool local) {
  // A local protection or bind error fails this request and, as the verbs require, the QP.
  enter_error(std::nullopt, 0);
  reporter_.event(AsyncEventType::kQpFatal, local ? "a local operation broke the memory binding rules"
                                                  : "local protection error on a send work request");
  binding_.request_shutdown();
}

void QueuePair::terminate_received(const wire::TerminateMessage& m) {
  const WcStatus status = status_for_remote_terminate(m.raw_control);
  const std::string detail = describe_remote_terminate(m);
  enter_error(status, m.raw_control);
  reporter_.event(status == WcStatus::kRemoteAccessError ? AsyncEventType::kQpAccessError
                                                         : AsyncEventType::kQpFatal,
                  detail);
  binding_.request_shutdown();
}

void QueuePair::terminate_queued(const wire::TerminateCode& code) {
  const bool access = code.layer != wire::TermLayer::kLlp && code.etype == 1;
  enter_error(std::nullopt, 0);
  reporter_.event(access ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
                  "sent Terminate " + wire::describe(code));
}

void QueuePair::terminate_sent() {
  binding_.request_shutdown();
}

}  // namespace uwarp::verbs
