// The native verbs API (include/uwarp/verbs.h): argument checks, object lifetimes, and the QP's
// states before it is connected.
#include <array>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "uwarp/verbs.h"

namespace uwarp {
namespace {

struct Objects {
  Context ctx = Context::open().value();
  ProtectionDomain pd = ctx.alloc_pd().value();
  CompletionQueue cq = ctx.create_cq(16).value();
};

TEST(VerbsApi, RegistrationChecksItsArguments) {
  Objects o;
  std::array<std::uint8_t, 64> buf{};
  EXPECT_EQ(o.pd.reg_mr(nullptr, 64, access::kLocalWrite).error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(o.pd.reg_mr(buf.data(), buf.size(), 1u << 30).error().code(), Errc::kInvalidArgument);
  // Remote write (or atomic) access needs local write access too.
  EXPECT_EQ(o.pd.reg_mr(buf.data(), buf.size(), access::kRemoteWrite).error().code(),
            Errc::kInvalidArgument);
  auto mr = o.pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite | access::kRemoteRead);
  ASSERT_TRUE(mr);
  EXPECT_EQ(mr->addr(), buf.data());
  EXPECT_EQ(mr->length(), buf.size());
  EXPECT_EQ(mr->lkey(), mr->rkey());
  EXPECT_EQ(mr->access(), access::kLocalWrite | access::kRemoteRead);
}

TEST(VerbsApi, EveryRegionGetsItsOwnStag) {
  Objects o;
  std::array<std::uint8_t, 64> buf{};
  std::vector<MemoryRegion> regions;
  std::vector<std::uint32_t> stags;
  for (int i = 0; i < 64; ++i) {
    auto mr = o.pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite);
    ASSERT_TRUE(mr);
    stags.push_back(mr->rkey());
    regions.push_back(std::move(*mr));
  }
  std::sort(stags.begin(), stags.end());
  EXPECT_EQ(std::adjacent_find(stags.begin(), stags.end()), stags.end());
}

TEST(VerbsApi, AnIovaRegionIsAddressedByItsIova) {
  Objects o;
  std::array<std::uint8_t, 64> buf{};
  auto mr = o.pd.reg_mr_iova(buf.data(), buf.size(), 0x1000, access::kLocalWrite);
  ASSERT_TRUE(mr);
  const Sge sge = mr->sge(8, 16);
  EXPECT_EQ(sge.addr, 0x1008u);
  EXPECT_EQ(sge.length, 16u);
  EXPECT_EQ(sge.lkey, mr->lkey());
}

TEST(VerbsApi, CqSizeMustBeWithinTheDeviceLimit) {
  Objects o;
  EXPECT_EQ(o.ctx.create_cq(0).error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(o.ctx.create_cq(o.ctx.limits().max_cqe + 1).error().code(), Errc::kInvalidArgument);
  auto cq = o.ctx.create_cq(100);
  ASSERT_TRUE(cq);
  EXPECT_GE(cq->capacity(), 100u);
}

TEST(VerbsApi, ACqWithoutAChannelCannotBeArmed) {
  Objects o;
  EXPECT_EQ(o.cq.req_notify().code(), Errc::kInvalidState);
  auto channel = o.ctx.create_comp_channel();
  ASSERT_TRUE(channel);
  int tag = 0;
  auto cq = o.ctx.create_cq(4, &*channel, &tag);
  ASSERT_TRUE(cq);
  EXPECT_TRUE(cq->req_notify());
  EXPECT_FALSE(channel->get_event(0).has_value()) << "an event without a completion";
}

TEST(VerbsApi, QpCapabilitiesAreChecked) {
  Objects o;
  QpInitAttr attr{.send_cq = &o.cq, .recv_cq = nullptr};
  EXPECT_EQ(o.pd.create_qp(attr).error().code(), Errc::kInvalidArgument);
  attr.recv_cq = &o.cq;
  attr.caps.max_send_sge = o.ctx.limits().max_sge + 1;
  EXPECT_EQ(o.pd.create_qp(attr).error().code(), Errc::kInvalidArgument);
  attr.caps = QpCaps{};
  attr.caps.max_inline_data = o.ctx.limits().max_inline_data + 1;
  EXPECT_EQ(o.pd.create_qp(attr).error().code(), Errc::kInvalidArgument);
}

TEST(VerbsApi, AnUnconnectedQpTakesReceivesButNoSends) {
  Objects o;
  auto qp = o.pd.create_qp({.send_cq = &o.cq, .recv_cq = &o.cq});
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->state(), QpState::kInit);
  std::array<std::uint8_t, 64> buf{};
  auto mr = o.pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite);
  ASSERT_TRUE(mr);
  Sge sge = mr->sge(0, 64);
  EXPECT_TRUE(qp->post_recv({1, {&sge, 1}}));
  SendWr wr;
  wr.wr_id = 2;
  wr.sg_list = {&sge, 1};
  EXPECT_EQ(qp->post_send(wr).code(), Errc::kInvalidState);
  // A QP cannot send before it is connected: INIT to RTS directly is refused.
  EXPECT_EQ(qp->modify_state(QpState::kRts).code(), Errc::kInvalidState);
}

TEST(VerbsApi, AQpMovedToErrorFlushesItsReceives) {
  Objects o;
  auto qp = o.pd.create_qp({.send_cq = &o.cq, .recv_cq = &o.cq});
  ASSERT_TRUE(qp);
  std::array<std::uint8_t, 64> buf{};
  auto mr = o.pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite);
  ASSERT_TRUE(mr);
  Sge sge = mr->sge(0, 64);
  ASSERT_TRUE(qp->post_recv({7, {&sge, 1}}));
  ASSERT_TRUE(qp->modify_state(QpState::kError));
  std::array<WorkCompletion, 4> wc{};
  ASSERT_EQ(o.cq.poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushError);
  EXPECT_EQ(wc[0].qp_num, qp->qp_num());
  // Posted in ERROR: completed at once, as flushed.
  ASSERT_TRUE(qp->post_recv({8, {&sge, 1}}));
  ASSERT_EQ(o.cq.poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 8u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushError);
}

TEST(VerbsApi, OfaQpsStartInReset) {
  Objects o;
  auto qp = o.pd.create_qp({.send_cq = &o.cq, .recv_cq = &o.cq, .start_in_reset = true});
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->state(), QpState::kReset);
  std::array<std::uint8_t, 8> buf{};
  auto mr = o.pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite);
  ASSERT_TRUE(mr);
  Sge sge = mr->sge(0, 8);
  EXPECT_EQ(qp->post_recv({1, {&sge, 1}}).code(), Errc::kInvalidState);
  EXPECT_TRUE(qp->modify_state(QpState::kInit));
  EXPECT_TRUE(qp->post_recv({1, {&sge, 1}}));
}

TEST(VerbsApi, SrqLimitsAndPosting) {
  Objects o;
  EXPECT_EQ(o.pd.create_srq(0, 1).error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(o.pd.create_srq(o.ctx.limits().max_srq_wr + 1, 1).error().code(),
            Errc::kInvalidArgument);
  auto srq = o.pd.create_srq(2, 1);
  ASSERT_TRUE(srq);
  std::array<std::uint8_t, 8> buf{};
  auto mr = o.pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite);
  ASSERT_TRUE(mr);
  Sge sge = mr->sge(0, 8);
  EXPECT_TRUE(srq->post_recv({1, {&sge, 1}}));
  EXPECT_TRUE(srq->post_recv({2, {&sge, 1}}));
  EXPECT_EQ(srq->size(), 2u);
  EXPECT_FALSE(srq->post_recv({3, {&sge, 1}})) << "an SRQ of 2 took a third receive";
  // A QP on the SRQ has no receive queue of its own.
  auto qp = o.pd.create_qp({.send_cq = &o.cq, .recv_cq = &o.cq, .srq = &*srq});
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->post_recv({4, {&sge, 1}}).code(), Errc::kInvalidArgument);
}

// Every object keeps what it was made from alive, so handles may go in any order.
TEST(VerbsApi, HandlesMayBeDestroyedInAnyOrder) {
  std::array<std::uint8_t, 64> buf{};
  std::optional<QueuePair> qp;
  std::optional<MemoryRegion> mr;
  std::optional<CompletionQueue> cq;
  {
    Context ctx = Context::open().value();
    ProtectionDomain pd = ctx.alloc_pd().value();
    cq.emplace(ctx.create_cq(8).value());
    qp.emplace(pd.create_qp({.send_cq = &*cq, .recv_cq = &*cq}).value());
    mr.emplace(pd.reg_mr(buf.data(), buf.size(), access::kLocalWrite).value());
  }
  // The context and PD handles are gone; what was made from them still works.
  Sge sge = mr->sge(0, 64);
  ASSERT_TRUE(qp->post_recv({9, {&sge, 1}}));
  ASSERT_TRUE(qp->modify_state(QpState::kError));
  std::array<WorkCompletion, 2> wc{};
  ASSERT_EQ(cq->poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 9u);
  cq.reset();
  ASSERT_TRUE(mr->deregister());
  mr.reset();
  qp.reset();
}

}  // namespace
}  // namespace uwarp
