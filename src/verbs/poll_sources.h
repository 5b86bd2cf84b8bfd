// PollSources: a set of CqPollSources (the streams an application thread may receive for while
// it polls a CQ: docs/threading.md, "Busy polling"), driven round robin a few at a time.
//
// Each CompletionQueue has one, holding the streams of the QPs that complete on it, and the
// process has one (process_poll_sources()), holding every stream: a poll that found its CQ
// empty and its own streams idle drives the process's next few, so that a thread spinning on one
// CQ also receives for the QPs whose data it waits for elsewhere (a passive target polling its
// control connection) instead of only taking the core their progress thread needs.
//
// Threads: any. mu_ is a leaf lock (taken with stream and QP locks held by add/remove, never held
// while calling a source); the set holds weak references, so a source being torn down is simply
// skipped.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace uwarp::verbs {

class CqPollSource;

// When an empty poll happened: read once per poll and handed to every source it drives and to
// the yield check (runtime/progress_activity.h). Under a paravirtual clock a read is a large part
// of an empty poll's cost.
using PollTime = std::chrono::steady_clock::time_point;

class PollSources {
 public:
  static constexpr std::size_t kDrivePerCall = 4;

  // A source is added at most once (adding it again is ignored) and removed before it stops
  // being usable.
  void add(const std::shared_ptr<CqPollSource>& source);
  void remove(const CqPollSource* source);
  // What one drive() called, and whether any of them made progress.
  struct Driven {
    std::array<const CqPollSource*, kDrivePerCall> sources{};
    std::size_t count = 0;
    bool progress = false;
  };
  // Drives up to kDrivePerCall sources on the calling thread (round robin across calls),
  // leaving out those `skip` drove already in this poll. Cheap (one atomic load) when empty. The
  // caller holds no locks. now: when the poll began (PollTime).
  Driven drive(bool claim, PollTime now, const Driven* skip = nullptr);
  // Tells every source its CQ was armed (CqPollSource::cq_armed).
  void armed();
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }

 private:
  Mutex mu_;  // leaf
  std::vector<std::pair<const CqPollSource*, std::weak_ptr<CqPollSource>>> sources_ GUARDED_BY(mu_);
  std::size_t next_ GUARDED_BY(mu_) = 0;
  std::atomic<std::size_t> count_{0};
};

// Every stream of the process (made on first use, never destroyed).
PollSources& process_poll_sources();

}  // namespace uwarp::verbs
