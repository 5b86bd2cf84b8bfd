#include "runtime/doorbell_batching.h"

#include <cstdlib>
#include <cstring>

namespace uwarp::runtime {

bool DoorbellBatching::enabled_by_environment() {
  static const bool on = [] {
    const char* v = std::getenv("UWARP_DOORBELL_BATCHING");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

DoorbellBatching::Ring DoorbellBatching::ring(Clock::time_point now) {
  const bool in_burst = now - last_doorbell_ < kBurstGap;
  last_doorbell_ = now;
  if (!enabled_ || !in_burst || now < backoff_until_ || deferred_ + 1 >= kMaxDeferred) {
    return Ring::kSend;
  }
  if (deferred_++ != 0) return Ring::kDefer;
  first_deferred_ = now;
  return Ring::kDeferAndArm;
}

bool DoorbellBatching::deadline_passed(Clock::time_point now) {
  if (deferred_ == 0 || now < deadline()) return false;
  backoff_until_ = now + kBackoff;
  return true;
}

}  // namespace uwarp::runtime
