// Busy polling (docs/threading.md): an application thread that polls a CQ receives for the QPs
// that complete on it; receiving returns to the progress thread when the application stops
// polling or arms the CQ; teardown while other threads poll is safe (run under TSan too).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "api/impl.h"
#include "support/connected_pair.h"
#include "support/unpolled_cq.h"

namespace uwarp::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Holds each of the context's progress threads inside a task until release() (or
// destruction), so that only application threads can receive meanwhile.
class ProgressThreadBlocker {
 public:
  explicit ProgressThreadBlocker(Context& ctx) {
    auto released = released_.get_future().share();
    runtime::EnginePool& engines = detail::Access::impl(ctx)->engines;
    for (std::size_t i = 0; i < engines.size(); ++i) {
      std::promise<void> entered;
      engines.at(i).post([&entered, released] {
        entered.set_value();
        released.wait();
      });
      entered.get_future().wait();
    }
  }
  ~ProgressThreadBlocker() { release(); }
  void release() {
    if (!done_) released_.set_value();
    done_ = true;
  }

 private:
  std::promise<void> released_;
  bool done_ = false;
};

// Polls `cq` until `pred` holds or the time is up; returns whether it held.
template <typename Pred>
bool poll_until(CompletionQueue& cq, Pred pred, std::vector<WorkCompletion>* got = nullptr,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = Clock::now() + timeout;
  WorkCompletion wc[8];
  while (Clock::now() < deadline) {
    const std::size_t n = cq.poll(wc);
    if (got != nullptr) got->insert(got->end(), wc, wc + n);
    if (pred()) return true;
    std::this_thread::yield();
  }
  return pred();
}

TEST(BusyPoll, CqPollReceivesSendsAndWritesWhileTheProgressThreadCannot) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  if (detail::Access::impl(p.context())->engines.control().backend().name() == "io_uring") {
    // io_uring: the engine's armed watch receives the first bytes itself, and they wait for
    // the progress thread (docs/threading.md, "Busy polling"). CI runs this test with
    // UWARP_IO=epoll too.
    GTEST_SKIP() << "the io_uring backend receives with its watch: see docs/threading.md";
  }
  Side& cl = *p.client;
  Side& sv = *p.server;
  const auto data = pattern(3000, 7);  // large enough for direct placement of the Write
  std::copy(data.begin(), data.end(), cl.buf.begin());

  ProgressThreadBlocker blocker(p.context());
  // Send: transmitted inline by this thread, received by the server's CQ poll.
  Sge rsge = sv.mr.sge(0, 64);
  ASSERT_TRUE(sv.qp.post_recv({11, {&rsge, 1}}));
  Sge ssge = cl.mr.sge(0, 64);
  SendWr send;
  send.wr_id = 1;
  send.opcode = WrOpcode::kSend;
  send.sg_list = {&ssge, 1};
  ASSERT_TRUE(cl.qp.post_send(send));
  std::vector<WorkCompletion> got;
  ASSERT_TRUE(poll_until(sv.cq, [&] { return !got.empty(); }, &got));
  EXPECT_EQ(got[0].wr_id, 11u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(got[0].byte_len, 64u);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 64, sv.buf.begin()));

  // RDMA Write: no completion at the target; polling its CQ places the bytes.
  Sge wsge = cl.mr.sge(0, static_cast<std::uint32_t>(data.size()));
  SendWr write;
  write.wr_id = 2;
  write.opcode = WrOpcode::kRdmaWrite;
  write.sg_list = {&wsge, 1};
  write.remote_addr = reinterpret_cast<std::uintptr_t>(sv.buf.data()) + 4096;
  write.rkey = sv.mr.rkey();
  ASSERT_TRUE(cl.qp.post_send(write));
  const auto placed = [&] {
    return std::equal(data.begin(), data.end(), sv.buf.begin() + 4096);
  };
  EXPECT_TRUE(poll_until(sv.cq, placed));

  // RDMA Read: the responder's Read Response is produced by whoever receives the Request (here
  // the server's polling thread), and the initiator's poll receives the response.
  std::fill(cl.buf.begin(), cl.buf.begin() + 8192, 0);
  Sge dsge = cl.mr.sge(0, static_cast<std::uint32_t>(data.size()));
  SendWr read;
  read.wr_id = 3;
  read.opcode = WrOpcode::kRdmaRead;
  read.sg_list = {&dsge, 1};
  read.remote_addr = reinterpret_cast<std::uintptr_t>(sv.buf.data()) + 4096;
  read.rkey = sv.mr.rkey();
  read.flags = send_flags::kSignaled;
  ASSERT_TRUE(cl.qp.post_send(read));
  std::vector<WorkCompletion> cgot;
  const auto read_done = [&] {
    for (const auto& wc : cgot) {
      if (wc.wr_id == 3) return true;
    }
    return false;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  WorkCompletion wc[8];
  while (!read_done() && Clock::now() < deadline) {
    (void)sv.cq.poll(wc);  // the responder's application polls too
    const std::size_t n = cl.cq.poll(wc);
    cgot.insert(cgot.end(), wc, wc + n);
  }
  ASSERT_TRUE(read_done());
  for (const auto& c : cgot) EXPECT_EQ(c.status, WcStatus::kSuccess) << c.wr_id;
  EXPECT_TRUE(std::equal(data.begin(), data.end(), cl.buf.begin()));
  blocker.release();
}

// A thread that polls a CQ with no QPs of its own (a passive target polling its control
// connection) receives for the process's other QPs, here placing a Write.
TEST(BusyPoll, APollOfAnotherCqReceivesForTheProcesssQps) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  if (detail::Access::impl(p.context())->engines.control().backend().name() == "io_uring") {
    GTEST_SKIP() << "the io_uring backend receives with its watch: see docs/threading.md";
  }
  CompletionQueue other = p.context().create_cq(16).value();
  Side& cl = *p.client;
  Side& sv = *p.server;
  const auto data = pattern(3000, 9);
  std::copy(data.begin(), data.end(), cl.buf.begin());
  ProgressThreadBlocker blocker(p.context());
  Sge wsge = cl.mr.sge(0, static_cast<std::uint32_t>(data.size()));
  ASSERT_TRUE(cl.qp.post_send(remote_wr(WrOpcode::kRdmaWrite, wsge, sv, 0, 1)));
  EXPECT_TRUE(
      poll_until(other, [&] { return std::equal(data.begin(), data.end(), sv.buf.begin()); }));
  blocker.release();
}

// A Write larger than the socket takes at once: the posting thread sends what fits, and the
// rest goes out as the application polls (Stream::poll_rx sends what waited for send space),
// not only once the progress thread hears that the socket is writable.
TEST(BusyPoll, PollingSendsWhatTheSocketCouldNotTakeAtOnce) {
  ConnectedPair::Options o;
  o.buffer_size = 32 << 20;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  if (detail::Access::impl(p.context())->engines.control().backend().name() == "io_uring") {
    GTEST_SKIP() << "the io_uring backend receives with its watch: see docs/threading.md";
  }
  Side& cl = *p.client;
  Side& sv = *p.server;
  const auto data = pattern(o.buffer_size, 10);
  std::copy(data.begin(), data.end(), cl.buf.begin());
  ProgressThreadBlocker blocker(p.context());
  Sge wsge = cl.mr.sge(0, static_cast<std::uint32_t>(data.size()));
  SendWr write = remote_wr(WrOpcode::kRdmaWrite, wsge, sv, 0, 2);
  write.flags = send_flags::kSignaled;
  ASSERT_TRUE(cl.qp.post_send(write));
  // One thread polls the client's CQ: it sends the client's rest and (through the process's
  // other streams) receives for the server.
  std::vector<WorkCompletion> got;
  ASSERT_TRUE(poll_until(
      cl.cq, [&] { return !got.empty(); }, &got, std::chrono::seconds(20)));
  EXPECT_EQ(got[0].wr_id, 2u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(
      poll_until(cl.cq, [&] { return std::equal(data.begin(), data.end(), sv.buf.begin()); }));
  blocker.release();
}

// An application that spun on its CQ and then stops polling for good (it goes on to wait on
// memory, as ib_write_lat does): what arrives right after is still received, by the progress
// thread. The test looks at the CQ's fill level without polling (a poll would receive).
TEST(BusyPoll, BytesArriveAfterTheApplicationStopsPolling) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  verbs::CompletionQueue& server_cq = detail::Access::impl(sv.cq)->cq;
  for (std::uint32_t round = 0; round < 20; ++round) {
    Sge r = sv.mr.sge(0, 64);
    ASSERT_TRUE(sv.qp.post_recv({round, {&r, 1}}));
    // Spin on the server's CQ for a while (a claim on its stream), then stop and send at once.
    WorkCompletion wc[4];
    const auto until = Clock::now() + std::chrono::milliseconds(2);
    while (Clock::now() < until) ASSERT_EQ(sv.cq.poll(wc), 0u);
    Sge s = cl.mr.sge(0, 64);
    SendWr send;
    send.wr_id = round;
    send.opcode = WrOpcode::kSend;
    send.sg_list = {&s, 1};
    send.flags = send_flags::kSignaled;
    ASSERT_TRUE(cl.qp.post_send(send));
    wait_filled_unpolled(server_cq, 1);
    ASSERT_EQ(server_cq.size(), 1u) << "round " << round;
    ASSERT_EQ(sv.cq.poll(wc), 1u);
    EXPECT_EQ(wc[0].wr_id, round);
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
    ASSERT_TRUE(wait_wc(cl.cq));  // the client's own Send completion
  }
}

// An application that spun on its CQ arms it and blocks on the completion channel: the progress
// thread receives at once and the event comes.
TEST(BusyPoll, ArmingTheCqHandsReceivingBackToTheProgressThread) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  // A server-side QP whose CQ has a channel, connected to a new client QP.
  EventedConnection c(p);
  ASSERT_TRUE(c.accept());
  std::uint8_t payload[16] = {1, 2, 3};
  for (std::uint64_t i = 0; i < 20; ++i) {
    Sge r{reinterpret_cast<std::uintptr_t>(c.buf.data()), 64, c.mr.lkey()};
    ASSERT_TRUE(c.sqp.post_recv({i, {&r, 1}}));
    WorkCompletion wc[4];
    const auto until = Clock::now() + std::chrono::milliseconds(1);
    while (Clock::now() < until) ASSERT_EQ(c.cq.poll(wc), 0u);  // claim the stream
    ASSERT_TRUE(c.cq.req_notify(false));
    ASSERT_EQ(c.cq.poll(wc), 0u);  // the usual poll after arming
    Sge s{reinterpret_cast<std::uintptr_t>(payload), sizeof payload, 0};
    SendWr send;
    send.wr_id = i;
    send.opcode = WrOpcode::kSend;
    send.sg_list = {&s, 1};
    send.flags = send_flags::kInline | send_flags::kSignaled;
    ASSERT_TRUE(c.cqp.post_send(send));
    auto ev = c.ch.get_event(10000);
    ASSERT_TRUE(ev) << "no completion event, round " << i;
    EXPECT_EQ(*ev, &c.tag);
    ASSERT_EQ(c.cq.poll(wc), 1u);
    EXPECT_EQ(wc[0].wr_id, i);
    EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
    ASSERT_TRUE(wait_wc(c.ccq));
  }
}

// Threads keep polling both CQs (and so receive on the streams) while the connection and the
// QPs are torn down under them, in several orders: no use after free, no lost completion
// order assumptions, no hang.
TEST(BusyPoll, TeardownWhileOtherThreadsPoll) {
  for (int round = 0; round < 6; ++round) {
    ConnectedPair p;
    ASSERT_TRUE(p.connected);
    CompletionQueue ccq = p.client->cq;
    CompletionQueue scq = p.server->cq;
    std::atomic<bool> stop{false};
    auto poller = [&stop](CompletionQueue cq) {
      WorkCompletion wc[16];
      while (!stop.load(std::memory_order_relaxed)) (void)cq.poll(wc);
    };
    // The application owns the memory: it stays valid until its QPs are gone.
    std::vector<std::uint8_t> client_buf = std::move(p.client->buf);
    std::vector<std::uint8_t> server_buf = std::move(p.server->buf);
    std::thread t1(poller, ccq);
    std::thread t2(poller, scq);
    std::thread t3(poller, scq);
    // Some traffic in flight while the teardown starts.
    Sge s = p.client->mr.sge(0, 4096);
    for (int i = 0; i < 8; ++i) {
      SendWr write;
      write.wr_id = static_cast<std::uint64_t>(i);
      write.opcode = WrOpcode::kRdmaWrite;
      write.sg_list = {&s, 1};
      write.remote_addr = reinterpret_cast<std::uintptr_t>(server_buf.data());
      write.rkey = p.server->mr.rkey();
      (void)p.client->qp.post_send(write);
    }
    switch (round % 3) {
      case 0:  // orderly disconnect, then the QPs go
        p.client->conn.disconnect();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        p.client.reset();
        p.server.reset();
        break;
      case 1:  // the server's QP goes first, the peer sees the stream end
        p.server.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        p.client.reset();
        break;
      default:  // both at once from two threads
      {
        std::thread a([&] { p.client.reset(); });
        p.server.reset();
        a.join();
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    t1.join();
    t2.join();
    t3.join();
  }
}

}  // namespace
}  // namespace uwarp::testing
