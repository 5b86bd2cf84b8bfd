// UWARP_PCAP=FILE: every connection's TCP byte stream, as this process sent and received it (the
// MPA exchange, then every FPDU both ways), written to FILE as a pcap capture with synthesized
// Ethernet, IP and TCP headers (trace/tcp_flow.h) from the socket's real addresses and ports.
// A "%p" in FILE becomes the process id (several processes, one name). The file is made when
// the first traced bytes come; if it cannot be, one error says so and nothing is traced.
//
// Hooks: the places where bytes leave or enter a connection's socket call pcap_sent and
// pcap_received with exactly those bytes; Fd::reset calls pcap_closing before it closes an fd.
// When UWARP_PCAP is unset each hook is one relaxed load and a predictable branch.
//
// A connection whose both ends are in this process (uwarp-perf loopback) is traced once, by the
// end that sent first: the other end's bytes are the same bytes.
//
// Threads: any. One lock serializes the flows and the buffer of records; a writer thread writes
// the buffer to the file when it passes 1 MiB and at least every 200 ms (a killed process leaves a
// readable file up to then), and the rest at exit (atexit). A caller waits only while more than
// 16 MiB wait for the writer (the file cannot keep up): memory stays bounded and nothing is lost.
// A forked child traces nothing (the file is the parent's).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "base/bytes.h"

namespace uwarp::io {

namespace pcap_detail {
extern std::atomic<bool> enabled;
void sent(int fd, std::span<const iovec> iov, std::size_t n);
void sent(int fd, ConstByteSpan bytes);
void received(int fd, ConstByteSpan bytes);
void closing(int fd);
}  // namespace pcap_detail

// Whether this process traces (UWARP_PCAP was set when the library was loaded, and its file has
// not failed).
inline bool pcap_tracing() {
  return pcap_detail::enabled.load(std::memory_order_relaxed);
}

// The first n bytes of `iov` went to the socket `fd`.
inline void pcap_sent(int fd, std::span<const iovec> iov, std::size_t n) {
  if (pcap_tracing()) [[unlikely]]
    pcap_detail::sent(fd, iov, n);
}
inline void pcap_sent(int fd, ConstByteSpan bytes) {
  if (pcap_tracing()) [[unlikely]]
    pcap_detail::sent(fd, bytes);
}
// `bytes` came from the socket `fd`.
inline void pcap_received(int fd, ConstByteSpan bytes) {
  if (pcap_tracing()) [[unlikely]]
    pcap_detail::received(fd, bytes);
}
// `fd` is about to be closed: its flow ends (this end's FIN), and the number may be reused.
inline void pcap_closing(int fd) {
  if (pcap_tracing()) [[unlikely]]
    pcap_detail::closing(fd);
}

// The file name UWARP_PCAP's value `pattern` gives process `pid`: each "%p" becomes the pid,
// "%%" a "%".
std::string pcap_file_name(std::string_view pattern, long pid);

// Writes what is buffered to the file now (tests; exit does it too).
void pcap_flush();

}  // namespace uwarp::io
