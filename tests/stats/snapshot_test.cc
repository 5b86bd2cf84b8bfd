// The writer and the reader together, in this process: what DeviceStats and QpStats count is
// what read_process() reads back from the file.
#include "stats/snapshot.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "stats/count.h"
#include "stats/export.h"
#include "stats/proc.h"

namespace uwarp::stats {
namespace {

const DeviceSnapshot* device_in(const Snapshot& s, const DeviceStats& d) {
  for (const auto& x : s.devices)
    if (x.index == const_cast<DeviceStats&>(d).record().index) return &x;
  return nullptr;
}

const QpSnapshot* qp_in(const Snapshot& s, std::uint32_t qp_num) {
  for (const auto& q : s.qps)
    if (q.qp_num == qp_num) return &q;
  return nullptr;
}

TEST(StatsSnapshot, TheFileIsPrivateAndNamedAfterThePid) {
  DeviceStats device;
  const std::string path = DeviceStats::file_path();
  ASSERT_FALSE(path.empty()) << "no statistics file was made";
  EXPECT_EQ(path.substr(path.rfind('/') + 1), std::to_string(::getpid()));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(path.substr(0, path.rfind('/')).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  Expected<std::string, std::string> found = find_file(::getpid());
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(*found, path);
}

TEST(StatsSnapshot, CountsOfLiveAndClosedQpsReadBack) {
  DeviceStats device;
  device.set_io("epoll", 1 << 20);
  auto a = std::make_unique<QpStats>(device, 41);
  QpStats b(device, 42);
  add(a->counters(), Counter::kTxBytes, 1000);
  add(a->counters(), Counter::kTxFpdus, 3);
  add(b.counters(), Counter::kRxBytes, 500);
  add(b.counters(), Counter::kCompletedSuccess, 7);
  SendWr wr;
  wr.opcode = WrOpcode::kRdmaWrite;
  count_posted(b.counters(), wr);

  Expected<Snapshot, std::string> s = read_process(::getpid());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->pid, ::getpid());
  EXPECT_EQ(s->version, kVersion);
  EXPECT_EQ(s->program, process_name(::getpid()));
  const DeviceSnapshot* d = device_in(*s, device);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->io_backend, "epoll");
  EXPECT_EQ(d->send_budget, 1u << 20);
  EXPECT_EQ(d->qps_created, 2u);
  EXPECT_EQ(d->qps_destroyed, 0u);
  EXPECT_EQ(d->totals[Counter::kTxBytes], 1000u);
  EXPECT_EQ(d->totals[Counter::kRxBytes], 500u);
  EXPECT_EQ(d->totals[Counter::kPostedWrite], 1u);
  ASSERT_NE(qp_in(*s, 41), nullptr);
  ASSERT_NE(qp_in(*s, 42), nullptr);
  EXPECT_EQ(qp_in(*s, 41)->counters[Counter::kTxFpdus], 3u);
  EXPECT_EQ(qp_in(*s, 42)->counters[Counter::kCompletedSuccess], 7u);

  // A closed QP leaves the table; its counts stay in the device's totals.
  a.reset();
  s = read_process(::getpid());
  ASSERT_TRUE(s) << s.error();
  d = device_in(*s, device);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(qp_in(*s, 41), nullptr);
  EXPECT_EQ(d->qps_destroyed, 1u);
  EXPECT_EQ(d->totals[Counter::kTxBytes], 1000u);
  EXPECT_EQ(d->totals[Counter::kTxFpdus], 3u);
  EXPECT_EQ(d->totals[Counter::kRxBytes], 500u);

  // A new QP takes the freed slot, with fresh counters.
  QpStats c(device, 43);
  s = read_process(::getpid());
  ASSERT_TRUE(s) << s.error();
  ASSERT_NE(qp_in(*s, 43), nullptr);
  EXPECT_EQ(qp_in(*s, 43)->counters[Counter::kTxBytes], 0u);
}

TEST(StatsSnapshot, TerminatesCountByCodeAndCrcErrorsApart) {
  DeviceStats device;
  QpStats q(device, 7);
  q.terminate_sent(2, 0, 0x02);  // LLP: MPA CRC error
  q.terminate_sent(1, 1, 0x01);  // DDP tagged: base or bounds
  q.terminate_sent(1, 1, 0x01);
  q.terminate_received(0, 1, 0x02);
  Expected<Snapshot, std::string> s = read_process(::getpid());
  ASSERT_TRUE(s) << s.error();
  const DeviceSnapshot* d = device_in(*s, device);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->totals[Counter::kTerminatesSent], 3u);
  EXPECT_EQ(d->totals[Counter::kTerminatesReceived], 1u);
  EXPECT_EQ(d->totals[Counter::kCrcErrors], 1u);
  ASSERT_EQ(d->terminates.size(), 3u);
  EXPECT_EQ(d->terminates[0].layer, 2);
  EXPECT_EQ(d->terminates[0].ecode, 0x02);
  EXPECT_EQ(d->terminates[0].sent, 1u);
  EXPECT_EQ(d->terminates[1].sent, 2u);
  EXPECT_EQ(d->terminates[2].received, 1u);
  EXPECT_EQ(d->terminates[2].sent, 0u);
}

TEST(StatsSnapshot, ListsThisProcessAndRemovesFilesOfProcessesThatAreGone) {
  DeviceStats device;
  const std::string path = DeviceStats::file_path();
  ASSERT_FALSE(path.empty());
  // A process that has exited: its PID is free (until reused; then its start time differs).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string stale = dir + "/" + std::to_string(child);
  {
    // A copy of this process's file, with the child's PID, stands for the dead one's.
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(bytes.size(), sizeof(FileHeader));
    const auto pid = static_cast<std::uint32_t>(child);
    std::memcpy(bytes.data() + offsetof(FileHeader, pid), &pid, sizeof(pid));
    std::ofstream out(stale, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ASSERT_EQ(::access(stale.c_str(), F_OK), 0);
  Expected<Snapshot, std::string> dead = read_process(child);
  ASSERT_FALSE(dead);
  EXPECT_NE(dead.error().find("gone"), std::string::npos) << dead.error();
  const std::vector<ProcessFileInfo> procs = list_processes(/*remove_stale=*/true);
  bool self = false;
  for (const auto& p : procs) {
    EXPECT_NE(p.pid, child);
    if (p.pid == ::getpid()) self = true;
  }
  EXPECT_TRUE(self);
  EXPECT_NE(::access(stale.c_str(), F_OK), 0) << "the stale file is still there";
}

TEST(StatsSnapshot, TheReaderRefusesWhatIsNotItsFormat) {
  std::vector<std::uint8_t> bytes(sizeof(FileHeader) + sizeof(DeviceRecord) + sizeof(QpSlot));
  auto* h = new (bytes.data()) FileHeader{};
  EXPECT_FALSE(read_snapshot(bytes.data(), bytes.size()));  // no magic
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  h->version = kVersion + 1;
  Expected<Snapshot, std::string> s = read_snapshot(bytes.data(), bytes.size());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("version"), std::string::npos) << s.error();
  h->version = kVersion;
  h->ready.store(1);
  h->header_size = sizeof(FileHeader);
  h->device_size = sizeof(DeviceRecord);
  h->qp_size = sizeof(QpSlot);
  h->device_offset = sizeof(FileHeader);
  h->device_count = 1;
  h->qp_offset = sizeof(FileHeader) + sizeof(DeviceRecord);
  h->qp_count = 1;
  h->counter_count = kCounterCount;
  h->file_size = bytes.size();
  EXPECT_TRUE(read_snapshot(bytes.data(), bytes.size()));
  h->qp_count = 2;  // a table beyond the end
  EXPECT_FALSE(read_snapshot(bytes.data(), bytes.size()));
  h->qp_count = 1;
  EXPECT_FALSE(read_snapshot(bytes.data(), bytes.size() - 1));  // truncated
  h->qp_size = sizeof(QpSlot) - 8;  // a record smaller than the format's
  EXPECT_FALSE(read_snapshot(bytes.data(), bytes.size()));
}

TEST(StatsSnapshot, NoPidNoFile) {
  // PID 1 belongs to init, which does not use uwarp (or another user's file is not ours).
  Expected<Snapshot, std::string> s = read_process(0x3fffffff);
  EXPECT_FALSE(s);
}

}  // namespace
}  // namespace uwarp::stats
