// The clock of one receiver-not-ready wait (verbs/receive_wait.h): when it began, whether its
// limit has passed, and when the stream is to look at it next (at the limit, and every
// kLookEvery before it, to notice a peer that closed meanwhile: runtime::Stream).
//
// Owner: the Stream. Thread: the stream's mutex.
#pragma once

#include <algorithm>
#include <chrono>

#include "runtime/engine.h"
#include "verbs/receive_wait.h"

namespace uwarp::runtime {

class WaitClock {
 public:
  static constexpr std::chrono::milliseconds kLookEvery{100};

  void begin(Clock::time_point now, std::chrono::milliseconds limit) {
    began_ = now;
    limit_ = limit;
  }
  bool limit_passed(Clock::time_point now) const {
    return limit_ != verbs::ReceiveWait::kForever && now - began_ >= limit_;
  }
  Clock::time_point next_look(Clock::time_point now) const {
    const Clock::time_point soon = now + kLookEvery;
    if (limit_ == verbs::ReceiveWait::kForever) return soon;
    return std::min(soon, began_ + limit_);
  }

 private:
  Clock::time_point began_{};
  std::chrono::milliseconds limit_{0};
};

}  // namespace uwarp::runtime
