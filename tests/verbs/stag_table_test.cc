// verbs::StagTable: unique nonzero indices, random keys drawn from the random source (the
// kernel's CSPRNG) and no STag without them, lookup by the whole STag, quarantine.
#include "verbs/stag_table.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "verbs/memory_region.h"

namespace uwarp::verbs {
namespace {

MemoryRegionRef make_mr() {
  auto mr = std::make_shared<MemoryRegion>();
  mr->length = 4096;
  return mr;
}

TEST(verbs_stag_table, StagsAreUniqueWithNonzeroIndex) {
  StagTable t;
  std::set<std::uint32_t> stags;
  std::set<std::uint32_t> indices;
  std::vector<MemoryRegionRef> mrs;
  for (int i = 0; i < 5000; ++i) {
    MemoryRegionRef mr = make_mr();
    ASSERT_TRUE(t.insert(mr));
    EXPECT_NE(mr->stag >> 8, 0u) << "index 0 is never handed out";
    EXPECT_TRUE(stags.insert(mr->stag).second);
    EXPECT_TRUE(indices.insert(mr->stag >> 8).second) << "index reused while in use";
    mrs.push_back(mr);
  }
  EXPECT_EQ(t.size(), 5000u);
  for (const auto& mr : mrs) EXPECT_EQ(t.find(mr->stag), mr);
}

TEST(verbs_stag_table, KeysAndIndicesLookRandom) {
  StagTable t;
  std::set<std::uint32_t> keys;
  std::uint32_t index_or = 0;
  std::uint32_t index_and = 0xFFFFFF;
  std::uint32_t previous = 0;
  int ascending = 0;
  for (int i = 0; i < 2000; ++i) {
    MemoryRegionRef mr = make_mr();
    ASSERT_TRUE(t.insert(mr));
    keys.insert(mr->stag & 0xFF);
    index_or |= mr->stag >> 8;
    index_and &= mr->stag >> 8;
    if ((mr->stag >> 8) > previous) ++ascending;
    previous = mr->stag >> 8;
  }
  // 2000 draws of 8 bits: all 256 values are expected; far fewer means a weak generator.
  EXPECT_GT(keys.size(), 200u);
  // Every bit of the 24-bit index is used, and none is stuck at one.
  EXPECT_EQ(index_or, 0xFFFFFFu);
  EXPECT_EQ(index_and, 0u);
  // Not a counter: roughly half of the steps go down.
  EXPECT_GT(ascending, 700);
  EXPECT_LT(ascending, 1300);
}

// A random source that gives `words` (in memory order), over and over, and counts its calls.
RandomSource scripted(std::vector<std::uint64_t> words, int* calls) {
  return [words = std::move(words), calls, at = std::size_t{0}](
             std::span<std::uint8_t> out) mutable -> ssize_t {
    ++*calls;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(words.data());
    const std::size_t total = words.size() * sizeof(std::uint64_t);
    for (std::uint8_t& b : out) b = bytes[at++ % total];
    return static_cast<ssize_t>(out.size());
  };
}

TEST(verbs_stag_table, StagsAreTheRandomSourcesBits) {
  // Each candidate STag is one 64-bit word of the source: the index its low 24 bits, the key the
  // 8 above them. A candidate whose index is 0 or in use is drawn again.
  int calls = 0;
  StagTable t(scripted({0xFFFFFFFFAB000000,   // index 0: never handed out
                        0xDEADBEEF12345678,   // index 0x345678, key 0x12
                        0x0000000099345678,   // index 0x345678 again: in use
                        0x00000000FF000001},  // index 1, key 0xFF
                       &calls));
  MemoryRegionRef a = make_mr(), b = make_mr();
  ASSERT_TRUE(t.insert(a));
  ASSERT_TRUE(t.insert(b));
  EXPECT_EQ(a->stag, 0x34567812u);
  EXPECT_EQ(b->stag, 0x000001FFu);
  EXPECT_EQ(t.find(0x34567812), a);
  EXPECT_EQ(t.find(0x000001FF), b);
  EXPECT_EQ(calls, 1) << "one refill of the pool serves many registrations";
}

TEST(verbs_stag_table, NoRandomBitsNoStag) {
  // A source that cannot give bits fails the registration: there is no predictable fallback.
  int calls = 0;
  StagTable t([&calls](std::span<std::uint8_t>) -> ssize_t {
    ++calls;
    errno = ENOSYS;
    return -1;
  });
  MemoryRegionRef mr = make_mr();
  const Status s = t.insert(mr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), Errc::kIoError);
  EXPECT_NE(s.message().find(std::strerror(ENOSYS)), std::string::npos) << s.to_string();
  EXPECT_EQ(mr->stag, 0u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(calls, 1);
}

TEST(verbs_stag_table, TwoTablesDrawDifferentStags) {
  // From the kernel's CSPRNG: two devices (or two runs) do not hand out the same sequence.
  StagTable a, b;
  int same = 0;
  for (int i = 0; i < 16; ++i) {
    MemoryRegionRef x = make_mr(), y = make_mr();
    ASSERT_TRUE(a.insert(x));
    ASSERT_TRUE(b.insert(y));
    same += x->stag == y->stag;
  }
  EXPECT_LT(same, 16);
}

TEST(verbs_stag_table, LookupNeedsTheWholeStag) {
  StagTable t;
  MemoryRegionRef mr = make_mr();
  ASSERT_TRUE(t.insert(mr));
  EXPECT_EQ(t.find(mr->stag), mr);
  for (std::uint32_t key = 0; key < 256; ++key) {
    const std::uint32_t other = (mr->stag & ~0xFFu) | key;
    if (other != mr->stag) {
      EXPECT_EQ(t.find(other), nullptr) << "key " << key;
    }
  }
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(mr->stag ^ 0x100), nullptr);
}

TEST(verbs_stag_table, EraseInvalidatesAndQuarantinesTheIndex) {
  StagTable t;
  std::vector<MemoryRegionRef> erased;
  std::set<std::uint32_t> erased_indices;
  // Indices are random, so a broken quarantine shows only when a draw hits an erased index:
  // 2048 erased and 2048 drawn out of 2^24 catch that in about one run in five.
  for (int i = 0; i < 2048; ++i) {
    MemoryRegionRef mr = make_mr();
    ASSERT_TRUE(t.insert(mr));
    erased.push_back(mr);
  }
  for (const auto& mr : erased) {
    t.erase(mr->stag);
    erased_indices.insert(mr->stag >> 8);
    EXPECT_EQ(t.find(mr->stag), nullptr);
    // A holder of the region (an in-flight work request) sees it invalid.
    EXPECT_FALSE(mr->valid.load());
  }
  EXPECT_EQ(t.size(), 0u);
  // The next registrations, fewer than the quarantine length, never reuse those indices.
  for (std::size_t i = 0; i < StagTable::kQuarantine - erased.size(); ++i) {
    MemoryRegionRef mr = make_mr();
    ASSERT_TRUE(t.insert(mr));
    ASSERT_EQ(erased_indices.count(mr->stag >> 8), 0u) << "quarantined index reused after " << i;
  }
  // Erasing twice or erasing an unknown STag changes nothing.
  const std::size_t n = t.size();
  t.erase(erased.front()->stag);
  t.erase(0x12345678);
  EXPECT_EQ(t.size(), n);
}

TEST(verbs_stag_table, EraseOfAStaleStagDoesNotTouchTheNewOwner) {
  StagTable t;
  MemoryRegionRef old_mr = make_mr();
  ASSERT_TRUE(t.insert(old_mr));
  const std::uint32_t stale = old_mr->stag;
  t.erase(stale);
  MemoryRegionRef fresh = make_mr();
  ASSERT_TRUE(t.insert(fresh));
  t.erase(stale);  // the application deregisters twice
  EXPECT_EQ(t.find(fresh->stag), fresh);
  EXPECT_TRUE(fresh->valid.load());
}

}  // namespace
}  // namespace uwarp::verbs
