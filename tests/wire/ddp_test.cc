// Tests for wire/ddp.h: tagged and untagged DDP headers (with the RDMAP control byte) as Linux
// siw sends them, field placement, round trips and the error at every truncation point.
#include "wire/ddp.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "wire/fpdu.h"
#include "wire/rdmap.h"
#include "wire/siw_vectors.h"
#include "wire/wire_test_util.h"

namespace uwarp::wire {
namespace {

// The ULPDU (DDP segment) of an FPDU vector: after the length field, before pad and CRC.
ConstByteSpan ulpdu_of(ConstByteSpan fpdu) {
  return fpdu.subspan(kMpaLengthFieldSize, load_be16(fpdu.data()));
}

struct SiwSegment {
  const char* name;
  ConstByteSpan fpdu;
  bool tagged;
  RdmapOpcode opcode;
};

const SiwSegment kSiwSegments[] = {
    {"RTR Write", siw::kFpduRtrWriteCrc, true, RdmapOpcode::kRdmaWrite},
    {"Send", siw::kFpduSendCrc, false, RdmapOpcode::kSend},
    {"Read Request", siw::kFpduReadRequestCrc, false, RdmapOpcode::kReadRequest},
    {"Read Response", siw::kFpduReadResponseCrc, true, RdmapOpcode::kReadResponse},
    {"Write", siw::kFpduWriteCrc, true, RdmapOpcode::kRdmaWrite},
    {"Send without CRC", siw::kFpduSendNoCrc, false, RdmapOpcode::kSend},
    {"RTR Read Request", siw::kFpduRtrReadRequest, false, RdmapOpcode::kReadRequest},
    {"RTR Read Response", siw::kFpduRtrReadResponse, true, RdmapOpcode::kReadResponse},
    {"Terminate", siw::kFpduTerminateNoRtr, false, RdmapOpcode::kTerminate},
};

TEST(wire_ddp, HeaderSizes) {
  static_assert(ddp_header_size(0xc1) == kTaggedHeaderSize);
  static_assert(ddp_header_size(0x41) == kUntaggedHeaderSize);
  static_assert(ddp_header_size(0x80) == 14 && ddp_header_size(0x7f) == 18);
  DdpHeader h;
  EXPECT_EQ(h.size(), kUntaggedHeaderSize);
  h.tagged = true;
  EXPECT_EQ(h.size(), kTaggedHeaderSize);
}

TEST(wire_ddp, DecodesSiwRtrWrite) {
  auto h = decode_ddp_header(ulpdu_of(siw::kFpduRtrWriteCrc));
  ASSERT_TRUE(h.has_value());
  EXPECT_TRUE(h->tagged);
  EXPECT_TRUE(h->last);
  EXPECT_EQ(h->ddp_reserved, 0);
  EXPECT_EQ(h->ddp_version, kDdpVersion);
  EXPECT_EQ(h->rdmap_version, kRdmapVersion);
  EXPECT_EQ(h->rdmap_reserved, 0);
  EXPECT_EQ(h->opcode, static_cast<std::uint8_t>(RdmapOpcode::kRdmaWrite));
  EXPECT_EQ(h->stag, 1u);  // siw's RTR uses STag 1 (a hardware RNIC rejected STag 0)
  EXPECT_EQ(h->tagged_offset, 0u);
  EXPECT_EQ(h->size(), kTaggedHeaderSize);
}

TEST(wire_ddp, DecodesSiwReadResponseAndWrite) {
  auto rr = decode_ddp_header(ulpdu_of(siw::kFpduReadResponseCrc));
  ASSERT_TRUE(rr.has_value());
  EXPECT_TRUE(rr->tagged);
  EXPECT_EQ(rr->opcode, static_cast<std::uint8_t>(RdmapOpcode::kReadResponse));
  EXPECT_EQ(rr->stag, 0xf2f78900u);
  EXPECT_EQ(rr->tagged_offset, 0x000055d8b33ea550u);

  auto w = decode_ddp_header(ulpdu_of(siw::kFpduWriteCrc));
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->tagged);
  EXPECT_TRUE(w->last);
  EXPECT_EQ(w->opcode, static_cast<std::uint8_t>(RdmapOpcode::kRdmaWrite));
  EXPECT_EQ(w->stag, 0x8bcc1500u);
  EXPECT_EQ(w->tagged_offset, 0x0000563c6afc8550u);
}

TEST(wire_ddp, DecodesSiwSend) {
  auto h = decode_ddp_header(ulpdu_of(siw::kFpduSendCrc));
  ASSERT_TRUE(h.has_value());
  EXPECT_FALSE(h->tagged);
  EXPECT_TRUE(h->last);
  EXPECT_EQ(h->ddp_version, 1);
  EXPECT_EQ(h->rdmap_version, 1);
  EXPECT_EQ(h->opcode, static_cast<std::uint8_t>(RdmapOpcode::kSend));
  EXPECT_EQ(h->ulp_reserved, 0u);
  EXPECT_EQ(h->queue, kQueueSend);
  EXPECT_EQ(h->msn, 1u);  // MSN starts at 1 per queue
  EXPECT_EQ(h->message_offset, 0u);
  EXPECT_EQ(h->size(), kUntaggedHeaderSize);
}

TEST(wire_ddp, DecodesSiwReadRequestAndTerminateQueues) {
  auto rr = decode_ddp_header(ulpdu_of(siw::kFpduReadRequestCrc));
  ASSERT_TRUE(rr.has_value());
  EXPECT_FALSE(rr->tagged);
  EXPECT_EQ(rr->opcode, static_cast<std::uint8_t>(RdmapOpcode::kReadRequest));
  EXPECT_EQ(rr->queue, kQueueReadRequest);
  EXPECT_EQ(rr->msn, 1u);

  auto t = decode_ddp_header(ulpdu_of(siw::kFpduTerminateNoRtr));
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->tagged);
  EXPECT_TRUE(t->last);
  EXPECT_EQ(t->opcode, static_cast<std::uint8_t>(RdmapOpcode::kTerminate));
  EXPECT_EQ(t->queue, kQueueTerminate);
  EXPECT_EQ(t->msn, 1u);
}

TEST(wire_ddp, SiwHeadersRoundTripAndKnowTheirModel) {
  for (const SiwSegment& v : kSiwSegments) {
    SCOPED_TRACE(v.name);
    const ConstByteSpan seg = ulpdu_of(v.fpdu);
    auto h = decode_ddp_header(seg);
    ASSERT_TRUE(h.has_value());
    EXPECT_EQ(h->tagged, v.tagged);
    EXPECT_EQ(h->opcode, static_cast<std::uint8_t>(v.opcode));
    EXPECT_EQ(h->size(), ddp_header_size(seg[0]));
    std::array<std::uint8_t, kMaxDdpHeaderSize + 4> out;
    out.fill(0xaa);
    const std::size_t n = encode_ddp_header(*h, out);
    ASSERT_EQ(n, h->size());
    EXPECT_EQ(to_hex(ConstByteSpan(out).first(n)), to_hex(seg.first(n)));
    EXPECT_EQ(out[n], 0xaa);
  }
}

TEST(wire_ddp, EveryTruncationIsTruncated) {
  for (const SiwSegment& v : kSiwSegments) {
    SCOPED_TRACE(v.name);
    const ConstByteSpan seg = ulpdu_of(v.fpdu);
    const std::size_t size = ddp_header_size(seg[0]);
    for (std::size_t len = 0; len < size; ++len) {
      ASSERT_EQ(error_of(decode_ddp_header(seg.first(len))), DdpHeaderError::kTruncated) << len;
    }
    EXPECT_TRUE(decode_ddp_header(seg.first(size)).has_value());
  }
}

// A Send with Invalidate that is not the last segment of its message: the untagged "reserved for
// ULP" word carries the STag to invalidate.
TEST(wire_ddp, SendWithInvalidateMiddleSegment) {
  constexpr std::uint8_t kHeader[] = {
      0x01,                    // DDP: T=0 L=0, reserved 0, DV 1
      0x44,                    // RDMAP: RV 1, reserved 0, opcode 4 (Send with Invalidate)
      0x12, 0x34, 0x56, 0x78,  // STag to invalidate
      0x00, 0x00, 0x00, 0x00,  // QN 0
      0x00, 0x00, 0x00, 0x07,  // MSN 7
      0x00, 0x00, 0x05, 0x94,  // MO 1428
  };
  DdpHeader h;
  h.tagged = false;
  h.last = false;
  h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kSendInvalidate);
  h.ulp_reserved = 0x12345678;
  h.queue = kQueueSend;
  h.msn = 7;
  h.message_offset = 1428;
  std::array<std::uint8_t, kUntaggedHeaderSize> out{};
  ASSERT_EQ(encode_ddp_header(h, out), kUntaggedHeaderSize);
  EXPECT_EQ(to_hex(out), to_hex(kHeader));

  auto d = decode_ddp_header(kHeader);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->last);
  EXPECT_EQ(d->ulp_reserved, 0x12345678u);
  EXPECT_EQ(d->msn, 7u);
  EXPECT_EQ(d->message_offset, 1428u);
}

// A tagged segment with every byte of the 64-bit TO distinct, to catch a swapped half.
TEST(wire_ddp, TaggedOffsetIsBigEndian64) {
  constexpr std::uint8_t kHeader[] = {
      0x81,                                            // DDP: T=1 L=0, reserved 0, DV 1
      0x40,                                            // RDMAP: RV 1, opcode 0 (Write)
      0xde, 0xad, 0xbe, 0xef,                          // STag
      0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,  // TO
  };
  auto d = decode_ddp_header(kHeader);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->tagged);
  EXPECT_FALSE(d->last);
  EXPECT_EQ(d->stag, 0xdeadbeefu);
  EXPECT_EQ(d->tagged_offset, 0x0123456789abcdefu);
  std::array<std::uint8_t, kTaggedHeaderSize> out{};
  ASSERT_EQ(encode_ddp_header(*d, out), kTaggedHeaderSize);
  EXPECT_EQ(to_hex(out), to_hex(kHeader));
}

// The decoder reports versions and reserved bits as received: rejecting them is the receiver's
// job (Terminate DDP/1/0x04, DDP/2/0x06, RDMAP/2/0x05), which needs the header decoded.
TEST(wire_ddp, DecodesBadVersionsAndReservedBitsAsReceived) {
  constexpr std::uint8_t kHeader[] = {
      0xfe,                                            // DDP: T=1 L=1, reserved 0xf, DV 2
      0xbf,                                            // RDMAP: RV 2, reserved 3, opcode 0xf
      0x00, 0x00, 0x00, 0x00,                          // STag
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // TO
  };
  auto d = decode_ddp_header(kHeader);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->ddp_reserved, 0xf);
  EXPECT_EQ(d->ddp_version, 2);
  EXPECT_EQ(d->rdmap_version, 2);
  EXPECT_EQ(d->rdmap_reserved, 3);
  EXPECT_EQ(d->opcode, 0xf);
  std::array<std::uint8_t, kTaggedHeaderSize> out{};
  ASSERT_EQ(encode_ddp_header(*d, out), kTaggedHeaderSize);
  EXPECT_EQ(to_hex(out), to_hex(kHeader));
}

// Each control field lands on its own bits, and values too wide for a field stay inside it.
TEST(wire_ddp, ControlBytesFieldByField) {
  struct Case {
    const char* name;
    void (*set)(DdpHeader&);
    std::uint8_t ddp;
    std::uint8_t rdmap;
  };
  const Case cases[] = {
      {"none", [](DdpHeader&) {}, 0x00, 0x00},
      {"T", [](DdpHeader& h) { h.tagged = true; }, 0x80, 0x00},
      {"L", [](DdpHeader& h) { h.last = true; }, 0x40, 0x00},
      {"DDP reserved", [](DdpHeader& h) { h.ddp_reserved = 0xff; }, 0x3c, 0x00},
      {"DV", [](DdpHeader& h) { h.ddp_version = 0xff; }, 0x03, 0x00},
      {"RV", [](DdpHeader& h) { h.rdmap_version = 0xff; }, 0x00, 0xc0},
      {"RDMAP reserved", [](DdpHeader& h) { h.rdmap_reserved = 0xff; }, 0x00, 0x30},
      {"opcode", [](DdpHeader& h) { h.opcode = 0xff; }, 0x00, 0x0f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    DdpHeader h;
    h.ddp_version = 0;
    h.rdmap_version = 0;
    c.set(h);
    std::array<std::uint8_t, kMaxDdpHeaderSize> out{};
    ASSERT_EQ(encode_ddp_header(h, out), h.size());
    EXPECT_EQ(out[0], c.ddp);
    EXPECT_EQ(out[1], c.rdmap);
  }
}

// A tagged header carries no untagged fields and the reverse; stale values do not leak.
TEST(wire_ddp, EncodeWritesOnlyTheFieldsOfItsModel) {
  DdpHeader h;
  h.tagged = true;
  h.last = true;
  h.stag = 0x11111111;
  h.tagged_offset = 0x2222222222222222;
  h.ulp_reserved = h.queue = h.msn = h.message_offset = 0x33333333;
  std::array<std::uint8_t, kMaxDdpHeaderSize> out;
  out.fill(0xaa);
  ASSERT_EQ(encode_ddp_header(h, out), kTaggedHeaderSize);
  EXPECT_EQ(to_hex(out), "c1 40 11 11 11 11 22 22 22 22 22 22 22 22 aa aa aa aa");

  h.tagged = false;
  ASSERT_EQ(encode_ddp_header(h, out), kUntaggedHeaderSize);
  EXPECT_EQ(to_hex(out), "41 40 33 33 33 33 33 33 33 33 33 33 33 33 33 33 33 33");
}

TEST(wire_ddp, EncodeRefusesSmallOutputAndWritesNothing) {
  for (bool tagged : {true, false}) {
    SCOPED_TRACE(tagged ? "tagged" : "untagged");
    DdpHeader h;
    h.tagged = tagged;
    std::vector<std::uint8_t> out(h.size() - 1, 0xaa);
    EXPECT_EQ(encode_ddp_header(h, out), 0u);
    EXPECT_EQ(out, std::vector<std::uint8_t>(out.size(), 0xaa));
  }
}

}  // namespace
}  // namespace uwarp::wire
