// The io_uring implementation of IoBackend: every operation is handed to the kernel, which
// performs it once the socket is ready, and run_once reaps the completions.
//
// - recv, send (IORING_OP_SENDMSG), accept: the operations themselves.
// - watch_readable: with a buffer, an IORING_OP_RECV into it, so that the wake-up that reports
//   readiness returns with the bytes already received (one system call per wake-up instead of a
//   wait and a receive); without one, a one-shot IORING_OP_POLL_ADD (POLLIN). A poll request
//   checks the socket's state when it is armed, so a FIN queued behind bytes the handler left
//   after a short read makes the next watch fire at once.
// - try_recv: a plain non-blocking receive on the caller's thread, unless a receive of the
//   backend's own (a watch's, or recv) is in flight or its report is being handled: the kernel
//   may be writing into the handler's buffer, and bytes taken meanwhile would overtake them.
// - connect_wait: a POLL_ADD (POLLOUT), then SO_ERROR; watch_writable: the same POLL_ADD (it
//   checks the socket when armed, so space that freed before is not missed).
// - wake: an eventfd under a multishot POLL_ADD.
//
// Submission: any thread may start an operation, but only the loop thread touches the ring
// (IORING_SETUP_SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them: completions are
// then processed when the loop thread waits, not by interrupting it). Operations started
// elsewhere are queued in the attachments table and submitted by the next run_once, which the
// starter wakes.
//
// Ownership: the loop thread creates the ring (make_uring_backend), is its only submitter, and
// destroys it. The kernel keeps a list of the threads that created or submitted to a ring, and
// its teardown of the ring queues signal-like task work (TWA_SIGNAL) on each of them: a blocking
// system call of such a thread (epoll_wait, poll, read) returns EINTR some milliseconds after
// the ring was closed. Only the loop thread, which blocks all signals and expects that, may be
// on that list; an application thread that opened and closed a device must never be.
//
// Accepts: one that fails for want of resources (io/accept_backoff.h) is submitted again only
// after a pause (paused_accepts_, loop thread); run_once waits no longer than the first deadline.
//
// Attachments (uring_attachments.h) keeps the fds and their operations. detach cancels what is
// in flight for the fd and waits for those completions, because the kernel may write into a
// receive buffer until then.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "io/accept_backoff.h"
#include "io/backend.h"
#include "io/race_annotations.h"
#include "io/uring_attachments.h"
#include "io/uring_ring.h"

namespace uwarp::io {
namespace {

using uring::Op;
using Completion = UringCompletion;

class UringBackend final : public IoBackend {
 public:
  // `ring` was made by make_uring_backend on this thread, which becomes the loop thread. The
  // wake-up poll is queued at once (the ring is enabled from the start) and submitted with the
  // first run_once.
  explicit UringBackend(std::unique_ptr<UringRing> ring)
      : wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        ring_(std::move(ring)),
        loop_thread_(std::this_thread::get_id()) {
    arm_wake();
  }

  std::string_view name() const override { return "io_uring"; }

  Status attach(int fd, IoHandler* handler) override {
    table_.attach(fd, handler);
    return Status::ok();
  }

  void detach(int fd) override {
    bool inflight = false;
    const std::uint64_t id = table_.detach(fd, &inflight);
    if (!inflight) return;
    // Reaped already (during another detach), not yet dispatched: done, and dropped.
    bool drained = false;
    std::erase_if(deferred_, [&](const Completion& c) {
      if (uring::id_of(c.user_data) != id || uring::op_of(c.user_data) == Op::kIgnore) return false;
      drained = table_.completed_after_detach(id);
      return true;
    });
    if (drained) return;
    io_uring_sqe* sqe = ring_->next_sqe();
    io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, uring::pack(0, Op::kIgnore));
    // Until the kernel has given back every buffer of the fd's operations. Other completions
    // that arrive meanwhile are kept for the next run_once.
    while (!drained) {
      ring_->submit_and_wait(std::chrono::microseconds(-1));
      ring_->reap([&](const Completion& c) {
        if (uring::id_of(c.user_data) == id && uring::op_of(c.user_data) != Op::kIgnore) {
          drained = table_.completed_after_detach(id);
        } else {
          deferred_.push_back(c);
        }
      });
    }
  }

  void recv(int fd, ByteSpan into) override {
    start(fd, Op::kRecv, [&](State& s) {
      s.recv_buf = into;
      ++s.receiving;
    });
  }
  long try_recv(int fd, ByteSpan into) override {
    // The loop thread running that receive's report may go on receiving.
    if (table_.receiving(fd, on_loop_thread() ? reporting_ : 0)) return -EBUSY;
    return recv_some(fd, into);
  }
  long try_recv(int fd, std::span<const iovec> into) override {
    if (table_.receiving(fd, on_loop_thread() ? reporting_ : 0)) return -EBUSY;
    return recv_some(fd, into);
  }
  void send(int fd, std::span<const iovec> iov) override {
    start(fd, Op::kSend, [&](State& s) {
      s.msg = msghdr{};
      s.msg.msg_iov = const_cast<iovec*>(iov.data());
      s.msg.msg_iovlen = std::min<std::size_t>(iov.size(), IOV_MAX);
    });
  }
  void accept(int fd) override {
    start(fd, Op::kAccept, [](State&) {});
  }
  void connect_wait(int fd) override {
    start(fd, Op::kConnect, [](State&) {});
  }
  void watch_writable(int fd) override {
    start(fd, Op::kWritable, [](State&) {});
  }
  void watch_readable(int fd, bool maybe_readable, ByteSpan into) override {
    if (maybe_readable) {
      if (table_.start_immediate(fd) && !on_loop_thread()) wake();
      return;
    }
    if (table_.start_watch(fd, into) && !on_loop_thread()) wake();
  }

  void shutdown() override {
    io_uring_sqe* sqe = ring_->next_sqe();
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, uring::pack(0, Op::kShutdown));
    // The cancellation completes once every request it matched has ended (sockets' requests
    // are cancelled at once); bounded all the same.
    bool done = false;
    for (int round = 0; !done && round < 100; ++round) {
      ring_->submit_and_wait(std::chrono::milliseconds(10));
      ring_->reap([&](const Completion& c) { done |= uring::op_of(c.user_data) == Op::kShutdown; });
    }
    table_.clear();
    paused_accepts_.clear();
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
  }

  std::size_t run_once(std::chrono::microseconds timeout) override {
    timeout = resume_accepts(timeout);
    table_.take_started(requests_batch_, immediate_batch_);
    for (const uring::Request& r : requests_batch_) submit(r);
    requests_batch_.clear();
    if (!immediate_batch_.empty() || !deferred_.empty()) timeout = std::chrono::microseconds(0);
    ring_->submit_and_wait(timeout);

    // Member vectors, so that a wake-up allocates nothing once they have grown. A callback may
    // detach, which adds to deferred_, not to completions_.
    completions_.swap(deferred_);
    ring_->reap([&](const Completion& c) { completions_.push_back(c); });
    std::size_t handled = 0;
    for (const Completion& c : completions_) handled += dispatch(c) ? 1 : 0;
    completions_.clear();
    for (std::uint64_t id : immediate_batch_) {
      IoHandler* h = table_.handler_of(id);
      if (h == nullptr) continue;
      h->on_readable(std::nullopt);
      ++handled;
    }
    immediate_batch_.clear();
    return handled;
  }

 private:
  using State = uring::Attachments::State;

  bool on_loop_thread() const { return std::this_thread::get_id() == loop_thread_; }

  void arm_wake() {
    io_uring_sqe* sqe = ring_->next_sqe();
    io_uring_prep_poll_multishot(sqe, wake_fd_.get(), POLLIN);
    io_uring_sqe_set_data64(sqe, uring::pack(0, Op::kWake));
  }

  template <typename F>
  void start(int fd, Op op, F&& set) {
    if (table_.start(fd, op, std::forward<F>(set)) && !on_loop_thread()) wake();
  }

  // Loop thread: one started request into the ring.
  void submit(const uring::Request& r) {
    uring::Operands o;
    if (!table_.submitting(r, o)) return;
    io_uring_sqe* sqe = ring_->next_sqe();
    switch (r.op) {
      case Op::kRecv:
        io_uring_prep_recv(sqe, r.fd, o.recv_buf.data(), o.recv_buf.size(), 0);
        break;
      case Op::kWatch:
        if (o.watch_buf.empty()) {
          io_uring_prep_poll_add(sqe, r.fd, POLLIN | POLLRDHUP);
        } else {
          io_uring_prep_recv(sqe, r.fd, o.watch_buf.data(), o.watch_buf.size(), 0);
        }
        break;
      case Op::kSend:
        annotate_socket_send();
        io_uring_prep_sendmsg(sqe, r.fd, o.msg, MSG_NOSIGNAL);
        break;
      case Op::kAccept:
        o.peer->length = sizeof o.peer->storage;
        io_uring_prep_accept(sqe, r.fd, reinterpret_cast<sockaddr*>(&o.peer->storage),
                             &o.peer->length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        break;
      case Op::kConnect:
      case Op::kWritable:
        io_uring_prep_poll_add(sqe, r.fd, POLLOUT);
        break;
      case Op::kWake:
      case Op::kIgnore:
      case Op::kShutdown:
        break;
    }
    io_uring_sqe_set_data64(sqe, uring::pack(r.id, r.op));
  }

  // Loop thread: runs the callback of one completion. False if it belonged to nothing attached.
  bool dispatch(const Completion& c) {
    const Op op = uring::op_of(c.user_data);
    if (op == Op::kWake) {
      std::uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_.get(), &v, sizeof v);
      if (!(c.flags & IORING_CQE_F_MORE)) arm_wake();
      return false;
    }
    if (op == Op::kIgnore || op == Op::kShutdown) return false;
    const std::uint64_t id = uring::id_of(c.user_data);
    uring::Target t;
    if (!table_.claim(id, op, c.res, t)) return false;
    if ((op == Op::kRecv || op == Op::kWatch) && c.res > 0) annotate_socket_receive();
    switch (op) {
      case Op::kRecv:
        report_receive(id, [&] { t.handler->on_recv(c.res); });
        break;
      case Op::kWatch:
        if (t.watch_received) {
          report_receive(id, [&] { t.handler->on_readable(c.res); });
        } else {
          t.handler->on_readable(std::nullopt);
        }
        break;
      case Op::kSend:
        t.handler->on_send(c.res);
        break;
      case Op::kConnect:
        t.handler->on_connect(socket_error(t.fd));
        break;
      case Op::kWritable:
        t.handler->on_writable();
        break;
      case Op::kAccept:
        report_accept(id, t, c.res);
        break;
      case Op::kWake:
      case Op::kIgnore:
      case Op::kShutdown:
        break;
    }
    return true;
  }

  // Loop thread: runs the callback that reports a receive of the backend's own. Until it has
  // returned, try_recv from other threads says -EBUSY (the handler has not yet taken the bytes).
  template <typename F>
  void report_receive(std::uint64_t id, F&& callback) {
    reporting_ = id;
    callback();
    reporting_ = 0;
    table_.reported(id);
  }

  void report_accept(std::uint64_t id, const uring::Target& t, int res) {
    std::chrono::milliseconds pause{0};
    const SocketAddress peer = table_.accepted(id, t.fd, res, &pause);
    if (pause.count() > 0) {
      paused_accepts_.push_back({std::chrono::steady_clock::now() + pause, uring::Request{t.fd, id, Op::kAccept}});
    }
    if (res < 0) {
      const Errc code = accept_out_of_resources(-res) ? Errc::kNoResources : Errc::kIoError;
      t.handler->on_accept(error(code, std::string("accept: ") + std::strerror(-res)), peer);
      return;
    }
    Fd conn(res);
    if (Status s = configure_stream(conn.get()); !s) {
      t.handler->on_accept(Unexpected{s}, peer);
      return;
    }
    t.handler->on_accept(std::move(conn), peer);
  }

  // Loop thread: submits the paused accepts whose deadline has come (one detached meanwhile is
  // dropped by submit); returns `timeout` shortened to the first deadline still ahead.
  std::chrono::microseconds resume_accepts(std::chrono::microseconds timeout) {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(paused_accepts_, [&](const PausedAccept& p) {
      if (p.until > now) {
        timeout = wait_at_most_until(timeout, p.until);
        return false;
      }
      submit(p.request);
      return true;
    });
    return timeout;
  }

  Fd wake_fd_;
  std::unique_ptr<UringRing> ring_;
  const std::thread::id loop_thread_;  // the thread that made the ring: its only submitter
  uring::Attachments table_;
  // Loop thread only.
  std::vector<uring::Request> requests_batch_;
  std::vector<std::uint64_t> immediate_batch_;
  std::vector<Completion> deferred_;     // reaped during detach; dispatched next
  std::vector<Completion> completions_;  // being dispatched
  std::uint64_t reporting_ = 0;          // the attachment whose receive is being reported
  struct PausedAccept {
    std::chrono::steady_clock::time_point until;
    uring::Request request;
  };
  std::vector<PausedAccept> paused_accepts_;  // accepts out of resources, until their deadline
};

}  // namespace

std::unique_ptr<IoBackend> make_uring_backend() {
  std::unique_ptr<UringRing> ring = UringRing::create();
  if (!ring) return nullptr;
  return std::make_unique<UringBackend>(std::move(ring));
}

}  // namespace uwarp::io
