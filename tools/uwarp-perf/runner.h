// The two roles of uwarp-perf and the result of one measured size.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace uwarp::perf {

struct SizeResult {
  Op op = Op::kWrite;
  bool tcp = false;  // a raw TCP baseline row
  std::uint32_t size = 0;
  std::uint32_t qps = 1;
  std::uint64_t iters = 0;  // messages per QP
  bool crc = false;
  double seconds = 0;
  double gbps = 0;
  double msg_rate = 0;  // messages per second, all QPs
  // uwarp bandwidth runs: the longest time without a completion, from the first post to the
  // last completion (a stall of the data path shows here; the rate averages it away).
  double max_gap_ms = 0;
  double lat_median_us = 0;
  double lat_mean_us = 0;
  double lat_p99_us = 0;
  std::uint32_t lat_iters = 0;
  bool verified = false;  // data checked and correct (only with --verify)
  std::string error;      // empty on success
};

// Serves clients until `stop` is set (or after one client with options.once). Returns 0 when
// it stopped cleanly. `bound_port` receives the port listened on (for port 0).
int run_server(const Options& options, std::atomic<bool>& stop, std::atomic<int>* bound_port);
// Connects and measures every size; false if anything failed.
bool run_client(const Options& options, std::vector<SizeResult>& results);

// The raw TCP baseline (--tcp): the same sizes and iteration counts over a plain TCP connection
// (a stream of messages for bandwidth, a ping-pong for latency). Same contracts as above.
int run_tcp_server(const Options& options, std::atomic<bool>& stop, std::atomic<int>* bound_port);
bool run_tcp_client(const Options& options, std::vector<SizeResult>& results);
// Iterations per size when --iters is not given (shared with the baseline).
std::uint32_t default_iters(std::uint32_t size);
// Before each measured bandwidth run, uwarp and the baseline alike stream this many messages
// of the same size unmeasured, so that both are measured in a steady state (TCP's windows and
// buffers grown, buffers touched): the first size measured on a fresh connection otherwise
// came out up to a fifth slower than the same size measured later.
inline std::uint64_t warmup_iters(std::uint64_t iters) { return iters / 8 + 1; }

// --audit: the verdict of every audit in this process (work requests of each endpoint, then
// threads and file descriptors at exit); set by whichever audit finds something unaccounted for.
struct AuditVerdict {
  std::atomic<bool> failed{false};
};
AuditVerdict& audit_verdict();
// How long an audit waits for the flush of an endpoint's QPs to complete every request.
inline constexpr int kAuditSettleMs = 5000;
// After a failure, how long an audit waits for the endpoint's other QPs to fail too before it
// counts the QPs in ERROR (Endpoint::note_qps_in_error).
inline constexpr int kAuditFailureSpreadMs = 3000;

void print_table(const std::vector<SizeResult>& results, bool verify);
void print_json(const std::vector<SizeResult>& results);

}  // namespace uwarp::perf
