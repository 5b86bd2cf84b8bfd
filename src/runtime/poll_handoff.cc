#include "runtime/poll_handoff.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/steady_ns.h"

namespace uwarp::runtime {

std::chrono::microseconds PollHandoff::handoff() {
  static const std::chrono::microseconds value = [] {
    const char* v = std::getenv("UWARP_POLL_HANDOFF_US");
    return v != nullptr ? std::chrono::microseconds(std::strtol(v, nullptr, 10)) : kHandoff;
  }();
  return value;
}

void PollHandoff::polled(bool claim, Clock::time_point at) {
  if (!claim) return;
  const std::int64_t now = steady_ns(at);
  const std::int64_t prev = last_poll_ns_.exchange(now, std::memory_order_relaxed);
  if (now - prev < std::chrono::nanoseconds(kSpinGap).count()) {
    claimed_at_ns_.store(now, std::memory_order_relaxed);
  }
}

void PollHandoff::busy_until(Clock::time_point start, Clock::time_point end) {
  std::int64_t held = claimed_at_ns_.load(std::memory_order_relaxed);
  const std::int64_t at = steady_ns(end);
  if (held == 0 || steady_ns(start) - held >= std::chrono::nanoseconds(handoff()).count()) return;
  last_poll_ns_.store(at, std::memory_order_relaxed);
  // A claim that release() ended meanwhile stays ended.
  claimed_at_ns_.compare_exchange_strong(held, at, std::memory_order_relaxed);
}

void PollHandoff::release() {
  claimed_at_ns_.store(0, std::memory_order_relaxed);
  last_poll_ns_.store(0, std::memory_order_relaxed);
}

bool PollHandoff::spinning() const {
  const std::int64_t last_poll = last_poll_ns_.load(std::memory_order_relaxed);
  return steady_ns(Clock::now()) - last_poll < std::chrono::nanoseconds(kSpinGap).count();
}

bool PollHandoff::claimed(Clock::time_point now) const {
  const std::int64_t at = claimed_at_ns_.load(std::memory_order_relaxed);
  return at != 0 && steady_ns(now) - at < std::chrono::nanoseconds(handoff()).count();
}

bool PollHandoff::leave_to_poller(Clock::time_point now, std::uint64_t taken) {
  const bool taking = taken != taken_seen_;
  taken_seen_ = taken;
  if (claimed(now)) return true;
  std::int64_t held = claimed_at_ns_.load(std::memory_order_relaxed);
  const std::int64_t t = steady_ns(now);
  const std::int64_t last_poll = last_poll_ns_.load(std::memory_order_relaxed);
  const std::int64_t recheck = std::chrono::nanoseconds(kRecheck).count();
  const std::int64_t handoff_ns = std::chrono::nanoseconds(handoff()).count();
  if (!taking || held == 0 || t - held >= handoff_ns + kRunOnWithin * recheck ||
      last_poll == 0 || t - last_poll >= recheck) {
    return false;
  }
  // A claim that release() ended meanwhile stays ended.
  return claimed_at_ns_.compare_exchange_strong(held, t, std::memory_order_relaxed);
}

Clock::time_point PollHandoff::next_check(int checks_so_far) const {
  // Each check is a wake-up that takes the core from a poller for a moment.
  const std::int64_t at = claimed_at_ns_.load(std::memory_order_relaxed);
  const auto lapse = Clock::time_point(std::chrono::nanoseconds(at)) + handoff();
  return checks_so_far == 0 ? lapse : std::max(lapse, Clock::now() + kRecheck);
}

void PollSourceRegistration::add(const verbs::QpConfig& config,
                                 const std::shared_ptr<verbs::CqPollSource>& source) {
  cqs_[0] = config.send_cq;
  cqs_[1] = config.recv_cq != cqs_[0] ? config.recv_cq : nullptr;
  for (verbs::CompletionQueue* cq : cqs_) {
    if (cq != nullptr) cq->add_source(source);
  }
  verbs::process_poll_sources().add(source);
}

void PollSourceRegistration::remove(verbs::CqPollSource* source) {
  for (verbs::CompletionQueue*& cq : cqs_) {
    if (cq != nullptr) cq->remove_source(source);
    cq = nullptr;
  }
  verbs::process_poll_sources().remove(source);
}

std::uint64_t PollSourceRegistration::completions_taken() const {
  std::uint64_t taken = 0;
  for (const verbs::CompletionQueue* cq : cqs_) {
    if (cq != nullptr) taken += cq->left_total();
  }
  return taken;
}

}  // namespace uwarp::runtime
