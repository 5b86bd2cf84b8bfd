// `uwarp stat`: the counters of running processes that use uwarp, read from their statistics
// files (src/stats/snapshot.h; format: docs/statistics.md) without disturbing them.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "commands.h"
#include "json.h"
#include "stats/snapshot.h"
#include "wire/rdmap.h"

namespace uwarp::tool {
namespace {

using stats::Counter;
using stats::CounterValues;
using stats::Snapshot;

void stat_usage(std::FILE* out) {
  std::fputs(
      "usage: uwarp stat [PID] [-i SECONDS] [-n COUNT] [--json]\n"
      "The counters of a running process that uses uwarp (its statistics file, readable by the\n"
      "same user, no root), per device and per QP: bytes and FPDUs each way, work requests\n"
      "posted by opcode, completions by status, Terminates by code, CRC errors, send-budget\n"
      "stalls, and TCP_INFO (RTT, congestion window, retransmits, sampled every second).\n"
      "Without PID: the processes that use uwarp (files of processes that are gone are removed).\n"
      "  -i SECONDS  refresh every SECONDS (decimals allowed), showing rates per second, as top\n"
      "  -n COUNT    with -i: stop after COUNT refreshes (default: until interrupted)\n"
      "  --json      one snapshot as JSON (counters since the process opened the device)\n"
      "  -h, --help  this text\n"
      "Exit status: 0 success, 1 no such process (or unreadable statistics), 2 usage error.\n",
      out);
}

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

std::string bytes_text(double n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (n >= 1024 && u < 4) {
    n /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

std::string count_text(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else if (n >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fk", n / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

std::uint64_t sum(const CounterValues& v, Counter from, Counter to) {
  std::uint64_t s = 0;
  for (auto i = static_cast<std::size_t>(from); i <= static_cast<std::size_t>(to); ++i)
    s += v.value[i];
  return s;
}
std::uint64_t posted(const CounterValues& v) {
  return sum(v, Counter::kPostedSend, Counter::kPostedSwap) + v[Counter::kPostedRecv];
}
std::uint64_t completed(const CounterValues& v) {
  return sum(v, Counter::kCompletedSuccess, Counter::kCompletedMemoryWindowBindError);
}
std::uint64_t failed(const CounterValues& v) {
  return completed(v) - v[Counter::kCompletedSuccess];
}

void counters_json(Json& j, std::string_view key, const CounterValues& v) {
  j.begin_object(key);
  for (std::size_t i = 0; i < stats::kCounterCount; ++i) {
    const auto c = static_cast<Counter>(i);
    j.field(stats::counter_name(c), v[c]);
  }
  j.end_object();
}

std::string terminate_name(const stats::TerminateValues& t) {
  return wire::describe(
      wire::TerminateCode{static_cast<wire::TermLayer>(t.layer), t.etype, t.ecode});
}

std::string snapshot_json(const Snapshot& s) {
  Json j;
  j.begin_object();
  j.field("pid", static_cast<int>(s.pid)).field("program", s.program);
  j.field("library_version", s.library_version).field("format_version", s.version);
  j.field("qp_slots", s.qp_slots);
  j.begin_array("devices");
  for (const auto& d : s.devices) {
    j.begin_object();
    j.field("index", d.index).field("name", d.name).field("io_backend", d.io_backend);
    j.field("send_budget", d.send_budget);
    j.field("qps_created", d.qps_created).field("qps_destroyed", d.qps_destroyed);
    j.field("qps_live", d.qps_created - d.qps_destroyed);
    j.field("qps_without_slot", d.qps_without_slot);
    j.field("terminate_codes_lost", d.terminate_codes_lost);
    counters_json(j, "counters", d.totals);
    j.begin_array("terminates");
    for (const auto& t : d.terminates) {
      j.begin_object();
      j.field("layer", std::uint32_t{t.layer}).field("etype", std::uint32_t{t.etype});
      j.field("ecode", std::uint32_t{t.ecode}).field("name", terminate_name(t));
      j.field("sent", t.sent).field("received", t.received);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.begin_array("qps");
  for (const auto& q : s.qps) {
    j.begin_object();
    j.field("device", q.device).field("qp_num", q.qp_num).field("connections", q.connections);
    j.field("local", q.local).field("peer", q.peer);
    j.begin_object("tcp");
    j.field("state", q.tcp_state).field("rtt_us", q.tcp_rtt_us).field("rttvar_us", q.tcp_rttvar_us);
    j.field("snd_cwnd", q.tcp_snd_cwnd);
    j.end_object();
    counters_json(j, "counters", q.counters);
    j.end_object();
  }
  j.end_array();
  j.end_object();
  return j.str();
}

// Rates: the difference of two snapshots' counters per second (gauges keep their value).
CounterValues per_second(const CounterValues& now, const CounterValues* before, double seconds) {
  if (before == nullptr) return now;
  CounterValues r = now;
  for (std::size_t i = 0; i < stats::kCounterCount; ++i) {
    const auto c = static_cast<Counter>(i);
    if (!stats::counter_is_rate(c)) continue;
    const std::uint64_t b = (*before)[c];
    r[c] = now[c] >= b ? static_cast<std::uint64_t>(static_cast<double>(now[c] - b) / seconds) : 0;
  }
  return r;
}

// "  GROUP<per>:" and " NAME VALUE" for each nonzero counter of [first, last], NAME its
// counter_name without "GROUP_".
void print_nonzero(const CounterValues& v, std::string_view group, Counter first, Counter last,
                   const char* per) {
  std::string line = "  " + std::string(group) + per + ":";
  for (auto c = first; c <= last; c = static_cast<Counter>(static_cast<int>(c) + 1)) {
    if (v[c] != 0)
      line += " " + std::string(stats::counter_name(c).substr(group.size() + 1)) + " " +
              count_text(static_cast<double>(v[c]));
  }
  std::printf("%s\n", line.c_str());
}

void print_device(const stats::DeviceSnapshot& d, const CounterValues& v, bool rates) {
  std::printf(
      "device %u %s  I/O %s  send budget %s  QPs %llu live (%llu created, %llu without a slot)\n",
      d.index, d.name.c_str(), d.io_backend.empty() ? "?" : d.io_backend.c_str(),
      d.send_budget == 0 ? "none" : bytes_text(d.send_budget).c_str(),
      static_cast<unsigned long long>(d.qps_created - d.qps_destroyed),
      static_cast<unsigned long long>(d.qps_created),
      static_cast<unsigned long long>(d.qps_without_slot));
  const char* per = rates ? "/s" : "";
  std::printf("  tx %s%s in %s FPDUs%s   rx %s%s in %s FPDUs%s\n",
              bytes_text(static_cast<double>(v[Counter::kTxBytes])).c_str(), per,
              count_text(static_cast<double>(v[Counter::kTxFpdus])).c_str(), per,
              bytes_text(static_cast<double>(v[Counter::kRxBytes])).c_str(), per,
              count_text(static_cast<double>(v[Counter::kRxFpdus])).c_str(), per);
  print_nonzero(v, "posted", Counter::kPostedSend, Counter::kPostedRecv, per);
  print_nonzero(v, "completed", Counter::kCompletedSuccess,
                Counter::kCompletedMemoryWindowBindError, per);
  std::printf(
      "  Terminates sent %llu, received %llu; CRC errors %llu; send stalls %llu%s; TCP retransmits "
      "%llu\n",
      static_cast<unsigned long long>(d.totals[Counter::kTerminatesSent]),
      static_cast<unsigned long long>(d.totals[Counter::kTerminatesReceived]),
      static_cast<unsigned long long>(d.totals[Counter::kCrcErrors]),
      static_cast<unsigned long long>(v[Counter::kSendStalls]), per,
      static_cast<unsigned long long>(d.totals[Counter::kTcpRetransmits]));
  for (const auto& t : d.terminates)
    std::printf("    %s (layer %u, etype %u, ecode 0x%02x): sent %llu, received %llu\n",
                terminate_name(t).c_str(), unsigned{t.layer}, unsigned{t.etype}, unsigned{t.ecode},
                static_cast<unsigned long long>(t.sent),
                static_cast<unsigned long long>(t.received));
}

void print_snapshot(const Snapshot& s, const Snapshot* before, double seconds) {
  const bool rates = before != nullptr;
  std::printf("process %d (%s), uwarp %s%s\n", static_cast<int>(s.pid), s.program.c_str(),
              s.library_version.c_str(),
              rates ? "  - rates per second" : "  - totals since the device opened");
  for (const auto& d : s.devices) {
    const CounterValues* prev = nullptr;
    if (before != nullptr)
      for (const auto& b : before->devices)
        if (b.index == d.index) prev = &b.totals;
    print_device(d, per_second(d.totals, prev, seconds), rates);
  }
  if (s.devices.empty()) std::printf("no device open\n");
  if (s.qps.empty()) return;
  std::printf("\n%-4s %-7s %-22s %10s %10s %8s %8s %8s %9s %6s %6s %7s %7s\n", "dev", "QP", "peer",
              "tx bytes", "rx bytes", "tx FPDU", "rx FPDU", "posted", "completed", "errors",
              "stalls", "rtt us", "retrans");
  for (const auto& q : s.qps) {
    const CounterValues* prev = nullptr;
    if (before != nullptr)
      for (const auto& b : before->qps)
        if (b.qp_num == q.qp_num && b.device == q.device && b.created_ns == q.created_ns)
          prev = &b.counters;
    const CounterValues v = per_second(q.counters, prev, seconds);
    std::printf("%-4u %-7u %-22s %10s %10s %8s %8s %8s %9s %6s %6s %7u %7llu\n", q.device, q.qp_num,
                q.peer.empty() ? "-" : q.peer.c_str(),
                bytes_text(static_cast<double>(v[Counter::kTxBytes])).c_str(),
                bytes_text(static_cast<double>(v[Counter::kRxBytes])).c_str(),
                count_text(static_cast<double>(v[Counter::kTxFpdus])).c_str(),
                count_text(static_cast<double>(v[Counter::kRxFpdus])).c_str(),
                count_text(static_cast<double>(posted(v))).c_str(),
                count_text(static_cast<double>(completed(v))).c_str(),
                count_text(static_cast<double>(failed(q.counters))).c_str(),
                count_text(static_cast<double>(v[Counter::kSendStalls])).c_str(), q.tcp_rtt_us,
                static_cast<unsigned long long>(q.counters[Counter::kTcpRetransmits]));
  }
}

int list(bool json) {
  const std::vector<stats::ProcessFileInfo> procs = stats::list_processes(/*remove_stale=*/true);
  if (json) {
    Json j;
    j.begin_array();
    for (const auto& p : procs) {
      Expected<Snapshot, std::string> s = stats::read_process(p.pid);
      if (!s) continue;
      CounterValues total;
      std::uint64_t live = 0;
      for (const auto& d : s->devices) {
        total += d.totals;
        live += d.qps_created - d.qps_destroyed;
      }
      j.begin_object();
      j.field("pid", static_cast<int>(p.pid)).field("program", s->program);
      j.field("devices", static_cast<std::uint64_t>(s->devices.size())).field("qps_live", live);
      j.field("tx_bytes", total[Counter::kTxBytes]).field("rx_bytes", total[Counter::kRxBytes]);
      j.end_object();
    }
    j.end_array();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  if (procs.empty()) {
    std::printf(
        "no process of this user is using uwarp (or each was started with UWARP_STATS=0)\n");
    return 0;
  }
  std::printf("%-8s %-16s %7s %7s %12s %12s\n", "PID", "program", "devices", "QPs", "tx bytes",
              "rx bytes");
  for (const auto& p : procs) {
    Expected<Snapshot, std::string> s = stats::read_process(p.pid);
    if (!s) {
      std::printf("%-8d %-16s (%s)\n", static_cast<int>(p.pid), p.program.c_str(),
                  s.error().c_str());
      continue;
    }
    CounterValues total;
    std::uint64_t live = 0;
    for (const auto& d : s->devices) {
      total += d.totals;
      live += d.qps_created - d.qps_destroyed;
    }
    std::printf("%-8d %-16s %7zu %7llu %12s %12s\n", static_cast<int>(p.pid), s->program.c_str(),
                s->devices.size(), static_cast<unsigned long long>(live),
                bytes_text(static_cast<double>(total[Counter::kTxBytes])).c_str(),
                bytes_text(static_cast<double>(total[Counter::kRxBytes])).c_str());
  }
  return 0;
}

}  // namespace

int stat_main(int argc, char** argv) {
  std::optional<pid_t> pid;
  double interval = 0;
  long count = -1;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      stat_usage(stdout);
      return 0;
    }
    if (a == "--json") {
      json = true;
    } else if (a == "-i" || a == "--interval") {
      const char* v = value();
      char* end = nullptr;
      interval = v != nullptr ? std::strtod(v, &end) : 0;
      if (v == nullptr || *end != '\0' || !(interval > 0) || interval > 86400) {
        std::fprintf(stderr, "uwarp stat: -i needs a number of seconds above 0\n");
        return 2;
      }
    } else if (a == "-n" || a == "--count") {
      const char* v = value();
      char* end = nullptr;
      count = v != nullptr ? std::strtol(v, &end, 10) : 0;
      if (v == nullptr || *end != '\0' || count <= 0) {
        std::fprintf(stderr, "uwarp stat: -n needs a count above 0\n");
        return 2;
      }
    } else if (!a.empty() && a.find_first_not_of("0123456789") == std::string_view::npos && !pid) {
      pid = static_cast<pid_t>(std::strtol(argv[i], nullptr, 10));
    } else {
      std::fprintf(stderr, "uwarp stat: unknown argument '%s'\n", argv[i]);
      stat_usage(stderr);
      return 2;
    }
  }
  if (!pid) return list(json);

  Expected<Snapshot, std::string> first = stats::read_process(*pid);
  if (!first) {
    std::fprintf(stderr, "uwarp stat: %s\n", first.error().c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", snapshot_json(*first).c_str());
    return 0;
  }
  if (interval == 0) {
    print_snapshot(*first, nullptr, 0);
    return 0;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  Snapshot before = std::move(*first);
  if (tty) std::printf("\x1b[H\x1b[2J");
  print_snapshot(before, nullptr, 0);
  std::fflush(stdout);
  for (long shown = 0; count < 0 || shown < count; ++shown) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(interval);
    while (!g_stop.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (g_stop.load()) break;
    Expected<Snapshot, std::string> now = stats::read_process(*pid);
    if (!now) {
      std::printf("process %d: %s\n", static_cast<int>(*pid), now.error().c_str());
      return 0;
    }
    const double seconds = static_cast<double>(now->taken_ns - before.taken_ns) / 1e9;
    if (tty)
      std::printf("\x1b[H\x1b[2J");
    else
      std::printf("\n");
    print_snapshot(*now, &before, seconds > 0 ? seconds : interval);
    std::fflush(stdout);
    before = std::move(*now);
  }
  return 0;
}

}  // namespace uwarp::tool
