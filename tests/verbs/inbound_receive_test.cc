// verbs::InboundReceive: an inbound Send placed into the next posted receive by message offset,
// its completion (with Send with Invalidate), the receives that cannot hold it, and the flush of
// the receive side, for a QP's own receive queue and for a shared one.
#include "verbs/inbound_receive.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "verbs/stag_slot.h"
#include "verbs/verbs_test_util.h"

namespace uwarp::verbs {
namespace {

using testing::Buffer;
using testing::poll_all;
using testing::wr_ids;
namespace term = wire::term;
using wire::MessageOffset;
using wire::RdmapOpcode;

constexpr std::uint32_t kRemote = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;

class InboundReceiveTest : public ::testing::Test {
 protected:
  InboundReceiveTest() {
    device_.set_async_sink(&events_);
    buf_ = testing::register_buffer(device_.stags(), &pd_, 256, access::kLocalWrite);
  }

  void post(ReceiveQueue& rq, std::uint64_t id, std::vector<Sge> sges) {
    sges_.push_back(std::move(sges));
    RecvWr wr;
    wr.wr_id = id;
    wr.sg_list = sges_.back();
    ASSERT_TRUE(rq.post(wr).is_ok());
  }
  static wire::TerminateCode refusal(const proto::ScatterResult& r) {
    return r ? wire::TerminateCode{} : r.error();
  }
  static proto::InboundSend send(std::uint32_t length, RdmapOpcode opcode = RdmapOpcode::kSend,
                                 std::uint32_t invalidate = 0) {
    proto::InboundSend s;
    s.length = length;
    s.opcode = opcode;
    s.invalidate_stag = wire::Stag{invalidate};
    return s;
  }

  Device device_;
  ProtectionDomain pd_{1};
  CompletionQueue cq_{64, nullptr, nullptr};
  testing::EventLog events_;
  QpReporter reporter_{device_, 9, nullptr, &cq_, &cq_};
  MemoryProtection protection_{device_.stags(), &pd_};
  ReceiveQueue rq_{&pd_, 8, 4};
  InboundReceive receive_{rq_, nullptr, protection_, reporter_};
  Buffer buf_;
  std::deque<std::vector<Sge>> sges_;
};

TEST_F(InboundReceiveTest, SegmentsArePlacedByMessageOffsetAcrossTheReceive_sSges) {
  post(rq_, 1, {buf_.sge(0, 10), buf_.sge(100, 0), buf_.sge(200, 20)});
  auto first = receive_.place(MessageOffset{0}, 8, true);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->spans.size(), 1u);
  EXPECT_EQ(first->spans[0].data(), buf_.bytes.data());
  auto second = receive_.place(MessageOffset{8}, 12, false);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->spans.size(), 2u);
  EXPECT_EQ(second->spans[0].data(), buf_.bytes.data() + 8);
  EXPECT_EQ(second->spans[0].size(), 2u);
  EXPECT_EQ(second->spans[1].data(), buf_.bytes.data() + 200);
  EXPECT_EQ(second->spans[1].size(), 10u);
  EXPECT_EQ(receive_.complete(send(20, RdmapOpcode::kSendSe)), std::nullopt);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(wcs[0].byte_len, 20u);
  EXPECT_EQ(wcs[0].qp_num, 9u);
  EXPECT_EQ(wcs[0].flags, wc_flags::kSolicited);
}

// RFC 7306: an Immediate Data message completes its receive as kRecvRdmaWithImm with the
// first four of its eight bytes; the receive's memory is not written.
TEST_F(InboundReceiveTest, ImmediateDataCompletesWithTheValueAndTheWritesLength) {
  post(rq_, 1, {buf_.sge(0, 4)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 0, true));
  proto::InboundSend imm = send(300, RdmapOpcode::kImmediateDataSe);
  imm.immediate = 0xA1B2C3D4FFFFFFFFu;
  EXPECT_EQ(receive_.complete(imm), std::nullopt);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(wcs[0].byte_len, 300u);
  EXPECT_EQ(wcs[0].imm_data, 0xA1B2C3D4u);
  EXPECT_EQ(wcs[0].flags, wc_flags::kWithImm | wc_flags::kSolicited);
}

TEST_F(InboundReceiveTest, EachSendTakesTheNextReceive) {
  post(rq_, 1, {buf_.sge(0, 4)});
  post(rq_, 2, {buf_.sge(64, 4)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 4, true));
  receive_.complete(send(4));
  auto second = receive_.place(MessageOffset{0}, 4, true);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->spans[0].data(), buf_.bytes.data() + 64);
  receive_.complete(send(4));
  EXPECT_EQ(wr_ids(poll_all(cq_)), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(rq_.size(), 0u);
}

TEST_F(InboundReceiveTest, ASendWithNoReceivePostedIsRefused) {
  EXPECT_EQ(refusal(receive_.place(MessageOffset{0}, 4, true)), term::kDdpUntaggedNoBuffer);
  EXPECT_EQ(refusal(receive_.place(MessageOffset{4}, 4, false)), term::kDdpUntaggedNoBuffer)
      << "a later segment has no receive either";
  EXPECT_TRUE(poll_all(cq_).empty());
}

TEST_F(InboundReceiveTest, AMessageLongerThanTheReceiveFailsItWithALengthError) {
  post(rq_, 1, {buf_.sge(0, 16)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 10, true));
  EXPECT_EQ(refusal(receive_.place(MessageOffset{10}, 7, false)), term::kDdpUntaggedTooLong);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocalLengthError);
  EXPECT_EQ(refusal(receive_.place(MessageOffset{17}, 1, false)), term::kDdpUntaggedNoBuffer)
      << "the failed receive is no longer active";
}

// The second SGE names memory the receive may not write: the first segment fills only the first
// SGE and is placed; the next one reaches the second and fails the receive.
TEST_F(InboundReceiveTest, AReceiveIntoMemoryItMayNotWriteFailsWithALocalProtectionError) {
  Buffer read_only = testing::register_buffer(device_.stags(), &pd_, 64, 0);
  post(rq_, 1, {buf_.sge(0, 8), read_only.sge(0, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 8, true));
  EXPECT_EQ(refusal(receive_.place(MessageOffset{8}, 4, false)), term::kRdmapCatastrophicStream);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocalProtectionError);
  EXPECT_EQ(refusal(receive_.place(MessageOffset{12}, 4, false)), term::kDdpUntaggedNoBuffer);
}

// SGEs no byte of the message reaches are not checked, as an RNIC does not check memory it does
// not place into: a 4-byte Send completes a receive whose second SGE is read-only, and a
// zero-length Send one whose only SGE names no region (fabtests' fi_shared_ctx posts such).
TEST_F(InboundReceiveTest, SgesTheMessageDoesNotReachAreNotChecked) {
  Buffer read_only = testing::register_buffer(device_.stags(), &pd_, 64, 0);
  post(rq_, 1, {buf_.sge(0, 8), read_only.sge(0, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 4, true));
  EXPECT_EQ(receive_.complete(send(4, RdmapOpcode::kSend)), std::nullopt);
  post(rq_, 2, {Sge{0, 64, 0}});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 0, true));
  EXPECT_EQ(receive_.complete(send(0, RdmapOpcode::kSend)), std::nullopt);
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 4u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].byte_len, 0u);
}

TEST_F(InboundReceiveTest, ASendWithInvalidateInvalidatesAFastRegionOfThisPd) {
  std::vector<std::uint8_t> memory(64);
  auto fast = StagSlot::allocate(device_.stags(), &pd_, StagKind::kFastRegion).value();
  StagSlot::FastRegistration r{memory.data(), memory.size(), 0, access::kRemoteWrite, fast->stag() ^ 3};
  ASSERT_TRUE(fast->register_fast(r));
  const MemoryRegionRef target = fast->binding();
  post(rq_, 1, {buf_.sge(0, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 8, true));
  EXPECT_EQ(receive_.complete(send(8, RdmapOpcode::kSendInvalidate, r.new_stag)), std::nullopt);
  EXPECT_FALSE(target->valid.load());
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].flags, wc_flags::kWithInvalidate);
  EXPECT_EQ(wcs[0].invalidated_rkey, r.new_stag);
}

TEST_F(InboundReceiveTest, ASendWithInvalidateOfARegisteredRegionIsAnsweredWithATerminate) {
  Buffer target = testing::register_buffer(device_.stags(), &pd_, 64, kRemote);
  post(rq_, 1, {buf_.sge(0, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 8, true));
  EXPECT_EQ(receive_.complete(send(8, RdmapOpcode::kSendInvalidate, target.mr->stag)),
            term::kRdmapCannotInvalidate);
  EXPECT_TRUE(target.mr->valid.load()) << "a registered region stays until it is deregistered";
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteInvalidRequestError);
}

TEST_F(InboundReceiveTest, ASendWithInvalidateOfAnotherPd_sRegionIsAnsweredWithATerminate) {
  ProtectionDomain other_pd{2};
  Buffer theirs = testing::register_buffer(device_.stags(), &other_pd, 64, kRemote);
  post(rq_, 1, {buf_.sge(0, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 8, true));
  EXPECT_EQ(receive_.complete(send(8, RdmapOpcode::kSendSeInvalidate, theirs.mr->stag)),
            term::kRdmapCannotInvalidateProtection);
  EXPECT_TRUE(theirs.mr->valid.load());
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteInvalidRequestError);
  EXPECT_EQ(wcs[0].flags, wc_flags::kSolicited) << "solicited, but nothing was invalidated";
}

TEST_F(InboundReceiveTest, AFlushCompletesTheActiveReceiveAndThenThePostedOnes) {
  post(rq_, 1, {buf_.sge(0, 8)});
  post(rq_, 2, {buf_.sge(8, 8)});
  post(rq_, 3, {buf_.sge(16, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 4, true));
  receive_.flush();
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1, 2, 3}));
  for (const WorkCompletion& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kWrFlushError);
  EXPECT_EQ(rq_.size(), 0u);
  EXPECT_EQ(events_.count(AsyncEventType::kQpLastWqeReached), 0);
  receive_.flush();
  EXPECT_TRUE(poll_all(cq_).empty()) << "nothing is flushed twice";
}

TEST_F(InboundReceiveTest, ResetDropsTheActiveReceiveWithoutACompletion) {
  post(rq_, 1, {buf_.sge(0, 8)});
  ASSERT_TRUE(receive_.place(MessageOffset{0}, 4, true));
  receive_.reset();
  EXPECT_EQ(refusal(receive_.place(MessageOffset{4}, 4, false)), term::kDdpUntaggedNoBuffer);
  receive_.flush();
  EXPECT_TRUE(poll_all(cq_).empty());
}

TEST_F(InboundReceiveTest, AnSrqKeepsItsEntriesOnAFlushAndReportsItsLimit) {
  ReceiveQueue srq{&pd_, 8, 4};
  InboundReceive shared{srq, &srq, protection_, reporter_};
  for (std::uint64_t id = 1; id <= 3; ++id) post(srq, id, {buf_.sge(0, 8)});
  srq.arm_limit(3);
  ASSERT_TRUE(shared.place(MessageOffset{0}, 8, true));
  EXPECT_EQ(events_.count(AsyncEventType::kSrqLimitReached), 1) << "2 entries left, limit 3";
  shared.complete(send(8));
  ASSERT_TRUE(shared.place(MessageOffset{0}, 8, true));
  EXPECT_EQ(events_.count(AsyncEventType::kSrqLimitReached), 1) << "the limit fires once";
  shared.flush();
  const auto wcs = poll_all(cq_);
  ASSERT_EQ(wr_ids(wcs), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushError) << "the active receive is this QP's";
  EXPECT_EQ(srq.size(), 1u) << "the SRQ keeps what no QP has taken";
  EXPECT_EQ(events_.count(AsyncEventType::kQpLastWqeReached), 1);
}

}  // namespace
}  // namespace uwarp::verbs
