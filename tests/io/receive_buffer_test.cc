// The fixed receive buffer of a short path (io/receive_buffer.h): which connections get one,
// how UWARP_TCP_SHORT_PATH_RCVBUF is read, and what a connected socket is left with.
#include "io/receive_buffer.h"

#include <sys/socket.h>

#include <gtest/gtest.h>

#include "loopback_connection.h"

namespace uwarp::io {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

int rcvbuf(int fd) {
  int v = -1;
  socklen_t len = sizeof v;
  EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
  return v;
}

TEST(ShortPathReceiveBuffer, ParsesBytesAndFallsBackToTheDefault) {
  EXPECT_EQ(parse_short_path_receive_buffer(nullptr), kDefaultShortPathReceiveBuffer);
  EXPECT_EQ(parse_short_path_receive_buffer(""), kDefaultShortPathReceiveBuffer);
  EXPECT_EQ(parse_short_path_receive_buffer("0"), 0u);
  EXPECT_EQ(parse_short_path_receive_buffer("1048576"), kMiB);
  EXPECT_EQ(parse_short_path_receive_buffer("512K"), 512u * 1024);
  EXPECT_EQ(parse_short_path_receive_buffer("8M"), 8 * kMiB);
  EXPECT_EQ(parse_short_path_receive_buffer("4MB"), kDefaultShortPathReceiveBuffer);
  EXPECT_EQ(parse_short_path_receive_buffer("-1"), kDefaultShortPathReceiveBuffer);
  EXPECT_EQ(parse_short_path_receive_buffer(" 4"), kDefaultShortPathReceiveBuffer);
  EXPECT_EQ(parse_short_path_receive_buffer("99999999999999999999999"), kDefaultShortPathReceiveBuffer);
  EXPECT_EQ(parse_short_path_receive_buffer("99999999M"), std::size_t{1} << 30);
}

TEST(ShortPathReceiveBuffer, OnlyShortMeasuredPathsWhereTheWholeBufferIsAllowed) {
  const std::size_t want = 4 * kMiB;
  EXPECT_EQ(short_path_rcvbuf(20, 4 * kMiB, want), want);
  EXPECT_EQ(short_path_rcvbuf(kShortPathRttUs - 1, 32 * kMiB, want), want);
  EXPECT_EQ(short_path_rcvbuf(kShortPathRttUs, 32 * kMiB, want), 0u);     // not short
  EXPECT_EQ(short_path_rcvbuf(100000, 32 * kMiB, want), 0u);              // a WAN
  EXPECT_EQ(short_path_rcvbuf(0, 32 * kMiB, want), 0u);                   // not measured
  EXPECT_EQ(short_path_rcvbuf(20, 212992, want), 0u);                     // Debian's rmem_max
  EXPECT_EQ(short_path_rcvbuf(20, 0, want), 0u);                          // rmem_max unknown
  EXPECT_EQ(short_path_rcvbuf(20, 32 * kMiB, 0), 0u);                     // turned off
}

// A connected loopback socket: given a short round trip it gets the buffer (the kernel reports
// twice what was asked for) where this namespace's rmem_max allows it, and keeps the kernel's
// otherwise; a long round trip leaves it alone.
TEST(ShortPathReceiveBuffer, SetsTheSocketsBufferOrLeavesIt) {
  auto c = connect_on_loopback();
  ASSERT_TRUE(c);
  const int fd = c->connected.get();
  const int before = rcvbuf(fd);
  EXPECT_FALSE(bound_short_path_receive_buffer(fd, 100000));
  EXPECT_EQ(rcvbuf(fd), before);
  const std::size_t want = short_path_receive_buffer();
  const bool allowed = want != 0 && want <= rmem_max();
  EXPECT_EQ(bound_short_path_receive_buffer(fd, 20), allowed);
  EXPECT_EQ(rcvbuf(fd), allowed ? static_cast<int>(2 * want) : before);
}

}  // namespace
}  // namespace uwarp::io
