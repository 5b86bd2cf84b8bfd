// librdmacm.so.1: the rsocket API (rsocket, rbind, rlisten, raccept, rconnect, rsend, rrecv,
// rpoll, rselect, riomap, riowrite, ...), carried over plain kernel TCP sockets.
//
// rdma-core implements rsockets over RDMA (an RC QP per socket, data in RDMA Writes, riowrite as
// an RDMA Write into the peer's riomap'ed buffer). Here they are TCP sockets with a small
// in-band framing, so that riowrite can target the peer's mapped memory:
//
//   DATA     [type 1][length u32][payload]                  rsend/rwrite/...: bytes for rrecv
//   IOWRITE  [type 2][length u32][offset u64][payload]       riowrite: placed at `offset` of the
//                                                            receiver's riomap'ed regions
// (big-endian). Both ends must be uwarp rsockets (as both ends of real rsockets are rsockets).
//
// Receiving: one process-wide receive thread (epoll over every connected rsocket) reads the TCP
// streams, appends DATA payloads to the socket's receive buffer and copies IOWRITE payloads into
// the mapped memory at once, in stream order, without the application calling anything
// (riostream spins on the last byte of its mapped buffer, as on RDMA). rrecv copies out of the
// receive buffer. The receive buffer is bounded (kRxLimit): beyond it the thread stops reading the
// socket, so TCP flow control still holds back the sender.
//
// Sending: the application's thread writes frames itself. In non-blocking mode a frame that the
// kernel took only in part is completed from a small per-socket backlog (frames are at most
// kNonBlockingFrame bytes then): before anything else is sent, and by the receive thread as soon
// as the socket is writable, since the application may not call again (riostream spins on its
// buffer after its last riowrite, as it would on RDMA).
//
// Descriptors: an rsocket is its TCP socket's fd (kept O_NONBLOCK; the blocking mode the
// application asked for with rfcntl is emulated). rpoll/rselect accept rsockets and ordinary fds
// together; an rsocket's POLLIN is an eventfd that is readable exactly while received data (or
// end of stream) is waiting, its POLLOUT the TCP socket's. Options: SOL_SOCKET and IPPROTO_TCP
// go to the TCP socket; SOL_RDMA options (RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE, RDMA_IOMAPSIZE,
// RDMA_ROUTE) are accepted and reported back. Only SOCK_STREAM rsockets exist here (rsockets'
// UDP mode needs UD QPs: EPROTONOSUPPORT).
#include <fcntl.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/boundary.h"
#include "rdmacm/cma.h"

namespace uwarp::rdmacm::rs {
namespace {

using ofa::c_boundary;

constexpr std::uint8_t kFrameData = 1;
constexpr std::uint8_t kFrameIoWrite = 2;
constexpr std::size_t kDataHeader = 5;
constexpr std::size_t kIoWriteHeader = 13;
constexpr std::size_t kRxLimit = 8u << 20;            // receive buffer before back-pressure
constexpr std::size_t kNonBlockingFrame = 64u << 10;  // largest frame of a non-blocking send
constexpr std::size_t kBlockingFrame = 1u << 30;

enum class State : std::uint8_t { kFresh, kListening, kConnecting, kConnected };

struct IoMap {
  std::uint8_t* buf;
  std::size_t len;
  off_t offset;
};

// One rsocket. Threads: the application's (any) and the receive thread. `mu` guards everything
// but the send backlog, which `tx_mu` guards (lock order: tx_mu, then mu).
struct Socket {
  int fd = -1;
  int efd = -1;           // readable exactly while rx data, end of stream or an error waits
  std::uint64_t key = 0;  // the receive thread's name for it (epoll data)

  Mutex mu;
  std::condition_variable_any cv;  // rx data, end of stream, connection state
  State state GUARDED_BY(mu) = State::kFresh;
  bool nonblocking GUARDED_BY(mu) = false;  // the application's O_NONBLOCK
  bool closed GUARDED_BY(mu) = false;
  bool watched GUARDED_BY(mu) = false;  // in the receive thread's epoll set
  bool paused GUARDED_BY(mu) =
      false;  // receive buffer full: not read until the application catches up
  bool want_out GUARDED_BY(mu) = false;  // a send backlog waits: the receive thread completes it
  int sq_size GUARDED_BY(mu) = 384;      // SOL_RDMA options (reported back, no effect)
  int rq_size GUARDED_BY(mu) = 384;
  int inline_size GUARDED_BY(mu) = 64;
  int iomap_size GUARDED_BY(mu) = 0;
  // Received.
  std::vector<std::uint8_t> rx GUARDED_BY(mu);
  std::size_t rx_head GUARDED_BY(mu) = 0;
  bool eof GUARDED_BY(mu) = false;
  int rx_error GUARDED_BY(mu) = 0;
  bool efd_set GUARDED_BY(mu) = false;
  // The frame being parsed.
  std::uint8_t hdr[kIoWriteHeader] GUARDED_BY(mu) = {};
  std::size_t hdr_have GUARDED_BY(mu) = 0;
  std::uint64_t remaining GUARDED_BY(mu) = 0;  // payload bytes of the current frame still to come
  std::uint8_t type GUARDED_BY(mu) = 0;
  std::uint64_t io_offset GUARDED_BY(mu) = 0;
  std::vector<IoMap> maps GUARDED_BY(mu);
  bool warned GUARDED_BY(mu) = false;

  Mutex tx_mu;  // taken before mu
  std::vector<std::uint8_t> tx_backlog
      GUARDED_BY(tx_mu);  // the unsent end of a frame (non-blocking sends)
  std::size_t tx_head GUARDED_BY(tx_mu) = 0;

  std::size_t rx_avail() const REQUIRES(mu) { return rx.size() - rx_head; }
};

struct Table {
  Mutex mu;
  std::unordered_map<int, std::shared_ptr<Socket>> by_fd GUARDED_BY(mu);
  std::unordered_map<std::uint64_t, std::shared_ptr<Socket>> by_key GUARDED_BY(mu);
  std::uint64_t next_key GUARDED_BY(mu) = 1;
  int epfd = -1;
  bool thread_started = false;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: the receive thread uses it until exit
  return *t;
}

std::shared_ptr<Socket> lookup(int fd) {
  Table& t = table();
  uwarp::MutexLock lock(t.mu);
  auto it = t.by_fd.find(fd);
  return it != t.by_fd.end() ? it->second : nullptr;
}

std::uint64_t get_be(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

void put_be(std::uint8_t* p, std::uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) {
    p[i] = static_cast<std::uint8_t>(v);
    v >>= 8;
  }
}

// Makes efd readable exactly while something waits for rrecv. Caller holds s.mu.
void update_efd_locked(Socket& s) REQUIRES(s.mu) {
  const bool readable = s.rx_avail() > 0 || s.eof || s.rx_error != 0;
  if (readable && !s.efd_set) {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(s.efd, &one, sizeof one);
    s.efd_set = true;
  } else if (!readable && s.efd_set) {
    std::uint64_t v;
    [[maybe_unused]] ssize_t n = ::read(s.efd, &v, sizeof v);
    s.efd_set = false;
  }
}

// What the receive thread watches: readability while the stream is read (connected, not paused,
// not ended), writability while a send backlog waits. Nothing wanted: out of the epoll set (an
// ended TCP socket would report EPOLLHUP for ever). Caller holds s.mu.
void update_watch_locked(Socket& s) REQUIRES(s.mu) {
  if (s.closed) return;
  std::uint32_t events = 0;
  if (s.state == State::kConnected && !s.paused && !s.eof && s.rx_error == 0) {
    events |= EPOLLIN | EPOLLRDHUP;
  }
  if (s.want_out) events |= EPOLLOUT;
  const int epfd = table().epfd;
  if (events == 0) {
    if (s.watched) ::epoll_ctl(epfd, EPOLL_CTL_DEL, s.fd, nullptr);
    s.watched = false;
    return;
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = s.key;
  if (::epoll_ctl(epfd, s.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s.fd, &ev) == 0) {
    s.watched = true;
  }
}

void unwatch_locked(Socket& s) REQUIRES(s.mu) {
  if (!s.watched) return;
  ::epoll_ctl(table().epfd, EPOLL_CTL_DEL, s.fd, nullptr);
  s.watched = false;
}

bool flush_backlog(Socket& s, bool nonblocking) REQUIRES(s.tx_mu);

// Copies an IOWRITE payload into the mapped regions. Caller holds s.mu.
void place(Socket& s, const std::uint8_t* data, std::size_t len) REQUIRES(s.mu) {
  while (len > 0) {
    const IoMap* m = nullptr;
    for (const IoMap& x : s.maps) {
      if (static_cast<std::uint64_t>(x.offset) <= s.io_offset &&
          s.io_offset < static_cast<std::uint64_t>(x.offset) + x.len) {
        m = &x;
        break;
      }
    }
    if (m == nullptr) {
      if (!s.warned) {
        std::fprintf(stderr,
                     "uwarp rsocket: riowrite to offset %llu, which is not riomap'ed: "
                     "dropped\n",
                     static_cast<unsigned long long>(s.io_offset));
        s.warned = true;
      }
      s.io_offset += len;
      return;
    }
    const std::uint64_t in_map = s.io_offset - static_cast<std::uint64_t>(m->offset);
    const std::size_t k = std::min<std::uint64_t>(len, m->len - in_map);
    std::memcpy(m->buf + in_map, data, k);
    s.io_offset += k;
    data += k;
    len -= k;
  }
}

// Consumes received stream bytes. Caller holds s.mu. False on a framing error.
bool parse(Socket& s, const std::uint8_t* p, std::size_t n) REQUIRES(s.mu) {
  while (n > 0) {
    if (s.remaining == 0) {
      if (s.hdr_have == 0) {
        s.type = p[0];
        if (s.type != kFrameData && s.type != kFrameIoWrite) return false;
      }
      const std::size_t need = s.type == kFrameData ? kDataHeader : kIoWriteHeader;
      const std::size_t k = std::min(n, need - s.hdr_have);
      std::memcpy(s.hdr + s.hdr_have, p, k);
      s.hdr_have += k;
      p += k;
      n -= k;
      if (s.hdr_have < need) return true;
      s.hdr_have = 0;
      s.remaining = get_be(s.hdr + 1, 4);
      if (s.type == kFrameIoWrite) s.io_offset = get_be(s.hdr + 5, 8);
      continue;
    }
    const std::size_t k = std::min<std::uint64_t>(n, s.remaining);
    if (s.type == kFrameData) {
      if (s.rx_head > 0 && s.rx_head >= s.rx.size() / 2) {
        s.rx.erase(s.rx.begin(), s.rx.begin() + static_cast<std::ptrdiff_t>(s.rx_head));
        s.rx_head = 0;
      }
      s.rx.insert(s.rx.end(), p, p + k);
    } else {
      place(s, p, k);
    }
    s.remaining -= k;
    p += k;
    n -= k;
  }
  return true;
}

// The receive thread: reads every watched socket as it becomes readable.
void receive_loop(int epfd) {
  std::vector<std::uint8_t> scratch(256u << 10);
  epoll_event evs[64];
  for (;;) {
    const int n = ::epoll_wait(epfd, evs, 64, -1);
    for (int i = 0; i < n; ++i) {
      std::shared_ptr<Socket> s;
      {
        Table& t = table();
        uwarp::MutexLock lock(t.mu);
        auto it = t.by_key.find(evs[i].data.u64);
        if (it == t.by_key.end()) continue;
        s = it->second;
      }
      if ((evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0) {
        // Complete a send backlog: the application may not call again before the peer answers
        // (riostream spins on its buffer after its last riowrite).
        uwarp::MutexLock tx(s->tx_mu);
        const bool flushed = flush_backlog(*s, true);
        const int err = errno;
        uwarp::MutexLock lock(s->mu);
        if (!flushed && err != EAGAIN && err != EWOULDBLOCK) {
          s->tx_backlog.clear();  // the connection failed: the receive side reports it
          s->tx_head = 0;
        }
        s->want_out = s->tx_head < s->tx_backlog.size();
        update_watch_locked(*s);
      }
      uwarp::MutexLock lock(s->mu);
      if (s->closed || !s->watched ||
          (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) {
        continue;
      }
      for (int round = 0; round < 16 && !s->paused; ++round) {
        const ssize_t r = ::recv(s->fd, scratch.data(), scratch.size(), MSG_DONTWAIT);
        if (r > 0) {
          if (!parse(*s, scratch.data(), static_cast<std::size_t>(r))) {
            s->rx_error = EPROTO;
            break;
          }
          if (s->rx_avail() >= kRxLimit) s->paused = true;
          if (static_cast<std::size_t>(r) < scratch.size()) break;
          continue;
        }
        if (r == 0) {
          s->eof = true;
        } else if (errno == EINTR) {
          continue;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
          s->rx_error = errno;
        }
        break;
      }
      update_watch_locked(*s);
      update_efd_locked(*s);
      s->cv.notify_all();
    }
  }
}

// Adds a connected socket to the receive thread (starting it on first use).
int watch(Socket& s) {
  Table& t = table();
  {
    uwarp::MutexLock lock(t.mu);
    if (!t.thread_started) {
      sigset_t all;
      sigset_t old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      try {
        std::thread(receive_loop, t.epfd).detach();
      } catch (...) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        return fail(EAGAIN);
      }
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      t.thread_started = true;
    }
  }
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  uwarp::MutexLock lock(s.mu);
  s.state = State::kConnected;
  update_watch_locked(s);
  s.cv.notify_all();
  return s.watched ? 0 : -1;
}

std::shared_ptr<Socket> add_socket(int fd) {
  Table& t = table();
  auto s = std::make_shared<Socket>();
  s->fd = fd;
  s->efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->efd < 0) return nullptr;
  uwarp::MutexLock lock(t.mu);
  if (t.epfd < 0) {
    t.epfd = ::epoll_create1(EPOLL_CLOEXEC);
    if (t.epfd < 0) {
      ::close(s->efd);
      return nullptr;
    }
  }
  s->key = t.next_key++;
  t.by_fd[fd] = s;
  t.by_key[s->key] = s;
  return s;
}

// A non-blocking connect that has completed becomes a connected, watched socket.
void finish_connect(Socket& s) {
  {
    uwarp::MutexLock lock(s.mu);
    if (s.state != State::kConnecting) return;
  }
  pollfd p{s.fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    uwarp::MutexLock lock(s.mu);
    s.state = State::kFresh;
    return;
  }
  watch(s);
}

bool wait_fd(int fd, short events) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, -1);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

// Sends the whole of `iov` (blocking). -1 with errno on failure.
int send_all(int fd, std::vector<iovec> iov) {
  std::size_t i = 0;
  while (i < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + i;
    msg.msg_iovlen = std::min<std::size_t>(iov.size() - i, IOV_MAX);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wait_fd(fd, POLLOUT)) return -1;
        continue;
      }
      if (errno == EINTR) continue;
      return -1;
    }
    std::size_t done = static_cast<std::size_t>(n);
    while (i < iov.size() && done >= iov[i].iov_len) {
      done -= iov[i].iov_len;
      ++i;
    }
    if (i < iov.size()) {
      iov[i].iov_base = static_cast<std::uint8_t*>(iov[i].iov_base) + done;
      iov[i].iov_len -= done;
    }
  }
  return 0;
}

// Sends the backlog of an earlier non-blocking frame. Caller holds s.tx_mu. False with errno if
// some remains (EAGAIN) or the socket failed.
bool flush_backlog(Socket& s, bool nonblocking) REQUIRES(s.tx_mu) {
  while (s.tx_head < s.tx_backlog.size()) {
    const ssize_t n = ::send(s.fd, s.tx_backlog.data() + s.tx_head, s.tx_backlog.size() - s.tx_head,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      s.tx_head += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (nonblocking) return false;
    if (!wait_fd(s.fd, POLLOUT)) return false;
  }
  s.tx_backlog.clear();
  s.tx_head = 0;
  return true;
}

// The first `len` bytes of `iov` as an iovec list.
std::vector<iovec> slice(const iovec* iov, int iovcnt, std::size_t len) {
  std::vector<iovec> out;
  for (int i = 0; i < iovcnt && len > 0; ++i) {
    const std::size_t k = std::min(len, iov[i].iov_len);
    if (k == 0) continue;
    out.push_back(iovec{iov[i].iov_base, k});
    len -= k;
  }
  return out;
}

// Makes sure `s` is connected (completing a non-blocking connect). -1 with errno if not.
int need_connected(Socket& s, bool nonblocking) {
  finish_connect(s);
  bool connecting = false;
  {
    uwarp::MutexLock lock(s.mu);
    connecting = s.state == State::kConnecting;
  }
  if (connecting && !nonblocking) {
    wait_fd(s.fd, POLLOUT);
    finish_connect(s);
  }
  uwarp::MutexLock lock(s.mu);
  if (s.state == State::kConnecting) return fail(EAGAIN);
  if (s.state != State::kConnected) return fail(ENOTCONN);
  return 0;
}

// One frame of `type` carrying (the start of) `iov`. Returns the payload bytes accounted for.
ssize_t send_frame(int fd, std::uint8_t type, std::uint64_t offset, const iovec* iov, int iovcnt,
                   int flags) {
  auto s = lookup(fd);
  if (!s) return fail(EBADF);
  std::size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  bool nonblocking;
  {
    uwarp::MutexLock lock(s->mu);
    nonblocking = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  }
  if (need_connected(*s, nonblocking) != 0) return -1;
  if (total == 0) return 0;
  uwarp::MutexLock tx(s->tx_mu);
  if (!flush_backlog(*s, nonblocking)) return -1;
  const std::size_t len = std::min(total, nonblocking ? kNonBlockingFrame : kBlockingFrame);
  std::uint8_t hdr[kIoWriteHeader];
  hdr[0] = type;
  put_be(hdr + 1, len, 4);
  const std::size_t hlen = type == kFrameData ? kDataHeader : kIoWriteHeader;
  if (type == kFrameIoWrite) put_be(hdr + 5, offset, 8);
  std::vector<iovec> frame = slice(iov, iovcnt, len);
  frame.insert(frame.begin(), iovec{hdr, hlen});
  if (!nonblocking) {
    if (send_all(s->fd, std::move(frame)) != 0) return -1;
    return static_cast<ssize_t>(len);
  }
  msghdr msg{};
  msg.msg_iov = frame.data();
  msg.msg_iovlen = std::min<std::size_t>(frame.size(), IOV_MAX);
  ssize_t n;
  do {
    n = ::sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -1;  // EAGAIN: nothing of the frame went out
  // Keep what the kernel did not take: the frame must be completed before anything else.
  std::size_t sent = static_cast<std::size_t>(n);
  for (const iovec& v : frame) {
    if (sent >= v.iov_len) {
      sent -= v.iov_len;
      continue;
    }
    const auto* b = static_cast<const std::uint8_t*>(v.iov_base);
    s->tx_backlog.insert(s->tx_backlog.end(), b + sent, b + v.iov_len);
    sent = 0;
  }
  if (!s->tx_backlog.empty()) {
    uwarp::MutexLock lock(s->mu);
    s->want_out = true;
    update_watch_locked(*s);
  }
  return static_cast<ssize_t>(len);
}

ssize_t receive(int fd, const iovec* iov, int iovcnt, int flags) {
  auto s = lookup(fd);
  if (!s) return fail(EBADF);
  std::size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  bool nonblocking;
  {
    uwarp::MutexLock lock(s->mu);
    nonblocking = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  }
  if (need_connected(*s, nonblocking) != 0) return -1;
  if (want == 0) return 0;
  const bool peek = (flags & MSG_PEEK) != 0;
  const bool wait_all = (flags & MSG_WAITALL) != 0 && !nonblocking && !peek;
  uwarp::MutexLock lock(s->mu);
  std::size_t got = 0;
  int vi = 0;
  std::size_t vo = 0;
  for (;;) {
    const std::size_t avail = s->rx_avail();
    if (avail > 0) {
      std::size_t from = s->rx_head;
      std::size_t k = std::min(avail, want - got);
      const std::size_t taken = k;
      while (k > 0) {
        const std::size_t c = std::min(k, iov[vi].iov_len - vo);
        std::memcpy(static_cast<std::uint8_t*>(iov[vi].iov_base) + vo, s->rx.data() + from, c);
        from += c;
        k -= c;
        vo += c;
        if (vo == iov[vi].iov_len) {
          ++vi;
          vo = 0;
        }
      }
      got += taken;
      if (!peek) s->rx_head += taken;
      if (!wait_all || got == want || peek) break;
      continue;
    }
    if (got > 0 && !wait_all) break;
    if (s->eof || s->closed) break;
    if (s->rx_error != 0) {
      if (got == 0) {
        errno = s->rx_error;
        return -1;
      }
      break;
    }
    if (nonblocking) {
      if (got == 0) return fail(EAGAIN);
      break;
    }
    s->cv.wait(s->mu);
  }
  if (s->rx_head == s->rx.size()) {
    s->rx.clear();
    s->rx_head = 0;
  }
  if (s->paused && s->rx_avail() < kRxLimit / 2 && !s->closed) {
    s->paused = false;
    update_watch_locked(*s);
  }
  update_efd_locked(*s);
  return static_cast<ssize_t>(got);
}

}  // namespace
}  // namespace uwarp::rdmacm::rs

using namespace uwarp::rdmacm;
using namespace uwarp::rdmacm::rs;

extern "C" {

int rsocket(int domain, int type, int protocol) {
  return c_boundary(-1, [&]() -> int {
    if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM) {
      std::fprintf(stderr,
                   "uwarp rsocket: only SOCK_STREAM rsockets are supported (datagram "
                   "rsockets need UD QPs, which iWARP does not have)\n");
      return fail(EPROTONOSUPPORT);
    }
    const int fd = ::socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
    if (fd < 0) return -1;
    auto s = add_socket(fd);
    if (!s) {
      const int e = errno;
      ::close(fd);
      return fail(e);
    }
    {
      uwarp::MutexLock lock(s->mu);
      s->nonblocking = (type & SOCK_NONBLOCK) != 0;
    }
    return fd;
  });
}

int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  return c_boundary(-1, [&]() -> int {
    if (!lookup(socket)) return fail(EBADF);
    return ::bind(socket, addr, addrlen);
  });
}

int rlisten(int socket, int backlog) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    if (::listen(socket, backlog) != 0) return -1;
    uwarp::MutexLock lock(s->mu);
    s->state = State::kListening;
    return 0;
  });
}

int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    bool nonblocking;
    {
      uwarp::MutexLock lock(s->mu);
      if (s->state != State::kListening) return fail(EINVAL);
      nonblocking = s->nonblocking;
    }
    int fd;
    for (;;) {
      fd = ::accept4(socket, addr, addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) break;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || nonblocking) return -1;
      if (!wait_fd(socket, POLLIN)) return -1;
    }
    auto c = add_socket(fd);
    if (!c || watch(*c) != 0) {
      const int e = errno;
      if (c)
        rclose(fd);
      else
        ::close(fd);
      return fail(e);
    }
    return fd;
  });
}

int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    bool nonblocking;
    {
      uwarp::MutexLock lock(s->mu);
      if (s->state != State::kFresh) return fail(EISCONN);
      nonblocking = s->nonblocking;
    }
    if (::connect(socket, addr, addrlen) == 0) return watch(*s);
    if (errno != EINPROGRESS) return -1;
    {
      uwarp::MutexLock lock(s->mu);
      s->state = State::kConnecting;
    }
    if (nonblocking) return fail(EINPROGRESS);
    wait_fd(socket, POLLOUT);
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(socket, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      uwarp::MutexLock lock(s->mu);
      s->state = State::kFresh;
      return fail(err);
    }
    return watch(*s);
  });
}

int rshutdown(int socket, int how) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    if (how == SHUT_WR || how == SHUT_RDWR) {
      uwarp::MutexLock tx(s->tx_mu);
      flush_backlog(*s, false);
    }
    return ::shutdown(socket, how);
  });
}

int rclose(int socket) {
  return c_boundary(-1, [&]() -> int {
    std::shared_ptr<Socket> s;
    {
      Table& t = table();
      uwarp::MutexLock lock(t.mu);
      auto it = t.by_fd.find(socket);
      if (it == t.by_fd.end()) return fail(EBADF);
      s = it->second;
      t.by_fd.erase(it);
      t.by_key.erase(s->key);
    }
    {
      uwarp::MutexLock tx(s->tx_mu);
      flush_backlog(*s, false);
    }
    uwarp::MutexLock lock(s->mu);
    unwatch_locked(*s);
    s->closed = true;
    s->cv.notify_all();
    ::close(s->efd);
    return ::close(s->fd);
  });
}

ssize_t rrecv(int socket, void* buf, std::size_t len, int flags) {
  return c_boundary<ssize_t>(-1, [&] {
    const iovec v{buf, len};
    return receive(socket, &v, 1, flags);
  });
}

ssize_t rrecvfrom(int socket, void* buf, std::size_t len, int flags, sockaddr* src_addr,
                  socklen_t* addrlen) {
  const ssize_t n = rrecv(socket, buf, len, flags);
  if (n >= 0 && src_addr != nullptr && addrlen != nullptr) {
    ::getpeername(socket, src_addr, addrlen);
  }
  return n;
}

ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  return c_boundary<ssize_t>(-1, [&]() -> ssize_t {
    if (msg == nullptr) return fail(EINVAL);
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
    return receive(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  });
}

ssize_t rread(int socket, void* buf, std::size_t count) {
  return rrecv(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return c_boundary<ssize_t>(-1, [&] { return receive(socket, iov, iovcnt, 0); });
}

ssize_t rsend(int socket, const void* buf, std::size_t len, int flags) {
  return c_boundary<ssize_t>(-1, [&] {
    const iovec v{const_cast<void*>(buf), len};
    return send_frame(socket, kFrameData, 0, &v, 1, flags);
  });
}

ssize_t rsendto(int socket, const void* buf, std::size_t len, int flags, const sockaddr* dest_addr,
                socklen_t addrlen) {
  (void)dest_addr, (void)addrlen;  // connected stream sockets ignore the address
  return rsend(socket, buf, len, flags);
}

ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  return c_boundary<ssize_t>(-1, [&]() -> ssize_t {
    if (msg == nullptr) return fail(EINVAL);
    return send_frame(socket, kFrameData, 0, msg->msg_iov, static_cast<int>(msg->msg_iovlen),
                      flags);
  });
}

ssize_t rwrite(int socket, const void* buf, std::size_t count) {
  return rsend(socket, buf, count, 0);
}

ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return c_boundary<ssize_t>(-1, [&] { return send_frame(socket, kFrameData, 0, iov, iovcnt, 0); });
}

int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  return c_boundary(-1, [&]() -> int {
    // Each connected rsocket becomes two entries: its eventfd (POLLIN) and its TCP socket
    // (POLLOUT, errors); everything else is polled as it is.
    struct Slot {
      std::shared_ptr<Socket> s;
      std::size_t in = 0;
      std::size_t out = 0;
      bool connected = false;
    };
    std::vector<Slot> slots(nfds);
    std::vector<pollfd> real;
    real.reserve(nfds * 2);
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      Slot& sl = slots[i];
      sl.s = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
      if (sl.s) {
        finish_connect(*sl.s);
        uwarp::MutexLock lock(sl.s->mu);
        sl.connected = sl.s->state == State::kConnected;
      }
      if (sl.connected) {
        {
          uwarp::MutexLock tx(sl.s->tx_mu);
          flush_backlog(*sl.s, true);
        }
        sl.in = real.size();
        real.push_back(pollfd{
            sl.s->efd, static_cast<short>(fds[i].events & (POLLIN | POLLRDNORM) ? POLLIN : 0), 0});
        sl.out = real.size();
        real.push_back(
            pollfd{fds[i].fd, static_cast<short>(fds[i].events & (POLLOUT | POLLWRNORM)), 0});
      } else {
        sl.in = real.size();
        real.push_back(pollfd{fds[i].fd, fds[i].events, 0});
      }
    }
    if (::poll(real.data(), real.size(), timeout) < 0) return -1;
    int count = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      Slot& sl = slots[i];
      short rev;
      if (sl.connected) {
        rev = static_cast<short>(
            (real[sl.in].revents & POLLIN ? fds[i].events & (POLLIN | POLLRDNORM) : 0) |
            (real[sl.out].revents & (POLLOUT | POLLWRNORM | POLLERR | POLLHUP)));
        uwarp::MutexLock lock(sl.s->mu);
        if (sl.s->rx_error != 0) rev |= POLLERR;
      } else {
        rev = real[sl.in].revents;
        if (sl.s && (rev & (POLLOUT | POLLERR | POLLHUP)) != 0) finish_connect(*sl.s);
      }
      fds[i].revents = rev;
      if (rev != 0) ++count;
    }
    return count;
  });
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  return c_boundary(-1, [&]() -> int {
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
      short ev = 0;
      if (readfds != nullptr && FD_ISSET(fd, readfds)) ev |= POLLIN;
      if (writefds != nullptr && FD_ISSET(fd, writefds)) ev |= POLLOUT;
      if (exceptfds != nullptr && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
      if (ev != 0) fds.push_back(pollfd{fd, ev, 0});
    }
    const int ms = timeout == nullptr
                       ? -1
                       : static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
    const int r = rpoll(fds.data(), fds.size(), ms);
    if (r < 0) return -1;
    if (readfds != nullptr) FD_ZERO(readfds);
    if (writefds != nullptr) FD_ZERO(writefds);
    if (exceptfds != nullptr) FD_ZERO(exceptfds);
    int count = 0;
    for (const pollfd& p : fds) {
      if (readfds != nullptr && (p.revents & (POLLIN | POLLHUP | POLLERR)) && (p.events & POLLIN)) {
        FD_SET(p.fd, readfds);
        ++count;
      }
      if (writefds != nullptr && (p.revents & (POLLOUT | POLLERR)) && (p.events & POLLOUT)) {
        FD_SET(p.fd, writefds);
        ++count;
      }
      if (exceptfds != nullptr && (p.revents & POLLPRI)) {
        FD_SET(p.fd, exceptfds);
        ++count;
      }
    }
    return count;
  });
}

int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  return c_boundary(-1, [&]() -> int {
    if (!lookup(socket)) return fail(EBADF);
    return ::getpeername(socket, addr, addrlen);
  });
}

int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  return c_boundary(-1, [&]() -> int {
    if (!lookup(socket)) return fail(EBADF);
    return ::getsockname(socket, addr, addrlen);
  });
}

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    if (level != SOL_RDMA) return ::setsockopt(socket, level, optname, optval, optlen);
    if (optname == RDMA_ROUTE) return 0;  // no IB path records on TCP
    if (optval == nullptr || optlen < sizeof(int)) return fail(EINVAL);
    int v;
    std::memcpy(&v, optval, sizeof v);
    uwarp::MutexLock lock(s->mu);
    switch (optname) {
      case RDMA_SQSIZE:
        s->sq_size = v;
        return 0;
      case RDMA_RQSIZE:
        s->rq_size = v;
        return 0;
      case RDMA_INLINE:
        s->inline_size = v;
        return 0;
      case RDMA_IOMAPSIZE:
        s->iomap_size = v;
        return 0;
      default:
        return fail(ENOPROTOOPT);
    }
  });
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    if (level != SOL_RDMA) return ::getsockopt(socket, level, optname, optval, optlen);
    if (optval == nullptr || optlen == nullptr || *optlen < sizeof(int)) return fail(EINVAL);
    int v;
    {
      uwarp::MutexLock lock(s->mu);
      switch (optname) {
        case RDMA_SQSIZE:
          v = s->sq_size;
          break;
        case RDMA_RQSIZE:
          v = s->rq_size;
          break;
        case RDMA_INLINE:
          v = s->inline_size;
          break;
        case RDMA_IOMAPSIZE:
          v = s->iomap_size;
          break;
        default:
          return fail(ENOPROTOOPT);
      }
    }
    std::memcpy(optval, &v, sizeof v);
    *optlen = sizeof v;
    return 0;
  });
}

int rfcntl(int socket, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    switch (cmd) {
      case F_GETFL: {
        const int flags = ::fcntl(socket, F_GETFL);
        if (flags < 0) return -1;
        uwarp::MutexLock lock(s->mu);
        return (flags & ~O_NONBLOCK) | (s->nonblocking ? O_NONBLOCK : 0);
      }
      case F_SETFL: {
        uwarp::MutexLock lock(s->mu);
        s->nonblocking = (arg & O_NONBLOCK) != 0;
        return 0;
      }
      default:
        return ::fcntl(socket, cmd, arg);
    }
  });
}

off_t riomap(int socket, void* buf, std::size_t len, int prot, int flags, off_t offset) {
  (void)flags;
  return c_boundary<off_t>(-1, [&]() -> off_t {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    if (buf == nullptr || len == 0 || (prot & PROT_WRITE) == 0) return fail(EINVAL);
    uwarp::MutexLock lock(s->mu);
    if (s->iomap_size > 0 && s->maps.size() >= static_cast<std::size_t>(s->iomap_size)) {
      return fail(ENOMEM);
    }
    if (offset == -1) {
      offset = 0;
      for (const IoMap& m : s->maps) {
        offset = std::max<off_t>(offset, m.offset + static_cast<off_t>(m.len));
      }
    }
    for (const IoMap& m : s->maps) {
      if (offset < m.offset + static_cast<off_t>(m.len) &&
          m.offset < offset + static_cast<off_t>(len)) {
        return fail(EINVAL);
      }
    }
    s->maps.push_back(IoMap{static_cast<std::uint8_t*>(buf), len, offset});
    return offset;
  });
}

int riounmap(int socket, void* buf, std::size_t len) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    uwarp::MutexLock lock(s->mu);
    for (auto it = s->maps.begin(); it != s->maps.end(); ++it) {
      if (it->buf == buf && it->len == len) {
        s->maps.erase(it);
        return 0;
      }
    }
    return fail(EINVAL);
  });
}

std::size_t riowrite(int socket, const void* buf, std::size_t count, off_t offset, int flags) {
  return c_boundary<std::size_t>(static_cast<std::size_t>(-1), [&]() -> std::size_t {
    if (offset < 0) return static_cast<std::size_t>(fail(EINVAL));
    const iovec v{const_cast<void*>(buf), count};
    const ssize_t n =
        send_frame(socket, kFrameIoWrite, static_cast<std::uint64_t>(offset), &v, 1, flags);
    return static_cast<std::size_t>(n);
  });
}

}  // extern "C"
