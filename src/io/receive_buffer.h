// The receive buffer of a connection whose path is short (loopback, a host's namespaces, a rack).
//
// The kernel sizes a connection's receive buffer by what its receiver copied out per round trip,
// up to net.ipv4.tcp_rmem's maximum (the kernel's default 6 MiB, 32 MiB on some hosts). Where the
// receiver is the slower end, as a progress thread placing 1 MiB Writes on loopback, the queue
// then fills what it is given: up to 14.5 MB was sampled waiting there. By the time the receiver
// copies those bytes they have left the caches, both ends spend more per byte, and the connection
// settles in its slow mode (loopback 1 MiB Writes 42-53 Gb/s against 55-69 with the buffer below;
// docs/performance.md, "The receive queue of a short path").
//
// So a connection whose round trip, as TCP measured it while connecting, is below
// kShortPathRttUs gets a fixed receive buffer (SO_RCVBUF, which ends the autotuning): 4 MiB by
// default, twice the bandwidth-delay product of 100 Gb/s at that round trip. Only where
// net.core.rmem_max lets the socket have all of it: a smaller buffer could hold the window below
// what the path carries. Longer paths (the WAN) keep the kernel's autotuning.
// UWARP_TCP_SHORT_PATH_RCVBUF: bytes (K and M suffixes), read once per process; 0 leaves every
// connection to the kernel.
// Thread: any.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uwarp::io {

inline constexpr std::uint32_t kShortPathRttUs = 150;
inline constexpr std::size_t kDefaultShortPathReceiveBuffer = std::size_t{4} << 20;

// UWARP_TCP_SHORT_PATH_RCVBUF's value: unset, empty or malformed gives the default; at most
// 1 GiB.
std::size_t parse_short_path_receive_buffer(const char* value);
std::size_t short_path_receive_buffer();

// The SO_RCVBUF a connection with round trip `rtt_us` (0: not measured) gets where `rmem_max`
// is the most a socket may ask for and `wanted` the process's setting; 0 for none.
std::size_t short_path_rcvbuf(std::uint32_t rtt_us, std::size_t rmem_max, std::size_t wanted);

// net.core.rmem_max of the caller's network namespace; 0 if it cannot be read.
std::size_t rmem_max();

// Gives `fd` (a connected TCP socket whose round trip TCP measured as `rtt_us`) the fixed
// receive buffer of a short path, if short_path_rcvbuf() says so; true if it did.
bool bound_short_path_receive_buffer(int fd, std::uint32_t rtt_us);

}  // namespace uwarp::io
