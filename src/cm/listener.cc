#include "cm/listener.h"

#include <algorithm>

namespace uwarp::cm {

Result<std::shared_ptr<Listener>> Listener::listen(runtime::EnginePool& engines,
                                                   const std::shared_ptr<EventChannel>& events,
                                                   const io::SocketAddress& address,
                                                   const ListenOptions& options,
                                                   std::shared_ptr<void> owner) {
  auto fd = io::tcp_listen(address, options.backlog);
  if (!fd) return Unexpected{fd.error()};
  std::shared_ptr<Listener> l(new Listener(engines, events, options));
  runtime::Engine& engine = engines.control();
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
    arrivals_.clear();
    order_timer_.cancel();
    auto pending = std::move(pending_);
    pending_.clear();
    pending_changed();
    for (auto& [ptr, c] : pending) c->abort();
  });
}

void Listener::adopt(const std::shared_ptr<Connection>& c) {
  pending_[c.get()] = c;
  pending_changed();
  arrivals_.push_back(Arrival{c.get(), runtime::Clock::now() + kRequestOrderHold});
}

std::deque<Listener::Arrival>::iterator Listener::arrival_of(Connection* c) {
  return std::find_if(arrivals_.begin(), arrivals_.end(),
                      [c](const Arrival& a) { return a.connection == c; });
}

void Listener::release(Connection* c) {
  pending_.erase(c);
  pending_changed();
  auto it = arrival_of(c);
  if (it == arrivals_.end()) return;
  arrivals_.erase(it);
  report_in_order();
}

void Listener::request_complete(Connection* c) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  auto it = arrival_of(c);
  if (it == arrivals_.end()) {
    c->report_request();  // its place expired: nothing waits for it, and it waits for nothing
    return;
  }
  it->complete = true;
  report_in_order();
}

void Listener::report_in_order() {
  const auto now = runtime::Clock::now();
  while (!arrivals_.empty()) {
    const Arrival front = arrivals_.front();
    if (!front.complete && front.place_until > now) break;
    arrivals_.pop_front();
    if (front.complete) front.connection->report_request();
  }
  if (order_timer_.armed()) return;
  const bool held = std::any_of(arrivals_.begin(), arrivals_.end(),
                                [](const Arrival& a) { return a.complete; });
  if (!held) return;
  order_timer_.arm(arrivals_.front().place_until, weak_from_this(),
                   [](Listener& self) { self.report_in_order(); });
}

void Listener::on_accept(Result<io::Fd> connection, const io::SocketAddress& peer) {
  if (!connection) {
    accept_errors_.fetch_add(1, std::memory_order_relaxed);  // keep listening
    return;
  }
  accepted_.fetch_add(1, std::memory_order_relaxed);
  if (pending_.size() >= options_.max_pending) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    io::close_with_reset(std::move(*connection));  // before its MPA exchange starts
    return;
  }
  auto events = events_.lock();
  if (!events) return;
  Connection::accepted(engines_, events, shared_from_this(), std::move(*connection), peer,
                       options_.request_timeout);
}

ListenerCounts Listener::counts() const {
  return ListenerCounts{.accepted = accepted_.load(std::memory_order_relaxed),
                        .requests = requests_.load(std::memory_order_relaxed),
                        .pending = pending_count_.load(std::memory_order_relaxed),
                        .dropped = dropped_.load(std::memory_order_relaxed),
                        .timed_out = timed_out_.load(std::memory_order_relaxed),
                        .accept_errors = accept_errors_.load(std::memory_order_relaxed)};
}

}  // namespace uwarp::cm
