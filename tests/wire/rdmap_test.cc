// Tests for wire/rdmap.h: opcodes, the Read Request body and the Terminate message (siw's swapped
// control word, M/D/R flags, tagged/untagged/Read Request copies), with every truncation point.
#include "wire/rdmap.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/siw_vectors.h"
#include "wire/wire_test_util.h"

namespace uwarp::wire {
namespace {

// The message body of an untagged FPDU vector: after length field and 18-byte DDP header.
ConstByteSpan untagged_body_of(ConstByteSpan fpdu) {
  const std::size_t ulpdu_length = load_be16(fpdu.data());
  return fpdu.subspan(kMpaLengthFieldSize + kUntaggedHeaderSize,
                      ulpdu_length - kUntaggedHeaderSize);
}

// --- opcodes -----------------------------------------------------------------------------------

TEST(wire_rdmap, OpcodeNames) {
  EXPECT_EQ(to_string(RdmapOpcode::kRdmaWrite), "RDMA Write");
  EXPECT_EQ(to_string(RdmapOpcode::kReadRequest), "RDMA Read Request");
  EXPECT_EQ(to_string(RdmapOpcode::kReadResponse), "RDMA Read Response");
  EXPECT_EQ(to_string(RdmapOpcode::kSend), "Send");
  EXPECT_EQ(to_string(RdmapOpcode::kSendInvalidate), "Send with Invalidate");
  EXPECT_EQ(to_string(RdmapOpcode::kSendSe), "Send with Solicited Event");
  EXPECT_EQ(to_string(RdmapOpcode::kSendSeInvalidate), "Send with SE and Invalidate");
  EXPECT_EQ(to_string(RdmapOpcode::kTerminate), "Terminate");
  EXPECT_EQ(to_string(RdmapOpcode::kImmediateData), "Immediate Data");
  EXPECT_EQ(to_string(RdmapOpcode::kImmediateDataSe), "Immediate Data with SE");
  EXPECT_EQ(to_string(RdmapOpcode::kAtomicRequest), "Atomic Request");
  EXPECT_EQ(to_string(RdmapOpcode::kAtomicResponse), "Atomic Response");
  // The 4-bit opcode field can hold values no RFC defines; they still get a name.
  for (int op = 0xC; op <= 0xF; ++op) {
    EXPECT_EQ(to_string(static_cast<RdmapOpcode>(op)), "reserved opcode") << op;
  }
}

TEST(wire_rdmap, OpcodePredicates) {
  struct Row {
    RdmapOpcode op;
    bool send, solicited, invalidate, rfc7306, immediate;
  };
  const Row rows[] = {
      {RdmapOpcode::kRdmaWrite, false, false, false, false, false},
      {RdmapOpcode::kReadRequest, false, false, false, false, false},
      {RdmapOpcode::kReadResponse, false, false, false, false, false},
      {RdmapOpcode::kSend, true, false, false, false, false},
      {RdmapOpcode::kSendInvalidate, true, false, true, false, false},
      {RdmapOpcode::kSendSe, true, true, false, false, false},
      {RdmapOpcode::kSendSeInvalidate, true, true, true, false, false},
      {RdmapOpcode::kTerminate, false, false, false, false, false},
      {RdmapOpcode::kImmediateData, false, false, false, true, true},
      {RdmapOpcode::kImmediateDataSe, false, true, false, true, true},
      {RdmapOpcode::kAtomicRequest, false, false, false, true, false},
      {RdmapOpcode::kAtomicResponse, false, false, false, true, false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(to_string(r.op)));
    EXPECT_EQ(is_send_opcode(r.op), r.send);
    EXPECT_EQ(is_solicited(r.op), r.solicited);
    EXPECT_EQ(carries_invalidate(r.op), r.invalidate);
    EXPECT_EQ(is_rfc7306_opcode(static_cast<std::uint8_t>(r.op)), r.rfc7306);
    EXPECT_EQ(is_immediate_data(r.op), r.immediate);
  }
  for (std::uint8_t op = 0xC; op <= 0xF; ++op) EXPECT_FALSE(is_rfc7306_opcode(op)) << int{op};
}

// --- Read Request ------------------------------------------------------------------------------

TEST(wire_rdmap, DecodesSiwReadRequest) {
  const ConstByteSpan body = untagged_body_of(siw::kFpduReadRequestCrc);
  ASSERT_EQ(body.size(), kReadRequestSize);
  auto rr = decode_read_request(body);
  ASSERT_TRUE(rr.has_value());
  EXPECT_EQ(rr->sink_stag, 0xf2f78900u);
  EXPECT_EQ(rr->sink_to, 0x000055d8b33ea550u);
  EXPECT_EQ(rr->size, 64u);
  EXPECT_EQ(rr->source_stag, 0xff101200u);
  EXPECT_EQ(rr->source_to, 0x0000563c6afc8370u);
}

// A READ RTR is a zero-length Read Request; siw reads from STag 1, TO 0.
TEST(wire_rdmap, DecodesSiwReadRtr) {
  auto rr = decode_read_request(untagged_body_of(siw::kFpduRtrReadRequest));
  ASSERT_TRUE(rr.has_value());
  EXPECT_EQ(rr->sink_stag, 0u);
  EXPECT_EQ(rr->sink_to, 0u);
  EXPECT_EQ(rr->size, 0u);
  EXPECT_EQ(rr->source_stag, 1u);
  EXPECT_EQ(rr->source_to, 0u);
}

TEST(wire_rdmap, ReadRequestFieldOrder) {
  constexpr std::uint8_t kBody[] = {
      0x10, 0x11, 0x12, 0x13,                          // Data Sink STag
      0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27,  // Data Sink TO
      0x30, 0x31, 0x32, 0x33,                          // RDMA Read Message Size
      0x40, 0x41, 0x42, 0x43,                          // Data Source STag
      0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57,  // Data Source TO
  };
  ReadRequest rr;
  rr.sink_stag = 0x10111213;
  rr.sink_to = 0x2021222324252627;
  rr.size = 0x30313233;
  rr.source_stag = 0x40414243;
  rr.source_to = 0x5051525354555657;
  std::array<std::uint8_t, kReadRequestSize + 4> out;
  out.fill(0xaa);
  ASSERT_EQ(encode_read_request(rr, out), kReadRequestSize);
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(kReadRequestSize)), to_hex(kBody));
  EXPECT_EQ(out[kReadRequestSize], 0xaa);
  auto back = decode_read_request(kBody);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->sink_stag, rr.sink_stag);
  EXPECT_EQ(back->sink_to, rr.sink_to);
  EXPECT_EQ(back->size, rr.size);
  EXPECT_EQ(back->source_stag, rr.source_stag);
  EXPECT_EQ(back->source_to, rr.source_to);
}

TEST(wire_rdmap, SiwReadRequestsRoundTripAndTruncate) {
  for (ConstByteSpan fpdu :
       {ConstByteSpan(siw::kFpduReadRequestCrc), ConstByteSpan(siw::kFpduRtrReadRequest)}) {
    const ConstByteSpan body = untagged_body_of(fpdu);
    auto rr = decode_read_request(body);
    ASSERT_TRUE(rr.has_value());
    std::array<std::uint8_t, kReadRequestSize> out{};
    ASSERT_EQ(encode_read_request(*rr, out), kReadRequestSize);
    EXPECT_EQ(to_hex(out), to_hex(body));
    for (std::size_t len = 0; len < kReadRequestSize; ++len) {
      ASSERT_EQ(error_of(decode_read_request(body.first(len))), DdpHeaderError::kTruncated) << len;
    }
  }
}

TEST(wire_rdmap, EncodeReadRequestRefusesSmallOutput) {
  std::vector<std::uint8_t> out(kReadRequestSize - 1, 0xaa);
  EXPECT_EQ(encode_read_request(ReadRequest{}, out), 0u);
  EXPECT_EQ(out, std::vector<std::uint8_t>(out.size(), 0xaa));
}

// --- Terminate ---------------------------------------------------------------------------------

// siw-flavour-p2p-no-rtr: the responder picked no RTR type, so siw (the initiator) terminated
// with what it means as LLP / 0 / 0x07 (no matching RTR). siw fills the control word through
// little-endian bitfields, so its first byte carries EType in the high nibble and Layer in the
// low nibble: 0x02. Read in the RFC 5040 layout, as uwarp must, that is Layer 0 (RDMAP), EType 2,
// ECode 0x07: a different and wrong code. The raw word is kept so it can be logged.
TEST(wire_rdmap, DecodesSiwTerminateWithSwappedLayerAndEtype) {
  const ConstByteSpan body = untagged_body_of(siw::kFpduTerminateNoRtr);
  ASSERT_EQ(to_hex(body), "02 07 00 00");
  auto m = decode_terminate(body);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->raw_control, 0x02070000u);
  EXPECT_EQ(m->code.layer, TermLayer::kRdmap);
  EXPECT_EQ(m->code.etype, 2);
  EXPECT_EQ(m->code.ecode, 0x07);
  EXPECT_EQ(m->code, term::kRdmapCatastrophicStream);  // what the RFC layout says...
  const TerminateCode siw_meant{static_cast<TermLayer>(m->raw_control >> 24 & 0x0F),
                                static_cast<std::uint8_t>(m->raw_control >> 28), m->code.ecode};
  EXPECT_EQ(siw_meant, term::kLlpNoMatchingRtr);  // ...and what siw meant
  EXPECT_FALSE(m->has_segment_length);
  EXPECT_TRUE(m->ddp_header.empty());
  EXPECT_TRUE(m->rdmap_header.empty());
}

// The whole FPDU decodes layer by layer and re-encodes to siw's 28 bytes.
TEST(wire_rdmap, SiwTerminateFpduRoundTrip) {
  auto fpdu = decode_fpdu(siw::kFpduTerminateNoRtr, false);
  ASSERT_TRUE(fpdu.has_value());
  auto ddp = decode_ddp_header(fpdu->ulpdu);
  ASSERT_TRUE(ddp.has_value());
  EXPECT_EQ(ddp->opcode, static_cast<std::uint8_t>(RdmapOpcode::kTerminate));
  EXPECT_EQ(ddp->queue, kQueueTerminate);
  auto term = decode_terminate(fpdu->ulpdu.subspan(ddp->size()));
  ASSERT_TRUE(term.has_value());

  std::array<std::uint8_t, kMaxDdpHeaderSize + kTerminateMaxSize> ulpdu{};
  std::size_t n = encode_ddp_header(*ddp, ulpdu);
  ASSERT_EQ(n, kUntaggedHeaderSize);
  const std::size_t t = encode_terminate(*term, ByteSpan(ulpdu).subspan(n));
  ASSERT_EQ(t, 4u);
  n += t;
  std::array<std::uint8_t, 64> out{};
  const std::size_t total = encode_fpdu(ConstByteSpan(ulpdu).first(n), false, out);
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(total)), to_hex(siw::kFpduTerminateNoRtr));
}

// uwarp sends the RFC 5040 section 4.8 layout: Layer in the high nibble of the first byte.
TEST(wire_rdmap, EncodesTerminateCodesInRfcLayout) {
  struct Row {
    TerminateCode code;
    const char* bytes;
  };
  const Row rows[] = {
      {term::kLlpNoMatchingRtr, "20 07 00 00"},
      {term::kLlpBadCrc, "20 02 00 00"},
      {term::kLlpInvalidRequestReply, "20 04 00 00"},
      {term::kDdpUntaggedNoBuffer, "12 02 00 00"},
      {term::kDdpUntaggedInvalidQn, "12 01 00 00"},
      {term::kDdpUntaggedBadVersion, "12 06 00 00"},
      {term::kDdpTaggedInvalidStag, "11 00 00 00"},
      {term::kDdpTaggedBaseBounds, "11 01 00 00"},
      {term::kDdpTaggedBadVersion, "11 04 00 00"},
      {term::kRdmapInvalidStag, "01 00 00 00"},
      {term::kRdmapBadVersion, "02 05 00 00"},
      {term::kRdmapUnexpectedOpcode, "02 06 00 00"},
      {term::kRdmapCatastrophicStream, "02 07 00 00"},
      {term::kRdmapUnspecified, "02 ff 00 00"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(describe(r.code));
    TerminateMessage m;
    m.code = r.code;
    std::array<std::uint8_t, kTerminateControlSize> out{};
    ASSERT_EQ(encode_terminate(m, out), kTerminateControlSize);
    EXPECT_EQ(to_hex(out), r.bytes);
    auto back = decode_terminate(out);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->code, r.code);
  }
}

TEST(wire_rdmap, DescribesCodes) {
  EXPECT_EQ(describe(term::kLlpNoMatchingRtr), "LLP/0/0x07");
  EXPECT_EQ(describe(term::kDdpUntaggedNoBuffer), "DDP/2/0x02");
  EXPECT_EQ(describe(term::kRdmapUnexpectedOpcode), "RDMAP/2/0x06");
  EXPECT_EQ(describe(term::kRdmapUnspecified), "RDMAP/2/0xff");
  // A layer no RFC defines, as a decoded Terminate can carry.
  EXPECT_EQ(describe(TerminateCode{static_cast<TermLayer>(0xf), 0xf, 0x80}), "layer?/15/0x80");
}

// Terminates with copied headers, as field-annotated bytes. Each encodes from its fields,
// decodes back to them, and refuses every truncation.
struct TerminateVector {
  const char* name = "";
  TerminateCode code;
  bool m = false;
  std::uint16_t segment_length = 0;
  std::size_t ddp_header_size = 0;    // 0: no D flag
  std::size_t rdmap_header_size = 0;  // 0: no R flag
  std::vector<std::uint8_t> bytes;
};

std::vector<TerminateVector> terminate_vectors() {
  return {
      {.name = "control word only (as siw sent)",
       .code = term::kRdmapCatastrophicStream,
       .bytes =
           {
               0x02, 0x07,  // Layer 0 (RDMAP), EType 2, Error Code 0x07
               0x00, 0x00,  // Hdrct M=0 D=0 R=0, reserved 0
           }},
      {.name = "M only",
       .code = term::kLlpBadCrc,
       .m = true,
       .segment_length = 78,
       .bytes =
           {
               0x20, 0x02,  // Layer 2 (LLP), EType 0, Error Code 0x02 (CRC error)
               0x80, 0x00,  // Hdrct M=1 D=0 R=0
               0x00, 0x4e,  // DDP Segment Length 78
           }},
      {.name = "M, D with the tagged header of siw's Write",
       .code = term::kDdpTaggedInvalidStag,
       .m = true,
       .segment_length = 78,
       .ddp_header_size = 14,
       .bytes =
           {
               0x11, 0x00,                                      // DDP, EType 1 (tagged), 0x00
               0xc0, 0x00,                                      // Hdrct M=1 D=1 R=0
               0x00, 0x4e,                                      // DDP Segment Length 78
               0xc1, 0x40,                                      // DDP: T=1 L=1 DV 1; RDMAP: Write
               0x8b, 0xcc, 0x15, 0x00,                          // STag
               0x00, 0x00, 0x56, 0x3c, 0x6a, 0xfc, 0x85, 0x50,  // TO
           }},
      {.name = "M, D with the untagged header of siw's Send",
       .code = term::kDdpUntaggedNoBuffer,
       .m = true,
       .segment_length = 34,
       .ddp_header_size = 18,
       .bytes =
           {
               0x12, 0x02,              // DDP, EType 2 (untagged), 0x02 (no buffer)
               0xc0, 0x00,              // Hdrct M=1 D=1 R=0
               0x00, 0x22,              // DDP Segment Length 34
               0x41, 0x43,              // DDP: T=0 L=1 DV 1; RDMAP: Send
               0x00, 0x00, 0x00, 0x00,  // reserved for ULP
               0x00, 0x00, 0x00, 0x00,  // QN 0
               0x00, 0x00, 0x00, 0x01,  // MSN 1
               0x00, 0x00, 0x00, 0x00,  // MO 0
           }},
      {.name = "M, D, R with siw's Read Request",
       .code = term::kRdmapInvalidStag,
       .m = true,
       .segment_length = 46,
       .ddp_header_size = 18,
       .rdmap_header_size = 28,
       .bytes =
           {
               0x01, 0x00,                                      // RDMAP, EType 1, 0x00 (STag)
               0xe0, 0x00,                                      // Hdrct M=1 D=1 R=1
               0x00, 0x2e,                                      // DDP Segment Length 46
               0x41, 0x41,                                      // DDP: T=0 L=1; Read Request
               0x00, 0x00, 0x00, 0x00,                          // reserved for ULP
               0x00, 0x00, 0x00, 0x01,                          // QN 1
               0x00, 0x00, 0x00, 0x01,                          // MSN 1
               0x00, 0x00, 0x00, 0x00,                          // MO 0
               0xf2, 0xf7, 0x89, 0x00,                          // Data Sink STag
               0x00, 0x00, 0x55, 0xd8, 0xb3, 0x3e, 0xa5, 0x50,  // Data Sink TO
               0x00, 0x00, 0x00, 0x40,                          // RDMA Read Message Size
               0xff, 0x10, 0x12, 0x00,                          // Data Source STag
               0x00, 0x00, 0x56, 0x3c, 0x6a, 0xfc, 0x83, 0x70,  // Data Source TO
           }},
      {.name = "D, R without M",
       .code = term::kRdmapBaseBounds,
       .ddp_header_size = 18,
       .rdmap_header_size = 28,
       .bytes =
           {
               0x01, 0x01,                                      // RDMAP, EType 1, 0x01 (bounds)
               0x60, 0x00,                                      // Hdrct M=0 D=1 R=1
               0x41, 0x41,                                      // DDP: T=0 L=1; Read Request
               0x00, 0x00, 0x00, 0x00,                          // reserved for ULP
               0x00, 0x00, 0x00, 0x01,                          // QN 1
               0x00, 0x00, 0x00, 0x02,                          // MSN 2
               0x00, 0x00, 0x00, 0x00,                          // MO 0
               0x00, 0x00, 0x00, 0x01,                          // Data Sink STag
               0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,  // Data Sink TO
               0x00, 0x01, 0x00, 0x00,                          // RDMA Read Message Size
               0x00, 0x00, 0x00, 0x02,                          // Data Source STag
               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0x00,  // Data Source TO
           }},
      {.name = "R only",
       .code = term::kRdmapAccessRights,
       .rdmap_header_size = 28,
       .bytes =
           {
               0x01, 0x02,                                      // RDMAP, EType 1, 0x02 (access)
               0x20, 0x00,                                      // Hdrct M=0 D=0 R=1
               0x00, 0x00, 0x00, 0x01,                          // Data Sink STag
               0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Data Sink TO
               0x00, 0x00, 0x00, 0x08,                          // RDMA Read Message Size
               0x00, 0x00, 0x00, 0x02,                          // Data Source STag
               0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Data Source TO
           }},
  };
}

TEST(wire_rdmap, TerminateVectorsDecode) {
  for (const TerminateVector& v : terminate_vectors()) {
    SCOPED_TRACE(v.name);
    const ConstByteSpan in(v.bytes);
    ASSERT_EQ(in.size(),
              kTerminateControlSize + (v.m ? 2 : 0) + v.ddp_header_size + v.rdmap_header_size);
    auto m = decode_terminate(in);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->raw_control, load_be32(in.data()));
    EXPECT_EQ(m->code, v.code);
    EXPECT_EQ(m->has_segment_length, v.m);
    EXPECT_EQ(m->segment_length, v.segment_length);
    std::size_t at = kTerminateControlSize + (v.m ? 2 : 0);
    EXPECT_EQ(m->ddp_header.size(), v.ddp_header_size);
    if (v.ddp_header_size != 0) {
      EXPECT_EQ(m->ddp_header.data(), in.data() + at);  // a view of the input
      auto h = decode_ddp_header(m->ddp_header);
      ASSERT_TRUE(h.has_value());
      EXPECT_EQ(h->size(), v.ddp_header_size);
    }
    at += v.ddp_header_size;
    EXPECT_EQ(m->rdmap_header.size(), v.rdmap_header_size);
    if (v.rdmap_header_size != 0) {
      EXPECT_EQ(m->rdmap_header.data(), in.data() + at);
      EXPECT_TRUE(decode_read_request(m->rdmap_header).has_value());
    }
  }
}

TEST(wire_rdmap, TerminateVectorsEncodeFromFields) {
  for (const TerminateVector& v : terminate_vectors()) {
    SCOPED_TRACE(v.name);
    const ConstByteSpan in(v.bytes);
    TerminateMessage m;
    m.code = v.code;
    m.has_segment_length = v.m;
    m.segment_length = v.segment_length;
    const std::size_t ddp_at = kTerminateControlSize + (v.m ? 2 : 0);
    m.ddp_header = in.subspan(ddp_at, v.ddp_header_size);
    m.rdmap_header = in.subspan(ddp_at + v.ddp_header_size, v.rdmap_header_size);
    std::array<std::uint8_t, kTerminateMaxSize + 4> out;
    out.fill(0xaa);
    const std::size_t n = encode_terminate(m, out);
    ASSERT_EQ(n, in.size());
    EXPECT_EQ(to_hex(ConstByteSpan(out).first(n)), to_hex(in));
    EXPECT_EQ(out[n], 0xaa);
  }
}

TEST(wire_rdmap, TerminateVectorsRoundTrip) {
  for (const TerminateVector& v : terminate_vectors()) {
    SCOPED_TRACE(v.name);
    auto m = decode_terminate(v.bytes);
    ASSERT_TRUE(m.has_value());
    std::array<std::uint8_t, kTerminateMaxSize> out{};
    const std::size_t n = encode_terminate(*m, out);
    EXPECT_EQ(to_hex(ConstByteSpan(out).first(n)), to_hex(v.bytes));
  }
}

TEST(wire_rdmap, TerminateEveryTruncationIsTruncated) {
  for (const TerminateVector& v : terminate_vectors()) {
    SCOPED_TRACE(v.name);
    const ConstByteSpan in(v.bytes);
    for (std::size_t len = 0; len < in.size(); ++len) {
      ASSERT_EQ(error_of(decode_terminate(in.first(len))), TerminateError::kTruncated) << len;
    }
  }
}

TEST(wire_rdmap, EncodeTerminateRefusesSmallOutputAndWritesNothing) {
  for (const TerminateVector& v : terminate_vectors()) {
    SCOPED_TRACE(v.name);
    auto m = decode_terminate(v.bytes);
    ASSERT_TRUE(m.has_value());
    std::vector<std::uint8_t> out(v.bytes.size() - 1, 0xaa);
    EXPECT_EQ(encode_terminate(*m, out), 0u);
    EXPECT_EQ(out, std::vector<std::uint8_t>(out.size(), 0xaa));
  }
}

TEST(wire_rdmap, LargestTerminateIsMDRWithAReadRequest) {
  const auto vectors = terminate_vectors();
  EXPECT_EQ(kTerminateMaxSize, 52u);
  EXPECT_EQ(vectors[4].bytes.size(), kTerminateMaxSize);
}

// The 13 reserved bits of the control word do not disturb the fields or flags. They are kept in
// raw_control but not re-encoded (uwarp sends them as zero), so such a Terminate does not round
// trip byte for byte.
TEST(wire_rdmap, TerminateReservedBitsAreIgnored) {
  constexpr std::uint8_t kBody[] = {
      0x20, 0x02,  // LLP, EType 0, 0x02
      0x9f, 0xff,  // Hdrct M=1 D=0 R=0, reserved 0x1fff
      0x01, 0x00,  // DDP Segment Length 256
  };
  auto m = decode_terminate(kBody);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->raw_control, 0x20029fffu);
  EXPECT_EQ(m->code, term::kLlpBadCrc);
  EXPECT_TRUE(m->has_segment_length);
  EXPECT_EQ(m->segment_length, 256);
  EXPECT_TRUE(m->ddp_header.empty());
  EXPECT_TRUE(m->rdmap_header.empty());
  std::array<std::uint8_t, 6> out{};
  ASSERT_EQ(encode_terminate(*m, out), 6u);
  EXPECT_EQ(to_hex(out), "20 02 80 00 01 00");
}

// A D flag whose copied header claims the tagged model needs 14 bytes, the untagged one 18: the
// decoder sizes the copy from the copied T bit.
TEST(wire_rdmap, TerminateDdpCopySizedByItsTaggedBit) {
  std::vector<std::uint8_t> body = {
      0x11, 0x00,  // DDP, EType 1, 0x00
      0x40, 0x00,  // Hdrct D=1
      0xc1, 0x40,  // copied DDP header: T=1
  };
  body.resize(kTerminateControlSize + kTaggedHeaderSize, 0);
  auto tagged = decode_terminate(body);
  ASSERT_TRUE(tagged.has_value());
  EXPECT_EQ(tagged->ddp_header.size(), kTaggedHeaderSize);

  body[4] = 0x41;  // T=0: the same bytes are now 4 short of an untagged header
  EXPECT_EQ(error_of(decode_terminate(body)), TerminateError::kTruncated);
  body.resize(kTerminateControlSize + kUntaggedHeaderSize, 0);
  auto untagged = decode_terminate(body);
  ASSERT_TRUE(untagged.has_value());
  EXPECT_EQ(untagged->ddp_header.size(), kUntaggedHeaderSize);
}

TEST(TerminateNames, NameEveryCodeUwarpSends) {
  EXPECT_EQ(describe_named(term::kDdpUntaggedNoBuffer),
            "DDP/2/0x02 (untagged buffer error: invalid MSN, no buffer available)");
  EXPECT_EQ(terminate_error_name(term::kRdmapAccessRights),
            "remote protection error: access rights violation");
  EXPECT_EQ(terminate_error_name(term::kLlpBadCrc), "MPA error: CRC error");
  EXPECT_EQ(terminate_error_name(term::kRdmapUnexpectedOpcode),
            "remote operation error: unexpected opcode");
  EXPECT_EQ(terminate_error_name(TerminateCode{TermLayer::kLlp, 3, 0x00}),
            "unknown error type: unknown code");
  EXPECT_EQ(terminate_error_name(TerminateCode{TermLayer::kDdp, 1, 0x77}),
            "tagged buffer error: unknown code");
  // Every code uwarp sends has a name.
  for (const TerminateCode& c : {term::kRdmapLocalCatastrophic,
                                 term::kRdmapInvalidStag,
                                 term::kRdmapBaseBounds,
                                 term::kRdmapAccessRights,
                                 term::kRdmapStagNotAssociated,
                                 term::kRdmapToWrap,
                                 term::kRdmapCannotInvalidateProtection,
                                 term::kRdmapBadVersion,
                                 term::kRdmapUnexpectedOpcode,
                                 term::kRdmapCatastrophicStream,
                                 term::kRdmapCannotInvalidate,
                                 term::kRdmapUnspecified,
                                 term::kDdpCatastrophic,
                                 term::kDdpTaggedInvalidStag,
                                 term::kDdpTaggedBaseBounds,
                                 term::kDdpTaggedStagNotAssociated,
                                 term::kDdpTaggedToWrap,
                                 term::kDdpTaggedBadVersion,
                                 term::kDdpUntaggedInvalidQn,
                                 term::kDdpUntaggedNoBuffer,
                                 term::kDdpUntaggedInvalidMsn,
                                 term::kDdpUntaggedInvalidMo,
                                 term::kDdpUntaggedTooLong,
                                 term::kDdpUntaggedBadVersion,
                                 term::kLlpTcpStreamLost,
                                 term::kLlpBadCrc,
                                 term::kLlpBadFpdu,
                                 term::kLlpInvalidRequestReply,
                                 term::kLlpLocalCatastrophic,
                                 term::kLlpInsufficientIrd,
                                 term::kLlpNoMatchingRtr}) {
    EXPECT_EQ(terminate_error_name(c).find("unknown"), std::string::npos) << describe(c);
  }
}

}  // namespace
}  // namespace uwarp::wire
