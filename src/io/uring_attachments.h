// UringAttachments: the io_uring backend's table of attached fds, the operations started for
// them, and what each operation needs while the kernel performs it. Shared by every thread that
// starts operations and by the loop thread that submits and completes them, under one mutex.
//
// Each attach gets a new id; a completion carries the id and the operation (user_data: pack),
// so that one that arrives after detach (or for a reused fd number) is recognised and dropped.
// An attachment's state lives until its last operation in flight has completed, because the
// kernel may write into its buffers until then.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/bytes.h"
#include "base/mutex.h"
#include "io/accept_backoff.h"
#include "io/backend.h"
#include "io/socket.h"

namespace uwarp::io::uring {

enum class Op : std::uint8_t {
  kWake,
  kIgnore,
  kShutdown,
  kRecv,
  kSend,
  kAccept,
  kConnect,
  kWatch,
  kWritable
};

inline std::uint64_t pack(std::uint64_t id, Op op) {
  return id << 8 | static_cast<std::uint64_t>(op);
}
inline Op op_of(std::uint64_t user_data) { return static_cast<Op>(user_data & 0xff); }
inline std::uint64_t id_of(std::uint64_t user_data) { return user_data >> 8; }

// An operation started and not yet submitted.
struct Request {
  int fd;
  std::uint64_t id;
  Op op;
};

// What a submitted operation reads and writes: stable until it completes (the table's nodes do
// not move).
struct Operands {
  ByteSpan recv_buf;
  ByteSpan watch_buf;
  msghdr* msg = nullptr;
  SocketAddress* peer = nullptr;
};

// What a completion is for, once claimed.
struct Target {
  int fd = -1;
  IoHandler* handler = nullptr;
  bool watch_received = false;  // a watch that received into its buffer
};

class Attachments {
 public:
  void attach(int fd, IoHandler* handler);
  // Detaches fd and drops its operations not yet submitted. Returns its id, or 0 if it was not
  // attached; *inflight: whether operations of it are still in the kernel.
  std::uint64_t detach(int fd, bool* inflight);
  // An operation of detached attachment `id` has completed; true once none is left in flight
  // (its state is then gone).
  bool completed_after_detach(std::uint64_t id);

  // Any thread: starts an operation; `set` stores its operands in the fd's state. False if fd
  // is not attached.
  template <typename F>
  bool start(int fd, Op op, F&& set) {
    MutexLock lock(mu_);
    auto it = ids_.find(fd);
    if (it == ids_.end()) return false;
    set(states_[it->second]);
    requests_.push_back(Request{fd, it->second, op});
    return true;
  }
  // Any thread: starts a readiness watch (receiving into `into` if not empty). False if fd is
  // not attached, or if a watch of it is armed already: that one reports (one watch at a time,
  // io::IoBackend::watch_readable; a second one's receive would race the first's).
  bool start_watch(int fd, ByteSpan into);
  // Any thread: a watch that is to fire at once. False if fd is not attached.
  bool start_immediate(int fd);
  // Loop thread: swaps what was started since the last call into the (empty) vectors given.
  void take_started(std::vector<Request>& requests, std::vector<std::uint64_t>& immediate);

  // Loop thread: `r` goes into the ring; false if its fd has been detached meanwhile.
  bool submitting(const Request& r, Operands& out);
  // Loop thread: a completion of `id` arrived; false if it is to be dropped (the fd was
  // detached or attached again, or the operation gave up waiting and was started again).
  bool claim(std::uint64_t id, Op op, int res, Target& t);
  // A receive of the backend's own for `id` has been reported to its handler.
  void reported(std::uint64_t id);
  // A receive of the backend's own is in flight or being reported for fd, and `reporting` (the
  // attachment whose report the calling thread is running, or 0) is not fd's.
  bool receiving(int fd, std::uint64_t reporting);
  // The handler of an attachment that has not been detached, else nullptr.
  IoHandler* handler_of(std::uint64_t id);
  // An accept completed for `id` with `res`: the peer address it wrote. The accept is armed
  // again at once, unless it failed for want of resources (io/accept_backoff.h): then *pause is
  // how long the loop thread waits before it submits Request{fd, id, kAccept} again (else 0).
  SocketAddress accepted(std::uint64_t id, int fd, int res, std::chrono::milliseconds* pause);
  void clear();

  // What a started operation needs (set by start's callback).
  struct State {
    int fd = -1;
    IoHandler* handler = nullptr;
    int inflight = 0;  // operations submitted and not yet completed
    // Receives of the backend's own (recv, watches with a buffer) started and not yet reported.
    int receiving = 0;
    ByteSpan recv_buf;
    ByteSpan watch_buf;
    bool watch_armed = false;  // a watch was started and has not been reported
    msghdr msg{};
    SocketAddress peer;
    AcceptBackoff accept_backoff;
  };

 private:
  // mu_ held: `id` is the fd's current attachment (not detached, not attached again since).
  bool attached_locked(int fd, std::uint64_t id) const REQUIRES(mu_);

  Mutex mu_;
  std::unordered_map<int, std::uint64_t> ids_ GUARDED_BY(mu_);  // attached fd -> its id
  // By id, until its last completion.
  std::unordered_map<std::uint64_t, State> states_ GUARDED_BY(mu_);
  std::uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::vector<Request> requests_ GUARDED_BY(mu_);         // started, not yet submitted
  std::vector<std::uint64_t> immediate_ GUARDED_BY(mu_);  // watches that fire at once
};

}  // namespace uwarp::io::uring
