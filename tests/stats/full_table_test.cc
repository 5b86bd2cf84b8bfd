// A full QP table: the QP beyond it counts in private memory, is counted as without a slot, and
// its counts join the device's totals when it closes. The table has two slots
// (UWARP_STATS_QPS=2, set before the file is made).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "stats/count.h"
#include "stats/export.h"
#include "stats/snapshot.h"

namespace uwarp::stats {
namespace {

TEST(StatsFullTable, AQpWithoutASlotStillCountsInItsDevice) {
  ::setenv("UWARP_STATS_QPS", "2", 1);
  DeviceStats device;
  QpStats a(device, 1);
  QpStats b(device, 2);
  auto c = std::make_unique<QpStats>(device, 3);
  EXPECT_TRUE(a.exported());
  EXPECT_TRUE(b.exported());
  EXPECT_FALSE(c->exported());
  add(c->counters(), Counter::kTxBytes, 123);
  Expected<Snapshot, std::string> s = read_process(::getpid());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->qp_slots, 2u);
  EXPECT_EQ(s->qps.size(), 2u);
  ASSERT_EQ(s->devices.size(), 1u);
  EXPECT_EQ(s->devices[0].qps_without_slot, 1u);
  EXPECT_EQ(s->devices[0].qps_created, 3u);
  EXPECT_EQ(s->devices[0].totals[Counter::kTxBytes], 0u);  // not visible while it lives
  c.reset();
  s = read_process(::getpid());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->devices[0].totals[Counter::kTxBytes], 123u);
}

TEST(StatsFullTable, AForkedChildLeavesItsParentsFile) {
  DeviceStats device;
  const std::string path = DeviceStats::file_path();
  ASSERT_FALSE(path.empty());
  const pid_t child = ::fork();
  if (child == 0) std::exit(0);  // runs the static destructors, the file's remover among them
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(::access(path.c_str(), F_OK), 0) << "a child's exit removed its parent's file";
}

}  // namespace
}  // namespace uwarp::stats
