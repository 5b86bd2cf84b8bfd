// End-to-end over loopback TCP through the native API: every operation, sizes from 0 bytes to
// 16 MiB, CRC off and on, data verified byte for byte.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "support/connected_pair.h"

namespace uwarp::testing {
namespace {

void fill_pattern(std::vector<std::uint8_t>& b, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(rng());
}

struct Case {
  std::size_t size;
  bool crc;
};

class LoopbackOps : public ::testing::TestWithParam<Case> {};

TEST_P(LoopbackOps, SendWriteReadVerified) {
  const Case c = GetParam();
  ConnectedPair::Options o;
  o.buffer_size = std::max<std::size_t>(c.size, 64);
  o.client_params.crc = c.crc;
  ConnectedPair p(o);
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;

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
}

INSTANTIATE_TEST_SUITE_P(Sizes, LoopbackOps,
                         ::testing::Values(Case{0, false}, Case{1, false}, Case{63, false}, Case{4096, false},
                                           Case{65536, false}, Case{1 << 20, false}, Case{16 << 20, false},
                                           Case{0, true}, Case{1, true}, Case{4096, true}, Case{65536, true},
                                           Case{1 << 20, true}, Case{16 << 20, true}),
                         [](const auto& info) {
                           return std::to_string(info.param.size) + (info.param.crc ? "_crc" : "_nocrc");
                         });

}  // namespace
}  // namespace uwarp::testing
