// runtime::RdmapDriver with one QP and no socket: binding puts the QP in RTS, the QP's state
// gates what is fed and filled, what the QP asks (abandon, close) reaches the engine at once and
// the transmitter once, and a deregistration fails the QP whose access in progress it cuts off.
#include "runtime/rdmap_driver.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "proto/proto_test_util.h"
#include "support/qp_with_region.h"
#include "verbs/revocation.h"

namespace uwarp::runtime {
namespace {

class CountingLink final : public verbs::QpLink {
 public:
  void doorbell(verbs::QueuePair&, verbs::Doorbell) override { ++doorbells; }
  void settle_send(verbs::QueuePair&) override {}
  void revoke(verbs::QueuePair& qp, const proto::RevokedRegion& revoked, bool qp_in_use) override
      REQUIRES(qp.mutex()) {
    ++revokes;
    if (rdmap != nullptr) rdmap->revoke(qp, revoked, qp_in_use);
  }
  void receive_posted(verbs::QueuePair&) override { ++receives_posted; }
  RdmapDriver* rdmap = nullptr;
  int doorbells = 0;
  int revokes = 0;
  int receives_posted = 0;
};

class RdmapDriverTest : public testing::QpWithRegion {
 protected:
  RdmapDriverTest() : QpWithRegion(64 * 1024, 0x5A, access::kLocalWrite) {}

  void bind(std::size_t max_ulpdu = 1442) {
    verbs::LinkParams p;
    p.max_ulpdu = max_ulpdu;
    p.ird = 4;
    p.ord = 4;
    MutexLock lock(qp_->mutex());
    rdmap_ = std::make_unique<RdmapDriver>(*qp_, &link_, p);
    link_.rdmap = rdmap_.get();
  }
  Status post(std::uint64_t id, WrOpcode opcode, std::uint32_t length) {
    Sge sge{mr_->iova, length, mr_->stag};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.flags = send_flags::kSignaled;
    wr.sg_list = {&sge, 1};
    wr.remote_addr = 0x1000;
    wr.rkey = 0x4242;
    return qp_->post_send(wr);
  }
  void feed(ConstByteSpan bytes) {
    MutexLock lock(qp_->mutex());
    rdmap_->feed(*qp_, bytes);
  }
  // The FPDUs fill() gives now, parsed.
  std::vector<proto::testing::ParsedFpdu> drain() {
    proto::TxBatch batch;
    proto::testing::Bytes all;
    for (int i = 0; i < 64 && fill(batch); ++i) {
      proto::testing::append(all, proto::testing::flatten(batch.pending()));
      batch.consume(batch.pending_bytes());
      MutexLock lock(qp_->mutex());
      for (std::uint64_t c : proto::testing::pop_all_sent(batch)) rdmap_->sent(*qp_, c);
    }
    return proto::testing::parse_stream(all).value_or(std::vector<proto::testing::ParsedFpdu>{});
  }
  // The QP failed and its only FPDU out is a Terminate with `code`.
  void expect_terminated(const wire::TerminateCode& code) {
    EXPECT_EQ(qp_->state(), QpState::kError);
    const auto out = drain();
    ASSERT_EQ(out.size(), 1u) << "FPDUs after the deregistration";
    EXPECT_EQ(out[0].header.queue, wire::kQueueTerminate);
    ASSERT_GE(out[0].payload.size(), 4u);
    EXPECT_EQ(out[0].payload[0] >> 4, static_cast<int>(code.layer));
    EXPECT_EQ(out[0].payload[0] & 0xF, code.etype);
    EXPECT_EQ(out[0].payload[1], code.ecode);
  }
  Status send(std::uint64_t id, std::uint32_t length) {
    Sge sge{mr_->iova, length, mr_->stag};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = WrOpcode::kSend;
    wr.flags = send_flags::kSignaled;
    wr.sg_list = {&sge, 1};
    return qp_->post_send(wr);
  }
  bool fill(proto::TxBatch& batch) {
    MutexLock lock(qp_->mutex());
    return rdmap_->fill(*qp_, batch);
  }
  verbs::TxRequests take() {
    MutexLock lock(qp_->mutex());
    return rdmap_->take_requests(*qp_);
  }

  std::vector<std::uint8_t> other_memory_ = std::vector<std::uint8_t>(4096);
  CountingLink link_;
  std::unique_ptr<RdmapDriver> rdmap_;  // destroyed before qp_
};

TEST_F(RdmapDriverTest, BindingPutsTheQpInRtsAndItsRequestsGoOut) {
  bind();
  EXPECT_EQ(qp_->state(), QpState::kRts);
  ASSERT_TRUE(send(1, 100).is_ok());
  EXPECT_EQ(link_.doorbells, 1);
  proto::TxBatch batch;
  EXPECT_TRUE(fill(batch));
  EXPECT_EQ(batch.pending_bytes(), wire::fpdu_size(wire::kUntaggedHeaderSize + 100));
}

TEST_F(RdmapDriverTest, SqdLetsNoNewRequestOutUntilRtsAgain) {
  bind();
  ASSERT_TRUE(qp_->modify_state(QpState::kSqd).is_ok());
  ASSERT_TRUE(send(1, 100).is_ok());
  proto::TxBatch batch;
  EXPECT_FALSE(fill(batch)) << "SQD: requests wait";
  ASSERT_TRUE(qp_->modify_state(QpState::kRts).is_ok());
  EXPECT_TRUE(fill(batch));
}

TEST_F(RdmapDriverTest, AFailedQpIsFedNothingAndAsksOnce) {
  bind();
  ASSERT_TRUE(qp_->modify_state(QpState::kError).is_ok());
  const verbs::TxRequests first = take();
  EXPECT_TRUE(first.abandon);
  EXPECT_TRUE(first.shutdown);
  const verbs::TxRequests second = take();
  EXPECT_FALSE(second.abandon) << "each request is taken once";
  EXPECT_FALSE(second.shutdown);
  const std::vector<std::uint8_t> junk(64, 0xFF);  // not even an FPDU
  MutexLock lock(qp_->mutex());
  EXPECT_FALSE(rdmap_->rx_open(*qp_));
  EXPECT_EQ(rdmap_->feed(*qp_, junk), junk.size()) << "dropped, not decoded";
}

// A Send longer than one batch holds is being segmented when the QP fails: the engine continues
// it no further, so no byte more is read from the flushed request's memory.
TEST_F(RdmapDriverTest, TheMessageInProgressEndsWhenTheQpFails) {
  bind(/*max_ulpdu=*/64);
  ASSERT_TRUE(send(1, 64 * 1024).is_ok());
  proto::TxBatch batch;
  ASSERT_TRUE(fill(batch));
  ASSERT_LT(batch.pending_bytes(), wire::fpdu_size(wire::kUntaggedHeaderSize + 64) * 1024)
      << "the Send must not fit one batch";
  ASSERT_TRUE(qp_->modify_state(QpState::kError).is_ok());
  proto::TxBatch next;
  EXPECT_FALSE(fill(next)) << "the flushed Send was continued";
  EXPECT_EQ(next.pending_bytes(), 0u);
}

TEST_F(RdmapDriverTest, DeregisteringTheSourceOfASendInProgressFailsTheQp) {
  bind(/*max_ulpdu=*/64);
  ASSERT_TRUE(send(1, 64 * 1024).is_ok());
  proto::TxBatch batch;
  ASSERT_TRUE(fill(batch));
  ASSERT_TRUE(verbs::deregister_region(device_, mr_));
  EXPECT_EQ(link_.revokes, 1);
  expect_terminated(wire::term::kRdmapLocalCatastrophic);
}

TEST_F(RdmapDriverTest, DeregisteringAnotherRegionChangesNothing) {
  bind(/*max_ulpdu=*/64);
  auto other = std::make_shared<verbs::MemoryRegion>();
  other->addr = other_memory_.data();
  other->length = other_memory_.size();
  other->iova = reinterpret_cast<std::uintptr_t>(other_memory_.data());
  other->pd = &pd_;
  ASSERT_TRUE(device_.stags().insert(other));
  ASSERT_TRUE(send(1, 64 * 1024).is_ok());
  proto::TxBatch batch;
  ASSERT_TRUE(fill(batch));
  ASSERT_TRUE(verbs::deregister_region(device_, other));
  EXPECT_EQ(qp_->state(), QpState::kRts);
  const auto out = drain();
  ASSERT_FALSE(out.empty());
  EXPECT_NE(out[0].header.queue, wire::kQueueTerminate);
}

TEST_F(RdmapDriverTest, DeregisteringTheSinkOfAnOutstandingReadFailsTheQp) {
  bind();
  ASSERT_TRUE(post(1, WrOpcode::kRdmaRead, 4096).is_ok());
  ASSERT_EQ(drain().size(), 1u) << "the Read Request";
  ASSERT_TRUE(verbs::deregister_region(device_, mr_));
  expect_terminated(wire::term::kRdmapLocalCatastrophic);
}

// Between two segments of a Send the receive's memory is resolved but no placement is under way.
TEST_F(RdmapDriverTest, DeregisteringTheReceiveOfASendBetweenSegmentsFailsTheQp) {
  bind();
  Sge sge{mr_->iova, 4096, mr_->stag};
  RecvWr rwr;
  rwr.wr_id = 7;
  rwr.sg_list = {&sge, 1};
  ASSERT_TRUE(qp_->post_recv(rwr).is_ok());
  const auto first = proto::testing::fpdu(
      proto::testing::untagged_header(wire::RdmapOpcode::kSend, wire::kQueueSend, 1, 0, false),
      proto::testing::pattern(100, 1), false);
  feed(first);
  ASSERT_EQ(qp_->state(), QpState::kRts);
  ASSERT_TRUE(verbs::deregister_region(device_, mr_));
  expect_terminated(wire::term::kRdmapLocalCatastrophic);
}

}  // namespace
}  // namespace uwarp::runtime
