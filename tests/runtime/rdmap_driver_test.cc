// runtime::RdmapDriver with one QP and no socket: binding puts the QP in RTS, the QP's state
// gates what is fed and filled, and what the QP asks (abandon, close) reaches the engine at once
// and the transmitter once.
#include "runtime/rdmap_driver.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "verbs/completion_queue.h"
#include "verbs/device.h"
#include "verbs/protection_domain.h"

namespace uwarp::runtime {
namespace {

class CountingLink final : public verbs::QpLink {
 public:
  void doorbell(verbs::QueuePair&) override { ++doorbells; }
  void revoke(verbs::QueuePair& qp, ConstByteSpan memory, bool qp_in_use) override
      REQUIRES(qp.mutex()) {
    ++revokes;
    if (rdmap != nullptr) rdmap->revoke(qp, memory, qp_in_use);
  }
  RdmapDriver* rdmap = nullptr;
  int doorbells = 0;
  int revokes = 0;
};

class RdmapDriverTest : public ::testing::Test {
 protected:
  RdmapDriverTest() : memory_(64 * 1024, 0x5A) {
    verbs::QpConfig c;
    c.pd = &pd_;
    c.send_cq = &scq_;
    c.recv_cq = &rcq_;
    c.caps.max_send_wr = 8;
    c.caps.max_recv_wr = 8;
    qp_ = std::make_unique<verbs::QueuePair>(device_, c);
    mr_ = std::make_shared<verbs::MemoryRegion>();
    mr_->addr = memory_.data();
    mr_->length = memory_.size();
    mr_->iova = reinterpret_cast<std::uintptr_t>(memory_.data());
    mr_->access = access::kLocalWrite;
    mr_->pd = &pd_;
    EXPECT_TRUE(device_.stags().insert(mr_));
  }

  void bind(std::size_t max_ulpdu = 1442) {
    verbs::LinkParams p;
    p.max_ulpdu = max_ulpdu;
    MutexLock lock(qp_->mutex());
    rdmap_ = std::make_unique<RdmapDriver>(*qp_, &link_, p);
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

  verbs::Device device_;
  verbs::ProtectionDomain pd_{1};
  verbs::CompletionQueue scq_{64, nullptr, nullptr};
  verbs::CompletionQueue rcq_{64, nullptr, nullptr};
  std::vector<std::uint8_t> memory_;
  verbs::MemoryRegionRef mr_;
  std::unique_ptr<verbs::QueuePair> qp_;
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

}  // namespace
}  // namespace uwarp::runtime
