#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace uwarp::perf {

const char* to_string(Op op) {
  switch (op) {
    case Op::kSend:
      return "send";
    case Op::kWrite:
      return "write";
    case Op::kRead:
      return "read";
  }
  return "?";
}

void print_usage(std::FILE* out) {
  std::fprintf(
      out,
      "uwarp-perf: bandwidth, message rate and latency of Send, RDMA Write and RDMA Read over\n"
      "uwarp (the user-space iWARP RNIC) between a server and a client, or both in one process.\n"
      "usage:\n"
      "  uwarp-perf --help\n"
      "  uwarp-perf server [--addr A] [--port P] [--once] [--tcp] [--audit] [--fpdu N]\n"
      "  uwarp-perf client HOST [--port P] --op send|write|read [--size N | --sizes a,b,c]\n"
      "                    [--iters K] [--qps Q] [--depth D] [--crc] [--verify] [--json] "
      "[--no-progress] [--tcp]\n"
      "                    [--placer thread|signal] [--framed]\n"
      "                    [--shared-buffer] [--post-list N] [--wait poll|block] [--audit]\n"
      "                    [--no-latency] [--hold S] [--fpdu N]\n"
      "  uwarp-perf loopback [client options]   both ends in this process, over 127.0.0.1\n"
      "--tcp: the raw TCP baseline instead of uwarp (same sizes; stream and ping-pong; with\n"
      "  --qps N, the stream over N connections, no ping-pong)\n"
      "--placer thread|signal: with --tcp, the ping-pong as ib_write_lat -R runs it: both ends\n"
      "  spin on memory, and a receiving thread (or a SIGIO handler on the spinning thread)\n"
      "  receives each message and places it there\n"
      "--framed: with --tcp and --no-latency, the stream's messages go as FPDUs of one TCP\n"
      "  segment each (length, DDP header, payload, pad, trailer), sent as uwarp sends\n"
      "  them and copied out of a buffer by the receiver: what framing alone costs over this TCP\n"
      "--shared-buffer: all data QPs use one buffer on each side (many QPs then touch the memory\n"
      "  of one; not with --verify)\n"
      "--post-list N: bandwidth runs post up to N requests at a time as one list (default 1)\n"
      "--wait poll|block: how both ends of a bandwidth run wait for completions: poll the CQ\n"
      "  (default, as perftest) or block on the completion channel (as a blocking TCP receive);\n"
      "  the latency runs always poll\n"
      "--no-latency: bandwidth runs only, no ping-pong after them (a path with a long round\n"
      "  trip makes the ping-pong of large messages take long); the TCP baseline then verifies\n"
      "  nothing (it checks the last echo)\n"
      "--audit: at the end, every QP is moved to ERROR and every work request posted must be\n"
      "  accounted for exactly once (a completion, or unsignaled and succeeded), and the process\n"
      "  must end with the threads and fds it started with; both are printed to stderr (the\n"
      "  server's per client); exit status 3 if anything is unaccounted for\n"
      "--fpdu N: this side sends FPDUs of up to N bytes (at most 65544) where the TCP MSS is\n"
      "  smaller, across segments (fewer, larger FPDUs; only towards software peers: uwarp, siw)\n"
      "--hold S: the client keeps its connections open S seconds (at most 600) after the runs,\n"
      "  before it says goodbye, so that `uwarp stat PID` sees its QPs and their counters\n"
      "exit status: 0 success; 1 a run failed (the cause on stderr; a server with --once: its\n"
      "  client's session failed); 2 usage; 3 the audit failed\n"
      "sizes accept K and M suffixes (4K, 1M).\n"
      "manual: man uwarp-perf\n");
}

namespace {

bool parse_u32(const char* s, std::uint32_t& out) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s) return false;
  if (*end == 'K' || *end == 'k') {
    v <<= 10;
    ++end;
  } else if (*end == 'M' || *end == 'm') {
    v <<= 20;
    ++end;
  }
  if (*end != '\0' || v > 0xFFFFFFFFull) return false;
  out = static_cast<std::uint32_t>(v);
  return true;
}

bool parse_sizes(const char* s, std::vector<std::uint32_t>& out) {
  out.clear();
  std::string all(s);
  std::size_t at = 0;
  while (at <= all.size()) {
    const std::size_t comma = all.find(',', at);
    const std::string part =
        all.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    std::uint32_t v;
    if (!parse_u32(part.c_str(), v)) return false;
    out.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return !out.empty();
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  if (argc < 2) {
    print_usage();
    return std::nullopt;
  }
  const std::string_view mode = argv[1];
  int i = 2;
  if (mode == "server") {
    o.mode = Mode::kServer;
  } else if (mode == "client") {
    o.mode = Mode::kClient;
    if (argc < 3 || argv[2][0] == '-') {
      std::fprintf(stderr, "uwarp-perf client: HOST missing\n");
      print_usage();
      return std::nullopt;
    }
    o.host = argv[2];
    i = 3;
  } else if (mode == "loopback") {
    o.mode = Mode::kLoopback;
    o.port = 0;
  } else {
    print_usage();
    return std::nullopt;
  }
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uwarp-perf: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    std::uint32_t v = 0;
    if (a == "--addr") {
      const char* s = value("--addr");
      if (!s) return std::nullopt;
      o.addr = s;
    } else if (a == "--port") {
      const char* s = value("--port");
      if (!s || !parse_u32(s, v) || v > 65535) return std::nullopt;
      o.port = static_cast<std::uint16_t>(v);
    } else if (a == "--op") {
      const char* s = value("--op");
      if (!s) return std::nullopt;
      const std::string_view op = s;
      if (op == "send")
        o.op = Op::kSend;
      else if (op == "write")
        o.op = Op::kWrite;
      else if (op == "read")
        o.op = Op::kRead;
      else {
        std::fprintf(stderr, "uwarp-perf: unknown --op %s\n", s);
        return std::nullopt;
      }
    } else if (a == "--size" || a == "--sizes") {
      const char* s = value("--sizes");
      if (!s || !parse_sizes(s, o.sizes)) {
        std::fprintf(stderr, "uwarp-perf: bad size list\n");
        return std::nullopt;
      }
    } else if (a == "--iters") {
      const char* s = value("--iters");
      if (!s || !parse_u32(s, o.iters) || o.iters == 0) return std::nullopt;
    } else if (a == "--qps") {
      const char* s = value("--qps");
      if (!s || !parse_u32(s, o.qps) || o.qps == 0 || o.qps > 1024) return std::nullopt;
    } else if (a == "--post-list") {
      const char* s = value("--post-list");
      if (!s || !parse_u32(s, o.post_list) || o.post_list == 0 || o.post_list > kMaxPostList) return std::nullopt;
    } else if (a == "--wait") {
      const char* s = value("--wait");
      if (s == nullptr || (std::string_view(s) != "poll" && std::string_view(s) != "block")) return std::nullopt;
      o.block = std::string_view(s) == "block";
    } else if (a == "--depth") {
      const char* s = value("--depth");
      if (!s || !parse_u32(s, o.depth) || o.depth == 0 || o.depth > 1024) return std::nullopt;
    } else if (a == "--crc") {
      o.crc = true;
    } else if (a == "--fpdu") {
      const char* s = value("--fpdu");
      if (!s || !parse_u32(s, o.fpdu_size) || o.fpdu_size > kMaxFpduSize) return std::nullopt;
    } else if (a == "--verify") {
      o.verify = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--no-progress") {
      o.progress = false;
    } else if (a == "--no-latency") {
      o.latency = false;
    } else if (a == "--once") {
      o.once = true;
    } else if (a == "--tcp") {
      o.tcp = true;
    } else if (a == "--framed") {
      o.framed = true;
    } else if (a == "--placer") {
      const char* s = value("--placer");
      const std::string_view placer = s ? s : "";
      if (placer == "thread") {
        o.placer = Placer::kThread;
      } else if (placer == "signal") {
        o.placer = Placer::kSignal;
      } else {
        std::fprintf(stderr, "uwarp-perf: --placer takes thread or signal\n");
        return std::nullopt;
      }
    } else if (a == "--audit") {
      o.audit = true;
    } else if (a == "--hold") {
      const char* s = value("--hold");
      if (!s || !parse_u32(s, o.hold_s) || o.hold_s > 600) return std::nullopt;
    } else if (a == "--shared-buffer") {
      o.shared_buffer = true;
    } else {
      std::fprintf(stderr, "uwarp-perf: unknown option %s\n", argv[i]);
      print_usage();
      return std::nullopt;
    }
  }
  if (o.placer != Placer::kNone && !o.tcp) {
    std::fprintf(stderr, "uwarp-perf: --placer belongs to the TCP baseline (--tcp)\n");
    return std::nullopt;
  }
  if (o.framed && (!o.tcp || o.latency || o.qps != 1)) {
    std::fprintf(stderr,
                 "uwarp-perf: --framed is a stream of the TCP baseline (--tcp --no-latency, "
                 "one connection)\n");
    return std::nullopt;
  }
  if (o.shared_buffer && o.verify) {
    std::fprintf(stderr, "uwarp-perf: --shared-buffer cannot be verified (QPs overwrite each other)\n");
    return std::nullopt;
  }
  for (std::uint32_t s : o.sizes) {
    if (s > (64u << 20)) {
      std::fprintf(stderr, "uwarp-perf: sizes are limited to 64M\n");
      return std::nullopt;
    }
  }
  return o;
}

}  // namespace uwarp::perf
