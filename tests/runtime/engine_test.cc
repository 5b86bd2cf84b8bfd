// runtime::Engine: its thread runs posted tasks and timers, and owns the I/O backend from its
// creation to its teardown, so that making and destroying an engine leaves the application's
// thread alone.
#include "runtime/engine.h"

#include <sys/epoll.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "io/socket.h"

namespace uwarp::runtime {
namespace {

using namespace std::chrono_literals;

TEST(Engine, RunSyncRunsTheTaskOnTheEngineThread) {
  Engine engine;
  EXPECT_FALSE(engine.on_engine_thread());
  std::thread::id ran_on;
  engine.run_sync([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_NE(ran_on, std::this_thread::get_id());
  bool inside = false;
  engine.run_sync([&] { inside = engine.on_engine_thread(); });
  EXPECT_TRUE(inside);
}

TEST(Engine, TimersRunInDeadlineOrderAndCancelledOnesNever) {
  Engine engine;
  std::vector<int> order;
  std::promise<void> last;
  const auto now = Clock::now();
  engine.add_timer(now + 30ms, [&] {
    order.push_back(3);
    last.set_value();
  });
  engine.add_timer(now + 10ms, [&] { order.push_back(1); });
  const std::uint64_t cancelled = engine.add_timer(now + 20ms, [&] { order.push_back(2); });
  engine.cancel_timer(cancelled);
  ASSERT_EQ(last.get_future().wait_for(5s), std::future_status::ready);
  engine.run_sync([] {});  // order is written on the engine thread
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
}

// An application thread that made and destroyed an engine (ibv_open_device and
// ibv_close_device do) must find its next blocking system call undisturbed. With an io_uring
// made on the application thread, the ring's teardown interrupted that thread's epoll_wait
// with EINTR 10-40 ms later (libfabric's fi_eq_sread failed on it).
TEST(Engine, DestroyingItLeavesTheCreatingThreadsSystemCallsAlone) {
  for (int round = 0; round < 2; ++round) {
    { Engine engine; }
    io::Fd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
    ASSERT_TRUE(epoll_fd.valid());
    epoll_event event{};
    const auto start = std::chrono::steady_clock::now();
    const int n = ::epoll_wait(epoll_fd.get(), &event, 1, 250);
    const int err = errno;
    EXPECT_EQ(n, 0) << "epoll_wait: " << std::strerror(err) << " after "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count()
                    << " ms";
  }
}

}  // namespace
}  // namespace uwarp::runtime
