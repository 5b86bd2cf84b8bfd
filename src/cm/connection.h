// One iWARP connection: TCP connect or accept, the MPA exchange (proto::MpaInitiator /
// MpaResponder), then the stream that carries the QP's traffic (runtime::Stream). One TCP
// connection per QP; ports are TCP ports.
//
// Threads: the handshake runs on the control engine's thread (runtime/engine_pool.h), the stream
// on the engine the pool picks for it when the connection is established; connect/accept/
// reject/disconnect may be called from any thread. The QP must outlive the connection's use of it:
// destroy the connection (or call abort()) before the QP.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/log.h"
#include "cm/connect_options.h"
#include "cm/events.h"
#include "cm/handshake_socket.h"
#include "io/backend.h"
#include "proto/mpa_negotiator.h"
#include "runtime/engine.h"
#include "runtime/engine_pool.h"
#include "runtime/engine_timer.h"
#include "runtime/stream.h"
#include "verbs/queue_pair.h"

namespace uwarp::cm {

class Connection final : public HandshakeEvents,
                         public runtime::StreamObserver,
                         public std::enable_shared_from_this<Connection> {
 public:
  // Active side: connects `qp` to `peer`; kEstablished, kRejected or kConnectError follows.
  static Result<std::shared_ptr<Connection>> connect(runtime::EnginePool& engines,
                                                     const std::shared_ptr<EventChannel>& events,
                                                     const io::SocketAddress& peer,
                                                     verbs::QueuePair& qp,
                                                     const ConnectOptions& options);
  // Passive side: a connection accepted by a listener; reads the MPA request.
  static std::shared_ptr<Connection> accepted(runtime::EnginePool& engines,
                                              const std::shared_ptr<EventChannel>& events,
                                              std::shared_ptr<Listener> listener, io::Fd fd,
                                              const io::SocketAddress& peer,
                                              std::chrono::milliseconds timeout);
  ~Connection() override;

  // Passive side, after kConnectRequest. Peer-to-peer (RFC 6581), the connection is established
  // when the peer's RTR arrives; if it has not within `rtr_timeout`, the connection fails:
  // kConnectError (kTimedOut), the QP goes to ERROR (what was posted flushes), the socket closes.
  Status accept(verbs::QueuePair& qp, const proto::MpaParams& local,
                std::chrono::milliseconds rtr_timeout = kDefaultRtrTimeout);
  Status reject(std::span<const std::uint8_t> private_data);
  // Graceful close: work in flight completes or flushes; kDisconnected follows.
  void disconnect();
  // Unbinds the QP at once and closes (no further events).
  void abort();

  const proto::MpaRequestInfo& request() const { return responder_.request(); }
  const proto::MpaOutcome& outcome() const { return outcome_; }
  const io::SocketAddress& peer_address() const { return peer_; }
  const io::SocketAddress& local_address() const { return local_; }
  verbs::QueuePair* qp() const { return qp_; }
  void set_owner(std::shared_ptr<void> owner) { owner_ = std::move(owner); }
  const std::shared_ptr<void>& owner() const { return owner_; }
  void set_context(void* c) { context_ = c; }
  void* context() const { return context_; }
  // Passive side, engine thread: reports the complete request (kConnectRequest) unless the
  // connection has closed meanwhile. The listener calls it, in the order of its requests.
  void report_request();

  // HandshakeEvents (engine thread).
  void handshake_connected(Status result) override;
  void handshake_received() override;
  void handshake_lost(Status why) override;
  // runtime::StreamObserver.
  void stream_rtr_received() override;
  void stream_closed(bool graceful, const std::string& why) override;

 private:
  enum class State : std::uint8_t {
    kConnecting, kAwaitingReply, kAwaitingRequest, kRequestPending, kEstablishing, kEstablished, kClosed
  };
  Connection(runtime::EnginePool& engines, const std::shared_ptr<EventChannel>& events);

  void start_stream(const verbs::LinkParams& params, ConstByteSpan early);
  // Ends the stream, if there is one, at once: the QP is unbound and the socket closed.
  void abort_stream();
  // The MPA bytes received so far, as each role acts on them (cm/handshake_steps.h).
  void on_reply_bytes();
  void on_request_bytes();
  void fail(CmEventType type, Status why, std::optional<wire::TerminateCode> terminate);
  void emit(CmEventType type, Status status, std::vector<std::uint8_t> private_data = {});
  // A log line about this connection: its QP (once it has one), `what`, its addresses.
  void log_line(log::Level level, std::string_view what) const;
  void close_handshake();
  // Passive side, peer-to-peer: the RTR did not arrive in time (engine thread).
  void rtr_deadline_expired();

  runtime::EnginePool& engines_;
  runtime::Engine& engine_;  // the control engine: the handshake and this object's state
  std::weak_ptr<EventChannel> events_;
  std::shared_ptr<void> owner_;  // keeps the engine's owner alive as long as this object
  std::weak_ptr<Listener> listener_;
  State state_ = State::kConnecting;
  HandshakeSocket socket_;  // until the stream takes the fd over
  io::SocketAddress peer_;
  io::SocketAddress local_;
  verbs::QueuePair* qp_ = nullptr;
  std::uint32_t qp_num_ = 0;  // qp_'s number, kept for the log after qp_ is let go
  void* context_ = nullptr;
  std::optional<proto::MpaInitiator> initiator_;
  proto::MpaResponder responder_;
  proto::MpaOutcome outcome_;
  bool disconnected_event_sent_ = false;
  std::shared_ptr<runtime::Stream> stream_;
  std::shared_ptr<Connection> self_;  // active side: alive while the handshake runs
  runtime::EngineTimer rtr_deadline_;  // passive side, peer-to-peer: until the RTR arrives
};

}  // namespace uwarp::cm
