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
  static Result<std::shared_ptr<Listener>> listen(runtime::Engine& engine, const std::shared_ptr<EventChannel>& events,
                                                  const io::SocketAddress& address, int backlog);
  ~Listener() override;
  // Stops accepting; pending (unanswered) requests are closed.
  void close();
  const io::SocketAddress& address() const { return address_; }
  void set_owner(std::shared_ptr<void> owner) { owner_ = std::move(owner); }
  const std::shared_ptr<void>& owner() const { return owner_; }
  void set_context(void* c) { context_ = c; }
  void* context() const { return context_; }

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
  void* context_ = nullptr;
  std::chrono::milliseconds request_timeout_{5000};  // as Linux siw: 5 s for the request
  std::unordered_map<Connection*, std::shared_ptr<Connection>> pending_;
};

}  // namespace uwarp::cm
