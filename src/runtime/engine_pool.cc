#include "runtime/engine_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace uwarp::runtime {

std::size_t EnginePool::default_count() {
  if (const char* v = std::getenv("UWARP_PROGRESS_THREADS")) {
    const long n = std::strtol(v, nullptr, 10);
    if (n >= 1) return std::min<std::size_t>(static_cast<std::size_t>(n), kMaxEngines);
  }
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const std::size_t per = cpus > 0 ? static_cast<std::size_t>(cpus) / kCoresPerEngine : 0;
  return std::clamp<std::size_t>(per, 1, kMaxEngines);
}

EnginePool::EnginePool(std::size_t count) {
  count = std::clamp<std::size_t>(count, 1, kMaxEngines);
  engines_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    engines_.push_back(std::make_unique<Engine>());
    if (count > 1) engines_.back()->share_budget(&budget_streams_);
  }
}

EnginePool::~EnginePool() {
  // A stream engine tells the control engine of a stream's end, and the control engine asks a
  // stream engine to end a stream: two rounds through every engine let such posts run while
  // both ends still exist. Then the stream engines stop (their last tasks may still post to the
  // control engine), and the control engine last.
  if (engines_.size() > 1) {
    for (int round = 0; round < 2; ++round) {
      for (auto& e : engines_) e->run_sync([] {});
    }
  }
  while (!engines_.empty()) engines_.pop_back();
}

Engine& EnginePool::for_stream() {
  const std::size_t n = engines_.size();
  if (n == 1) return *engines_.front();
  const std::size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  Engine* best = engines_[start].get();
  for (std::size_t i = 1; i < n; ++i) {
    Engine* e = engines_[(start + i) % n].get();
    if (e->streams() < best->streams()) best = e;
  }
  return *best;
}

bool EnginePool::on_any_engine_thread() const {
  return std::any_of(engines_.begin(), engines_.end(),
                     [](const auto& e) { return e->on_engine_thread(); });
}

}  // namespace uwarp::runtime
