// verbs::QueuePair without a connection: the verbs state machine (which transitions are allowed),
// which calls each state accepts, and the flush rules of the ERROR state. The protocol side is
// tested in tests/proto/rdmap_engine_test.cc and, with a QP behind it, by the stream simulator.
#include "verbs/queue_pair.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace uwarp::verbs {
namespace {

class QueuePairTest : public ::testing::Test {
 protected:
  QueuePairTest() {
    QpConfig c;
    c.pd = &pd_;
    c.send_cq = &scq_;
    c.recv_cq = &rcq_;
    c.caps.max_send_wr = 4;
    c.caps.max_recv_wr = 4;
    c.caps.max_send_sge = 2;
    qp_ = std::make_unique<QueuePair>(device_, c);
  }

  std::vector<WorkCompletion> poll(CompletionQueue& cq) {
    std::vector<WorkCompletion> out;
    WorkCompletion wc[8];
    for (std::size_t n; (n = cq.poll(wc)) > 0;) out.insert(out.end(), wc, wc + n);
    return out;
  }

  Status send(std::uint64_t id, std::uint32_t flags = send_flags::kSignaled) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = WrOpcode::kSend;
    wr.flags = flags;
    return qp_->post_send(wr);
  }
  Status recv(std::uint64_t id) {
    RecvWr wr;
    wr.wr_id = id;
    return qp_->post_recv(wr);
  }
  void go_to(std::initializer_list<QpState> states) {
    for (QpState s : states) ASSERT_TRUE(qp_->modify_state(s).is_ok()) << to_string(s);
  }

  Device device_;
  ProtectionDomain pd_{1};
  CompletionQueue scq_{64, nullptr, nullptr};
  CompletionQueue rcq_{64, nullptr, nullptr};
  std::unique_ptr<QueuePair> qp_;
};

TEST_F(QueuePairTest, ANewQpIsInResetAndMovesForwardOneStateAtATime) {
  EXPECT_EQ(qp_->state(), QpState::kReset);
  EXPECT_FALSE(qp_->modify_state(QpState::kRts).is_ok()) << "RESET cannot skip to RTS";
  EXPECT_FALSE(qp_->modify_state(QpState::kRtr).is_ok());
  go_to({QpState::kInit, QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kSqd,
         QpState::kRts});
  EXPECT_EQ(qp_->state(), QpState::kRts);
  EXPECT_FALSE(qp_->modify_state(QpState::kInit).is_ok()) << "RTS cannot go back to INIT";
  EXPECT_EQ(qp_->state(), QpState::kRts) << "a refused transition changes nothing";
}

TEST_F(QueuePairTest, ErrorAndResetAreReachableFromEveryState) {
  for (QpState from : {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts}) {
    go_to({QpState::kReset});
    if (from != QpState::kReset) go_to({QpState::kInit});
    if (from == QpState::kRtr || from == QpState::kRts) go_to({QpState::kRtr});
    if (from == QpState::kRts) go_to({QpState::kRts});
    ASSERT_EQ(qp_->state(), from);
    go_to({QpState::kError});
    EXPECT_EQ(qp_->state(), QpState::kError);
    EXPECT_FALSE(qp_->modify_state(QpState::kRts).is_ok()) << "ERROR leaves only through RESET";
  }
}

TEST_F(QueuePairTest, PostingNeedsTheRightState) {
  EXPECT_EQ(recv(1).code(), Errc::kInvalidState) << "no receive in RESET";
  EXPECT_EQ(send(1).code(), Errc::kInvalidState) << "no send in RESET";
  go_to({QpState::kInit});
  EXPECT_TRUE(recv(1).is_ok()) << "receives may be posted from INIT on";
  EXPECT_EQ(send(2).code(), Errc::kInvalidState) << "no send before RTS";
  go_to({QpState::kRtr, QpState::kRts});
  EXPECT_TRUE(send(2).is_ok());
}

TEST_F(QueuePairTest, TheSendQueueDepthAndSgeCountAreEnforced) {
  go_to({QpState::kInit, QpState::kRtr, QpState::kRts});
  for (std::uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(send(id).is_ok());
  EXPECT_EQ(send(5).code(), Errc::kNoResources) << "max_send_wr 4, nothing sent without a link";
  SendWr wide;
  const Sge sges[3] = {};
  wide.sg_list = sges;
  EXPECT_EQ(qp_->post_send(wide).code(), Errc::kInvalidArgument) << "max_send_sge 2";
}

TEST_F(QueuePairTest, EnteringErrorFlushesEveryOutstandingRequestInOrder) {
  go_to({QpState::kInit, QpState::kRtr, QpState::kRts});
  ASSERT_TRUE(recv(10).is_ok());
  ASSERT_TRUE(recv(11).is_ok());
  ASSERT_TRUE(send(1).is_ok());
  ASSERT_TRUE(send(2, /*flags=*/0).is_ok());  // unsignaled: still reported, as flushed
  go_to({QpState::kError});
  std::vector<std::uint64_t> sends, recvs;
  for (const WorkCompletion& wc : poll(scq_)) {
    EXPECT_EQ(wc.status, WcStatus::kWrFlushError);
    sends.push_back(wc.wr_id);
  }
  for (const WorkCompletion& wc : poll(rcq_)) {
    EXPECT_EQ(wc.status, WcStatus::kWrFlushError);
    EXPECT_EQ(wc.opcode, WcOpcode::kRecv);
    recvs.push_back(wc.wr_id);
  }
  EXPECT_EQ(sends, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(recvs, (std::vector<std::uint64_t>{10, 11}));
}

TEST_F(QueuePairTest, WorkPostedInErrorCompletesAtOnceAsFlushed) {
  go_to({QpState::kInit, QpState::kError});
  ASSERT_TRUE(send(1).is_ok());
  ASSERT_TRUE(recv(2).is_ok());
  const auto s = poll(scq_);
  const auto r = poll(rcq_);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, WcStatus::kWrFlushError);
  EXPECT_EQ(r[0].status, WcStatus::kWrFlushError);
}

TEST_F(QueuePairTest, ResetEmptiesTheQueuesWithoutCompletions) {
  go_to({QpState::kInit, QpState::kRtr, QpState::kRts});
  ASSERT_TRUE(send(1).is_ok());
  go_to({QpState::kError});
  poll(scq_);
  go_to({QpState::kReset, QpState::kInit});
  ASSERT_TRUE(recv(3).is_ok());
  go_to({QpState::kRtr, QpState::kRts});
  for (std::uint64_t id = 1; id <= 4; ++id) EXPECT_TRUE(send(id).is_ok()) << "the queue was emptied";
  EXPECT_TRUE(poll(scq_).empty());
  EXPECT_TRUE(poll(rcq_).empty());
}

}  // namespace
}  // namespace uwarp::verbs
