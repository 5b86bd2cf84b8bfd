// What a stream writes into its QP's statistics slot (stats/layout.h) besides what the QP and
// the transmitter count themselves: the bytes and FPDUs received (published from the receiver's
// and the engine's running totals after each receive), the connection's addresses, and TCP_INFO
// (round-trip time, congestion window, retransmits), sampled every kTcpInfoPeriod on the engine
// thread and once more as the stream lets go of its QP: not per FPDU.
//
// Lock: the stream mutex for every call (it serializes the TCP_INFO writes, whose one writer
// is the stream); received() also the QP lock (the counters' writer, stats/count.h).
#pragma once

#include <chrono>
#include <cstdint>

#include "stats/count.h"
#include "verbs/queue_pair.h"

namespace uwarp::runtime {

class StreamStats {
 public:
  static constexpr std::chrono::seconds kTcpInfoPeriod{1};

  // The stream starts on `fd` (connected): its addresses, and a first TCP_INFO sample.
  void connected(verbs::QueuePair& qp, int fd);
  // Receive totals of this connection so far: what is new since the last call is added.
  void received(verbs::QueuePair& qp, std::uint64_t bytes, std::uint64_t fpdus) {
    stats::Counters& c = qp.counters();
    stats::add(c, stats::Counter::kRxBytes, bytes - bytes_);
    stats::add(c, stats::Counter::kRxFpdus, fpdus - fpdus_);
    bytes_ = bytes;
    fpdus_ = fpdus;
  }
  // TCP_INFO into the slot.
  void sample_tcp(verbs::QueuePair& qp, int fd);

 private:
  std::uint64_t bytes_ = 0;
  std::uint64_t fpdus_ = 0;
  std::uint64_t retrans_base_ = 0;  // the QP's count when this connection began
};

}  // namespace uwarp::runtime
