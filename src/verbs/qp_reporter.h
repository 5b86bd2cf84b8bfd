// Where a queue pair's outcomes go: work completions to its send and receive CQs, and
// asynchronous events (a CQ overflow among them) to the device's sink, each stamped with the
// QP's number and the application's context.
// Owner: the QueuePair, by value; the pieces of the QP that complete work hold a reference to it
// for the QP's lifetime. Thread: the QP lock (the CQs and the device are thread-safe). The
// device and the CQs outlive the QP. Every completion is counted by status in the QP's counters
// (stats/count.h: the QP lock makes this thread their writer).
#pragma once

#include <cstdint>
#include <string>

#include "stats/count.h"
#include "stats/export.h"
#include "uwarp/types.h"
#include "verbs/completion_queue.h"
#include "verbs/device.h"

namespace uwarp::verbs {

class QpReporter {
 public:
  QpReporter(Device& device, std::uint32_t qp_num, void* user_context, CompletionQueue* send_cq,
             CompletionQueue* recv_cq, stats::Counters& counters = stats::discarded())
      : device_(device),
        qp_num_(qp_num),
        user_context_(user_context),
        send_cq_(send_cq),
        recv_cq_(recv_cq),
        counters_(counters) {}

  std::uint32_t qp_num() const { return qp_num_; }

  void event(AsyncEventType type, const std::string& detail) const {
    AsyncEvent ev;
    ev.type = type;
    ev.qp_num = qp_num_;
    ev.context = user_context_;
    ev.detail = detail;
    device_.report(ev);
  }
  // A completion the CQ has no room for is lost and reported as an asynchronous CQ error.
  void send_completion(const WorkCompletion& wc) const {
    stats::count_completed(counters_, wc.status);
    if (!send_cq_->push(wc, false)) event(AsyncEventType::kCqError, "send CQ overflow");
  }
  void recv_completion(const WorkCompletion& wc, bool solicited) const {
    stats::count_completed(counters_, wc.status);
    if (!recv_cq_->push(wc, solicited)) event(AsyncEventType::kCqError, "receive CQ overflow");
  }
  // A receive completion that carries only a status (flushes and local errors).
  void recv_failed(std::uint64_t wr_id, WcStatus status) const {
    WorkCompletion wc;
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qp_num_;
    recv_completion(wc, false);
  }

 private:
  Device& device_;
  const std::uint32_t qp_num_;
  void* const user_context_;
  CompletionQueue* const send_cq_;
  CompletionQueue* const recv_cq_;
  stats::Counters& counters_;
};

}  // namespace uwarp::verbs
