#include "audit.h"

#include <dirent.h>

#include <cstdio>

#include "runner.h"

namespace uwarp::perf {
namespace {

constexpr std::size_t kProblemsShown = 4;

// Entries of a /proc directory other than "." and "..", -1 if it cannot be read.
int count_entries(const char* path) {
  DIR* d = ::opendir(path);
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace

std::uint64_t WorkLedger::posted(std::uint64_t queue, std::uint64_t wr_id, bool signaled) {
  Queue& q = queues_[queue];
  const std::uint32_t seq = q.next_seq++ & kSeqMask;
  q.outstanding.push_back({seq, signaled});
  ++posted_;
  if (signaled) ++awaiting_signaled_;
  return (wr_id & ~kSeqMask) | seq;
}

void WorkLedger::unposted(std::uint64_t queue) {
  Queue& q = queues_[queue];
  if (q.outstanding.empty()) return;
  if (q.outstanding.back().signaled) --awaiting_signaled_;
  q.outstanding.pop_back();
  --q.next_seq;
  --posted_;
}

void WorkLedger::problem(std::string what) {
  ++problems_;
  if (first_problems_.size() < kProblemsShown) first_problems_.push_back(std::move(what));
}

void WorkLedger::completed(std::uint64_t queue, const WorkCompletion& wc) {
  const std::uint32_t seq = static_cast<std::uint32_t>(wc.wr_id & kSeqMask);
  auto it = queues_.find(queue);
  if (it == queues_.end()) {
    problem("a completion for a queue with nothing posted (wr_id " + std::to_string(wc.wr_id) + ")");
    return;
  }
  std::deque<Entry>& out = it->second.outstanding;
  // The requests ahead of this one ended before it: unsignaled ones silently (they succeeded:
  // one that fails or is flushed gets its own completion), while a signaled one passed over
  // lost its completion. The walk is bounded by the queue's length.
  std::size_t ahead = 0;
  while (ahead < out.size() && out[ahead].seq != seq) ++ahead;
  if (ahead == out.size()) {
    problem("a completion (" + std::string(to_string(wc.status)) + ") for no outstanding request (queue " +
            std::to_string(queue) + ", sequence " + std::to_string(seq) + "): a duplicate");
    return;
  }
  for (std::size_t i = 0; i < ahead; ++i) {
    if (out.front().signaled) {
      problem("signaled request " + std::to_string(out.front().seq) + " of queue " + std::to_string(queue) +
              " got no completion, a later one did");
      --awaiting_signaled_;
    } else {
      // It left before the later one completed (even if that one then flushed).
      ++silent_;
    }
    out.pop_front();
  }
  if (out.front().signaled) --awaiting_signaled_;
  out.pop_front();
  if (wc.status == WcStatus::kSuccess) {
    ++success_;
  } else if (wc.status == WcStatus::kWrFlushError) {
    ++flushed_;
  } else {
    ++errors_;
  }
}

std::string WorkLedger::summary() const {
  std::uint64_t unsignaled_left = 0;
  for (const auto& [key, q] : queues_) {
    for (const Entry& e : q.outstanding) unsignaled_left += e.signaled ? 0 : 1;
  }
  std::string s = std::to_string(posted_) + " posted: " + std::to_string(success_) + " completed, " +
                  std::to_string(errors_) + " in error, " + std::to_string(flushed_) + " flushed, " +
                  std::to_string(silent_ + unsignaled_left) + " unsignaled without a completion";
  if (awaiting_signaled_ != 0) s += "; " + std::to_string(awaiting_signaled_) + " signaled NEVER COMPLETED";
  if (problems_ != 0) {
    s += "; " + std::to_string(problems_) + " PROBLEM(S):";
    for (const std::string& p : first_problems_) s += " [" + p + "]";
  }
  return s;
}

AuditVerdict& audit_verdict() {
  static AuditVerdict verdict;
  return verdict;
}

ProcessCensus ProcessCensus::take() {
  ProcessCensus c;
  c.threads = count_entries("/proc/self/task");
  // The directory stream itself holds one descriptor while it is read.
  const int fds = count_entries("/proc/self/fd");
  c.fds = fds < 0 ? -1 : fds - 1;
  return c;
}

}  // namespace uwarp::perf
