// Receiver not ready (docs/receiver-not-ready.md) between two uwarp QPs over loopback: with a
// receive wait set, Sends and Immediate Data messages that find no posted receive hold the
// server's reception until the application posts one, and arrive whole and in order; a wait
// that runs out ends in the Terminate for no buffer; without a wait the Terminate comes at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "support/connected_pair.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {
namespace {

using std::chrono::milliseconds;

ConnectedPair::Options wait_pair(bool crc) {
  ConnectedPair::Options o;
  o.buffer_size = 8 << 20;
  o.client_params.crc = crc;
  return o;
}

// The client sends `length` bytes at `offset` of its buffer (signaled, wr_id `id`).
void post_send(Side& c, std::size_t offset, std::uint32_t length, std::uint64_t id,
               WrOpcode op = WrOpcode::kSend) {
  Sge s = c.mr.sge(offset, length);
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.sg_list = {&s, 1};
  ASSERT_TRUE(c.qp.post_send(wr));
}

void post_recv(Side& s, std::size_t offset, std::uint32_t length, std::uint64_t id) {
  Sge r = s.mr.sge(offset, length);
  ASSERT_TRUE(s.qp.post_recv({id, {&r, 1}}));
}

// The next `n` send completions of `c`, each a success.
void expect_sends_succeed(Side& c, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    auto sent = wait_wc(c.cq);
    ASSERT_TRUE(sent);
    EXPECT_EQ(sent->status, WcStatus::kSuccess) << to_string(sent->status);
  }
}

// Posts a 64-byte receive `id` at the start of `s`'s buffer and waits for its completion.
void expect_64_byte_receive(Side& s, std::uint64_t id) {
  post_recv(s, 0, 64, id);
  auto got = wait_wc(s.cq);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, WcStatus::kSuccess) << to_string(got->status);
  EXPECT_EQ(got->wr_id, id);
}

class ReceiveWaitTest : public ::testing::TestWithParam<bool> {};

// Messages of every size, from one byte to several times the bounce buffer (placed straight
// into the receive), wait in turn for receives posted one at a time, later.
TEST_P(ReceiveWaitTest, SendsWithoutAReceiveWaitAndArriveWholeInOrder) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  s.qp.set_receive_wait(QueuePair::kWaitForever);
  const std::vector<std::uint32_t> sizes = {1, 100, 4096, 70000, 1 << 20, 3, 200000};
  std::size_t at = 0;
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto data = pattern(sizes[i], static_cast<std::uint32_t>(i + 1));
    std::memcpy(c.buf.data() + at, data.data(), data.size());
    offsets.push_back(at);
    post_send(c, at, sizes[i], i + 1);
    at += sizes[i];
  }
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(s.qp.state(), QpState::kRts) << "the first Send found no receive and did not wait";
  WorkCompletion wc;
  EXPECT_EQ(s.cq.poll({&wc, 1}), 0u);
  std::size_t rat = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    post_recv(s, rat, sizes[i], 100 + i);
    auto got = wait_wc(s.cq);
    ASSERT_TRUE(got) << "message " << i;
    EXPECT_EQ(got->status, WcStatus::kSuccess) << to_string(got->status);
    EXPECT_EQ(got->wr_id, 100 + i);
    EXPECT_EQ(got->byte_len, sizes[i]);
    EXPECT_EQ(std::memcmp(s.buf.data() + rat, c.buf.data() + offsets[i], sizes[i]), 0)
        << "message " << i;
    rat += sizes[i];
    if (i % 2 == 0) std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_NO_FATAL_FAILURE(expect_sends_succeed(c, sizes.size()));
  EXPECT_EQ(c.qp.state(), QpState::kRts);
  EXPECT_EQ(s.qp.state(), QpState::kRts);
}

// Small Sends queued behind a waiting one, then given receives for half of them: the socket
// holds them all, so each receive asks for more (up to the thread's receive buffer,
// StreamReceiver::kThreadBufferSize) and the Send that then finds none leaves a remainder of up
// to that much to hold: it and every Send behind it arrive whole and in order once receives
// are posted.
TEST_P(ReceiveWaitTest, ALargeRemainderWaitsWholeBehindARunOfSmallSends) {
  ConnectedPair::Options o = wait_pair(GetParam());
  o.caps.max_send_wr = 1024;
  o.caps.max_recv_wr = 1024;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  s.qp.set_receive_wait(QueuePair::kWaitForever);
  constexpr std::uint32_t kSize = 1000;  // below the direct-placement size: received in bulk
  constexpr std::size_t kCount = 800;
  constexpr std::size_t kFirst = 400;  // receives posted while the Sends wait
  const auto data = pattern(kSize * kCount, 7);
  std::memcpy(c.buf.data(), data.data(), data.size());
  for (std::size_t i = 0; i < kCount; ++i) post_send(c, i * kSize, kSize, i + 1);
  std::this_thread::sleep_for(milliseconds(200));
  WorkCompletion wc;
  EXPECT_EQ(s.cq.poll({&wc, 1}), 0u);
  for (std::size_t i = 0; i < kFirst; ++i) post_recv(s, i * kSize, kSize, 1000 + i);
  const auto expect_receive = [&](std::size_t i) {
    auto got = wait_wc(s.cq);
    ASSERT_TRUE(got) << "message " << i;
    EXPECT_EQ(got->status, WcStatus::kSuccess) << to_string(got->status);
    EXPECT_EQ(got->wr_id, 1000 + i);
    EXPECT_EQ(got->byte_len, kSize);
  };
  for (std::size_t i = 0; i < kFirst; ++i) expect_receive(i);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(s.cq.poll({&wc, 1}), 0u);
  EXPECT_EQ(s.qp.state(), QpState::kRts) << "the Send that found no receive did not wait";
  for (std::size_t i = kFirst; i < kCount; ++i) post_recv(s, i * kSize, kSize, 1000 + i);
  for (std::size_t i = kFirst; i < kCount; ++i) expect_receive(i);
  EXPECT_EQ(std::memcmp(s.buf.data(), data.data(), data.size()), 0);
  ASSERT_NO_FATAL_FAILURE(expect_sends_succeed(c, kCount));
  EXPECT_EQ(s.qp.state(), QpState::kRts);
}

// A Write behind a waiting Send is not placed before it: the stream is held as a whole. (A
// second Send behind the Write tells the server that the Write has been placed.)
TEST_P(ReceiveWaitTest, AWriteBehindAWaitingSendWaitsWithIt) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  s.qp.set_receive_wait(milliseconds(10000));
  post_send(c, 0, 64, 1);
  c.buf[4096] = 0xAB;
  const Sge w = c.mr.sge(4096, 1);
  ASSERT_TRUE(c.qp.post_send(remote_wr(WrOpcode::kRdmaWrite, w, s, 8192, 2)));
  post_send(c, 0, 64, 3);
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(s.buf[8192], 0) << "the Write overtook the Send that waits";
  for (std::uint64_t id = 7; id <= 8; ++id) ASSERT_NO_FATAL_FAILURE(expect_64_byte_receive(s, id));
  EXPECT_EQ(s.buf[8192], 0xAB);
  ASSERT_NO_FATAL_FAILURE(expect_sends_succeed(c, 3));
}

// A Send right behind a large Write: the Write's payloads are received in place, and the bytes
// after the last one (its trailer, the Send) come in the same receive; the Send waits there,
// holding what follows it (another large Write), until a receive is posted. A Send that waits
// first lets the socket fill, so that the Write's bytes are there to be received back to back.
// The Writes' memory is read only after a later Send's completion (no reading while placing).
TEST_P(ReceiveWaitTest, ASendRightBehindALargeWriteWaitsWithWhatFollows) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  s.qp.set_receive_wait(milliseconds(10000));
  // Its last FPDU is large too (received in place) with FPDUs of 32 or 64 KiB.
  constexpr std::uint32_t kWrite = (1 << 20) + 8192;
  for (std::uint32_t i = 0; i < 2 * kWrite; ++i) {
    c.buf[kWrite + i] = static_cast<std::uint8_t>(i * 7 + 1);
  }
  post_send(c, 0, 64, 1);
  for (std::uint64_t k = 0; k < 2; ++k) {
    const std::size_t at = (k + 1) * kWrite;
    const Sge w = c.mr.sge(at, kWrite);
    ASSERT_TRUE(c.qp.post_send(remote_wr(WrOpcode::kRdmaWrite, w, s, at, 2 + 2 * k)));
    post_send(c, 0, 64, 3 + 2 * k);
  }
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(s.buf[2 * kWrite - 1], 0) << "the first Write overtook the Send that waits";
  for (std::uint64_t id = 11; id <= 13; ++id) {
    ASSERT_NO_FATAL_FAILURE(expect_64_byte_receive(s, id));
    if (id == 11) {
      std::this_thread::sleep_for(milliseconds(150));
      EXPECT_EQ(s.buf[3 * kWrite - 1], 0) << "the second Write overtook the Send that waits";
    } else {
      const std::size_t at = (id - 11) * kWrite;
      EXPECT_EQ(std::memcmp(s.buf.data() + at, c.buf.data() + at, kWrite), 0)
          << "the Write before receive " << id << " is placed";
    }
  }
  ASSERT_NO_FATAL_FAILURE(expect_sends_succeed(c, 5));
}

// An RDMA Write with Immediate takes a receive too: its Immediate Data message waits.
TEST_P(ReceiveWaitTest, ImmediateDataWaitsForAReceive) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  s.qp.set_receive_wait(QueuePair::kWaitForever);
  const Sge w = c.mr.sge(0, 32);
  SendWr wr = remote_wr(WrOpcode::kRdmaWriteWithImm, w, s, 0, 3);
  wr.imm_data = 0x1234ABCD;
  ASSERT_TRUE(c.qp.post_send(wr));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(s.qp.state(), QpState::kRts);
  post_recv(s, 4096, 16, 9);
  auto got = wait_wc(s.cq);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, WcStatus::kSuccess) << to_string(got->status);
  EXPECT_EQ(got->opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(got->imm_data, 0x1234ABCDu);
  EXPECT_EQ(got->byte_len, 32u);
}

// The limit passes with no receive posted: the Terminate for no buffer (DDP / 2 / 0x02), no
// sooner than the limit, and both QPs end in ERROR.
TEST_P(ReceiveWaitTest, AWaitThatRunsOutEndsInTheTerminateForNoBuffer) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Side& c = *p.client;
  Side& s = *p.server;
  s.qp.set_receive_wait(milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  post_send(c, 0, 64, 1);
  auto sent = wait_wc(c.cq);
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->status, WcStatus::kSuccess) << "the Send went to TCP";
  const auto deadline = start + std::chrono::seconds(10);
  while (s.qp.state() != QpState::kError && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(s.qp.state(), QpState::kError);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(300));
  auto ev = p.context().get_async_event(5000);
  ASSERT_TRUE(ev);
  EXPECT_NE(ev->detail.find("Terminate DDP/2/0x02"), std::string::npos) << ev->detail;
}

// The peer disconnects while a message of its waits for a receive (as qperf's rc_bi_bw ends).
// With little queued, its FIN reaches the waiting side's socket; with more, its FIN or its last
// bytes cannot get past the bytes held, and its close deadline ends in a reset. Either way the
// waiting side, which looks at its socket, gets DISCONNECTED within a few seconds. The three
// amounts run side by side, each on a connection of its own: a close deadline takes seconds.
TEST_P(ReceiveWaitTest, APeerThatDisconnectsEndsTheWait) {
  const std::uint32_t queued_mib[] = {1, 3, 8};
  std::vector<std::unique_ptr<ConnectedPair>> pairs;
  for (const std::uint32_t messages : queued_mib) {
    pairs.push_back(std::make_unique<ConnectedPair>(wait_pair(GetParam())));
    ConnectedPair& p = *pairs.back();
    ASSERT_TRUE(p.connected);
    p.server->qp.set_receive_wait(QueuePair::kWaitForever);
    for (std::uint64_t i = 0; i < messages; ++i) post_send(*p.client, 0, 1 << 20, i + 1);
  }
  std::this_thread::sleep_for(milliseconds(200));
  for (const auto& p : pairs) ASSERT_EQ(p->server->qp.state(), QpState::kRts);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& p : pairs) p->client->conn.disconnect();
  for (std::size_t n = 0; n < pairs.size(); ++n) {
    SCOPED_TRACE(::testing::Message() << queued_mib[n] << " MiB queued");
    auto ev = wait_event(pairs[n]->server_events(), CmEventType::kDisconnected, 10000);
    ASSERT_TRUE(ev);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6));
    EXPECT_EQ(pairs[n]->server->qp.state(), QpState::kError);
  }
}

// The application moves the waiting QP to ERROR: the wait ends, the held bytes are dropped and
// the stream reads on to the peer's close.
TEST_P(ReceiveWaitTest, AQpThatFailsWhileWaitingDropsTheHeldBytes) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  p.server->qp.set_receive_wait(QueuePair::kWaitForever);
  post_send(*p.client, 0, 4096, 1);
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(p.server->qp.modify_state(QpState::kError));
  auto sent = wait_wc(p.client->cq);
  ASSERT_TRUE(sent);
  p.client->conn.disconnect();
  auto ev = wait_event(p.server_events(), CmEventType::kDisconnected, 10000);
  ASSERT_TRUE(ev);
  WorkCompletion wc;
  EXPECT_EQ(p.server->cq.poll({&wc, 1}), 0u) << "a receive completed after the QP failed";
}

// Without a wait (the default) nothing changes: the Terminate comes at once.
TEST_P(ReceiveWaitTest, WithoutAWaitTheTerminateComesAtOnce) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  post_send(*p.client, 0, 64, 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (p.server->qp.state() != QpState::kError && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(p.server->qp.state(), QpState::kError);
}

// QPs that take their receives from one SRQ wait as well: each post to the SRQ wakes the
// waiting QPs, the one that gets the receive places its Send, and the other waits again.
TEST_P(ReceiveWaitTest, QpsOfAnSrqWaitForItsPosts) {
  ConnectedPair p(wait_pair(GetParam()));
  ASSERT_TRUE(p.connected);
  Context& ctx = p.context();
  auto pd = ctx.alloc_pd().value();
  auto cq = ctx.create_cq(64).value();
  auto srq = pd.create_srq(8, 1).value();
  std::vector<std::uint8_t> buf(4096);
  auto mr = pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite).value();
  auto listener = p.server_events().listen("127.0.0.1", 0).value();
  auto ccq = ctx.create_cq(64).value();
  std::vector<std::uint8_t> cbuf = pattern(4096, 7);
  auto cmr = pd.reg_mr(cbuf.data(), cbuf.size(), access::kLocalWrite).value();
  struct Pair {
    QueuePair server;
    QueuePair client;
    Connection conn;
  };
  std::vector<Pair> pairs;
  for (int i = 0; i < 2; ++i) {
    auto sqp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq, .srq = &srq}).value();
    sqp.set_receive_wait(QueuePair::kWaitForever);
    auto cqp = pd.create_qp({.send_cq = &ccq, .recv_cq = &ccq}).value();
    ConnectionParams params;
    params.crc = GetParam();
    auto conn = p.client_events().connect("127.0.0.1", listener.port(), cqp, params).value();
    auto req = wait_event(p.server_events(), CmEventType::kConnectRequest);
    ASSERT_TRUE(req);
    ASSERT_TRUE(req->connection.accept(sqp, {}));
    ASSERT_TRUE(wait_event(p.server_events(), CmEventType::kEstablished));
    ASSERT_TRUE(wait_event(p.client_events(), CmEventType::kEstablished));
    pairs.push_back({std::move(sqp), std::move(cqp), conn});
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    Sge s = cmr.sge(i * 64, 64);
    SendWr wr;
    wr.wr_id = i + 1;
    wr.sg_list = {&s, 1};
    ASSERT_TRUE(pairs[i].client.post_send(wr));
  }
  std::this_thread::sleep_for(milliseconds(150));
  WorkCompletion wc;
  EXPECT_EQ(cq.poll({&wc, 1}), 0u);
  for (auto& q : pairs)
    EXPECT_EQ(q.server.state(), QpState::kRts) << "a Send without a receive did not wait";
  std::vector<std::uint32_t> seen;
  for (std::uint64_t id = 10; id < 12; ++id) {
    Sge r = mr.sge((id - 10) * 64, 64);
    ASSERT_TRUE(srq.post_recv({id, {&r, 1}}));
    auto got = wait_wc(cq);
    ASSERT_TRUE(got) << "receive " << id;
    EXPECT_EQ(got->status, WcStatus::kSuccess) << to_string(got->status);
    EXPECT_EQ(got->wr_id, id);
    EXPECT_EQ(got->byte_len, 64u);
    seen.push_back(got->qp_num);
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NE(seen[0], seen[1]) << "one QP took both receives";
  for (std::size_t i = 0; i < 2; ++i) {
    const std::size_t from = seen[i] == pairs[0].server.qp_num() ? 0 : 64;
    EXPECT_EQ(std::memcmp(buf.data() + i * 64, cbuf.data() + from, 64), 0) << "receive " << i;
  }
  for (auto& q : pairs) EXPECT_EQ(q.server.state(), QpState::kRts);
}

INSTANTIATE_TEST_SUITE_P(Crc, ReceiveWaitTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "crc" : "nocrc";
                         });

}  // namespace
}  // namespace uwarp::testing
