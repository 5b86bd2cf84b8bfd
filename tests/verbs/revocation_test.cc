// verbs::deregister_region with memory windows: a region with a window bound in it is not
// deregistered, unless forced (its handle is destroyed), which invalidates the window first; and
// a region being deregistered takes no new window.
#include "verbs/revocation.h"

#include <gtest/gtest.h>

#include "verbs/protection_domain.h"
#include "verbs/queue_pair.h"
#include "verbs/stag_slot.h"
#include "verbs/verbs_test_util.h"

namespace uwarp::verbs {
namespace {

class RevocationTest : public ::testing::Test {
 protected:
  StagSlot::WindowBind window(std::uint64_t length) {
    StagSlot::WindowBind w;
    w.region = buf_.mr;
    w.addr = buf_.addr();
    w.length = length;
    w.access = access::kRemoteRead;
    w.new_stag = mw_->next_type1_stag();
    return w;
  }

  Device device_;
  ProtectionDomain pd_{1};
  testing::Buffer buf_ = testing::register_buffer(device_.stags(), &pd_, 4096, access::kLocalWrite | access::kMwBind);
  std::shared_ptr<StagSlot> mw_ = StagSlot::allocate(device_.stags(), &pd_, StagKind::kWindow1).value();
};

TEST_F(RevocationTest, ARegionWithABoundWindowIsBusyUntilTheWindowIsUnbound) {
  ASSERT_TRUE(mw_->bind_window(window(64)));
  EXPECT_EQ(deregister_region(device_, buf_.mr).code(), Errc::kBusy);
  EXPECT_NE(device_.stags().find(buf_.mr->stag), nullptr) << "still registered";
  ASSERT_TRUE(mw_->bind_window(window(0)));
  ASSERT_TRUE(deregister_region(device_, buf_.mr));
  EXPECT_EQ(device_.stags().find(buf_.mr->stag), nullptr);
  EXPECT_FALSE(mw_->bind_window(window(64))) << "no window binds in a deregistered region";
}

TEST_F(RevocationTest, AForcedDeregistrationInvalidatesTheWindowsFirst) {
  ASSERT_TRUE(mw_->bind_window(window(64)));
  const std::uint32_t window_stag = mw_->stag();
  ASSERT_TRUE(deregister_region(device_, buf_.mr, /*force=*/true));
  EXPECT_EQ(device_.stags().find(window_stag), nullptr);
  EXPECT_EQ(mw_->binding(), nullptr);
  EXPECT_EQ(device_.stags().find(buf_.mr->stag), nullptr);
}

// The side of a stream that revocation reaches: records what each QP was asked to give up.
class RecordingLink final : public QpLink {
 public:
  void doorbell(QueuePair&, Doorbell) override {}
  void settle_send(QueuePair&) override {}
  void revoke(QueuePair&, const proto::RevokedRegion& r, bool) override {
    revoked.push_back(r.memory);
  }
  void receive_posted(QueuePair&) override {}
  std::vector<ConstByteSpan> revoked;
};

// A local invalidation posted on one QP takes the fast region's STag away at once; its completion
// waits until every QP of the PD has been visited (the progress thread's sweep), QPs of another
// PD are left alone.
TEST(SweepTest, ALocalInvalidationCompletesOnlyAfterEveryQpOfThePdGaveTheMemoryUp) {
  Device device;
  ProtectionDomain pd{1};
  ProtectionDomain other_pd{2};
  CompletionQueue cq{64, nullptr, nullptr};
  auto make_qp = [&](ProtectionDomain* p, RecordingLink& link) {
    QpConfig c;
    c.pd = p;
    c.send_cq = &cq;
    c.recv_cq = &cq;
    auto qp = std::make_unique<QueuePair>(device, c);
    MutexLock lock(qp->mutex());
    qp->attach_link_locked(&link, LinkParams{});
    return qp;
  };
  RecordingLink link_a, link_b, link_other;
  auto a = make_qp(&pd, link_a);
  auto b = make_qp(&pd, link_b);
  auto other = make_qp(&other_pd, link_other);

  std::shared_ptr<StagSlot> fr = StagSlot::allocate(device.stags(), &pd, StagKind::kFastRegion).value();
  device.slots().add(fr);
  std::vector<std::uint8_t> memory(4096);
  Sge where{reinterpret_cast<std::uintptr_t>(memory.data()), 4096, 0};
  SendWr reg;
  reg.opcode = WrOpcode::kRegisterFastRegion;
  reg.sg_list = {&where, 1};
  reg.rkey = (fr->stag() & ~0xFFu) | 0x21;
  reg.access = access::kRemoteRead;
  ASSERT_TRUE(a->post_send(reg));
  ASSERT_NE(device.stags().find(reg.rkey), nullptr);

  SendWr inv;
  inv.wr_id = 77;
  inv.opcode = WrOpcode::kLocalInvalidate;
  inv.invalidate_rkey = reg.rkey;
  ASSERT_TRUE(b->post_send(inv));
  EXPECT_EQ(device.stags().find(reg.rkey), nullptr) << "the STag is gone at once";
  WorkCompletion wc[4];
  EXPECT_EQ(cq.poll(wc), 1u) << "only the registration has completed";
  EXPECT_EQ(wc[0].opcode, WcOpcode::kRegisterFastRegion);

  sweep_invalidations(device, b->qp_num());
  ASSERT_EQ(link_a.revoked.size(), 1u);
  ASSERT_EQ(link_b.revoked.size(), 1u);
  EXPECT_EQ(link_a.revoked[0].data(), memory.data());
  EXPECT_EQ(link_a.revoked[0].size(), memory.size());
  EXPECT_TRUE(link_other.revoked.empty()) << "another PD's QP cannot reach the region";
  ASSERT_EQ(cq.poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].opcode, WcOpcode::kLocalInvalidate);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace uwarp::verbs
