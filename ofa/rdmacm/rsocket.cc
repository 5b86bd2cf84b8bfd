// librdmacm.so.1: the rsocket API (rsocket, rbind, rlisten, raccept, rconnect, rsend, rrecv,
// rpoll, rselect, riomap, riowrite, ...), speaking rdma-core's rsocket protocol over uwarp's
// RDMA (rsocket_protocol.h), so that an rsocket program over uwarp talks to the same program
// over Linux siw or an RNIC.
//
// Each rsocket is an Rsocket (rsocket_stream.h) in a process-wide table keyed by its number
// (its rdma_cm event channel's fd). Blocking is emulated over non-blocking fds; the
// application's O_NONBLOCK (rfcntl, SOCK_NONBLOCK) and MSG_DONTWAIT are honoured. rpoll/rselect
// accept rsockets and ordinary fds together: an rsocket is polled through its CQ's completion
// channel (connected), its event channel (connecting) or its accept queue's eventfd
// (listening). Options: SOL_RDMA's sizes before connecting; SO_RCVBUF/SO_SNDBUF set the
// buffers (twice the value, as rdma-core); the other SOL_SOCKET, IPPROTO_TCP and IPPROTO_IPV6
// options rdma-core knows are recorded and reported back (keepalive messages are not sent).
// Only SOCK_STREAM rsockets exist here (datagram rsockets need UD QPs: EPROTONOSUPPORT).
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/boundary.h"
#include "rdmacm/cma.h"
#include "rdmacm/rsocket_accept.h"
#include "rdmacm/rsocket_stream.h"

namespace uwarp::rdmacm::rs {
namespace {

using ofa::c_boundary;

struct Table {
  Mutex mu;
  std::unordered_map<int, std::shared_ptr<Rsocket>> by_fd GUARDED_BY(mu);
};

Table& table() {
  static Table* t = new Table;  // never destroyed: sockets may be used until exit
  return *t;
}

std::shared_ptr<Rsocket> lookup(int fd) {
  Table& t = table();
  MutexLock lock(t.mu);
  auto it = t.by_fd.find(fd);
  return it != t.by_fd.end() ? it->second : nullptr;
}

void insert(const std::shared_ptr<Rsocket>& s) {
  Table& t = table();
  MutexLock lock(t.mu);
  t.by_fd[s->fd] = s;
}

// Runs f(socket) under its lock; EBADF if `fd` is not an rsocket.
template <typename R, typename F>
R with_socket(int fd, F&& f) {
  auto s = lookup(fd);
  if (!s) return static_cast<R>(fail(EBADF));
  MutexLock lock(s->mu);
  return f(*s);
}

// A connecting socket's data calls drive the connection first (EAGAIN while under way).
bool ready_for_data(Rsocket& s, bool nb) REQUIRES(s.mu) {
  if (s.state == State::kConnecting && s.drive_connect(nb) != 0) {
    if (errno == EINPROGRESS) errno = EAGAIN;
    return false;
  }
  if (s.state != State::kConnected) {
    errno = s.err != 0 ? s.err : ENOTCONN;
    return false;
  }
  return true;
}

ssize_t send_iov(int fd, const iovec* iov, int iovcnt, int flags) {
  return c_boundary<ssize_t>(-1, [&] {
    return with_socket<ssize_t>(fd, [&](Rsocket& s) REQUIRES(s.mu) -> ssize_t {
      const bool nb = s.nonblocking || (flags & MSG_DONTWAIT) != 0;
      if (!ready_for_data(s, nb)) return -1;
      return s.send(iov, iovcnt, nb);
    });
  });
}

ssize_t recv_iov(int fd, const iovec* iov, int iovcnt, int flags) {
  return c_boundary<ssize_t>(-1, [&] {
    return with_socket<ssize_t>(fd, [&](Rsocket& s) REQUIRES(s.mu) -> ssize_t {
      const bool nb = s.nonblocking || (flags & MSG_DONTWAIT) != 0;
      if (!ready_for_data(s, nb)) return -1;
      return s.recv(iov, iovcnt, flags, nb);
    });
  });
}

int copy_addr(const sockaddr* a, sockaddr* addr, socklen_t* addrlen) {
  if (addr == nullptr || addrlen == nullptr) return fail(EINVAL);
  const socklen_t len = a != nullptr ? sockaddr_len(a) : 0;
  if (len == 0) return fail(ENOTCONN);
  std::memcpy(addr, a, std::min(len, *addrlen));
  *addrlen = len;
  return 0;
}

int int_option(const void* optval, socklen_t optlen, int* v) {
  if (optval == nullptr || optlen < sizeof(int)) return fail(EINVAL);
  std::memcpy(v, optval, sizeof *v);
  return 0;
}

void set_bit(std::uint64_t* bits, int optname, bool on) {
  const std::uint64_t b = std::uint64_t{1} << (optname & 63);
  *bits = on ? (*bits | b) : (*bits & ~b);
}

// rpoll: one round of readiness for every entry; the number with events.
int check_all(pollfd* fds, nfds_t nfds) {
  int count = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    auto s = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
    if (s) {
      MutexLock lock(s->mu);
      fds[i].revents = s->revents(fds[i].events);
    } else {
      fds[i].revents = 0;
      if (fds[i].fd >= 0) ::poll(&fds[i], 1, 0);
    }
    if (fds[i].revents != 0) ++count;
  }
  return count;
}

}  // namespace
}  // namespace uwarp::rdmacm::rs

using namespace uwarp::rdmacm;
using namespace uwarp::rdmacm::rs;
using uwarp::MutexLock;

extern "C" {

int rsocket(int domain, int type, int protocol) {
  return c_boundary(-1, [&]() -> int {
    if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM) {
      std::fprintf(stderr,
                   "uwarp rsocket: only SOCK_STREAM rsockets are supported (datagram "
                   "rsockets need UD QPs, which iWARP does not have)\n");
      return fail(EPROTONOSUPPORT);
    }
    if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
    if (protocol != 0 && protocol != IPPROTO_TCP) return fail(EPROTONOSUPPORT);
    auto s = std::make_shared<Rsocket>();
    if (!s->open_channel() || rdma_create_id(s->cm_channel, &s->id, s.get(), RDMA_PS_TCP) != 0) {
      const int e = errno;
      MutexLock lock(s->mu);
      s->release(/*graceful=*/false);
      return fail(e);
    }
    {
      MutexLock lock(s->mu);
      s->nonblocking = (type & SOCK_NONBLOCK) != 0;
    }
    insert(s);
    return s->fd;
  });
}

int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  (void)addrlen;
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      if (s.state != State::kFresh) return fail(EINVAL);
      return rdma_bind_addr(s.id, const_cast<sockaddr*>(addr));
    });
  });
}

int rlisten(int socket, int backlog) {
  return c_boundary(-1, [&]() -> int {
    auto s = lookup(socket);
    if (!s) return fail(EBADF);
    MutexLock lock(s->mu);
    if (s->state == State::kListening) return 0;
    if (s->state != State::kFresh) return fail(EINVAL);
    if (rdma_listen(s->id, backlog) != 0) return -1;
    if (s->accept_fd < 0) s->accept_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->accept_fd < 0) return -1;
    s->state = State::kListening;
    if (watch_listener(s) != 0) {
      s->state = State::kFresh;
      return -1;
    }
    return 0;
  });
}

int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  return c_boundary(-1, [&]() -> int {
    auto l = lookup(socket);
    if (!l) return fail(EBADF);
    std::shared_ptr<Rsocket> c;
    {
      MutexLock lock(l->mu);
      for (;;) {
        if (l->state != State::kListening) return fail(EINVAL);
        if (!l->accepted.empty()) break;
        if (l->nonblocking) return fail(EAGAIN);
        l->cv.wait_for(l->mu, std::chrono::seconds(1));
      }
      c = l->accepted.front();
      l->accepted.pop_front();
      if (l->accepted.empty() && l->accept_signalled) {
        std::uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(l->accept_fd, &v, sizeof v);
        l->accept_signalled = false;
      }
    }
    insert(c);
    if (addr != nullptr && addrlen != nullptr) {
      MutexLock lock(c->mu);
      if (c->id != nullptr) copy_addr(rdma_get_peer_addr(c->id), addr, addrlen);
    }
    return c->fd;
  });
}

int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  (void)addrlen;
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      if (s.state == State::kConnecting) return s.drive_connect(s.nonblocking);
      if (s.state == State::kConnected) return fail(EISCONN);
      if (s.state != State::kFresh) return fail(EINVAL);
      if (rdma_resolve_addr(s.id, nullptr, const_cast<sockaddr*>(addr), 2000) != 0) return -1;
      s.state = State::kConnecting;
      s.connect_phase = 0;
      return s.drive_connect(s.nonblocking);
    });
  });
}

int rshutdown(int socket, int how) {
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) { return s.shutdown(how); });
  });
}

int rclose(int socket) {
  return c_boundary(-1, [&]() -> int {
    std::shared_ptr<Rsocket> s;
    {
      Table& t = table();
      MutexLock lock(t.mu);
      auto it = t.by_fd.find(socket);
      if (it == t.by_fd.end()) return fail(EBADF);
      s = it->second;
      t.by_fd.erase(it);
    }
    std::deque<std::shared_ptr<Rsocket>> pending;
    {
      MutexLock lock(s->mu);
      if (s->state == State::kListening) {
        unwatch_listener(*s);
        pending.swap(s->accepted);
      }
      if (s->state == State::kConnected && !s->disconnected) s->shutdown(SHUT_RDWR);
      s->release(/*graceful=*/true);
    }
    for (auto& c : pending) {
      MutexLock lock(c->mu);
      c->release(/*graceful=*/false);
    }
    return 0;
  });
}

ssize_t rrecv(int socket, void* buf, std::size_t len, int flags) {
  const iovec v{buf, len};
  return recv_iov(socket, &v, 1, flags);
}

ssize_t rrecvfrom(int socket, void* buf, std::size_t len, int flags, sockaddr* src_addr,
                  socklen_t* addrlen) {
  const ssize_t n = rrecv(socket, buf, len, flags);
  if (n >= 0 && src_addr != nullptr && addrlen != nullptr) rgetpeername(socket, src_addr, addrlen);
  return n;
}

ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EINVAL);
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(ENOTSUP);
  msg->msg_flags = 0;
  return recv_iov(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t rread(int socket, void* buf, std::size_t count) {
  return rrecv(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return recv_iov(socket, iov, iovcnt, 0);
}

ssize_t rsend(int socket, const void* buf, std::size_t len, int flags) {
  const iovec v{const_cast<void*>(buf), len};
  return send_iov(socket, &v, 1, flags);
}

ssize_t rsendto(int socket, const void* buf, std::size_t len, int flags, const sockaddr* dest_addr,
                socklen_t addrlen) {
  (void)dest_addr, (void)addrlen;  // connected stream sockets ignore the address
  return rsend(socket, buf, len, flags);
}

ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EINVAL);
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(ENOTSUP);
  return send_iov(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t rwrite(int socket, const void* buf, std::size_t count) {
  return rsend(socket, buf, count, 0);
}

ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return send_iov(socket, iov, iovcnt, 0);
}

int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  return c_boundary(-1, [&]() -> int {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::vector<pollfd> waits(nfds);
    for (;;) {
      const int ready = check_all(fds, nfds);
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (ready > 0 || timeout == 0 || (timeout > 0 && elapsed >= timeout)) return ready;
      // Arm every rsocket and wait on what stands for it; completions that arrived while
      // arming mean another round at once.
      bool again = false;
      for (nfds_t i = 0; i < nfds; ++i) {
        auto s = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
        if (s) {
          MutexLock lock(s->mu);
          if (s->state == State::kConnected && s->arm()) again = true;
          waits[i] = pollfd{s->wait_fd(), POLLIN, 0};
        } else {
          waits[i] = pollfd{fds[i].fd, fds[i].events, 0};
        }
      }
      if (again) continue;
      // Bounded slices: a state change without a completion (none is known) is still seen.
      int slice = 5000;
      if (timeout > 0) slice = static_cast<int>(std::min<long>(slice, timeout - elapsed));
      if (::poll(waits.data(), nfds, slice) < 0) return -1;
      for (nfds_t i = 0; i < nfds; ++i) {
        if (waits[i].revents == 0) continue;
        auto s = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
        if (!s) continue;
        MutexLock lock(s->mu);
        if (s->state == State::kConnected) s->after_wait();
      }
    }
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
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      if (s.state != State::kConnected) return fail(ENOTCONN);
      return copy_addr(rdma_get_peer_addr(s.id), addr, addrlen);
    });
  });
}

int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      return copy_addr(rdma_get_local_addr(s.id), addr, addrlen);
    });
  });
}

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      int v = 0;
      if (level == SOL_SOCKET && optname == SO_LINGER) {
        if (optval == nullptr || optlen < sizeof(linger)) return fail(EINVAL);
        linger l;
        std::memcpy(&l, optval, sizeof l);
        set_bit(&s.opt.so_opts, SO_LINGER, l.l_onoff == 0);  // rdma-core keeps it inverted
        return 0;
      }
      if (level != SOL_RDMA || optname != RDMA_ROUTE) {
        if (int_option(optval, optlen, &v) != 0) return -1;
      }
      switch (level) {
        case SOL_SOCKET:
          switch (optname) {
            case SO_REUSEADDR:
              if (rdma_set_option(s.id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v) !=
                      0 &&
                  errno != ENOSYS) {
                return -1;
              }
              [[fallthrough]];
            case SO_KEEPALIVE:
            case SO_OOBINLINE:
              set_bit(&s.opt.so_opts, optname, v != 0);
              return 0;
            case SO_RCVBUF:
              if (s.state == State::kFresh) s.opt.rbuf_size = static_cast<std::uint32_t>(v) << 1;
              return 0;
            case SO_SNDBUF:
              if (s.state == State::kFresh) s.opt.sbuf_size = static_cast<std::uint32_t>(v) << 1;
              return 0;
            default:
              return fail(ENOTSUP);
          }
        case IPPROTO_TCP:
          switch (optname) {
            case TCP_NODELAY:
              set_bit(&s.opt.tcp_opts, optname, v != 0);
              return 0;
            case TCP_KEEPIDLE:
              if (v <= 0) return fail(EINVAL);
              s.opt.keepalive_idle = v;
              return 0;
            case TCP_KEEPCNT:
            case TCP_KEEPINTVL:
            case TCP_MAXSEG:
              return 0;  // a reliable connection has no use for them (as rdma-core)
            default:
              return fail(ENOTSUP);
          }
        case IPPROTO_IPV6:
          if (optname != IPV6_V6ONLY) return fail(ENOTSUP);
          if (rdma_set_option(s.id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v) != 0) {
            return -1;
          }
          set_bit(&s.opt.ipv6_opts, optname, v != 0);
          return 0;
        case SOL_RDMA:
          if (s.state != State::kFresh && s.state != State::kListening) return fail(EINVAL);
          switch (optname) {
            case RDMA_SQSIZE:
              s.opt.sq_size = static_cast<std::uint16_t>(std::clamp(v, 0, 0xFFFE));
              return 0;
            case RDMA_RQSIZE:
              s.opt.rq_size = static_cast<std::uint16_t>(std::clamp(v, 0, 0xFFFE));
              return 0;
            case RDMA_INLINE:
              s.opt.inline_size = static_cast<std::uint32_t>(std::clamp(v, 0, 0xFFFE));
              return 0;
            case RDMA_IOMAPSIZE:
              s.opt.iomap_size = iomap_entries_of(iomap_scale_of(v));
              return 0;
            case RDMA_ROUTE:
              return 0;  // an InfiniBand path record: nothing to route on TCP
            default:
              return fail(ENOTSUP);
          }
        default:
          return fail(ENOTSUP);
      }
    });
  });
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      if (optval == nullptr || optlen == nullptr) return fail(EINVAL);
      const auto bit = [](std::uint64_t bits, int name) {
        return static_cast<int>((bits >> (name & 63)) & 1);
      };
      int v = 0;
      switch (level) {
        case SOL_SOCKET:
          switch (optname) {
            case SO_REUSEADDR:
            case SO_KEEPALIVE:
            case SO_OOBINLINE:
              v = bit(s.opt.so_opts, optname);
              break;
            case SO_LINGER: {
              if (*optlen < sizeof(linger)) return fail(EINVAL);
              const linger l{bit(s.opt.so_opts, SO_LINGER) == 0 ? 1 : 0, 0};
              std::memcpy(optval, &l, sizeof l);
              *optlen = sizeof l;
              return 0;
            }
            case SO_RCVBUF:
              v = static_cast<int>(s.rbuf_size != 0 ? s.rbuf_size : s.opt.rbuf_size);
              break;
            case SO_SNDBUF:
              v = static_cast<int>(s.sbuf_size != 0 ? s.sbuf_size : s.opt.sbuf_size);
              break;
            case SO_ERROR:
              if (s.state == State::kConnecting) s.drive_connect(true);
              v = s.err;
              if (s.state != State::kConnecting) s.err = 0;
              break;
            default:
              return fail(ENOTSUP);
          }
          break;
        case IPPROTO_TCP:
          switch (optname) {
            case TCP_KEEPCNT:
            case TCP_KEEPINTVL:
              v = 1;  // N/A: rdma-core reports 1
              break;
            case TCP_KEEPIDLE:
              v = s.opt.keepalive_idle;
              break;
            case TCP_NODELAY:
              v = bit(s.opt.tcp_opts, optname);
              break;
            case TCP_MAXSEG:
              v = 2048;
              break;
            default:
              return fail(ENOTSUP);
          }
          break;
        case IPPROTO_IPV6:
          if (optname != IPV6_V6ONLY) return fail(ENOTSUP);
          v = bit(s.opt.ipv6_opts, optname);
          break;
        case SOL_RDMA:
          switch (optname) {
            case RDMA_SQSIZE:
              v = s.sq_size != 0 ? s.sq_size : s.opt.sq_size;
              break;
            case RDMA_RQSIZE:
              v = s.rq_size != 0 ? s.rq_size : s.opt.rq_size;
              break;
            case RDMA_INLINE:
              v = static_cast<int>(s.sq_inline != 0 ? s.sq_inline : s.opt.inline_size);
              break;
            case RDMA_IOMAPSIZE:
              v = s.opt.iomap_size;
              break;
            default:
              return fail(ENOTSUP);
          }
          break;
        default:
          return fail(ENOTSUP);
      }
      if (*optlen < sizeof v) return fail(EINVAL);
      std::memcpy(optval, &v, sizeof v);
      *optlen = sizeof v;
      return 0;
    });
  });
}

int rfcntl(int socket, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      switch (cmd) {
        case F_GETFL:
          return O_RDWR | (s.nonblocking ? O_NONBLOCK : 0);
        case F_SETFL:
          s.nonblocking = (arg & O_NONBLOCK) != 0;
          return 0;
        default:
          return ::fcntl(socket, cmd, arg);
      }
    });
  });
}

off_t riomap(int socket, void* buf, std::size_t len, int prot, int flags, off_t offset) {
  (void)flags;
  return c_boundary<off_t>(-1, [&]() -> off_t {
    return with_socket<off_t>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> off_t {
      if (s.id == nullptr || s.id->pd == nullptr || buf == nullptr || len == 0 ||
          (prot & ~(PROT_WRITE | PROT_NONE)) != 0) {
        return fail(EINVAL);
      }
      LocalIomap m;
      if ((prot & PROT_WRITE) != 0) {
        // The first entry of the peer's iomap table that no mapping of ours holds.
        for (std::uint32_t i = 0; i < s.remote_iomap.length && m.index < 0; ++i) {
          const bool used = std::any_of(s.iomaps.begin(), s.iomaps.end(),
                                        [i](const LocalIomap& o) { return o.index == int(i); });
          if (!used) m.index = static_cast<int>(i);
        }
        if (m.index < 0) return fail(ENOMEM);
      }
      const int access =
          IBV_ACCESS_LOCAL_WRITE | ((prot & PROT_WRITE) != 0 ? IBV_ACCESS_REMOTE_WRITE : 0);
      m.mr = ibv_reg_mr(s.id->pd, buf, len, access);
      if (m.mr == nullptr) return -1;
      m.offset =
          offset == -1 ? reinterpret_cast<std::uintptr_t>(buf) : static_cast<std::uint64_t>(offset);
      s.iomaps.push_back(m);
      return static_cast<off_t>(m.offset);
    });
  });
}

int riounmap(int socket, void* buf, std::size_t len) {
  return c_boundary(-1, [&]() -> int {
    return with_socket<int>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> int {
      for (auto it = s.iomaps.begin(); it != s.iomaps.end(); ++it) {
        if (it->mr->addr == buf && it->mr->length == len) {
          ibv_dereg_mr(it->mr);
          s.iomaps.erase(it);
          return 0;
        }
      }
      return fail(EINVAL);
    });
  });
}

std::size_t riowrite(int socket, const void* buf, std::size_t count, off_t offset, int flags) {
  return c_boundary<std::size_t>(static_cast<std::size_t>(-1), [&]() -> std::size_t {
    const ssize_t n = with_socket<ssize_t>(socket, [&](Rsocket& s) REQUIRES(s.mu) -> ssize_t {
      const bool nb = s.nonblocking || (flags & MSG_DONTWAIT) != 0;
      if (offset < 0) return fail(EINVAL);
      if (!ready_for_data(s, nb)) return -1;
      return s.iowrite(static_cast<const std::uint8_t*>(buf), count,
                       static_cast<std::uint64_t>(offset), nb);
    });
    return static_cast<std::size_t>(n);
  });
}

}  // extern "C"
