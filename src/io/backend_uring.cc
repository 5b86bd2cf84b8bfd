// The io_uring implementation of IoBackend: every operation is handed to the kernel, which
// performs it once the socket is ready, and run_once reaps the completions.
//
// - recv, send (IORING_OP_SENDMSG), accept: the operations themselves.
// - watch_readable: with a buffer, an IORING_OP_RECV into it, so that the wake-up that reports
//   readiness returns with the bytes already received (one system call per wake-up instead of a
//   wait and a receive); without one, a one-shot IORING_OP_POLL_ADD (POLLIN). A poll request
//   checks the socket's state when it is armed, so a FIN queued behind bytes the handler left
//   after a short read makes the next watch fire at once.
// - connect_wait: a POLL_ADD (POLLOUT), then SO_ERROR.
// - wake: an eventfd under a multishot POLL_ADD.
//
// Submission: any thread may start an operation, but only the loop thread touches the ring
// (IORING_SETUP_SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them: completions are
// then processed when the loop thread waits, not by interrupting it). Operations started
// elsewhere are queued under mu_ and submitted by the next run_once, which the starter wakes.
//
// Ownership: the loop thread creates the ring (make_uring_backend), is its only submitter, and
// destroys it. The kernel keeps a list of the threads that created or submitted to a ring, and
// its teardown of the ring queues signal-like task work (TWA_SIGNAL) on each of them: a blocking
// system call of such a thread (epoll_wait, poll, read) returns EINTR some milliseconds after
// the ring was closed. Only the loop thread, which blocks all signals and expects that, may be
// on that list; an application thread that opened and closed a device must never be.
//
// Each attach gets a new id; a completion carries the id and the operation (user_data), so that
// one that arrives after detach (or for a reused fd number) is recognised and dropped. detach
// cancels what is in flight for the fd and waits for those completions, because the kernel may
// write into a receive buffer until then.
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "io/backend.h"
#include "io/race_annotations.h"

namespace uwarp::io {
namespace {

enum class Op : std::uint8_t { kWake, kIgnore, kShutdown, kRecv, kSend, kAccept, kConnect, kWatch };

constexpr unsigned kRingEntries = 256;
constexpr unsigned kCompletionEntries = 8192;  // 1000 QPs: a watch and a send each, with room

struct Completion {
  std::uint64_t user_data;
  int res;
  unsigned flags;
};

std::uint64_t pack(std::uint64_t id, Op op) { return id << 8 | static_cast<std::uint64_t>(op); }
Op op_of(std::uint64_t user_data) { return static_cast<Op>(user_data & 0xff); }
std::uint64_t id_of(std::uint64_t user_data) { return user_data >> 8; }

class UringBackend final : public IoBackend {
 public:
  // `ring` was set up by make_uring_backend on this thread, which becomes the loop thread.
  // The wake-up poll is queued at once (the ring is enabled from the start) and submitted with
  // the first run_once.
  explicit UringBackend(const io_uring& ring)
      : wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        ring_(ring),
        loop_thread_(std::this_thread::get_id()) {
    arm_wake();
  }

  ~UringBackend() override { io_uring_queue_exit(&ring_); }

  bool receives_with_watch() const override { return true; }

  Status attach(int fd, IoHandler* handler) override {
    std::lock_guard lock(mu_);
    const std::uint64_t id = next_id_++;
    // An fd attached again without detach: its old operations complete into nothing.
    if (auto old = ids_.find(fd); old != ids_.end() && states_[old->second].inflight == 0) {
      states_.erase(old->second);
    }
    ids_[fd] = id;
    FdState& s = states_[id];
    s.fd = fd;
    s.handler = handler;
    return Status::ok();
  }

  void detach(int fd) override {
    std::uint64_t id = 0;
    {
      std::lock_guard lock(mu_);
      auto it = ids_.find(fd);
      if (it == ids_.end()) return;
      id = it->second;
      ids_.erase(it);
      // Not yet submitted: dropped.
      std::erase_if(requests_, [id](const Request& r) { return r.id == id; });
      std::erase_if(immediate_, [id](std::uint64_t i) { return i == id; });
      // Reaped already (during another detach), not yet dispatched: done, and dropped.
      std::erase_if(deferred_, [&](const Completion& c) {
        if (id_of(c.user_data) != id || op_of(c.user_data) == Op::kIgnore) return false;
        --states_[id].inflight;
        return true;
      });
      if (states_[id].inflight == 0) {
        states_.erase(id);
        return;
      }
    }
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, pack(0, Op::kIgnore));
    // Until the kernel has given back every buffer of the fd's operations. Other completions
    // that arrive meanwhile are kept for the next run_once.
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (states_[id].inflight == 0) {
          states_.erase(id);
          return;
        }
      }
      io_uring_submit_and_wait(&ring_, 1);
      reap([&](const Completion& c) {
        if (id_of(c.user_data) == id && op_of(c.user_data) != Op::kIgnore) {
          std::lock_guard lock(mu_);
          --states_[id].inflight;
        } else {
          deferred_.push_back(c);
        }
      });
    }
  }

  void recv(int fd, ByteSpan into) override {
    start(fd, Op::kRecv, [&](FdState& s) { s.recv_buf = into; });
  }
  void send(int fd, std::span<const iovec> iov) override {
    start(fd, Op::kSend, [&](FdState& s) {
      s.msg = msghdr{};
      s.msg.msg_iov = const_cast<iovec*>(iov.data());
      s.msg.msg_iovlen = std::min<std::size_t>(iov.size(), IOV_MAX);
    });
  }
  void accept(int fd) override {
    start(fd, Op::kAccept, [](FdState&) {});
  }
  void connect_wait(int fd) override {
    start(fd, Op::kConnect, [](FdState&) {});
  }
  void watch_readable(int fd, bool maybe_readable, ByteSpan into) override {
    if (maybe_readable) {
      bool queued = false;
      {
        std::lock_guard lock(mu_);
        auto it = ids_.find(fd);
        if (it == ids_.end()) return;
        immediate_.push_back(it->second);
        queued = true;
      }
      if (queued && !on_loop_thread()) wake();
      return;
    }
    start(fd, Op::kWatch, [&](FdState& s) { s.watch_buf = into; });
  }

  void shutdown() override {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, pack(0, Op::kShutdown));
    // The cancellation completes once every request it matched has ended (sockets' requests
    // are cancelled at once); bounded all the same.
    bool done = false;
    for (int round = 0; !done && round < 100; ++round) {
      __kernel_timespec ts{0, 10 * 1000 * 1000};
      io_uring_cqe* cqe = nullptr;
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      reap([&](const Completion& c) { done |= op_of(c.user_data) == Op::kShutdown; });
    }
    std::lock_guard lock(mu_);
    states_.clear();
    ids_.clear();
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
  }

  std::size_t run_once(std::chrono::microseconds timeout) override {
    {
      std::lock_guard lock(mu_);
      requests_batch_.swap(requests_);
      immediate_batch_.swap(immediate_);
    }
    for (const Request& r : requests_batch_) submit(r);
    requests_batch_.clear();
    if (!immediate_batch_.empty() || !deferred_.empty()) timeout = std::chrono::microseconds(0);
    wait(timeout);

    // Member vectors, so that a wake-up allocates nothing once they have grown. A callback may
    // detach, which adds to deferred_, not to completions_.
    completions_.swap(deferred_);
    reap([&](const Completion& c) { completions_.push_back(c); });
    std::size_t handled = 0;
    for (const Completion& c : completions_) handled += dispatch(c) ? 1 : 0;
    completions_.clear();
    for (std::uint64_t id : immediate_batch_) {
      IoHandler* h = handler_of(id);
      if (h == nullptr) continue;
      h->on_readable(IoHandler::kReadinessOnly);
      ++handled;
    }
    immediate_batch_.clear();
    return handled;
  }

 private:
  struct FdState {
    int fd = -1;
    IoHandler* handler = nullptr;
    int inflight = 0;  // operations submitted and not yet completed
    ByteSpan recv_buf;
    ByteSpan watch_buf;
    msghdr msg{};
    SocketAddress peer;
  };
  struct Request {
    int fd;
    std::uint64_t id;
    Op op;
  };

  bool on_loop_thread() const { return std::this_thread::get_id() == loop_thread_; }

  void arm_wake() {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_poll_multishot(sqe, wake_fd_.get(), POLLIN);
    io_uring_sqe_set_data64(sqe, pack(0, Op::kWake));
  }

  // Loop thread: a free submission slot, submitting what is queued if the ring is full.
  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  template <typename F>
  void start(int fd, Op op, F&& set) {
    {
      std::lock_guard lock(mu_);
      auto it = ids_.find(fd);
      if (it == ids_.end()) return;
      set(states_[it->second]);
      requests_.push_back(Request{fd, it->second, op});
    }
    if (!on_loop_thread()) wake();
  }

  // Loop thread: one queued request into the ring.
  void submit(const Request& r) {
    ByteSpan recv_buf;
    ByteSpan watch_buf;
    msghdr* msg = nullptr;
    SocketAddress* peer = nullptr;
    {
      std::lock_guard lock(mu_);
      auto it = states_.find(r.id);
      if (it == states_.end() || !attached_locked(r.fd, r.id)) return;
      FdState& s = it->second;
      ++s.inflight;
      recv_buf = s.recv_buf;
      watch_buf = s.watch_buf;
      msg = &s.msg;  // stable: unordered_map nodes do not move
      peer = &s.peer;
    }
    io_uring_sqe* sqe = get_sqe();
    switch (r.op) {
      case Op::kRecv:
        io_uring_prep_recv(sqe, r.fd, recv_buf.data(), recv_buf.size(), 0);
        break;
      case Op::kWatch:
        if (watch_buf.empty()) {
          io_uring_prep_poll_add(sqe, r.fd, POLLIN | POLLRDHUP);
        } else {
          io_uring_prep_recv(sqe, r.fd, watch_buf.data(), watch_buf.size(), 0);
        }
        break;
      case Op::kSend:
        annotate_socket_send();
        io_uring_prep_sendmsg(sqe, r.fd, msg, MSG_NOSIGNAL);
        break;
      case Op::kAccept:
        peer->length = sizeof peer->storage;
        io_uring_prep_accept(sqe, r.fd, reinterpret_cast<sockaddr*>(&peer->storage), &peer->length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
        break;
      case Op::kConnect:
        io_uring_prep_poll_add(sqe, r.fd, POLLOUT);
        break;
      case Op::kWake:
      case Op::kIgnore:
      case Op::kShutdown:
        break;
    }
    io_uring_sqe_set_data64(sqe, pack(r.id, r.op));
  }

  void wait(std::chrono::microseconds timeout) {
    if (timeout.count() == 0) {
      io_uring_submit_and_get_events(&ring_);
      return;
    }
    io_uring_cqe* cqe = nullptr;
    if (timeout.count() < 0) {
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, nullptr, nullptr);
      return;
    }
    __kernel_timespec ts{};
    ts.tv_sec = timeout.count() / 1000000;
    ts.tv_nsec = (timeout.count() % 1000000) * 1000;
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  }

  template <typename F>
  void reap(F&& take) {
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned count = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      take(Completion{io_uring_cqe_get_data64(cqe), cqe->res, cqe->flags});
      ++count;
    }
    io_uring_cq_advance(&ring_, count);
  }

  // The handler of an attachment that has not been detached, else nullptr.
  IoHandler* handler_of(std::uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = states_.find(id);
    return it != states_.end() && attached_locked(it->second.fd, id) ? it->second.handler : nullptr;
  }

  // mu_ held: `id` is the fd's current attachment (not detached, not attached again since).
  bool attached_locked(int fd, std::uint64_t id) const {
    auto it = ids_.find(fd);
    return it != ids_.end() && it->second == id;
  }

  // Loop thread: runs the callback of one completion (without mu_ held). False if it belonged
  // to nothing attached.
  bool dispatch(const Completion& c) {
    const Op op = op_of(c.user_data);
    if (op == Op::kWake) {
      std::uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_.get(), &v, sizeof v);
      if (!(c.flags & IORING_CQE_F_MORE)) arm_wake();
      return false;
    }
    if (op == Op::kIgnore || op == Op::kShutdown) return false;
    const std::uint64_t id = id_of(c.user_data);
    int fd = -1;
    IoHandler* h = nullptr;
    bool watch_received = false;
    {
      std::lock_guard lock(mu_);
      auto it = states_.find(id);
      if (it == states_.end()) return false;
      FdState& s = it->second;
      fd = s.fd;
      --s.inflight;
      if (!attached_locked(fd, id)) {
        if (s.inflight == 0) states_.erase(it);  // the fd was attached again meanwhile
        return false;
      }
      h = s.handler;
      watch_received = !s.watch_buf.empty();
      if (c.res == -EAGAIN || c.res == -EINTR) {
        // The kernel waits for readiness itself; should it ever give up, try again.
        requests_.push_back(Request{fd, id, op});
        return false;
      }
    }
    if ((op == Op::kRecv || op == Op::kWatch) && c.res > 0) annotate_socket_receive();
    switch (op) {
      case Op::kRecv:
        h->on_recv(c.res);
        break;
      case Op::kSend:
        h->on_send(c.res);
        break;
      case Op::kWatch:
        h->on_readable(watch_received ? c.res : IoHandler::kReadinessOnly);
        break;
      case Op::kConnect:
        h->on_connect(socket_error(fd));
        break;
      case Op::kAccept: {
        SocketAddress peer;
        {
          std::lock_guard lock(mu_);
          peer = states_[id].peer;  // before the next accept is submitted into it
          requests_.push_back(Request{fd, id, Op::kAccept});  // accept stays armed
        }
        if (c.res < 0) {
          h->on_accept(error(Errc::kIoError, std::string("accept: ") + std::strerror(-c.res)), peer);
          break;
        }
        Fd conn(c.res);
        if (Status s = configure_stream(conn.get()); !s) {
          h->on_accept(Unexpected{s}, peer);
          break;
        }
        h->on_accept(std::move(conn), peer);
        break;
      }
      case Op::kWake:
      case Op::kIgnore:
      case Op::kShutdown:
        break;
    }
    return true;
  }

  Fd wake_fd_;
  io_uring ring_;
  const std::thread::id loop_thread_;  // the thread that made the ring: its only submitter
  std::mutex mu_;
  std::unordered_map<int, std::uint64_t> ids_;      // attached fd -> its id (mu_)
  std::unordered_map<std::uint64_t, FdState> states_;  // by id, until its last completion (mu_)
  std::uint64_t next_id_ = 1;
  std::vector<Request> requests_;        // started, not yet submitted (mu_)
  std::vector<Request> requests_batch_;  // loop thread only
  std::vector<std::uint64_t> immediate_;        // watches that fire at once (mu_)
  std::vector<std::uint64_t> immediate_batch_;  // loop thread only
  std::vector<Completion> deferred_;     // reaped during detach; dispatched next (loop thread)
  std::vector<Completion> completions_;  // loop thread only: being dispatched
};

}  // namespace

std::unique_ptr<IoBackend> make_uring_backend() {
  // The kernel may lack io_uring or these flags, or refuse it (kernel.io_uring_disabled,
  // seccomp): then nullptr. Linux 6.1 has all flags; older kernels get the ring without them.
  io_uring ring{};
  io_uring_params p{};
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  p.cq_entries = kCompletionEntries;
  if (io_uring_queue_init_params(kRingEntries, &ring, &p) == 0) {
    return std::make_unique<UringBackend>(ring);
  }
  p = io_uring_params{};
  p.flags = IORING_SETUP_CQSIZE;
  p.cq_entries = kCompletionEntries;
  if (io_uring_queue_init_params(kRingEntries, &ring, &p) == 0) {
    return std::make_unique<UringBackend>(ring);
  }
  return nullptr;
}

}  // namespace uwarp::io
