// One deadline of an object that lives on the engine thread: at most one engine timer at a time,
// which calls back into its owner only while the owner is alive.
//
// Owner and lifetime: the timer is a member of its owner, an object managed by std::shared_ptr;
// arm() takes a weak reference to that owner, so an expiry after the owner's last reference is
// gone does nothing. The destructor cancels. The engine outlives the timer.
// Thread: arm(), cancel(), armed() and the callback run on the engine thread (the destructor may
// run on any thread: Engine::cancel_timer is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "runtime/engine.h"

namespace uwarp::runtime {

class EngineTimer {
 public:
  explicit EngineTimer(Engine& engine) : engine_(engine) {}
  ~EngineTimer() { cancel(); }
  EngineTimer(const EngineTimer&) = delete;
  EngineTimer& operator=(const EngineTimer&) = delete;

  // Calls `expired(owner)` at `deadline` unless cancelled or re-armed first; replaces a timer
  // already armed. The timer is no longer armed when `expired` runs, which may arm it again.
  template <typename Owner, typename Expired>
  void arm(Clock::time_point deadline, std::weak_ptr<Owner> owner, Expired expired) {
    cancel();
    id_ = engine_.add_timer(deadline, [this, owner = std::move(owner), expired = std::move(expired)] {
      std::shared_ptr<Owner> self = owner.lock();
      if (!self) return;
      id_ = 0;
      expired(*self);
    });
  }
  void cancel() {
    if (id_ != 0) engine_.cancel_timer(id_);
    id_ = 0;
  }
  bool armed() const { return id_ != 0; }

 private:
  Engine& engine_;
  std::uint64_t id_ = 0;  // the engine's timer, 0 if none
};

}  // namespace uwarp::runtime
