// DoorbellBatching's decisions: which posts of a burst are left for the next poll, when a burst
// must send, the deadline, and the back-off after an application that did not poll.
#include "runtime/doorbell_batching.h"

#include <gtest/gtest.h>

namespace uwarp::runtime {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Ring = DoorbellBatching::Ring;

const Clock::time_point kT0 = Clock::time_point(std::chrono::seconds(100));

TEST(DoorbellBatching, TheFirstPostSendsAndTheRestOfItsBurstWait) {
  DoorbellBatching b(true);
  EXPECT_EQ(b.ring(kT0), Ring::kSend);  // nothing before it: not part of a burst
  b.doorbell_ended(kT0 + microseconds(5));
  EXPECT_FALSE(b.deferred());
  EXPECT_EQ(b.ring(kT0 + microseconds(6)), Ring::kDeferAndArm);
  EXPECT_TRUE(b.deferred());
  EXPECT_EQ(b.deadline(), kT0 + microseconds(6) + DoorbellBatching::kDeadline);
  EXPECT_EQ(b.ring(kT0 + microseconds(7)), Ring::kDefer);
  b.sent();  // the next poll
  EXPECT_FALSE(b.deferred());
}

TEST(DoorbellBatching, APostAfterAPauseSendsAtOnce) {
  DoorbellBatching b(true);
  b.ring(kT0);
  b.doorbell_ended(kT0);
  // A ping-pong's next post comes a round trip later.
  EXPECT_EQ(b.ring(kT0 + DoorbellBatching::kBurstGap), Ring::kSend);
}

TEST(DoorbellBatching, ALongBurstSendsEveryMaxDeferredPosts) {
  DoorbellBatching b(true);
  Clock::time_point t = kT0;
  b.ring(t);
  int sends = 0;
  for (int i = 0; i < 100; ++i) {
    t += microseconds(1);
    if (b.ring(t) == Ring::kSend) {
      ++sends;
      b.sent();
      b.doorbell_ended(t);
    }
  }
  // 1 sent at once, then every kMaxDeferred-th sends the kMaxDeferred - 1 before it with it.
  EXPECT_EQ(sends, 100 / static_cast<int>(DoorbellBatching::kMaxDeferred));
  EXPECT_TRUE(b.deferred());
}

TEST(DoorbellBatching, ADeadlineWithoutAPollSendsAndBacksOff) {
  DoorbellBatching b(true);
  b.ring(kT0);
  ASSERT_EQ(b.ring(kT0 + microseconds(1)), Ring::kDeferAndArm);
  EXPECT_FALSE(b.deadline_passed(b.deadline() - microseconds(1)));
  EXPECT_TRUE(b.deadline_passed(b.deadline()));
  b.sent();
  // Backing off: a burst sends every post.
  const Clock::time_point later = b.deadline() + microseconds(10);
  b.ring(later);
  EXPECT_EQ(b.ring(later + microseconds(1)), Ring::kSend);
  // Once the back-off is over, bursts wait for the poll again.
  const Clock::time_point after = later + DoorbellBatching::kBackoff;
  b.ring(after);
  EXPECT_EQ(b.ring(after + microseconds(1)), Ring::kDeferAndArm);
}

TEST(DoorbellBatching, NothingWaitsWhenTurnedOff) {
  DoorbellBatching b(false);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b.ring(kT0 + microseconds(i) / 10), Ring::kSend);
  EXPECT_FALSE(b.deferred());
  EXPECT_FALSE(b.deadline_passed(kT0 + milliseconds(1)));
}

}  // namespace
}  // namespace uwarp::runtime
