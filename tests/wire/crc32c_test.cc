// Tests for wire/crc32c.h: RFC 3720 appendix B.4 check values, the CRC-32C check value, siw
// FPDU trailers, and incremental updates at every split point.
#include "wire/crc32c.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

#include "wire/siw_vectors.h"

namespace uwarp::wire {
namespace {

ConstByteSpan as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::array<std::uint8_t, 32> filled(std::uint8_t value) {
  std::array<std::uint8_t, 32> a;
  a.fill(value);
  return a;
}
std::array<std::uint8_t, 32> incrementing() {
  std::array<std::uint8_t, 32> a;
  std::iota(a.begin(), a.end(), std::uint8_t{0});  // 00 01 .. 1f
  return a;
}
std::array<std::uint8_t, 32> decrementing() {
  std::array<std::uint8_t, 32> a;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(31 - i);  // 1f .. 00
  return a;
}

// RFC 3720 appendix B.4 lists the CRC as the bytes sent, i.e. the little-endian bytes of the
// value; each value below was checked against ISA-L's crc32_iscsi independently of uwarp.
TEST(wire_crc32c, Rfc3720ThirtyTwoZeros) {
  EXPECT_EQ(crc32c(filled(0x00)), 0x8a9136aau);  // sent as aa 36 91 8a
}
TEST(wire_crc32c, Rfc3720ThirtyTwoOnes) {
  EXPECT_EQ(crc32c(filled(0xff)), 0x62a8ab43u);  // sent as 43 ab a8 62
}
TEST(wire_crc32c, Rfc3720ThirtyTwoIncrementing) {
  EXPECT_EQ(crc32c(incrementing()), 0x46dd794eu);  // sent as 4e 79 dd 46
}
TEST(wire_crc32c, Rfc3720ThirtyTwoDecrementing) {
  EXPECT_EQ(crc32c(decrementing()), 0x113fdb5cu);  // sent as 5c db 3f 11
}

// The catalogued check value of CRC-32C (reflected, init and xorout 0xffffffff).
TEST(wire_crc32c, CheckValue123456789) {
  EXPECT_EQ(crc32c(as_bytes("123456789")), 0xe3069283u);
}

TEST(wire_crc32c, EmptyInputIsZero) {
  EXPECT_EQ(crc32c({}), 0u);
  Crc32c crc;
  crc.update({});
  EXPECT_EQ(crc.value(), 0u);
}

// The RTR Write that siw sends with CRC on: the trailer eb d3 4c 5f is the CRC of the 16 bytes
// before it (length field + ULPDU; no pad).
TEST(wire_crc32c, SiwRtrWriteTrailer) {
  const ConstByteSpan fpdu(siw::kFpduRtrWriteCrc);
  EXPECT_EQ(crc32c(fpdu.first(16)), 0x5f4cd3ebu);
}

TEST(wire_crc32c, IncrementalEqualsOneShotAtEverySplitPoint) {
  // Longer than ISA-L's folding block so that both the bulk and tail paths are split.
  std::vector<std::uint8_t> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 131 + 7);
  const ConstByteSpan all(data);
  const std::uint32_t expected = crc32c(all);
  for (std::size_t split = 0; split <= data.size(); ++split) {
    Crc32c crc;
    crc.update(all.first(split));
    crc.update(all.subspan(split));
    ASSERT_EQ(crc.value(), expected) << "split at " << split;
  }
}

TEST(wire_crc32c, IncrementalAtEverySplitPointOfTheRfcVectors) {
  for (const auto& v : {filled(0x00), filled(0xff), incrementing(), decrementing()}) {
    const std::uint32_t expected = crc32c(v);
    for (std::size_t a = 0; a <= v.size(); ++a) {
      for (std::size_t b = a; b <= v.size(); ++b) {
        Crc32c crc;
        crc.update(ConstByteSpan(v).first(a));
        crc.update(ConstByteSpan(v).subspan(a, b - a));
        crc.update(ConstByteSpan(v).subspan(b));
        ASSERT_EQ(crc.value(), expected) << "splits at " << a << " and " << b;
      }
    }
  }
}

TEST(wire_crc32c, ByteAtATimeEqualsOneShot) {
  const auto v = incrementing();
  Crc32c crc;
  for (std::uint8_t b : v) crc.update(ConstByteSpan(&b, 1));
  EXPECT_EQ(crc.value(), 0x46dd794eu);
}

TEST(wire_crc32c, ValueDoesNotEndTheComputation) {
  const auto v = incrementing();
  Crc32c crc;
  crc.update(ConstByteSpan(v).first(10));
  EXPECT_EQ(crc.value(), crc32c(ConstByteSpan(v).first(10)));
  crc.update(ConstByteSpan(v).subspan(10));
  EXPECT_EQ(crc.value(), 0x46dd794eu);
}

TEST(wire_crc32c, ResetStartsOver) {
  Crc32c crc;
  crc.update(filled(0xff));
  crc.reset();
  crc.update(filled(0x00));
  EXPECT_EQ(crc.value(), 0x8a9136aau);
}

// Every single-bit error in a 64-byte message changes the CRC (CRC32c detects all of them).
TEST(wire_crc32c, DetectsEverySingleBitFlip) {
  std::vector<std::uint8_t> data(64);
  std::iota(data.begin(), data.end(), std::uint8_t{0x40});
  const std::uint32_t good = crc32c(data);
  for (std::size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    ASSERT_NE(crc32c(data), good) << "bit " << bit;
    data[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace uwarp::wire
