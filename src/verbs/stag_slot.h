// An STag whose binding changes: a memory window (type 1 or type 2) or a fast-registered region
// (verbs/memory_region.h, StagKind). A slot holds one index of the device's STag table from its
// allocation to its destruction; each binding is a new MemoryRegion, published under that index
// and the key of the binding until it is invalidated or replaced. The rules are the OFA verbs':
// - a window opens onto part of a registered or fast-registered region of the same PD that
//   allows binding (access::kMwBind), with remote rights only, and remote write or atomic only
//   where the region allows local write; the region cannot be deregistered while it is bound;
// - type 1: bound, rebound and unbound (length 0) by bind_mw, each bind with the next key
//   (next_type1_stag(), taken when the bind is posted); never invalidated;
// - type 2: bound to one QP, which alone may use it, with the key the application chose, only
//   while unbound; invalidated by a work request or by the peer's Send with Invalidate;
// - a fast-registered region: registered over application memory with the key the application
//   chose, only while unregistered; invalidated as a type 2 window.
// Invalidating a binding takes its STag out of the table (no new access finds it); cutting off
// accesses already in progress is the caller's (verbs/revocation.h).
//
// Owner: the application's handle. Thread: thread-safe (the slot's mutex, then the STag
// table's). Lifetime: the table outlives the slot; the destructor invalidates the binding.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "base/mutex.h"
#include "uwarp/status.h"
#include "verbs/memory_region.h"
#include "verbs/stag_table.h"

namespace uwarp::verbs {

class ProtectionDomain;

// Invalidates `binding` if it is still valid: unpublishes it and lets go of the region it is a
// window onto. False if it was invalid already.
bool invalidate_binding(StagTable& table, const MemoryRegionRef& binding);

class StagSlot {
 public:
  static Result<std::shared_ptr<StagSlot>> allocate(StagTable& table, const ProtectionDomain* pd,
                                                    StagKind kind);
  ~StagSlot();
  StagSlot(const StagSlot&) = delete;
  StagSlot& operator=(const StagSlot&) = delete;

  StagKind kind() const { return kind_; }
  const ProtectionDomain* pd() const { return pd_; }
  // The STag of the binding, or of the last one while unbound (at first: a random key).
  std::uint32_t stag() const EXCLUDES(mu_);
  // The valid binding, or null.
  MemoryRegionRef binding() const EXCLUDES(mu_);
  // Type 1: the STag of the next bind posted (the key advances by one with each call).
  std::uint32_t next_type1_stag() EXCLUDES(mu_);

  struct WindowBind {
    MemoryRegionRef region;      // what the window opens onto
    std::uint64_t addr = 0;      // its first byte, in the region's address space
    std::uint64_t length = 0;    // type 1: 0 unbinds
    std::uint32_t access = 0;    // access::kRemoteRead, kRemoteWrite, kRemoteAtomic
    std::uint32_t new_stag = 0;  // the STag to bind as: this slot's index, a new key
    const void* qp = nullptr;    // type 2: the QP it is bound to
  };
  // Binds a window. Returns the binding it replaced (type 1; to be revoked) or null.
  Result<MemoryRegionRef> bind_window(const WindowBind& b) EXCLUDES(mu_);

  struct FastRegistration {
    std::uint8_t* addr = nullptr;
    std::uint64_t length = 0;
    std::uint64_t iova = 0;
    std::uint32_t access = 0;
    std::uint32_t new_stag = 0;  // this slot's index, a new key
  };
  Status register_fast(const FastRegistration& r) EXCLUDES(mu_);

  // Invalidates the binding `stag` names (a type 2 window or a fast-registered region).
  // Returns it (to be revoked), or why not: kNotFound if `stag` is not this slot's valid
  // binding, kInvalidArgument if this kind cannot be invalidated.
  Result<MemoryRegionRef> invalidate(std::uint32_t stag) EXCLUDES(mu_);

 private:
  StagSlot(StagTable& table, const ProtectionDomain* pd, StagKind kind, std::uint32_t stag)
      : table_(table), pd_(pd), kind_(kind), stag_(stag), posted_stag_(stag) {}
  // Checks that `new_stag` keeps this slot's index and that the slot is unbound.
  Status check_rebind_locked(std::uint32_t new_stag) const REQUIRES(mu_);
  Status publish_locked(const MemoryRegionRef& binding) REQUIRES(mu_);

  StagTable& table_;
  const ProtectionDomain* const pd_;
  const StagKind kind_;
  mutable Mutex mu_;
  std::uint32_t stag_ GUARDED_BY(mu_);
  std::uint32_t posted_stag_ GUARDED_BY(mu_);  // type 1: the STag of the last bind posted
  MemoryRegionRef binding_ GUARDED_BY(mu_);  // the last binding (valid or not)
};

// The slots of a device by STag index, so that a work request can name one by its STag.
// Thread: thread-safe.
class StagSlotRegistry {
 public:
  void add(const std::shared_ptr<StagSlot>& slot) EXCLUDES(mu_);
  // The live slot whose index `stag` has, or null.
  std::shared_ptr<StagSlot> find(std::uint32_t stag) const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::unordered_map<std::uint32_t, std::weak_ptr<StagSlot>> by_index_ GUARDED_BY(mu_);
};

// The rights a window may carry, and whether `region` lets a window carry `access`.
inline constexpr std::uint32_t kWindowAccess = access::kRemoteRead | access::kRemoteWrite | access::kRemoteAtomic;
Status check_window_rights(const MemoryRegion& region, std::uint32_t access);

}  // namespace uwarp::verbs
