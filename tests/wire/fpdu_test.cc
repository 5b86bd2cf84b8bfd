// Tests for wire/fpdu.h: FPDU framing (length, pad, CRC trailer) of the FPDUs Linux siw sends,
// truncation and CRC errors, pad lengths and the FPDU sizing that siw's MSS rule implies.
#include "wire/fpdu.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/siw_vectors.h"
#include "wire/wire_test_util.h"

namespace uwarp::wire {
namespace {

struct SiwFpdu {
  const char* name;
  ConstByteSpan bytes;
  bool crc;  // whether CRC was negotiated (else the trailer is zero)
  std::size_t ulpdu_length;
};

const SiwFpdu kSiwFpdus[] = {
    {"RTR Write (crc-p2p)", siw::kFpduRtrWriteCrc, true, 14},
    {"Send (crc-p2p)", siw::kFpduSendCrc, true, 34},
    {"Read Request (crc-p2p)", siw::kFpduReadRequestCrc, true, 46},
    {"Read Response (crc-p2p)", siw::kFpduReadResponseCrc, true, 78},
    {"Write (crc-p2p)", siw::kFpduWriteCrc, true, 78},
    {"Send (mpa1)", siw::kFpduSendNoCrc, false, 34},
    {"RTR Read Request (p2p-read)", siw::kFpduRtrReadRequest, false, 46},
    {"RTR Read Response (p2p-read)", siw::kFpduRtrReadResponse, false, 14},
    {"Terminate (p2p-no-rtr)", siw::kFpduTerminateNoRtr, false, 22},
};

// --- sizes -------------------------------------------------------------------------------------

TEST(wire_fpdu, PadLengthsForUlpduLengthsZeroToEight) {
  // 2-byte length field + ULPDU + pad is a multiple of 4.
  constexpr std::size_t kPad[] = {2, 1, 0, 3, 2, 1, 0, 3, 2};
  constexpr std::size_t kFpduSize[] = {8, 8, 8, 12, 12, 12, 12, 16, 16};
  for (std::size_t len = 0; len <= 8; ++len) {
    EXPECT_EQ(fpdu_pad_length(len), kPad[len]) << len;
    EXPECT_EQ(fpdu_size(len), kFpduSize[len]) << len;
  }
  static_assert(fpdu_pad_length(kMaxUlpduLength) == 3);
  static_assert(fpdu_size(kMaxUlpduLength) == 65544);
}

// siw sizes every FPDU to one TCP segment: the MSS rounded down to a multiple of 8. At MSS 1448
// (1500-byte MTU with timestamps) that is 1448 bytes, i.e. a 1442-byte ULPDU: a 14-byte tagged
// header and 1428 bytes of WRITE payload.
TEST(wire_fpdu, MaxUlpduForSiwSegmentSizes) {
  static_assert(max_ulpdu_for_fpdu_size(1448) == 1442);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(1448) - kTaggedHeaderSize, 1428u);
  EXPECT_EQ(fpdu_size(1442), 1448u);
  // MSS 1460 (no timestamps): siw uses 1456, uwarp could use all 1460.
  EXPECT_EQ(max_ulpdu_for_fpdu_size(1460 & ~std::size_t{7}), 1450u);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(1460), 1454u);
  EXPECT_EQ(fpdu_size(1454), 1460u);
  // Loopback MSS and the 16-bit limit.
  EXPECT_EQ(max_ulpdu_for_fpdu_size(65495 & ~std::size_t{7}), 65482u);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(65535), 65526u);
  EXPECT_EQ(fpdu_size(65526), 65532u);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(std::size_t{1} << 20), 65534u);  // capped, pad-free
}

TEST(wire_fpdu, MaxUlpduForTinySizes) {
  // No FPDU is smaller than 8 bytes (length field, 2 pad bytes, CRC).
  for (std::size_t bytes = 0; bytes < 8; ++bytes) {
    EXPECT_EQ(max_ulpdu_for_fpdu_size(bytes), 0u) << bytes;
  }
  EXPECT_EQ(max_ulpdu_for_fpdu_size(8), 2u);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(11), 2u);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(12), 6u);
  EXPECT_EQ(max_ulpdu_for_fpdu_size(20), kTaggedHeaderSize);    // the RTR Write's size
  EXPECT_EQ(max_ulpdu_for_fpdu_size(24), kUntaggedHeaderSize);  // an empty Send
}

// For every budget: the result fits, needs no pad, and one more byte would not fit (below the
// pad-free cap of 65534).
TEST(wire_fpdu, MaxUlpduIsTheLargestThatFitsForEveryBudget) {
  for (std::size_t bytes = 0; bytes <= 70000; ++bytes) {
    const std::size_t u = max_ulpdu_for_fpdu_size(bytes);
    if (bytes < fpdu_size(0)) {
      ASSERT_EQ(u, 0u) << bytes;
      continue;
    }
    ASSERT_LE(fpdu_size(u), bytes) << bytes;
    ASSERT_EQ(fpdu_pad_length(u), 0u) << bytes;
    ASSERT_LE(u, kMaxUlpduLength - 1) << bytes;
    if (u < kMaxUlpduLength - 1) {
      ASSERT_GT(fpdu_size(u + 1), bytes) << bytes;
    }
  }
}

// --- decoding siw's FPDUs ----------------------------------------------------------------------

TEST(wire_fpdu, DecodesSiwFpdus) {
  for (const SiwFpdu& v : kSiwFpdus) {
    SCOPED_TRACE(v.name);
    auto r = decode_fpdu(v.bytes, v.crc);
    ASSERT_TRUE(r.has_value()) << testing::PrintToString(r.error());
    EXPECT_EQ(r->consumed, v.bytes.size());
    EXPECT_EQ(r->ulpdu.data(), v.bytes.data() + kMpaLengthFieldSize);  // a view, not a copy
    EXPECT_EQ(r->ulpdu.size(), v.ulpdu_length);
    EXPECT_EQ(fpdu_size(v.ulpdu_length), v.bytes.size());
    // Without a CRC check every FPDU decodes the same.
    auto unchecked = decode_fpdu(v.bytes, false);
    ASSERT_TRUE(unchecked.has_value());
    EXPECT_EQ(unchecked->ulpdu.data(), r->ulpdu.data());
    EXPECT_EQ(unchecked->consumed, r->consumed);
  }
}

// The CRC trailer is the little-endian bytes of CRC32c over length field, ULPDU and pad; without
// CRC it is zero, and then a CRC check fails.
TEST(wire_fpdu, SiwCrcTrailers) {
  for (const SiwFpdu& v : kSiwFpdus) {
    SCOPED_TRACE(v.name);
    const std::size_t covered = v.bytes.size() - kMpaCrcSize;
    const std::uint32_t trailer = load_crc_trailer(v.bytes.data() + covered);
    if (v.crc) {
      EXPECT_EQ(trailer, crc32c(v.bytes.first(covered)));
    } else {
      EXPECT_EQ(trailer, 0u);
      EXPECT_EQ(error_of(decode_fpdu(v.bytes, true)), FpduError::kBadCrc);
    }
  }
  // The RTR Write's trailer as the brief and tshark show it.
  EXPECT_EQ(to_hex(ConstByteSpan(siw::kFpduRtrWriteCrc).last(4)), "eb d3 4c 5f");
  EXPECT_EQ(load_crc_trailer(siw::kFpduRtrWriteCrc + 16), 0x5f4cd3ebu);
}

TEST(wire_fpdu, SiwFpdusRoundTripByteForByte) {
  for (const SiwFpdu& v : kSiwFpdus) {
    SCOPED_TRACE(v.name);
    auto r = decode_fpdu(v.bytes, v.crc);
    ASSERT_TRUE(r.has_value());
    std::vector<std::uint8_t> out(v.bytes.size() + 8, 0xaa);
    const std::size_t n = encode_fpdu(r->ulpdu, v.crc, out);
    ASSERT_EQ(n, v.bytes.size());
    EXPECT_EQ(to_hex(ConstByteSpan(out).first(n)), to_hex(v.bytes));
    EXPECT_EQ(out[n], 0xaa);  // nothing written past the FPDU
  }
}

TEST(wire_fpdu, EveryTruncationNeedsMore) {
  for (const SiwFpdu& v : kSiwFpdus) {
    SCOPED_TRACE(v.name);
    for (std::size_t len = 0; len < v.bytes.size(); ++len) {
      ASSERT_EQ(error_of(decode_fpdu(v.bytes.first(len), true)), FpduError::kNeedMore) << len;
      ASSERT_EQ(error_of(decode_fpdu(v.bytes.first(len), false)), FpduError::kNeedMore) << len;
    }
  }
}

// Any corrupted byte after the length field (ULPDU, pad or trailer) is a CRC error when CRC is
// checked, and goes unnoticed when it is not.
TEST(wire_fpdu, CorruptionIsABadCrc) {
  for (const SiwFpdu& v : kSiwFpdus) {
    if (!v.crc) continue;
    SCOPED_TRACE(v.name);
    for (std::size_t i = kMpaLengthFieldSize; i < v.bytes.size(); ++i) {
      for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}}) {
        std::vector<std::uint8_t> bad = to_vector(v.bytes);
        bad[i] ^= flip;
        ASSERT_EQ(error_of(decode_fpdu(bad, true)), FpduError::kBadCrc) << "byte " << i;
        ASSERT_TRUE(decode_fpdu(bad, false).has_value()) << "byte " << i;
      }
    }
  }
}

// A corrupted length field either asks for more bytes or, if the FPDU it claims fits in the
// input, fails the CRC check; it never yields a ULPDU.
TEST(wire_fpdu, CorruptedLengthNeverYieldsAUlpduUnderCrc) {
  for (const SiwFpdu& v : kSiwFpdus) {
    if (!v.crc) continue;
    SCOPED_TRACE(v.name);
    for (std::size_t bit = 0; bit < 16; ++bit) {
      std::vector<std::uint8_t> bad = to_vector(v.bytes);
      bad.resize(bad.size() + 64, 0);  // room for a longer claimed length
      bad.at(bit / 8) ^= static_cast<std::uint8_t>(1u << (bit % 8));
      const auto err = error_of(decode_fpdu(bad, true));
      ASSERT_TRUE(err == FpduError::kNeedMore || err == FpduError::kBadCrc) << "bit " << bit;
    }
  }
}

TEST(wire_fpdu, LengthBeyondTheInputNeedsMore) {
  constexpr std::uint8_t kHeaderOnly[] = {
      0xff, 0xff,              // ULPDU_Length 65535
      0x41, 0x43, 0x00, 0x00,  // the start of a ULPDU
  };
  EXPECT_EQ(error_of(decode_fpdu(kHeaderOnly, true)), FpduError::kNeedMore);
  EXPECT_EQ(error_of(decode_fpdu(kHeaderOnly, false)), FpduError::kNeedMore);
}

// Several FPDUs in one read (TCP coalesced what siw sent as separate segments): each decode
// consumes exactly one, and a prefix yields exactly the FPDUs it holds whole.
TEST(wire_fpdu, SeveralFpdusInOneBuffer) {
  const ConstByteSpan parts[] = {siw::kFpduRtrWriteCrc, siw::kFpduSendCrc,
                                 siw::kFpduReadResponseCrc, siw::kFpduWriteCrc};
  std::vector<std::uint8_t> stream;
  for (ConstByteSpan p : parts) stream.insert(stream.end(), p.begin(), p.end());

  for (std::size_t len = 0; len <= stream.size(); ++len) {
    ConstByteSpan rest = ConstByteSpan(stream).first(len);
    std::size_t whole = 0;
    std::size_t at = 0;
    for (ConstByteSpan p : parts) {
      if (at + p.size() <= len) ++whole;
      at += p.size();
    }
    std::size_t decoded = 0;
    while (true) {
      auto r = decode_fpdu(rest, true);
      if (!r.has_value()) {
        ASSERT_EQ(r.error(), FpduError::kNeedMore) << len;
        break;
      }
      ASSERT_EQ(r->consumed, parts[decoded].size()) << len;
      ASSERT_EQ(r->ulpdu.data(), rest.data() + kMpaLengthFieldSize) << len;
      ASSERT_EQ(to_hex(r->ulpdu), to_hex(parts[decoded].subspan(2, r->ulpdu.size()))) << len;
      rest = rest.subspan(r->consumed);
      ++decoded;
    }
    ASSERT_EQ(decoded, whole) << "prefix of " << len << " bytes";
  }
}

// --- encoding ----------------------------------------------------------------------------------

TEST(wire_fpdu, EncodesPaddedFpdu) {
  constexpr std::uint8_t kUlpdu[] = {'a', 'b', 'c'};
  constexpr std::uint8_t kExpected[] = {
      0x00, 0x03,              // ULPDU_Length 3
      'a',  'b',  'c',         // ULPDU
      0x00, 0x00, 0x00,        // pad: 2 + 3 + 3 is a multiple of 4
      0x59, 0x23, 0x97, 0x12,  // CRC32c 0x12972359 over the 8 bytes above
  };
  std::array<std::uint8_t, 16> out;
  out.fill(0xcc);
  ASSERT_EQ(encode_fpdu(kUlpdu, true, out), sizeof kExpected);
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(sizeof kExpected)), to_hex(kExpected));
  EXPECT_EQ(out[sizeof kExpected], 0xcc);

  ASSERT_EQ(encode_fpdu(kUlpdu, false, out), sizeof kExpected);
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(sizeof kExpected)),
            "00 03 61 62 63 00 00 00 00 00 00 00");
}

TEST(wire_fpdu, EncodesEmptyUlpdu) {
  constexpr std::uint8_t kExpected[] = {
      0x00, 0x00,              // ULPDU_Length 0
      0x00, 0x00,              // pad
      0xc7, 0x4b, 0x67, 0x48,  // CRC32c 0x48674bc7
  };
  std::array<std::uint8_t, 8> out;
  out.fill(0xcc);
  ASSERT_EQ(encode_fpdu({}, true, out), 8u);
  EXPECT_EQ(to_hex(out), to_hex(kExpected));
  auto r = decode_fpdu(out, true);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ulpdu.empty());
  EXPECT_EQ(r->consumed, 8u);
}

// Pad bytes are written as zero whatever the buffer held, for ULPDU lengths 0..8, with and
// without CRC, and the result decodes to the same ULPDU.
TEST(wire_fpdu, EncodeZeroesThePadAndDecodesBack) {
  for (bool with_crc : {false, true}) {
    for (std::size_t len = 0; len <= 8; ++len) {
      SCOPED_TRACE(testing::Message() << "ULPDU " << len << (with_crc ? " with CRC" : ""));
      const std::vector<std::uint8_t> ulpdu(len, 0xab);
      std::array<std::uint8_t, 32> out;
      out.fill(0xcc);
      const std::size_t n = encode_fpdu(ulpdu, with_crc, out);
      ASSERT_EQ(n, fpdu_size(len));
      EXPECT_EQ(load_be16(out.data()), len);
      for (std::size_t i = 0; i < fpdu_pad_length(len); ++i) {
        EXPECT_EQ(out[2 + len + i], 0) << "pad byte " << i;
      }
      const std::uint32_t trailer = load_crc_trailer(out.data() + n - 4);
      EXPECT_EQ(trailer, with_crc ? crc32c(ConstByteSpan(out).first(n - 4)) : 0u);
      EXPECT_EQ(out[n], 0xcc);
      auto r = decode_fpdu(ConstByteSpan(out).first(n), with_crc);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(to_vector(r->ulpdu), ulpdu);
    }
  }
}

// RFC 5044: the receiver ignores the pad's value (it is covered by the CRC, though).
TEST(wire_fpdu, NonZeroPadIsNotCheckedWithoutCrc) {
  constexpr std::uint8_t kFpdu[] = {
      0x00, 0x01,              // ULPDU_Length 1
      0x7f,                    // ULPDU
      0xee,                    // pad, not zero
      0x00, 0x00, 0x00, 0x00,  // no CRC
  };
  auto r = decode_fpdu(kFpdu, false);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(to_hex(r->ulpdu), "7f");
}

TEST(wire_fpdu, LargestUlpdu) {
  std::vector<std::uint8_t> ulpdu(kMaxUlpduLength);
  for (std::size_t i = 0; i < ulpdu.size(); ++i) ulpdu[i] = static_cast<std::uint8_t>(i);
  std::vector<std::uint8_t> out(fpdu_size(kMaxUlpduLength));
  ASSERT_EQ(encode_fpdu(ulpdu, true, out), out.size());
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(2)), "ff ff");
  auto r = decode_fpdu(out, true);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->ulpdu.size(), kMaxUlpduLength);
  EXPECT_EQ(r->consumed, out.size());

  // One byte too long for the 16-bit length field.
  ulpdu.push_back(0);
  out.resize(out.size() + 8);
  EXPECT_EQ(encode_fpdu(ulpdu, true, out), 0u);
}

TEST(wire_fpdu, EncodeRefusesSmallOutputAndWritesNothing) {
  const ConstByteSpan ulpdu = ConstByteSpan(siw::kFpduSendCrc).subspan(2, 34);
  std::vector<std::uint8_t> out(sizeof siw::kFpduSendCrc - 1, 0xaa);
  EXPECT_EQ(encode_fpdu(ulpdu, true, out), 0u);
  EXPECT_EQ(out, std::vector<std::uint8_t>(out.size(), 0xaa));
  out.push_back(0xaa);
  ASSERT_EQ(encode_fpdu(ulpdu, true, out), out.size());
  EXPECT_EQ(to_hex(out), to_hex(siw::kFpduSendCrc));
}

TEST(wire_fpdu, CrcTrailerIsLittleEndian) {
  std::uint8_t p[4] = {};
  store_crc_trailer(p, 0x11223344u);
  EXPECT_EQ(to_hex(p), "44 33 22 11");
  EXPECT_EQ(load_crc_trailer(p), 0x11223344u);
}

}  // namespace
}  // namespace uwarp::wire
