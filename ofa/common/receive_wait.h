// Receiver not ready through the OFA interfaces (docs/receiver-not-ready.md). On InfiniBand a
// receiver without a posted receive answers with an RNR NAK and the sender retries
// `rnr_retry` times (7: for ever), each after the receiver's `min_rnr_timer`. iWARP has no RNR
// NAK: uwarp's receiver holds its reception instead, for as long as those retries would have
// lasted. The QP's attributes (ibv_modify_qp, and rdma_conn_param.rnr_retry_count, which
// rdma_connect and rdma_accept apply) set QueuePair::set_receive_wait.
#pragma once

#include <chrono>
#include <cstdint>

#include "uwarp/verbs.h"

namespace uwarp::ofa {

// The InfiniBand RNR timer encoding (5 bits), in microseconds: 0 is the longest, 655.36 ms.
inline constexpr std::uint32_t kRnrTimerMicros[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

// How long uwarp's receiver waits for a receive: rnr_retry times the timer (rounded up to a
// whole millisecond), for ever for 7, not at all for 0.
inline std::chrono::milliseconds receive_wait_for(std::uint8_t rnr_retry, std::uint8_t min_rnr_timer) {
  if (rnr_retry >= 7) return QueuePair::kWaitForever;
  const std::uint64_t micros = std::uint64_t{rnr_retry} * kRnrTimerMicros[min_rnr_timer & 31];
  return std::chrono::milliseconds((micros + 999) / 1000);
}

}  // namespace uwarp::ofa
