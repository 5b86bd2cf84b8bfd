// Tests for wire/rdmap_ext.h: the RFC 7306 bodies (Immediate Data, Atomic Request, Atomic
// Response) byte for byte, field order, every truncation point, and a whole Immediate Data FPDU
// with its untagged DDP header on queue 0.
#include "wire/rdmap_ext.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/rdmap.h"
#include "wire/wire_test_util.h"

namespace uwarp::wire {
namespace {

// --- Immediate Data ----------------------------------------------------------------------------

TEST(wire_rdmap_ext, ImmediateDataIsEightBigEndianBytes) {
  const std::array<std::uint8_t, 8> bytes = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  auto imm = decode_immediate_data(bytes);
  ASSERT_TRUE(imm.has_value());
  EXPECT_EQ(imm->data, 0x0102030405060708u);
  EXPECT_EQ(imm->verbs_value(), 0x01020304u);  // the first four bytes
  std::array<std::uint8_t, 8> out{};
  ASSERT_EQ(encode_immediate_data(*imm, out), kImmediateDataSize);
  EXPECT_EQ(to_hex(out), "01 02 03 04 05 06 07 08");
}

TEST(wire_rdmap_ext, VerbsImmediateGoesFirstAndZeroFollows) {
  std::array<std::uint8_t, 8> out{};
  ASSERT_EQ(encode_immediate_data(ImmediateData::from_verbs(0xdeadbeef), out), 8u);
  EXPECT_EQ(to_hex(out), "de ad be ef 00 00 00 00");
  EXPECT_EQ(decode_immediate_data(out)->verbs_value(), 0xdeadbeefu);
}

TEST(wire_rdmap_ext, ImmediateDataTruncationsAndSmallOutput) {
  const std::array<std::uint8_t, 8> bytes{};
  for (std::size_t n = 0; n < kImmediateDataSize; ++n) {
    EXPECT_EQ(error_of(decode_immediate_data(ConstByteSpan(bytes).first(n))),
              ExtBodyError::kTruncated)
        << n;
  }
  std::array<std::uint8_t, 7> small{0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA};
  EXPECT_EQ(encode_immediate_data(ImmediateData{1}, small), 0u);
  EXPECT_EQ(to_hex(small), "aa aa aa aa aa aa aa");  // nothing written
}

// An Immediate Data with Solicited Event FPDU as uwarp sends it: MPA length 26, untagged DDP
// header (last, DDP version 1; RDMAP version 1, opcode 0x9; reserved word 0; QN 0, MSN 7,
// MO 0), the eight bytes, no pad, CRC.
TEST(wire_rdmap_ext, ImmediateDataSeFpduBytes) {
  DdpHeader h = untagged_header(RdmapOpcode::kImmediateDataSe, kQueueSend, Msn{7});
  h.last = true;
  std::array<std::uint8_t, kUntaggedHeaderSize + kImmediateDataSize> ulpdu{};
  ASSERT_EQ(encode_ddp_header(h, ulpdu), kUntaggedHeaderSize);
  ASSERT_EQ(encode_immediate_data(ImmediateData::from_verbs(0x11223344),
                                  ByteSpan(ulpdu).subspan(kUntaggedHeaderSize)),
            kImmediateDataSize);
  EXPECT_EQ(to_hex(ulpdu),
            "41 49 00 00 00 00 00 00 00 00 00 00 00 07 00 00 00 00 "
            "11 22 33 44 00 00 00 00");
  auto back = decode_ddp_header(ulpdu);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->opcode, 0x9);
  EXPECT_EQ(back->queue, kQueueSend);
  EXPECT_EQ(back->msn, 7u);
}

// --- Atomic Request ----------------------------------------------------------------------------

// Every field distinct, so a swapped or misplaced field shows.
constexpr std::array<std::uint8_t, kAtomicRequestSize> kCompareSwapRequest = {
    0x00, 0x00, 0x00, 0x02,                          // reserved, AOpCode 0010b (CompareSwap)
    0xA1, 0xA2, 0xA3, 0xA4,                          // Request Identifier
    0xB1, 0xB2, 0xB3, 0xB4,                          // Remote STag
    0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8,  // Remote Tagged Offset
    0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8,  // Swap Data
    0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8,  // Swap Mask
    0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8,  // Compare Data
    0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,  // Compare Mask
};

TEST(wire_rdmap_ext, AtomicRequestFieldOrder) {
  auto r = decode_atomic_request(kCompareSwapRequest);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->opcode, static_cast<std::uint8_t>(AtomicOpcode::kCompareSwap));
  EXPECT_EQ(r->reserved, 0u);
  EXPECT_EQ(r->request_id, 0xA1A2A3A4u);
  EXPECT_EQ(r->remote_stag, 0xB1B2B3B4u);
  EXPECT_EQ(r->remote_to, 0xC1C2C3C4C5C6C7C8u);
  EXPECT_EQ(r->add_swap_data, 0xD1D2D3D4D5D6D7D8u);
  EXPECT_EQ(r->add_swap_mask, 0xE1E2E3E4E5E6E7E8u);
  EXPECT_EQ(r->compare_data, 0xF1F2F3F4F5F6F7F8u);
  EXPECT_EQ(r->compare_mask, 0x9192939495969798u);
  std::array<std::uint8_t, kAtomicRequestSize> out{};
  ASSERT_EQ(encode_atomic_request(*r, out), kAtomicRequestSize);
  EXPECT_EQ(to_hex(out), to_hex(kCompareSwapRequest));
}

TEST(wire_rdmap_ext, AtomicRequestReservedBitsKeptOnDecodeAndZeroOnEncode) {
  auto bytes = kCompareSwapRequest;
  bytes[0] = 0xFF;
  bytes[3] = 0xF1;  // reserved bits set, AOpCode 0001b (Swap)
  auto r = decode_atomic_request(bytes);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->opcode, static_cast<std::uint8_t>(AtomicOpcode::kSwap));
  EXPECT_EQ(r->reserved, 0x0FF0000Fu);
  std::array<std::uint8_t, kAtomicRequestSize> out{};
  ASSERT_EQ(encode_atomic_request(*r, out), kAtomicRequestSize);
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(4)), "00 00 00 01");
}

TEST(wire_rdmap_ext, AtomicRequestTruncationsAndSmallOutput) {
  for (std::size_t n = 0; n < kAtomicRequestSize; ++n) {
    EXPECT_EQ(error_of(decode_atomic_request(ConstByteSpan(kCompareSwapRequest).first(n))),
              ExtBodyError::kTruncated)
        << n;
  }
  std::vector<std::uint8_t> small(kAtomicRequestSize - 1, 0xAA);
  EXPECT_EQ(encode_atomic_request(AtomicRequest{}, small), 0u);
  EXPECT_EQ(small, std::vector<std::uint8_t>(kAtomicRequestSize - 1, 0xAA));
}

// --- Atomic Response ---------------------------------------------------------------------------

TEST(wire_rdmap_ext, AtomicResponseFieldOrderAndTruncations) {
  const std::array<std::uint8_t, kAtomicResponseSize> bytes = {
      0xA1, 0xA2, 0xA3, 0xA4,                          // Original Request Identifier
      0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8,  // Original Remote Data Value
  };
  auto r = decode_atomic_response(bytes);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->original_request_id, 0xA1A2A3A4u);
  EXPECT_EQ(r->original_value, 0xC1C2C3C4C5C6C7C8u);
  std::array<std::uint8_t, kAtomicResponseSize> out{};
  ASSERT_EQ(encode_atomic_response(*r, out), kAtomicResponseSize);
  EXPECT_EQ(to_hex(out), to_hex(bytes));
  for (std::size_t n = 0; n < kAtomicResponseSize; ++n) {
    EXPECT_EQ(error_of(decode_atomic_response(ConstByteSpan(bytes).first(n))),
              ExtBodyError::kTruncated)
        << n;
  }
  std::array<std::uint8_t, kAtomicResponseSize - 1> small{};
  EXPECT_EQ(encode_atomic_response(*r, small), 0u);
}

}  // namespace
}  // namespace uwarp::wire
