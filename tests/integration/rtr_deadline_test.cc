// A peer-to-peer responder (RFC 6581) waits for the peer's RTR for at most the accept's
// timeout_ms: a raw peer that negotiates a Write RTR and never sends it gets its connection
// closed, and the application sees a connect error, its QP in ERROR and its receive flushed.
// Each test runs with both I/O backends.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "integration/raw_peer.h"
#include "support/per_backend.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

constexpr int kEventTimeoutMs = 5000;
constexpr int kRtrTimeoutMs = 300;

// Peer-to-peer, waiting at most `timeout_ms` for the RTR (passive side) or the reply (active).
ConnectionParams peer_to_peer(int timeout_ms) {
  ConnectionParams p;
  p.peer_to_peer = true;
  p.timeout_ms = timeout_ms;
  return p;
}

class RtrDeadline : public PerBackend {};

TEST_P(RtrDeadline, AResponderWhosePeerSendsNoRtrFailsTheConnection) {
  Context ctx = Context::open().value();
  EventChannel server = EventChannel::create(ctx).value();
  auto listener = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener) << listener.error().to_string();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(16).value();
  QueuePair qp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();

  RawPeer raw = RawPeer::connect_to("127.0.0.1", listener->port());
  ASSERT_TRUE(raw.valid());
  RawMpaOptions request;
  request.peer_to_peer = true;
  request.write_rtr = true;
  ASSERT_TRUE(raw.send_mpa_request(request));
  auto req = server.get_event(kEventTimeoutMs);
  ASSERT_TRUE(req);
  ASSERT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
  const auto accepted_at = steady_clock::now();
  ASSERT_TRUE(req->connection.accept(qp, peer_to_peer(kRtrTimeoutMs)));
  RecvWr recv;
  recv.wr_id = 7;
  ASSERT_TRUE(qp.post_recv(recv));
  auto reply = raw.read_mpa(wire::MpaFrameKind::kReply, kEventTimeoutMs);
  ASSERT_TRUE(reply);
  ASSERT_TRUE(reply->words);
  EXPECT_TRUE(reply->words->peer_to_peer);
  EXPECT_TRUE(reply->words->write_rtr);
  // The raw peer now says nothing: no RTR.

  auto ev = server.get_event(kEventTimeoutMs);
  ASSERT_TRUE(ev) << "no event within " << kEventTimeoutMs << " ms of the accept";
  const auto waited = steady_clock::now() - accepted_at;
  EXPECT_EQ(ev->type, CmEventType::kConnectError) << to_string(ev->type);
  EXPECT_EQ(ev->status.code(), Errc::kTimedOut) << ev->status.to_string();
  EXPECT_GE(waited, std::chrono::milliseconds(kRtrTimeoutMs) - 10ms);
  EXPECT_TRUE(raw.wait_closed(kEventTimeoutMs)) << "uwarp kept the connection";
  EXPECT_EQ(qp.state(), QpState::kError);
  WorkCompletion wc[4];
  std::size_t n = 0;
  for (int i = 0; i < 1000 && n == 0; ++i) {
    n = cq.poll(wc);
    if (n == 0) std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushError) << to_string(wc[0].status);
  // Nothing else follows (no kDisconnected for a connection that never came up).
  EXPECT_FALSE(server.get_event(200));
}

// With a uwarp initiator, which sends its RTR at once, the responder is established well within
// the deadline, and the deadline does nothing afterwards.
TEST_P(RtrDeadline, AnRtrInTimeEstablishesAndTheDeadlineStaysQuiet) {
  Context ctx = Context::open().value();
  EventChannel server = EventChannel::create(ctx).value();
  EventChannel client = EventChannel::create(ctx).value();
  auto listener = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener) << listener.error().to_string();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(16).value();
  QueuePair cqp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  QueuePair sqp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  ASSERT_TRUE(client.connect("127.0.0.1", listener->port(), cqp, peer_to_peer(kEventTimeoutMs)));
  auto req = server.get_event(kEventTimeoutMs);
  ASSERT_TRUE(req);
  ASSERT_EQ(req->type, CmEventType::kConnectRequest) << to_string(req->type);
  ASSERT_TRUE(req->connection.accept(sqp, peer_to_peer(kRtrTimeoutMs)));
  auto est = server.get_event(kEventTimeoutMs);
  ASSERT_TRUE(est);
  EXPECT_EQ(est->type, CmEventType::kEstablished) << to_string(est->type);
  auto cest = client.get_event(kEventTimeoutMs);
  ASSERT_TRUE(cest);
  EXPECT_EQ(cest->type, CmEventType::kEstablished) << to_string(cest->type);
  EXPECT_FALSE(server.get_event(2 * kRtrTimeoutMs)) << "an event after the deadline";
  EXPECT_EQ(sqp.state(), QpState::kRts);
}

INSTANTIATE_TEST_SUITE_P(Backends, RtrDeadline, ::testing::Values("epoll", "uring"), backend_name);

}  // namespace
}  // namespace uwarp::testing
