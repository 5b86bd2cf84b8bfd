// uwarp: the front door to uwarp, the user-space iWARP RNIC: what the device is (`uwarp info`),
// what running processes do with it (`uwarp stat`), and a capture of a program's traffic
// (`uwarp trace`). Manual: tools/uwarp/uwarp.1.
#include <cstdio>
#include <string_view>

#include "commands.h"

namespace {

void usage(std::FILE* out) {
  std::fputs(
      "usage: uwarp COMMAND [OPTIONS]\n"
      "The front door to uwarp, the user-space iWARP RNIC (device uwarp0).\n"
      "Commands:\n"
      "  info                       the device as uwarp presents it: limits, MPA defaults,\n"
      "                             I/O backend, version (--json)\n"
      "  stat [PID]                 counters of a running process using uwarp, per device and\n"
      "                             per QP (-i SECONDS: refreshing rates; --json); without PID,\n"
      "                             the processes using uwarp\n"
      "  trace -o FILE -- PROGRAM [ARGS...]\n"
      "                             runs PROGRAM through uwarp-run, capturing its traffic to\n"
      "                             FILE (pcap)\n"
      "  help [COMMAND]             this text, or a command's (also: uwarp COMMAND --help)\n"
      "Manual: man uwarp\n",
      out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace uwarp::tool;
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "help") {
    if (argc < 3) {
      usage(stdout);
      return 0;
    }
    cmd = argv[2];
    char help[] = "--help";
    char* args[] = {argv[2], help, nullptr};
    if (cmd == "info") return info_main(2, args);
    if (cmd == "stat") return stat_main(2, args);
    if (cmd == "trace") return trace_main(2, args);
    std::fprintf(stderr, "uwarp: no command '%s'\n", argv[2]);
    usage(stderr);
    return 2;
  }
  if (cmd == "info") return info_main(argc - 1, argv + 1);
  if (cmd == "stat") return stat_main(argc - 1, argv + 1);
  if (cmd == "trace") return trace_main(argc - 1, argv + 1);
  std::fprintf(stderr, "uwarp: no command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
