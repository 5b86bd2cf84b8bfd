// The raw TCP baseline of uwarp-perf: what a plain TCP connection between two threads of one
// process does with the same message sizes on 127.0.0.1, so that uwarp's numbers can be read as
// ratios measured in the same run. Bandwidth: a stream of messages, timed until the receiver
// has all bytes; latency: a ping-pong of one message each way, reported as half the round trip.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "protocol.h"
#include "runner.h"

namespace uwarp::perf {
namespace {

using Clock = std::chrono::steady_clock;

bool send_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// A connected pair of TCP sockets over 127.0.0.1, both with TCP_NODELAY (as uwarp's streams).
bool socket_pair(int& a, int& b) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listener >= 0) ::close(listener);
    return false;
  }
  a = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool ok = a >= 0 && ::connect(a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  (b = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;
  ::close(listener);
  if (!ok) return false;
  const int one = 1;
  ::setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return true;
}

bool measure(const Options& o, std::uint32_t size, SizeResult& r) {
  r.tcp = true;
  r.op = o.op;
  r.size = size;
  r.qps = 1;
  r.iters = o.iters != 0 ? o.iters : default_iters(size);
  if (size == 0) return true;  // TCP has no zero-length messages
  int a = -1;
  int b = -1;
  if (!socket_pair(a, b)) {
    r.error = "cannot connect a TCP pair on 127.0.0.1";
    return false;
  }
  std::vector<std::uint8_t> src(size), dst(size);
  fill_pattern(src.data(), size, 1);

  // Bandwidth: one thread streams the messages, this one receives them.
  const auto t0 = Clock::now();
  bool sent = true;
  std::thread sender([&] {
    for (std::uint64_t i = 0; i < r.iters && sent; ++i) sent = send_all(a, src.data(), size);
  });
  bool received = true;
  for (std::uint64_t i = 0; i < r.iters && received; ++i) received = recv_all(b, dst.data(), size);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  sender.join();
  r.seconds = secs;
  r.gbps = double(r.iters) * size * 8 / secs / 1e9;
  r.msg_rate = double(r.iters) / secs;
  r.verified = o.verify && received && check_pattern(dst.data(), size, 1);

  // Latency: ping-pong, half the round trip.
  const std::uint32_t iters =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(r.iters, size <= 65536 ? 1000 : 100));
  bool echoed = true;
  std::thread echo([&] {
    std::vector<std::uint8_t> buf(size);
    for (std::uint32_t i = 0; i < iters && echoed; ++i)
      echoed = recv_all(b, buf.data(), size) && send_all(b, buf.data(), size);
  });
  std::vector<double> us;
  us.reserve(iters);
  bool ponged = true;
  for (std::uint32_t i = 0; i < iters && ponged; ++i) {
    const auto s = Clock::now();
    ponged = send_all(a, src.data(), size) && recv_all(a, dst.data(), size);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count() / 2);
  }
  echo.join();
  ::close(a);
  ::close(b);
  r.lat_iters = iters;
  r.lat_median_us = percentile(us, 0.5);
  r.lat_p99_us = percentile(us, 0.99);
  if (!sent || !received || !echoed || !ponged) {
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

bool run_tcp_baseline(const Options& o, std::vector<SizeResult>& results) {
  for (std::uint32_t size : o.sizes) {
    SizeResult r;
    const bool ok = measure(o, size, r);
    results.push_back(r);
    if (!ok) return false;
  }
  return true;
}

}  // namespace uwarp::perf
