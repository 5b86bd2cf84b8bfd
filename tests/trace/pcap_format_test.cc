// The pcap file header and synthesized TCP packets, byte for byte (the expected bytes, with their
// IP and TCP checksums, were computed independently of this code, by the RFC 1071 sum).
#include "trace/pcap_format.h"

#include <gtest/gtest.h>

#include <vector>

namespace uwarp::trace {
namespace {

Endpoint v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d, std::uint16_t port) {
  Endpoint e;
  e.address = {a, b, c, d};
  e.port = port;
  return e;
}

Endpoint v6_doc(std::uint8_t last, std::uint16_t port) {  // 2001:db8::last
  Endpoint e;
  e.address = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last};
  e.ipv6 = true;
  e.port = port;
  return e;
}

TEST(PcapFormat, FileHeader) {
  std::vector<std::uint8_t> out;
  append_file_header(out);
  // clang-format off
  const std::vector<std::uint8_t> expected = {
      0xd4, 0xc3, 0xb2, 0xa1,  // magic, little-endian, microseconds
      0x02, 0x00, 0x04, 0x00,  // version 2.4
      0, 0, 0, 0, 0, 0, 0, 0,  // thiszone, sigfigs
      0x00, 0x00, 0x04, 0x00,  // snap length 262144
      0x01, 0x00, 0x00, 0x00,  // Ethernet
  };
  // clang-format on
  EXPECT_EQ(out, expected);
}

TEST(PcapFormat, Ipv4DataSegment) {
  const std::uint8_t payload[] = {'a', 'b', 'c'};
  TcpSegment s;
  s.source = v4(10, 0, 0, 1, 5000);
  s.destination = v4(10, 0, 0, 2, 6000);
  s.seq = 0x01020304;
  s.ack = 0x0a0b0c0d;
  s.flags = kTcpAck | kTcpPsh;
  s.payload = payload;
  std::vector<std::uint8_t> out = {0xEE};  // appended after what is there
  const std::size_t n = append_tcp_packet(out, {1700000000, 123456}, s);
  // clang-format off
  const std::vector<std::uint8_t> expected = {
      0xEE,
      // record: seconds, microseconds, captured and original length (57)
      0x00, 0xf1, 0x53, 0x65, 0x40, 0xe2, 0x01, 0x00, 0x39, 0x00, 0x00, 0x00, 0x39, 0x00, 0x00, 0x00,
      // Ethernet: 02:00:0a:00:00:02 <- 02:00:0a:00:00:01, IPv4
      0x02, 0x00, 0x0a, 0x00, 0x00, 0x02, 0x02, 0x00, 0x0a, 0x00, 0x00, 0x01, 0x08, 0x00,
      // IPv4: length 43, DF, TTL 64, TCP, checksum 0x26cb
      0x45, 0x00, 0x00, 0x2b, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0x26, 0xcb, 0x0a, 0x00, 0x00, 0x01,
      0x0a, 0x00, 0x00, 0x02,
      // TCP: ports, seq, ack, 5 words, ACK|PSH, window 65535, checksum 0x924e
      0x13, 0x88, 0x17, 0x70, 0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b, 0x0c, 0x0d, 0x50, 0x18, 0xff, 0xff,
      0x92, 0x4e, 0x00, 0x00,
      0x61, 0x62, 0x63};
  // clang-format on
  EXPECT_EQ(out, expected);
  EXPECT_EQ(n, expected.size() - 1);
  EXPECT_EQ(n, tcp_packet_record_size(false, sizeof payload));
}

TEST(PcapFormat, Ipv6Segment) {
  const std::uint8_t payload[] = {0x01};
  TcpSegment s;
  s.source = v6_doc(1, 7);
  s.destination = v6_doc(2, 9);
  s.seq = 100;
  s.ack = 200;
  s.flags = kTcpSyn;
  s.payload = payload;
  std::vector<std::uint8_t> out;
  append_tcp_packet(out, {5, 6}, s);
  // clang-format off
  const std::vector<std::uint8_t> expected = {
      0x05, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x4b, 0x00, 0x00, 0x00, 0x4b, 0x00, 0x00, 0x00,
      0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,
      // IPv6: payload length 21, TCP, hop limit 64, 2001:db8::1 -> 2001:db8::2
      0x60, 0x00, 0x00, 0x00, 0x00, 0x15, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
      // TCP: checksum 0x5231 over the IPv6 pseudo-header
      0x00, 0x07, 0x00, 0x09, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0xc8, 0x50, 0x02, 0xff, 0xff,
      0x52, 0x31, 0x00, 0x00, 0x01};
  // clang-format on
  EXPECT_EQ(out, expected);
  EXPECT_EQ(out.size(), tcp_packet_record_size(true, sizeof payload));
}

TEST(PcapFormat, LargestSegmentFitsTheIpv4LengthField) {
  const std::vector<std::uint8_t> payload(kMaxSegmentPayload, 0x5a);
  TcpSegment s;
  s.source = v4(127, 0, 0, 1, 1);
  s.destination = v4(127, 0, 0, 1, 2);
  s.payload = payload;
  std::vector<std::uint8_t> out;
  append_tcp_packet(out, {}, s);
  const std::uint8_t* ip = out.data() + kPcapRecordHeaderSize + kEthernetHeaderSize;
  EXPECT_EQ(load_be16(ip + 2), 65535);
  EXPECT_EQ(out.size(), tcp_packet_record_size(false, payload.size()));
}

TEST(PcapFormat, SyntheticMacTakesTheAddressTail) {
  EXPECT_EQ(synthetic_mac(v4(192, 0, 2, 7, 1)), (std::array<std::uint8_t, 6>{2, 0, 192, 0, 2, 7}));
  EXPECT_EQ(synthetic_mac(v6_doc(9, 1)), (std::array<std::uint8_t, 6>{2, 0, 0, 0, 0, 9}));
}

}  // namespace
}  // namespace uwarp::trace
