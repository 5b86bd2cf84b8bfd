// uwarp-perf --audit: what a run leaves behind. Every work request posted is accounted for
// exactly once (WorkLedger), and the process ends with the threads and file descriptors it
// started with (ProcessCensus).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "uwarp/uwarp.h"

namespace uwarp::perf {

// The posted work requests of one endpoint, queue by queue (a queue: the send or the receive
// queue of one QP, named by the caller's key), against the completions polled for them.
//
// Contract checked: each queue completes its requests in posting order (verbs); a signaled
// request gets exactly one completion; an unsignaled one gets one only in error (a flush
// included), and otherwise succeeded once a later request of its queue completed. The ledger
// stamps a sequence number into the low 24 bits of each wr_id (ids must leave them zero), so a
// completion names the request it is for.
class WorkLedger {
 public:
  static constexpr std::uint64_t kSeqMask = 0xFFFFFF;

  // Records a posted request of `queue`; returns its wr_id with the sequence number stamped in.
  std::uint64_t posted(std::uint64_t queue, std::uint64_t wr_id, bool signaled);
  // Takes back the last request recorded for `queue` (the post of it failed).
  void unposted(std::uint64_t queue);
  // Accounts for one completion of `queue`.
  void completed(std::uint64_t queue, const WorkCompletion& wc);

  // Requests still expecting a completion (signaled ones, in any queue).
  std::uint64_t awaiting() const { return awaiting_signaled_; }
  std::uint64_t posted_count() const { return posted_; }
  // One line: posted, completed successfully, in error, flushed, unsignaled without a
  // completion, and the problems found (completions for no outstanding request, signaled
  // requests passed over, signaled requests never completed), if any.
  std::string summary() const;
  // No problem found and no signaled request left without its completion.
  bool balanced() const { return problems_ == 0 && awaiting_signaled_ == 0; }

 private:
  struct Entry {
    std::uint32_t seq;
    bool signaled;
  };
  struct Queue {
    std::deque<Entry> outstanding;
    std::uint32_t next_seq = 0;
  };
  void problem(std::string what);

  std::unordered_map<std::uint64_t, Queue> queues_;
  std::uint64_t posted_ = 0;
  std::uint64_t success_ = 0;
  std::uint64_t errors_ = 0;
  std::uint64_t flushed_ = 0;
  std::uint64_t silent_ = 0;  // unsignaled, succeeded (a later completion of its queue says so)
  std::uint64_t awaiting_signaled_ = 0;
  std::uint64_t problems_ = 0;
  std::vector<std::string> first_problems_;  // the first few, for the summary
};

// The threads and open file descriptors of this process (/proc/self/task, /proc/self/fd).
struct ProcessCensus {
  int threads = -1;
  int fds = -1;
  static ProcessCensus take();
};

}  // namespace uwarp::perf
