// The IoBackend contract (io/backend.h), checked for each backend on loopback sockets. The test
// thread is the loop thread: it calls run_once until what it waits for has happened (bounded).
#include "io/backend.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/per_backend.h"

namespace uwarp::io {
namespace {

using namespace std::chrono_literals;

struct Recorder : IoHandler {
  std::vector<long> recvs, sends, connects;
  std::vector<std::optional<long>> readable;
  std::vector<Fd> accepted;
  int writable = 0;
  void on_recv(long r) override { recvs.push_back(r); }
  void on_writable() override { ++writable; }
  void on_send(long r) override { sends.push_back(r); }
  void on_readable(std::optional<long> r) override { readable.push_back(r); }
  void on_connect(int e) override { connects.push_back(e); }
  void on_accept(Result<Fd> c, const SocketAddress&) override {
    if (c) accepted.push_back(std::move(*c));
  }
};

long send_text(const Fd& fd, std::string_view text) {
  return send_bytes(fd.get(), ConstByteSpan(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// A socket listening on a free loopback port (invalid if that failed).
Fd listen_loopback() {
  auto addr = SocketAddress::resolve("127.0.0.1", 0);
  if (!addr) return Fd();
  auto listener = tcp_listen(*addr, 4);
  return listener ? std::move(*listener) : Fd();
}

class Backend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = testing::make_backend(GetParam());
    if (!backend_) GTEST_SKIP() << "io_uring is refused on this machine (kernel or policy)";
  }
  // Runs the loop until done() or 5 s.
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      backend_->run_once(std::chrono::microseconds(10000));
    }
    return true;
  }
  // A connected pair of non-blocking TCP sockets on loopback.
  void connect_pair(Fd& a, Fd& b) {
    Fd listener = listen_loopback();
    ASSERT_TRUE(listener.valid());
    auto client = tcp_connect_start(local_address(listener.get()));
    ASSERT_TRUE(client);
    Recorder l;
    ASSERT_TRUE(backend_->attach(listener.get(), &l));
    backend_->accept(listener.get());
    ASSERT_TRUE(run_until([&] { return !l.accepted.empty(); }));
    backend_->detach(listener.get());
    a = std::move(*client);
    b = std::move(l.accepted.front());
  }
  // A connected pair whose end b_ is attached, with r_ as its handler.
  void connect_attached() {
    connect_pair(a_, b_);
    ASSERT_TRUE(backend_->attach(b_.get(), &r_));
  }
  std::unique_ptr<IoBackend> backend_;
  Fd a_, b_;
  Recorder r_;
};

TEST_P(Backend, ConnectAcceptSendAndReceive) {
  Fd listener = listen_loopback();
  ASSERT_TRUE(listener.valid());
  auto client = tcp_connect_start(local_address(listener.get()));
  ASSERT_TRUE(client);
  Recorder l, c, s;
  ASSERT_TRUE(backend_->attach(listener.get(), &l));
  ASSERT_TRUE(backend_->attach(client->get(), &c));
  backend_->accept(listener.get());
  backend_->connect_wait(client->get());
  ASSERT_TRUE(run_until([&] { return !l.accepted.empty() && !c.connects.empty(); }));
  EXPECT_EQ(c.connects[0], 0);
  Fd server = std::move(l.accepted[0]);
  ASSERT_TRUE(backend_->attach(server.get(), &s));

  char in[64] = {};
  backend_->recv(server.get(), ByteSpan(reinterpret_cast<std::uint8_t*>(in), sizeof in));
  static const char kHello[] = "hello, uwarp";
  iovec iov{const_cast<char*>(kHello), sizeof kHello};
  backend_->send(client->get(), std::span<const iovec>(&iov, 1));
  ASSERT_TRUE(run_until([&] { return !c.sends.empty() && !s.recvs.empty(); }));
  EXPECT_EQ(c.sends[0], static_cast<long>(sizeof kHello));
  ASSERT_EQ(s.recvs[0], static_cast<long>(sizeof kHello));
  EXPECT_STREQ(in, kHello);
  backend_->detach(server.get());
  backend_->detach(client->get());
  backend_->detach(listener.get());
}

// A watch without a buffer reports readiness only; the handler receives itself.
TEST_P(Backend, WatchWithoutBufferReportsReadinessOnly) {
  connect_attached();
  if (HasFatalFailure()) return;
  backend_->watch_readable(b_.get());
  backend_->run_once(std::chrono::microseconds(1000));
  if (!r_.readable.empty()) {
    // Allowed ("may be readable": epoll starts optimistic); the handler finds it empty.
    std::uint8_t none = 0;
    EXPECT_EQ(recv_some(b_.get(), ByteSpan(&none, 1)), -EAGAIN);
    r_.readable.clear();
    backend_->watch_readable(b_.get());
    backend_->run_once(std::chrono::microseconds(1000));
    EXPECT_TRUE(r_.readable.empty()) << "fired again with nothing to read";
  }
  ASSERT_EQ(send_text(a_, "x"), 1);
  ASSERT_TRUE(run_until([&] { return !r_.readable.empty(); }));
  EXPECT_FALSE(r_.readable[0].has_value());
  std::uint8_t byte = 0;
  EXPECT_EQ(backend_->try_recv(b_.get(), ByteSpan(&byte, 1)), 1);
  backend_->detach(b_.get());
}

// A watch with a buffer: the report says whether the backend received into it; either way the
// bytes arrive exactly once, in order.
TEST_P(Backend, WatchWithBufferReportsWhatTheBackendReceived) {
  connect_attached();
  if (HasFatalFailure()) return;
  std::uint8_t buf[16] = {};
  backend_->watch_readable(b_.get(), false, ByteSpan(buf, sizeof buf));
  ASSERT_EQ(send_text(a_, "abc"), 3);
  ASSERT_TRUE(run_until([&] { return !r_.readable.empty(); }));
  if (r_.readable[0].has_value()) {
    ASSERT_EQ(*r_.readable[0], 3);
  } else {
    ASSERT_EQ(backend_->try_recv(b_.get(), ByteSpan(buf, sizeof buf)), 3);
  }
  EXPECT_EQ(std::memcmp(buf, "abc", 3), 0);
  backend_->detach(b_.get());
}

// One watch at a time: a second watch started while one is armed adds nothing. The armed one
// reports once, with its own buffer (none here), and the bytes wait for the handler: a second
// receive into the other buffer would race the first watch's report.
TEST_P(Backend, ASecondWatchWhileOneIsArmedAddsNothing) {
  connect_attached();
  if (HasFatalFailure()) return;
  backend_->watch_readable(b_.get());
  backend_->run_once(std::chrono::microseconds(1000));
  if (!r_.readable.empty()) {  // epoll starts optimistic: arm again, now on an empty socket
    r_.readable.clear();
    backend_->watch_readable(b_.get());
    backend_->run_once(std::chrono::microseconds(1000));
    ASSERT_TRUE(r_.readable.empty());
  }
  std::uint8_t buf[16] = {};
  backend_->watch_readable(b_.get(), false, ByteSpan(buf, sizeof buf));
  ASSERT_EQ(send_text(a_, "abc"), 3);
  ASSERT_TRUE(run_until([&] { return !r_.readable.empty(); }));
  for (int i = 0; i < 5; ++i) backend_->run_once(std::chrono::microseconds(2000));
  ASSERT_EQ(r_.readable.size(), 1u) << "both watches reported";
  EXPECT_FALSE(r_.readable[0].has_value()) << "the report took the second watch's buffer";
  std::uint8_t got[16] = {};
  ASSERT_EQ(backend_->try_recv(b_.get(), ByteSpan(got, sizeof got)), 3);
  EXPECT_EQ(std::memcmp(got, "abc", 3), 0);
  backend_->detach(b_.get());
}

// A write watch armed after the handler's own send found the socket full fires only once the
// peer has made room, and then a send goes through; the backend itself sends nothing.
TEST_P(Backend, WriteWatchFiresOnceTheFullSocketHasRoom) {
  connect_attached();
  if (HasFatalFailure()) return;
  std::vector<std::uint8_t> chunk(64 * 1024, 0x42);
  long queued = 0;
  for (int i = 0; i < 10000; ++i) {  // fill b_'s send buffer and a_'s receive buffer
    const long n = send_bytes(b_.get(), chunk);
    if (n == -EAGAIN) break;
    ASSERT_GT(n, 0);
    queued += n;
  }
  ASSERT_EQ(send_bytes(b_.get(), chunk), -EAGAIN) << "the socket never filled";
  backend_->watch_writable(b_.get());
  for (int i = 0; i < 5; ++i) backend_->run_once(std::chrono::microseconds(2000));
  EXPECT_EQ(r_.writable, 0) << "fired while the socket was full";
  long drained = 0;
  std::vector<std::uint8_t> sink(256 * 1024);
  ASSERT_TRUE(run_until([&] {
    const long n = recv_some(a_.get(), sink);
    if (n > 0) drained += n;
    return r_.writable > 0;
  }));
  EXPECT_EQ(r_.writable, 1);
  EXPECT_GT(send_bytes(b_.get(), ConstByteSpan(chunk).first(1024)), 0);
  EXPECT_LE(drained, queued) << "the backend sent bytes of its own";
  backend_->detach(b_.get());
}

// While a watch's own receive may deliver bytes, a receive by another thread must not take them
// out of order: it says -EBUSY until that report has been handled; inside the report the loop
// thread may go on receiving, and afterwards anyone may.
TEST_P(Backend, TryRecvWaitsForTheWatchThatReceives) {
  connect_attached();
  if (HasFatalFailure()) return;
  struct Handler : IoHandler {
    IoBackend* backend = nullptr;
    int fd = -1;
    std::vector<std::optional<long>> reports;
    std::vector<long> inside;  // what the loop thread received itself inside each report
    std::size_t taken = 0;     // bytes received in all
    void on_readable(std::optional<long> r) override {
      reports.push_back(r);
      if (r && *r > 0) taken += static_cast<std::size_t>(*r);
      std::uint8_t more[8];
      inside.push_back(backend->try_recv(fd, ByteSpan(more, sizeof more)));
      if (inside.back() > 0) taken += static_cast<std::size_t>(inside.back());
      // "May be readable" can come early (epoll starts optimistic): watch again.
      if (taken < 4) backend->watch_readable(fd);
    }
  } h;
  h.backend = backend_.get();
  h.fd = b_.get();
  backend_->detach(b_.get());
  ASSERT_TRUE(backend_->attach(b_.get(), &h));
  std::uint8_t buf[2] = {};
  backend_->watch_readable(b_.get(), false, ByteSpan(buf, sizeof buf));
  backend_->run_once(std::chrono::microseconds(0));  // submitted
  const bool receives = backend_->name() == "io_uring";
  long from_other = 0;
  std::thread([&] {
    std::uint8_t none[1];
    from_other = backend_->try_recv(b_.get(), ByteSpan(none, sizeof none));
  }).join();
  EXPECT_EQ(from_other, receives ? -EBUSY : -EAGAIN);
  ASSERT_EQ(send_text(a_, "abcd"), 4);
  ASSERT_TRUE(run_until([&] { return h.taken == 4; }));
  if (receives) {
    ASSERT_TRUE(h.reports[0].has_value());
    EXPECT_EQ(*h.reports[0], 2);
    EXPECT_EQ(h.inside[0], 2);  // "cd": the loop thread in its report is not refused
  } else {
    for (const auto& r : h.reports) EXPECT_FALSE(r.has_value());
    EXPECT_EQ(h.inside.back(), 4);
  }
  std::thread([&] {
    std::uint8_t none[1];
    from_other = backend_->try_recv(b_.get(), ByteSpan(none, sizeof none));
  }).join();
  EXPECT_EQ(from_other, -EAGAIN);
  backend_->detach(b_.get());
}

// The contract's end-of-stream rule: after a short receive the handler watches again without a
// receive that says EAGAIN; the peer's FIN queued behind the bytes must still be reported.
TEST_P(Backend, EndOfStreamBehindAShortReadIsReported) {
  connect_attached();
  if (HasFatalFailure()) return;
  backend_->watch_readable(b_.get());
  ASSERT_EQ(send_text(a_, "abcd"), 4);
  ASSERT_TRUE(run_until([&] { return !r_.readable.empty(); }));
  a_.reset();
  std::this_thread::sleep_for(20ms);  // the FIN is queued behind the bytes
  std::uint8_t buf[64];
  ASSERT_EQ(recv_some(b_.get(), ByteSpan(buf, sizeof buf)), 4);  // short: the socket is "empty"
  backend_->watch_readable(b_.get(), false, ByteSpan(buf, sizeof buf));
  ASSERT_TRUE(run_until([&] { return r_.readable.size() == 2; }));
  if (r_.readable[1].has_value()) {
    EXPECT_EQ(*r_.readable[1], 0);  // the end of the stream
  } else {
    EXPECT_EQ(backend_->try_recv(b_.get(), ByteSpan(buf, sizeof buf)), 0);
  }
  backend_->detach(b_.get());
}

TEST_P(Backend, MaybeReadableFiresAtOnce) {
  connect_attached();
  if (HasFatalFailure()) return;
  backend_->watch_readable(b_.get(), true);
  backend_->run_once(std::chrono::microseconds(0));
  ASSERT_EQ(r_.readable.size(), 1u);
  EXPECT_FALSE(r_.readable[0].has_value());
  backend_->detach(b_.get());
}

// After detach no callback runs, and the receive buffer is the caller's again at once.
TEST_P(Backend, DetachEndsPendingOperations) {
  connect_attached();
  if (HasFatalFailure()) return;
  auto buf = std::make_unique<std::uint8_t[]>(64);
  backend_->recv(b_.get(), ByteSpan(buf.get(), 64));
  backend_->run_once(std::chrono::microseconds(1000));  // submitted, nothing to receive yet
  backend_->detach(b_.get());
  buf.reset();
  ASSERT_EQ(send_text(a_, "late"), 4);
  for (int i = 0; i < 5; ++i) backend_->run_once(std::chrono::microseconds(2000));
  EXPECT_TRUE(r_.recvs.empty());
  // The fd may be attached again (the CM hands a socket to the stream that way).
  Recorder again;
  ASSERT_TRUE(backend_->attach(b_.get(), &again));
  std::uint8_t in[8] = {};
  backend_->recv(b_.get(), ByteSpan(in, sizeof in));
  ASSERT_TRUE(run_until([&] { return !again.recvs.empty(); }));
  EXPECT_EQ(again.recvs[0], 4);
  EXPECT_EQ(std::memcmp(in, "late", 4), 0);
  backend_->detach(b_.get());
}

// shutdown ends what an owner left in flight: io_uring's pending accept would otherwise keep
// the listening socket open after its fd is closed.
TEST_P(Backend, ShutdownEndsWhatIsStillInFlight) {
  Fd listener = listen_loopback();
  ASSERT_TRUE(listener.valid());
  const SocketAddress bound = local_address(listener.get());
  Recorder l;
  ASSERT_TRUE(backend_->attach(listener.get(), &l));
  backend_->accept(listener.get());
  backend_->run_once(std::chrono::microseconds(1000));  // the accept is in flight
  backend_->shutdown();
  listener.reset();
  auto again = tcp_listen(bound, 4);
  EXPECT_TRUE(again) << again.error().to_string();
}

TEST_P(Backend, WakeEndsAWaitFromAnotherThread) {
  backend_->run_once(std::chrono::microseconds(0));  // the loop thread is known from here on
  std::thread waker([&] {
    std::this_thread::sleep_for(50ms);
    backend_->wake();
  });
  const auto start = std::chrono::steady_clock::now();
  backend_->run_once(std::chrono::microseconds(-1));
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
}

INSTANTIATE_TEST_SUITE_P(Backends, Backend, ::testing::Values("epoll", "uring"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace uwarp::io
