// The I/O backend interface, shaped around completions (as MsQuic's and Seastar's): the caller
// starts an operation with its buffer, and later gets the operation's result in a callback. An
// epoll backend performs the system call when the socket is ready; an io_uring backend can hand
// the same operations to the kernel, without changing any caller.
//
// Threads: attach, recv, send, accept, connect_wait and wake may be called from any thread;
// detach and run_once only on the loop thread (the thread that calls run_once). Callbacks run on
// the loop thread, never inside the call that started the operation.
#pragma once

#include <sys/uio.h>

#include <memory>
#include <span>

#include "base/bytes.h"
#include "io/socket.h"
#include "uwarp/status.h"

namespace uwarp::io {

class IoHandler {
 public:
  virtual ~IoHandler() = default;
  // recv(): bytes received into the buffer (0: the peer closed), or -errno.
  virtual void on_recv(long /*result*/) {}
  // send(): bytes sent from the iovecs (possibly fewer than all), or -errno.
  virtual void on_send(long /*result*/) {}
  // accept(): one accepted connection, or an error; accept stays armed.
  virtual void on_accept(Result<Fd> /*connection*/, const SocketAddress& /*peer*/) {}
  // connect_wait(): the connect finished; 0 or the socket error.
  virtual void on_connect(int /*error*/) {}
};

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  virtual Status attach(int fd, IoHandler* handler) = 0;
  // No callback for `fd` starts after detach returns. Loop thread only.
  virtual void detach(int fd) = 0;
  // One receive at a time per fd; `into` stays valid until on_recv.
  virtual void recv(int fd, ByteSpan into) = 0;
  // One send at a time per fd; the iovec array and what it points to stay valid until on_send.
  virtual void send(int fd, std::span<const iovec> iov) = 0;
  virtual void accept(int listen_fd) = 0;
  virtual void connect_wait(int fd) = 0;
  // Waits up to timeout_ms (-1: no limit) for completions and runs their callbacks. Returns
  // how many sockets had something to do (0: it only waited).
  virtual std::size_t run_once(int timeout_ms) = 0;
  // Makes a blocked run_once return soon.
  virtual void wake() = 0;
};

std::unique_ptr<IoBackend> make_epoll_backend();

}  // namespace uwarp::io
