// The native connection-manager API (include/uwarp/cm.h) over the cm layer.
#include "uwarp/cm.h"

#include "api/impl.h"
#include "cm/listener.h"
#include "wire/fpdu.h"

namespace uwarp {
static_assert(kMaxFpduSize == wire::fpdu_size(wire::kMaxUlpduLength));
namespace {

proto::MpaParams to_mpa(const ConnectionParams& p) {
  proto::MpaParams m;
  m.revision = p.mpa_revision;
  m.crc = p.crc;
  m.markers = p.markers;
  m.peer_to_peer = p.peer_to_peer;
  m.offer_write_rtr = p.rtr_offer != RtrOffer::kRead;
  m.offer_read_rtr = p.rtr_offer != RtrOffer::kWrite;
  m.ird = p.ird;
  m.ord = p.ord;
  m.private_data = p.private_data;
  m.fpdu_size = p.fpdu_size;
  return m;
}

Status check(const ConnectionParams& p) {
  if (p.mpa_revision != 1 && p.mpa_revision != 2) return Status(Errc::kInvalidArgument, "MPA revision must be 1 or 2");
  if (p.peer_to_peer && p.mpa_revision != 2) return Status(Errc::kInvalidArgument, "peer-to-peer needs MPA revision 2");
  if (p.ird > 128 || p.ord > 128) return Status(Errc::kInvalidArgument, "IRD and ORD are at most 128");
  if (p.private_data.size() > proto::kMaxPrivateData) return Status(Errc::kInvalidArgument, "private data too long");
  if (p.fpdu_size > kMaxFpduSize) {
    return Status(Errc::kInvalidArgument, "an FPDU is at most " + std::to_string(kMaxFpduSize) + " bytes");
  }
  return Status::ok();
}

}  // namespace


Result<EventChannel> EventChannel::create(const Context& context) {
  auto ch = std::make_shared<detail::EventChannelImpl>();
  ch->ctx = context.impl_;
  return EventChannel(std::move(ch));
}

int EventChannel::fd() const { return impl_->events->fd(); }

std::optional<CmEvent> EventChannel::get_event(int timeout_ms) {
  auto e = impl_->events->take(timeout_ms);
  if (!e) return std::nullopt;
  CmEvent out;
  out.type = e->type;
  out.connection = Connection(e->connection);
  if (e->listener) out.listener = Listener(e->listener);
  out.private_data = std::move(e->private_data);
  out.status = std::move(e->status);
  return out;
}

Result<Listener> EventChannel::listen(const std::string& host, std::uint16_t port, int backlog) {
  return listen(host, port, ListenParams{.backlog = backlog});
}

Result<Listener> EventChannel::listen(const std::string& host, std::uint16_t port, const ListenParams& params) {
  if (params.backlog < 0 || params.request_timeout_ms < 0) {
    return error(Errc::kInvalidArgument, "backlog and request timeout must not be negative");
  }
  auto addr = io::SocketAddress::resolve(host, port);
  if (!addr) return Unexpected{addr.error()};
  cm::ListenOptions opts = cm::ListenOptions::from_environment();
  opts.backlog = params.backlog;
  if (params.max_pending != 0) opts.max_pending = params.max_pending;
  if (params.request_timeout_ms != 0) opts.request_timeout = std::chrono::milliseconds(params.request_timeout_ms);
  auto l = cm::Listener::listen(impl_->ctx->engines, impl_->events, *addr, opts, impl_->ctx);
  if (!l) return Unexpected{l.error()};
  return Listener(std::move(*l));
}

Result<Connection> EventChannel::connect(const std::string& host, std::uint16_t port, QueuePair& qp,
                                         const ConnectionParams& params) {
  if (Status s = check(params); !s) return Unexpected{s};
  auto addr = io::SocketAddress::resolve(host, port);
  if (!addr) return Unexpected{addr.error()};
  cm::ConnectOptions opts;
  if (!params.local_host.empty() || params.local_port != 0) {
    const std::string any = addr->family() == AF_INET6 ? "::" : "0.0.0.0";
    auto local = io::SocketAddress::resolve(params.local_host.empty() ? any : params.local_host,
                                            params.local_port);
    if (!local) return Unexpected{local.error()};
    opts.local = *local;
  }
  opts.mpa = to_mpa(params);
  opts.mpa_timeout = std::chrono::milliseconds(params.timeout_ms);
  auto c = cm::Connection::connect(impl_->ctx->engines, impl_->events, *addr, *qp.impl_->qp, opts);
  if (!c) return Unexpected{c.error()};
  (*c)->set_owner(impl_->ctx);
  qp.impl_->bind(*c);
  return Connection(std::move(*c));
}

Status Connection::accept(QueuePair& qp, const ConnectionParams& params) {
  if (!impl_) return Status(Errc::kInvalidState, "no connection");
  if (Status s = check(params); !s) return s;
  qp.impl_->bind(impl_);
  return impl_->accept(*qp.impl_->qp, to_mpa(params), std::chrono::milliseconds(params.timeout_ms));
}

Status Connection::reject(std::span<const std::uint8_t> private_data) {
  if (!impl_) return Status(Errc::kInvalidState, "no connection");
  return impl_->reject(private_data);
}

void Connection::disconnect() {
  if (impl_) impl_->disconnect();
}

std::string Connection::peer_address() const { return impl_ ? impl_->peer_address().to_string() : ""; }
std::string Connection::local_address() const { return impl_ ? impl_->local_address().to_string() : ""; }
bool Connection::crc() const { return impl_ && (impl_->outcome().crc || impl_->request().crc); }
bool Connection::sends_markers() const {
  return impl_ && (impl_->outcome().send_markers || impl_->request().markers);
}
bool Connection::receives_markers() const {
  return impl_ && impl_->outcome().receive_markers;
}
std::uint8_t Connection::mpa_revision() const {
  if (!impl_) return 0;
  return impl_->outcome().revision != 0 ? impl_->outcome().revision : impl_->request().revision;
}
std::uint16_t Connection::peer_ird() const {
  return impl_ && impl_->request().words ? impl_->request().words->ird : 0;
}
std::uint16_t Connection::peer_ord() const {
  return impl_ && impl_->request().words ? impl_->request().words->ord : 0;
}

std::uint16_t Listener::port() const { return impl_ ? impl_->address().port() : 0; }
ListenerStats Listener::stats() const {
  if (!impl_) return {};
  const cm::ListenerCounts c = impl_->counts();
  return ListenerStats{.accepted = c.accepted, .requests = c.requests, .pending = c.pending,
                       .dropped = c.dropped, .timed_out = c.timed_out, .accept_errors = c.accept_errors};
}
void Listener::close() {
  if (impl_) impl_->close();
}

}  // namespace uwarp
