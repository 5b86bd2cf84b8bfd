// verbs::ReceiveQueue: FIFO order, SGE and depth limits, drain, and the SRQ limit event.
#include "verbs/receive_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace uwarp::verbs {
namespace {

// The oldest entry, taken into a fresh one.
std::optional<RecvEntry> take(ReceiveQueue& q) {
  RecvEntry e;
  if (!q.take(e)) return std::nullopt;
  return e;
}

RecvWr wr(std::uint64_t id, std::span<const Sge> sges = {}) {
  RecvWr w;
  w.wr_id = id;
  w.sg_list = sges;
  return w;
}

TEST(verbs_receive_queue, TakesInPostingOrderWithTheirSges) {
  ReceiveQueue q(nullptr, 8, 2);
  const Sge a[] = {{0x1000, 10, 7}, {0x2000, 20, 8}};
  const Sge b[] = {{0x3000, 30, 9}};
  ASSERT_TRUE(q.post(wr(1, a)).is_ok());
  ASSERT_TRUE(q.post(wr(2, b)).is_ok());
  ASSERT_TRUE(q.post(wr(3)).is_ok());
  EXPECT_EQ(q.size(), 3u);
  auto e1 = take(q);
  ASSERT_TRUE(e1.has_value());
  EXPECT_EQ(e1->wr_id, 1u);
  ASSERT_EQ(e1->sges.size(), 2u);
  EXPECT_EQ(e1->sges[1].addr, 0x2000u);
  EXPECT_EQ(e1->sges[1].length, 20u);
  EXPECT_EQ(e1->sges[1].lkey, 8u);
  EXPECT_EQ(take(q)->wr_id, 2u);
  auto e3 = take(q);
  ASSERT_TRUE(e3.has_value());
  EXPECT_EQ(e3->wr_id, 3u);
  EXPECT_TRUE(e3->sges.empty());
  EXPECT_FALSE(take(q).has_value());
  EXPECT_EQ(q.size(), 0u);
}

// An entry taken into one that held another request's SGEs carries only its own, also after
// the queue's slots have been reused and grown.
TEST(verbs_receive_queue, TakingIntoAUsedEntryLeavesOnlyTheNewSges) {
  ReceiveQueue q(nullptr, 64, 3);
  RecvEntry e;
  std::uint64_t posted = 0;
  std::uint64_t taken = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3; ++i, ++posted) {
      const std::uint32_t n = static_cast<std::uint32_t>(posted % 4);  // 0 to 3 SGEs
      std::vector<Sge> sges;
      for (std::uint32_t k = 0; k < n; ++k) sges.push_back({posted * 16 + k, k + 1, 0});
      ASSERT_TRUE(q.post(wr(posted, sges)).is_ok());
    }
    for (int i = 0; i < 2; ++i, ++taken) {
      ASSERT_TRUE(q.take(e));
      ASSERT_EQ(e.wr_id, taken);
      ASSERT_EQ(e.sges.size(), taken % 4);
      for (std::size_t k = 0; k < e.sges.size(); ++k) EXPECT_EQ(e.sges[k].addr, taken * 16 + k);
    }
  }
}

TEST(verbs_receive_queue, SgeAndDepthLimits) {
  ReceiveQueue q(nullptr, 2, 1);
  const Sge two[] = {{0, 1, 1}, {0, 1, 1}};
  const Status too_many = q.post(wr(1, two));
  EXPECT_EQ(too_many.code(), Errc::kInvalidArgument);
  EXPECT_EQ(q.size(), 0u);
  ASSERT_TRUE(q.post(wr(1)).is_ok());
  ASSERT_TRUE(q.post(wr(2)).is_ok());
  EXPECT_EQ(q.post(wr(3)).code(), Errc::kNoResources);
  EXPECT_EQ(q.size(), 2u);
  (void)take(q);
  EXPECT_TRUE(q.post(wr(4)).is_ok());
  EXPECT_EQ(q.max_wr(), 2u);
  EXPECT_EQ(q.max_sge(), 1u);
}

TEST(verbs_receive_queue, DrainReturnsEverythingInOrder) {
  ReceiveQueue q(nullptr, 16, 1);
  for (std::uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(q.post(wr(i)).is_ok());
  (void)take(q);
  const std::vector<RecvEntry> rest = q.drain();
  ASSERT_EQ(rest.size(), 9u);
  for (std::size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i].wr_id, i + 1);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(q.drain().empty());
  EXPECT_FALSE(take(q).has_value());
}

TEST(verbs_receive_queue, LimitFiresOnceBelowTheLimitThenDisarms) {
  ReceiveQueue q(nullptr, 16, 1);
  for (std::uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(q.post(wr(i)).is_ok());
  EXPECT_FALSE(q.consume_limit_event());
  q.arm_limit(3);
  (void)take(q);  // 5 left
  (void)take(q);  // 4 left
  (void)take(q);  // 3 left: not below
  EXPECT_FALSE(q.consume_limit_event());
  (void)take(q);  // 2 left: below 3
  EXPECT_TRUE(q.consume_limit_event());
  EXPECT_FALSE(q.consume_limit_event()) << "one event per arming";
  (void)take(q);
  EXPECT_FALSE(q.consume_limit_event()) << "disarmed after firing";
  // Armed again, it fires again.
  q.arm_limit(5);
  (void)take(q);
  EXPECT_TRUE(q.consume_limit_event());
}

TEST(verbs_receive_queue, LimitZeroNeverFires) {
  ReceiveQueue q(nullptr, 4, 1);
  ASSERT_TRUE(q.post(wr(1)).is_ok());
  q.arm_limit(0);
  (void)take(q);
  (void)take(q);
  EXPECT_FALSE(q.consume_limit_event());
}

}  // namespace
}  // namespace uwarp::verbs
