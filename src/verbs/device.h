// The software RNIC's device-wide state: limits, the STag table and its slots (windows, fast
// regions), its queue pairs, object
// numbering, and the sink for asynchronous events. Thread: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "stats/export.h"
#include "uwarp/types.h"
#include "verbs/qp_registry.h"
#include "verbs/stag_slot.h"
#include "verbs/stag_table.h"

namespace uwarp::verbs {

class AsyncEventSink {
 public:
  virtual ~AsyncEventSink() = default;
  virtual void async_event(const AsyncEvent& event) = 0;
};

class Device {
 public:
  const DeviceLimits& limits() const { return limits_; }
  StagTable& stags() { return stags_; }
  StagSlotRegistry& slots() { return slots_; }
  QpRegistry& qps() { return qps_; }
  // Its record in the process's statistics file (`uwarp stat`).
  stats::DeviceStats& stats() { return stats_; }
  std::uint32_t allocate_qp_num() { return next_qp_num_.fetch_add(1, std::memory_order_relaxed); }
  std::uint32_t allocate_pd_handle() { return next_pd_.fetch_add(1, std::memory_order_relaxed); }
  void set_async_sink(AsyncEventSink* sink) { async_sink_.store(sink, std::memory_order_release); }
  void report(const AsyncEvent& event) {
    if (auto* sink = async_sink_.load(std::memory_order_acquire)) sink->async_event(event);
  }

 private:
  DeviceLimits limits_;
  StagTable stags_;
  StagSlotRegistry slots_;
  QpRegistry qps_;
  stats::DeviceStats stats_;
  std::atomic<std::uint32_t> next_qp_num_{1};
  std::atomic<std::uint32_t> next_pd_{1};
  std::atomic<AsyncEventSink*> async_sink_{nullptr};
};

}  // namespace uwarp::verbs
