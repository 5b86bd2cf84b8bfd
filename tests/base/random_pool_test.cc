// RandomPool: words are the source's bytes in order, drawn a whole refill at a time; short and
// interrupted reads are completed; a failure is reported, never papered over; the kernel's
// source gives words that differ.
#include "base/random_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace uwarp {
namespace {

// A scripted source: its bytes count 0, 1, 2, ... (mod 256), so every word is known; each call
// gives at most `max_chunk` bytes; `outcomes` scripts the next calls (0: succeed, else fail
// with that errno; when empty, succeed). It records the size of every span it was asked to fill.
struct FakeSource {
  std::vector<std::size_t> requests;
  std::deque<int> outcomes;
  std::size_t max_chunk = std::numeric_limits<std::size_t>::max();
  bool give_nothing = false;
  std::uint8_t next_byte = 0;

  RandomSource source() {
    return [this](std::span<std::uint8_t> out) -> ssize_t {
      requests.push_back(out.size());
      const int outcome = outcomes.empty() ? 0 : outcomes.front();
      if (!outcomes.empty()) outcomes.pop_front();
      if (outcome != 0) {
        errno = outcome;
        return -1;
      }
      if (give_nothing) return 0;
      const std::size_t n = std::min(out.size(), max_chunk);
      for (std::size_t i = 0; i < n; ++i) out[i] = next_byte++;
      return static_cast<ssize_t>(n);
    };
  }
};

// The word made of the eight source bytes that start with `first`.
std::uint64_t word_at(std::uint8_t first) {
  std::uint8_t b[8];
  for (std::uint8_t& v : b) v = first++;
  std::uint64_t w = 0;
  std::memcpy(&w, b, sizeof(w));
  return w;
}

constexpr std::size_t kWordsPerRefill = RandomPool::kRefillBytes / sizeof(std::uint64_t);

TEST(RandomPool, DrawsTheSourcesBytesInOrderOneRefillAtATime) {
  FakeSource fake;
  RandomPool pool(fake.source());
  EXPECT_TRUE(fake.requests.empty()) << "nothing is read before the first draw";
  for (std::size_t i = 0; i < kWordsPerRefill; ++i) {
    auto w = pool.next();
    ASSERT_TRUE(w);
    EXPECT_EQ(*w, word_at(static_cast<std::uint8_t>(8 * i))) << "word " << i;
  }
  EXPECT_EQ(fake.requests, std::vector<std::size_t>{RandomPool::kRefillBytes});
  auto after = pool.next();
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, word_at(0)) << "the 257th byte of the source (it counts mod 256)";
  EXPECT_EQ(fake.requests, (std::vector<std::size_t>{256, 256})) << "one refill per 32 words";
}

TEST(RandomPool, ShortReadsAreContinuedUntilTheRefillIsWhole) {
  FakeSource fake;
  fake.max_chunk = 100;
  RandomPool pool(fake.source());
  ASSERT_TRUE(pool.next());
  EXPECT_EQ(fake.requests, (std::vector<std::size_t>{256, 156, 56}));
  for (std::size_t i = 1; i < kWordsPerRefill; ++i) {
    auto w = pool.next();
    ASSERT_TRUE(w);
    EXPECT_EQ(*w, word_at(static_cast<std::uint8_t>(8 * i)));
  }
  EXPECT_EQ(fake.requests.size(), 3u);
}

TEST(RandomPool, InterruptedReadsAreRetried) {
  FakeSource fake;
  fake.outcomes = {EINTR, EINTR};
  RandomPool pool(fake.source());
  auto w = pool.next();
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_EQ(*w, word_at(0));
  EXPECT_EQ(fake.requests, (std::vector<std::size_t>{256, 256, 256}));
}

TEST(RandomPool, AFailureIsReportedAndNothingOfItsRefillHandedOut) {
  FakeSource fake;
  fake.max_chunk = 100;
  fake.outcomes = {0, ENOSYS};  // 100 bytes, then a final error
  RandomPool pool(fake.source());
  auto failed = pool.next();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), Errc::kIoError);
  EXPECT_NE(failed.error().message().find("getrandom"), std::string::npos);
  EXPECT_NE(failed.error().message().find(std::strerror(ENOSYS)), std::string::npos);
  EXPECT_EQ(fake.requests.size(), 2u) << "a final error is not retried";
  // The next draw refills afresh: the 100 bytes of the failed refill are never used.
  auto w = pool.next();
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, word_at(100));
}

TEST(RandomPool, ASourceThatGivesNothingIsAFailure) {
  FakeSource fake;
  fake.give_nothing = true;
  RandomPool pool(fake.source());
  auto w = pool.next();
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), Errc::kIoError);
  EXPECT_EQ(fake.requests.size(), 1u) << "no endless retry";
}

TEST(RandomPool, TheKernelSourceGivesWordsThatDiffer) {
  RandomPool a;
  RandomPool b;
  std::set<std::uint64_t> words;
  for (int i = 0; i < 100; ++i) {
    auto wa = a.next();
    auto wb = b.next();
    ASSERT_TRUE(wa && wb);
    words.insert(*wa);
    words.insert(*wb);
  }
  // 200 draws of 64 bits: a repeat has a chance of about 2^-50.
  EXPECT_EQ(words.size(), 200u) << "two pools, and the refills of one, give different words";
}

}  // namespace
}  // namespace uwarp
