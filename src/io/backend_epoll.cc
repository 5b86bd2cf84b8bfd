// The epoll implementation of IoBackend: edge-triggered readiness turned into completions. Each
// fd keeps "may be readable/writable" flags, set by epoll events and cleared by EAGAIN; an armed
// operation whose flag is set is performed on the loop thread by run_once.
//
// Readiness watches (watch_readable): the flag is cleared when on_readable is delivered (the
// handler then empties the socket itself with try_recv, a plain non-blocking receive: this
// backend never receives for a watch, so it ignores the watch's buffer and never says -EBUSY),
// and set again by the next edge. A handler may stop
// at a short receive, so a FIN queued behind the data it read would have had its edge already:
// once an edge has reported the peer's close or an error, every watch fires at once. An edge for an
// fd in watch mode that has no watch armed means another thread is receiving on it (a busy-
// polling application): the fd's read interest is then removed from the epoll set, so that
// further packets do not wake the loop thread for nothing, and restored by the next watch. The
// flag stays set meanwhile, so that watch fires at once.
//
// Accepts: one that fails for want of resources (io/accept_backoff.h) pauses the fd's accepting
// (accept_paused) until a deadline in paused_accepts_; run_once waits no longer than the first
// deadline and then makes the fd ready again.
//
// Write interest likewise: senders write inline (runtime::Stream) and arm a send or a write
// watch here only when the socket is full, but every ACK that frees send space raises an
// EPOLLOUT edge. An EPOLLOUT edge with nothing armed that needs it therefore removes the write
// interest, and the next send, write watch or connect_wait restores it before it tries.
// Restoring (EPOLL_CTL_MOD) makes the kernel report the fd again if it is writable by then, so
// no edge is lost in between. A write watch always restores it (the handler's own send has just
// found the socket full: the writable flag is stale, and an edge may have come since).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "io/accept_backoff.h"
#include "io/backend.h"

namespace uwarp::io {
namespace {

class EpollBackend final : public IoBackend {
 public:
  EpollBackend() {
    epfd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_.get();
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  }

  Status attach(int fd, IoHandler* handler) override {
    {
      MutexLock lock(mu_);
      FdState& s = fds_[fd];
      s = FdState{};
      s.handler = handler;
    }
    epoll_event ev{};
    ev.events = kAllEvents;
    ev.data.fd = fd;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      MutexLock lock(mu_);
      fds_.erase(fd);
      return Status(Errc::kIoError, "epoll_ctl(ADD) failed");
    }
    return Status::ok();
  }

  void detach(int fd) override {
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
    MutexLock lock(mu_);
    fds_.erase(fd);
  }

  void recv(int fd, ByteSpan into) override {
    arm(fd, [&](FdState& s) {
      s.recv_armed = true;
      s.recv_buf = into;
      return s.readable;
    });
  }
  void send(int fd, std::span<const iovec> iov) override {
    arm(fd, [&](FdState& s) REQUIRES(mu_) {
      s.send_armed = true;
      s.send_iov = iov;
      want_write_locked(fd, s);
      return s.writable;
    });
  }
  void watch_writable(int fd) override {
    arm(fd, [&](FdState& s) REQUIRES(mu_) {
      s.write_watch_armed = true;
      s.writable = false;
      set_interest_locked(fd, s, s.read_interest, true);  // reports the fd if writable now
      return false;
    });
  }
  long try_recv(int fd, ByteSpan into) override { return recv_some(fd, into); }
  long try_recv(int fd, std::span<const iovec> into) override { return recv_some(fd, into); }
  std::string_view name() const override { return "epoll"; }
  void watch_readable(int fd, bool maybe_readable, ByteSpan /*into: readiness only*/) override {
    arm(fd, [&](FdState& s) REQUIRES(mu_) {
      s.watch_mode = true;
      s.watch_armed = true;
      if (maybe_readable || s.peer_closed) s.readable = true;
      if (!s.read_interest) set_interest_locked(fd, s, true, s.write_interest);
      return s.readable;
    });
  }
  void accept(int fd) override {
    arm(fd, [&](FdState& s) {
      s.accept_armed = true;
      return s.readable;
    });
  }
  void connect_wait(int fd) override {
    arm(fd, [&](FdState& s) REQUIRES(mu_) {
      s.connect_armed = true;
      s.writable = false;  // a connecting socket is not writable until the handshake ends
      want_write_locked(fd, s);
      return false;
    });
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
  }

  std::size_t run_once(std::chrono::microseconds timeout) override {
    loop_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    {
      MutexLock lock(mu_);
      timeout = resume_accepts_locked(timeout);
      if (!ready_.empty()) timeout = std::chrono::microseconds(0);
    }
    epoll_event events[64];
    const int n = wait(events, 64, timeout);
    {
      MutexLock lock(mu_);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_.get()) {
          std::uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(fd, &v, sizeof v);
          continue;
        }
        auto it = fds_.find(fd);
        if (it == fds_.end()) continue;
        const std::uint32_t e = events[i].events;
        FdState& s = it->second;
        bool read_interest = s.read_interest;
        bool write_interest = s.write_interest;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
          s.readable = true;
          if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s.peer_closed = true;
          if (s.watch_mode && !s.watch_armed) read_interest = false;
        }
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
          s.writable = true;
          if (!s.send_armed && !s.connect_armed && !s.write_watch_armed) write_interest = false;
        }
        if (read_interest != s.read_interest || write_interest != s.write_interest) {
          set_interest_locked(fd, s, read_interest, write_interest);
        }
        ready_.push_back(fd);
      }
    }
    {
      MutexLock lock(mu_);
      resume_accepts_locked(timeout);
    }
    {
      // The two vectors trade buffers, so that a wake-up allocates nothing once they have grown.
      MutexLock lock(mu_);
      batch_.swap(ready_);
    }
    std::sort(batch_.begin(), batch_.end());
    batch_.erase(std::unique(batch_.begin(), batch_.end()), batch_.end());
    for (int fd : batch_) perform(fd);
    const std::size_t performed = batch_.size();
    batch_.clear();
    return performed;
  }

 private:
  struct FdState {
    IoHandler* handler = nullptr;
    bool readable = true;  // optimistic: try the system call first
    bool writable = true;
    bool recv_armed = false;
    ByteSpan recv_buf;
    bool send_armed = false;
    std::span<const iovec> send_iov;
    bool accept_armed = false;
    bool accept_paused = false;  // after an accept out of resources, until its deadline
    AcceptBackoff accept_backoff;
    bool connect_armed = false;
    bool write_watch_armed = false;
    bool watch_mode = false;    // watch_readable was used: read interest may be dropped
    bool watch_armed = false;
    bool peer_closed = false;    // an edge reported the peer's close or an error (sticky)
    bool read_interest = true;   // EPOLLIN | EPOLLRDHUP are in the epoll set
    bool write_interest = true;  // EPOLLOUT is in the epoll set
  };

  // epoll_pwait2 (Linux 5.11) for microsecond timeouts, else epoll_wait rounding up to ms.
  int wait(epoll_event* events, int max, std::chrono::microseconds timeout) {
    if (timeout.count() >= 0 && pwait2_) {
      timespec ts{};
      ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
      ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
      const int n = ::epoll_pwait2(epfd_.get(), events, max, &ts, nullptr);
      if (n >= 0 || errno != ENOSYS) return n;
      pwait2_ = false;
    }
    const int ms = timeout.count() < 0 ? -1 : static_cast<int>((timeout.count() + 999) / 1000);
    return ::epoll_wait(epfd_.get(), events, max, ms);
  }

  static constexpr std::uint32_t kAllEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

  // mu_ held. EPOLLHUP and EPOLLERR are reported whatever the mask.
  void set_interest_locked(int fd, FdState& s, bool read, bool write) REQUIRES(mu_) {
    epoll_event ev{};
    ev.events = EPOLLET | (read ? EPOLLIN | EPOLLRDHUP : 0u) | (write ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) == 0) {
      s.read_interest = read;
      s.write_interest = write;
    }
  }
  // mu_ held: a send or connect is being armed; it needs EPOLLOUT edges.
  void want_write_locked(int fd, FdState& s) REQUIRES(mu_) {
    if (!s.write_interest) set_interest_locked(fd, s, s.read_interest, true);
  }

  // Arms an operation: f(state), run under mu_, returns whether it may be performed now.
  template <typename F>
  void arm(int fd, F&& f) {
    bool now = false;
    {
      MutexLock lock(mu_);
      auto it = fds_.find(fd);
      if (it == fds_.end()) return;
      now = f(it->second);
      if (now) ready_.push_back(fd);
    }
    if (now && std::this_thread::get_id() != loop_thread_.load(std::memory_order_relaxed)) wake();
  }

  // One operation that is armed and ready, as taken from an fd's state.
  struct Step {
    enum Kind { kNone, kConnect, kRecv, kReadable, kSend, kWritable, kAccept } kind = kNone;
    IoHandler* handler = nullptr;
    ByteSpan buf;
    std::span<const iovec> iov;
  };

  // mu_ taken: the next operation armed and ready on fd, in priority order (kNone: none).
  Step next_step(int fd) {
    MutexLock lock(mu_);
    Step step;
    auto it = fds_.find(fd);
    if (it == fds_.end()) return step;
    FdState& s = it->second;
    step.handler = s.handler;
    if (s.connect_armed && s.writable) {
      s.connect_armed = false;
      step.kind = Step::kConnect;
    } else if (s.recv_armed && s.readable) {
      step.kind = Step::kRecv;
      step.buf = s.recv_buf;
    } else if (s.watch_armed && s.readable) {
      s.watch_armed = false;
      s.readable = false;  // the handler empties the socket; the next edge sets it
      step.kind = Step::kReadable;
    } else if (s.send_armed && s.writable) {
      step.kind = Step::kSend;
      step.iov = s.send_iov;
    } else if (s.write_watch_armed && s.writable) {
      s.write_watch_armed = false;
      step.kind = Step::kWritable;
    } else if (s.accept_armed && s.readable && !s.accept_paused) {
      step.kind = Step::kAccept;
    }
    return step;
  }

  // Performs whatever is armed and ready on fd; callbacks run without the lock held.
  void perform(int fd) {
    for (int round = 0; round < 4; ++round) {
      const Step step = next_step(fd);
      IoHandler* h = step.handler;
      long result = 0;
      switch (step.kind) {
        case Step::kNone:
          return;
        case Step::kConnect:
          h->on_connect(socket_error(fd));
          break;
        case Step::kRecv:
          result = recv_some(fd, step.buf);
          if (!finish(fd, result, &FdState::readable, &FdState::recv_armed)) continue;
          h->on_recv(result);
          break;
        case Step::kReadable:
          h->on_readable(std::nullopt);
          break;
        case Step::kSend:
          result = send_iov(fd, step.iov);
          if (!finish(fd, result, &FdState::writable, &FdState::send_armed)) continue;
          h->on_send(result);
          break;
        case Step::kWritable:
          h->on_writable();
          break;
        case Step::kAccept:
          if (!perform_accept(fd, h)) continue;
          break;
      }
    }
    // Still armed and ready after a few rounds: let other fds run first.
    MutexLock lock(mu_);
    auto it = fds_.find(fd);
    if (it != fds_.end()) ready_.push_back(fd);
  }

  // Accepts one connection for h; false if none was pending (the fd is then not readable).
  bool perform_accept(int fd, IoHandler* h) {
    SocketAddress peer;
    auto conn = tcp_accept(fd, &peer);
    if (!conn && conn.error().code() == Errc::kBusy) {
      MutexLock lock(mu_);
      auto it = fds_.find(fd);
      if (it != fds_.end()) it->second.readable = false;
      return false;
    }
    pace_accept(fd, !conn && conn.error().code() == Errc::kNoResources);
    h->on_accept(std::move(conn), peer);
    return true;
  }

  // An accept on fd succeeded or failed: after a failure for want of resources the fd accepts
  // again only after a pause; any other outcome starts the back-off over.
  void pace_accept(int fd, bool out_of_resources) {
    MutexLock lock(mu_);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return;
    FdState& s = it->second;
    if (!out_of_resources) {
      s.accept_backoff.reset();
      return;
    }
    s.accept_paused = true;
    paused_accepts_.push_back({std::chrono::steady_clock::now() + s.accept_backoff.next(), fd});
  }

  // mu_ held: the paused accepts whose deadline has come are ready again (an fd detached
  // meanwhile is forgotten); returns `timeout` shortened to the first deadline still ahead.
  std::chrono::microseconds resume_accepts_locked(std::chrono::microseconds timeout) REQUIRES(mu_) {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(paused_accepts_, [&](const PausedAccept& p) REQUIRES(mu_) {
      if (p.until > now) {
        timeout = wait_at_most_until(timeout, p.until);
        return false;
      }
      if (auto it = fds_.find(p.fd); it != fds_.end() && it->second.accept_paused) {
        it->second.accept_paused = false;
        ready_.push_back(p.fd);
      }
      return true;
    });
    return timeout;
  }

  // After a system call: EAGAIN clears the readiness flag and keeps the operation armed (returns
  // false); anything else disarms it (returns true: complete it).
  bool finish(int fd, long result, bool FdState::*ready, bool FdState::*armed) {
    MutexLock lock(mu_);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return false;
    if (result == -EAGAIN || result == -EWOULDBLOCK) {
      it->second.*ready = false;
      return false;
    }
    if (result == -EINTR) return false;
    it->second.*armed = false;
    return true;
  }

  Fd epfd_;
  Fd wake_fd_;
  Mutex mu_;
  std::unordered_map<int, FdState> fds_ GUARDED_BY(mu_);
  std::vector<int> ready_ GUARDED_BY(mu_);
  struct PausedAccept {
    std::chrono::steady_clock::time_point until;
    int fd;
  };
  std::vector<PausedAccept> paused_accepts_ GUARDED_BY(mu_);  // one per paused fd
  std::vector<int> batch_;  // loop thread only: the fds run_once is performing
  std::atomic<std::thread::id> loop_thread_{};
  bool pwait2_ = true;  // loop thread only
};

}  // namespace

std::unique_ptr<IoBackend> make_epoll_backend() { return std::make_unique<EpollBackend>(); }

}  // namespace uwarp::io
