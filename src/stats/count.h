// Counting on the data path: the one writer of a counter adds to it with a relaxed load and
// store, no locked instruction. The writer of a QP's counters is whichever thread holds the QP
// lock (docs/threading.md), so one thread at a time, and the lock orders its writes.
#pragma once

#include <atomic>
#include <cstdint>

#include "stats/layout.h"
#include "uwarp/types.h"

namespace uwarp::stats {

inline void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline void add(Counters& counters, Counter which, std::uint64_t n = 1) {
  add(counters[which], n);
}

// A work request posted to a send queue: counted by opcode, and a Send with Solicited Event also
// as solicited.
inline void count_posted(Counters& counters, const SendWr& wr) {
  add(counters[static_cast<Counter>(static_cast<std::size_t>(Counter::kPostedSend) +
                                    static_cast<std::size_t>(wr.opcode))]);
  if ((wr.flags & send_flags::kSolicited) != 0 &&
      (wr.opcode == WrOpcode::kSend || wr.opcode == WrOpcode::kSendWithInvalidate))
    add(counters, Counter::kPostedSolicited);
}
// A completion, by status.
inline void count_completed(Counters& counters, WcStatus status) {
  add(counters[static_cast<Counter>(static_cast<std::size_t>(Counter::kCompletedSuccess) +
                                    static_cast<std::size_t>(status))]);
}

}  // namespace uwarp::stats
