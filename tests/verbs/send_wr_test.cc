// What counts as a little post, whose doorbell may wait for the posts after it (posts_little,
// runtime/doorbell_batching.h).
#include "verbs/send_wr.h"

#include <gtest/gtest.h>

namespace uwarp::verbs {
namespace {

TEST(PostsLittle, MessagesOfFewFpdusUpTo64KibAndReadsUpToAQuarterMib) {
  // FPDUs of 1,424 payload bytes (MSS 1448): messages of up to sixteen of them.
  constexpr std::uint64_t kSegment = 1424;
  EXPECT_TRUE(posts_little(WrOpcode::kSend, 16 * kSegment, kSegment));
  EXPECT_FALSE(posts_little(WrOpcode::kSend, 16 * kSegment + 1, kSegment));  // a 17th FPDU
  EXPECT_FALSE(posts_little(WrOpcode::kRdmaWrite, 65536, kSegment));
  EXPECT_TRUE(posts_little(WrOpcode::kRdmaWriteWithImm, 1, kSegment));
  EXPECT_TRUE(posts_little(WrOpcode::kSend, 0, kSegment));

  // FPDUs of about 64 KiB (loopback): messages of up to 64 KiB, not one byte more.
  constexpr std::uint64_t kLoopback = 65465;
  EXPECT_TRUE(posts_little(WrOpcode::kRdmaWrite, 65536, kLoopback));
  EXPECT_FALSE(posts_little(WrOpcode::kRdmaWrite, 65537, kLoopback));
  EXPECT_FALSE(posts_little(WrOpcode::kSend, 1 << 20, kLoopback));

  // Reads: their Request is one small FPDU whatever they read.
  EXPECT_TRUE(posts_little(WrOpcode::kRdmaRead, 256 * 1024, kSegment));
  EXPECT_FALSE(posts_little(WrOpcode::kRdmaRead, 256 * 1024 + 1, kLoopback));
}

TEST(PostsLittle, AtomicsAndLocalOperationsAlways) {
  EXPECT_TRUE(posts_little(WrOpcode::kAtomicFetchAdd, 8, 1));
  EXPECT_TRUE(posts_little(WrOpcode::kAtomicCompareSwap, 8, 1));
  EXPECT_TRUE(posts_little(WrOpcode::kRegisterFastRegion, 1u << 30, 1));
  EXPECT_TRUE(posts_little(WrOpcode::kLocalInvalidate, 0, 1));
}

}  // namespace
}  // namespace uwarp::verbs
