// cm::setup_terminate: the FPDU sent when the MPA exchange fails, byte for byte, for each code
// the initiator can fail with.
#include "cm/setup_terminate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/rdmap.h"

namespace uwarp::cm {
namespace {

using Bytes = std::vector<std::uint8_t>;

// ULPDU_Length 22; untagged DDP header (L bit, DDP and RDMAP version 1, opcode Terminate, QN 2,
// MSN 1, MO 0); the control word (layer LLP, etype 0, `ecode`, no header flags); no pad; a
// zero CRC trailer.
Bytes expected_fpdu(std::uint8_t ecode) {
  return {0x00, 0x16,                          // ULPDU_Length
          0x41, 0x47, 0x00, 0x00, 0x00, 0x00,  // DDP control, RDMAP control, reserved
          0x00, 0x00, 0x00, 0x02,              // queue
          0x00, 0x00, 0x00, 0x01,              // MSN
          0x00, 0x00, 0x00, 0x00,              // message offset
          0x20, ecode, 0x00, 0x00,             // Terminate control
          0x00, 0x00, 0x00, 0x00};             // CRC
}

TEST(cm_setup_terminate, IsByteExactForEachSetupCode) {
  EXPECT_EQ(setup_terminate(wire::term::kLlpInvalidRequestReply), expected_fpdu(0x04));
  EXPECT_EQ(setup_terminate(wire::term::kLlpInsufficientIrd), expected_fpdu(0x06));
  EXPECT_EQ(setup_terminate(wire::term::kLlpNoMatchingRtr), expected_fpdu(0x07));
}

TEST(cm_setup_terminate, DecodesAsOneLastTerminateSegment) {
  const Bytes fpdu = setup_terminate(wire::term::kLlpNoMatchingRtr);
  auto f = wire::decode_fpdu(fpdu, /*check_crc=*/false);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->consumed, fpdu.size());
  auto h = wire::decode_ddp_header(f->ulpdu);
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->tagged);
  EXPECT_TRUE(h->last);
  EXPECT_EQ(h->opcode, static_cast<std::uint8_t>(wire::RdmapOpcode::kTerminate));
  EXPECT_EQ(h->queue, wire::kQueueTerminate);
  EXPECT_EQ(h->msn, 1u);
  EXPECT_EQ(h->message_offset, 0u);
  auto t = wire::decode_terminate(f->ulpdu.subspan(wire::kUntaggedHeaderSize));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->code, wire::term::kLlpNoMatchingRtr);
  EXPECT_FALSE(t->has_segment_length);
  EXPECT_TRUE(t->ddp_header.empty());
  EXPECT_TRUE(t->rdmap_header.empty());
}

}  // namespace
}  // namespace uwarp::cm
