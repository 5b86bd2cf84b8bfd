// The send budget (src/runtime/send_budget.h) on real sockets: every established stream of a
// context carries its share of the budget as TCP_NOTSENT_LOWAT, the share shrinks as streams
// are added and grows again when they close. The budget is set through UWARP_SEND_BUDGET before
// the context opens, so that a few connections already divide it.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "support/connected_pair.h"

namespace uwarp::testing {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kBudget = 1024 * kKiB;

// TCP_NOTSENT_LOWAT of every established TCP socket of this process (listeners left out), by fd.
std::map<int, std::size_t> established_lowats() {
  std::map<int, std::size_t> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    struct stat st{};
    if (e->d_name[0] == '.' || fd == ::dirfd(dir) || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
      continue;
    int type = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    tcp_info info{};
    len = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        info.tcpi_state != TCP_ESTABLISHED)
      continue;
    unsigned lowat = 0;
    len = sizeof lowat;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, &len) == 0) out[fd] = lowat;
  }
  ::closedir(dir);
  return out;
}

// A 4 KiB Write each way, so that both streams of the pair transmit (a stream applies a changed
// share when it next fills its transmit batch).
void write_both_ways(ConnectedPair& p) {
  for (auto [from, to] : {std::pair{&*p.client, &*p.server}, std::pair{&*p.server, &*p.client}}) {
    Sge sge = from->mr.sge(0, 4096);
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sg_list = {&sge, 1};
    w.remote_addr = reinterpret_cast<std::uintptr_t>(to->buf.data());
    w.rkey = to->mr.rkey();
    ASSERT_TRUE(from->qp.post_send(w));
    auto wc = wait_wc(from->cq);
    ASSERT_TRUE(wc);
    EXPECT_EQ(wc->status, WcStatus::kSuccess);
  }
}

// True once every established socket reports `lowat` (bounded wait: teardown is asynchronous).
bool all_report(ConnectedPair& p, std::size_t sockets, std::size_t lowat) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::map<int, std::size_t> seen;
  while (std::chrono::steady_clock::now() < deadline) {
    write_both_ways(p);
    seen = established_lowats();
    bool all = seen.size() == sockets;
    for (const auto& [fd, v] : seen) all = all && v == lowat;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [fd, v] : seen) ADD_FAILURE() << "fd " << fd << ": " << v << ", expected " << lowat;
  ADD_FAILURE() << seen.size() << " established sockets, expected " << sockets;
  return false;
}

TEST(SendBudget, StreamsShareTheBudgetAsTheyComeAndGo) {
  ASSERT_EQ(::setenv("UWARP_SEND_BUDGET", std::to_string(kBudget).c_str(), 1), 0);
  ConnectedPair p;
  ::unsetenv("UWARP_SEND_BUDGET");
  ASSERT_TRUE(p.connected);
  // One connection within the context: its two streams (client and server) share the budget.
  EXPECT_TRUE(all_report(p, 2, kBudget / 2));
  {
    // Two more streams: a quarter each (the newcomers take theirs when they start).
    EventedConnection more(p);
    ASSERT_TRUE(more.accept());
    EXPECT_TRUE(all_report(p, 4, kBudget / 4));
    more.conn.disconnect();
    wait_event(p.client_events(), CmEventType::kDisconnected);
    wait_event(p.server_events(), CmEventType::kDisconnected);
  }
  // Closed streams leave the count: the remaining two get half each again.
  EXPECT_TRUE(all_report(p, 2, kBudget / 2));
}

TEST(SendBudget, ABudgetOfZeroLeavesTheKernelDefault) {
  ASSERT_EQ(::setenv("UWARP_SEND_BUDGET", "0", 1), 0);
  ConnectedPair p;
  ::unsetenv("UWARP_SEND_BUDGET");
  ASSERT_TRUE(p.connected);
  write_both_ways(p);
  const auto seen = established_lowats();
  EXPECT_EQ(seen.size(), 2u);
  // 0: the socket was never given a bound and follows the net.ipv4.tcp_notsent_lowat sysctl.
  for (const auto& [fd, v] : seen) EXPECT_EQ(v, 0u) << "fd " << fd;
}

}  // namespace
}  // namespace uwarp::testing
