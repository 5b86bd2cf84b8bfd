// PollHandoff: which thread receives on a stream while an application spins on a CQ. The times
// are given, never read: each case is exact.
#include "runtime/poll_handoff.h"

#include <gtest/gtest.h>

namespace uwarp::runtime {
namespace {

using std::chrono::microseconds;

class PollHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PollHandoff::handoff() != PollHandoff::kHandoff) {
      GTEST_SKIP() << "UWARP_POLL_HANDOFF_US is set: these cases assume the default hand-off";
    }
  }
  // Two polls 1 us apart, the second at t + 1 us: a spinning application's claim.
  void claim_at(Clock::time_point t) {
    h.polled(true, t);
    h.polled(true, t + microseconds(1));
  }
  const Clock::time_point t0 = Clock::now();
  const microseconds gap = PollHandoff::kSpinGap;
  const microseconds handoff = PollHandoff::kHandoff;
  PollHandoff h;
};

TEST_F(PollHandoffTest, OnlyASecondPollWithinTheSpinGapClaims) {
  h.polled(true, t0);
  EXPECT_FALSE(h.claimed(t0));  // one poll: perhaps an application that polls now and then
  h.polled(true, t0 + gap / 2);
  EXPECT_TRUE(h.claimed(t0 + gap / 2));
  EXPECT_TRUE(h.claimed(t0 + gap / 2 + handoff - microseconds(1)));
  EXPECT_FALSE(h.claimed(t0 + gap / 2 + handoff));  // lapsed: the engine thread receives
}

TEST_F(PollHandoffTest, PollsFurtherApartThanTheSpinGapDoNotClaim) {
  h.polled(true, t0);
  h.polled(true, t0 + gap * 2);
  EXPECT_FALSE(h.claimed(t0 + gap * 2));
}

TEST_F(PollHandoffTest, AnArmedCqsPollsNeverClaim) {
  h.polled(false, t0);
  h.polled(false, t0 + microseconds(1));
  EXPECT_FALSE(h.claimed(t0 + microseconds(1)));
}

// A poll that receives a megabyte takes longer than the hand-off: its claim runs from its end,
// not its start, so the engine thread does not take the stream while the poller works on it.
TEST_F(PollHandoffTest, ALongProductivePollKeepsItsClaimFromItsEnd) {
  claim_at(t0);
  const Clock::time_point end = t0 + handoff * 3;
  h.busy_until(t0 + microseconds(1), end);
  EXPECT_TRUE(h.claimed(end + handoff - microseconds(1)));
  EXPECT_FALSE(h.claimed(end + handoff));
  // The next poll is measured from that end: one right after it claims again.
  h.polled(true, end + gap / 2);
  EXPECT_TRUE(h.claimed(end + gap / 2 + handoff - microseconds(1)));
}

TEST_F(PollHandoffTest, ABusyPollWithoutAClaimDoesNotMakeOne) {
  h.polled(true, t0);  // the first poll after a pause: no claim
  h.busy_until(t0, t0 + handoff);
  EXPECT_FALSE(h.claimed(t0 + handoff));
  h.polled(true, t0 + handoff + gap / 2);  // nor does it count as a poll at its end
  EXPECT_FALSE(h.claimed(t0 + handoff + gap / 2));
}

// ib_write_lat polls once per round trip and spins on memory in between: a claim it made long
// ago (it lapsed) must not come back when one of its polls happens to receive the peer's Write.
TEST_F(PollHandoffTest, ABusyPollDoesNotRenewALapsedClaim) {
  claim_at(t0);
  const Clock::time_point later = t0 + handoff * 10;
  h.polled(true, later);
  h.busy_until(later, later + microseconds(5));
  EXPECT_FALSE(h.claimed(later + microseconds(5)));
}

TEST_F(PollHandoffTest, ReleaseEndsTheClaimAndABusyPollDoesNotRestoreIt) {
  claim_at(t0);
  h.release();  // the application armed the CQ: it is about to sleep
  EXPECT_FALSE(h.claimed(t0 + microseconds(2)));
  h.busy_until(t0 + microseconds(1), t0 + microseconds(3));  // the poll under way ends
  EXPECT_FALSE(h.claimed(t0 + microseconds(3)));
}

// The engine thread's view (leave_to_poller): `taken` counts the completions that have left the
// stream's CQs, as the engine reads them at each look.
TEST_F(PollHandoffTest, WhileTheClaimHoldsTheBytesAreLeftToThePoller) {
  claim_at(t0);
  EXPECT_TRUE(h.leave_to_poller(t0 + microseconds(2), 0));
  EXPECT_EQ(h.next_check(0), t0 + microseconds(1) + handoff);  // first look: when it lapses
}

// perftest's ib_read_bw: after a poll that received many responses, the application takes their
// completions and posts more Reads for longer than the hand-off before it polls an empty CQ again.
TEST_F(PollHandoffTest, AnApplicationTakingCompletionsKeepsItsClaimRunning) {
  claim_at(t0);
  ASSERT_TRUE(h.leave_to_poller(t0 + microseconds(2), 100));
  const Clock::time_point lapsed = t0 + microseconds(1) + handoff;
  EXPECT_FALSE(h.claimed(lapsed));
  EXPECT_TRUE(h.leave_to_poller(lapsed, 116));  // 16 taken since the engine thread last looked
  EXPECT_TRUE(h.claimed(lapsed + handoff - microseconds(1)));  // it runs on from that look
  // Nothing taken since: the application is elsewhere, the engine thread receives.
  EXPECT_FALSE(h.leave_to_poller(lapsed + handoff, 116));
}

TEST_F(PollHandoffTest, AClaimRunsOnOnlyWhileItsApplicationStillPollsAnEmptyCq) {
  claim_at(t0);
  ASSERT_TRUE(h.leave_to_poller(t0 + microseconds(2), 0));
  // Completions were taken, but the last empty poll is kRecheck old.
  EXPECT_FALSE(h.leave_to_poller(t0 + microseconds(1) + PollHandoff::kRecheck, 5));
}

// ib_write_lat takes one completion per round trip and waits on memory for the peer's Write,
// with an empty poll now and then: taking completions must not keep its bytes from the engine
// thread, whether it never claimed or claimed long ago.
TEST_F(PollHandoffTest, TakingCompletionsWithoutAClaimLeavesNothing) {
  h.polled(true, t0);  // one empty poll: no claim
  EXPECT_FALSE(h.leave_to_poller(t0 + microseconds(5), 1));
  EXPECT_FALSE(h.leave_to_poller(t0 + microseconds(10), 2));
}

TEST_F(PollHandoffTest, TakingCompletionsDoesNotReviveAClaimThatLapsedLongAgo) {
  claim_at(t0);
  const Clock::time_point later = t0 + PollHandoff::kRecheck * (PollHandoff::kRunOnWithin + 1);
  h.polled(true, later);  // an empty poll, long after: no claim of its own
  EXPECT_FALSE(h.leave_to_poller(later + microseconds(5), 1));
}

TEST_F(PollHandoffTest, AReleasedClaimLeavesNothingWhateverIsTaken) {
  claim_at(t0);
  ASSERT_TRUE(h.leave_to_poller(t0 + microseconds(2), 0));
  h.release();  // the application armed the CQ
  EXPECT_FALSE(h.leave_to_poller(t0 + microseconds(3), 5));
}

}  // namespace
}  // namespace uwarp::runtime
