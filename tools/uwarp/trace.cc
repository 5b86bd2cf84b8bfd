// `uwarp trace -o FILE -- PROGRAM [ARGS...]`: runs PROGRAM through uwarp-run (the one next to
// this binary, as uwarp-run finds its libraries next to itself) with UWARP_PCAP=FILE, which
// makes uwarp write every frame PROGRAM's connections send and receive to FILE as a pcap
// capture (decoded by Wireshark's iWARP dissectors).
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"

namespace uwarp::tool {
namespace {

void trace_usage(std::FILE* out) {
  std::fputs(
      "usage: uwarp trace -o FILE [--mpa LIST] [--] PROGRAM [ARGS...]\n"
      "Runs PROGRAM over uwarp through uwarp-run (the one installed next to uwarp) with\n"
      "UWARP_PCAP=FILE in its environment: uwarp writes the traffic of PROGRAM's connections to\n"
      "FILE as a pcap capture, for Wireshark or tshark (their iWARP dissectors: MPA, DDP,\n"
      "RDMAP). PROGRAM may be an unmodified libibverbs/librdmacm program or one linked with\n"
      "uwarp's native library. Needs a uwarp whose library supports UWARP_PCAP; older ones\n"
      "run PROGRAM and write nothing.\n"
      "  -o FILE     the capture file (required)\n"
      "  --mpa LIST  passed to uwarp-run (MPA choices of rdma_cm connections)\n"
      "  -h, --help  this text\n"
      "Exit status: PROGRAM's; 2 usage error; 127 uwarp-run or its libraries not found.\n"
      "Example: uwarp trace -o /tmp/rping.pcap -- rping -c -a 127.0.0.1 -C 3\n",
      out);
}

// The directory of this executable (/proc/self/exe, symlinks resolved).
std::string own_directory() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<std::size_t>(n));
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

int trace_main(int argc, char** argv) {
  std::string output;
  std::string mpa;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      trace_usage(stdout);
      return 0;
    }
    if (a == "--") {
      ++i;
      break;
    }
    if ((a == "-o" || a == "--output") && i + 1 < argc) {
      output = argv[++i];
    } else if (a.starts_with("--output=")) {
      output = std::string(a.substr(9));
    } else if (a == "--mpa" && i + 1 < argc) {
      mpa = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "uwarp trace: unknown option '%s'\n", argv[i]);
      trace_usage(stderr);
      return 2;
    } else {
      break;  // PROGRAM
    }
  }
  if (output.empty() || i >= argc) {
    std::fprintf(stderr, "uwarp trace: %s\n",
                 output.empty() ? "-o FILE is required" : "no PROGRAM");
    trace_usage(stderr);
    return 2;
  }
  const std::string run = own_directory() + "/uwarp-run";
  if (::access(run.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "uwarp trace: %s: %s (uwarp-run is expected next to uwarp)\n", run.c_str(),
                 std::strerror(errno));
    return 127;
  }
  ::setenv("UWARP_PCAP", output.c_str(), 1);
  std::vector<char*> args;
  args.push_back(const_cast<char*>(run.c_str()));
  std::string mpa_flag = "--mpa";
  if (!mpa.empty()) {
    args.push_back(mpa_flag.data());
    args.push_back(mpa.data());
  }
  args.push_back(const_cast<char*>("--"));
  for (; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(run.c_str(), args.data());
  std::fprintf(stderr, "uwarp trace: cannot run %s: %s\n", run.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace uwarp::tool
