#include "verbs/completion_queue.h"

#include <algorithm>

namespace uwarp::verbs {

std::size_t CompletionQueue::poll(std::span<WorkCompletion> out) {
  if (out.empty() || count_.load(std::memory_order_acquire) == 0) return 0;
  std::lock_guard lock(mu_);
  const std::size_t n = std::min(out.size(), queue_.size());
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = queue_.front();
    queue_.pop_front();
  }
  count_.store(queue_.size(), std::memory_order_release);
  return n;
}

void CompletionQueue::arm(bool solicited_only) {
  std::lock_guard lock(mu_);
  // Arming never downgrades "next" to "solicited".
  if (!solicited_only) {
    arm_ = Arm::kNext;
  } else if (arm_ == Arm::kNone) {
    arm_ = Arm::kSolicited;
  }
}

bool CompletionQueue::push(const WorkCompletion& wc, bool solicited) {
  bool fire = false;
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= capacity_) {
      overflowed_.store(true, std::memory_order_release);
      return false;
    }
    queue_.push_back(wc);
    count_.store(queue_.size(), std::memory_order_release);
    const bool error = wc.status != WcStatus::kSuccess;
    if (arm_ == Arm::kNext || (arm_ == Arm::kSolicited && (solicited || error))) {
      arm_ = Arm::kNone;
      fire = true;
    }
  }
  if (fire && events_ != nullptr) events_->cq_event(*this);
  return true;
}

}  // namespace uwarp::verbs
