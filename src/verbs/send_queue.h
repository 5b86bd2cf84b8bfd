// A queue pair's send queue: the work requests posted and not yet completed, oldest first, each
// from its post (checked against the queue's limits and copied) through its transmission to its
// completion, which is reported in posting order as the verbs require of an RC QP. A Send or
// Write completes once TCP has all of it, an RDMA Read or atomic once its response has arrived; an error
// flushes what is left. Which request goes when (fences, ORD) is the engine's; whether the QP's
// state lets a request be posted or started is the QP's.
//
// Owner: the QueuePair. Thread: the QP lock. Lifetime: the protection checks and the reporter are
// the QP's and outlive it. Entries are slots of a SlotRing, reused with their vectors' storage;
// an entry holds the regions of its local memory until it completes, and the inline data of one
// flushed while in flight lives as long as the queue (a transmit batch may still point at it).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/slot_ring.h"
#include "proto/rdmap_engine.h"
#include "uwarp/status.h"
#include "uwarp/types.h"
#include "verbs/memory_protection.h"
#include "verbs/qp_reporter.h"

namespace uwarp::verbs {

class SendQueue {
 public:
  SendQueue(const QpCaps& caps, const DeviceLimits& limits, bool signal_all,
            MemoryProtection& protection, QpReporter& reporter);

  bool empty() const { return sq_.empty(); }
  std::size_t size() const { return sq_.size(); }

  // Checks `wr` against the queue's and the device's limits and appends it (inline data copied:
  // the application may reuse its buffer at once). reads_allowed: false refuses an RDMA Read
  // (the connection's ORD is 0).
  Status post(const SendWr& wr, bool reads_allowed);
  // The payload length of the request post() appended last (PostedShape::length).
  std::uint64_t last_length() const { return sq_.back().length; }
  // The request post() appended last completes at once as flushed (posted to a QP in ERROR).
  void flush_last();

  // The oldest request not yet started, as the engine orders it (seq, kind, fence); false if none.
  bool peek(proto::OutboundRequest& next) const;
  // Starts that request: resolves its local memory, appends a Send's or Write's bytes to
  // `payload` and fills in the rest of `r`; a local operation is carried out now, and the
  // binding it took away (if any) is put in `revoked`. False if its memory failed the protection
  // check or the operation broke the binding rules: it is then complete with that error, and the
  // QP is to enter ERROR.
  bool start(proto::OutboundRequest& r, std::vector<ConstByteSpan>& payload, MemoryRegionRef& revoked);
  // Starts, as start() does, the local operations next in turn that may take effect now (not
  // fenced behind an RDMA Read still outstanding), instead of waiting for the engine, which may
  // be held by bytes waiting for the peer's window; each counts as sent (nothing goes on the
  // wire). The bindings they took away are appended to `revoked`. False at the first that fails.
  bool run_ready_local(std::vector<Sweep>& revoked);
  // Request `seq` has been handed to TCP completely: a Send or Write completes, a Read awaits
  // its response. Ignored if it was flushed meanwhile.
  void sent(std::uint64_t seq);
  // The local memory an outbound Read `seq` reads into; null if it is no longer queued.
  const std::vector<ByteSpan>* read_sink(std::uint64_t seq);
  // A request started and not complete holds resolved memory in `memory` (a Send or Write being
  // sent, a Read's sink).
  bool uses(ConstByteSpan memory) const;
  // Read `seq` has its whole response (which may come before sent(seq)).
  void read_complete(std::uint64_t seq);
  // Atomic `seq` (started): its Atomic Request's operation and operands.
  wire::AtomicRequest atomic_request(std::uint64_t seq);
  // Atomic `seq` was answered (maybe before sent(seq)): `original_value` goes to its local
  // memory, and it completes.
  // False if the result could not be stored (on-demand memory that faults): the request has
  // failed with a local protection error, reported once the QP fails (enter_error's flush).
  bool atomic_complete(std::uint64_t seq, std::uint64_t original_value);
  // Every access through the binding local operation `seq` took away has been cut off.
  void swept(std::uint64_t seq);

  // The QP entered ERROR: every request not complete completes as flushed, except that when
  // `first_status` is given, the oldest of them takes it (and the peer's `vendor_err`) if it has
  // been started (a Send or Write handed to TCP counts as sent unless the error is its own).
  void flush(std::optional<WcStatus> first_status, std::uint32_t vendor_err);
  // RESET: drops every request without a completion.
  void clear();

 private:
  enum class Phase : std::uint8_t { kQueued, kInFlight, kAwaitingResponse, kDone };
  // What an entry holds besides memory: reset as a whole when its slot is reused.
  struct Request {
    std::uint64_t seq = 0;
    std::uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::kSend;
    std::uint32_t flags = 0;
    std::uint64_t remote_addr = 0;
    std::uint32_t rkey = 0;
    std::uint32_t invalidate_rkey = 0;
    std::uint32_t access = 0;
    std::uint32_t imm_data = 0;
    std::uint64_t compare_add = 0;
    std::uint64_t swap = 0;
    std::uint32_t length = 0;
    bool awaiting_sweep = false;  // a local operation that took a binding away
    bool answered = false;  // a Read or atomic: its response writes its memory, then it completes
    Phase phase = Phase::kQueued;
    WcStatus status = WcStatus::kSuccess;
    std::uint32_t vendor_err = 0;  // the peer's Terminate control word, for the WR it failed
    bool signaled = false;
  };
  struct Entry : Request {
    std::vector<Sge> sges;
    std::vector<std::uint8_t> inline_data;
    std::vector<ByteSpan> spans;       // resolved local memory (read: the sink)
    std::vector<MemoryRegionRef> mrs;  // kept alive while the WR is in flight
    // SlotRing: as a new entry, keeping the vectors' storage for the next request.
    void recycle() {
      static_cast<Request&>(*this) = Request{};
      sges.clear();
      inline_data.clear();
      spans.clear();
      mrs.clear();
    }
  };

  Entry* find(std::uint64_t seq);
  bool start_local(Entry& e, MemoryRegionRef& revoked);
  bool next_local_ready() const;
  // `e` has succeeded: it lets go of its memory, and what is complete at the front is reported.
  void succeed(Entry& e);
  // Reports the completions at the front, in posting order (unsignaled successes silently).
  void complete_in_order();
  void push_completion(const Entry& e);

  const std::uint32_t max_wr_;
  const std::uint32_t max_sge_;
  const DeviceLimits& limits_;
  const bool signal_all_;
  MemoryProtection& protection_;
  QpReporter& reporter_;
  // Entries from the oldest not yet completed; next_ indexes the next to start.
  SlotRing<Entry> sq_;
  std::size_t next_ = 0;
  std::uint64_t next_seq_ = 1;
  std::vector<std::vector<std::uint8_t>> retired_inline_;
};

}  // namespace uwarp::verbs
