// The send budget: how much data the streams of one engine may leave unsent in their sockets'
// send buffers, shared out among them as each socket's TCP_NOTSENT_LOWAT. What a stream cannot
// hand to TCP waits in its send queue, in the application's registered memory, as it would on
// an RNIC with a finite transmit queue.
//
// Why (docs/performance.md, "Scale"): without a bound, TCP takes up to its send buffer's size
// (autotuned to 4 MiB here) of every stream's posted data. With many streams and deep send
// queues, the receiving end cannot keep up with all of them at once: its receive windows close,
// and each receive that opens one makes the kernel push the sender's queued data out in the
// receiver's own system call (on loopback and between namespaces the sender's transmission and
// the receiver's input processing then both run there), so the receiver slows down further and
// the kernel's receive autotuning, which grows a buffer only for a reader that keeps up, keeps
// the windows small. 1000 QPs with 64 Writes of 64 KiB posted on each reached 12-15 Gb/s, and
// 37-41 Gb/s once each stream's unsent data was bounded to 32 KiB. One stream keeps the whole
// budget, which is as much as its send buffer holds: a single stream is not held back.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>

namespace uwarp::runtime {

// The default budget of one engine (UWARP_SEND_BUDGET overrides it; 0 turns the bound off).
inline constexpr std::size_t kSendBudget = std::size_t{8} << 20;
// No stream's share goes below this: a share is at least one 64 KiB message in flight (TCP
// reports a socket writable again once its unsent data is below half its low-water mark).
inline constexpr std::size_t kMinNotsentLowat = std::size_t{32} << 10;

// The TCP_NOTSENT_LOWAT of each of `streams` streams that share `budget`: the budget divided
// among them, rounded down to a power of two (so that it changes, and each socket is told, at
// most a few times while connections come and go), and at least kMinNotsentLowat. 0 (leave the
// kernel's default) when the budget is 0.
constexpr std::size_t notsent_lowat(std::size_t budget, std::size_t streams) {
  if (budget == 0) return 0;
  const std::size_t share = budget / std::max<std::size_t>(streams, 1);
  return std::max(std::bit_floor(share), kMinNotsentLowat);
}

}  // namespace uwarp::runtime
