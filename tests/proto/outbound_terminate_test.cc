// proto::OutboundTerminate alone: nothing to send before a failure, the body encodes the
// failure's code and the copies of the terminated headers, and it is handed out once.
#include "proto/outbound_terminate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "proto/proto_test_util.h"

namespace uwarp::proto {
namespace {

namespace term = wire::term;

TEST(proto_outbound_terminate, NothingIsSentBeforeAFailure) {
  OutboundTerminate t;
  ConstByteSpan body;
  EXPECT_FALSE(t.queued());
  EXPECT_FALSE(t.start(body));
}

TEST(proto_outbound_terminate, AFailureWithoutAHeaderSendsTheCodeAlone) {
  OutboundTerminate t;
  RxFailure f;
  f.code = term::kLlpBadFpdu;
  EXPECT_EQ(t.queue(f), term::kLlpBadFpdu);
  EXPECT_TRUE(t.queued());
  ConstByteSpan body;
  ASSERT_TRUE(t.start(body));
  EXPECT_EQ(body.size(), wire::kTerminateControlSize);
  auto m = wire::decode_terminate(body);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->code, term::kLlpBadFpdu);
  EXPECT_FALSE(m->has_segment_length);
  EXPECT_TRUE(m->ddp_header.empty());
  EXPECT_TRUE(m->rdmap_header.empty());
}

TEST(proto_outbound_terminate, TheTerminatedHeadersAreCopiedIntoTheBody) {
  RxFailure f;
  f.code = term::kRdmapInvalidStag;
  f.have_header = true;
  f.ulpdu_length = 46;
  const wire::DdpHeader ddp =
      testing::untagged_header(wire::RdmapOpcode::kReadRequest, wire::kQueueReadRequest, 3);
  f.header_size = wire::encode_ddp_header(ddp, f.header);
  f.have_rdmap_header = true;
  std::fill(f.rdmap_header.begin(), f.rdmap_header.end(), std::uint8_t{0xA5});
  OutboundTerminate t;
  t.queue(f);
  ConstByteSpan body;
  ASSERT_TRUE(t.start(body));
  auto m = wire::decode_terminate(body);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->code, term::kRdmapInvalidStag);
  ASSERT_TRUE(m->has_segment_length);
  EXPECT_EQ(m->segment_length, 46);
  EXPECT_EQ(testing::to_hex(m->ddp_header),
            testing::to_hex(ConstByteSpan(f.header.data(), f.header_size)));
  EXPECT_EQ(testing::to_hex(m->rdmap_header), testing::to_hex(f.rdmap_header));
}

TEST(proto_outbound_terminate, TheBodyIsHandedOutOnce) {
  OutboundTerminate t;
  RxFailure f;
  f.code = term::kDdpUntaggedInvalidMsn;
  t.queue(f);
  ConstByteSpan body;
  EXPECT_TRUE(t.start(body));
  ConstByteSpan again;
  EXPECT_FALSE(t.start(again));
  EXPECT_TRUE(again.empty());
  EXPECT_TRUE(t.queued()) << "it stays queued: nothing else is received or sent";
}

}  // namespace
}  // namespace uwarp::proto
