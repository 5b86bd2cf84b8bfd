// QpPort: what the connection's RDMAP engine reaches a queue pair through (proto::RdmapPort):
// where inbound segments go (the QP's protection checks and inbound receive), what goes out next
// (its send queue), and what acts on the QP itself (a request whose memory failed its check,
// Terminates, the RTR). The RDMAP rules are the engine's.
//
// Part of the QueuePair, kept apart from its verbs calls: it reaches the QP's members as a
// friend. Owner: the QueuePair (a member; runtime::RdmapDriver's engine holds a reference from
// binding to unbinding). Lock: every call is made with the QP's mutex held (the driver drives the
// engine under it); each one asserts so for the thread-safety analysis.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "proto/rdmap_port.h"

namespace uwarp::verbs {

class QueuePair;

class QpPort final : public proto::RdmapPort {
 public:
  explicit QpPort(QueuePair& qp) : qp_(qp) {}
  QpPort(const QpPort&) = delete;
  QpPort& operator=(const QpPort&) = delete;

  // Receive: the protection checks and the inbound receive.
  proto::ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset offset,
                                     std::size_t length) override;
  proto::ScatterResult resolve_receive(wire::Msn msn, wire::MessageOffset mo, std::size_t length,
                                       bool first_segment) override;
  std::optional<wire::TerminateCode> receive_complete(const proto::InboundSend& send) override;
  bool wait_for_receive() override;
  Expected<proto::ReadSource, wire::TerminateCode> resolve_read_source(
      wire::Stag stag, wire::TaggedOffset offset, std::uint32_t length) override;
  proto::ScatterResult resolve_read_sink(std::uint64_t seq, std::size_t offset,
                                         std::size_t length) override;
  ByteSpan read_sink_piece(std::uint64_t seq, std::size_t offset, std::size_t length) override;
  void read_complete(std::uint64_t seq) override;
  Expected<proto::ReadSource, wire::TerminateCode> resolve_atomic_target(
      wire::Stag stag, wire::TaggedOffset offset) override;
  void atomic_complete(std::uint64_t seq, std::uint64_t original_value) override;
  wire::AtomicRequest atomic_request(std::uint64_t seq) override;

  // Transmit: the send queue.
  bool peek_request(proto::OutboundRequest& next) override;
  bool start_request(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload) override;
  void request_sent(std::uint64_t seq) override;

  // Terminates and the RTR act on the QP.
  void terminate_queued(const wire::TerminateCode& code) override;
  void terminate_received(const wire::TerminateMessage& message) override;
  void terminate_sent() override;
  void rtr_received() override;

 private:
  QueuePair& qp_;
};

}  // namespace uwarp::verbs
