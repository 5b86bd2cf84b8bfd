// The packets of a traced connection: the synthesized handshake from the end that sent first,
// consecutive sequence numbers per direction, acknowledgements, segmentation, the FIN.
#include "trace/tcp_flow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uwarp::trace {
namespace {

struct Packet {
  std::uint16_t source_port;
  std::uint32_t seq;
  std::uint32_t ack;
  std::uint8_t flags;
  std::vector<std::uint8_t> payload;
};

// Parses the IPv4 records append_tcp_packet wrote.
std::vector<Packet> parse(const std::vector<std::uint8_t>& out) {
  std::vector<Packet> packets;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::uint8_t* r = out.data() + at;
    const std::uint32_t len = r[8] | (r[9] << 8) | (r[10] << 16) | (std::uint32_t{r[11]} << 24);
    const std::uint8_t* tcp = r + kPcapRecordHeaderSize + kEthernetHeaderSize + kIpv4HeaderSize;
    const std::uint8_t* end = r + kPcapRecordHeaderSize + len;
    packets.push_back({load_be16(tcp), load_be32(tcp + 4), load_be32(tcp + 8), tcp[13],
                       std::vector<std::uint8_t>(tcp + kTcpHeaderSize, end)});
    at += kPcapRecordHeaderSize + len;
  }
  return packets;
}

Endpoint ep(std::uint8_t last, std::uint16_t port) {
  Endpoint e;
  e.address = {127, 0, 0, last};
  e.port = port;
  return e;
}

TEST(TcpFlow, InitiatorSendsFirst) {
  TcpFlow flow(ep(1, 4000), ep(2, 5000));
  std::vector<std::uint8_t> out;
  const std::vector<std::uint8_t> request = {1, 2, 3, 4, 5};
  const std::vector<std::uint8_t> reply = {9, 8, 7};
  flow.bytes({}, true, request, out);
  flow.bytes({}, false, reply, out);
  flow.bytes({}, true, reply, out);
  const auto p = parse(out);
  ASSERT_EQ(p.size(), 6u);
  // SYN, SYN-ACK, ACK.
  EXPECT_EQ(p[0].source_port, 4000);
  EXPECT_EQ(p[0].flags, kTcpSyn);
  EXPECT_EQ(p[0].seq, TcpFlow::kInitiatorIsn);
  EXPECT_EQ(p[1].source_port, 5000);
  EXPECT_EQ(p[1].flags, kTcpSyn | kTcpAck);
  EXPECT_EQ(p[1].seq, TcpFlow::kResponderIsn);
  EXPECT_EQ(p[1].ack, TcpFlow::kInitiatorIsn + 1);
  EXPECT_EQ(p[2].flags, kTcpAck);
  EXPECT_EQ(p[2].seq, TcpFlow::kInitiatorIsn + 1);
  EXPECT_EQ(p[2].ack, TcpFlow::kResponderIsn + 1);
  // Data: each direction's numbers run on, each segment acknowledges the other direction.
  EXPECT_EQ(p[3].payload, request);
  EXPECT_EQ(p[3].seq, TcpFlow::kInitiatorIsn + 1);
  EXPECT_EQ(p[3].ack, TcpFlow::kResponderIsn + 1);
  EXPECT_EQ(p[3].flags, kTcpAck | kTcpPsh);
  EXPECT_EQ(p[4].source_port, 5000);
  EXPECT_EQ(p[4].payload, reply);
  EXPECT_EQ(p[4].seq, TcpFlow::kResponderIsn + 1);
  EXPECT_EQ(p[4].ack, TcpFlow::kInitiatorIsn + 1 + 5);
  EXPECT_EQ(p[5].seq, TcpFlow::kInitiatorIsn + 1 + 5);
  EXPECT_EQ(p[5].ack, TcpFlow::kResponderIsn + 1 + 3);
  // The FIN takes the next number; a second close adds nothing.
  out.clear();
  flow.closed({}, out);
  flow.closed({}, out);
  const auto fin = parse(out);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].flags, kTcpFin | kTcpAck);
  EXPECT_EQ(fin[0].seq, TcpFlow::kInitiatorIsn + 1 + 5 + 3);
}

TEST(TcpFlow, ResponderReceivesFirst) {
  TcpFlow flow(ep(2, 5000), ep(1, 4000));
  std::vector<std::uint8_t> out;
  const std::vector<std::uint8_t> request = {1, 2};
  flow.bytes({}, false, request, out);
  const auto p = parse(out);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].source_port, 4000);  // the peer's SYN
  EXPECT_EQ(p[0].flags, kTcpSyn);
  EXPECT_EQ(p[1].source_port, 5000);
  EXPECT_EQ(p[1].flags, kTcpSyn | kTcpAck);
  EXPECT_EQ(p[3].source_port, 4000);
  EXPECT_EQ(p[3].seq, TcpFlow::kInitiatorIsn + 1);
  EXPECT_EQ(p[3].payload, request);
}

TEST(TcpFlow, LargeWritesAreSplitIntoSegments) {
  TcpFlow flow(ep(1, 1), ep(2, 2));
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> big(2 * kMaxSegmentPayload + 10);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7);
  flow.bytes({}, true, big, out);
  const auto p = parse(out);
  ASSERT_EQ(p.size(), 3u + 3u);
  std::vector<std::uint8_t> joined;
  std::uint32_t next = TcpFlow::kInitiatorIsn + 1;
  for (std::size_t i = 3; i < p.size(); ++i) {
    EXPECT_LE(p[i].payload.size(), kMaxSegmentPayload);
    EXPECT_EQ(p[i].seq, next);
    next += static_cast<std::uint32_t>(p[i].payload.size());
    joined.insert(joined.end(), p[i].payload.begin(), p[i].payload.end());
  }
  EXPECT_EQ(joined, big);
}

TEST(TcpFlow, SegmentsBeginAtMpaUnits) {
  TcpFlow flow(ep(1, 1), ep(2, 2));
  std::vector<std::uint8_t> out;
  const std::string key = "MPA ID Rep Frame";
  std::vector<std::uint8_t> reply(key.begin(), key.end());
  reply.insert(reply.end(), {0x00, 2, 0, 0});
  // An FPDU of 6 bytes of ULPDU: length field, ULPDU, CRC (2 + 6 + 0 pad + 4).
  const std::vector<std::uint8_t> fpdu = {0, 6, 1, 2, 3, 4, 5, 6, 9, 9, 9, 9};
  // The reply, one FPDU and half the next, received at once: two segments now.
  std::vector<std::uint8_t> piece = reply;
  piece.insert(piece.end(), fpdu.begin(), fpdu.end());
  piece.insert(piece.end(), fpdu.begin(), fpdu.begin() + 5);
  flow.bytes({}, false, piece, out);
  auto p = parse(out);
  ASSERT_EQ(p.size(), 3u + 2u);
  EXPECT_EQ(p[3].payload, reply);
  EXPECT_EQ(p[4].payload, fpdu);
  // The rest of the second FPDU completes it: one segment of all of it.
  out.clear();
  flow.bytes({}, false, ConstByteSpan(fpdu).subspan(5), out);
  p = parse(out);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].payload, fpdu);
  EXPECT_EQ(p[0].seq, TcpFlow::kInitiatorIsn + 1 + reply.size() + fpdu.size());
  // A partial FPDU held at the close is written before the FIN.
  out.clear();
  flow.bytes({}, false, ConstByteSpan(fpdu).first(3), out);
  EXPECT_TRUE(out.empty());
  flow.closed({}, out);
  p = parse(out);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].payload, std::vector<std::uint8_t>(fpdu.begin(), fpdu.begin() + 3));
  EXPECT_EQ(p[1].flags, kTcpFin | kTcpAck);
}

TEST(TcpFlow, ClosedBeforeAnyBytesWritesNothing) {
  TcpFlow flow(ep(1, 1), ep(2, 2));
  std::vector<std::uint8_t> out;
  flow.closed({}, out);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(flow.opened());
}

}  // namespace
}  // namespace uwarp::trace
