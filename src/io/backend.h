// The I/O backend interface. Two shapes of operation:
//
// - Completions (as MsQuic's and Seastar's): the caller starts an operation with its buffer
//   (recv, send, accept, connect_wait) and later gets its result in a callback. An epoll backend
//   performs the system call when the socket is ready; an io_uring backend hands the same
//   operation to the kernel.
// - Readiness (watch_readable, watch_writable): the backend says that a socket may have become
//   readable (writable), and the handler receives with try_recv (sends with io::send_iov), on
//   whichever thread holds its own lock. This is what
//   lets any thread receive on a connected stream (runtime::Stream::poll_rx: an application
//   thread busy-polling its CQ) while the loop thread remains the fallback. A watch may name a
//   buffer: a backend that can (io_uring) then receives the first bytes into it, so that the
//   wake-up arrives with them, and on_readable says what it received. Until that report has been
//   handled, the fd's bytes belong to the watch: try_recv from any other thread says -EBUSY.
//
// Per fd, use either recv or watch_readable/try_recv, not both at once (the CM's MPA handshake
// uses recv; the stream that follows uses watches). send() lets the kernel read the caller's
// iovecs until on_send, on io_uring even while the socket is full: only for memory the caller
// owns that long (the CM's MPA frames). A stream sends application memory itself, under its own
// lock, and waits for space with watch_writable, so that no system call reads that memory after
// the stream has given it back (deregistration, a flush).
//
// Threads: attach, recv, try_recv, send, accept, connect_wait, watch_readable, watch_writable
// and wake may be called from any thread; detach, run_once and shutdown only on the loop
// thread. The loop thread is the one that makes the backend (make_*_backend), and it also
// destroys it: a library's own thread, never an application thread (the kernel interrupts the
// blocking system calls of every thread that created or submitted to an io_uring when that ring
// is torn down; backend_uring.cc). An attached fd is detached before it is closed.
// Callbacks run on the loop thread, never inside the call that started the operation, and never
// with the backend's own lock held (a callback may start operations).
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

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
  // accept(): one accepted connection, or an error; accept stays armed. After kNoResources (out
  // of descriptors or memory: the connection stays queued) the backend tries again only after a
  // pause (io/accept_backoff.h), serving other fds meanwhile; one call per attempt.
  virtual void on_accept(Result<Fd> /*connection*/, const SocketAddress& /*peer*/) {}
  // connect_wait(): the connect finished; 0 or the socket error.
  virtual void on_connect(int /*error*/) {}
  // watch_readable(): the fd may be readable (data, end of stream or an error). One call per
  // watch; the watch is then disarmed. `received`: empty if the backend only watched; else the
  // result of its receive into the watch's buffer, as for on_recv.
  virtual void on_readable(std::optional<long> /*received*/) {}
  // watch_writable(): the fd may be writable (send space, or an error). One call per watch.
  virtual void on_writable() {}
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
  // Arms a one-shot readiness watch: on_readable is called once, on the loop thread, as soon as
  // the fd may have become readable since the handler last emptied it (at once if that may
  // already be the case). Contract for the handler: after each on_readable (and whenever it
  // receives itself), receive until the socket is empty before it watches again: until EAGAIN,
  // the end of the stream, or a receive that returned fewer bytes than it asked for (a stream
  // socket returns less only when nothing more was queued; bytes queued later raise readiness
  // anew, and once the peer has closed or the socket failed every watch fires at once, so the
  // end of the stream behind a short read is not missed). If it stops earlier (fairness), it
  // passes maybe_readable = true so that the watch fires again at once. While no watch is
  // armed, the backend may stop listening for the fd's read readiness at all (no wake-ups for
  // it), until the next watch_readable.
  // `into` (used only when maybe_readable is false): the backend may receive up to into.size()
  // bytes into it before it reports, and then says so in on_readable (a short receive empties
  // the socket, as above). `into` stays valid until on_readable.
  // One watch at a time per fd: the handler watches again only after on_readable. A watch
  // started while one is armed adds nothing (the armed one reports, with its own buffer).
  virtual void watch_readable(int fd, bool maybe_readable = false, ByteSpan into = {}) = 0;
  // Arms a one-shot watch for send space: on_writable is called once, on the loop thread, as
  // soon as the fd is writable or has failed. For a handler whose own send just found the
  // socket full (EAGAIN): space that frees between that send and this call is not missed.
  virtual void watch_writable(int fd) = 0;
  // Receives what the socket holds now, on the calling thread: bytes (0: the peer closed), or
  // -errno (-EAGAIN: nothing queued). -EBUSY while a watch's receive may still deliver bytes
  // (until its on_readable has returned; the loop thread may receive inside that call).
  virtual long try_recv(int fd, ByteSpan into) = 0;
  // The same, scattered over `into` in order (one system call; at most IOV_MAX pieces).
  virtual long try_recv(int fd, std::span<const iovec> into) = 0;
  virtual void connect_wait(int fd) = 0;
  // Waits up to `timeout` (negative: no limit; microsecond resolution where the kernel offers
  // it) for completions and readiness, and runs their callbacks. Returns how many sockets had
  // something to do (0: it only waited).
  virtual std::size_t run_once(std::chrono::microseconds timeout) = 0;
  // Makes a blocked run_once return soon.
  virtual void wake() = 0;
  // Loop thread, after its last run_once: ends every operation still in flight, so that no
  // socket outlives its fd in the kernel (io_uring's requests hold their sockets open).
  virtual void shutdown() {}
  // "io_uring" or "epoll": for logs and tests.
  virtual std::string_view name() const = 0;
};

std::unique_ptr<IoBackend> make_epoll_backend();
// nullptr if this kernel or its policy (kernel.io_uring_disabled, seccomp) refuses io_uring.
std::unique_ptr<IoBackend> make_uring_backend();
// io_uring, unless UWARP_IO=epoll is in the environment or the kernel refuses io_uring.
std::unique_ptr<IoBackend> make_backend();

}  // namespace uwarp::io
