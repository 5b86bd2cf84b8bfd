// uwarp-perf: bandwidth, message rate and latency of Send, RDMA Write and RDMA Read over uwarp,
// between two processes (server, client) or both ends in one (loopback).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>

#include "audit.h"
#include "runner.h"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

// --audit, at exit (every context closed): the process must be back to the threads and fds it
// had at the start; the progress threads of closed contexts are given up to 1 s to be gone.
// Returns the exit status: 3 if this or an earlier audit failed, else `rc`.
int finish_audit(const uwarp::perf::ProcessCensus& start, const char* role, int rc) {
  using namespace uwarp::perf;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  ProcessCensus now = ProcessCensus::take();
  while ((now.threads != start.threads || now.fds != start.fds) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = ProcessCensus::take();
  }
  const bool same = now.threads == start.threads && now.fds == start.fds && now.fds >= 0;
  std::fprintf(stderr, "uwarp-perf %s: audit: at exit %d thread(s) and %d fd(s), at start %d and %d%s\n", role,
               now.threads, now.fds, start.threads, start.fds, same ? "" : ": LEAKED");
  if (!same) audit_verdict().failed = true;
  return audit_verdict().failed ? 3 : rc;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace uwarp::perf;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      print_usage(stdout);
      return 0;
    }
  }
  auto options = parse_options(argc, argv);
  if (!options) return 2;
  const Options& o = *options;
  const ProcessCensus at_start = o.audit ? ProcessCensus::take() : ProcessCensus{};

  if (o.mode == Mode::kServer) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    const int rc = o.tcp ? run_tcp_server(o, g_stop, nullptr) : run_server(o, g_stop, nullptr);
    return o.audit ? finish_audit(at_start, "server", rc) : rc;
  }

  std::vector<SizeResult> results;
  bool ok = false;
  if (o.mode == Mode::kClient) {
    ok = o.tcp ? run_tcp_client(o, results) : run_client(o, results);
  } else {
    // Loopback: a server on 127.0.0.1 in a thread (uwarp: with its own context, so its own
    // progress thread).
    Options server = o;
    server.mode = Mode::kLoopback;
    server.addr = "127.0.0.1";
    server.port = o.port;  // 0: any free port
    std::atomic<int> port{-1};
    std::atomic<bool> stop{false};
    std::atomic<int> server_rc{0};
    std::thread t([&] {
      server_rc = o.tcp ? run_tcp_server(server, stop, &port) : run_server(server, stop, &port);
    });
    while (port.load() < 0 && server_rc.load() == 0) std::this_thread::yield();
    Options client = o;
    client.host = "127.0.0.1";
    client.port = static_cast<std::uint16_t>(port.load());
    ok = port.load() > 0 && (o.tcp ? run_tcp_client(client, results) : run_client(client, results));
    stop = true;
    t.join();
  }
  if (o.json) {
    print_json(results);
  } else {
    print_table(results, o.verify);
  }
  std::fflush(stdout);
  return o.audit ? finish_audit(at_start, "client", ok ? 0 : 1) : ok ? 0 : 1;
}
