#include "verbs/qp_port.h"

#include <string>
#include <utility>

#include "base/log.h"
#include "verbs/queue_pair.h"

namespace uwarp::verbs {

proto::ScatterResult QpPort::resolve_write(wire::Stag stag, wire::TaggedOffset offset,
                                           std::size_t length) {
  qp_.mu_.assert_held();
  return qp_.protection_.resolve_write(stag, offset, length);
}

proto::ScatterResult QpPort::resolve_receive(wire::Msn /*msn*/, wire::MessageOffset mo,
                                             std::size_t length, bool first_segment) {
  qp_.mu_.assert_held();
  return qp_.receive_.place(mo, length, first_segment);
}

std::optional<wire::TerminateCode> QpPort::receive_complete(const proto::InboundSend& send) {
  qp_.mu_.assert_held();
  std::optional<wire::TerminateCode> refused = qp_.receive_.complete(send);
  // A Send with Invalidate took a binding away: every access through it is cut off on the
  // progress thread, as for a local invalidation (with no request to complete).
  if (MemoryRegionRef revoked = qp_.protection_.take_remote_invalidation()) {
    qp_.binding_.sweep_later(0, std::move(revoked));
  }
  return refused;
}

bool QpPort::wait_for_receive() {
  qp_.mu_.assert_held();
  // With an SRQ, the stream asks the SRQ to wake it (QueuePair::wake_on_shared_post_locked).
  return qp_.receiving_locked() && qp_.receive_wait_.begin();
}

Expected<proto::ReadSource, wire::TerminateCode> QpPort::resolve_read_source(
    wire::Stag stag, wire::TaggedOffset offset, std::uint32_t length) {
  qp_.mu_.assert_held();
  return qp_.protection_.resolve_read_source(stag, offset, length);
}

proto::ScatterResult QpPort::resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                               std::size_t length) {
  qp_.mu_.assert_held();
  return qp_.protection_.resolve_read_sink(qp_.sq_.read_sink(seq), offset, length);
}

ByteSpan QpPort::read_sink_piece(std::uint64_t seq, std::size_t offset, std::size_t length) {
  qp_.mu_.assert_held();
  const std::vector<ByteSpan>* sink = qp_.sq_.read_sink(seq);
  if (sink == nullptr) return {};
  for (const ByteSpan& s : *sink) {
    if (offset < s.size())
      return length <= s.size() - offset ? s.subspan(offset, length) : ByteSpan{};
    offset -= s.size();
  }
  return {};
}

void QpPort::read_complete(std::uint64_t seq) {
  qp_.mu_.assert_held();
  qp_.sq_.read_complete(seq);
}

Expected<proto::ReadSource, wire::TerminateCode> QpPort::resolve_atomic_target(
    wire::Stag stag, wire::TaggedOffset offset) {
  qp_.mu_.assert_held();
  return qp_.protection_.resolve_atomic_target(stag, offset);
}

wire::AtomicRequest QpPort::atomic_request(std::uint64_t seq) {
  qp_.mu_.assert_held();
  return qp_.sq_.atomic_request(seq);
}

void QpPort::atomic_complete(std::uint64_t seq, std::uint64_t original_value) {
  qp_.mu_.assert_held();
  if (!qp_.sq_.atomic_complete(seq, original_value)) qp_.request_failed_locked(false);
}

bool QpPort::peek_request(proto::OutboundRequest& next) {
  qp_.mu_.assert_held();
  return qp_.sq_.peek(next);
}

bool QpPort::start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) {
  qp_.mu_.assert_held();
  MemoryRegionRef revoked;
  if (qp_.sq_.start(r, payload, revoked)) {
    if (revoked) qp_.binding_.sweep_later(r.seq, std::move(revoked));
    return true;
  }
  qp_.request_failed_locked(r.kind == proto::OutboundRequest::Kind::kLocal);
  return false;
}

void QpPort::request_sent(std::uint64_t seq) {
  qp_.mu_.assert_held();
  qp_.sq_.sent(seq);
}

void QpPort::terminate_queued(const wire::TerminateCode& code) {
  qp_.mu_.assert_held();
  const bool access = code.layer != wire::TermLayer::kLlp && code.etype == 1;
  qp_.stats_.terminate_sent(static_cast<std::uint8_t>(code.layer), code.etype, code.ecode);
  if (log::enabled(log::Level::kWarn)) {
    log::emit(log::Level::kWarn, "qp",
              "QP " + std::to_string(qp_.qp_num()) + ": sending Terminate " +
                  wire::describe_named(code) + qp_.stats_.endpoints());
  }
  qp_.enter_error(std::nullopt, 0);
  qp_.reporter_.event(access ? AsyncEventType::kQpAccessError : AsyncEventType::kQpFatal,
                      "sent Terminate " + wire::describe(code));
}

void QpPort::terminate_received(const wire::TerminateMessage& m) {
  qp_.mu_.assert_held();
  const WcStatus status = status_for_remote_terminate(m.raw_control);
  qp_.stats_.terminate_received(static_cast<std::uint8_t>(m.code.layer), m.code.etype,
                                m.code.ecode);
  const std::string detail = describe_remote_terminate(m);
  if (log::enabled(log::Level::kWarn)) {
    log::emit(log::Level::kWarn, "qp",
              "QP " + std::to_string(qp_.qp_num()) + ": received Terminate" +
                  (m.has_control ? " " + wire::describe_named(m.code)
                                 : std::string(" without a control word")) +
                  qp_.stats_.endpoints());
  }
  qp_.enter_error(status, m.raw_control);
  qp_.reporter_.event(status == WcStatus::kRemoteAccessError ? AsyncEventType::kQpAccessError
                                                             : AsyncEventType::kQpFatal,
                      detail);
  qp_.binding_.request_shutdown();
}

void QpPort::terminate_sent() {
  qp_.mu_.assert_held();
  qp_.binding_.request_shutdown();
}

void QpPort::rtr_received() {
  qp_.mu_.assert_held();
  qp_.binding_.rtr_received();
}

}  // namespace uwarp::verbs
