// uwarp-perf's FPDU-shaped TCP stream (tools/uwarp-perf/tcp_frames.h): messages sent as frames
// of one segment each arrive whole and in order, by both ways of sending (a copied image for
// messages of at most 64 KiB with small frames, gathered iovecs otherwise), with frames split
// across receives; the bytes on the wire are MPA FPDUs; and bytes that are no frame are refused.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <future>
#include <vector>

#include "tools/uwarp-perf/tcp_frames.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"

namespace uwarp::testing {
namespace {

class PerfFramesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  static std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + seed + i / 251);
    return v;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(PerfFramesTest, MessagesArriveWholeAndInOrder) {
  // 1,428 bytes: the payload of a frame where the MSS is 1448 (veth, Ethernet).
  const std::size_t payload = perf::frame_payload_for_mss(1448);
  ASSERT_EQ(payload, 1428u);
  // Tiny, one frame exactly, one byte more, several frames, the largest copied image, and
  // gathered messages longer than one sendmsg's frames (FrameSender::kFramesPerSend).
  const std::vector<std::size_t> sizes = {
      1,     payload, payload + 1, 4096,
      65536, 65537,   1u << 20,    payload * perf::FrameSender::kFramesPerSend + 3};
  auto sent = std::async(std::launch::async, [&] {
    perf::FrameSender sender(payload);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto m = pattern(sizes[i], static_cast<std::uint8_t>(i));
      if (!sender.send_message(fds_[0], m.data(), m.size())) return false;
    }
    return true;
  });
  perf::FrameReceiver receiver(payload);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::vector<std::uint8_t> got(sizes[i]);
    ASSERT_TRUE(receiver.receive_message(fds_[1], got.data(), got.size())) << sizes[i];
    EXPECT_EQ(got, pattern(sizes[i], static_cast<std::uint8_t>(i))) << sizes[i];
  }
  EXPECT_TRUE(sent.get());
}

TEST_F(PerfFramesTest, FramesAreMpaFpdusOfTaggedSegments) {
  perf::FrameSender sender(1428);
  const auto m = pattern(1430, 7);
  ASSERT_TRUE(sender.send_message(fds_[0], m.data(), m.size()));
  // Two FPDUs: 2 + 14 + 1428 + 4 and 2 + 14 + 2 + 2 (pad) + 4 bytes.
  std::vector<std::uint8_t> wire(wire::fpdu_size(14 + 1428) + wire::fpdu_size(14 + 2));
  ASSERT_EQ(::recv(fds_[1], wire.data(), wire.size(), MSG_WAITALL),
            static_cast<ssize_t>(wire.size()));
  const std::uint8_t* second = wire.data() + wire::fpdu_size(14 + 1428);
  EXPECT_EQ((wire[0] << 8) | wire[1], 14 + 1428);
  EXPECT_EQ((second[0] << 8) | second[1], 14 + 2);
  EXPECT_NE(wire[2] & wire::kDdpFlagTagged, 0);
  EXPECT_EQ(std::vector<std::uint8_t>(wire.begin() + 16, wire.begin() + 16 + 1428),
            std::vector<std::uint8_t>(m.begin(), m.begin() + 1428));
  EXPECT_EQ(second[16], m[1428]);
  EXPECT_EQ(second[17], m[1429]);
}

TEST_F(PerfFramesTest, BytesThatAreNoFrameAreRefused) {
  perf::FrameReceiver receiver(1428);
  std::vector<std::uint8_t> got(4096);
  // A frame longer than the receiver allows.
  const std::uint8_t too_long[16] = {0x05, 0xA3};  // ULPDU 1443: payload 1429
  ASSERT_EQ(::send(fds_[0], too_long, sizeof too_long, 0), static_cast<ssize_t>(sizeof too_long));
  EXPECT_FALSE(receiver.receive_message(fds_[1], got.data(), got.size()));
  // A length shorter than a DDP header.
  perf::FrameReceiver fresh(1428);
  const std::uint8_t too_short[16] = {0x00, 0x0D};
  ASSERT_EQ(::send(fds_[0], too_short, sizeof too_short, 0),
            static_cast<ssize_t>(sizeof too_short));
  EXPECT_FALSE(fresh.receive_message(fds_[1], got.data(), got.size()));
  // The peer closing mid-message.
  perf::FrameReceiver last(1428);
  ::shutdown(fds_[0], SHUT_WR);
  EXPECT_FALSE(last.receive_message(fds_[1], got.data(), got.size()));
}

}  // namespace
}  // namespace uwarp::testing
