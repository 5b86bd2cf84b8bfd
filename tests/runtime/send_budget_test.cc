#include "runtime/send_budget.h"

#include <gtest/gtest.h>

namespace uwarp::runtime {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

TEST(SendBudget, OneStreamKeepsTheWholeBudget) {
  EXPECT_EQ(notsent_lowat(kSendBudget, 0), 2 * kMiB);  // before the first stream counts itself
  EXPECT_EQ(notsent_lowat(kSendBudget, 1), 2 * kMiB);
  EXPECT_EQ(notsent_lowat(kSendBudget, 2), 1 * kMiB);
}

TEST(SendBudget, TheShareIsRoundedDownToAPowerOfTwo) {
  EXPECT_EQ(notsent_lowat(kSendBudget, 3), 512 * kKiB);  // 683 KiB
  EXPECT_EQ(notsent_lowat(kSendBudget, 4), 512 * kKiB);
  EXPECT_EQ(notsent_lowat(kSendBudget, 5), 256 * kKiB);  // 410 KiB
  EXPECT_EQ(notsent_lowat(kSendBudget, 17), 64 * kKiB);
  EXPECT_EQ(notsent_lowat(kSendBudget, 32), 64 * kKiB);
  EXPECT_EQ(notsent_lowat(1000 * kKiB, 3), 256 * kKiB);  // 333 KiB
}

TEST(SendBudget, NoShareFallsBelowTheMinimum) {
  EXPECT_EQ(notsent_lowat(kSendBudget, 64), kMinNotsentLowat);
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
