#include "io/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "io/accept_backoff.h"
#include "io/pcap_recorder.h"
#include "io/race_annotations.h"

namespace uwarp::io {
namespace {

Status errno_status(const char* what) {
  const int e = errno;
  Errc code = Errc::kIoError;
  if (e == ECONNREFUSED) code = Errc::kConnectionRefused;
  if (e == EADDRINUSE || e == EADDRNOTAVAIL) code = Errc::kBusy;
  if (e == ECONNRESET) code = Errc::kConnectionReset;
  return Status(code, std::string(what) + ": " + std::strerror(e));
}

}  // namespace

void Fd::reset() {
  if (fd_ < 0) return;
  pcap_closing(fd_);
  ::close(fd_);
  fd_ = -1;
}

Result<SocketAddress> SocketAddress::resolve(const std::string& host, std::uint16_t port) {
  SocketAddress a;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return error(Errc::kNotFound, "cannot resolve '" + host + "': " + ::gai_strerror(rc));
  }
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.length = res->ai_addrlen;
  ::freeaddrinfo(res);
  return a;
}

std::uint16_t SocketAddress::port() const {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::set_port(std::uint16_t port) {
  if (storage.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (storage.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SocketAddress::to_string() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(port());
  }
  if (storage.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "?";
}

Result<Fd> tcp_listen(const SocketAddress& addr, int backlog) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Unexpected{errno_status("socket")};
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), addr.get(), addr.length) != 0) return Unexpected{errno_status("bind")};
  if (::listen(fd.get(), backlog) != 0) return Unexpected{errno_status("listen")};
  return fd;
}

Result<Fd> tcp_connect_start(const SocketAddress& addr, const SocketAddress* local) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Unexpected{errno_status("socket")};
  if (Status s = configure_stream(fd.get()); !s) return Unexpected{s};
  if (local != nullptr) {
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), local->get(), local->length) != 0) return Unexpected{errno_status("bind")};
  }
  if (::connect(fd.get(), addr.get(), addr.length) != 0 && errno != EINPROGRESS) {
    return Unexpected{errno_status("connect")};
  }
  return fd;
}

Result<Fd> tcp_accept(int listen_fd, SocketAddress* peer) {
  SocketAddress a;
  a.length = sizeof a.storage;
  Fd fd(::accept4(listen_fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!fd.valid()) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return error(Errc::kBusy, "no pending connection");
    if (accept_out_of_resources(errno)) {
      return error(Errc::kNoResources, std::string("accept: ") + std::strerror(errno));
    }
    return Unexpected{errno_status("accept")};
  }
  if (Status s = configure_stream(fd.get()); !s) return Unexpected{s};
  if (peer != nullptr) *peer = a;
  return fd;
}

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

Status configure_stream(int fd) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return errno_status("TCP_NODELAY");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno_status("O_NONBLOCK");
  return set_liveness_bound(fd, liveness_bound_ms());
}

std::uint32_t parse_liveness_bound_ms(const char* value) {
  constexpr unsigned long long kMaxMs = 24ull * 3600 * 1000;
  if (value == nullptr || *value == '\0') return kDefaultLivenessBoundMs;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(value, &end, 10);
  if (*end != '\0' || errno != 0 || value[0] < '0' || value[0] > '9') return kDefaultLivenessBoundMs;
  return static_cast<std::uint32_t>(std::min(v, kMaxMs));
}

std::uint32_t liveness_bound_ms() {
  static const std::uint32_t ms = parse_liveness_bound_ms(std::getenv("UWARP_TCP_USER_TIMEOUT_MS"));
  return ms;
}

Status set_liveness_bound(int fd, std::uint32_t ms) {
  if (ms == 0) return Status::ok();
  const unsigned timeout = ms;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof timeout) != 0)
    return errno_status("TCP_USER_TIMEOUT");
  // Keepalive intervals are whole seconds (at least 1); the user timeout ends the probing.
  // Several probes fit in the bound (ten at 30 s, four at 5 s), so that a lossy path does not
  // end an idle connection over one lost probe; at 2 s only one fits.
  const int idle = static_cast<int>(std::max<std::uint32_t>(1, ms / 3000));
  const int interval = static_cast<int>(std::max<std::uint32_t>(1, ms / 15000));
  const int count = 6;  // not reached: TCP_USER_TIMEOUT decides when the probes have failed
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0) return errno_status("TCP_KEEPIDLE");
  if (::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) != 0)
    return errno_status("TCP_KEEPINTVL");
  if (::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) != 0) return errno_status("TCP_KEEPCNT");
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0) return errno_status("SO_KEEPALIVE");
  return Status::ok();
}

std::size_t tcp_mss(int fd) {
  int mss = 0;
  socklen_t len = sizeof mss;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 || mss <= 0) return 0;
  return static_cast<std::size_t>(mss);
}

bool set_notsent_lowat(int fd, std::size_t bytes) {
  const unsigned value = static_cast<unsigned>(std::min<std::size_t>(bytes, UINT32_MAX));
  return ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &value, sizeof value) == 0;
}

bool tcp_info(int fd, TcpInfo& out) {
  ::tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  out.state = info.tcpi_state;
  out.rtt_us = info.tcpi_rtt;
  out.rttvar_us = info.tcpi_rttvar;
  out.snd_cwnd = info.tcpi_snd_cwnd;
  out.total_retrans = info.tcpi_total_retrans;
  return true;
}

SocketAddress local_address(int fd) {
  SocketAddress a;
  a.length = sizeof a.storage;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length);
  return a;
}

SocketAddress peer_address(int fd) {
  SocketAddress a;
  a.length = sizeof a.storage;
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length);
  return a;
}

long recv_some(int fd, ByteSpan into) {
  const ssize_t n = ::recv(fd, into.data(), into.size(), MSG_DONTWAIT);
  if (n > 0) annotate_socket_receive();
  return n >= 0 ? n : -errno;
}

long recv_some(int fd, std::span<const iovec> into) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(into.data());
  msg.msg_iovlen = std::min<std::size_t>(into.size(), IOV_MAX);
  const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n > 0) annotate_socket_receive();
  return n >= 0 ? n : -errno;
}

long send_iov(int fd, std::span<const iovec> iov) {
  annotate_socket_send();
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov.data());
  msg.msg_iovlen = std::min<std::size_t>(iov.size(), IOV_MAX);
  const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  return n >= 0 ? n : -errno;
}

long send_bytes(int fd, ConstByteSpan bytes) {
  annotate_socket_send();
  const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n >= 0 ? n : -errno;
}

void shutdown_write(int fd) { ::shutdown(fd, SHUT_WR); }

std::size_t unacknowledged(int fd) {
  int n = 0;
  return ::ioctl(fd, SIOCOUTQ, &n) == 0 && n > 0 ? static_cast<std::size_t>(n) : 0;
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void close_with_reset(Fd fd) {
  if (!fd.valid()) return;
  const linger l{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
}  // fd closes here

}  // namespace uwarp::io
