#include "runtime/progress_activity.h"

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/steady_ns.h"
#include "verbs/completion_queue.h"

namespace uwarp::runtime {
namespace {

std::atomic<std::int64_t> g_last_busy_ns{0};

bool yielding() {
  static const bool on = [] {
    const char* v = std::getenv("UWARP_POLL_YIELD");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

void note_progress_busy() {
  g_last_busy_ns.store(steady_ns(std::chrono::steady_clock::now()), std::memory_order_relaxed);
}

void yield_to_busy_progress(std::chrono::steady_clock::time_point now) {
  const std::int64_t last = g_last_busy_ns.load(std::memory_order_relaxed);
  if (last == 0 || !yielding()) return;
  // A progress thread that noted itself busy after `now` counts too (the difference is negative).
  if (steady_ns(now) - last < std::chrono::nanoseconds(kBusyWindow).count()) ::sched_yield();
}

bool drive_empty_poll(verbs::CompletionQueue& cq) {
  const verbs::PollTime now = std::chrono::steady_clock::now();  // the poll's one clock reading
  if (cq.drive_sources(now)) return true;
  yield_to_busy_progress(now);
  return false;
}

}  // namespace uwarp::runtime
