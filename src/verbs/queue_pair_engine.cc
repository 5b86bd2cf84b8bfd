// QueuePair and the engine of its connection: what the engine tells the QP through proto::RdmapPort
// that acts on the QP itself (a request whose memory failed its check, Terminates, the RTR). Where
// inbound segments go and what goes out next are the protection checks', the inbound receive's and
// the send queue's (the forwards in queue_pair.h); the RDMAP rules are the engine's.
#include "verbs/queue_pair.h"

namespace uwarp::verbs {

bool QueuePair::start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) {
  MemoryRegionRef revoked;
  if (sq_.start(r, payload, revoked)) {
    if (revoked) sweep_later_locked(r.seq, std::move(revoked));
    return true;
  }
  request_failed_locked(r.kind == proto::OutboundRequest::Kind::kLocal);
  return false;
}

void QueuePair::run_ready_local_locked() {
  while (sq_.next_local_ready()) {
    std::uint64_t seq = 0;
    MemoryRegionRef revoked;
    if (!sq_.start_next_local(seq, revoked)) {
      request_failed_locked(/*local=*/true);
      return;
    }
    if (revoked) sweep_later_locked(seq, std::move(revoked));
    sq_.sent(seq);  // nothing goes on the wire
  }
}

void QueuePair::sweep_later_locked(std::uint64_t seq, MemoryRegionRef revoked) {
  sweeps_.emplace_back(seq, std::move(revoked));
  tx_requests_.sweep = true;
}

void QueuePair::request_failed_locked(bool local) {
  // A local protection or bind error fails this request and, as the verbs require, the QP.
  enter_error(std::nullopt, 0);
  reporter_.event(AsyncEventType::kQpFatal, local ? "a local operation broke the memory binding rules"
                                                  : "local protection error on a send work request");
  request_shutdown();
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
