// The stream's pure decisions: how its end is reported, and the initiator's silent-peer watch.
#include <gtest/gtest.h>

#include <cerrno>

#include "runtime/silent_peer.h"
#include "runtime/stream_end.h"

namespace uwarp::runtime {
namespace {

TEST(StreamEnd, AnEndBetweenFpdusOrAfterReceptionStoppedIsOrderly) {
  EXPECT_TRUE(judge_stream_end(0, 0, RxStopped::kNo, true).graceful);
  const StreamEnd t = judge_stream_end(0, 0, RxStopped::kByTerminate, false);
  EXPECT_TRUE(t.graceful);
  EXPECT_EQ(t.why, "closed after a Terminate");
  const StreamEnd q = judge_stream_end(0, 0, RxStopped::kByQp, false);
  EXPECT_TRUE(q.graceful);
  EXPECT_EQ(q.why, "closed after the QP left RTS") << "a disconnect is not a Terminate";
}

TEST(StreamEnd, AnEndInsideAnFpduBehindAFailedSendOrAnErrorIsAFailure) {
  EXPECT_FALSE(judge_stream_end(0, 0, RxStopped::kNo, false).graceful);
  const StreamEnd sent = judge_stream_end(0, -ECONNRESET, RxStopped::kByTerminate, true);
  EXPECT_FALSE(sent.graceful) << "the reset the send saw decides";
  EXPECT_NE(sent.why.find("send failed"), std::string::npos);
  const StreamEnd recv = judge_stream_end(-ECONNRESET, 0, RxStopped::kNo, true);
  EXPECT_FALSE(recv.graceful);
  EXPECT_NE(recv.why.find("receive failed"), std::string::npos);
}

TEST(SilentPeer, ALivePeerEndsTheWatchASilentOneIsNudgedOnce) {
  EXPECT_EQ(silent_peer_step(0, 1, 0), SilentPeerStep::kDone);
  EXPECT_EQ(silent_peer_step(1, 1, 100), SilentPeerStep::kDone);
  EXPECT_EQ(silent_peer_step(0, 1, 100), SilentPeerStep::kNudge)
      << "bytes sent in the first look's period get a nudge even if the peer has sent";
  EXPECT_EQ(silent_peer_step(3, 0, 100), SilentPeerStep::kNudge);
  EXPECT_EQ(silent_peer_step(0, 0, 0), SilentPeerStep::kLookAgain);
  EXPECT_EQ(silent_peer_step(kSilentPeerRounds - 1, 0, 0), SilentPeerStep::kDone)
      << "the watch is bounded";
}

}  // namespace
}  // namespace uwarp::runtime
