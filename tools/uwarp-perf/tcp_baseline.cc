// The raw TCP baseline of uwarp-perf: what a plain TCP connection between two processes (or,
// in loopback mode, two threads) does with the same message sizes, so that uwarp's numbers can
// be read as ratios measured in the same run. Both sockets use TCP_NODELAY, as uwarp's streams.
//
// Per size the client sends a request {size, stream messages, ping-pong messages}; then
// - bandwidth: it streams the messages; the server receives them all and answers one byte; the
//   time runs from the first byte sent to that answer;
// - latency: a ping-pong of one message each way, reported as half the round trip; both ends
//   poll their socket (non-blocking receives, yielding between them) as uwarp's side polls;
//   with --placer thread|signal, both ends spin on memory instead and a placer receives
//   (tcp_placer.h), as perftest's ib_write_lat -R over a thread-driven RNIC.
// With --qps N (N > 1) the client opens N connections (the first carries the requests) and
// streams the messages over all of them, one message per connection in turn, non-blocking;
// the server receives them all with epoll: what N connected QPs cost uwarp, set against what N
// sockets cost TCP itself (bandwidth only, no ping-pong).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "io/socket.h"
#include "protocol.h"
#include "runner.h"
#include "tcp_frames.h"
#include "tcp_io.h"
#include "tcp_placer.h"

namespace uwarp::perf {
namespace {

using Clock = std::chrono::steady_clock;

struct TcpRequest {
  std::uint32_t size;
  std::uint32_t stream_iters;  // per connection
  std::uint32_t pingpong_iters;
  std::uint32_t connections;    // 1, or the group's size (the stream goes over all of them)
  std::uint32_t placer;         // Placer: who receives the ping-pong's messages
  std::uint32_t frame_payload;  // 0: plain bytes; else frames of up to this payload (--framed)
};

// The pattern of every message the client sends (protocol.h: fill_pattern).
constexpr std::uint32_t kPatternSeed = 1;

// The largest frame payload a request may name: an FPDU's largest ULPDU less the DDP header.
constexpr std::uint32_t kMaxFramePayload = 65520;

// Bounds every wait of the group mode: a peer silent this long has failed.
constexpr int kGroupTimeoutMs = 20000;

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

// An epoll set of sockets, closed with it.
class EpollSet {
 public:
  EpollSet() : fd_(::epoll_create1(EPOLL_CLOEXEC)) {}
  ~EpollSet() {
    if (fd_ >= 0) ::close(fd_);
  }
  EpollSet(const EpollSet&) = delete;
  EpollSet& operator=(const EpollSet&) = delete;
  bool add(int fd, std::uint32_t events, std::uint32_t index) {
    epoll_event e{};
    e.events = events;
    e.data.u32 = index;
    return fd_ >= 0 && ::epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &e) == 0;
  }
  void remove(int fd) { ::epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr); }
  // Ready indices; empty after kGroupTimeoutMs without any.
  std::vector<std::uint32_t> wait() {
    epoll_event events[256];
    int n;
    do {
      n = ::epoll_wait(fd_, events, 256, kGroupTimeoutMs);
    } while (n < 0 && errno == EINTR);
    std::vector<std::uint32_t> ready;
    for (int i = 0; i < n; ++i) ready.push_back(events[i].data.u32);
    return ready;
  }

 private:
  int fd_;
};

// Group mode, server side: `iters` messages of `size` bytes from every socket, each received
// into that socket's own buffer (as each QP has its own).
bool receive_group(const std::vector<int>& fds, std::uint32_t size, std::uint32_t iters) {
  EpollSet ep;
  std::vector<std::vector<std::uint8_t>> bufs(fds.size(), std::vector<std::uint8_t>(size));
  std::vector<std::uint64_t> left(fds.size(), std::uint64_t{size} * iters);
  std::size_t open = 0;
  for (std::uint32_t i = 0; i < fds.size(); ++i) {
    if (left[i] == 0) continue;
    if (!ep.add(fds[i], EPOLLIN, i)) return false;
    ++open;
  }
  while (open > 0) {
    const std::vector<std::uint32_t> ready = ep.wait();
    if (ready.empty()) return false;
    for (std::uint32_t i : ready) {
      while (left[i] > 0) {
        const std::size_t at = static_cast<std::size_t>((std::uint64_t{size} * iters - left[i]) % size);
        const ssize_t k = ::recv(fds[i], bufs[i].data() + at, size - at, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        if (k <= 0) return false;
        left[i] -= static_cast<std::uint64_t>(k);
      }
      if (left[i] == 0) {
        ep.remove(fds[i]);
        --open;
      }
    }
  }
  return true;
}

// Group mode, client side: `iters` messages from `src` on every socket, one message per socket
// in turn; a socket whose send buffer is full is skipped until epoll reports it writable.
bool stream_group(const std::vector<int>& fds, const std::uint8_t* src, std::uint32_t size,
                  std::uint64_t iters) {
  EpollSet ep;
  std::vector<std::uint64_t> sent(fds.size(), 0);  // whole messages
  std::vector<std::uint32_t> at(fds.size(), 0);    // bytes of the current one
  std::vector<bool> waiting(fds.size(), false);    // in the epoll set, for EPOLLOUT
  std::size_t open = iters > 0 ? fds.size() : 0;
  while (open > 0) {
    bool progress = false;
    for (std::uint32_t i = 0; i < fds.size(); ++i) {
      if (sent[i] == iters || waiting[i]) continue;
      const ssize_t k = ::send(fds[i], src + at[i], size - at[i], MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!ep.add(fds[i], EPOLLOUT, i)) return false;
        waiting[i] = true;
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      progress = true;
      at[i] += static_cast<std::uint32_t>(k);
      if (at[i] == size) {
        at[i] = 0;
        if (++sent[i] == iters) --open;
      }
    }
    if (open == 0 || progress) continue;
    const std::vector<std::uint32_t> ready = ep.wait();
    if (ready.empty()) return false;
    for (std::uint32_t i : ready) {
      ep.remove(fds[i]);
      waiting[i] = false;
    }
  }
  return true;
}

// Accepts `n` connections on `listener` (each within kGroupTimeoutMs).
bool accept_group(int listener, std::uint32_t n, std::vector<int>& fds) {
  while (fds.size() < n) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, kGroupTimeoutMs) <= 0) return false;
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    set_nodelay(fd);
    fds.push_back(fd);
  }
  return true;
}

// One measured size, server side: receive the stream, answer, echo the ping-pongs. `group`
// holds the first connection and, once formed, the group's others.
bool serve_request(int listener, std::vector<int>& group, const TcpRequest& req) {
  const int fd = group.front();
  std::vector<std::uint8_t> buf(req.size);
  if (req.connections > 1) {
    if (group.size() == 1 && !accept_group(listener, req.connections, group)) return false;
    if (group.size() != req.connections || !receive_group(group, req.size, req.stream_iters)) return false;
  } else if (req.frame_payload != 0) {
    FrameReceiver frames(req.frame_payload);
    for (std::uint32_t i = 0; i < req.stream_iters; ++i)
      if (!frames.receive_message(fd, buf.data(), req.size)) return false;
    // The frames' payloads must have landed whole and in order: the last message is checked.
    if (req.stream_iters > 0 && !check_pattern(buf.data(), req.size, kPatternSeed)) return false;
  } else {
    for (std::uint32_t i = 0; i < req.stream_iters; ++i)
      if (!recv_all(fd, buf.data(), req.size)) return false;
  }
  // A placer is set up before the answer, so that the client's first message finds it.
  std::optional<TcpPlacer> placed;
  const auto placer = static_cast<Placer>(req.placer);
  if (placer != Placer::kNone && req.pingpong_iters > 0) {
    placed.emplace(placer, fd, buf.data(), req.size, req.pingpong_iters);
    if (!placed->ok()) return false;
  }
  const std::uint8_t done = 1;
  if (!send_all(fd, &done, 1)) return false;
  for (std::uint32_t i = 0; i < req.pingpong_iters; ++i) {
    const bool received = placed ? placed->wait_placed(i + 1, kGroupTimeoutMs)
                                 : recv_all_polling(fd, buf.data(), req.size);
    if (!received || !send_all(fd, buf.data(), req.size)) return false;
  }
  return true;
}

void serve_connection(int listener, int fd) {
  set_nodelay(fd);
  std::vector<int> group{fd};
  TcpRequest req;
  while (recv_all(fd, &req, sizeof req)) {
    req = {ntohl(req.size), ntohl(req.stream_iters), ntohl(req.pingpong_iters), ntohl(req.connections),
           ntohl(req.placer), ntohl(req.frame_payload)};
    if (req.size == 0 || req.size > (64u << 20) || req.connections == 0 || req.connections > 1024 ||
        req.placer > static_cast<std::uint32_t>(Placer::kSignal) || req.frame_payload > kMaxFramePayload ||
        (req.frame_payload != 0 && (req.connections != 1 || req.pingpong_iters != 0)) ||
        !serve_request(listener, group, req)) {
      break;
    }
  }
  for (int g : group) ::close(g);
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

// `fds`: the first connection (requests, answers, ping-pong) and, in group mode, the others.
bool measure(const std::vector<int>& fds, const Options& o, std::uint32_t size, SizeResult& r) {
  const int fd = fds.front();
  const bool group = fds.size() > 1;
  r.tcp = true;
  r.op = o.op;
  r.size = size;
  r.qps = static_cast<std::uint32_t>(fds.size());
  r.iters = o.iters != 0 ? o.iters : default_iters(size);
  if (size == 0) return true;  // TCP has no zero-length messages
  const std::uint32_t pingpongs = group || !o.latency ? 0 :
      static_cast<std::uint32_t>(std::min<std::uint64_t>(r.iters, size <= 65536 ? 1000 : 100));
  std::vector<std::uint8_t> src(size), dst(size);
  fill_pattern(src.data(), size, kPatternSeed);
  std::optional<FrameSender> frames;
  if (o.framed) frames.emplace(frame_payload_for_mss(io::tcp_mss(fd)));
  // The stream of `iters` messages (on each connection), then the server's answer.
  auto stream = [&](std::uint64_t iters, std::uint32_t then_pingpongs) {
    const TcpRequest req{htonl(size), htonl(static_cast<std::uint32_t>(iters)), htonl(then_pingpongs),
                         htonl(static_cast<std::uint32_t>(fds.size())),
                         htonl(static_cast<std::uint32_t>(then_pingpongs > 0 ? o.placer : Placer::kNone)),
                         htonl(static_cast<std::uint32_t>(frames ? frames->max_payload() : 0))};
    bool ok = send_all(fd, &req, sizeof req);
    if (group) {
      ok = ok && stream_group(fds, src.data(), size, iters);
    } else if (frames) {
      for (std::uint64_t i = 0; i < iters && ok; ++i) ok = frames->send_message(fd, src.data(), size);
    } else {
      for (std::uint64_t i = 0; i < iters && ok; ++i) ok = send_all(fd, src.data(), size);
    }
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
  r.gbps = double(r.iters) * fds.size() * size * 8 / r.seconds / 1e9;
  r.msg_rate = double(r.iters) * fds.size() / r.seconds;
  if (group || pingpongs == 0) {  // no echo to verify
    if (!ok) r.error = "TCP transfer failed";
    return ok;
  }

  std::vector<double> us;
  us.reserve(pingpongs);
  std::optional<TcpPlacer> placed;
  if (o.placer != Placer::kNone) {
    placed.emplace(o.placer, fd, dst.data(), size, pingpongs);
    ok = placed->ok();
  }
  for (std::uint32_t i = 0; i < pingpongs && ok; ++i) {
    const auto s = Clock::now();
    ok = send_all(fd, src.data(), size) &&
         (placed ? placed->wait_placed(i + 1, kGroupTimeoutMs) : recv_all_polling(fd, dst.data(), size));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count() / 2);
  }
  r.lat_iters = pingpongs;
  r.lat_mean_us = mean(us);
  r.lat_median_us = percentile(us, 0.5);
  r.lat_p99_us = percentile(us, 0.99);
  r.verified = o.verify && ok && check_pattern(dst.data(), size, kPatternSeed);  // the last echo
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
      ::bind(listener, res->ai_addr, res->ai_addrlen) == 0 && ::listen(listener, SOMAXCONN) == 0 &&
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
    serve_connection(listener, fd);
    if (o.once) break;
  }
  ::close(listener);
  return 0;
}

bool run_tcp_client(const Options& o, std::vector<SizeResult>& results) {
  // With --qps N the group's other connections wait in the server's accept queue (SOMAXCONN)
  // until the first request tells the server how many to accept.
  std::vector<int> fds;
  while (fds.size() < o.qps) {
    const int fd = connect_to(o.host, o.port);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  bool ok = fds.size() == o.qps;
  if (!ok) {
    SizeResult r;
    r.tcp = true;
    r.error = "cannot connect to the TCP baseline server " + o.host + " port " +
              std::to_string(o.port) + " (" + std::to_string(fds.size()) + " of " +
              std::to_string(o.qps) + " connections)";
    results.push_back(r);
  }
  for (std::uint32_t size : o.sizes) {
    if (!ok) break;
    SizeResult r;
    ok = measure(fds, o, size, r);
    results.push_back(r);
  }
  for (int fd : fds) ::close(fd);
  return ok;
}

}  // namespace uwarp::perf
