#include "stats/layout.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <string>

#include "stats/count.h"

namespace uwarp::stats {
namespace {

TEST(StatsLayout, EveryCounterHasItsOwnName) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    const std::string name(counter_name(static_cast<Counter>(i)));
    EXPECT_NE(name, "unknown") << i;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

// The layout is the file format: offsets of fields readers rely on must not move within a
// version (docs/statistics.md). A change here is a format change.
TEST(StatsLayout, RecordsKeepTheirPlaces) {
  EXPECT_EQ(sizeof(FileHeader), 256u);
  EXPECT_EQ(offsetof(FileHeader, version), 8u);
  EXPECT_EQ(offsetof(FileHeader, header_size), 12u);
  EXPECT_EQ(sizeof(Counters), kCounterSlots * 8);
  EXPECT_EQ(sizeof(QpSlot) % 64, 0u);
  EXPECT_EQ(sizeof(DeviceRecord) % 64, 0u);
  EXPECT_EQ(offsetof(QpSlot, counters) % 64, 0u);
  EXPECT_EQ(static_cast<int>(Counter::kTxBytes), 0);
  EXPECT_EQ(static_cast<int>(Counter::kPostedSend), 4);
  EXPECT_EQ(static_cast<int>(Counter::kCompletedSuccess), 17);
  EXPECT_EQ(static_cast<int>(Counter::kTcpRetransmits), 31);
}

TEST(StatsLayout, PostedAndCompletedCountByOpcodeAndStatus) {
  Counters c{};
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaRead;
  count_posted(c, wr);
  wr.opcode = WrOpcode::kSend;
  wr.flags = send_flags::kSignaled | send_flags::kSolicited;
  count_posted(c, wr);
  wr.opcode = WrOpcode::kAtomicCompareSwap;
  count_posted(c, wr);  // solicited means nothing to an atomic
  count_completed(c, WcStatus::kSuccess);
  count_completed(c, WcStatus::kWrFlushError);
  count_completed(c, WcStatus::kWrFlushError);
  EXPECT_EQ(c[Counter::kPostedRead].load(), 1u);
  EXPECT_EQ(c[Counter::kPostedSend].load(), 1u);
  EXPECT_EQ(c[Counter::kPostedSolicited].load(), 1u);
  EXPECT_EQ(c[Counter::kPostedCompareSwap].load(), 1u);
  EXPECT_EQ(c[Counter::kCompletedSuccess].load(), 1u);
  EXPECT_EQ(c[Counter::kCompletedWrFlushError].load(), 2u);
  EXPECT_EQ(c[Counter::kPostedWrite].load(), 0u);
}

TEST(StatsLayout, TerminateKeysAreNeverZero) {
  EXPECT_NE(terminate_key(0, 0, 0), 0u);
  EXPECT_EQ(terminate_key(2, 0, 0x02), 0x01020002u);
}

}  // namespace
}  // namespace uwarp::stats
