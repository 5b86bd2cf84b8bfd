// verbs::deregister_region with memory windows: a region with a window bound in it is not
// deregistered, unless forced (its handle is destroyed), which invalidates the window first; and
// a region being deregistered takes no new window.
#include "verbs/revocation.h"

#include <gtest/gtest.h>

#include "verbs/protection_domain.h"
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

}  // namespace
}  // namespace uwarp::verbs
