// Posted receive buffers, for a QP's own receive queue and for a shared receive queue (SRQ).
// Thread: thread-safe (one mutex): the application posts, the progress thread takes.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/slot_ring.h"
#include "uwarp/status.h"
#include "uwarp/types.h"

namespace uwarp::verbs {

class ProtectionDomain;

struct RecvEntry {
  std::uint64_t wr_id = 0;
  std::vector<Sge> sges;
  void recycle() { sges.clear(); }  // SlotRing: the vector's storage is kept for the next entry
};

class ReceiveQueue {
 public:
  ReceiveQueue(const ProtectionDomain* pd, std::uint32_t max_wr, std::uint32_t max_sge)
      : pd_(pd), max_wr_(max_wr), max_sge_(max_sge) {}

  // After a successful post, on the posting thread and with no lock held, runs the wakes
  // registered with wake_on_post.
  Status post(const RecvWr& wr);
  // A QP that takes from this queue (an SRQ) waits for a receive (verbs/receive_wait.h): `wake`
  // runs once, after the next successful post. A second call with the same key (the QP)
  // replaces the first, so a queue holds at most one wake per QP. `wake` must not block and
  // must tolerate running after its QP is gone (it holds no reference the queue keeps alive).
  void wake_on_post(const void* key, std::function<void()> wake);
  // Moves the oldest entry into `out` (false if there is none). The vectors' storage is
  // exchanged, not allocated: a receive queue in steady use allocates nothing per entry.
  bool take(RecvEntry& out);
  std::vector<RecvEntry> drain();
  std::size_t size() const;
  const ProtectionDomain* pd() const { return pd_; }
  std::uint32_t max_wr() const { return max_wr_; }
  std::uint32_t max_sge() const { return max_sge_; }
  // SRQ limit (ibv_modify_srq): once armed with a nonzero limit, take() reports (via the
  // return of limit_reached()) when fewer than `limit` entries remain; then the limit disarms.
  void arm_limit(std::uint32_t limit);
  bool consume_limit_event();
  // The armed limit; 0 when none is armed (or once it fired).
  std::uint32_t limit() const {
    MutexLock lock(mu_);
    return limit_;
  }

 private:
  const ProtectionDomain* pd_;
  const std::uint32_t max_wr_;
  const std::uint32_t max_sge_;
  mutable Mutex mu_;
  SlotRing<RecvEntry> entries_ GUARDED_BY(mu_);
  std::uint32_t limit_ GUARDED_BY(mu_) = 0;
  bool limit_fired_ GUARDED_BY(mu_) = false;
  std::vector<std::pair<const void*, std::function<void()>>> wakes_ GUARDED_BY(mu_);
};

}  // namespace uwarp::verbs
