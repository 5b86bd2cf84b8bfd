// uwarp-perf output: a table for people, JSON for scripts.
#include <cstdio>

#include "runner.h"

namespace uwarp::perf {

void print_table(const std::vector<SizeResult>& results, bool verify) {
  std::printf("%-6s %10s %4s %8s %10s %12s %12s %12s %s\n", "op", "size", "qps", "iters", "Gb/s",
              "msg/s", "lat med us", "lat p99 us", verify ? "verified" : "");
  for (const SizeResult& r : results) {
    if (!r.error.empty()) {
      std::printf("%-6s %10u %4u  FAILED: %s\n", r.tcp ? "tcp" : to_string(r.op), r.size, r.qps,
                  r.error.c_str());
      continue;
    }
    std::printf("%-6s %10u %4u %8llu %10.2f %12.0f ", r.tcp ? "tcp" : to_string(r.op), r.size,
                r.qps, static_cast<unsigned long long>(r.iters), r.gbps, r.msg_rate);
    if (r.lat_iters != 0) {
      std::printf("%12.2f %12.2f", r.lat_median_us, r.lat_p99_us);
    } else {
      std::printf("%12s %12s", "-", "-");  // no ping-pong ran (--no-latency, --qps with --tcp)
    }
    std::printf(" %s\n", verify ? (r.verified ? "yes" : "NO") : "");
  }
  std::fflush(stdout);
}

void print_json(const std::vector<SizeResult>& results) {
  std::printf("[\n");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const SizeResult& r = results[i];
    std::printf(
        "  {\"op\": \"%s\", \"transport\": \"%s\", \"size\": %u, \"qps\": %u, \"iters\": %llu, "
        "\"crc\": %s, \"seconds\": %.6f, "
        "\"gbps\": %.4f, \"msg_rate\": %.1f, \"lat_median_us\": %.3f, \"lat_mean_us\": %.3f, "
        "\"lat_p99_us\": %.3f, "
        "\"lat_iters\": %u, \"max_gap_ms\": %.3f, "
        "\"verified\": %s, \"error\": \"%s\"}%s\n",
        to_string(r.op), r.tcp ? "tcp" : "uwarp", r.size, r.qps,
        static_cast<unsigned long long>(r.iters), r.crc ? "true" : "false", r.seconds, r.gbps,
        r.msg_rate, r.lat_median_us, r.lat_mean_us, r.lat_p99_us, r.lat_iters, r.max_gap_ms,
        r.verified ? "true" : "false", r.error.c_str(), i + 1 < results.size() ? "," : "");
  }
  std::printf("]\n");
  std::fflush(stdout);
}

}  // namespace uwarp::perf
