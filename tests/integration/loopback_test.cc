// End-to-end over loopback TCP through the native API (and, under in_netns_pair.sh, between two
// network namespaces): every operation, sizes from 0 bytes to 16 MiB, CRC off and on, MPA markers
// in neither, one or both directions, FPDUs larger than a segment where asked for, data verified
// byte for byte.
#include <gtest/gtest.h>

#include <unistd.h>

#include <numeric>
#include <random>
#include <thread>

#include "raw_peer.h"
#include "runtime/silent_peer.h"
#include "stats/snapshot.h"
#include "support/connected_pair.h"

namespace uwarp::testing {
namespace {

void fill_pattern(std::vector<std::uint8_t>& b, std::size_t n, std::uint32_t seed) {
  const auto p = pattern(n, seed);
  std::copy(p.begin(), p.end(), b.begin());
}

// Which side asks for MPA markers in what it receives.
enum class Markers : std::uint8_t { kNone, kToClient, kToServer, kBoth };

struct Case {
  std::size_t size;
  bool crc;
  Markers markers = Markers::kNone;
  std::uint32_t fpdu_size = 0;  // ConnectionParams::fpdu_size of both sides
};

std::string case_name(const Case& c) {
  static constexpr const char* kMarkers[] = {"", "_markers_to_client", "_markers_to_server",
                                             "_markers"};
  return std::to_string(c.size) + (c.crc ? "_crc" : "_nocrc") +
         kMarkers[static_cast<int>(c.markers)] +
         (c.fpdu_size != 0 ? "_fpdu" + std::to_string(c.fpdu_size) : "");
}

// FPDUs the QP `qp_num` whose connection has the local address `local` has sent so far, from
// this process's statistics file (stats/snapshot.h).
std::uint64_t fpdus_sent(std::uint32_t qp_num, const std::string& local) {
  auto snap = stats::read_process(::getpid());
  if (!snap) {
    ADD_FAILURE() << snap.error();
    return 0;
  }
  for (const stats::QpSnapshot& q : snap->qps) {
    if (q.qp_num == qp_num && q.local == local) return q.counters[stats::Counter::kTxFpdus];
  }
  ADD_FAILURE() << "no statistics for QP " << qp_num << " at " << local;
  return 0;
}

class LoopbackOps : public ::testing::TestWithParam<Case> {};

TEST_P(LoopbackOps, SendWriteReadVerified) {
  const Case c = GetParam();
  ConnectedPair::Options o;
  o.buffer_size = std::max<std::size_t>(c.size, 64);
  o.client_params.crc = c.crc;
  o.client_params.markers = c.markers == Markers::kToClient || c.markers == Markers::kBoth;
  o.server_params.markers = c.markers == Markers::kToServer || c.markers == Markers::kBoth;
  o.client_params.fpdu_size = c.fpdu_size;
  o.server_params.fpdu_size = c.fpdu_size;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  EXPECT_EQ(p.client->conn.receives_markers(), o.client_params.markers);
  EXPECT_EQ(p.client->conn.sends_markers(), o.server_params.markers);
  EXPECT_EQ(p.server->conn.receives_markers(), o.server_params.markers);
  EXPECT_EQ(p.server->conn.sends_markers(), o.client_params.markers);

  // Send: the server posts a receive, the client sends.
  fill_pattern(cl.buf, c.size, 1);
  Sge rsge = sv.mr.sge(0, static_cast<std::uint32_t>(c.size));
  ASSERT_TRUE(sv.qp.post_recv({7, {&rsge, c.size ? 1u : 0u}}));
  Sge ssge = cl.mr.sge(0, static_cast<std::uint32_t>(c.size));
  SendWr send;
  send.wr_id = 1;
  send.opcode = WrOpcode::kSend;
  send.sg_list = {&ssge, c.size ? 1u : 0u};
  ASSERT_TRUE(cl.qp.post_send(send));
  auto swc = wait_wc(cl.cq);
  ASSERT_TRUE(swc);
  EXPECT_EQ(swc->status, WcStatus::kSuccess) << to_string(swc->status);
  auto rwc = wait_wc(sv.cq);
  ASSERT_TRUE(rwc);
  EXPECT_EQ(rwc->status, WcStatus::kSuccess) << to_string(rwc->status);
  EXPECT_EQ(rwc->opcode, WcOpcode::kRecv);
  EXPECT_EQ(rwc->wr_id, 7u);
  EXPECT_EQ(rwc->byte_len, c.size);
  EXPECT_TRUE(std::equal(cl.buf.begin(), cl.buf.begin() + c.size, sv.buf.begin()));

  // RDMA Write: client writes into the server's buffer.
  fill_pattern(cl.buf, c.size, 2);
  SendWr write;
  write.wr_id = 2;
  write.opcode = WrOpcode::kRdmaWrite;
  write.sg_list = {&ssge, c.size ? 1u : 0u};
  write.remote_addr = reinterpret_cast<std::uintptr_t>(sv.buf.data());
  write.rkey = sv.mr.rkey();
  ASSERT_TRUE(cl.qp.post_send(write));
  auto wwc = wait_wc(cl.cq);
  ASSERT_TRUE(wwc);
  EXPECT_EQ(wwc->status, WcStatus::kSuccess);
  // A Read behind the Write on the same stream returns what the Write placed.
  const std::vector<std::uint8_t> written(cl.buf.begin(), cl.buf.begin() + c.size);
  SendWr read;
  read.wr_id = 3;
  read.opcode = WrOpcode::kRdmaRead;
  Sge dsge = cl.mr.sge(0, static_cast<std::uint32_t>(c.size));
  read.sg_list = {&dsge, c.size ? 1u : 0u};
  read.remote_addr = reinterpret_cast<std::uintptr_t>(sv.buf.data());
  read.rkey = sv.mr.rkey();
  std::fill(cl.buf.begin(), cl.buf.begin() + c.size, 0);
  ASSERT_TRUE(cl.qp.post_send(read));
  auto dwc = wait_wc(cl.cq);
  ASSERT_TRUE(dwc);
  EXPECT_EQ(dwc->status, WcStatus::kSuccess) << to_string(dwc->status);
  EXPECT_EQ(dwc->opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(dwc->byte_len, c.size);
  EXPECT_TRUE(std::equal(written.begin(), written.end(), cl.buf.begin()));
  EXPECT_TRUE(std::equal(written.begin(), written.end(), sv.buf.begin()));

  if (c.fpdu_size != 0 && c.markers == Markers::kNone) {
    // FPDUs of about 64 KiB whatever the MSS: the client sent the Send and the Write (2 x size)
    // and a Read Request, the server the Read Responses (size). At MSS 1448 (in_netns_pair.sh)
    // FPDUs within a segment would be about 45 times as many.
    const std::size_t per_fpdu = c.fpdu_size / 2;
    EXPECT_LE(fpdus_sent(cl.qp.qp_num(), cl.conn.local_address()), 2 * c.size / per_fpdu + 8);
    EXPECT_LE(fpdus_sent(sv.qp.qp_num(), sv.conn.local_address()), c.size / per_fpdu + 8);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, LoopbackOps,
    ::testing::Values(Case{0, false}, Case{1, false}, Case{63, false}, Case{4096, false},
                      Case{65536, false}, Case{1 << 20, false}, Case{16 << 20, false},
                      Case{0, true}, Case{1, true}, Case{4096, true}, Case{65536, true},
                      Case{1 << 20, true}, Case{16 << 20, true}, Case{0, false, Markers::kBoth},
                      Case{1, false, Markers::kBoth}, Case{509, false, Markers::kBoth},
                      Case{65536, false, Markers::kBoth}, Case{1 << 20, false, Markers::kBoth},
                      Case{16 << 20, false, Markers::kBoth}, Case{1, true, Markers::kBoth},
                      Case{65536, true, Markers::kBoth}, Case{1 << 20, true, Markers::kBoth},
                      Case{65536, false, Markers::kToClient},
                      Case{65536, false, Markers::kToServer}, Case{65536, true, Markers::kToClient},
                      Case{65536, true, Markers::kToServer},
                      Case{1 << 20, false, Markers::kNone, 65536},
                      Case{1 << 20, true, Markers::kNone, 65536},
                      Case{16 << 20, true, Markers::kNone, kMaxFpduSize},
                      Case{1 << 20, true, Markers::kBoth, 65536}),
    [](const auto& test_info) { return case_name(test_info.param); });

// A Send with Solicited Event wakes a CQ armed for solicited completions; a plain Send does not.
TEST(LoopbackEvents, SolicitedEventFiresOnlyForSolicitedSends) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  // This test needs a receiving CQ with a completion channel: a second connection.
  EventedConnection c(p);
  ASSERT_TRUE(c.req);
  for (std::uint64_t i = 0; i < 2; ++i) {
    Sge r = c.mr.sge(i * 64, 64);
    ASSERT_TRUE(c.sqp.post_recv({i, {&r, 1}}));
  }
  ASSERT_TRUE(c.accept());
  ASSERT_TRUE(c.cq.req_notify(/*solicited_only=*/true));

  std::vector<std::uint8_t> src(64, 7);
  MemoryRegion smr = c.cpd.reg_mr(src.data(), src.size(), 0).value();
  Sge s = smr.sge(0, 16);
  ASSERT_TRUE(
      c.cqp.post_send({.wr_id = 1, .opcode = WrOpcode::kSend, .sg_list = {&s, 1}, .flags = 0}));
  auto plain = wait_wc(c.cq);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->flags & wc_flags::kSolicited, 0u);
  EXPECT_FALSE(c.ch.get_event(200)) << "a plain Send must not fire a solicited-only arm";
  ASSERT_TRUE(c.cqp.post_send({.wr_id = 2,
                             .opcode = WrOpcode::kSend,
                             .sg_list = {&s, 1},
                             .flags = send_flags::kSolicited}));
  auto ev = c.ch.get_event(5000);
  ASSERT_TRUE(ev);
  EXPECT_EQ(*ev, &c.tag);
  auto solicited = wait_wc(c.cq);
  ASSERT_TRUE(solicited);
  EXPECT_NE(solicited->flags & wc_flags::kSolicited, 0u);
}

// Send with Invalidate: the receiver reports the STag it invalidated (a type 2 window: a
// registered region is not the peer's to invalidate), and that STag then refuses remote access
// (the writer's QP gets a Terminate and goes to ERROR).
TEST(LoopbackEvents, SendWithInvalidateUnbindsAType2Window) {
  ConnectedPair::Options o;
  o.access = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kMwBind;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  MemoryWindow mw = sv.pd.alloc_mw(WindowType::kType2).value();
  Sge range{reinterpret_cast<std::uintptr_t>(sv.buf.data()), 4096, sv.mr.lkey()};
  SendWr bind{.wr_id = 4, .opcode = WrOpcode::kBindWindow, .sg_list = {&range, 1}};
  bind.rkey = mw.rkey_with_key(0x3C);
  bind.access = access::kRemoteWrite;
  ASSERT_TRUE(sv.qp.post_send(bind));
  auto bound = wait_wc(sv.cq);
  ASSERT_TRUE(bound);
  ASSERT_EQ(bound->status, WcStatus::kSuccess) << to_string(bound->status);
  Sge r = sv.mr.sge(0, 64);
  ASSERT_TRUE(sv.qp.post_recv({5, {&r, 1}}));
  Sge s = cl.mr.sge(0, 8);
  SendWr inv{.wr_id = 1, .opcode = WrOpcode::kSendWithInvalidate, .sg_list = {&s, 1}};
  inv.invalidate_rkey = bind.rkey;
  ASSERT_TRUE(cl.qp.post_send(inv));
  auto wc = wait_wc(sv.cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess) << to_string(wc->status);
  EXPECT_NE(wc->flags & wc_flags::kWithInvalidate, 0u);
  EXPECT_EQ(wc->invalidated_rkey, bind.rkey);
  auto sent = wait_wc(cl.cq);
  ASSERT_TRUE(sent);
  SendWr write{.wr_id = 2, .opcode = WrOpcode::kRdmaWrite, .sg_list = {&s, 1}};
  write.remote_addr = reinterpret_cast<std::uintptr_t>(sv.buf.data());
  write.rkey = bind.rkey;
  ASSERT_TRUE(cl.qp.post_send(write));
  bool terminated = false;
  for (int i = 0; i < 100 && !terminated; ++i) {
    auto ae = p.context().get_async_event(100);
    terminated = ae && ae->detail.find("DDP/1/0x00") != std::string::npos;
  }
  EXPECT_TRUE(terminated) << "a Write to the invalidated STag must be terminated (DDP/1/0x00)";
}

// RDMA Write with Immediate (RFC 7306): the Write's data is placed, then its Immediate Data
// message takes one receive and reports the value and the Write's length; with no data, only the
// Immediate Data message goes. CRC on, so that a real link's segments are checked too.
TEST(LoopbackEvents, WriteWithImmediateTakesOneReceiveAndReportsTheValue) {
  ConnectedPair::Options o;
  o.client_params.crc = true;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  constexpr std::uint32_t kLength = 100000;
  fill_pattern(cl.buf, kLength, 11);
  for (std::uint64_t id : {21u, 22u}) {
    Sge r = sv.mr.sge(kLength, 64);
    ASSERT_TRUE(sv.qp.post_recv({id, {&r, 1}}));
  }
  const Sge data = cl.mr.sge(0, kLength);
  SendWr write = remote_wr(WrOpcode::kRdmaWriteWithImm, data, sv, 0, 1);
  write.imm_data = 0xDEADBEEF;
  ASSERT_TRUE(cl.qp.post_send(write));
  SendWr bare = remote_wr(WrOpcode::kRdmaWriteWithImm, data, sv, 0, 2);
  bare.sg_list = {};
  bare.imm_data = 7;
  ASSERT_TRUE(cl.qp.post_send(bare));
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto sent = wait_wc(cl.cq);
    ASSERT_TRUE(sent);
    EXPECT_EQ(sent->status, WcStatus::kSuccess) << to_string(sent->status);
  }
  auto first = wait_wc(sv.cq);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, WcStatus::kSuccess) << to_string(first->status);
  EXPECT_EQ(first->opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(first->wr_id, 21u);
  EXPECT_NE(first->flags & wc_flags::kWithImm, 0u);
  EXPECT_EQ(first->imm_data, 0xDEADBEEFu);
  EXPECT_EQ(first->byte_len, kLength);
  EXPECT_TRUE(std::equal(cl.buf.begin(), cl.buf.begin() + kLength, sv.buf.begin()));
  auto second = wait_wc(sv.cq);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, WcStatus::kSuccess) << to_string(second->status);
  EXPECT_EQ(second->wr_id, 22u);
  EXPECT_EQ(second->imm_data, 7u);
  EXPECT_EQ(second->byte_len, 0u);
}

// The active side gives up when no MPA reply comes within its timeout.
TEST(LoopbackEvents, ConnectTimesOutWithoutMpaReply) {
  RawListener silent;
  ASSERT_TRUE(silent.valid());
  Context ctx = Context::open().value();
  EventChannel events = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(16).value();
  QueuePair qp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  ConnectionParams params;
  params.timeout_ms = 300;
  auto conn = events.connect("127.0.0.1", silent.port(), qp, params);
  ASSERT_TRUE(conn);
  RawPeer held = silent.accept(5000);  // accept, read nothing, answer nothing
  ASSERT_TRUE(held.valid());
  auto ev = events.get_event(5000);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type, CmEventType::kConnectError);
  EXPECT_EQ(ev->status.code(), Errc::kTimedOut) << ev->status.to_string();
}

// As initiator, uwarp nudges a peer with one zero-length RDMA Write to STag 1 when its first
// messages went out right after the connection came up (docs/interop.md: Linux siw can miss
// bytes that arrive before its QP takes the socket over, until another segment arrives, and may
// send meanwhile), or when the peer stays silent after them; a peer that has spoken before this
// side's first bytes, sent later, is never nudged.
enum class NudgeCase { kSilentPeer, kPeerAnswersEarlyBytes, kPeerAnswersLateBytes };
class InitiatorNudge : public ::testing::TestWithParam<NudgeCase> {};

TEST_P(InitiatorNudge, EarlyBytesOrASilentPeerGetOneNudge) {
  const NudgeCase c = GetParam();
  RawListener server;
  ASSERT_TRUE(server.valid());
  Context ctx = Context::open().value();
  EventChannel events = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(16).value();
  QueuePair qp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  std::vector<std::uint8_t> buf(64, 5);
  MemoryRegion mr = pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite).value();
  auto conn = events.connect("127.0.0.1", server.port(), qp);
  ASSERT_TRUE(conn);
  RawPeer peer = server.accept(5000);
  ASSERT_TRUE(peer.valid());
  ASSERT_TRUE(peer.read_mpa(wire::MpaFrameKind::kRequest));
  ASSERT_TRUE(peer.send_mpa_reply({}));
  ASSERT_TRUE(wait_event(events, CmEventType::kEstablished));
  if (c == NudgeCase::kPeerAnswersLateBytes) {
    // The peer speaks first (a zero-length Write of its own); this side's bytes follow well after
    // the first look (kSilentPeerQuiet), which finds the peer alive and ends the watch.
    ASSERT_TRUE(peer.send_fpdu(RawPeer::tagged_header(wire::RdmapOpcode::kRdmaWrite, 1, 0), {}));
    std::this_thread::sleep_for(5 * runtime::kSilentPeerQuiet);
  }
  Sge s = mr.sge(0, 16);
  ASSERT_TRUE(qp.post_send({.wr_id = 1, .opcode = WrOpcode::kSend, .sg_list = {&s, 1}}));
  auto first = peer.read_fpdu(5000);
  ASSERT_TRUE(first && first->header);
  EXPECT_EQ(first->header->opcode, static_cast<std::uint8_t>(wire::RdmapOpcode::kSend));
  if (c == NudgeCase::kPeerAnswersEarlyBytes) {
    // The peer sends at once (as an rsocket acceptor sends its credits), yet may have missed ours.
    ASSERT_TRUE(peer.send_fpdu(RawPeer::tagged_header(wire::RdmapOpcode::kRdmaWrite, 1, 0), {}));
  }
  if (c == NudgeCase::kPeerAnswersLateBytes) {
    ReadStatus st = ReadStatus::kOk;
    EXPECT_FALSE(peer.read_fpdu(1000, &st)) << "a peer that spoke first must not be nudged";
    EXPECT_EQ(st, ReadStatus::kTimeout);
    return;
  }
  auto nudge = peer.read_fpdu(3000);
  ASSERT_TRUE(nudge && nudge->header) << "the peer is nudged";
  EXPECT_TRUE(nudge->header->tagged);
  EXPECT_EQ(nudge->header->opcode, static_cast<std::uint8_t>(wire::RdmapOpcode::kRdmaWrite));
  EXPECT_EQ(nudge->header->stag, 1u);
  EXPECT_EQ(nudge->header->tagged_offset, 0u);
  EXPECT_TRUE(nudge->payload.empty());
  ReadStatus st = ReadStatus::kOk;
  EXPECT_FALSE(peer.read_fpdu(1000, &st)) << "the nudge is sent once";
  EXPECT_EQ(st, ReadStatus::kTimeout);
}

INSTANTIATE_TEST_SUITE_P(Peers, InitiatorNudge,
                         ::testing::Values(NudgeCase::kSilentPeer,
                                           NudgeCase::kPeerAnswersEarlyBytes,
                                           NudgeCase::kPeerAnswersLateBytes),
                         [](const auto& test_info) {
                           switch (test_info.param) {
                             case NudgeCase::kSilentPeer:
                               return "silent";
                             case NudgeCase::kPeerAnswersEarlyBytes:
                               return "answering_early_bytes";
                             default:
                               return "answering_late_bytes";
                           }
                         });

}  // namespace
}  // namespace uwarp::testing
