// The socket of one connection while the MPA exchange runs on it, and what the exchange holds of
// the engine with it: the fd, attached to the engine's I/O backend with the connection as its
// handler, the bytes received so far, the frame being sent, and the deadline timer. Both end
// together: when the exchange succeeds the stream takes the fd over (hand_over()), else it is
// closed (close()).
//
// Thread: the engine thread, where the connection's IoHandler callbacks run (set_fd() also
// before the fd is attached). Lifetime: an fd still held closes with this object; the owner
// detaches it from the backend first. A deadline still set is not cancelled by the destructor:
// its callback must hold only a weak reference to the connection.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/bytes.h"
#include "io/socket.h"
#include "runtime/engine.h"

namespace uwarp::cm {

class HandshakeSocket {
 public:
  // Receives are posted for this many bytes at a time.
  static constexpr std::size_t kReadSize = 2048;

  explicit HandshakeSocket(runtime::Engine& engine) : engine_(engine) {}

  void set_fd(io::Fd fd) { fd_ = std::move(fd); }
  // Calls `expired` on the engine thread at `deadline` unless cancelled, handed over or closed
  // first. One deadline at a time.
  void set_deadline(runtime::Clock::time_point deadline, std::function<void()> expired);
  void cancel_deadline();
  int fd() const { return fd_.get(); }
  bool open() const { return fd_.valid(); }

  // Posts a receive for up to kReadSize bytes after those received so far. Its result reaches
  // the connection's on_recv(), which passes a positive one to received().
  void receive_more();
  void received(std::size_t n) { rx_used_ += n; }
  // Every byte received so far, from the start of the stream; valid until receive_more().
  ConstByteSpan received_bytes() const { return {rx_.data(), rx_used_}; }

  // Sends `frame`: what the kernel does not take at once goes through the backend, continued by
  // on_send() (the connection's) until all of it has gone.
  void send_frame(std::vector<std::uint8_t> frame);
  void on_send(long result);

  // Cancels the deadline, detaches the fd from the backend and gives it up: the stream takes it
  // over.
  io::Fd hand_over();
  // Cancels the deadline, detaches the fd from the backend and closes it (if it is open).
  void close();

 private:
  runtime::Engine& engine_;
  io::Fd fd_;
  std::vector<std::uint8_t> rx_;  // handshake bytes received so far
  std::size_t rx_used_ = 0;
  std::vector<std::uint8_t> tx_;  // handshake frame being sent
  iovec tx_iov_{};
  std::uint64_t timer_ = 0;  // the deadline's engine timer, 0 if none
};

}  // namespace uwarp::cm
