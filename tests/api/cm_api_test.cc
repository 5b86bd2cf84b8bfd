// The native CM API (include/uwarp/cm.h) without a connected peer: listening, a refused
// connect, and argument checks.
#include <poll.h>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "uwarp/cm.h"

namespace uwarp {
namespace {

TEST(CmApi, AListenerOnPortZeroGetsAPortAndReleasesItOnClose) {
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  auto listener = ch.listen("127.0.0.1", 0);
  ASSERT_TRUE(listener);
  const std::uint16_t port = listener->port();
  EXPECT_NE(port, 0);
  // The same port again is taken while the first listener holds it.
  EXPECT_FALSE(ch.listen("127.0.0.1", port));
  listener->close();
  auto again = ch.listen("127.0.0.1", port);
  EXPECT_TRUE(again) << "port " << port << " still held after close";
}

TEST(CmApi, AnUnknownHostIsAnError) {
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  EXPECT_FALSE(ch.listen("no-such-host.invalid", 0));
}

TEST(CmApi, AConnectToAClosedPortEndsInAConnectError) {
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  // A port that was free a moment ago: nobody listens on it now.
  std::uint16_t port = 0;
  {
    auto l = ch.listen("127.0.0.1", 0);
    ASSERT_TRUE(l);
    port = l->port();
    l->close();
  }
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(8).value();
  QueuePair qp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  auto conn = ch.connect("127.0.0.1", port, qp, ConnectionParams{});
  ASSERT_TRUE(conn);
  pollfd pfd{ch.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "the channel's fd never became readable";
  auto ev = ch.get_event(0);
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->type, CmEventType::kConnectError);
  EXPECT_FALSE(ev->status);
  EXPECT_NE(qp.state(), QpState::kRts);
}

TEST(CmApi, PrivateDataLongerThanMpaAllowsIsRefused) {
  Context ctx = Context::open().value();
  EventChannel ch = EventChannel::create(ctx).value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(8).value();
  QueuePair qp = pd.create_qp({.send_cq = &cq, .recv_cq = &cq}).value();
  ConnectionParams params;
  params.private_data.assign(600, 0x5a);
  auto conn = ch.connect("127.0.0.1", 9, qp, params);
  EXPECT_FALSE(conn) << "600 bytes of private data were taken (MPA allows 512 in all)";
}

}  // namespace
}  // namespace uwarp
