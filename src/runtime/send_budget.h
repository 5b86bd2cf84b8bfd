// The send budget: how much data the streams of one engine may leave unsent in their sockets'
// send buffers, shared out among them as each socket's TCP_NOTSENT_LOWAT. What a stream cannot
// hand to TCP waits in its send queue, in the application's registered memory, as it would on
// an RNIC with a finite transmit queue; a work request still completes once TCP has all of it.
//
// Why: without a bound TCP takes up to a send buffer (4 MiB by default) of every stream's posted
// data, and with many streams and deep send queues the receiving end falls behind, its windows
// close, and each receive that opens one runs the sender's transmission too (loopback, veth).
// 1000 QPs with 64 Writes of 64 KiB posted on each: 12-16 Gb/s without, 28-33 Gb/s with the
// budget (docs/performance.md, "The send budget"; docs/threading.md).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>

namespace uwarp::runtime {

// The default budget of one engine (UWARP_SEND_BUDGET overrides it; 0 turns the bound off).
// Measured against 8 MiB, where one or two streams are not bounded at all: 64 KiB Writes
// between namespaces (one QP and uwarp-perf's control QP, 1 MiB each) gained a third, the other
// single-QP rows stayed within their spread; 512 KiB took a third off 1 MiB Writes on loopback.
inline constexpr std::size_t kSendBudget = std::size_t{2} << 20;
// No stream's share goes below this: the best of the fixed bounds measured with 1000 QPs
// (32 KiB to 256 KiB); smaller ones were not tried.
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
