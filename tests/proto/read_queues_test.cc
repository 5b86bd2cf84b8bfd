// proto::OutboundReadQueue and InboundReadQueue alone: fences and ORD on transmit, Read
// Responses matched to the oldest Read and its advertised sink, segment by segment in order
// (overlaps, repeats and gaps refused), short responses, the RTR Read's empty answer, abandon;
// the inbound queue's order and how long it holds a Read's source.
#include "proto/read_queues.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <optional>

#include "proto/proto_test_util.h"
#include "proto/rtr.h"

namespace uwarp::proto {
namespace {

using wire::Stag;
using wire::TaggedOffset;
namespace term = wire::term;

OutboundRead read(std::uint64_t seq, std::uint32_t sink_stag, std::uint64_t sink_offset,
                  std::uint32_t length) {
  return OutboundRead{seq, Stag{sink_stag}, TaggedOffset{sink_offset}, length, 0};
}

TEST(proto_read_queues, AFenceWaitsForEveryOutstandingRead) {
  OutboundReadQueue orq(4);
  EXPECT_TRUE(orq.may_start(/*read=*/false, /*fence=*/true)) << "no Read outstanding";
  orq.push(read(1, 0x10, 0, 8));
  EXPECT_FALSE(orq.may_start(false, true));
  EXPECT_FALSE(orq.may_start(true, true));
  EXPECT_TRUE(orq.may_start(false, false)) << "an unfenced request does not wait";
  EXPECT_TRUE(orq.may_start(true, false));
}

TEST(proto_read_queues, OrdBoundsTheReadsOutstanding) {
  OutboundReadQueue orq(2);
  orq.push(read(1, 0x10, 0, 8));
  EXPECT_TRUE(orq.may_start(true, false));
  orq.push(read(2, 0x11, 0, 8));
  EXPECT_FALSE(orq.may_start(true, false)) << "ORD 2 Reads are outstanding";
  EXPECT_TRUE(orq.may_start(false, false)) << "ORD bounds Reads only";
  orq.placed(8);
  ASSERT_TRUE(orq.complete());
  EXPECT_TRUE(orq.may_start(true, false)) << "a completed Read frees its ORD slot";
}

TEST(proto_read_queues, OrdZeroRefusesEveryRead) {
  OutboundReadQueue orq(0);
  EXPECT_FALSE(orq.may_start(true, false));
  EXPECT_TRUE(orq.may_start(false, false));
}

TEST(proto_read_queues, ASegmentIsPlacedInTheOldestReadsSink) {
  OutboundReadQueue orq(4);
  orq.push(read(7, 0x10, 0x1000, 100));
  orq.push(read(8, 0x11, 0, 100));
  auto first = orq.match_segment(Stag{0x10}, TaggedOffset{0x1000}, 0x40);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->offset, 0u);
  orq.placed(0x40);
  auto target = orq.match_segment(Stag{0x10}, TaggedOffset{0x1040}, 36);
  ASSERT_TRUE(target);
  EXPECT_FALSE(target->rtr);
  EXPECT_EQ(target->seq, 7u);
  EXPECT_EQ(target->offset, 0x40u);
  auto second = orq.match_segment(Stag{0x11}, TaggedOffset{0}, 8);
  ASSERT_FALSE(second) << "responses come in Read order";
  EXPECT_EQ(second.error(), term::kDdpTaggedInvalidStag);
}

TEST(proto_read_queues, ASegmentOutsideTheAdvertisedSinkIsABoundsError) {
  OutboundReadQueue orq(4);
  orq.push(read(1, 0x10, 0x1000, 100));
  auto before = orq.match_segment(Stag{0x10}, TaggedOffset{0xFFF}, 1);
  ASSERT_FALSE(before);
  EXPECT_EQ(before.error(), term::kDdpTaggedBaseBounds);
  auto too_long = orq.match_segment(Stag{0x10}, TaggedOffset{0x1000}, 101);
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error(), term::kDdpTaggedBaseBounds);
  ASSERT_TRUE(orq.match_segment(Stag{0x10}, TaggedOffset{0x1000}, 60));
  orq.placed(60);
  auto past = orq.match_segment(Stag{0x10}, TaggedOffset{0x1000 + 60}, 41);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error(), term::kDdpTaggedBaseBounds);
  EXPECT_TRUE(orq.match_segment(Stag{0x10}, TaggedOffset{0x1000 + 60}, 40))
      << "up to the sink's last byte";
}

// The segments of one Read Response, in the order they arrive: [to - sink TO, + length).
struct Segment {
  std::uint64_t offset;
  std::size_t length;
};

// Feeds `segments` to a Read of `length` bytes at sink TO 0x1000 as the engine does (placed()
// after each segment matched); the first refused segment's error, or nullopt if none was.
std::optional<wire::TerminateCode> respond(OutboundReadQueue& orq, std::uint32_t length,
                                           std::initializer_list<Segment> segments) {
  orq.push(read(1, 0x10, 0x1000, length));
  for (const Segment& s : segments) {
    auto target = orq.match_segment(Stag{0x10}, TaggedOffset{0x1000 + s.offset}, s.length);
    if (!target) return target.error();
    EXPECT_EQ(target->offset, s.offset);
    orq.placed(s.length);
  }
  return std::nullopt;
}

TEST(proto_read_queues, InOrderSegmentsCompleteTheRead) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{0, 30}, {30, 0}, {30, 40}, {70, 30}}), std::nullopt);
  auto done = orq.complete();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->seq, 1u);
}

TEST(proto_read_queues, AZeroLengthReadIsAnsweredByOneEmptySegment) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 0, {{0, 0}}), std::nullopt);
  EXPECT_TRUE(orq.complete());
}

// Each of these adds up to the Read's length (or would, with the segments that follow), but
// leaves sink bytes unwritten: the response is refused at the first misplaced segment, and its
// Read does not complete.
TEST(proto_read_queues, OverlappingSegmentsAreABoundsError) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{0, 60}, {20, 40}}), term::kDdpTaggedBaseBounds)
      << "[20, 60) again; [60, 100) never written";
  EXPECT_FALSE(orq.complete());
}

TEST(proto_read_queues, ARepeatedSegmentIsABoundsError) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{0, 50}, {0, 50}}), term::kDdpTaggedBaseBounds);
  EXPECT_FALSE(orq.complete());
}

TEST(proto_read_queues, ASegmentAfterAGapIsABoundsError) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{0, 40}, {60, 40}, {40, 20}}), term::kDdpTaggedBaseBounds)
      << "[40, 60) skipped";
  EXPECT_FALSE(orq.complete());
}

TEST(proto_read_queues, ASegmentBeforeTheBytesPlacedIsABoundsError) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{50, 50}, {0, 50}}), term::kDdpTaggedBaseBounds)
      << "segments of one message arrive in order";
  EXPECT_FALSE(orq.complete());
}

TEST(proto_read_queues, ALastSegmentBeforeTheReadsLengthIsABoundsError) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{0, 60}}), std::nullopt);
  auto early = orq.complete();  // L=1 on the second segment
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error(), term::kDdpTaggedBaseBounds);
}

TEST(proto_read_queues, NoSegmentFollowsTheReadsLastByte) {
  OutboundReadQueue orq(4);
  EXPECT_EQ(respond(orq, 100, {{0, 100}, {100, 1}}), term::kDdpTaggedBaseBounds);
  EXPECT_TRUE(orq.complete()) << "the 100 bytes placed still make the whole response";
}

TEST(proto_read_queues, AResponseWithoutAReadIsAnInvalidStag) {
  OutboundReadQueue orq(4);
  auto segment = orq.match_segment(Stag{0x10}, TaggedOffset{0}, 8);
  ASSERT_FALSE(segment);
  EXPECT_EQ(segment.error(), term::kDdpTaggedInvalidStag);
  auto whole = orq.complete();
  ASSERT_FALSE(whole);
  EXPECT_EQ(whole.error(), term::kDdpTaggedInvalidStag);
}

TEST(proto_read_queues, OnlyAWholeResponseCompletesItsRead) {
  OutboundReadQueue orq(4);
  orq.push(read(3, 0x10, 0, 100));
  orq.push(read(4, 0x11, 0, 10));
  orq.placed(60);
  auto short_response = orq.complete();
  ASSERT_FALSE(short_response);
  EXPECT_EQ(short_response.error(), term::kDdpTaggedBaseBounds);
  orq.placed(40);
  auto done = orq.complete();
  ASSERT_TRUE(done);
  EXPECT_FALSE(done->rtr);
  EXPECT_EQ(done->seq, 3u);
  auto next = orq.match_segment(Stag{0x11}, TaggedOffset{0}, 10);
  ASSERT_TRUE(next) << "the next Read is now the oldest";
  EXPECT_EQ(next->seq, 4u);
}

TEST(proto_read_queues, TheRtrReadIsAnsweredByAnEmptyResponseAheadOfOtherReads) {
  OutboundReadQueue orq(1);
  orq.push_rtr_read();
  EXPECT_TRUE(orq.may_start(true, true)) << "the RTR Read is no work request";
  orq.push(read(1, 0x10, 0, 8));
  auto with_bytes = orq.match_segment(Stag{kRtrStag}, TaggedOffset{0}, 1);
  ASSERT_FALSE(with_bytes);
  EXPECT_EQ(with_bytes.error(), term::kDdpTaggedBaseBounds);
  auto empty = orq.match_segment(Stag{0x99}, TaggedOffset{0}, 0);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->rtr);
  auto rtr = orq.complete();
  ASSERT_TRUE(rtr);
  EXPECT_TRUE(rtr->rtr);
  orq.placed(8);
  auto first = orq.complete();
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->rtr);
  EXPECT_EQ(first->seq, 1u);
}

TEST(proto_read_queues, ClearDropsTheReadsButNotTheRtrRead) {
  OutboundReadQueue orq(4);
  orq.push_rtr_read();
  orq.push(read(1, 0x10, 0, 8));
  orq.clear();
  EXPECT_TRUE(orq.may_start(true, true));
  auto rtr = orq.complete();
  ASSERT_TRUE(rtr);
  EXPECT_TRUE(rtr->rtr);
  EXPECT_FALSE(orq.complete()) << "no Read is left";
}

InboundRead inbound(std::uint32_t sink_stag, std::shared_ptr<const void> keep = nullptr) {
  InboundRead in;
  in.sink_stag = Stag{sink_stag};
  in.source.keep = std::move(keep);
  return in;
}

TEST(proto_read_queues, ReadRequestsAreAnsweredInOrder) {
  InboundReadQueue irq;
  EXPECT_TRUE(irq.empty());
  irq.push(inbound(1));
  irq.push(inbound(2));
  EXPECT_EQ(irq.start_response().sink_stag, Stag{1});
  irq.response_sent();
  EXPECT_EQ(irq.start_response().sink_stag, Stag{2});
  EXPECT_TRUE(irq.empty());
}

TEST(proto_read_queues, TheResponseBeingSentHoldsItsSourceUntilSent) {
  InboundReadQueue irq;
  auto region = std::make_shared<int>(0);
  irq.push(inbound(1, region));
  const InboundRead& responding = irq.start_response();
  EXPECT_EQ(responding.source.keep.get(), region.get());
  EXPECT_EQ(region.use_count(), 2);
  irq.response_sent();
  EXPECT_EQ(region.use_count(), 1);
}

TEST(proto_read_queues, ClearReleasesQueuedAndRespondingSources) {
  InboundReadQueue irq;
  auto responding = std::make_shared<int>(0);
  auto queued = std::make_shared<int>(0);
  irq.push(inbound(1, responding));
  irq.push(inbound(2, queued));
  irq.start_response();
  irq.clear();
  EXPECT_TRUE(irq.empty());
  EXPECT_EQ(responding.use_count(), 1);
  EXPECT_EQ(queued.use_count(), 1);
}

}  // namespace
}  // namespace uwarp::proto
