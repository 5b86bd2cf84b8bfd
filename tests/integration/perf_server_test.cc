// uwarp-perf's server survives any client: garbage instead of MPA, a protocol violation (it
// answers with a Terminate and closes that connection), a client cut off in the middle of an
// FPDU; meanwhile and afterwards, real clients are served and their data verified. Its raw TCP
// baseline streams over many connections (--tcp --qps).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "raw_peer.h"
#include "tools/uwarp-perf/protocol.h"

namespace uwarp::testing {
namespace {

// Runs a program with arguments; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& output_file) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* out = std::fopen(output_file.c_str(), "w");
    if (out != nullptr) {
      ::dup2(::fileno(out), 1);
      ::dup2(::fileno(out), 2);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits up to timeout for the process; returns its exit status, or -1 (and kills it) on timeout.
int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

std::string slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return {};
  std::string s;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

class PerfServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A port that is free now (bind to 0, read it, release it).
    RawListener probe;
    ASSERT_TRUE(probe.valid());
    port_ = probe.port();
  }
  void TearDown() override {
    if (server_ > 0) {
      ::kill(server_, SIGTERM);
      EXPECT_EQ(wait_exit(server_, std::chrono::seconds(20)), 0) << slurp(server_log_);
    }
  }

  void start_server(bool tcp = false) {
    server_log_ = ::testing::TempDir() + "uwarp-perf-server.log";
    std::vector<std::string> args = {UWARP_PERF_BIN, "server", "--addr", "127.0.0.1", "--port",
                                     std::to_string(port_)};
    // --audit: at its exit (SIGTERM, status 0 expected) every work request of every session,
    // the bad clients' included, must be accounted for, and no thread or fd left behind.
    args.push_back(tcp ? "--tcp" : "--audit");
    server_ = spawn(args, server_log_);
    for (int i = 0; i < 200; ++i) {
      if (RawPeer::connect_to("127.0.0.1", port_).valid()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    FAIL() << "server did not start listening";
  }

  pid_t start_client(const std::string& op, const std::string& sizes, const std::string& iters,
                     const std::string& log, const std::string& wait = "poll") {
    return spawn({UWARP_PERF_BIN, "client", "127.0.0.1", "--port", std::to_string(port_), "--op",
                  op, "--sizes", sizes, "--iters", iters, "--verify", "--audit", "--no-progress",
                  "--wait", wait},
                 log);
  }

  // A raw connection that passes uwarp-perf's MPA check (a control-connection hello).
  RawPeer connect_as_client() {
    RawPeer p = RawPeer::connect_to("127.0.0.1", port_);
    if (!p.valid()) return p;
    perf::Hello h;
    h.index = perf::kControlIndex;
    h.qps = 1;
    h.length = 4096;
    RawMpaOptions o;
    o.private_data = perf::encode(h);
    if (!p.send_mpa_request(o)) return RawPeer();
    auto reply = p.read_mpa(wire::MpaFrameKind::kReply);
    if (!reply || reply->reject) return RawPeer();
    return p;
  }

  std::uint16_t port_ = 0;
  pid_t server_ = -1;
  std::string server_log_;
};

TEST_F(PerfServerTest, SurvivesBadClientsAndKeepsServingOthers) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  const std::string busy_log = ::testing::TempDir() + "uwarp-perf-busy.log";
  // A real client runs while the bad ones come and go.
  const pid_t busy = start_client("write", "64K", "3000", busy_log);

  // 1. Garbage instead of an MPA request: the connection is closed.
  {
    RawPeer p = RawPeer::connect_to("127.0.0.1", port_);
    ASSERT_TRUE(p.valid());
    std::vector<std::uint8_t> junk(300);
    for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<std::uint8_t>(i * 37 + 11);
    ASSERT_TRUE(p.send_raw(junk));
    EXPECT_TRUE(p.wait_closed(10000));
  }
  // 2. A protocol violation: an RDMA Write to an STag nobody registered. Terminate, then close.
  {
    RawPeer p = connect_as_client();
    ASSERT_TRUE(p.valid());
    ASSERT_TRUE(p.send_fpdu(RawPeer::tagged_header(wire::RdmapOpcode::kRdmaWrite, 0x12345678, 0),
                            std::vector<std::uint8_t>(64, 0xAB)));
    auto fpdu = p.read_fpdu(10000);
    ASSERT_TRUE(fpdu && fpdu->is_terminate());
    auto t = RawPeer::as_terminate(*fpdu);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->first_byte, 0x11);  // DDP / tagged buffer
    EXPECT_EQ(t->code.ecode, 0x00);  // invalid STag
    EXPECT_TRUE(p.wait_closed(10000));
  }
  // 3. Cut off in the middle of an FPDU.
  {
    RawPeer p = connect_as_client();
    ASSERT_TRUE(p.valid());
    auto fpdu = RawPeer::build_fpdu(RawPeer::untagged_header(wire::RdmapOpcode::kSend, 0, 1),
                                    std::vector<std::uint8_t>(16, 1), false);
    fpdu.resize(fpdu.size() / 2);
    ASSERT_TRUE(p.send_raw(fpdu));
    p.reset();
  }
  EXPECT_EQ(wait_exit(busy, std::chrono::seconds(120)), 0) << slurp(busy_log);
  EXPECT_NE(slurp(busy_log).find(" yes"), std::string::npos) << slurp(busy_log);

  // Afterwards: every operation still works, with verified data.
  for (const char* op : {"send", "write", "read"}) {
    const std::string log = ::testing::TempDir() + "uwarp-perf-" + op + ".log";
    EXPECT_EQ(wait_exit(start_client(op, "1,4K,1M", "20", log), std::chrono::seconds(60)), 0)
        << slurp(log);
    EXPECT_NE(slurp(log).find(" yes"), std::string::npos) << slurp(log);
  }
}

// --wait block: both ends of the bandwidth runs sleep on their completion channels (the first
// empty poll arms the CQ); every operation completes with verified data, a Send's credits
// included, and so do the (polling) latency runs after them.
TEST_F(PerfServerTest, BlockingWaitsCompleteEveryOperation) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  for (const char* op : {"send", "write", "read"}) {
    const std::string log = ::testing::TempDir() + "uwarp-perf-block-" + op + ".log";
    EXPECT_EQ(wait_exit(start_client(op, "64,64K", "500", log, "block"), std::chrono::seconds(60)),
              0)
        << slurp(log);
    EXPECT_NE(slurp(log).find(" yes"), std::string::npos) << slurp(log);
  }
}

// The TCP baseline's group mode: 200 connections, every message of every one received by the
// server before it answers (the client fails if the server does not).
TEST_F(PerfServerTest, TcpBaselineStreamsOverManyConnections) {
  ASSERT_NO_FATAL_FAILURE(start_server(true));
  const std::string log = ::testing::TempDir() + "uwarp-perf-tcp-group.log";
  const pid_t client = spawn({UWARP_PERF_BIN, "client", "127.0.0.1", "--port", std::to_string(port_),
                              "--tcp", "--qps", "200", "--sizes", "4K,64K", "--iters", "20",
                              "--json", "--no-progress"},
                             log);
  ASSERT_EQ(wait_exit(client, std::chrono::seconds(120)), 0) << slurp(log);
  const std::string out = slurp(log);
  std::size_t rows = 0;
  for (std::size_t at = out.find("\"qps\": 200, \"iters\": 20,"); at != std::string::npos;
       at = out.find("\"qps\": 200, \"iters\": 20,", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 2u) << out;
  EXPECT_EQ(out.find("\"gbps\": 0.0000"), std::string::npos) << out;
  EXPECT_EQ(out.find("failed"), std::string::npos) << out;
}

// The TCP baseline's stream framed as FPDUs (--framed): the server checks the last message's
// bytes and fails the transfer if the frames did not put them in place; at a size of one frame
// and at one of several (loopback's MSS makes frames of about 64 KiB).
TEST_F(PerfServerTest, TcpBaselineFramedStreamArrivesInPlace) {
  ASSERT_NO_FATAL_FAILURE(start_server(true));
  const std::string log = ::testing::TempDir() + "uwarp-perf-tcp-framed.log";
  const pid_t client = spawn({UWARP_PERF_BIN, "client", "127.0.0.1", "--port", std::to_string(port_),
                              "--tcp", "--framed", "--no-latency", "--sizes", "4K,1M", "--iters", "50",
                              "--json", "--no-progress"},
                             log);
  ASSERT_EQ(wait_exit(client, std::chrono::seconds(60)), 0) << slurp(log);
  const std::string out = slurp(log);
  EXPECT_EQ(out.find("failed"), std::string::npos) << out;
  EXPECT_NE(out.find("\"size\": 1048576"), std::string::npos) << out;
}

// The memory-polling ping-pong of the TCP baseline (--placer): each message is placed by a
// receiving thread or a SIGIO handler while both ends spin on memory; the last echo, placed that
// way, must carry the pattern (verified: " yes"), at a small and a segmented size, and one
// server serves both kinds in turn.
TEST_F(PerfServerTest, TcpBaselinePingPongPlacedIntoSpunOnMemory) {
  ASSERT_NO_FATAL_FAILURE(start_server(true));
  for (const char* placer : {"thread", "signal"}) {
    const std::string log = ::testing::TempDir() + "uwarp-perf-tcp-placer-" + placer + ".log";
    const pid_t client = spawn({UWARP_PERF_BIN, "client", "127.0.0.1", "--port", std::to_string(port_),
                                "--tcp", "--placer", placer, "--sizes", "64,64K", "--iters", "300",
                                "--verify", "--no-progress"},
                               log);
    ASSERT_EQ(wait_exit(client, std::chrono::seconds(60)), 0) << slurp(log);
    const std::string out = slurp(log);
    std::size_t verified = 0;
    for (std::size_t at = out.find(" yes"); at != std::string::npos; at = out.find(" yes", at + 1)) ++verified;
    EXPECT_EQ(verified, 2u) << out;
  }
}

}  // namespace
}  // namespace uwarp::testing
