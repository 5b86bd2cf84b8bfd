// One side of a uwarp-perf run: a context, one CQ with a completion channel for everything, a
// control QP carrying CtrlMsg Sends, and the data QPs with their registered buffers.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "audit.h"
#include "protocol.h"
#include "uwarp/uwarp.h"

namespace uwarp::perf {

// Work request ids: kind in the top byte, then the QP index (16 bits) and a slot (16 bits);
// the low 24 bits stay zero for the audit's sequence number (audit.h, WorkLedger).
enum class WrKind : std::uint8_t { kCtrlRecv = 1, kCtrlSend = 2, kData = 3, kDataRecv = 4 };
constexpr std::uint64_t make_wr_id(WrKind k, std::uint32_t qp, std::uint32_t slot) {
  return (std::uint64_t{static_cast<std::uint8_t>(k)} << 56) | (std::uint64_t{qp & 0xFFFF} << 40) |
         (std::uint64_t{slot & 0xFFFF} << 24);
}
constexpr WrKind wr_kind(std::uint64_t id) {
  return static_cast<WrKind>(id >> 56);
}
constexpr std::uint32_t wr_qp(std::uint64_t id) {
  return static_cast<std::uint32_t>((id >> 40) & 0xFFFF);
}
constexpr std::uint32_t wr_slot(std::uint64_t id) {
  return static_cast<std::uint32_t>((id >> 24) & 0xFFFF);
}
// The queue a request is on (its kind and QP): the audit's unit of completion order.
constexpr std::uint64_t wr_queue(std::uint64_t id) {
  return id >> 40;
}

struct DataQp {
  QueuePair qp;
  std::shared_ptr<std::uint8_t[]> buf;  // shared by all data QPs with --shared-buffer
  std::size_t length = 0;
  MemoryRegion mr;
  Connection conn;
  Hello peer;  // the other side's buffer
  // Client bookkeeping for a run.
  std::uint32_t credits = 0;
  std::uint32_t outstanding = 0;
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;
};

class Endpoint {
 public:
  static constexpr std::uint32_t kCtrlSlots = 64;
  // How long the orderly end (disconnect) waits for the closes.
  static constexpr int kCloseWaitMs = 1000;

  explicit Endpoint(Context& ctx);
  ProtectionDomain& pd() { return pd_; }
  CompletionQueue& cq() { return cq_; }
  QueuePair& ctrl() { return ctrl_qp_; }
  std::vector<std::unique_ptr<DataQp>>& data() { return data_; }

  // A data QP with a buffer of `length` bytes, registered for local and remote access; shared:
  // the buffer (and memory region) of the first data QP, if it has that length.
  DataQp& add_data_qp(std::size_t length, bool shared = false);
  Status post_ctrl_receives();
  Status send_ctrl(const CtrlMsg& m);
  // Every post of this endpoint's QPs goes through these two (the audit records them).
  Status post_send(QueuePair& qp, std::span<SendWr> wrs);
  Status post_send(QueuePair& qp, SendWr wr) { return post_send(qp, std::span<SendWr>(&wr, 1)); }
  Status post_recv(QueuePair& qp, RecvWr wr);

  // --audit: from now on every post and completion is recorded (before the first post).
  void enable_audit() { ledger_.emplace(); }
  bool auditing() const { return ledger_.has_value(); }
  // After a failure: waits up to wait_ms for every QP of the endpoint to be in ERROR (the
  // connections of one peer tend to fail together, each noticed on its own), and records how
  // many are for settle's report; returns that count.
  std::size_t note_qps_in_error(int wait_ms);
  // The orderly end: disconnects every data QP's connection and `ctrl` (the control QP's), then
  // waits up to wait_ms for every QP to leave RTS, so that none is destroyed while its close is
  // under way (that aborts it, and uwarp logs the abort).
  void disconnect(Connection& ctrl, int wait_ms);
  std::size_t qp_count() const { return 1 + data_.size(); }
  // The end of an audited endpoint: counts the QPs already in ERROR (unless
  // note_qps_in_error did), moves every QP to ERROR
  // (which flushes what is outstanding), then polls until every signaled request has its
  // completion and no completion came for 50 ms, or timeout_ms passed. Returns one line:
  // the ledger's summary and the QPs found in ERROR; `balanced` says whether all was
  // accounted for.
  std::string settle(int timeout_ms, bool& balanced);
  // Polls the CQ until something arrives: control receives go to ctrl_inbox (and are
  // reposted), data completions to `data_out`. Unless set_blocking(true), it spins on poll
  // for up to kSpinBeforeBlock:
  // an empty poll makes this thread receive for the CQ's QPs itself (busy polling,
  // docs/threading.md), which is what the latency phases measure. Between polls it yields the
  // core (one cheap system call when no other thread wants it): on a 2-core machine the peer
  // process or a progress thread may be waiting for this core, and a poller that kept it for
  // hundreds of polls (each with receive system calls) made round trips of ~280 us whenever
  // both ends shared a core. Then it arms the CQ (receiving goes back to the progress thread)
  // and blocks on the completion channel, up to timeout_ms in all. Returns false if nothing
  // arrived within the timeout, or a control completion failed.
  bool pump(int timeout_ms, std::vector<WorkCompletion>& data_out);
  // Waits until *byte == value (an RDMA Write ping-pong, as ib_write_lat: the last byte of the
  // message is placed last), polling the CQ between looks at the byte as an application that
  // polls its CQ would, so that this thread receives the Write itself; completions polled
  // meanwhile are handled as by pump, and it yields between polls as pump does. False after
  // timeout_ms or a failed control completion. The placement of the Write is not a C++ atomic
  // store (an RNIC writes memory), so ThreadSanitizer reports this on purpose-built polling;
  // tests/tsan.supp names this function.
  bool wait_for_byte(const volatile std::uint8_t* byte, std::uint8_t value, int timeout_ms,
                     std::vector<WorkCompletion>& data_out);

  static constexpr auto kSpinBeforeBlock = std::chrono::milliseconds(50);
  // true: pump (and wait_ctrl) arm the CQ and block on the completion channel after the first
  // empty poll (uwarp-perf --wait block, bandwidth runs only).
  void set_blocking(bool block) { blocking_ = block; }
  // Waits for a control message of `type` (other control messages stay in the inbox).
  std::optional<CtrlMsg> wait_ctrl(MsgType type, int timeout_ms,
                                   std::vector<WorkCompletion>* data_out = nullptr);
  std::deque<CtrlMsg>& ctrl_inbox() { return inbox_; }
  bool ctrl_failed() const { return ctrl_failed_; }

 private:
  // One poll of the CQ, completions handled as described at pump. True if a control message
  // or a data completion arrived.
  bool poll_once(std::vector<WorkCompletion>& data_out);

  Context& ctx_;
  ProtectionDomain pd_;
  CompletionChannel channel_;
  bool blocking_ = false;
  CompletionQueue cq_;
  QueuePair ctrl_qp_;
  std::unique_ptr<std::uint8_t[]> ctrl_buf_;
  MemoryRegion ctrl_mr_;
  std::vector<std::unique_ptr<DataQp>> data_;
  std::deque<CtrlMsg> inbox_;
  bool ctrl_failed_ = false;
  std::optional<WorkLedger> ledger_;
  // Waits up to wait_ms until every QP is in ERROR; returns how many are.
  std::size_t wait_qps_in_error(int wait_ms);
  std::optional<std::size_t> noted_in_error_;
};

QpInitAttr qp_attr(CompletionQueue& cq, std::uint32_t depth);

}  // namespace uwarp::perf
