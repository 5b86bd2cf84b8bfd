// The receive an inbound Send is placed into (RFC 5041 section 5, untagged buffers): taken from
// the receive queue (the QP's own or a shared one) at the message's first segment, its SGEs
// checked for local write as the message reaches them, each segment placed by its message offset,
// and completed to the receive CQ (for a Send with Invalidate, once the named region is
// invalidated, if the PD allows it). A receive that cannot hold the message completes in error; an
// error of the QP flushes the receive side.
//
// Owner: the QueuePair. Thread: the QP lock. Lifetime: the receive queue, the protection checks
// and the reporter are the QP's and outlive it. One receive is active at a time, from the first
// segment of a Send to its completion, a failed placement or a flush; the vectors keep their
// storage for the next, and a returned Scatter is valid until the next placement.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "proto/rdmap_engine.h"
#include "verbs/memory_protection.h"
#include "verbs/qp_reporter.h"
#include "verbs/receive_queue.h"

namespace uwarp::verbs {

class InboundReceive {
 public:
  // srq: the shared receive queue `rq` is, whose limit event this receive reports; null if `rq`
  // is the QP's own.
  InboundReceive(ReceiveQueue& rq, ReceiveQueue* srq, MemoryProtection& protection,
                 QpReporter& reporter);

  // Where `length` bytes at message offset `mo` go; the first segment takes the next receive.
  // The receive's SGEs are checked as the message reaches them, as an RNIC places: one that no
  // byte reaches is never checked (a zero-length Send completes a receive whatever its SGEs).
  proto::ScatterResult place(wire::MessageOffset mo, std::size_t length, bool first_segment) {
    if (first_segment) {
      if (auto refused = begin()) return Unexpected{*refused};
    }
    if (!active_) return Unexpected{wire::term::kDdpUntaggedNoBuffer};
    const std::size_t until = mo.value() + length;
    if (until > capacity_) return too_long();
    if (until > resolved_) {
      if (auto refused = resolve_through(until)) return Unexpected{*refused};
    }
    if (!slice(spans_, mo.value(), length, scatter_)) return too_long();
    return proto::Scatter(scatter_, on_demand_);
  }
  // The active receive's memory lies (partly) in `memory`.
  bool places_into(ConstByteSpan memory) const {
    return active_ && overlaps_any(spans_, memory);
  }
  // The whole message has been placed: completes the receive (the Terminate, if the peer may not
  // invalidate the region its Send with Invalidate names).
  std::optional<wire::TerminateCode> complete(const proto::InboundSend& send);
  // The QP entered ERROR: the active receive and those posted to the QP's own receive queue
  // complete as flushed; a shared one keeps its entries, and the QP reports it has left it.
  void flush();
  // A new stream: no receive is active (one left from before is dropped without a completion).
  void reset() {
    end();
    entry_.wr_id = 0;
  }

 private:
  // Takes the next receive; the Terminate if there is none.
  std::optional<wire::TerminateCode> begin();
  // Resolves the receive's SGEs in order until they cover the first `end` bytes of the message;
  // the Terminate (and the receive's local protection error) if one names no memory it may write.
  std::optional<wire::TerminateCode> resolve_through(std::size_t until);
  // The message does not fit the receive: it completes with a length error.
  proto::ScatterResult too_long();
  // No receive is active; the vectors keep their storage for the next one.
  void end() {
    active_ = false;
    entry_.recycle();
    spans_.clear();
    mrs_.clear();
    capacity_ = 0;
    resolved_ = 0;
    next_sge_ = 0;
    on_demand_ = false;
  }

  ReceiveQueue& rq_;
  ReceiveQueue* const srq_;
  MemoryProtection& protection_;
  QpReporter& reporter_;
  bool active_ = false;
  RecvEntry entry_;
  std::vector<ByteSpan> spans_;
  std::vector<MemoryRegionRef> mrs_;
  bool on_demand_ = false;  // some of the receive's memory is registered for on-demand paging
  std::size_t capacity_ = 0;  // the receive's length: its SGEs' lengths added up
  std::size_t resolved_ = 0;  // message bytes the SGEs resolved so far (spans_) cover
  std::size_t next_sge_ = 0;  // the first SGE of entry_ not resolved yet
  std::vector<ByteSpan> scatter_;
};

}  // namespace uwarp::verbs
