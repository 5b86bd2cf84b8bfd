// A queue pair's checks of memory access against the registrations of its protection domain
// (RFC 5040 section 2.1, RFC 5041 section 3): the local SGEs of a posted request or a receive,
// the tagged buffer of an inbound Write, the source of an inbound Read Request, the sink of an
// outbound Read, and the region a Send with Invalidate names. A refused inbound access is
// answered with the Terminate code RFC 5040 and RFC 5041 give for it.
//
// Owner: the QueuePair. Thread: the QP lock. Lifetime: the STag table and the PD outlive it. It
// keeps the region it found last for local SGEs and for inbound Writes (a region never changes
// its STag or range, and once deregistered or invalidated it is looked up again), and one
// scatter list whose storage it reuses: a returned Scatter is valid until the next call that
// returns one.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/bytes.h"
#include "proto/rdmap_engine.h"
#include "uwarp/types.h"
#include "verbs/memory_region.h"
#include "verbs/stag_slot.h"
#include "verbs/stag_table.h"

namespace uwarp::verbs {

class ProtectionDomain;

// The Terminate that refuses an inbound Write (DDP tagged buffer errors) or a Read Request's
// source (RDMAP remote protection errors) for `error`.
wire::TerminateCode write_error(AccessError error);
wire::TerminateCode read_source_error(AccessError error);

// The part [offset, offset + length) of a list of spans, into `out`; false if it runs past the
// end.
bool slice(const std::vector<ByteSpan>& spans, std::size_t offset, std::size_t length,
           std::vector<ByteSpan>& out);

class MemoryProtection {
 public:
  // `qp`: the queue pair whose accesses these are (a type 2 window admits only the QP it is bound
  // to); `slots`: the device's windows and fast regions, for local operations.
  MemoryProtection(StagTable& stags, const ProtectionDomain* pd, const void* qp = nullptr,
                   StagSlotRegistry* slots = nullptr);

  // The local memory of `sges` (zero-length ones left out) appended to `spans`, each region to
  // `keep`; false if an SGE names no region of this PD that allows `needed` over its range.
  bool resolve_local(std::span<const Sge> sges, std::uint32_t needed, std::vector<ByteSpan>& spans,
                     std::vector<MemoryRegionRef>& keep);
  // An inbound Write's segment: [to, to + length) of `stag`, checked for remote write.
  proto::ScatterResult resolve_write(wire::Stag stag, wire::TaggedOffset to, std::size_t length) {
    // The segments of one Write all name its STag.
    if (!find_region(write_mr_, stag.value())) return Unexpected{wire::term::kDdpTaggedInvalidStag};
    auto r = write_mr_->resolve(pd_, qp_, to.value(), length, access::kRemoteWrite);
    if (!r) return Unexpected{write_error(r.error())};
    scatter_.assign(1, *r);
    return proto::Scatter(scatter_, write_mr_->on_demand());
  }
  // An inbound Read Request's source, checked for remote read.
  Expected<proto::ReadSource, wire::TerminateCode> resolve_read_source(wire::Stag stag,
                                                                       wire::TaggedOffset offset,
                                                                       std::uint32_t length);
  // An inbound Atomic Request's target (RFC 7306): the 64-bit word at `offset` of `stag`,
  // checked for remote atomic access; a word that is not naturally aligned in memory is a base
  // or bounds violation (RDMAP / 1 / 0x01: it is no word the region holds).
  Expected<proto::ReadSource, wire::TerminateCode> resolve_atomic_target(wire::Stag stag,
                                                                         wire::TaggedOffset offset);
  // Bytes [offset, offset + length) of an outbound Read's sink (its resolved local memory, or
  // null if the Read is no longer queued).
  proto::ScatterResult resolve_read_sink(const std::vector<ByteSpan>* sink, std::size_t offset,
                                         std::size_t length) {
    if (sink == nullptr || !slice(*sink, offset, length, scatter_)) {
      return Unexpected{wire::term::kDdpTaggedBaseBounds};
    }
    return proto::Scatter(scatter_);
  }
  // A Send with Invalidate of `stag`: invalidates it if it names a fast-registered region of
  // this PD or a type 2 window bound to this QP, and keeps the binding for
  // take_remote_invalidation(); else the Terminate that refuses it: RDMAP / 2 / 0x09 for a
  // registered region or a type 1 window (they cannot be invalidated), RDMAP / 1 / 0x09 for an
  // STag that is unknown, of another PD or of another QP's window.
  std::optional<wire::TerminateCode> invalidate_remote(wire::Stag stag);
  // The binding the last successful invalidate_remote() took away (to be revoked), once.
  MemoryRegionRef take_remote_invalidation() { return std::move(remotely_invalidated_); }

  // A local operation of the send queue (WrOpcode kBindWindow, kLocalInvalidate,
  // kRegisterFastRegion; verbs/local_operation.cc), carried out now. Returns the binding it
  // invalidated or replaced, whose accesses in progress are to be cut off (revoke_binding), or
  // null; or the status the request completes with when it broke the rules.
  struct LocalOperation {
    WrOpcode opcode = WrOpcode::kLocalInvalidate;
    std::uint32_t stag = 0;  // bind, register: the new STag; invalidate: the STag
    Sge range;               // bind: the window in a region; register: the memory
    std::uint64_t iova = 0;  // register: the Tagged Offset of range.addr
    std::uint32_t access = 0;
  };
  Expected<MemoryRegionRef, WcStatus> run_local(const LocalOperation& op);

 private:
  // The region `stag` names, reusing `last` while it names the same STag and stays valid. Null
  // if none.
  const MemoryRegionRef& find_region(MemoryRegionRef& last, std::uint32_t stag) {
    if (!last || last->stag != stag || !last->valid.load(std::memory_order_acquire)) {
      last = stags_.find(stag);
    }
    return last;
  }

  StagTable& stags_;
  const ProtectionDomain* const pd_;
  const void* const qp_;
  StagSlotRegistry* const slots_;
  MemoryRegionRef write_mr_;  // the region the last inbound Write resolved
  MemoryRegionRef local_mr_;  // the region the last local SGE resolved
  MemoryRegionRef remotely_invalidated_;  // until take_remote_invalidation()
  std::vector<ByteSpan> scatter_;
};

}  // namespace uwarp::verbs
