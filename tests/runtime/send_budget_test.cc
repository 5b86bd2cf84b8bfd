#include "runtime/send_budget.h"

#include <gtest/gtest.h>

namespace uwarp::runtime {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

TEST(SendBudget, OneOrTwoStreamsKeepAsMuchAsADefaultSendBuffer) {
  EXPECT_EQ(notsent_lowat(kSendBudget, 0), 8 * kMiB);  // before the first stream counts itself
  EXPECT_EQ(notsent_lowat(kSendBudget, 1), 8 * kMiB);
  EXPECT_EQ(notsent_lowat(kSendBudget, 2), 4 * kMiB);
}

TEST(SendBudget, TheShareIsRoundedDownToAPowerOfTwo) {
  EXPECT_EQ(notsent_lowat(kSendBudget, 3), 2 * kMiB);  // 2.67 MiB
  EXPECT_EQ(notsent_lowat(kSendBudget, 4), 2 * kMiB);
  EXPECT_EQ(notsent_lowat(kSendBudget, 5), 1 * kMiB);  // 1.6 MiB
  EXPECT_EQ(notsent_lowat(kSendBudget, 17), 256 * kKiB);
  EXPECT_EQ(notsent_lowat(kSendBudget, 64), 128 * kKiB);
  EXPECT_EQ(notsent_lowat(1000 * kKiB, 3), 256 * kKiB);  // 333 KiB
}

TEST(SendBudget, NoShareFallsBelowTheMinimum) {
  EXPECT_EQ(notsent_lowat(kSendBudget, 256), kMinNotsentLowat);
  EXPECT_EQ(notsent_lowat(kSendBudget, 1001), kMinNotsentLowat);
  EXPECT_EQ(notsent_lowat(kSendBudget, 1'000'000), kMinNotsentLowat);
  EXPECT_EQ(notsent_lowat(1, 1), kMinNotsentLowat);  // a budget below the minimum
}

TEST(SendBudget, ABudgetOfZeroLeavesTheKernelDefault) {
  EXPECT_EQ(notsent_lowat(0, 1), 0u);
  EXPECT_EQ(notsent_lowat(0, 1000), 0u);
}

}  // namespace
}  // namespace uwarp::runtime
