// verbs::StagSlot: memory windows of type 1 and 2 and fast-registered regions, as the OFA verbs
// bind, rebind and invalidate them, and the STag table as a peer then finds it.
#include "verbs/stag_slot.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "verbs/protection_domain.h"
#include "verbs/verbs_test_util.h"

namespace uwarp::verbs {
namespace {

using testing::Buffer;
using testing::register_buffer;

constexpr std::uint32_t kBindable = access::kLocalWrite | access::kMwBind;

class StagSlotTest : public ::testing::Test {
 protected:
  std::shared_ptr<StagSlot> slot(StagKind kind) { return StagSlot::allocate(stags_, &pd_, kind).value(); }
  StagSlot::WindowBind window(const Buffer& b, std::size_t offset, std::uint64_t length,
                              std::uint32_t rights = access::kRemoteRead | access::kRemoteWrite,
                              StagSlot* type1 = nullptr) {
    StagSlot::WindowBind w;
    if (type1 != nullptr) w.new_stag = type1->next_type1_stag();
    w.region = b.mr;
    w.addr = b.addr(offset);
    w.length = length;
    w.access = rights;
    return w;
  }
  static std::uint32_t with_key(std::uint32_t stag, std::uint8_t key) { return (stag & ~0xFFu) | key; }

  StagTable stags_;
  ProtectionDomain pd_{1};
  ProtectionDomain other_pd_{2};
  Buffer buf_ = register_buffer(stags_, &pd_, 4096, kBindable);
  int qp_a_ = 0;  // stand-ins for two queue pairs
  int qp_b_ = 0;
};

TEST_F(StagSlotTest, AType1WindowNamesItsPartOfTheRegionAndAdvancesItsKeyOnEachBind) {
  auto mw = slot(StagKind::kWindow1);
  const std::uint32_t unbound = mw->stag();
  EXPECT_EQ(stags_.find(unbound), nullptr) << "an unbound window names nothing";
  ASSERT_TRUE(mw->bind_window(window(buf_, 100, 200, access::kRemoteRead | access::kRemoteWrite, mw.get())));
  const std::uint32_t first = mw->stag();
  EXPECT_EQ(first, with_key(unbound, static_cast<std::uint8_t>(unbound + 1)));
  MemoryRegionRef b = stags_.find(first);
  ASSERT_NE(b, nullptr);
  auto bytes = b->resolve(&pd_, &qp_a_, buf_.addr(100), 200, access::kRemoteWrite);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->data(), buf_.bytes.data() + 100);
  EXPECT_FALSE(b->resolve(&pd_, &qp_a_, buf_.addr(99), 1, 0)) << "outside the window";
  EXPECT_FALSE(b->resolve(&pd_, &qp_a_, buf_.addr(100), 8, access::kRemoteAtomic)) << "no atomic right";
  EXPECT_EQ(buf_.mr->windows.load(), 1u);

  // Rebinding replaces the binding: the old STag names nothing any more.
  auto replaced = mw->bind_window(window(buf_, 0, 64, access::kRemoteRead | access::kRemoteWrite, mw.get()));
  ASSERT_TRUE(replaced);
  EXPECT_EQ(*replaced, b);
  EXPECT_FALSE(b->valid.load());
  EXPECT_EQ(stags_.find(first), nullptr);
  EXPECT_EQ(mw->stag(), with_key(first, static_cast<std::uint8_t>(first + 1)));
  EXPECT_EQ(buf_.mr->windows.load(), 1u);

  // Length 0 unbinds; a type 1 window is never invalidated.
  EXPECT_EQ(mw->invalidate(mw->stag()).error().code(), Errc::kInvalidArgument);
  ASSERT_TRUE(mw->bind_window(window(buf_, 0, 0, 0, mw.get())));
  EXPECT_EQ(mw->binding(), nullptr);
  EXPECT_EQ(buf_.mr->windows.load(), 0u);
}

TEST_F(StagSlotTest, AType2WindowBindsOnlyWhenFreeWithTheKeyChosenAndServesOnlyItsQp) {
  auto mw = slot(StagKind::kWindow2);
  StagSlot::WindowBind w = window(buf_, 0, 4096);
  w.qp = &qp_a_;
  w.new_stag = with_key(mw->stag(), 0x5A);
  ASSERT_TRUE(mw->bind_window(w));
  EXPECT_EQ(mw->stag(), w.new_stag);
  MemoryRegionRef b = stags_.find(w.new_stag);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->resolve(&pd_, &qp_a_, buf_.addr(0), 8, access::kRemoteRead));
  auto other = b->resolve(&pd_, &qp_b_, buf_.addr(0), 8, access::kRemoteRead);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error(), AccessError::kNotOwnQp);

  w.new_stag = with_key(w.new_stag, 0x5B);
  EXPECT_EQ(mw->bind_window(w).error().code(), Errc::kInvalidState) << "bound: invalidate first";
  EXPECT_EQ(mw->invalidate(with_key(w.new_stag, 0x11)).error().code(), Errc::kNotFound);
  auto invalidated = mw->invalidate(with_key(w.new_stag, 0x5A));
  ASSERT_TRUE(invalidated);
  EXPECT_EQ(*invalidated, b);
  EXPECT_EQ(stags_.find(b->stag), nullptr);
  EXPECT_FALSE(b->resolve(&pd_, &qp_a_, buf_.addr(0), 8, access::kRemoteRead));
  EXPECT_EQ(mw->invalidate(b->stag).error().code(), Errc::kNotFound) << "once only";

  w.new_stag = (w.new_stag + 0x100) & ~0xFFu;  // another index
  EXPECT_EQ(mw->bind_window(w).error().code(), Errc::kInvalidArgument);
  w.new_stag = with_key(mw->stag(), 0x5B);
  ASSERT_TRUE(mw->bind_window(w));
  EXPECT_NE(stags_.find(w.new_stag), nullptr);
}

TEST_F(StagSlotTest, AWindowCarriesOnlyRemoteRightsTheRegionAllows) {
  auto mw = slot(StagKind::kWindow1);
  auto bind = [&](const Buffer& b, std::size_t offset, std::uint64_t length, std::uint32_t rights) {
    return mw->bind_window(window(b, offset, length, rights, mw.get()));
  };
  EXPECT_FALSE(bind(buf_, 0, 8, access::kLocalWrite));
  Buffer read_only = register_buffer(stags_, &pd_, 64, access::kMwBind);
  EXPECT_FALSE(bind(read_only, 0, 8, access::kRemoteWrite)) << "remote write needs a region with local write";
  EXPECT_TRUE(bind(read_only, 0, 8, access::kRemoteRead));
  Buffer unbindable = register_buffer(stags_, &pd_, 64, access::kLocalWrite);
  EXPECT_FALSE(bind(unbindable, 0, 8, access::kRemoteRead));
  Buffer theirs = register_buffer(stags_, &other_pd_, 64, kBindable);
  EXPECT_FALSE(bind(theirs, 0, 8, access::kRemoteRead));
  EXPECT_FALSE(bind(buf_, 4000, 97, access::kRemoteRead)) << "past the end";
}

TEST_F(StagSlotTest, AFastRegionRegistersWhenFreeAndIsInvalidatedByItsStag) {
  auto fr = slot(StagKind::kFastRegion);
  std::uint8_t memory[256] = {};
  StagSlot::FastRegistration r{memory, sizeof memory, 0x1000, access::kRemoteRead, with_key(fr->stag(), 7)};
  ASSERT_TRUE(fr->register_fast(r));
  MemoryRegionRef b = stags_.find(r.new_stag);
  ASSERT_NE(b, nullptr);
  auto bytes = b->resolve(&pd_, &qp_b_, 0x1010, 16, access::kRemoteRead);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->data(), memory + 16);
  r.new_stag = with_key(r.new_stag, 8);
  EXPECT_FALSE(fr->register_fast(r)) << "registered: invalidate first";
  ASSERT_TRUE(fr->invalidate(with_key(r.new_stag, 7)));
  ASSERT_TRUE(fr->register_fast(r));
  EXPECT_EQ(stags_.find(with_key(r.new_stag, 7)), nullptr) << "the old key names nothing";
  EXPECT_NE(stags_.find(r.new_stag), nullptr);
}

TEST_F(StagSlotTest, ASlotGivesUpItsBindingAndIndexWhenDestroyed) {
  auto mw = slot(StagKind::kWindow1);
  ASSERT_TRUE(mw->bind_window(window(buf_, 0, 64, access::kRemoteRead, mw.get())));
  const std::uint32_t stag = mw->stag();
  const std::size_t before = stags_.size();
  mw.reset();
  EXPECT_EQ(stags_.find(stag), nullptr);
  EXPECT_EQ(stags_.size(), before - 1);
  EXPECT_EQ(buf_.mr->windows.load(), 0u);
}

}  // namespace
}  // namespace uwarp::verbs
