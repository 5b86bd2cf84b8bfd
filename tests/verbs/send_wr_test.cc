// What counts as a little post, whose doorbell may wait for the posts after it (posts_little,
// runtime/doorbell_batching.h).
#include "verbs/send_wr.h"

#include <gtest/gtest.h>

namespace uwarp::verbs {
namespace {

TEST(PostsLittle, MessagesUpToFourKibAndReadsUpToAQuarterMib) {
  EXPECT_TRUE(posts_little(WrOpcode::kSend, 4096));
  EXPECT_FALSE(posts_little(WrOpcode::kSend, 4097));  // one byte more
  EXPECT_FALSE(posts_little(WrOpcode::kRdmaWrite, 4097));
  EXPECT_TRUE(posts_little(WrOpcode::kRdmaWriteWithImm, 1));
  EXPECT_TRUE(posts_little(WrOpcode::kSend, 0));

  EXPECT_TRUE(posts_little(WrOpcode::kRdmaRead, 256 * 1024));
  EXPECT_FALSE(posts_little(WrOpcode::kRdmaRead, 256 * 1024 + 1));
}

TEST(PostsLittle, AtomicsAndLocalOperationsAlways) {
  EXPECT_TRUE(posts_little(WrOpcode::kAtomicFetchAdd, 8));
  EXPECT_TRUE(posts_little(WrOpcode::kAtomicCompareSwap, 8));
  EXPECT_TRUE(posts_little(WrOpcode::kRegisterFastRegion, 1u << 30));
  EXPECT_TRUE(posts_little(WrOpcode::kLocalInvalidate, 0));
}

}  // namespace
}  // namespace uwarp::verbs
