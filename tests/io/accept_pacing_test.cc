// An I/O backend that runs out of file descriptors while a connection waits to be accepted: it
// tries again after a growing pause (io/accept_backoff.h), not at once, and accepts the
// connection once descriptors are free. Each backend runs in a child process whose descriptor
// limit is lowered (support/fd_exhaustion.h), so that this process keeps its own; the child is
// the loop thread and reports through a pipe.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "io/backend.h"
#include "support/fd_exhaustion.h"
#include "support/per_backend.h"

namespace uwarp::io {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kWindow = 300ms;  // how long the child runs its loop with no descriptor free

struct Outcome {
  bool exhausted = false;   // every descriptor was taken
  int errors = 0;           // accepts that failed during the window
  int out_of_resources = 0; // of which reported as kNoResources
  bool accepted = false;    // the connection was accepted once descriptors were free
};

struct Counter : IoHandler {
  Outcome* out;
  Fd conn;
  explicit Counter(Outcome* o) : out(o) {}
  void on_accept(Result<Fd> c, const SocketAddress&) override {
    if (c) {
      conn = std::move(*c);
      out->accepted = true;
      return;
    }
    ++out->errors;
    if (c.error().code() == Errc::kNoResources) ++out->out_of_resources;
  }
};

// The child's part: a queued connection, no descriptor free for kWindow, then free ones.
Outcome run_child(const std::string& backend_name) {
  Outcome out;
  std::unique_ptr<IoBackend> backend = testing::make_backend(backend_name);
  auto addr = SocketAddress::resolve("127.0.0.1", 0);
  if (!backend || !addr) return out;
  auto listener = tcp_listen(*addr, 4);
  if (!listener) return out;
  // The kernel completes the handshake and queues the connection for accept.
  auto client = tcp_connect_start(local_address(listener->get()));
  if (!client) return out;
  Counter handler(&out);
  if (!backend->attach(listener->get(), &handler)) return out;
  {
    testing::FdExhaustion full;
    out.exhausted = full.ok();
    backend->accept(listener->get());
    const auto end = Clock::now() + kWindow;
    while (Clock::now() < end) backend->run_once(std::chrono::microseconds(10000));
  }
  const int errors = out.errors;
  for (const auto end = Clock::now() + 2s; !out.accepted && Clock::now() < end;) {
    backend->run_once(std::chrono::microseconds(10000));
  }
  out.errors = errors;
  backend->detach(listener->get());
  backend->shutdown();
  return out;
}

class AcceptPacing : public ::testing::TestWithParam<std::string> {};

TEST_P(AcceptPacing, OutOfDescriptorsIsRetriedAfterAPauseAndRecovers) {
  if (testing::kSanitizerNeedsDescriptors) GTEST_SKIP() << testing::kSanitizerSkip;
  if (GetParam() == "uring" && !make_uring_backend()) GTEST_SKIP() << "io_uring is refused on this machine";
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    const Outcome out = run_child(GetParam());
    const bool written = ::write(pipe_fds[1], &out, sizeof out) == static_cast<ssize_t>(sizeof out);
    ::_exit(written ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  Outcome out;
  const ssize_t n = ::read(pipe_fds[0], &out, sizeof out);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof out)) << "the child reported nothing";
  std::printf("%s: %d accept attempts failed in %lld ms out of descriptors (%d as kNoResources)\n",
              GetParam().c_str(), out.errors, static_cast<long long>(kWindow.count()), out.out_of_resources);
  ASSERT_TRUE(out.exhausted);
  EXPECT_GT(out.errors, 0);
  EXPECT_EQ(out.out_of_resources, out.errors);
  EXPECT_LT(out.errors, 50);  // 1 ms doubling to 100 ms: about 10 in 300 ms
  EXPECT_TRUE(out.accepted) << "the queued connection was not accepted once descriptors were free";
}

INSTANTIATE_TEST_SUITE_P(Backends, AcceptPacing, ::testing::Values("epoll", "uring"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace uwarp::io
