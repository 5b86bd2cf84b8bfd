// SlotRing: first-in first-out across wrap-around and growth, and slots reused as recycle()
// left them.
#include "base/slot_ring.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace uwarp {
namespace {

TEST(SlotRing, KeepsOrderAcrossWrapAroundAndGrowth) {
  SlotRing<int> ring;
  int next_in = 0;
  int next_out = 0;
  // Pushes run ahead of pops so that the ring wraps and grows with its head in the middle.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 3; ++i) ring.push_back() = next_in++;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(ring.front(), next_out++);
      ring.pop_front();
    }
    ASSERT_EQ(ring.size(), static_cast<std::size_t>(next_in - next_out));
    for (std::size_t i = 0; i < ring.size(); ++i) ASSERT_EQ(ring[i], next_out + static_cast<int>(i));
    ASSERT_EQ(ring.back(), next_in - 1);
  }
  ring.clear();
  EXPECT_TRUE(ring.empty());
}

struct Slot {
  int value = 0;
  std::vector<int> data;
  int recycled = 0;
  void recycle() {
    value = 0;
    data.clear();
    ++recycled;
  }
};

TEST(SlotRing, PopRecyclesTheSlotAndPushHandsItOutAgainWithItsStorage) {
  SlotRing<Slot> ring;
  Slot& first = ring.push_back();
  first.value = 7;
  first.data.assign(100, 1);
  const std::size_t capacity = first.data.capacity();
  ring.pop_front();
  EXPECT_TRUE(ring.empty());
  // Four slots before the ring grows: push until the first one comes round again.
  for (int i = 0; i < 3; ++i) {
    ring.push_back();
    ring.pop_front();
  }
  Slot& again = ring.push_back();
  EXPECT_EQ(again.value, 0);
  EXPECT_TRUE(again.data.empty());
  EXPECT_EQ(again.recycled, 1);
  EXPECT_EQ(again.data.capacity(), capacity) << "the vector's storage is kept";
}

TEST(SlotRing, ElementsWithoutRecycleAreReset) {
  SlotRing<std::vector<int>> ring;
  ring.push_back() = {1, 2, 3};
  ring.pop_front();
  for (int i = 0; i < 3; ++i) {
    ring.push_back();
    ring.pop_front();
  }
  EXPECT_TRUE(ring.push_back().empty());
}

}  // namespace
}  // namespace uwarp
