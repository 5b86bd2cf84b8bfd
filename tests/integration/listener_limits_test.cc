// A listener's bounds (cm::Listener): accept errors are retried after a growing pause instead of
// at once, and at most max_pending connections wait for their MPA exchange or the application;
// the ones beyond are closed at once. Each test runs with both I/O backends.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "integration/raw_peer.h"
#include "support/fd_exhaustion.h"
#include "support/per_backend.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

constexpr int kEventTimeoutMs = 5000;

// Polls `done` every millisecond until it holds or `bound` has passed.
bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds bound) {
  const auto until = steady_clock::now() + bound;
  for (int i = 0; i < 100000; ++i) {
    if (done()) return true;
    if (steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

// The thread id of this process's progress thread (there is one Context), or -1.
pid_t progress_thread() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "uwarp-progress") found = std::atoi(e->d_name);
  }
  ::closedir(d);
  return found;
}

// The CPU time thread `tid` of this process has used: its thread CPU clock, made as glibc's
// pthread_getcpuclockid makes it (no descriptor needed, so it works while none is free).
std::chrono::nanoseconds thread_cpu(pid_t tid) {
  const auto clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return std::chrono::nanoseconds::max();
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

class ListenerLimits : public PerBackend {};

// Out of file descriptors, an accept fails at once and the connection stays queued. The
// listener pauses before each retry (1 ms, doubling to 100 ms), so its progress thread does not
// spin: over 300 ms it tries about ten times and uses almost no CPU. Once descriptors are free
// again the connection is accepted within the longest pause and works.
TEST_P(ListenerLimits, AcceptErrorsArePacedNotSpun) {
  if (kSanitizerNeedsDescriptors) GTEST_SKIP() << kSanitizerSkip;
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  auto listener = ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener) << listener.error().to_string();
  const pid_t progress = progress_thread();
  ASSERT_GT(progress, 0);
  const sockaddr_in addr = loopback(listener->port());
  RawPeer client(
      ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));  // before the descriptors run out
  ASSERT_TRUE(client.valid());

  constexpr auto kWindow = 300ms;
  std::uint64_t attempts = 0;
  std::chrono::nanoseconds cpu{};
  {
    FdExhaustion full;
    ASSERT_TRUE(full.ok());
    // The kernel completes the handshake; uwarp has no descriptor to accept it into.
    ASSERT_EQ(::connect(client.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_TRUE(wait_for([&] { return listener->stats().accept_errors > 0; }, 2000ms));
    const std::uint64_t errors_before = listener->stats().accept_errors;
    const std::chrono::nanoseconds cpu_before = thread_cpu(progress);
    std::this_thread::sleep_for(kWindow);
    attempts = listener->stats().accept_errors - errors_before;
    cpu = thread_cpu(progress) - cpu_before;
  }
  std::printf(
      "%s: %llu accept attempts and %lld us of progress-thread CPU in %lld ms out of descriptors\n",
      GetParam().c_str(), static_cast<unsigned long long>(attempts),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(cpu).count()),
      static_cast<long long>(kWindow.count()));
  EXPECT_LT(attempts, 100u);
  EXPECT_LT(cpu, 100ms);

  ASSERT_TRUE(wait_for([&] { return listener->stats().pending == 1; }, 2000ms))
      << "the connection was not accepted once descriptors were free";
  ASSERT_TRUE(client.send_mpa_request({}));
  auto req = ch.get_event(kEventTimeoutMs);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
}

struct Qp {
  explicit Qp(Context& ctx)
      : pd(ctx.alloc_pd().value()),
        cq(ctx.create_cq(16).value()),
        qp(pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value()) {}
  ProtectionDomain pd;
  CompletionQueue cq;
  QueuePair qp;
};

// With max_pending connections waiting (here silent ones that never send an MPA request), each
// further connection is closed as soon as it is accepted, a uwarp client's connect included,
// and counted. A pending connection that closes, or whose request times out, makes room: a
// uwarp connect then succeeds.
TEST_P(ListenerLimits, ConnectionsBeyondMaxPendingAreClosedAtOnce) {
  constexpr std::uint32_t kMax = 4;
  Context ctx = Context::open().value();
  EventChannel server = EventChannel::create(ctx).value();
  EventChannel client = EventChannel::create(ctx).value();
  auto listener =
      server.listen("127.0.0.1", 0, ListenParams{.max_pending = kMax, .request_timeout_ms = 2000});
  ASSERT_TRUE(listener) << listener.error().to_string();
  const std::uint16_t port = listener->port();

  std::vector<RawPeer> silent;
  for (std::uint32_t i = 0; i < kMax; ++i) {
    silent.push_back(RawPeer::connect_to("127.0.0.1", port));
    ASSERT_TRUE(silent.back().valid());
  }
  ASSERT_TRUE(wait_for([&] { return listener->stats().pending == kMax; }, 2000ms));
  constexpr int kBeyond = 3;
  for (int i = 0; i < kBeyond; ++i) {
    RawPeer extra = RawPeer::connect_to("127.0.0.1", port);
    ASSERT_TRUE(extra.valid());
    // Closed as dropped, not by the request timeout: the counts below tell which (a loaded
    // machine may take a while to get there).
    EXPECT_TRUE(extra.wait_closed(kEventTimeoutMs)) << "connection " << kMax + i + 1 << " was kept";
  }
  Qp refused(ctx);
  ASSERT_TRUE(client.connect("127.0.0.1", port, refused.qp));
  auto ev = client.get_event(kEventTimeoutMs);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, CmEventType::kConnectError) << to_string(ev->type);
  ListenerStats st = listener->stats();
  EXPECT_EQ(st.dropped, kBeyond + 1u);
  EXPECT_EQ(st.pending, kMax);
  EXPECT_EQ(st.timed_out, 0u);

  // One silent peer leaves: its place is free, and a uwarp client gets through.
  silent.back().close();
  silent.pop_back();
  ASSERT_TRUE(wait_for([&] { return listener->stats().pending == kMax - 1; }, 2000ms));
  Qp c(ctx), s(ctx);
  ASSERT_TRUE(client.connect("127.0.0.1", port, c.qp));
  auto req = server.get_event(kEventTimeoutMs);
  ASSERT_TRUE(req);
  ASSERT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
  ASSERT_TRUE(req->connection.accept(s.qp, {}));
  auto est = client.get_event(kEventTimeoutMs);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, CmEventType::kEstablished) << to_string(est->type);

  // The others never send a request: uwarp closes them when it times out.
  for (RawPeer& p : silent)
    EXPECT_TRUE(p.wait_closed(kEventTimeoutMs)) << "a silent connection was kept";
  // The counts follow on the progress thread, after the peers saw their sockets close.
  EXPECT_TRUE(wait_for([&] { return listener->stats().pending == 0; }, 2000ms));
  st = listener->stats();
  EXPECT_EQ(st.timed_out, kMax - 1);
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.dropped, kBeyond + 1u);
  EXPECT_EQ(st.accept_errors, 0u);
  // Every connection is counted once: the silent ones, those beyond (the refused uwarp connect
  // among them), and the one accepted; the silent one that left closed before its request.
  EXPECT_EQ(st.accepted, kMax + kBeyond + 2u);
  EXPECT_EQ(st.requests, 1u);
  EXPECT_EQ(st.accepted - st.dropped - st.timed_out - st.requests, 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ListenerLimits, ::testing::Values("epoll", "uring"),
                         backend_name);

}  // namespace
}  // namespace uwarp::testing
