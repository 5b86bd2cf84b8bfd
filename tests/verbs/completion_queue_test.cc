// verbs::CompletionQueue: poll order, capacity overflow, and arming (next vs solicited) with
// exactly one event per arm, counted by a fake CqEventSink; the registry of poll sources that
// busy polling drives (fake sources).
#include "verbs/completion_queue.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace uwarp::verbs {
namespace {

class CountingSink final : public CqEventSink {
 public:
  void cq_event(CompletionQueue& cq) override {
    ++events;
    last = &cq;
  }
  int events = 0;
  CompletionQueue* last = nullptr;
};

WorkCompletion wc(std::uint64_t id, WcStatus status = WcStatus::kSuccess) {
  WorkCompletion w;
  w.wr_id = id;
  w.status = status;
  w.opcode = WcOpcode::kRecv;
  return w;
}

TEST(verbs_completion_queue, PollsInPushOrderInPieces) {
  CompletionQueue cq(16, nullptr, nullptr);
  for (std::uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(cq.push(wc(i), false));
  EXPECT_EQ(cq.size(), 10u);
  std::array<WorkCompletion, 4> out;
  std::uint64_t next = 0;
  std::size_t n;
  for (int round = 0; round < 100 && (n = cq.poll(out)) > 0; ++round) {
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(out[i].wr_id, next++);
  }
  EXPECT_EQ(next, 10u);
  EXPECT_EQ(cq.size(), 0u);
  EXPECT_EQ(cq.poll(out), 0u);
  EXPECT_EQ(cq.poll(std::span<WorkCompletion>()), 0u);
}

TEST(verbs_completion_queue, OverflowLosesTheCompletionAndLatches) {
  CompletionQueue cq(3, nullptr, nullptr);
  for (std::uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(cq.push(wc(i), false));
  EXPECT_FALSE(cq.overflowed());
  EXPECT_FALSE(cq.push(wc(3), false));
  EXPECT_TRUE(cq.overflowed());
  EXPECT_EQ(cq.size(), 3u);
  std::array<WorkCompletion, 8> out;
  ASSERT_EQ(cq.poll(out), 3u);
  EXPECT_EQ(out[2].wr_id, 2u);  // the lost one is not there
  // Room again; the overflow stays reported.
  EXPECT_TRUE(cq.push(wc(4), false));
  EXPECT_TRUE(cq.overflowed());
  EXPECT_EQ(cq.capacity(), 3u);
}

TEST(verbs_completion_queue, UnarmedCqRaisesNoEvent) {
  CountingSink sink;
  CompletionQueue cq(8, &sink, nullptr);
  ASSERT_TRUE(cq.push(wc(1), true));
  ASSERT_TRUE(cq.push(wc(2, WcStatus::kWrFlushError), false));
  EXPECT_EQ(sink.events, 0);
}

TEST(verbs_completion_queue, ArmNextFiresOncePerArm) {
  CountingSink sink;
  int ctx = 0;
  CompletionQueue cq(8, &sink, &ctx);
  cq.arm(false);
  ASSERT_TRUE(cq.push(wc(1), false));
  EXPECT_EQ(sink.events, 1);
  EXPECT_EQ(sink.last, &cq);
  EXPECT_EQ(cq.user_context(), &ctx);
  ASSERT_TRUE(cq.push(wc(2), false));
  ASSERT_TRUE(cq.push(wc(3), true));
  EXPECT_EQ(sink.events, 1) << "no event without re-arming";
  // Arming several times before a completion still gives one event.
  cq.arm(false);
  cq.arm(false);
  cq.arm(true);
  ASSERT_TRUE(cq.push(wc(4), false));
  ASSERT_TRUE(cq.push(wc(5), false));
  EXPECT_EQ(sink.events, 2);
}

TEST(verbs_completion_queue, ArmSolicitedWaitsForSolicitedOrError) {
  CountingSink sink;
  CompletionQueue cq(16, &sink, nullptr);
  cq.arm(true);
  ASSERT_TRUE(cq.push(wc(1), false));
  ASSERT_TRUE(cq.push(wc(2), false));
  EXPECT_EQ(sink.events, 0);
  ASSERT_TRUE(cq.push(wc(3), true));
  EXPECT_EQ(sink.events, 1);
  ASSERT_TRUE(cq.push(wc(4), true));
  EXPECT_EQ(sink.events, 1) << "one event per arm";
  // An error completion fires a solicited-only arm too.
  cq.arm(true);
  ASSERT_TRUE(cq.push(wc(5), false));
  ASSERT_TRUE(cq.push(wc(6, WcStatus::kRemoteAccessError), false));
  EXPECT_EQ(sink.events, 2);
}

TEST(verbs_completion_queue, ArmNextIsNeverDowngradedToSolicited) {
  CountingSink sink;
  CompletionQueue cq(16, &sink, nullptr);
  cq.arm(false);
  cq.arm(true);
  ASSERT_TRUE(cq.push(wc(1), false));
  EXPECT_EQ(sink.events, 1);
  // Solicited then next: next wins.
  cq.arm(true);
  cq.arm(false);
  ASSERT_TRUE(cq.push(wc(2), false));
  EXPECT_EQ(sink.events, 2);
}

TEST(verbs_completion_queue, OverflowedPushDoesNotConsumeTheArm) {
  CountingSink sink;
  CompletionQueue cq(1, &sink, nullptr);
  ASSERT_TRUE(cq.push(wc(1), false));
  cq.arm(false);
  EXPECT_FALSE(cq.push(wc(2), false));
  EXPECT_EQ(sink.events, 0);
  std::array<WorkCompletion, 1> out;
  ASSERT_EQ(cq.poll(out), 1u);
  ASSERT_TRUE(cq.push(wc(3), false));
  EXPECT_EQ(sink.events, 1);
}

// An application that polls a completion and then drains its channel must find that
// completion's event there already. The sink here lets another thread poll while it is told,
// for up to 50 ms: that poll must not return the completion before the sink returns.
TEST(verbs_completion_queue, TheEventIsOnTheChannelBeforeItsCompletionCanBePolled) {
  class PollingSink final : public CqEventSink {
   public:
    void cq_event(CompletionQueue& cq) override {
      poller = std::thread([this, &cq] {
        std::array<WorkCompletion, 1> out;
        for (int i = 0; i < 10000 && polled.load() == 0; ++i) polled.store(cq.poll(out));
      });
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (polled.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      polled_while_told = polled.load();
    }
    std::thread poller;
    std::atomic<std::size_t> polled{0};
    std::size_t polled_while_told = 0;
  };
  PollingSink sink;
  CompletionQueue cq(4, &sink, nullptr);
  cq.arm(false);
  ASSERT_TRUE(cq.push(wc(1), false));
  ASSERT_TRUE(sink.poller.joinable());
  sink.poller.join();
  EXPECT_EQ(sink.polled_while_told, 0u) << "the completion was polled before its event was out";
  EXPECT_EQ(sink.polled.load(), 1u);
}

TEST(verbs_completion_queue, SinkCanBeReplaced) {
  CountingSink a, b;
  CompletionQueue cq(8, &a, nullptr);
  cq.set_event_sink(&b);
  cq.arm(false);
  ASSERT_TRUE(cq.push(wc(1), false));
  EXPECT_EQ(a.events, 0);
  EXPECT_EQ(b.events, 1);
  cq.set_event_sink(nullptr);
  cq.arm(false);
  ASSERT_TRUE(cq.push(wc(2), false));  // no sink: nothing to call, and no crash
  EXPECT_EQ(b.events, 1);
}

class FakeSource final : public CqPollSource {
 public:
  bool cq_poll_rx(bool claim, PollTime now) override {
    ++polls;
    last_claim = claim;
    last_now = now;
    return progress;
  }
  void cq_armed() override { ++armed; }
  int polls = 0;
  int armed = 0;
  bool last_claim = false;
  PollTime last_now{};
  bool progress = false;
};

// An empty poll's time (CompletionQueue::drive_sources).
PollTime poll_time() {
  return std::chrono::steady_clock::now();
}

TEST(verbs_completion_queue, DrivesNothingWithoutSources) {
  CompletionQueue cq(4, nullptr, nullptr);
  EXPECT_FALSE(cq.drive_sources(poll_time()));
}

TEST(verbs_completion_queue, DrivesEachSourceOnceAndReportsProgress) {
  CompletionQueue cq(4, nullptr, nullptr);
  auto a = std::make_shared<FakeSource>();
  auto b = std::make_shared<FakeSource>();
  cq.add_source(a);
  cq.add_source(b);
  cq.add_source(a);  // ignored: once per CQ
  EXPECT_FALSE(cq.drive_sources(poll_time()));
  EXPECT_EQ(a->polls, 1);
  EXPECT_EQ(b->polls, 1);
  EXPECT_TRUE(a->last_claim);  // not armed: the poller may claim
  const PollTime t = poll_time() - std::chrono::milliseconds(5);
  EXPECT_FALSE(cq.drive_sources(t));
  EXPECT_EQ(a->last_now, t);  // the poll's one clock reading, not a reading of the source's own
  EXPECT_EQ(b->last_now, t);
  b->progress = true;
  EXPECT_TRUE(cq.drive_sources(poll_time()));
  cq.remove_source(b.get());
  EXPECT_FALSE(cq.drive_sources(poll_time()));
  EXPECT_EQ(a->polls, 4);
  EXPECT_EQ(b->polls, 3);
}

TEST(verbs_completion_queue, ArmingTellsTheSourcesAndStopsClaims) {
  CountingSink sink;
  CompletionQueue cq(4, &sink, nullptr);
  auto a = std::make_shared<FakeSource>();
  cq.add_source(a);
  cq.arm(false);
  EXPECT_EQ(a->armed, 1);
  (void)cq.drive_sources(poll_time());
  EXPECT_FALSE(a->last_claim);  // armed: the application is about to block
  ASSERT_TRUE(cq.push(wc(1), false));  // fires, disarms
  (void)cq.drive_sources(poll_time());
  EXPECT_TRUE(a->last_claim);
}

TEST(verbs_completion_queue, SkipsSourcesThatAreGone) {
  CompletionQueue cq(4, nullptr, nullptr);
  auto a = std::make_shared<FakeSource>();
  cq.add_source(a);
  a.reset();  // destroyed without remove_source: held weakly, skipped
  EXPECT_FALSE(cq.drive_sources(poll_time()));
  cq.arm(false);
}

TEST(verbs_completion_queue, DrivesABoundedNumberOfSourcesPerCallRoundRobin) {
  CompletionQueue cq(4, nullptr, nullptr);
  std::vector<std::shared_ptr<FakeSource>> sources;
  for (int i = 0; i < 10; ++i) {
    sources.push_back(std::make_shared<FakeSource>());
    cq.add_source(sources.back());
  }
  (void)cq.drive_sources(poll_time());
  int total = 0;
  for (auto& s : sources) total += s->polls;
  EXPECT_EQ(total, static_cast<int>(CompletionQueue::kDrivePerCall));
  // Enough calls reach every source equally.
  for (int i = 1; i < 10; ++i) (void)cq.drive_sources(poll_time());
  for (auto& s : sources) EXPECT_EQ(s->polls, static_cast<int>(CompletionQueue::kDrivePerCall));
}

// The process's set holds every stream (runtime::PollSourceRegistration adds them); these tests
// put their own fakes there and take them out again.
TEST(verbs_completion_queue, IdleOwnSourcesLeadToTheProcesssOthers) {
  CompletionQueue cq(4, nullptr, nullptr);
  auto own = std::make_shared<FakeSource>();
  auto other = std::make_shared<FakeSource>();
  cq.add_source(own);
  process_poll_sources().add(own);
  process_poll_sources().add(other);
  EXPECT_FALSE(cq.drive_sources(poll_time()));
  EXPECT_EQ(own->polls, 1);  // once: the process's drive leaves out what this CQ drove
  EXPECT_EQ(other->polls, 1);
  EXPECT_TRUE(other->last_claim);
  const PollTime t = poll_time() - std::chrono::milliseconds(5);
  (void)cq.drive_sources(t);
  EXPECT_EQ(other->last_now, t);  // the process's others get the same reading
  EXPECT_EQ(other->polls, 2);
  other->progress = true;
  EXPECT_TRUE(cq.drive_sources(poll_time()));  // another QP's data counts as progress: poll again
  own->progress = true;
  EXPECT_TRUE(cq.drive_sources(poll_time()));
  EXPECT_EQ(other->polls, 3);  // this CQ's own streams made progress: no others this time
  process_poll_sources().remove(own.get());
  process_poll_sources().remove(other.get());
  own->progress = false;
  EXPECT_FALSE(cq.drive_sources(poll_time()));
  EXPECT_EQ(other->polls, 3);
}

TEST(verbs_completion_queue, AnArmedCqsPollDrivesTheOthersWithoutClaiming) {
  CountingSink sink;
  CompletionQueue cq(4, &sink, nullptr);
  auto other = std::make_shared<FakeSource>();
  process_poll_sources().add(other);
  cq.arm(false);
  EXPECT_EQ(other->armed, 0);  // arming tells only the CQ's own streams
  (void)cq.drive_sources(poll_time());
  EXPECT_EQ(other->polls, 1);
  EXPECT_FALSE(other->last_claim);
  process_poll_sources().remove(other.get());
}

}  // namespace
}  // namespace uwarp::verbs
