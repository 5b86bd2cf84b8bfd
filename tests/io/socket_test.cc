// The socket options every stream gets (io/socket.h): the liveness bound read from
// UWARP_TCP_USER_TIMEOUT_MS and what it sets on a socket. That the kernel then ends a silent
// connection within the bound is checked between two network namespaces (tests/faults).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include "io/socket.h"
#include "loopback_connection.h"

namespace uwarp::io {
namespace {

int get_int(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  EXPECT_EQ(::getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

Fd tcp_socket() { return Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)); }

TEST(LivenessBound, ParsesMillisecondsAndFallsBackToTheDefault) {
  EXPECT_EQ(parse_liveness_bound_ms(nullptr), kDefaultLivenessBoundMs);
  EXPECT_EQ(parse_liveness_bound_ms(""), kDefaultLivenessBoundMs);
  EXPECT_EQ(parse_liveness_bound_ms("2000"), 2000u);
  EXPECT_EQ(parse_liveness_bound_ms("0"), 0u);
  EXPECT_EQ(parse_liveness_bound_ms("2s"), kDefaultLivenessBoundMs);
  EXPECT_EQ(parse_liveness_bound_ms("-5"), kDefaultLivenessBoundMs);
  EXPECT_EQ(parse_liveness_bound_ms(" 5"), kDefaultLivenessBoundMs);
  EXPECT_EQ(parse_liveness_bound_ms("99999999999999999999999"), kDefaultLivenessBoundMs);
  EXPECT_EQ(parse_liveness_bound_ms("999999999999"), 24u * 3600 * 1000);
}

TEST(LivenessBound, SetsUserTimeoutAndKeepaliveProbesWithinIt) {
  struct Case {
    std::uint32_t ms;
    int idle, interval;
  };
  for (const Case c : {Case{2000, 1, 1}, Case{5000, 1, 1}, Case{30000, 10, 2}, Case{500, 1, 1}}) {
    Fd fd = tcp_socket();
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(set_liveness_bound(fd.get(), c.ms));
    EXPECT_EQ(get_int(fd.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), static_cast<int>(c.ms));
    EXPECT_EQ(get_int(fd.get(), SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(get_int(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE), c.idle) << c.ms;
    EXPECT_EQ(get_int(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL), c.interval) << c.ms;
  }
}

TEST(LivenessBound, ZeroLeavesTheKernelDefaults) {
  Fd fd = tcp_socket();
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(set_liveness_bound(fd.get(), 0));
  EXPECT_EQ(get_int(fd.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
  EXPECT_EQ(get_int(fd.get(), SOL_SOCKET, SO_KEEPALIVE), 0);
}

TEST(LivenessBound, EveryStreamGetsTheProcessBound) {
  auto c = connect_on_loopback();
  ASSERT_TRUE(c);
  EXPECT_EQ(get_int(c->connected.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), static_cast<int>(liveness_bound_ms()));
  EXPECT_EQ(get_int(c->connected.get(), SOL_SOCKET, SO_KEEPALIVE), liveness_bound_ms() != 0 ? 1 : 0);
}

}  // namespace
}  // namespace uwarp::io
