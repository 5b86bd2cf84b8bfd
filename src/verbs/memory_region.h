// Registered memory and its STag (RFC 5040 section 2.1, RFC 5041 section 3: the STag names a
// tagged buffer; a Tagged Offset addresses within it). uwarp's STags are a 24-bit index and an
// 8-bit key (as OFA's lkey/rkey), drawn at random so that a peer cannot guess them.
//
// One MemoryRegion is one binding of an STag to memory: a registered region from registration to
// deregistration, or one binding of a memory window or a fast-registered region (a rebinding is
// a new MemoryRegion under a new key; verbs/stag_slot.h).
//
// Registration pins nothing: the application keeps the memory alive until deregistration, or
// registers it for on-demand paging (access::kOnDemand), whose memory uwarp reaches only through
// accesses that report a fault.
// Thread: the fields other than `valid` and `windows` are immutable once published; those two
// are atomic (invalidation may clear `valid` from the progress thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "base/bytes.h"
#include "uwarp/expected.h"
#include "uwarp/types.h"

namespace uwarp::verbs {

class ProtectionDomain;

enum class AccessError : std::uint8_t {
  kInvalidStag,   // unknown or invalidated
  kWrongPd,       // registered in another protection domain
  kAccessRights,  // lacks the right needed
  kBounds,        // outside [iova, iova + length)
  kWrap,          // offset + length overflows 64 bits
  kNotOwnQp,      // a type 2 window bound to another QP
};

// What an STag names, and who may invalidate it (the OFA verbs' rules; RFC 5040 section 2.1
// leaves them to the RNIC interface).
enum class StagKind : std::uint8_t {
  kRegion,      // a registered region (reg_mr): valid until deregistered, never invalidated
  kFastRegion,  // a fast-registered region: registered and invalidated by work requests, and
                // invalidated by a peer's Send with Invalidate
  kWindow1,     // a memory window of type 1: bound and unbound by bind_mw, never invalidated
  kWindow2,     // a memory window of type 2: bound by a work request to one QP, which alone may
                // use it; invalidated by a work request or by the peer's Send with Invalidate
};
inline constexpr std::uint32_t kRegionClosing = 1u << 31;
inline bool invalidatable(StagKind k) { return k == StagKind::kFastRegion || k == StagKind::kWindow2; }
inline bool is_window(StagKind k) { return k == StagKind::kWindow1 || k == StagKind::kWindow2; }

struct MemoryRegion {
  std::uint32_t stag = 0;
  std::uint8_t* addr = nullptr;  // start of the registered memory
  std::uint64_t length = 0;
  std::uint64_t iova = 0;        // the Tagged Offset of addr (the virtual address, as OFA does)
  std::uint32_t access = 0;      // access::* bits
  const ProtectionDomain* pd = nullptr;
  std::atomic<bool> valid{true};
  StagKind kind = StagKind::kRegion;
  const void* qp = nullptr;  // kWindow2: the QP it is bound to, which alone may access it
  std::shared_ptr<MemoryRegion> parent;  // windows: the region they are bound in
  // Regions: windows bound in them, plus kRegionClosing once deregistration has begun (it begins
  // only while none is bound; a bind fails after it has).
  std::atomic<std::uint32_t> windows{0};

  // Registered for on-demand paging (a window: bound in such a region): its memory may fault
  // (base/faulting_memory.h).
  bool on_demand() const {
    return (access & access::kOnDemand) != 0 || (parent != nullptr && parent->on_demand());
  }

  // Checks rights and bounds of [to, to + len) for an access by `requester_qp` of PD
  // `requester` and returns the bytes there. `needed` is the access:: bit required (0 for local
  // reads, which every registration allows).
  Expected<ByteSpan, AccessError> resolve(const ProtectionDomain* requester, const void* requester_qp,
                                          std::uint64_t to, std::uint64_t len, std::uint32_t needed) const;
};

using MemoryRegionRef = std::shared_ptr<MemoryRegion>;

// A binding a local operation took away, with the seq of its request in the send queue: the
// request completes once every access through the binding is cut off (verbs::sweep_invalidations).
using Sweep = std::pair<std::uint64_t, MemoryRegionRef>;

}  // namespace uwarp::verbs
