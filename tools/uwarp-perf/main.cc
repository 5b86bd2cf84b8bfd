// uwarp-perf: bandwidth, message rate and latency of Send, RDMA Write and RDMA Read over uwarp,
// between two processes (server, client) or both ends in one (loopback).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "runner.h"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace uwarp::perf;
  auto options = parse_options(argc, argv);
  if (!options) return 2;
  const Options& o = *options;

  if (o.mode == Mode::kServer) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    return o.tcp ? run_tcp_server(o, g_stop, nullptr) : run_server(o, g_stop, nullptr);
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
  return ok ? 0 : 1;
}
