// Command-line options of uwarp-perf.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tcp_placer.h"

namespace uwarp::perf {

enum class Mode { kServer, kClient, kLoopback };
enum class Op { kSend, kWrite, kRead };
const char* to_string(Op op);

inline constexpr std::uint32_t kMaxPostList = 64;

struct Options {
  Mode mode = Mode::kLoopback;
  std::string addr = "0.0.0.0";    // server: listen address
  std::string host = "127.0.0.1";  // client: server address
  std::uint16_t port = 18515;
  Op op = Op::kWrite;
  std::vector<std::uint32_t> sizes{65536};
  std::uint32_t iters = 0;  // 0: chosen per size (about 256 MiB or 20000 messages)
  std::uint32_t qps = 1;
  std::uint32_t depth = 0;  // outstanding WRs per QP; 0: chosen per size
  std::uint32_t post_list = 1;  // bandwidth runs: WRs per post_send (one list post)
  bool block = false;  // bandwidth runs: both ends wait on their completion channel, no polling
  bool crc = false;
  std::uint32_t fpdu_size = 0;  // ConnectionParams::fpdu_size of every connection (0: the MSS)
  bool verify = false;
  bool json = false;
  bool progress = true;
  bool latency = true;  // client: after each bandwidth run, the ping-pong (--no-latency: none)
  bool once = false;  // server: exit after one client
  bool tcp = false;   // the raw TCP baseline instead of uwarp
  Placer placer = Placer::kNone;  // --tcp: who receives the ping-pong (tcp_placer.h)
  bool framed = false;  // --tcp: the stream as FPDU-shaped frames (tcp_frames.h)
  bool shared_buffer = false;  // one buffer for all data QPs (protocol.h: kHelloSharedBuffer)
  bool audit = false;  // account for every work request, threads and fds at exit (audit.h)
  std::uint32_t hold_s = 0;  // client: seconds the connections stay open after the runs
};

// Parses argv; on error prints usage to stderr and returns nullopt.
std::optional<Options> parse_options(int argc, char** argv);
// The usage text; uwarp-perf --help prints it to stdout, a usage error to stderr.
void print_usage(std::FILE* out = stderr);

}  // namespace uwarp::perf
