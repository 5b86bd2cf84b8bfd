// QP/connection lifecycles: many QPs, teardown in flight, killed peer, reject, IPv6, private data.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "integration/raw_peer.h"
#include "support/connected_pair.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {
namespace {

constexpr int kTimeoutMs = 10000;

struct Endpoint {
  CompletionQueue cq;
  QueuePair qp;
  std::vector<std::uint8_t> buf;
  MemoryRegion mr;
  Connection conn;
};

Endpoint make_endpoint(Context& ctx, ProtectionDomain& pd, std::size_t size) {
  auto cq = ctx.create_cq(64).value();
  QpInitAttr attr;
  attr.send_cq = &cq;
  attr.recv_cq = &cq;
  auto qp = pd.create_qp(attr).value();
  std::vector<std::uint8_t> buf(size);
  auto mr = pd.reg_mr(buf.data(), buf.size(),
                      access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
                .value();
  return Endpoint{std::move(cq), std::move(qp), std::move(buf), std::move(mr), {}};
}

// The next event on `ch` of `type`, skipping none.
std::optional<CmEvent> next_event(EventChannel& ch, CmEventType type, int timeout_ms = kTimeoutMs) {
  auto e = ch.get_event(timeout_ms);
  if (!e) {
    ADD_FAILURE() << "no CM event, expected " << to_string(type);
    return std::nullopt;
  }
  EXPECT_EQ(e->type, type) << to_string(e->type) << " " << e->status.to_string();
  return e;
}

// ---- Many QPs ----

class ManyQps : public ::testing::TestWithParam<bool> {};  // param: separate Contexts

TEST_P(ManyQps, VerifiedWriteAndReadOnEach) {
  constexpr std::size_t kPairs = 64;
  constexpr std::size_t kSize = 64 * 1024;
  const bool separate = GetParam();
  Context server_ctx = Context::open().value();
  Context client_ctx = separate ? Context::open().value() : server_ctx;
  EventChannel server_ch = EventChannel::create(server_ctx).value();
  EventChannel client_ch = EventChannel::create(client_ctx).value();
  ProtectionDomain server_pd = server_ctx.alloc_pd().value();
  ProtectionDomain client_pd = client_ctx.alloc_pd().value();
  auto listener = server_ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener) << listener.error().to_string();

  std::vector<Endpoint> clients, servers;
  for (std::size_t i = 0; i < kPairs; ++i) {
    clients.push_back(make_endpoint(client_ctx, client_pd, 2 * kSize));
    servers.push_back(make_endpoint(server_ctx, server_pd, kSize));
  }
  // All connections at once; the request's private data names the pair.
  for (std::size_t i = 0; i < kPairs; ++i) {
    ConnectionParams params;
    params.private_data.resize(4);
    store_be32(params.private_data.data(), static_cast<std::uint32_t>(i));
    auto c = client_ch.connect("127.0.0.1", listener->port(), clients[i].qp, params);
    ASSERT_TRUE(c) << c.error().to_string();
    clients[i].conn = *c;
  }
  std::size_t established = 0;
  std::vector<bool> accepted(kPairs, false);
  for (std::size_t guard = 0; guard < 4 * kPairs && established < kPairs; ++guard) {
    auto e = server_ch.get_event(kTimeoutMs);
    ASSERT_TRUE(e) << "server events stopped after " << established << " established";
    if (e->type == CmEventType::kConnectRequest) {
      ASSERT_EQ(e->private_data.size(), 4u);
      const std::uint32_t i = load_be32(e->private_data.data());
      ASSERT_LT(i, kPairs);
      ASSERT_FALSE(accepted[i]);
      accepted[i] = true;
      servers[i].conn = e->connection;
      ASSERT_TRUE(e->connection.accept(servers[i].qp, {}));
    } else {
      ASSERT_EQ(e->type, CmEventType::kEstablished)
          << to_string(e->type) << " " << e->status.to_string();
      ++established;
    }
  }
  ASSERT_EQ(established, kPairs);
  for (std::size_t i = 0; i < kPairs; ++i) {
    ASSERT_TRUE(next_event(client_ch, CmEventType::kEstablished));
  }
  for (std::size_t i = 0; i < kPairs; ++i) {
    EXPECT_EQ(clients[i].qp.state(), QpState::kRts);
    EXPECT_EQ(servers[i].qp.state(), QpState::kRts);
  }

  // Every client writes its own pattern into its server, all at once.
  std::vector<Sge> sges(kPairs);
  for (std::size_t i = 0; i < kPairs; ++i) {
    const auto data = pattern(kSize, static_cast<std::uint32_t>(1000 + i));
    std::copy(data.begin(), data.end(), clients[i].buf.begin());
    sges[i] = clients[i].mr.sge(0, kSize);
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = {&sges[i], 1};
    wr.remote_addr = reinterpret_cast<std::uintptr_t>(servers[i].buf.data());
    wr.rkey = servers[i].mr.rkey();
    ASSERT_TRUE(clients[i].qp.post_send(wr));
  }
  for (std::size_t i = 0; i < kPairs; ++i) {
    auto wc = wait_wc(clients[i].cq);
    ASSERT_TRUE(wc) << "pair " << i;
    EXPECT_EQ(wc->status, WcStatus::kSuccess) << "pair " << i << ": " << to_string(wc->status);
    EXPECT_EQ(wc->opcode, WcOpcode::kRdmaWrite);
  }
  // Then reads it back into the second half of its buffer.
  for (std::size_t i = 0; i < kPairs; ++i) {
    sges[i] = clients[i].mr.sge(kSize, kSize);
    SendWr wr;
    wr.wr_id = 100 + i;
    wr.opcode = WrOpcode::kRdmaRead;
    wr.sg_list = {&sges[i], 1};
    wr.remote_addr = reinterpret_cast<std::uintptr_t>(servers[i].buf.data());
    wr.rkey = servers[i].mr.rkey();
    ASSERT_TRUE(clients[i].qp.post_send(wr));
  }
  for (std::size_t i = 0; i < kPairs; ++i) {
    auto wc = wait_wc(clients[i].cq);
    ASSERT_TRUE(wc) << "pair " << i;
    EXPECT_EQ(wc->status, WcStatus::kSuccess) << "pair " << i << ": " << to_string(wc->status);
    EXPECT_EQ(wc->opcode, WcOpcode::kRdmaRead);
    EXPECT_EQ(wc->byte_len, kSize);
    const auto data = pattern(kSize, static_cast<std::uint32_t>(1000 + i));
    EXPECT_TRUE(std::equal(data.begin(), data.end(), servers[i].buf.begin()))
        << "write, pair " << i;
    EXPECT_TRUE(std::equal(data.begin(), data.end(), clients[i].buf.begin() + kSize))
        << "read, pair " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Contexts, ManyQps, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "SeparateContexts" : "OneContext";
                         });

// ---- Disconnect and destruction ----

TEST(Lifecycle, GracefulDisconnectFlushesPostedReceivesOnBothSides) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  constexpr int kRecvs = 4;
  for (int i = 0; i < kRecvs; ++i) {
    Sge c = cl.mr.sge(static_cast<std::size_t>(i) * 4096, 4096);
    ASSERT_TRUE(cl.qp.post_recv({static_cast<std::uint64_t>(10 + i), {&c, 1}}));
    Sge s = sv.mr.sge(static_cast<std::size_t>(i) * 4096, 4096);
    ASSERT_TRUE(sv.qp.post_recv({static_cast<std::uint64_t>(20 + i), {&s, 1}}));
  }
  // One Send goes through first, so the connection is known to carry traffic.
  Sge src = cl.mr.sge(65536, 100);
  SendWr send;
  send.wr_id = 1;
  send.sg_list = {&src, 1};
  ASSERT_TRUE(cl.qp.post_send(send));
  auto swc = wait_wc(cl.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, WcStatus::kSuccess);
  auto rwc = wait_wc(sv.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, WcStatus::kSuccess);
  EXPECT_EQ(rwc->wr_id, 20u);

  cl.conn.disconnect();
  auto c_events = next_event(p.client_events(), CmEventType::kDisconnected);
  auto s_events = next_event(p.server_events(), CmEventType::kDisconnected);
  if (c_events) {
    EXPECT_TRUE(c_events->status.is_ok()) << c_events->status.to_string();
  }
  if (s_events) {
    EXPECT_TRUE(s_events->status.is_ok()) << s_events->status.to_string();
  }

  const auto cwcs = wait_wcs(cl.cq, kRecvs);
  ASSERT_EQ(cwcs.size(), static_cast<std::size_t>(kRecvs));
  for (const auto& wc : cwcs) {
    EXPECT_EQ(wc.status, WcStatus::kWrFlushError)
        << "client wr " << wc.wr_id << ": " << to_string(wc.status);
    EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
  }
  const auto swcs = wait_wcs(sv.cq, kRecvs - 1);
  ASSERT_EQ(swcs.size(), static_cast<std::size_t>(kRecvs - 1));
  for (const auto& wc : swcs) {
    EXPECT_EQ(wc.status, WcStatus::kWrFlushError)
        << "server wr " << wc.wr_id << ": " << to_string(wc.status);
    EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
  }
  EXPECT_EQ(cl.qp.state(), QpState::kError);
  EXPECT_EQ(sv.qp.state(), QpState::kError);
  // A graceful disconnect is no fatal error: no async events.
  auto ae = p.context().get_async_event(0);
  EXPECT_FALSE(ae) << ae->detail;
  // Posting after the disconnect completes at once with a flush error.
  Sge late = cl.mr.sge(0, 64);
  ASSERT_TRUE(cl.qp.post_recv({99, {&late, 1}}));
  auto lwc = wait_wc(cl.cq);
  ASSERT_TRUE(lwc);
  EXPECT_EQ(lwc->wr_id, 99u);
  EXPECT_EQ(lwc->status, WcStatus::kWrFlushError);
}

TEST(Lifecycle, DestroyingAConnectedQpDisconnectsThePeer) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& sv = *p.server;
  Sge s = sv.mr.sge(0, 4096);
  ASSERT_TRUE(sv.qp.post_recv({5, {&s, 1}}));
  {
    QueuePair doomed = std::move(p.client->qp);  // the client's only handle to its QP
  }
  auto ev = next_event(p.server_events(), CmEventType::kDisconnected);
  auto wc = wait_wc(sv.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 5u);
  EXPECT_EQ(wc->status, WcStatus::kWrFlushError) << to_string(wc->status);
  EXPECT_EQ(sv.qp.state(), QpState::kError);
  // The destroyed side asked for it: its application gets no event.
  auto ce = p.client_events().get_event(0);
  EXPECT_FALSE(ce) << to_string(ce->type);
  // Destroying the rest in any order is fine.
  p.client.reset();
  p.server.reset();
}

TEST(Lifecycle, DestroyingAQpWithWritesInFlight) {
  ConnectedPair::Options o;
  o.buffer_size = 8 << 20;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  Sge s = sv.mr.sge(0, 4096);
  ASSERT_TRUE(sv.qp.post_recv({5, {&s, 1}}));
  // Eight 1 MiB Writes and a 4 MiB Read queued, then the QP goes away at once.
  std::vector<Sge> sges;
  sges.reserve(9);
  for (int i = 0; i < 8; ++i) {
    sges.push_back(cl.mr.sge(static_cast<std::size_t>(i) << 20, 1 << 20));
    SendWr w;
    w.wr_id = static_cast<std::uint64_t>(i);
    w.opcode = WrOpcode::kRdmaWrite;
    w.sg_list = {&sges.back(), 1};
    w.remote_addr =
        reinterpret_cast<std::uintptr_t>(sv.buf.data()) + (static_cast<std::uint64_t>(i) << 20);
    w.rkey = sv.mr.rkey();
    ASSERT_TRUE(cl.qp.post_send(w));
  }
  sges.push_back(cl.mr.sge(0, 4 << 20));
  SendWr r;
  r.wr_id = 8;
  r.opcode = WrOpcode::kRdmaRead;
  r.sg_list = {&sges.back(), 1};
  r.remote_addr = reinterpret_cast<std::uintptr_t>(sv.buf.data());
  r.rkey = sv.mr.rkey();
  ASSERT_TRUE(cl.qp.post_send(r));
  { QueuePair doomed = std::move(cl.qp); }
  next_event(p.server_events(), CmEventType::kDisconnected);
  auto wc = wait_wc(sv.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 5u);
  EXPECT_EQ(wc->status, WcStatus::kWrFlushError) << to_string(wc->status);
  EXPECT_EQ(sv.qp.state(), QpState::kError);
}

// ---- A peer that resets the connection while the application posts ----

// A send that fails on the posting thread (the peer reset the connection) ends the stream through
// the engine thread, which may be receiving the same reset at that moment (this crashed once: the
// posting thread unbound the QP without the stream's lock while the engine thread used it). Every
// posted Write completes, sent or flushed, and the QP ends in the error state. Under TSan this
// also checks that the two threads never touch the stream's QP binding unsynchronized.
TEST(Lifecycle, PostingWhileThePeerResets) {
  using testing::RawListener;
  using testing::RawMpaOptions;
  using testing::RawPeer;
  Context ctx = Context::open().value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  EventChannel ch = EventChannel::create(ctx).value();
  for (int round = 0; round < 8; ++round) {
    RawListener rl;
    ASSERT_TRUE(rl.valid());
    Endpoint cl = make_endpoint(ctx, pd, 4096);
    auto conn = ch.connect("127.0.0.1", rl.port(), cl.qp);
    ASSERT_TRUE(conn) << conn.error().to_string();
    RawPeer peer = rl.accept(kTimeoutMs);
    ASSERT_TRUE(peer.valid());
    ASSERT_TRUE(peer.read_mpa(wire::MpaFrameKind::kRequest, kTimeoutMs));
    ASSERT_TRUE(peer.send_mpa_reply(RawMpaOptions{}));
    ASSERT_TRUE(next_event(ch, CmEventType::kEstablished));
    peer.reset();

    // Post 1 KiB Writes (to a made-up key: the peer is gone), taking completions as they come,
    // until one fails (a QP in the error state flushes what is posted to it); bounded in count
    // and time.
    Sge s = cl.mr.sge(0, 1024);
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sg_list = {&s, 1};
    w.remote_addr = 0x1000;
    w.rkey = 0x1234;
    std::size_t posted = 0, completed = 0, failed = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (failed == 0 && posted < 100000 && std::chrono::steady_clock::now() < deadline) {
      if (posted - completed < 32) {
        w.wr_id = posted;
        ASSERT_TRUE(cl.qp.post_send(w));
        ++posted;
      }
      WorkCompletion wc[16];
      const std::size_t got = cl.cq.poll(wc);
      for (std::size_t i = 0; i < got; ++i) failed += wc[i].status != WcStatus::kSuccess;
      completed += got;
    }
    ASSERT_GT(failed, 0u) << "round " << round << ": no Write failed after the reset";
    const auto rest = wait_wcs(cl.cq, posted - completed);
    ASSERT_EQ(rest.size(), posted - completed) << "posted Writes that never completed";
    EXPECT_EQ(cl.qp.state(), QpState::kError);
    auto ev = next_event(ch, CmEventType::kDisconnected);
    ASSERT_TRUE(ev);
    EXPECT_FALSE(ev->status.is_ok()) << "a reset, not an orderly close";
  }
}

// ---- A peer process killed mid-transfer ----

// The child's side: a uwarp client that streams 1 MiB RDMA Writes into the parent's region
// (whose key and address come in the MPA reply), with a Send after the first Write and another
// after the first few, so that the parent knows data is flowing. Never returns.
[[noreturn]] void run_writer_child(int port_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::uint16_t port = 0;
  pollfd pfd{port_fd, POLLIN, 0};
  if (::poll(&pfd, 1, 20000) != 1 || ::read(port_fd, &port, sizeof port) != sizeof port) ::_exit(2);
  constexpr std::size_t kChunk = 1 << 20;
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(256).value();
  QpInitAttr attr;
  attr.send_cq = &cq;
  attr.recv_cq = &cq;
  QueuePair qp = pd.create_qp(attr).value();
  std::vector<std::uint8_t> buf = pattern(kChunk, 7);
  MemoryRegion mr = pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite).value();
  auto conn = ch.connect("127.0.0.1", port, qp);
  if (!conn) ::_exit(3);
  auto est = ch.get_event(kTimeoutMs);
  if (!est || est->type != CmEventType::kEstablished || est->private_data.size() != 12) ::_exit(4);
  const std::uint32_t rkey = load_be32(est->private_data.data());
  const std::uint64_t addr = load_be64(est->private_data.data() + 4);
  Sge chunk = mr.sge(0, kChunk);
  Sge small = mr.sge(0, 16);
  auto post_send = [&](std::uint64_t id) {
    SendWr s;
    s.wr_id = id;
    s.opcode = WrOpcode::kSend;
    s.sg_list = {&small, 1};
    return qp.post_send(s).is_ok();
  };
  auto post_write = [&](std::uint64_t id) {
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sg_list = {&chunk, 1};
    w.remote_addr = addr;
    w.rkey = rkey;
    return qp.post_send(w).is_ok();
  };
  if (!post_send(0)) ::_exit(5);
  constexpr int kDepth = 8;
  int in_flight = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (std::uint64_t i = 1; i < 100000 && std::chrono::steady_clock::now() < deadline;) {
    while (in_flight < kDepth) {
      if (!post_write(i)) ::_exit(6);
      ++in_flight;
      if (i == 4 && !post_send(1000000)) ::_exit(7);
      ++i;
    }
    WorkCompletion wc[16];
    const std::size_t n = cq.poll({wc, 16});
    for (std::size_t k = 0; k < n; ++k) {
      if (wc[k].status != WcStatus::kSuccess) ::_exit(8);
      if (wc[k].opcode == WcOpcode::kRdmaWrite) --in_flight;
    }
    if (n == 0) std::this_thread::yield();
  }
  ::_exit(0);
}

// Kills and reaps the child on every path out of the test.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(Lifecycle, PeerProcessKilledMidTransfer) {
  // Fork before this process has any uwarp object: the child builds its own.
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ChildGuard child;
  child.pid = ::fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) {
    ::close(fds[1]);
    run_writer_child(fds[0]);
  }
  ::close(fds[0]);

  constexpr std::size_t kRegion = 1 << 20;
  Context ctx = Context::open().value();
  EventChannel server_ch = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  Endpoint server = make_endpoint(ctx, pd, kRegion);
  auto listener = server_ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener) << listener.error().to_string();
  const std::uint16_t port = listener->port();
  ASSERT_EQ(::write(fds[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(fds[1]);

  constexpr int kRecvs = 16;
  for (int i = 0; i < kRecvs; ++i) {
    Sge r = server.mr.sge(static_cast<std::size_t>(i) * 64, 64);
    ASSERT_TRUE(server.qp.post_recv({static_cast<std::uint64_t>(i), {&r, 1}}));
  }
  auto req = next_event(server_ch, CmEventType::kConnectRequest);
  ASSERT_TRUE(req);
  server.conn = req->connection;
  ConnectionParams params;
  params.private_data.resize(12);
  store_be32(params.private_data.data(), server.mr.rkey());
  store_be64(params.private_data.data() + 4, reinterpret_cast<std::uintptr_t>(server.buf.data()));
  ASSERT_TRUE(server.conn.accept(server.qp, params));
  ASSERT_TRUE(next_event(server_ch, CmEventType::kEstablished));

  // Both Sends arrived: the second one follows four 1 MiB Writes, so the stream is busy.
  const auto first = wait_wcs(server.cq, 2);
  ASSERT_EQ(first.size(), 2u) << "the child's traffic did not arrive";
  for (const auto& wc : first) EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child.pid, &wstatus, 0), child.pid);
  child.pid = -1;
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "the child ended before it was killed, status " << wstatus;

  auto ev = next_event(server_ch, CmEventType::kDisconnected, 15000);
  if (ev) {
    EXPECT_TRUE(ev->connection.same(server.conn));
  }
  const auto flushed = wait_wcs(server.cq, kRecvs - 2);
  ASSERT_EQ(flushed.size(), static_cast<std::size_t>(kRecvs - 2));
  for (const auto& wc : flushed) {
    EXPECT_EQ(wc.status, WcStatus::kWrFlushError)
        << "wr " << wc.wr_id << ": " << to_string(wc.status);
    EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
  }
  EXPECT_EQ(server.qp.state(), QpState::kError);

  // The listener still accepts: a new client (in this process) connects and sends.
  EventChannel client_ch = EventChannel::create(ctx).value();
  Endpoint c2 = make_endpoint(ctx, pd, 4096);
  Endpoint s2 = make_endpoint(ctx, pd, 4096);
  auto conn = client_ch.connect("127.0.0.1", port, c2.qp);
  ASSERT_TRUE(conn) << conn.error().to_string();
  auto req2 = next_event(server_ch, CmEventType::kConnectRequest);
  ASSERT_TRUE(req2);
  ASSERT_TRUE(req2->connection.accept(s2.qp, {}));
  ASSERT_TRUE(next_event(server_ch, CmEventType::kEstablished));
  ASSERT_TRUE(next_event(client_ch, CmEventType::kEstablished));
  const auto data = pattern(300, 3);
  std::copy(data.begin(), data.end(), c2.buf.begin());
  Sge r = s2.mr.sge(0, 4096);
  ASSERT_TRUE(s2.qp.post_recv({1, {&r, 1}}));
  Sge s = c2.mr.sge(0, 300);
  SendWr send;
  send.sg_list = {&s, 1};
  ASSERT_TRUE(c2.qp.post_send(send));
  auto swc = wait_wc(c2.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, WcStatus::kSuccess);
  auto rwc = wait_wc(s2.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, WcStatus::kSuccess);
  EXPECT_EQ(rwc->byte_len, 300u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), s2.buf.begin()));
}

// ---- Connection setup outcomes ----

TEST(Lifecycle, RejectCarriesPrivateDataToTheClient) {
  Context ctx = Context::open().value();
  EventChannel server_ch = EventChannel::create(ctx).value();
  EventChannel client_ch = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  Endpoint client = make_endpoint(ctx, pd, 4096);
  auto listener = server_ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener);
  ConnectionParams params;
  params.private_data = {'h', 'i'};
  auto c = client_ch.connect("127.0.0.1", listener->port(), client.qp, params);
  ASSERT_TRUE(c);
  auto req = next_event(server_ch, CmEventType::kConnectRequest);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->private_data, params.private_data);
  std::vector<std::uint8_t> why = {'b', 'u', 's', 'y', 0, 0xFF, 0x10};
  ASSERT_TRUE(req->connection.reject(why));
  auto ev = next_event(client_ch, CmEventType::kRejected);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->private_data, why);
  EXPECT_EQ(ev->status.code(), Errc::kRejected) << ev->status.to_string();
  EXPECT_NE(client.qp.state(), QpState::kRts);
  // A rejected request cannot be accepted afterwards.
  Endpoint server = make_endpoint(ctx, pd, 4096);
  EXPECT_FALSE(req->connection.accept(server.qp, {}));
}

// Dropping a listener (without close) and a whole context gives their port back at once, with
// either I/O backend: io_uring's pending requests would otherwise keep the socket listening.
TEST(Lifecycle, ADroppedListenerFreesItsPortAtOnce) {
  std::uint16_t port = 0;
  {
    Context ctx = Context::open().value();
    EventChannel ch = EventChannel::create(ctx).value();
    auto listener = ch.listen("127.0.0.1", 0);
    ASSERT_TRUE(listener);
    port = listener->port();
    *listener = Listener();  // dropped, not closed
    auto again = ch.listen("127.0.0.1", port);
    ASSERT_TRUE(again) << again.error().to_string();
    // Kept to the end of the context this time.
  }
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  auto third = ch.listen("127.0.0.1", port);
  EXPECT_TRUE(third) << third.error().to_string();
}

TEST(Lifecycle, ConnectToAClosedPortIsRefused) {
  // A port that was just free: bound, never listened on, then closed.
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::uint16_t port = ntohs(a.sin_port);
  ::close(s);

  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  Endpoint client = make_endpoint(ctx, pd, 4096);
  auto c = ch.connect("127.0.0.1", port, client.qp);
  if (!c) {
    // Refused before connect() returned: the same error code, reported directly.
    EXPECT_EQ(c.error().code(), Errc::kConnectionRefused) << c.error().to_string();
    return;
  }
  auto ev = next_event(ch, CmEventType::kConnectError);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status.code(), Errc::kConnectionRefused) << ev->status.to_string();
  EXPECT_NE(client.qp.state(), QpState::kRts);
}

bool ipv6_loopback_available() {
  const int s = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

TEST(Lifecycle, Ipv6LoopbackSend) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  ConnectedPair::Options o;
  o.host = "::1";
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  EXPECT_NE(cl.conn.peer_address().find("::1"), std::string::npos) << cl.conn.peer_address();
  EXPECT_NE(sv.conn.peer_address().find("::1"), std::string::npos) << sv.conn.peer_address();
  const auto data = pattern(5000, 9);
  std::copy(data.begin(), data.end(), cl.buf.begin());
  Sge r = sv.mr.sge(0, 8192);
  ASSERT_TRUE(sv.qp.post_recv({3, {&r, 1}}));
  Sge s = cl.mr.sge(0, 5000);
  SendWr send;
  send.sg_list = {&s, 1};
  ASSERT_TRUE(cl.qp.post_send(send));
  auto swc = wait_wc(cl.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, WcStatus::kSuccess);
  auto rwc = wait_wc(sv.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, WcStatus::kSuccess) << to_string(rwc->status);
  EXPECT_EQ(rwc->byte_len, 5000u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), sv.buf.begin()));
}

TEST(Lifecycle, PrivateDataOf508BytesBothWays) {
  ConnectedPair::Options o;
  o.client_params.private_data = pattern(508, 11);
  o.server_params.private_data = pattern(508, 12);
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  EXPECT_EQ(p.request_private_data, o.client_params.private_data);
  EXPECT_EQ(p.reply_private_data, o.server_params.private_data);
}

TEST(Lifecycle, PrivateDataOf509BytesIsRefused) {
  Context ctx = Context::open().value();
  EventChannel server_ch = EventChannel::create(ctx).value();
  EventChannel client_ch = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  Endpoint client = make_endpoint(ctx, pd, 4096);
  Endpoint server = make_endpoint(ctx, pd, 4096);
  auto listener = server_ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener);
  ConnectionParams too_long;
  too_long.private_data = pattern(509, 13);
  auto bad = client_ch.connect("127.0.0.1", listener->port(), client.qp, too_long);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), Errc::kInvalidArgument) << bad.error().to_string();
  // Nothing reached the listener.
  auto none = server_ch.get_event(0);
  EXPECT_FALSE(none) << to_string(none->type);

  auto c = client_ch.connect("127.0.0.1", listener->port(), client.qp);
  ASSERT_TRUE(c) << c.error().to_string();
  auto req = next_event(server_ch, CmEventType::kConnectRequest);
  ASSERT_TRUE(req);
  Status s = req->connection.accept(server.qp, too_long);
  EXPECT_EQ(s.code(), Errc::kInvalidArgument) << s.to_string();
  Status r = req->connection.reject(too_long.private_data);
  EXPECT_EQ(r.code(), Errc::kInvalidArgument) << r.to_string();
  // The request is still pending and can be accepted properly.
  ConnectionParams ok;
  ok.private_data = pattern(508, 14);
  ASSERT_TRUE(req->connection.accept(server.qp, ok));
  ASSERT_TRUE(next_event(server_ch, CmEventType::kEstablished));
  auto est = next_event(client_ch, CmEventType::kEstablished);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->private_data, ok.private_data);
}

}  // namespace
}  // namespace uwarp::testing
