// The progress engines of one context (docs/threading.md, "Progress threads"). The first, the
// control engine, runs the connection manager: listeners, MPA exchanges, connection events.
// Each connection's stream (its data path) runs on the engine that carries the fewest streams
// when the connection is established, so that a context with many QPs is not bound to one
// thread on a machine with many cores.
//
// Threads: any. The engines live as long as the pool; the pool is destroyed after every object
// that uses its engines (it is the context's last member).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/engine.h"

namespace uwarp::runtime {

class EnginePool {
 public:
  // UWARP_PROGRESS_THREADS from the environment (1 to kMaxEngines), else one engine for every
  // kCoresPerEngine online CPUs, at least one.
  static std::size_t default_count();
  static constexpr std::size_t kMaxEngines = 64;
  static constexpr std::size_t kCoresPerEngine = 4;

  explicit EnginePool(std::size_t count = default_count());
  // Lets cross-engine work settle, then stops the stream engines before the control engine.
  ~EnginePool();
  EnginePool(const EnginePool&) = delete;
  EnginePool& operator=(const EnginePool&) = delete;

  Engine& control() { return *engines_.front(); }
  // The engine for a new stream: the one with the fewest streams, ties taken in turn.
  Engine& for_stream();
  bool on_any_engine_thread() const;
  std::size_t size() const { return engines_.size(); }
  Engine& at(std::size_t i) { return *engines_.at(i); }

 private:
  std::atomic<std::size_t> budget_streams_{0};  // the context's streams (Engine::share_budget)
  std::vector<std::unique_ptr<Engine>> engines_;
  std::atomic<std::size_t> next_{0};
};

}  // namespace uwarp::runtime
