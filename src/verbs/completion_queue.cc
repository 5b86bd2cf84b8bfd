#include "verbs/completion_queue.h"

#include <algorithm>

namespace uwarp::verbs {

std::size_t CompletionQueue::poll(std::span<WorkCompletion> out) {
  if (out.empty() || count_.load(std::memory_order_acquire) == 0) return 0;
  MutexLock lock(mu_);
  const std::size_t n = std::min(out.size(), queue_.size());
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = queue_.front();
    queue_.pop_front();
  }
  count_.store(queue_.size(), std::memory_order_release);
  left_total_.fetch_add(n, std::memory_order_release);
  return n;
}

void CompletionQueue::arm(bool solicited_only) {
  {
    MutexLock lock(mu_);
    // Arming never downgrades "next" to "solicited" (InfiniBand C11-31 and C11-32, as rxe does).
    if (!solicited_only) {
      arm_ = Arm::kNext;
    } else if (arm_ == Arm::kNone) {
      arm_ = Arm::kSolicited;
    }
    armed_.store(true, std::memory_order_relaxed);
  }
  // The application is about to sleep: receiving goes back to the progress thread now.
  sources_.armed();
}

bool CompletionQueue::drive_sources(PollTime now) {
  const bool claim = !armed_.load(std::memory_order_relaxed);
  const PollSources::Driven own = sources_.drive(claim, now);
  if (own.progress) return true;
  // This CQ's streams are idle: the thread may be waiting for data that arrives on another QP.
  return process_poll_sources().drive(claim, now, &own).progress;
}

std::size_t CompletionQueue::purge(std::uint32_t qp_num) {
  MutexLock lock(mu_);
  const std::size_t before = queue_.size();
  for (std::size_t i = 0; i < before; ++i) {
    const WorkCompletion wc = queue_.front();
    queue_.pop_front();
    if (wc.qp_num != qp_num) queue_.push_back() = wc;
  }
  count_.store(queue_.size(), std::memory_order_release);
  left_total_.fetch_add(before - queue_.size(), std::memory_order_release);
  return before - queue_.size();
}

bool CompletionQueue::push(const WorkCompletion& wc, bool solicited) {
  MutexLock lock(mu_);
  if (queue_.size() >= capacity_) {
    overflowed_.store(true, std::memory_order_release);
    return false;
  }
  queue_.push_back() = wc;
  count_.store(queue_.size(), std::memory_order_release);
  pushed_total_.fetch_add(1, std::memory_order_release);
  const bool error = wc.status != WcStatus::kSuccess;
  if (arm_ == Arm::kNext || (arm_ == Arm::kSolicited && (solicited || error))) {
    arm_ = Arm::kNone;
    armed_.store(false, std::memory_order_relaxed);
    // Under mu_: a poll that returns this completion runs after the event is on the channel,
    // so an application that drains its channel after polling never finds the event of a
    // completion it already took arriving later (it would be taken for the next one's).
    if (events_ != nullptr) events_->cq_event(*this);
  }
  return true;
}

}  // namespace uwarp::verbs
