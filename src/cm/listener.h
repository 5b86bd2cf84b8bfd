// A listening endpoint: accepts TCP connections on address:port and runs the responder side
// of the MPA exchange for each; complete requests become kConnectRequest events.
// Threads: create and close from any thread; the work happens on the engine thread.
#pragma once

#include <chrono>
#include <memory>
#include <unordered_map>

#include "cm/connection.h"
#include "cm/events.h"
#include "io/backend.h"
#include "runtime/engine.h"

namespace uwarp::cm {

class Listener final : public io::IoHandler, public std::enable_shared_from_this<Listener> {
 public:
  // `owner` (may be null) is kept alive by the listener and by every connection it accepts; it
  // is set before accepting starts, as connections may arrive at once.
  static Result<std::shared_ptr<Listener>> listen(runtime::Engine& engine, const std::shared_ptr<EventChannel>& events,
                                                  const io::SocketAddress& address, int backlog,
                                                  std::shared_ptr<void> owner);
  ~Listener() override;
  // Stops accepting; pending (unanswered) requests are closed.
  void close();
  const io::SocketAddress& address() const { return address_; }
  const std::shared_ptr<void>& owner() const { return owner_; }

  // Pending connections (engine thread).
  void adopt(const std::shared_ptr<Connection>& c) { pending_[c.get()] = c; }
  void release(Connection* c) { pending_.erase(c); }

  void on_accept(Result<io::Fd> connection, const io::SocketAddress& peer) override;

 private:
  Listener(runtime::Engine& engine, const std::shared_ptr<EventChannel>& events) : engine_(engine), events_(events) {}

  runtime::Engine& engine_;
  std::weak_ptr<EventChannel> events_;
  std::shared_ptr<void> owner_;  // keeps the engine's owner alive as long as this object
  io::Fd fd_;
  io::SocketAddress address_;
  std::chrono::milliseconds request_timeout_{5000};  // as Linux siw: 5 s for the request
  std::unordered_map<Connection*, std::shared_ptr<Connection>> pending_;
};

}  // namespace uwarp::cm
