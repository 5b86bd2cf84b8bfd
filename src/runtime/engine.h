// The progress engine: one library thread that runs the I/O backend, so that data is placed,
// Read Requests are answered and completions are produced while the application is busy
// elsewhere or spins on memory (docs/threading.md). It also runs posted tasks and timers.
//
// Threads: post(), add_timer() and stop() may be called from any thread; tasks, timers and I/O
// callbacks run on the engine thread. The thread blocks all signals. It also makes and destroys
// the I/O backend (io/backend.h: the loop thread owns it from creation to teardown), so that
// nothing the kernel ties to a ring's threads ever lands on an application thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <semaphore>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "io/backend.h"

namespace uwarp::runtime {

using Clock = std::chrono::steady_clock;

class Engine {
 public:
  // spin: after activity, how long the progress thread keeps polling before it sleeps in the
  // kernel (0: sleep at once). A spinning thread answers the next packet without a wake-up.
  explicit Engine(std::chrono::microseconds spin = default_spin());
  // UWARP_SPIN_US from the environment, else 0.
  static std::chrono::microseconds default_spin();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  io::IoBackend& backend() { return *backend_; }
  bool on_engine_thread() const { return std::this_thread::get_id() == thread_id_; }

  void post(std::function<void()> task);
  // Runs `task` on the engine thread and waits for it (runs it at once if already there).
  void run_sync(const std::function<void()>& task);
  // Calls `fn` on the engine thread at `deadline` unless cancelled first. Returns its id.
  std::uint64_t add_timer(Clock::time_point deadline, std::function<void()> fn);
  void cancel_timer(std::uint64_t id);
  // Keeps `object` alive until the engine thread has finished what it is doing.
  void retire(std::shared_ptr<void> object);

  // The streams of the engine's context share its send budget (send_budget.h), whichever of the
  // context's engines carries them (runtime/engine_pool.h: the pool names the shared count with
  // share_budget; alone, the engine counts its own). Any thread; a stream counts itself once
  // from its start until it lets go of its QP.
  void stream_started() {
    streams_.fetch_add(1, std::memory_order_relaxed);
    if (budget_streams_ != &streams_) budget_streams_->fetch_add(1, std::memory_order_relaxed);
  }
  void stream_ended() {
    streams_.fetch_sub(1, std::memory_order_relaxed);
    if (budget_streams_ != &streams_) budget_streams_->fetch_sub(1, std::memory_order_relaxed);
  }
  // The streams this engine carries.
  std::size_t streams() const { return streams_.load(std::memory_order_relaxed); }
  // Before the first stream starts: `count` (which outlives the engine) counts the streams
  // that share the budget.
  void share_budget(std::atomic<std::size_t>* count) { budget_streams_ = count; }
  // Each stream's share now: its socket's TCP_NOTSENT_LOWAT, 0 for the kernel's default.
  std::size_t notsent_lowat() const;
  // UWARP_SEND_BUDGET (bytes) from the environment, else kSendBudget.
  static std::size_t default_send_budget();

 private:
  void run();
  std::chrono::microseconds next_timeout();
  void run_timers();

  std::unique_ptr<io::IoBackend> backend_;  // made and destroyed on the engine thread
  // Released by the destructor once its last wake() has returned: only then may the engine
  // thread destroy the backend.
  std::binary_semaphore last_wake_done_{0};
  Mutex mu_;
  std::vector<std::function<void()>> tasks_ GUARDED_BY(mu_);
  std::multimap<Clock::time_point, std::uint64_t> timer_order_ GUARDED_BY(mu_);
  std::map<std::uint64_t, std::pair<Clock::time_point, std::function<void()>>> timers_
      GUARDED_BY(mu_);
  std::uint64_t next_timer_ GUARDED_BY(mu_) = 1;
  std::atomic<bool> stop_{false};
  const std::chrono::microseconds spin_;
  const std::size_t send_budget_ = default_send_budget();
  std::atomic<std::size_t> streams_{0};
  std::atomic<std::size_t>* budget_streams_ = &streams_;
  std::thread::id thread_id_;
  std::thread thread_;
};

}  // namespace uwarp::runtime
