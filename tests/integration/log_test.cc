// UWARP_LOG through the native API: at info a loopback connection logs its setup (connect, the
// request, accept, the negotiated MPA parameters, established) and its close, each a line of
// "uwarp: info: cm: ...", with its QP number and addresses; at warn a Terminate is logged by both
// QPs, also with their addresses; with logging off, nothing.
#include "base/log.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "support/connected_pair.h"

namespace uwarp::testing {
namespace {

// What `run` writes to standard error at `level`; the threshold is restored afterwards, also
// when an assertion inside `run` returns early.
template <typename Run>
std::string logged_at(log::Level level, Run run) {
  const log::Level saved = log::threshold();
  log::set_threshold(level);
  ::testing::internal::CaptureStderr();
  run();
  std::string out = ::testing::internal::GetCapturedStderr();
  log::set_threshold(saved);
  return out;
}

std::string connect_and_close(log::Level level, const ConnectedPair::Options& options = {}) {
  return logged_at(level, [&] {
    ConnectedPair p(options);
    EXPECT_TRUE(p.connected);
    if (p.connected) {
      p.client->conn.disconnect();
      wait_event(p.client_events(), CmEventType::kDisconnected);
      wait_event(p.server_events(), CmEventType::kDisconnected);
    }
  });
}

TEST(Log, InfoLogsSetupAndClose) {
  const std::string out = connect_and_close(log::Level::kInfo);
  std::istringstream lines(out);
  std::string line;
  const std::regex form(R"(uwarp: (error|warn|info): [a-z]+: .*)");
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, form)) << line;
    ++n;
  }
  EXPECT_GE(n, 6) << out;
  const std::string addrs = R"(\(local 127\.0\.0\.1:[0-9]+, peer 127\.0\.0\.1:[0-9]+\))";
  for (const std::string what :
       {"connecting", "connection request", "QP [0-9]+: accepting",
        "QP [0-9]+: MPA revision 2, CRC off, markers sent no, received "
        "no, IRD [0-9]+, ORD [0-9]+, RTR none, initiator",
        "QP [0-9]+: MPA revision 2, .*responder", "QP [0-9]+: established",
        "QP [0-9]+: disconnecting", "QP [0-9]+: closed( abnormally)?: .*"}) {
    EXPECT_TRUE(
        std::regex_search(out, std::regex("uwarp: info: cm: (QP [0-9]+: )?" + what + " " + addrs)))
        << "no line for '" << what << "' in:\n"
        << out;
  }
}

// A Read of an STag the server never gave: the server answers with a Terminate, which ends the
// client's Read with an error.
TEST(Log, WarnLogsTerminatesWithTheirAddresses) {
  const std::string out = logged_at(log::Level::kWarn, [] {
    ConnectedPair p;
    EXPECT_TRUE(p.connected);
    if (p.connected) {
      const Sge local = p.client->mr.sge(0, 64);
      SendWr wr = remote_wr(WrOpcode::kRdmaRead, local, *p.server, 0, 1);
      wr.rkey ^= 0x100;  // another STag index
      ASSERT_TRUE(p.client->qp.post_send(wr));
      const auto wc = wait_wc(p.client->cq);
      ASSERT_TRUE(wc.has_value());
      EXPECT_NE(wc->status, WcStatus::kSuccess);
    }
  });
  const std::string addrs = R"( \(local 127\.0\.0\.1:[0-9]+, peer 127\.0\.0\.1:[0-9]+\))";
  for (const std::string what : {"sending Terminate .*", "received Terminate .*"}) {
    EXPECT_TRUE(std::regex_search(out, std::regex("uwarp: warn: qp: QP [0-9]+: " + what + addrs)))
        << "no line for '" << what << "' in:\n"
        << out;
  }
}

// A side that asked for larger FPDUs says so in its line of MPA parameters; the other does not.
TEST(Log, InfoNamesALargerFpduSizeOfThisSide) {
  ConnectedPair::Options o;
  o.client_params.fpdu_size = 65536;
  const std::string out = connect_and_close(log::Level::kInfo, o);
  EXPECT_TRUE(std::regex_search(
      out, std::regex("QP [0-9]+: MPA revision 2, .*, RTR none, FPDUs up to 65536 bytes across "
                      "segments, initiator")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("RTR none, responder"))) << out;
}

TEST(Log, OffLogsNothing) {
  EXPECT_EQ(connect_and_close(log::Level::kOff), "");
}

}  // namespace
}  // namespace uwarp::testing
