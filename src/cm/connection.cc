#include "cm/connection.h"

#include "base/log.h"
#include "cm/handshake_steps.h"
#include "cm/listener.h"
#include "cm/setup_terminate.h"
#include "io/pcap_recorder.h"

namespace uwarp::cm {
namespace {

std::string_view rtr_name(proto::RtrType rtr) {
  switch (rtr) {
    case proto::RtrType::kNone:
      return "none";
    case proto::RtrType::kWrite:
      return "Write";
    case proto::RtrType::kRead:
      return "Read";
    case proto::RtrType::kSend:
      return "Send";
  }
  return "?";
}

}  // namespace

void Connection::log_line(log::Level level, std::string_view what) const {
  std::string line = qp_num_ != 0 ? "QP " + std::to_string(qp_num_) + ": " : std::string();
  line += what;
  line += " (local ";
  line += local_.to_string();
  line += ", peer ";
  line += peer_.to_string();
  line += ')';
  log::emit(level, "cm", line);
}

Connection::Connection(runtime::EnginePool& engines, const std::shared_ptr<EventChannel>& events)
    : engines_(engines),
      engine_(engines.control()),
      events_(events),
      socket_(engine_, *this),
      rtr_deadline_(engine_) {}

Connection::~Connection() {
  // The stream may outlive its connection object only long enough to close.
  if (stream_) stream_->abort();
}

Result<std::shared_ptr<Connection>> Connection::connect(runtime::EnginePool& engines,
                                                        const std::shared_ptr<EventChannel>& events,
                                                        const io::SocketAddress& peer,
                                                        verbs::QueuePair& qp,
                                                        const ConnectOptions& options) {
  if (Status s = check_private_data(options.mpa.private_data); !s) return Unexpected{std::move(s)};
  auto fd = io::tcp_connect_start(peer, options.local ? &*options.local : nullptr);
  if (!fd) return Unexpected{fd.error()};
  std::shared_ptr<Connection> c(new Connection(engines, events));
  c->peer_ = peer;
  c->qp_ = &qp;
  c->qp_num_ = qp.qp_num();
  c->socket_.set_fd(std::move(*fd));
  c->local_ = io::local_address(c->socket_.fd());
  c->initiator_.emplace(options.mpa);
  c->self_ = c;
  if (log::enabled(log::Level::kInfo)) c->log_line(log::Level::kInfo, "connecting");
  const auto timeout = options.mpa_timeout;
  c->engine_.post([c, timeout] {
    if (Status s = c->socket_.attach(); !s) {
      c->fail(CmEventType::kConnectError, s, std::nullopt);
      return;
    }
    c->socket_.deadline().arm(runtime::Clock::now() + timeout, c->weak_from_this(), [](Connection& self) {
      if (self.state_ == State::kConnecting || self.state_ == State::kAwaitingReply) {
        self.fail(CmEventType::kConnectError, Status(Errc::kTimedOut, "no MPA reply in time"), std::nullopt);
      }
    });
    c->socket_.connect_wait();
  });
  return c;
}

std::shared_ptr<Connection> Connection::accepted(runtime::EnginePool& engines,
                                                 const std::shared_ptr<EventChannel>& events,
                                                 std::shared_ptr<Listener> listener, io::Fd fd,
                                                 const io::SocketAddress& peer,
                                                 std::chrono::milliseconds timeout) {
  // Control engine thread.
  std::shared_ptr<Connection> c(new Connection(engines, events));
  c->listener_ = listener;
  c->owner_ = listener->owner();
  c->peer_ = peer;
  c->socket_.set_fd(std::move(fd));
  c->local_ = io::local_address(c->socket_.fd());
  c->state_ = State::kAwaitingRequest;
  if (log::enabled(log::Level::kDebug))
    c->log_line(log::Level::kDebug, "TCP connection accepted, awaiting its MPA request");
  if (!c->socket_.attach()) return nullptr;
  c->socket_.deadline().arm(runtime::Clock::now() + timeout, c->weak_from_this(), [](Connection& self) {
    if (self.state_ != State::kAwaitingRequest) return;
    if (auto l = self.listener_.lock()) l->request_timed_out();
    self.close_handshake();
  });
  // The listener keeps pending connections alive until the application answers them.
  listener->adopt(c);
  c->socket_.receive_more();
  return c;
}

void Connection::handshake_connected(Status result) {
  if (state_ != State::kConnecting) return;
  if (!result) {
    fail(CmEventType::kConnectError, std::move(result), std::nullopt);
    return;
  }
  // local_ was read when the connect started (the kernel binds the address then); it is not
  // written again, so the application may read it from any thread.
  state_ = State::kAwaitingReply;
  socket_.send_frame(initiator_->request());
  socket_.receive_more();
}

void Connection::handshake_received() {
  if (state_ == State::kAwaitingReply) {
    on_reply_bytes();
  } else if (state_ == State::kAwaitingRequest) {
    on_request_bytes();
  }
}

void Connection::handshake_lost(Status why) {
  if (state_ == State::kAwaitingReply) {
    fail(CmEventType::kConnectError, std::move(why), std::nullopt);
  } else if (state_ == State::kAwaitingRequest) {
    if (log::enabled(log::Level::kInfo))
      log_line(log::Level::kInfo, "connection lost before its MPA request: " + why.to_string());
    close_handshake();
  }
}

void Connection::on_reply_bytes() {
  ReplyVerdict v = read_reply(*initiator_, socket_.received_bytes());
  switch (v.next) {
    case ReplyVerdict::Next::kReceiveMore:
      socket_.receive_more();
      return;
    case ReplyVerdict::Next::kFail:
      fail(CmEventType::kConnectError, std::move(v.why), v.terminate);
      return;
    case ReplyVerdict::Next::kRejected:
      outcome_ = initiator_->outcome();
      if (log::enabled(log::Level::kInfo))
        log_line(log::Level::kInfo, "rejected by the peer: " + v.why.to_string());
      emit(CmEventType::kRejected, std::move(v.why), outcome_.peer_private_data);
      close_handshake();
      return;
    case ReplyVerdict::Next::kEstablish:
      outcome_ = initiator_->outcome();
      start_stream(v.link, v.early);
      if (state_ == State::kEstablishing) {
        state_ = State::kEstablished;
        if (log::enabled(log::Level::kInfo)) log_line(log::Level::kInfo, "established");
        emit(CmEventType::kEstablished, Status::ok(), outcome_.peer_private_data);
      }
      return;
  }
}

void Connection::on_request_bytes() {
  const RequestVerdict v = read_request(responder_, socket_.received_bytes());
  switch (v.next) {
    case RequestVerdict::Next::kReceiveMore:
      socket_.receive_more();
      return;
    case RequestVerdict::Next::kDrop:
      if (log::enabled(log::Level::kWarn))
        log_line(log::Level::kWarn, "closed: invalid or oversized MPA request");
      close_handshake();
      return;
    case RequestVerdict::Next::kReport:
      if (log::enabled(log::Level::kInfo)) log_line(log::Level::kInfo, "connection request");
      socket_.deadline().cancel();
      state_ = State::kRequestPending;
      if (auto l = listener_.lock()) {
        l->request_complete(this);
      } else {
        report_request();
      }
      return;
  }
}

void Connection::report_request() {
  if (state_ == State::kRequestPending) {
    emit(CmEventType::kConnectRequest, Status::ok(), responder_.request().private_data);
  }
}

Status Connection::accept(verbs::QueuePair& qp, const proto::MpaParams& local,
                          std::chrono::milliseconds rtr_timeout) {
  if (Status s = check_private_data(local.private_data); !s) return s;
  Status result;
  engine_.run_sync([&] {
    if (state_ != State::kRequestPending) {
      result = Status(Errc::kInvalidState, "no connection request is pending");
      return;
    }
    qp_ = &qp;
    qp_num_ = qp.qp_num();
    if (log::enabled(log::Level::kInfo)) log_line(log::Level::kInfo, "accepting");
    socket_.send_frame(responder_.accept(local));
    outcome_ = responder_.outcome();
    start_stream(link_params(outcome_, local, /*initiator=*/false), {});
    if (auto l = listener_.lock()) l->release(this);
    if (state_ != State::kEstablishing) return;
    if (outcome_.rtr == proto::RtrType::kNone) {
      state_ = State::kEstablished;
      if (log::enabled(log::Level::kInfo)) log_line(log::Level::kInfo, "established");
      emit(CmEventType::kEstablished, Status::ok());
    } else {
      rtr_deadline_.arm(runtime::Clock::now() + rtr_timeout, weak_from_this(),
                        [](Connection& self) { self.rtr_deadline_expired(); });
    }
  });
  return result;
}

void Connection::rtr_deadline_expired() {
  if (state_ != State::kEstablishing) return;
  // The connection never came up: a connect error, and no kDisconnected when the stream closes.
  state_ = State::kClosed;
  disconnected_event_sent_ = true;
  if (log::enabled(log::Level::kWarn))
    log_line(log::Level::kWarn, "connect error: no RTR from the peer in time");
  abort_stream();
  if (qp_ != nullptr) [[maybe_unused]] Status s = qp_->modify_state(QpState::kError);  // flushes
  emit(CmEventType::kConnectError, Status(Errc::kTimedOut, "no RTR from the peer in time"));
}

Status Connection::reject(std::span<const std::uint8_t> private_data) {
  if (Status s = check_private_data(private_data); !s) return s;
  Status result;
  engine_.run_sync([&] {
    if (state_ != State::kRequestPending) {
      result = Status(Errc::kInvalidState, "no connection request is pending");
      return;
    }
    if (log::enabled(log::Level::kInfo))
      log_line(log::Level::kInfo, "rejecting the connection request");
    socket_.send_frame(responder_.reject(private_data));
    close_handshake();
  });
  return result;
}

void Connection::start_stream(const verbs::LinkParams& params, ConstByteSpan early) {
  io::Fd fd = socket_.hand_over();
  state_ = State::kEstablishing;
  if (log::enabled(log::Level::kInfo)) {
    log_line(log::Level::kInfo, "MPA revision " + std::to_string(outcome_.revision) + ", CRC " +
                                    (params.crc ? "on" : "off") + ", markers sent " +
                                    (params.send_markers ? "yes" : "no") + ", received " +
                                    (params.receive_markers ? "yes" : "no") + ", IRD " +
                                    std::to_string(outcome_.ird) + ", ORD " +
                                    std::to_string(outcome_.ord) + ", RTR " +
                                    std::string(rtr_name(outcome_.rtr)) + ", " +
                                    (params.fpdu_size != 0
                                         ? "FPDUs up to " + std::to_string(params.fpdu_size) +
                                               " bytes across segments, "
                                         : std::string()) +
                                    (params.initiator ? "initiator" : "responder"));
  }
  if (self_) engine_.retire(std::move(self_));
  runtime::Engine& carrier = engines_.for_stream();
  stream_ =
      std::make_shared<runtime::Stream>(carrier, engine_, std::move(fd), *qp_, weak_from_this());
  // On the stream's engine thread, and before the connection reports itself established (the
  // QP is then in RTS). That engine never waits for this one, so the wait cannot deadlock.
  carrier.run_sync([&] { stream_->start(params, early); });
}

void Connection::abort_stream() {
  if (!stream_) return;
  stream_->abort();  // unbinds the QP and closes the socket
  engine_.retire(std::move(stream_));
}

void Connection::stream_rtr_received() {
  if (state_ != State::kEstablishing) return;
  rtr_deadline_.cancel();
  state_ = State::kEstablished;
  if (log::enabled(log::Level::kInfo)) log_line(log::Level::kInfo, "established (RTR received)");
  emit(CmEventType::kEstablished, Status::ok());
}

void Connection::stream_closed(bool graceful, const std::string& why) {
  const bool was_up = state_ == State::kEstablished || state_ == State::kEstablishing;
  if (log::enabled(log::Level::kInfo)) {
    log_line(log::Level::kInfo,
             std::string(graceful ? "closed" : "closed abnormally") + ": " + why);
  }
  state_ = State::kClosed;
  rtr_deadline_.cancel();
  if (stream_) engine_.retire(std::move(stream_));
  if (was_up && !disconnected_event_sent_) {
    disconnected_event_sent_ = true;
    emit(CmEventType::kDisconnected, graceful ? Status::ok() : Status(Errc::kConnectionReset, why));
  }
}

void Connection::disconnect() {
  engine_.run_sync([&] {
    if (log::enabled(log::Level::kInfo) && state_ != State::kClosed)
      log_line(log::Level::kInfo, "disconnecting");
    if (stream_) {
      stream_->disconnect();
    } else if (state_ != State::kClosed) {
      close_handshake();
    }
  });
}

void Connection::abort() {
  engine_.run_sync([&] {
    if (log::enabled(log::Level::kDebug) && state_ != State::kClosed)
      log_line(log::Level::kDebug, "aborting");
    disconnected_event_sent_ = true;  // the application asked: no event
    rtr_deadline_.cancel();
    abort_stream();
    if (state_ != State::kClosed) close_handshake();
    qp_ = nullptr;
  });
}

void Connection::fail(CmEventType type, Status why, std::optional<wire::TerminateCode> terminate) {
  if (log::enabled(log::Level::kWarn)) {
    log_line(log::Level::kWarn,
             std::string(to_string(type)) + ": " + why.to_string() +
                 (terminate ? ", sending Terminate " + wire::describe_named(*terminate)
                            : std::string()));
  }
  if (terminate && socket_.open()) {
    const auto t = setup_terminate(*terminate);
    const long n = io::send_bytes(socket_.fd(), t);
    if (n > 0) io::pcap_sent(socket_.fd(), ConstByteSpan(t).first(static_cast<std::size_t>(n)));
  }
  close_handshake();
  emit(type, std::move(why));
}

void Connection::close_handshake() {
  // Engine thread. Releasing the listener's reference may drop the last one, while a callback
  // of this object is still on the stack: keep it alive until the engine is done with it.
  engine_.retire(shared_from_this());
  socket_.close();
  state_ = State::kClosed;
  if (auto l = listener_.lock()) l->release(this);
  if (self_) engine_.retire(std::move(self_));
}

void Connection::emit(CmEventType type, Status status, std::vector<std::uint8_t> private_data) {
  CmEvent e;
  e.type = type;
  e.connection = shared_from_this();
  if (type == CmEventType::kConnectRequest) e.listener = listener_.lock();
  e.private_data = std::move(private_data);
  e.status = std::move(status);
  if (auto ch = events_.lock()) ch->push(std::move(e));
}

}  // namespace uwarp::cm
