// UWARP_PCAP through the native API, once per I/O backend: CTest runs this binary with
// UWARP_PCAP set (tests/integration/CMakeLists.txt), so the process traces from its start. A
// loopback connection (both ends in this process: traced once) moves a Send, a large Write
// (received by direct placement) and a Read; the file must then hold one synthesized handshake,
// the MPA request and reply, and every byte both ways in consecutive segments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "io/pcap_recorder.h"
#include "support/connected_pair.h"
#include "support/per_backend.h"
#include "trace/pcap_format.h"

namespace uwarp::testing {
namespace {

using trace::kEthernetHeaderSize;
using trace::kIpv4HeaderSize;
using trace::kPcapFileHeaderSize;
using trace::kPcapRecordHeaderSize;
using trace::kTcpHeaderSize;

std::uint32_t le32(const std::uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (std::uint32_t{p[3]} << 24);
}

struct Direction {
  int syns = 0;
  int fins = 0;
  std::uint32_t next_seq = 0;
  bool seq_gap = false;
  std::vector<std::uint8_t> stream;
};

bool contains(const std::vector<std::uint8_t>& hay, const std::vector<std::uint8_t>& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

class PcapTrace : public PerBackend {};

TEST_P(PcapTrace, RecordsEveryByteOfALoopbackConnectionOnce) {
  const char* pcap_pattern = std::getenv("UWARP_PCAP");
  if (pcap_pattern == nullptr) GTEST_SKIP() << "UWARP_PCAP is not set (run through CTest)";
  ASSERT_TRUE(io::pcap_tracing());
  const std::string path = io::pcap_file_name(pcap_pattern, ::getpid());

  constexpr std::size_t kSize = 300 * 1024;  // more than a segment, placed directly
  std::uint16_t client_port = 0;  // this test's connection (the process may have had others)
  ConnectedPair::Options o;
  o.buffer_size = kSize;
  o.client_params.crc = true;
  {
    ConnectedPair p(o);
    ASSERT_TRUE(p.connected);
    Side& cl = *p.client;
    Side& sv = *p.server;
    const std::string local = cl.conn.local_address();
    client_port = static_cast<std::uint16_t>(std::stoi(local.substr(local.rfind(':') + 1)));
    const auto data = pattern(kSize, 5);
    std::copy(data.begin(), data.end(), cl.buf.begin());
    Sge rsge = sv.mr.sge(0, 1000);
    ASSERT_TRUE(sv.qp.post_recv({1, {&rsge, 1}}));
    Sge ssge = cl.mr.sge(0, 1000);
    SendWr send{.wr_id = 2, .opcode = WrOpcode::kSend, .sg_list = {&ssge, 1}};
    ASSERT_TRUE(cl.qp.post_send(send));
    ASSERT_TRUE(wait_wc(cl.cq));
    ASSERT_TRUE(wait_wc(sv.cq));
    Sge wsge = cl.mr.sge(0, kSize);
    ASSERT_TRUE(cl.qp.post_send(remote_wr(WrOpcode::kRdmaWrite, wsge, sv, 0, 3)));
    auto wwc = wait_wc(cl.cq);
    ASSERT_TRUE(wwc);
    EXPECT_EQ(wwc->status, WcStatus::kSuccess);
    ASSERT_TRUE(cl.qp.post_send(remote_wr(WrOpcode::kRdmaRead, wsge, sv, 0, 4)));
    auto rwc = wait_wc(cl.cq);
    ASSERT_TRUE(rwc);
    EXPECT_EQ(rwc->status, WcStatus::kSuccess);
    cl.conn.disconnect();
    wait_event(p.client_events(), CmEventType::kDisconnected);
    wait_event(p.server_events(), CmEventType::kDisconnected);
  }
  io::pcap_flush();

  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::vector<std::uint8_t> file((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
  ASSERT_GE(file.size(), kPcapFileHeaderSize);
  EXPECT_EQ(le32(file.data()), 0xA1B2C3D4u);
  EXPECT_EQ(le32(file.data() + 20), trace::kLinkTypeEthernet);

  std::map<std::uint16_t, Direction> by_port;  // by source port
  std::size_t at = kPcapFileHeaderSize;
  int records = 0;
  while (at + kPcapRecordHeaderSize <= file.size()) {
    const std::uint8_t* r = file.data() + at;
    const std::uint32_t len = le32(r + 8);
    ASSERT_LE(at + kPcapRecordHeaderSize + len, file.size()) << "a record cut short";
    ASSERT_LE(len, trace::kEthernetHeaderSize + 65535);
    EXPECT_GT(le32(r), 1600000000u) << "timestamps are real time";
    const std::uint8_t* ip = r + kPcapRecordHeaderSize + kEthernetHeaderSize;
    ASSERT_EQ(ip[0], 0x45);
    const std::uint8_t* tcp = ip + kIpv4HeaderSize;
    const std::uint8_t flags = tcp[13];
    ++records;
    at += kPcapRecordHeaderSize + len;
    if (load_be16(tcp) != client_port && load_be16(tcp + 2) != client_port) continue;
    Direction& d = by_port[load_be16(tcp)];
    const std::uint32_t seq = load_be32(tcp + 4);
    const std::size_t payload = len - kEthernetHeaderSize - kIpv4HeaderSize - kTcpHeaderSize;
    if (flags & trace::kTcpSyn) {
      ++d.syns;
      d.next_seq = seq + 1;
    } else {
      if (seq != d.next_seq) d.seq_gap = true;
      d.next_seq = seq + static_cast<std::uint32_t>(payload) + ((flags & trace::kTcpFin) ? 1 : 0);
      if (flags & trace::kTcpFin) ++d.fins;
      d.stream.insert(d.stream.end(), tcp + kTcpHeaderSize, tcp + kTcpHeaderSize + payload);
    }
  }
  EXPECT_EQ(at, file.size());
  // This connection, traced once: two directions, one SYN each.
  ASSERT_EQ(by_port.size(), 2u) << records << " records";
  const std::string req = "MPA ID Req Frame";
  const std::string rep = "MPA ID Rep Frame";
  const Direction* client = nullptr;
  const Direction* server = nullptr;
  for (const auto& [port, d] : by_port) {
    EXPECT_EQ(d.syns, 1);
    EXPECT_FALSE(d.seq_gap) << "port " << port;
    ASSERT_GE(d.stream.size(), 16u);
    if (std::equal(req.begin(), req.end(), d.stream.begin())) client = &d;
    if (std::equal(rep.begin(), rep.end(), d.stream.begin())) server = &d;
  }
  // The end traced closed: its FIN (the other end's close is not seen by the traced socket).
  EXPECT_EQ(by_port.begin()->second.fins + std::next(by_port.begin())->second.fins, 1);
  ASSERT_NE(client, nullptr) << "no stream starts with the MPA request";
  ASSERT_NE(server, nullptr) << "no stream starts with the MPA reply";
  // Every byte of the Write went out in the client's stream and came back in the Read Response
  // (checked in pieces: FPDU framing and CRCs lie between them).
  const auto data = pattern(kSize, 5);
  for (std::size_t off = 0; off + 1000 <= kSize; off += 50 * 1024) {
    const std::vector<std::uint8_t> piece(data.begin() + off, data.begin() + off + 1000);
    EXPECT_TRUE(contains(client->stream, piece)) << "Write bytes at " << off;
    EXPECT_TRUE(contains(server->stream, piece)) << "Read Response bytes at " << off;
  }
  EXPECT_GE(client->stream.size(), kSize + 1000);
  EXPECT_GE(server->stream.size(), kSize);
}

INSTANTIATE_TEST_SUITE_P(Backends, PcapTrace, ::testing::Values("epoll", "uring"), backend_name);

// The file goes once every test of the process has read it.
class RemovePcapFile : public ::testing::Environment {
 public:
  void TearDown() override {
    io::pcap_flush();
    if (const char* p = std::getenv("UWARP_PCAP"))
      ::unlink(io::pcap_file_name(p, ::getpid()).c_str());
  }
};
const auto* const kRemovePcapFile = ::testing::AddGlobalTestEnvironment(new RemovePcapFile);

}  // namespace
}  // namespace uwarp::testing
