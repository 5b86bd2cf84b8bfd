// Doorbell batching (runtime/doorbell_batching.h, docs/threading.md): the posts of a burst that
// a polling thread left queued go out with its next poll, whole and in order; a thread that
// posts a burst and then polls no CQ still has them sent, by the deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "api/impl.h"
#include "stats/layout.h"
#include "support/connected_pair.h"
#include "support/unpolled_cq.h"

namespace uwarp::testing {
namespace {

constexpr std::uint32_t kBurst = 24;  // fewer than DoorbellBatching::kMaxDeferred
constexpr std::uint32_t kMessage = 64;

std::uint64_t counter(QueuePair& qp, stats::Counter c) {
  return detail::Access::impl(qp)->qp->counters()[c].load(std::memory_order_relaxed);
}

// Under the sanitizers a post can take longer than the burst gap, so that no post waits: the
// tests then check delivery alone.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kPostsAreFast = false;
#else
constexpr bool kPostsAreFast = true;
#endif

// The server posts kBurst receives; this thread (which has polled a CQ) posts kBurst Sends of
// kMessage bytes back to back, from a pattern of `round`.
void post_burst(Side& cl, Side& sv, std::uint32_t round) {
  for (std::uint32_t i = 0; i < kBurst; ++i) {
    Sge r = sv.mr.sge(i * kMessage, kMessage);
    ASSERT_TRUE(sv.qp.post_recv({i, {&r, 1}}));
  }
  const auto data = pattern(kBurst * kMessage, round);
  std::copy(data.begin(), data.end(), cl.buf.begin());
  Sge s[kBurst];
  for (std::uint32_t i = 0; i < kBurst; ++i) {
    s[i] = cl.mr.sge(i * kMessage, kMessage);
    SendWr send;
    send.wr_id = i;
    send.opcode = WrOpcode::kSend;
    send.sg_list = {&s[i], 1};
    send.flags = send_flags::kSignaled;
    ASSERT_TRUE(cl.qp.post_send(send));
  }
}

// The server's receives of a burst, checked against the pattern of `round`.
void expect_burst_received(Side& sv, const std::vector<WorkCompletion>& got, std::uint32_t round) {
  ASSERT_EQ(got.size(), kBurst);
  for (std::uint32_t i = 0; i < kBurst; ++i) {
    EXPECT_EQ(got[i].wr_id, i) << "round " << round;
    EXPECT_EQ(got[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got[i].byte_len, kMessage);
  }
  const auto data = pattern(kBurst * kMessage, round);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), sv.buf.begin())) << "round " << round;
}

TEST(DoorbellBatching, ABurstLeftForThePostersNextPollArrivesWholeAndInOrder) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  // Rounds whose burst left posts queued, and of those, the ones the deadline had to send (the
  // scheduler may take the core between the last post and the poll; then batching backs off,
  // and the test waits that out).
  int waited = 0, by_deadline = 0;
  for (std::uint32_t round = 0; round < 20; ++round) {
    const std::uint64_t left_before = counter(cl.qp, stats::Counter::kPostsLeftForPoll);
    const std::uint64_t deadlines_before = counter(cl.qp, stats::Counter::kBatchDeadlines);
    WorkCompletion wc[kBurst];
    cl.cq.poll(wc);  // this thread polls CQs
    post_burst(cl, sv, round);
    // The poll sends what the burst left queued; then the send completions come.
    const auto sent = wait_wcs(cl.cq, kBurst, std::chrono::seconds(10));
    for (const WorkCompletion& c : sent) EXPECT_EQ(c.status, WcStatus::kSuccess);
    ASSERT_EQ(sent.size(), kBurst) << "round " << round;
    expect_burst_received(sv, wait_wcs(sv.cq, kBurst, std::chrono::seconds(10)), round);
    if (counter(cl.qp, stats::Counter::kPostsLeftForPoll) != left_before) ++waited;
    if (counter(cl.qp, stats::Counter::kBatchDeadlines) != deadlines_before) {
      ++by_deadline;
      std::this_thread::sleep_for(runtime::DoorbellBatching::kBackoff);
    }
  }
  std::printf("bursts that left posts for the next poll: %d of 20, sent by the deadline: %d\n",
              waited, by_deadline);
  // A poll that did not send them would leave every such burst to the deadline.
  EXPECT_LT(by_deadline * 2, waited + 1);
  if (kPostsAreFast) {
    EXPECT_GT(waited, 0) << "no post of 20 bursts waited for the poll";
  }
}

TEST(DoorbellBatching, ABurstWithNoPollAfterItGoesOutByTheDeadline) {
  ConnectedPair p;
  ASSERT_TRUE(p.connected);
  Side& cl = *p.client;
  Side& sv = *p.server;
  verbs::CompletionQueue& server_cq = detail::Access::impl(sv.cq)->cq;
  for (std::uint32_t round = 0; round < 5; ++round) {
    WorkCompletion wc[kBurst];
    cl.cq.poll(wc);
    post_burst(cl, sv, round);
    // This thread polls no CQ now (that would send them): it waits on the server's CQ without
    // polling it, and the server's progress thread receives.
    wait_filled_unpolled(server_cq, kBurst);
    ASSERT_EQ(server_cq.size(), kBurst) << "round " << round;
    std::vector<WorkCompletion> got(kBurst);
    ASSERT_EQ(server_cq.poll(got), kBurst);
    expect_burst_received(sv, got, round);
    // Nothing else sent them: each burst that left posts queued met its deadline.
    std::this_thread::sleep_for(runtime::DoorbellBatching::kBackoff);  // the back-off ends
    ASSERT_EQ(wait_wcs(cl.cq, kBurst, std::chrono::seconds(10)).size(), kBurst);
  }
  const std::uint64_t left = counter(cl.qp, stats::Counter::kPostsLeftForPoll);
  const std::uint64_t deadlines = counter(cl.qp, stats::Counter::kBatchDeadlines);
  std::printf("posts left: %llu, deadlines met: %llu\n", static_cast<unsigned long long>(left),
              static_cast<unsigned long long>(deadlines));
  EXPECT_EQ(deadlines > 0, left > 0);
  EXPECT_LE(deadlines, 5u);
  if (kPostsAreFast) {
    EXPECT_GT(left, 0u);
  }
}

}  // namespace
}  // namespace uwarp::testing
