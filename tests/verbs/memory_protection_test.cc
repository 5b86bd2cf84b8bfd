// verbs::MemoryProtection: every check of a memory access against the PD's registrations, one
// AccessError at a time, with the Terminate each inbound refusal is answered with; the region it
// keeps from the last lookup serves only its own STag, and never once invalidated or
// deregistered.
#include "verbs/memory_protection.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "verbs/stag_slot.h"
#include "verbs/verbs_test_util.h"

namespace uwarp::verbs {
namespace {

using testing::Buffer;
namespace term = wire::term;

constexpr std::uint32_t kRemote = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;

class MemoryProtectionTest : public ::testing::Test {
 protected:
  MemoryProtectionTest() {
    mine_ = testing::register_buffer(stags_, &pd_, 256, kRemote);
    local_only_ = testing::register_buffer(stags_, &pd_, 256, 0);
    theirs_ = testing::register_buffer(stags_, &other_pd_, 256, kRemote);
  }

  std::uint32_t unknown_stag() const { return mine_.mr->stag ^ 0x01; }

  StagTable stags_;
  ProtectionDomain pd_{1};
  ProtectionDomain other_pd_{2};
  int qp_ = 0;  // stands for the QP these checks are for
  MemoryProtection protection_{stags_, &pd_, &qp_};
  Buffer mine_;
  Buffer local_only_;
  Buffer theirs_;
};

TEST(verbs_memory_protection, EachAccessErrorHasItsTerminateCode) {
  EXPECT_EQ(write_error(AccessError::kInvalidStag), term::kDdpTaggedInvalidStag);
  EXPECT_EQ(write_error(AccessError::kWrongPd), term::kDdpTaggedStagNotAssociated);
  EXPECT_EQ(write_error(AccessError::kAccessRights), term::kDdpTaggedInvalidStag);
  EXPECT_EQ(write_error(AccessError::kBounds), term::kDdpTaggedBaseBounds);
  EXPECT_EQ(write_error(AccessError::kWrap), term::kDdpTaggedToWrap);
  EXPECT_EQ(read_source_error(AccessError::kInvalidStag), term::kRdmapInvalidStag);
  EXPECT_EQ(read_source_error(AccessError::kWrongPd), term::kRdmapStagNotAssociated);
  EXPECT_EQ(read_source_error(AccessError::kAccessRights), term::kRdmapAccessRights);
  EXPECT_EQ(read_source_error(AccessError::kBounds), term::kRdmapBaseBounds);
  EXPECT_EQ(read_source_error(AccessError::kWrap), term::kRdmapToWrap);
}

TEST_F(MemoryProtectionTest, AnInboundWriteLandsInItsRegionOrIsRefusedWithADdpTaggedError) {
  auto ok = protection_.resolve_write(mine_.stag(), mine_.to(10), 20);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->spans.size(), 1u);
  EXPECT_EQ(ok->spans[0].data(), mine_.bytes.data() + 10);
  EXPECT_EQ(ok->spans[0].size(), 20u);

  auto refused = [&](std::uint32_t stag, std::uint64_t to, std::size_t length) {
    auto r = protection_.resolve_write(wire::Stag{stag}, wire::TaggedOffset{to}, length);
    return r ? wire::TerminateCode{} : r.error();
  };
  EXPECT_EQ(refused(unknown_stag(), mine_.addr(), 1), term::kDdpTaggedInvalidStag);
  EXPECT_EQ(refused(theirs_.mr->stag, theirs_.addr(), 1), term::kDdpTaggedStagNotAssociated);
  EXPECT_EQ(refused(local_only_.mr->stag, local_only_.addr(), 1), term::kDdpTaggedInvalidStag);
  EXPECT_EQ(refused(mine_.mr->stag, mine_.addr(250), 7), term::kDdpTaggedBaseBounds);
  EXPECT_EQ(refused(mine_.mr->stag, mine_.addr() - 1, 1), term::kDdpTaggedBaseBounds);
  EXPECT_EQ(refused(mine_.mr->stag, std::numeric_limits<std::uint64_t>::max(), 2),
            term::kDdpTaggedToWrap);
}

TEST_F(MemoryProtectionTest, TheRegionFoundLastServesOnlyItsOwnStagWhileValid) {
  ASSERT_TRUE(protection_.resolve_write(mine_.stag(), mine_.to(), 4));
  Buffer next = testing::register_buffer(stags_, &pd_, 64, kRemote);
  auto other_stag = protection_.resolve_write(next.stag(), next.to(8), 4);
  ASSERT_TRUE(other_stag);
  EXPECT_EQ(other_stag->spans[0].data(), next.bytes.data() + 8);
  ASSERT_TRUE(protection_.resolve_write(mine_.stag(), mine_.to(), 4));

  mine_.mr->valid.store(false);
  auto after_invalidate = protection_.resolve_write(mine_.stag(), mine_.to(), 4);
  ASSERT_FALSE(after_invalidate);
  EXPECT_EQ(after_invalidate.error(), term::kDdpTaggedInvalidStag);

  Buffer other = testing::register_buffer(stags_, &pd_, 64, kRemote);
  ASSERT_TRUE(protection_.resolve_write(other.stag(), other.to(), 4));
  stags_.erase(other.mr->stag);
  auto after_erase = protection_.resolve_write(other.stag(), other.to(), 4);
  ASSERT_FALSE(after_erase);
  EXPECT_EQ(after_erase.error(), term::kDdpTaggedInvalidStag);
}

TEST_F(MemoryProtectionTest, AReadSourceIsCheckedForRemoteReadWithRdmapCodes) {
  auto ok = protection_.resolve_read_source(mine_.stag(), mine_.to(100), 50);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->bytes.data(), mine_.bytes.data() + 100);
  EXPECT_EQ(ok->bytes.size(), 50u);
  EXPECT_EQ(ok->keep.get(), mine_.mr.get()) << "the region is held while the response is sent";

  auto refused = [&](std::uint32_t stag, std::uint64_t to, std::uint32_t length) {
    auto r = protection_.resolve_read_source(wire::Stag{stag}, wire::TaggedOffset{to}, length);
    return r ? wire::TerminateCode{} : r.error();
  };
  EXPECT_EQ(refused(unknown_stag(), mine_.addr(), 1), term::kRdmapInvalidStag);
  EXPECT_EQ(refused(theirs_.mr->stag, theirs_.addr(), 1), term::kRdmapStagNotAssociated);
  EXPECT_EQ(refused(local_only_.mr->stag, local_only_.addr(), 1), term::kRdmapAccessRights);
  EXPECT_EQ(refused(mine_.mr->stag, mine_.addr(200), 57), term::kRdmapBaseBounds);
  EXPECT_EQ(refused(mine_.mr->stag, std::numeric_limits<std::uint64_t>::max() - 1, 2),
            term::kRdmapToWrap);
}

TEST_F(MemoryProtectionTest, LocalSgesResolveInOrderAndEveryOneIsChecked) {
  std::vector<ByteSpan> spans;
  std::vector<MemoryRegionRef> keep;
  const std::vector<Sge> sges = {mine_.sge(0, 8), mine_.sge(50, 0), local_only_.sge(16, 4)};
  ASSERT_TRUE(protection_.resolve_local(sges, 0, spans, keep));
  ASSERT_EQ(spans.size(), 2u) << "a zero-length SGE is left out";
  EXPECT_EQ(spans[0].data(), mine_.bytes.data());
  EXPECT_EQ(spans[1].data(), local_only_.bytes.data() + 16);
  EXPECT_EQ(keep.size(), 2u);
  EXPECT_EQ(keep[1], local_only_.mr);

  spans.clear();
  EXPECT_FALSE(protection_.resolve_local(sges, access::kLocalWrite, spans, keep))
      << "the second region has no local write";
  EXPECT_FALSE(protection_.resolve_local(std::vector<Sge>{theirs_.sge(0, 8)}, 0, spans, keep))
      << "another PD";
  EXPECT_FALSE(protection_.resolve_local(std::vector<Sge>{mine_.sge(250, 8)}, 0, spans, keep))
      << "past the end";
  const Sge unknown{mine_.addr(), 8, unknown_stag()};
  EXPECT_FALSE(protection_.resolve_local(std::span<const Sge>(&unknown, 1), 0, spans, keep));
  mine_.mr->valid.store(false);
  EXPECT_FALSE(protection_.resolve_local(std::vector<Sge>{mine_.sge(0, 8)}, 0, spans, keep))
      << "the region found last is looked up again once invalid";
}

TEST_F(MemoryProtectionTest, AReadSinkIsSlicedByOffsetAcrossItsSpans) {
  const std::vector<ByteSpan> sink = {ByteSpan(mine_.bytes.data(), 10),
                                      ByteSpan(mine_.bytes.data() + 100, 20)};
  auto r = protection_.resolve_read_sink(&sink, 6, 10);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->spans.size(), 2u);
  EXPECT_EQ(r->spans[0].data(), mine_.bytes.data() + 6);
  EXPECT_EQ(r->spans[0].size(), 4u);
  EXPECT_EQ(r->spans[1].data(), mine_.bytes.data() + 100);
  EXPECT_EQ(r->spans[1].size(), 6u);
  auto past = protection_.resolve_read_sink(&sink, 25, 6);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error(), term::kDdpTaggedBaseBounds);
  auto gone = protection_.resolve_read_sink(nullptr, 0, 1);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error(), term::kDdpTaggedBaseBounds);
}

TEST_F(MemoryProtectionTest, APeerCannotInvalidateARegisteredRegionOrAnotherPdsStag) {
  EXPECT_EQ(protection_.invalidate_remote(mine_.stag()), term::kRdmapCannotInvalidate);
  EXPECT_TRUE(mine_.mr->valid.load());
  EXPECT_TRUE(protection_.resolve_write(mine_.stag(), mine_.to(), 1));
  EXPECT_EQ(protection_.invalidate_remote(theirs_.stag()), term::kRdmapCannotInvalidateProtection);
  EXPECT_TRUE(theirs_.mr->valid.load());
  EXPECT_EQ(protection_.invalidate_remote(wire::Stag{unknown_stag()}), term::kRdmapCannotInvalidateProtection);
  EXPECT_EQ(protection_.take_remote_invalidation(), nullptr);
}

TEST_F(MemoryProtectionTest, APeerInvalidatesAFastRegionOrAType2WindowOfThisQp) {
  Buffer bindable = testing::register_buffer(stags_, &pd_, 256, kRemote | access::kMwBind);
  auto window = [&](const void* qp) {
    auto mw = StagSlot::allocate(stags_, &pd_, StagKind::kWindow2).value();
    StagSlot::WindowBind b;
    b.region = bindable.mr;
    b.addr = bindable.addr();
    b.length = 64;
    b.access = access::kRemoteWrite;
    b.new_stag = mw->stag() ^ 0x5A;
    b.qp = qp;
    EXPECT_TRUE(mw->bind_window(b));
    return mw;
  };
  int other_qp = 0;
  auto theirs = window(&other_qp);
  EXPECT_EQ(protection_.invalidate_remote(wire::Stag{theirs->stag()}), term::kRdmapCannotInvalidateProtection)
      << "a window bound to another QP";
  EXPECT_NE(theirs->binding(), nullptr);

  auto mine = window(&qp_);
  const MemoryRegionRef binding = mine->binding();
  ASSERT_NE(binding, nullptr);
  ASSERT_TRUE(protection_.resolve_write(wire::Stag{binding->stag}, wire::TaggedOffset{bindable.addr()}, 8));
  EXPECT_EQ(protection_.invalidate_remote(wire::Stag{binding->stag}), std::nullopt);
  EXPECT_EQ(protection_.take_remote_invalidation(), binding) << "handed over to be revoked";
  EXPECT_EQ(protection_.take_remote_invalidation(), nullptr) << "once";
  EXPECT_EQ(mine->binding(), nullptr);
  EXPECT_FALSE(protection_.resolve_write(wire::Stag{binding->stag}, wire::TaggedOffset{bindable.addr()}, 8));

  auto fast = StagSlot::allocate(stags_, &pd_, StagKind::kFastRegion).value();
  StagSlot::FastRegistration r{bindable.bytes.data(), 256, 0, access::kRemoteRead, fast->stag() ^ 1};
  ASSERT_TRUE(fast->register_fast(r));
  EXPECT_EQ(protection_.invalidate_remote(wire::Stag{r.new_stag}), std::nullopt);
  EXPECT_EQ(fast->binding(), nullptr);
}

TEST(verbs_memory_protection, SliceTakesTheRangeAcrossSpansAndFailsPastTheEnd) {
  std::uint8_t a[4];
  std::uint8_t b[4];
  const std::vector<ByteSpan> spans = {ByteSpan(a, 4), ByteSpan(b, 4)};
  std::vector<ByteSpan> out = {ByteSpan(a, 1)};
  ASSERT_TRUE(slice(spans, 4, 4, out));
  ASSERT_EQ(out.size(), 1u) << "what `out` held before is gone";
  EXPECT_EQ(out[0].data(), b);
  ASSERT_TRUE(slice(spans, 3, 0, out));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(slice(spans, 5, 4, out));
}

}  // namespace
}  // namespace uwarp::verbs
