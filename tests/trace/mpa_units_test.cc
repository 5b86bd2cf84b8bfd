// MpaUnits: one direction's stream cut into its MPA frame and FPDUs, whatever pieces it comes
// in, with and without markers (the stream with markers from the plain RFC 5044 model of
// tests/support/marker_model.h); a stream that is not MPA is handed out as it comes.
#include "trace/mpa_units.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "support/marker_model.h"

namespace uwarp::trace {
namespace {

std::vector<std::uint8_t> frame(bool request, bool markers, std::size_t private_data) {
  const std::string key = request ? "MPA ID Req Frame" : "MPA ID Rep Frame";
  std::vector<std::uint8_t> f(key.begin(), key.end());
  f.push_back(markers ? 0x80 : 0x00);
  f.push_back(2);
  f.push_back(static_cast<std::uint8_t>(private_data >> 8));
  f.push_back(static_cast<std::uint8_t>(private_data));
  f.resize(f.size() + private_data, 0x77);
  return f;
}

// FPDUs without markers of the given ULPDU lengths (CRC field zero), and their sizes.
std::vector<std::uint8_t> fpdus(const std::vector<std::size_t>& ulpdus,
                                std::vector<std::size_t>* sizes) {
  std::vector<std::uint8_t> out;
  for (std::size_t len : ulpdus) {
    const std::size_t start = out.size();
    out.push_back(static_cast<std::uint8_t>(len >> 8));
    out.push_back(static_cast<std::uint8_t>(len));
    for (std::size_t i = 0; i < len; ++i) out.push_back(static_cast<std::uint8_t>(i + 1));
    while ((out.size() - start) % 4 != 0) out.push_back(0);
    out.insert(out.end(), 4, 0);
    if (sizes) sizes->push_back(out.size() - start);
  }
  return out;
}

// Feeds `stream` in random pieces; returns the units in the order handed out.
std::vector<std::size_t> units_of(MpaUnits& u, const std::vector<std::uint8_t>& stream,
                                  unsigned seed, bool markers_after_frame) {
  std::mt19937 rng(seed);
  std::vector<std::size_t> units;
  std::size_t at = 0;
  while (at < stream.size()) {
    const std::size_t n = std::min<std::size_t>(stream.size() - at, 1 + rng() % 3000);
    u.add(ConstByteSpan(stream).subspan(at, n));
    at += n;
    for (std::size_t unit; (unit = u.next_unit()) != 0;) {
      units.push_back(unit);
      u.take(unit);
      if (u.frame_seen()) u.set_markers(markers_after_frame);
    }
  }
  return units;
}

TEST(MpaUnits, FrameThenFpdusWithoutMarkers) {
  std::vector<std::size_t> sizes;
  std::vector<std::uint8_t> stream = frame(false, false, 12);
  const auto f = fpdus({14, 1000, 18, 65000, 3}, &sizes);
  stream.insert(stream.end(), f.begin(), f.end());
  for (unsigned seed = 1; seed <= 5; ++seed) {
    MpaUnits u;
    std::vector<std::size_t> expected = {20 + 12};
    expected.insert(expected.end(), sizes.begin(), sizes.end());
    EXPECT_EQ(units_of(u, stream, seed, false), expected) << "seed " << seed;
    EXPECT_EQ(u.held(), 0u);
    EXPECT_TRUE(u.frame_seen());
    EXPECT_FALSE(u.frame_asks_markers());
  }
}

TEST(MpaUnits, FpdusWithMarkers) {
  const std::vector<std::size_t> ulpdus = {14, 1000, 510, 4000, 22, 2044, 18};
  std::vector<std::size_t> plain_sizes;
  const auto plain = fpdus(ulpdus, &plain_sizes);
  const auto marked = testing::with_markers(plain, false);
  // The unit sizes expected: the model's FPDUs, cut where each next one begins.
  std::vector<std::size_t> expected = {20};
  std::size_t marked_at = 0;
  for (std::size_t s : plain_sizes) {
    // Each FPDU grows by the markers placed in it: count them by walking the model's output.
    std::size_t n = 0, placed = 0;
    while (placed < s) {
      if ((marked_at + n) % 512 == 0) {
        n += 4;
      } else {
        ++n;
        ++placed;
      }
    }
    expected.push_back(n);
    marked_at += n;
  }
  ASSERT_EQ(marked_at, marked.size());
  std::vector<std::uint8_t> stream = frame(true, true, 0);
  stream.insert(stream.end(), marked.begin(), marked.end());
  for (unsigned seed = 1; seed <= 5; ++seed) {
    MpaUnits u;
    EXPECT_EQ(units_of(u, stream, seed, true), expected) << "seed " << seed;
    EXPECT_TRUE(u.frame_asks_markers());
    EXPECT_EQ(u.held(), 0u);
  }
}

TEST(MpaUnits, NotMpaIsHandedOutAsItComes) {
  MpaUnits u;
  const std::vector<std::uint8_t> junk = {'G', 'E', 'T', ' ', '/'};
  u.add(junk);
  EXPECT_EQ(u.next_unit(), junk.size());
  u.take(junk.size());
  EXPECT_EQ(u.held(), 0u);
  EXPECT_FALSE(u.frame_seen());
}

TEST(MpaUnits, IncompleteUnitIsHeld) {
  MpaUnits u;
  const auto f = frame(true, false, 4);
  u.add(ConstByteSpan(f).first(19));
  EXPECT_EQ(u.next_unit(), 0u);
  u.add(ConstByteSpan(f).subspan(19));
  EXPECT_EQ(u.next_unit(), f.size());
  u.take(f.size());
  const auto d = fpdus({100}, nullptr);
  u.add(ConstByteSpan(d).first(50));
  EXPECT_EQ(u.next_unit(), 0u);
  EXPECT_EQ(u.held(), 50u);
}

}  // namespace
}  // namespace uwarp::trace
