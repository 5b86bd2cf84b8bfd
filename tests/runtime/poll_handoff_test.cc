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

}  // namespace
}  // namespace uwarp::runtime
