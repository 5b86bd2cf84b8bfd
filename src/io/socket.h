// TCP sockets for iWARP streams: non-blocking, TCP_NODELAY, no SIGPIPE (MSG_NOSIGNAL), IPv4 and
// IPv6. The only place besides backend_epoll.cc that makes socket system calls.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "base/bytes.h"
#include "uwarp/status.h"

namespace uwarp::io {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // Numeric host ("127.0.0.1", "::1", "0.0.0.0", "::") or a name resolved with getaddrinfo.
  static Result<SocketAddress> resolve(const std::string& host, std::uint16_t port);
  std::uint16_t port() const;
  void set_port(std::uint16_t port);
  int family() const { return storage.ss_family; }
  std::string to_string() const;  // "1.2.3.4:5" or "[::1]:5"
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Result<Fd> tcp_listen(const SocketAddress& addr, int backlog);
// Starts a non-blocking connect, from `local` if given (bound first, SO_REUSEADDR); completion
// is signalled by writability (see socket_error()).
Result<Fd> tcp_connect_start(const SocketAddress& addr, const SocketAddress* local = nullptr);
// Accepts one pending connection (non-blocking); kBusy when none is pending, kNoResources when
// the process or the kernel is out of descriptors or memory (io::accept_out_of_resources).
Result<Fd> tcp_accept(int listen_fd, SocketAddress* peer);
// The pending error of a socket (SO_ERROR), 0 if none.
int socket_error(int fd);
// Options every iWARP stream gets: TCP_NODELAY, non-blocking, and the liveness bound below.
Status configure_stream(int fd);

// The liveness bound: how long a connection may go without hearing from its peer while it
// waits for something (an acknowledgement of data sent, or any segment while idle) before the
// kernel ends it with ETIMEDOUT, which fails the stream (the QP enters ERROR and flushes).
// Without it, data in flight is retransmitted for about 15 minutes (tcp_retries2) and an idle
// receiver whose peer vanished waits forever. UWARP_TCP_USER_TIMEOUT_MS, read once per
// process; default kDefaultLivenessBoundMs; 0: the kernel's defaults (no bound).
inline constexpr std::uint32_t kDefaultLivenessBoundMs = 30000;
// The value of UWARP_TCP_USER_TIMEOUT_MS: unset, empty or not a whole number of milliseconds
// gives the default; values are capped at 24 hours.
std::uint32_t parse_liveness_bound_ms(const char* value);
std::uint32_t liveness_bound_ms();
// Applies a bound of `ms` (0: leaves the socket as the kernel made it): TCP_USER_TIMEOUT = ms,
// which ends a connection whose data sent stays unacknowledged that long; and TCP keepalive
// (probes after ms/3 of silence, then every ms/15, in whole seconds, at least 1), whose probes
// the user timeout cuts off at ms, so that a connection with nothing in flight learns of a
// vanished peer too. A peer that acknowledges (even a zero window) is never cut off.
Status set_liveness_bound(int fd, std::uint32_t ms);
// The current TCP maximum segment size (TCP_MAXSEG); 0 if unknown.
std::size_t tcp_mss(int fd);
// Bounds the data the socket holds unsent (TCP_NOTSENT_LOWAT): once that much waits, sends
// take no more and the socket is not reported writable. False if the kernel refused.
bool set_notsent_lowat(int fd, std::size_t bytes);
SocketAddress local_address(int fd);
SocketAddress peer_address(int fd);
// What TCP_INFO says of a connection (for its statistics: `uwarp stat`).
struct TcpInfo {
  std::uint32_t state = 0;  // TCP_ESTABLISHED, ...
  std::uint32_t rtt_us = 0;
  std::uint32_t rttvar_us = 0;
  std::uint32_t snd_cwnd = 0;  // segments
  std::uint32_t total_retrans = 0;
};
// False if the kernel refused (not a TCP socket).
bool tcp_info(int fd, TcpInfo& out);

// Non-blocking I/O. Results: bytes (>= 0), or -errno (-EAGAIN when it would block).
long recv_some(int fd, ByteSpan into);
// Scattered over `into` in order.
long recv_some(int fd, std::span<const iovec> into);
long send_iov(int fd, std::span<const iovec> iov);
long send_bytes(int fd, ConstByteSpan bytes);
void shutdown_write(int fd);
// The peer has closed its side (FIN), or the connection failed (a reset), even with bytes still
// unread: for a receiver that stopped reading. One poll(2) that does not wait.
bool peer_closed(int fd);
// Bytes (and our FIN) the peer has not acknowledged yet (SIOCOUTQ); 0 if unknown.
std::size_t unacknowledged(int fd);
// Closes `fd` with a TCP reset (SO_LINGER 0) instead of a FIN: for a connection refused at once,
// which then leaves no TIME_WAIT behind on this side.
void close_with_reset(Fd fd);

}  // namespace uwarp::io
