#include "cm/listener.h"

namespace uwarp::cm {

Result<std::shared_ptr<Listener>> Listener::listen(runtime::Engine& engine, const std::shared_ptr<EventChannel>& events,
                                                   const io::SocketAddress& address, int backlog,
                                                   std::shared_ptr<void> owner) {
  auto fd = io::tcp_listen(address, backlog);
  if (!fd) return Unexpected{fd.error()};
  std::shared_ptr<Listener> l(new Listener(engine, events));
  l->owner_ = std::move(owner);
  l->fd_ = std::move(*fd);
  l->address_ = io::local_address(l->fd_.get());
  Status st;
  engine.run_sync([&] {
    st = engine.backend().attach(l->fd_.get(), l.get());
    if (st) engine.backend().accept(l->fd_.get());
  });
  if (!st) return Unexpected{st};
  return l;
}

// An attached fd must be detached before it is closed (io::IoBackend: io_uring would otherwise
// keep accepting on the socket).
Listener::~Listener() { close(); }

void Listener::close() {
  engine_.run_sync([&] {
    if (fd_.valid()) {
      engine_.backend().detach(fd_.get());
      fd_.reset();
    }
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [ptr, c] : pending) c->abort();
  });
}

void Listener::on_accept(Result<io::Fd> connection, const io::SocketAddress& peer) {
  if (!connection) return;  // transient accept errors: keep listening
  auto events = events_.lock();
  if (!events) return;
  Connection::accepted(engine_, events, shared_from_this(), std::move(*connection), peer, request_timeout_);
}

}  // namespace uwarp::cm
