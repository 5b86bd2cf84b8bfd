#include "runtime/engine.h"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <future>

#include "runtime/progress_activity.h"
#include "runtime/send_budget.h"

namespace uwarp::runtime {

std::chrono::microseconds Engine::default_spin() {
  const char* v = std::getenv("UWARP_SPIN_US");
  return std::chrono::microseconds(v != nullptr ? std::strtol(v, nullptr, 10) : 0);
}

std::size_t Engine::default_send_budget() {
  const char* v = std::getenv("UWARP_SEND_BUDGET");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : kSendBudget;
}

std::size_t Engine::notsent_lowat() const {
  return runtime::notsent_lowat(send_budget_, budget_streams_->load(std::memory_order_relaxed));
}

Engine::Engine(std::chrono::microseconds spin) : spin_(spin) {
  std::promise<void> started;
  thread_ = std::thread([this, &started] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    pthread_setname_np(pthread_self(), "uwarp-progress");
    thread_id_ = std::this_thread::get_id();
    backend_ = io::make_backend();
    started.set_value();
    run();
    last_wake_done_.acquire();
    backend_.reset();
  });
  started.get_future().wait();
}

Engine::~Engine() {
  stop_.store(true, std::memory_order_release);
  backend_->wake();
  last_wake_done_.release();
  thread_.join();
}

void Engine::post(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(task));
  }
  backend_->wake();
}

void Engine::run_sync(const std::function<void()>& task) {
  if (on_engine_thread()) {
    task();
    return;
  }
  std::promise<void> done;
  post([&] {
    task();
    done.set_value();
  });
  done.get_future().wait();
}

std::uint64_t Engine::add_timer(Clock::time_point deadline, std::function<void()> fn) {
  std::uint64_t id;
  {
    MutexLock lock(mu_);
    id = next_timer_++;
    timers_.emplace(id, std::make_pair(deadline, std::move(fn)));
    timer_order_.emplace(deadline, id);
  }
  backend_->wake();
  return id;
}

void Engine::cancel_timer(std::uint64_t id) {
  MutexLock lock(mu_);
  timers_.erase(id);  // its timer_order_ entry is skipped when it comes up
}

void Engine::retire(std::shared_ptr<void> object) {
  post([o = std::move(object)]() mutable { o.reset(); });
}

std::chrono::microseconds Engine::next_timeout() {
  constexpr std::chrono::microseconds kIdle = std::chrono::milliseconds(100);
  MutexLock lock(mu_);
  if (!tasks_.empty()) return std::chrono::microseconds(0);
  if (timer_order_.empty()) return kIdle;
  const auto now = Clock::now();
  const auto first = timer_order_.begin()->first;
  if (first <= now) return std::chrono::microseconds(0);
  // Rounded up: a timer never runs early.
  return std::min(std::chrono::ceil<std::chrono::microseconds>(first - now), kIdle);
}

void Engine::run_timers() {
  const auto now = Clock::now();
  while (true) {
    std::function<void()> fn;
    {
      MutexLock lock(mu_);
      if (timer_order_.empty() || timer_order_.begin()->first > now) return;
      const std::uint64_t id = timer_order_.begin()->second;
      timer_order_.erase(timer_order_.begin());
      auto it = timers_.find(id);
      if (it == timers_.end()) continue;
      fn = std::move(it->second.second);
      timers_.erase(it);
    }
    fn();
  }
}

void Engine::run() {
  auto last_busy = Clock::now() - spin_;
  while (!stop_.load(std::memory_order_acquire)) {
    // Spin (poll without sleeping) for a while after the last activity.
    const bool spinning = spin_.count() > 0 && Clock::now() - last_busy < spin_;
    const auto timeout = spinning ? std::chrono::microseconds(0) : next_timeout();
    if (backend_->run_once(timeout) > 0) {
      last_busy = Clock::now();
      note_progress_busy();
    }
    std::vector<std::function<void()>> tasks;
    {
      MutexLock lock(mu_);
      tasks.swap(tasks_);
    }
    for (auto& t : tasks) t();
    run_timers();
  }
  // Drain what was posted before stop, so that retired objects are released on this thread.
  std::vector<std::function<void()>> tasks;
  {
    MutexLock lock(mu_);
    tasks.swap(tasks_);
  }
  for (auto& t : tasks) t();
  backend_->shutdown();
}

}  // namespace uwarp::runtime
