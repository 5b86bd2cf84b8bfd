// The raw TCP baseline of uwarp-perf: what a plain TCP connection between two processes (or,
// in loopback mode, two threads) does with the same message sizes, so that uwarp's numbers can
// be read as ratios measured in the same run. Both sockets use TCP_NODELAY, as uwarp's streams.
//
// Per size the client sends a request {size, stream messages, ping-pong messages}; then
// - bandwidth: it streams the messages; the server receives them all and answers one byte; the
//   time runs from the first byte sent to that answer;
// - latency: a ping-pong of one message each way, reported as half the round trip; both ends
//   poll their socket (non-blocking receives, yielding between them) as uwarp's side polls.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "protocol.h"
#include "runner.h"

namespace uwarp::perf {
namespace {

using Clock = std::chrono::steady_clock;

struct TcpRequest {
  std::uint32_t size;
  std::uint32_t stream_iters;
  std::uint32_t pingpong_iters;
};

bool send_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<std::uint8_t*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// For the ping-pong: spins on a non-blocking receive, yielding the core between tries, as
// uwarp-perf's uwarp side polls its CQ; a blocking receive would add a wake-up per message.
bool recv_all_polling(int fd, void* data, std::size_t n) {
  auto* p = static_cast<std::uint8_t*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      std::this_thread::yield();
      continue;
    }
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// One measured size, server side: receive the stream, answer, echo the ping-pongs.
bool serve_request(int fd, const TcpRequest& req) {
  std::vector<std::uint8_t> buf(req.size);
  for (std::uint32_t i = 0; i < req.stream_iters; ++i)
    if (!recv_all(fd, buf.data(), req.size)) return false;
  const std::uint8_t done = 1;
  if (!send_all(fd, &done, 1)) return false;
  for (std::uint32_t i = 0; i < req.pingpong_iters; ++i)
    if (!recv_all_polling(fd, buf.data(), req.size) || !send_all(fd, buf.data(), req.size))
      return false;
  return true;
}

void serve_connection(int fd) {
  set_nodelay(fd);
  TcpRequest req;
  while (recv_all(fd, &req, sizeof req)) {
    req = {ntohl(req.size), ntohl(req.stream_iters), ntohl(req.pingpong_iters)};
    if (req.size == 0 || req.size > (64u << 20) || !serve_request(fd, req)) break;
  }
  ::close(fd);
}

int connect_to(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd >= 0) set_nodelay(fd);
  return fd;
}

bool measure(int fd, const Options& o, std::uint32_t size, SizeResult& r) {
  r.tcp = true;
  r.op = o.op;
  r.size = size;
  r.qps = 1;
  r.iters = o.iters != 0 ? o.iters : default_iters(size);
  if (size == 0) return true;  // TCP has no zero-length messages
  const std::uint32_t pingpongs =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(r.iters, size <= 65536 ? 1000 : 100));
  std::vector<std::uint8_t> src(size), dst(size);
  fill_pattern(src.data(), size, 1);
  // The stream of `iters` messages, then the server's answer.
  auto stream = [&](std::uint64_t iters, std::uint32_t then_pingpongs) {
    const TcpRequest req{htonl(size), htonl(static_cast<std::uint32_t>(iters)), htonl(then_pingpongs)};
    bool ok = send_all(fd, &req, sizeof req);
    for (std::uint64_t i = 0; i < iters && ok; ++i) ok = send_all(fd, src.data(), size);
    std::uint8_t done = 0;
    return ok && recv_all(fd, &done, 1) && done == 1;
  };
  if (!stream(warmup_iters(r.iters), 0)) {
    r.error = "TCP transfer failed";
    return false;
  }

  const auto t0 = Clock::now();
  bool ok = stream(r.iters, pingpongs);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.gbps = double(r.iters) * size * 8 / r.seconds / 1e9;
  r.msg_rate = double(r.iters) / r.seconds;

  std::vector<double> us;
  us.reserve(pingpongs);
  for (std::uint32_t i = 0; i < pingpongs && ok; ++i) {
    const auto s = Clock::now();
    ok = send_all(fd, src.data(), size) && recv_all_polling(fd, dst.data(), size);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count() / 2);
  }
  r.lat_iters = pingpongs;
  r.lat_median_us = percentile(us, 0.5);
  r.lat_p99_us = percentile(us, 0.99);
  r.verified = o.verify && ok && check_pattern(dst.data(), size, 1);  // the last echo
  if (!ok) {
    r.error = "TCP transfer failed";
    return false;
  }
  if (o.verify && !r.verified) {
    r.error = "data verification failed";
    return false;
  }
  return true;
}

}  // namespace

int run_tcp_server(const Options& o, std::atomic<bool>& stop, std::atomic<int>* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (::getaddrinfo(o.addr.c_str(), std::to_string(o.port).c_str(), &hints, &res) != 0) {
    std::fprintf(stderr, "uwarp-perf: cannot resolve %s\n", o.addr.c_str());
    if (bound_port) bound_port->store(0);
    return 1;
  }
  const int listener = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  const bool listening =
      listener >= 0 && ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
      ::bind(listener, res->ai_addr, res->ai_addrlen) == 0 && ::listen(listener, 8) == 0 &&
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &len) == 0;
  ::freeaddrinfo(res);
  if (!listening) {
    std::fprintf(stderr, "uwarp-perf: cannot listen on %s port %u: %s\n", o.addr.c_str(), o.port,
                 std::strerror(errno));
    if (listener >= 0) ::close(listener);
    if (bound_port) bound_port->store(0);
    return 1;
  }
  const std::uint16_t port = ntohs(bound.ss_family == AF_INET6
                                       ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (bound_port) bound_port->store(port);
  if (o.progress) std::fprintf(stderr, "uwarp-perf: TCP baseline server on port %u\n", port);
  // One client at a time, as uwarp-perf's measurements are sequential anyway.
  while (!stop.load()) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve_connection(fd);
    if (o.once) break;
  }
  ::close(listener);
  return 0;
}

bool run_tcp_client(const Options& o, std::vector<SizeResult>& results) {
  const int fd = connect_to(o.host, o.port);
  if (fd < 0) {
    SizeResult r;
    r.tcp = true;
    r.error = "cannot connect to the TCP baseline server " + o.host + " port " +
              std::to_string(o.port);
    results.push_back(r);
    return false;
  }
  bool ok = true;
  for (std::uint32_t size : o.sizes) {
    SizeResult r;
    ok = measure(fd, o, size, r);
    results.push_back(r);
    if (!ok) break;
  }
  ::close(fd);
  return ok;
}

}  // namespace uwarp::perf
