// The order of connection requests at a listener (cm::Listener): accept order, and a silent
// connection holds back the requests behind it only briefly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "integration/raw_peer.h"
#include "uwarp/uwarp.h"

namespace uwarp::testing {
namespace {

constexpr int kTimeoutMs = 10000;

RawMpaOptions request_named(std::uint8_t name) {
  RawMpaOptions o;
  o.private_data = {name};
  return o;
}

// Four connections made one after another send their MPA requests in the reverse order, back
// to back: the application still sees the requests in the order of the connections (perftest
// -q N pairs its client's and server's QPs by that order).
TEST(RequestOrder, RequestsAreReportedInTheOrderTheConnectionsWereMade) {
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  auto listener = ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener);
  constexpr std::uint8_t kPeers = 4;
  std::vector<RawPeer> peers;
  for (std::uint8_t i = 0; i < kPeers; ++i) {
    peers.push_back(RawPeer::connect_to("127.0.0.1", listener->port()));
    ASSERT_TRUE(peers.back().valid());
  }
  for (std::uint8_t i = kPeers; i-- > 0;) ASSERT_TRUE(peers[i].send_mpa_request(request_named(i)));
  for (std::uint8_t i = 0; i < kPeers; ++i) {
    auto e = ch.get_event(kTimeoutMs);
    ASSERT_TRUE(e) << "no request " << int{i};
    ASSERT_EQ(e->type, CmEventType::kConnectRequest) << to_string(e->type);
    EXPECT_EQ(e->private_data, std::vector<std::uint8_t>{i});
  }
}

// A peer that connects and sends nothing does not hold back the request of a later connection
// until its own request times out (5 s): only for Listener's order hold (50 ms). The request
// held back can then be answered as any other.
TEST(RequestOrder, ASilentConnectionHoldsBackLaterRequestsOnlyBriefly) {
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  auto listener = ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener);
  RawPeer silent = RawPeer::connect_to("127.0.0.1", listener->port());
  ASSERT_TRUE(silent.valid());
  RawPeer speaker = RawPeer::connect_to("127.0.0.1", listener->port());
  ASSERT_TRUE(speaker.valid());
  ASSERT_TRUE(speaker.send_mpa_request(request_named(7)));
  auto e = ch.get_event(2000);
  ASSERT_TRUE(e) << "the request waited for the silent connection";
  ASSERT_EQ(e->type, CmEventType::kConnectRequest) << to_string(e->type);
  EXPECT_EQ(e->private_data, std::vector<std::uint8_t>{7});
  CompletionQueue cq = ctx.create_cq(4).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  QpInitAttr attr;
  attr.send_cq = &cq;
  attr.recv_cq = &cq;
  QueuePair qp = pd.create_qp(attr).value();
  ASSERT_TRUE(e->connection.accept(qp, {}));
  auto reply = speaker.read_mpa(wire::MpaFrameKind::kReply);
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->reject);
}

}  // namespace
}  // namespace uwarp::testing
