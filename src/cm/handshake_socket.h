// The socket of one connection while the MPA exchange runs on it, and what the exchange holds of
// the engine with it: the fd, attached to the engine's I/O backend with this object as its
// handler, the bytes received so far, the frame being sent, and the deadline timer. Both end
// together: when the exchange succeeds the stream takes the fd over (hand_over()), else it is
// closed (close()). What happens on the socket reaches the connection as HandshakeEvents.
//
// Thread: the engine thread, where the backend's callbacks run (set_fd() also before the fd is
// attached). Lifetime: a member of the connection it reports to; an fd still held is detached
// from the backend (on the engine thread) and closed with this object.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "io/backend.h"
#include "io/socket.h"
#include "runtime/engine.h"
#include "runtime/engine_timer.h"
#include "uwarp/status.h"

namespace uwarp::cm {

// What the connection hears from its handshake socket (engine thread).
class HandshakeEvents {
 public:
  virtual ~HandshakeEvents() = default;
  // connect_wait() finished: ok, or why the connect failed (kConnectionRefused, kIoError).
  virtual void handshake_connected(Status result) = 0;
  // More bytes arrived: received_bytes() holds all of them.
  virtual void handshake_received() = 0;
  // The peer closed, or the receive failed; `why` says which.
  virtual void handshake_lost(Status why) = 0;
};

class HandshakeSocket final : public io::IoHandler {
 public:
  // Receives are posted for this many bytes at a time.
  static constexpr std::size_t kReadSize = 2048;

  HandshakeSocket(runtime::Engine& engine, HandshakeEvents& events)
      : engine_(engine), events_(events), deadline_(engine) {}
  ~HandshakeSocket() override;
  HandshakeSocket(const HandshakeSocket&) = delete;
  HandshakeSocket& operator=(const HandshakeSocket&) = delete;

  void set_fd(io::Fd fd) { fd_ = std::move(fd); }
  // Attaches the fd to the engine's backend, with this object as its handler.
  Status attach() { return engine_.backend().attach(fd_.get(), this); }
  // The exchange's deadline: cancelled when the fd is handed over or closed.
  runtime::EngineTimer& deadline() { return deadline_; }
  int fd() const { return fd_.get(); }
  bool open() const { return fd_.valid(); }

  // Waits for the connect started on the fd: handshake_connected() follows.
  void connect_wait() { engine_.backend().connect_wait(fd_.get()); }
  // Posts a receive for up to kReadSize bytes after those received so far: handshake_received()
  // or handshake_lost() follows.
  void receive_more();
  // Every byte received so far, from the start of the stream; valid until receive_more().
  ConstByteSpan received_bytes() const { return {rx_.data(), rx_used_}; }

  // Sends `frame`: what the kernel does not take at once goes through the backend, continued
  // until all of it has gone (a failure shows on the receive side).
  void send_frame(std::vector<std::uint8_t> frame);

  // Cancels the deadline, detaches the fd from the backend and gives it up: the stream takes it
  // over.
  io::Fd hand_over();
  // Cancels the deadline, detaches the fd from the backend and closes it (if it is open).
  void close();

  // io::IoHandler.
  void on_connect(int error) override;
  void on_recv(long result) override;
  void on_send(long result) override;

 private:
  runtime::Engine& engine_;
  HandshakeEvents& events_;
  io::Fd fd_;
  std::vector<std::uint8_t> rx_;  // handshake bytes received so far
  std::size_t rx_used_ = 0;
  std::vector<std::uint8_t> tx_;  // handshake frame being sent
  iovec tx_iov_{};
  runtime::EngineTimer deadline_;
};

}  // namespace uwarp::cm
