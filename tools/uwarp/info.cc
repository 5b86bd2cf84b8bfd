// `uwarp info`: the device as uwarp presents it to a program started now, in this environment:
// version, I/O backend, limits, the MPA parameters a connection asks for by default, and the
// environment variables that change them.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "api/impl.h"
#include "cm/connect_options.h"
#include "commands.h"
#include "io/socket.h"
#include "json.h"
#include "runtime/engine.h"
#include "uwarp/cm.h"
#include "uwarp/verbs.h"

#ifndef UWARP_VERSION_STRING
#define UWARP_VERSION_STRING "unknown"
#endif

namespace uwarp::tool {
namespace {

void info_usage(std::FILE* out) {
  std::fputs(
      "usage: uwarp info [--json]\n"
      "Opens the device as a program would now (this environment: UWARP_IO, UWARP_SEND_BUDGET,\n"
      "...) and shows what uwarp presents: version, I/O backend (io_uring or epoll), limits,\n"
      "the MPA parameters a connection asks for by default, and the environment that changes\n"
      "them.\n"
      "  --json      one JSON object instead of text\n"
      "  -h, --help  this text\n",
      out);
}

struct Limit {
  const char* name;
  std::uint64_t value;
};

// The environment variables uwarp reads, with what each changes.
struct Variable {
  const char* name;
  const char* what;
};
constexpr Variable kVariables[] = {
    {"UWARP_IO", "I/O backend: epoll instead of io_uring"},
    {"UWARP_SEND_BUDGET", "bytes the streams of a device may leave unsent in TCP (0: no bound)"},
    {"UWARP_SPIN_US", "progress thread spins this long before it sleeps"},
    {"UWARP_PROGRESS_THREADS", "progress threads per device (default: one per 4 CPUs)"},
    {"UWARP_POLL_HANDOFF_US", "busy-polling hand-off (0: off)"},
    {"UWARP_POLL_YIELD", "0: an empty poll never yields to a busy progress thread"},
    {"UWARP_TCP_USER_TIMEOUT_MS", "liveness bound of every connection"},
    {"UWARP_MPA", "MPA choices of rdma_cm connections (uwarp-run --mpa)"},
    {"UWARP_STATS", "0: no statistics file (uwarp stat)"},
    {"UWARP_STATS_QPS", "QP slots in the statistics file"},
    {"UWARP_PCAP", "capture file of the traffic (uwarp trace)"},
};

}  // namespace

int info_main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      info_usage(stdout);
      return 0;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    std::fprintf(stderr, "uwarp info: unknown argument '%s'\n", argv[i]);
    info_usage(stderr);
    return 2;
  }
  // This look at the device is not a process using uwarp: no statistics file for it.
  const char* stats_setting = std::getenv("UWARP_STATS");
  const std::string stats_value = stats_setting != nullptr ? stats_setting : "";
  const bool stats_set = stats_setting != nullptr;
  ::setenv("UWARP_STATS", "0", 1);
  const auto variable = [&](const char* name) -> const char* {
    if (std::strcmp(name, "UWARP_STATS") == 0) return stats_set ? stats_value.c_str() : nullptr;
    return std::getenv(name);
  };
  Result<Context> ctx = Context::open();
  if (!ctx) {
    std::fprintf(stderr, "uwarp info: cannot open the device: %s\n",
                 ctx.error().to_string().c_str());
    return 1;
  }
  const auto& impl = detail::Access::impl(*ctx);
  const std::string backend(impl->engines.control().backend().name());
  const std::size_t budget = runtime::Engine::default_send_budget();
  const std::size_t progress_threads = impl->engines.size();
  const DeviceLimits& l = ctx->limits();
  const Limit limits[] = {
      {"max_qp", l.max_qp},
      {"max_qp_wr", l.max_qp_wr},
      {"max_sge", l.max_sge},
      {"max_sge_rd", l.max_sge_rd},
      {"max_cq", l.max_cq},
      {"max_cqe", l.max_cqe},
      {"max_mr", l.max_mr},
      {"max_mr_size", l.max_mr_size},
      {"max_pd", l.max_pd},
      {"max_qp_rd_atom", l.max_qp_rd_atom},
      {"max_qp_init_rd_atom", l.max_qp_init_rd_atom},
      {"max_srq", l.max_srq},
      {"max_srq_wr", l.max_srq_wr},
      {"max_srq_sge", l.max_srq_sge},
      {"max_inline_data", l.max_inline_data},
      {"max_msg_size", l.max_msg_size},
      {"max_private_data", l.max_private_data},
  };
  const ConnectionParams mpa;  // what a connection asks for unless told otherwise
  const std::uint32_t liveness = io::liveness_bound_ms();
  const long long spin = runtime::Engine::default_spin().count();
  const cm::ConnectOptions connect;

  if (json) {
    Json j;
    j.begin_object();
    j.field("device", "uwarp0").field("transport", "iWARP").field("version", UWARP_VERSION_STRING);
    j.field("io_backend", backend).field("send_budget", std::uint64_t{budget});
    j.field("progress_threads", std::uint64_t{progress_threads});
    j.field("spin_us", static_cast<std::uint64_t>(spin)).field("tcp_user_timeout_ms", liveness);
    j.begin_object("limits");
    for (const Limit& x : limits) j.field(x.name, x.value);
    j.end_object();
    j.begin_object("mpa_defaults");
    j.field("revision", std::uint32_t{mpa.mpa_revision}).field("crc", mpa.crc);
    j.field("markers", mpa.markers).field("peer_to_peer", mpa.peer_to_peer);
    j.field("ird", std::uint32_t{mpa.ird}).field("ord", std::uint32_t{mpa.ord});
    j.field("reply_timeout_ms", static_cast<std::uint64_t>(connect.mpa_timeout.count()));
    j.end_object();
    j.begin_object("environment");
    for (const Variable& v : kVariables) {
      if (const char* value = variable(v.name); value != nullptr) j.field(v.name, value);
    }
    j.end_object();
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }

  std::printf("device       uwarp0 (iWARP, in user space)\n");
  std::printf("version      %s\n", UWARP_VERSION_STRING);
  std::printf("I/O backend  %s\n", backend.c_str());
  std::printf("progress     %zu thread%s\n", progress_threads, progress_threads == 1 ? "" : "s");
  if (budget == 0)
    std::printf("send budget  none (each socket keeps the kernel's default)\n");
  else
    std::printf("send budget  %zu bytes per device\n", budget);
  std::printf("spin         %lld us\n", spin);
  if (liveness == 0)
    std::printf("liveness     the kernel's defaults\n");
  else
    std::printf("liveness     %u ms (TCP_USER_TIMEOUT and keepalive)\n", liveness);
  std::printf("\nlimits\n");
  for (const Limit& x : limits)
    std::printf("  %-22s %llu\n", x.name, static_cast<unsigned long long>(x.value));
  std::printf("\nMPA defaults (a connection's, unless it asks otherwise)\n");
  std::printf("  %-22s %u\n", "revision", unsigned{mpa.mpa_revision});
  std::printf("  %-22s %s\n", "crc", mpa.crc ? "asked" : "not asked (used if the peer asks)");
  std::printf("  %-22s %s\n", "markers",
              mpa.markers ? "asked" : "not asked (sent if the peer asks)");
  std::printf("  %-22s %s\n", "peer-to-peer", mpa.peer_to_peer ? "yes" : "no");
  std::printf("  %-22s %u / %u\n", "IRD / ORD", unsigned{mpa.ird}, unsigned{mpa.ord});
  std::printf("  %-22s %lld ms\n", "reply timeout",
              static_cast<long long>(connect.mpa_timeout.count()));
  std::printf("\nenvironment\n");
  for (const Variable& v : kVariables) {
    const char* value = variable(v.name);
    std::printf("  %-26s %-10s %s\n", v.name, value != nullptr ? value : "(unset)", v.what);
  }
  return 0;
}

}  // namespace uwarp::tool
