// What counts as a little post, whose doorbell may wait for the posts after it (posts_little,
// runtime/doorbell_batching.h).
#include "verbs/send_wr.h"

#include <gtest/gtest.h>

namespace uwarp::verbs {
namespace {

SendWr wr_of(WrOpcode opcode, const Sge* sges, std::size_t count) {
  SendWr wr;
  wr.opcode = opcode;
  wr.sg_list = {sges, count};
  return wr;
}

TEST(PostsLittle, MessagesUpToFourKibAndReadsUpToAQuarterMib) {
  const Sge half{0, 2048, 0};
  const Sge one{0, 1, 0};
  const Sge two_halves[2] = {half, half};
  const Sge over[3] = {half, half, one};
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kSend, two_halves, 2)));  // 4 KiB in two pieces
  EXPECT_FALSE(posts_little(wr_of(WrOpcode::kSend, over, 3)));       // one byte more
  EXPECT_FALSE(posts_little(wr_of(WrOpcode::kRdmaWrite, over, 3)));
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kRdmaWriteWithImm, &one, 1)));
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kSend, nullptr, 0)));

  const Sge quarter{0, 256 * 1024, 0};
  const Sge past_quarter{0, 256 * 1024 + 1, 0};
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kRdmaRead, &quarter, 1)));
  EXPECT_FALSE(posts_little(wr_of(WrOpcode::kRdmaRead, &past_quarter, 1)));
}

TEST(PostsLittle, AtomicsAndLocalOperationsAlways) {
  const Sge word{0, 8, 0};
  const Sge region{0, 1u << 30, 0};
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kAtomicFetchAdd, &word, 1)));
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kAtomicCompareSwap, &word, 1)));
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kRegisterFastRegion, &region, 1)));
  EXPECT_TRUE(posts_little(wr_of(WrOpcode::kLocalInvalidate, nullptr, 0)));
}

}  // namespace
}  // namespace uwarp::verbs
