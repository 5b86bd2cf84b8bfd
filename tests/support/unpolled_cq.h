// Test support: waiting for completions without polling the CQ, for tests of what happens while
// the application polls nothing (a poll would receive for the CQ's QPs, and send what the polling
// thread left queued: docs/threading.md, "Busy polling" and "Doorbell batching").
#pragma once

#include <chrono>
#include <cstddef>
#include <thread>

#include "verbs/completion_queue.h"

namespace uwarp::testing {

// Waits until `cq` holds at least `n` completions, looking only at its fill level, up to
// `timeout`; returns whether it does.
inline bool wait_filled_unpolled(const verbs::CompletionQueue& cq, std::size_t n,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (cq.size() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return cq.size() >= n;
}

}  // namespace uwarp::testing
