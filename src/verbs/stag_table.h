// The device's table of STags. An STag is a 24-bit index and an 8-bit key; both come from the
// kernel's CSPRNG (base/random_pool.h), so that the STags a peer has seen do not tell it the
// next ones. The index is never 0 (STag 0 is the one peers probe first), and a freed index stays
// out of use until kQuarantine later registrations have passed, so a stale STag held by a peer
// does not quickly name new memory.
//
// A registered region takes an index and publishes its STag at once (insert) and gives both up
// when deregistered (erase). An STag whose binding changes (a memory window, a fast-registered
// region: verbs/stag_slot.h) holds its index for its lifetime (reserve ... release) and publishes
// one binding at a time under that index with a key of its own (publish ... withdraw).
// Thread: all methods are thread-safe (a reader-writer lock; lookups share it).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "base/random_pool.h"
#include "uwarp/status.h"
#include "verbs/memory_region.h"

namespace uwarp::verbs {

class StagTable {
 public:
  static constexpr std::uint32_t kIndexBits = 24;
  static constexpr std::size_t kQuarantine = 4096;

  // `random` supplies the bits of every STag: the kernel's CSPRNG unless a test gives another.
  explicit StagTable(RandomSource random = kernel_random_source());
  // Assigns a fresh STag to `mr` and publishes it. Fails, leaving `mr` and the table unchanged,
  // when the table is full (kNoResources) or when no random bits can be had (kIoError: there
  // is no predictable fallback).
  Status insert(const MemoryRegionRef& mr);
  void erase(std::uint32_t stag);
  // A fresh index with a random key, in use (quarantined after release) but naming nothing yet.
  // Fails as insert().
  Result<std::uint32_t> reserve();
  // Publishes `mr` under mr->stag, whose index the caller reserved; replaces nothing (false if
  // that STag is published already).
  bool publish(const MemoryRegionRef& mr);
  // Unpublishes `stag` if it names `mr` (its index stays reserved); false if it did not.
  bool withdraw(std::uint32_t stag, const MemoryRegion* mr);
  // Gives a reserved index back (after withdrawing what it published).
  void release(std::uint32_t stag);
  MemoryRegionRef find(std::uint32_t stag) const;
  // The published windows bound in `region`.
  std::vector<MemoryRegionRef> windows_in(const MemoryRegion* region) const;
  std::size_t size() const;

 private:
  mutable SharedMutex mu_;
  std::unordered_map<std::uint32_t, MemoryRegionRef> by_stag_ GUARDED_BY(mu_);
  std::unordered_set<std::uint32_t> used_index_ GUARDED_BY(mu_);
  std::deque<std::uint32_t> quarantine_ GUARDED_BY(mu_);
  std::unordered_set<std::uint32_t> quarantined_ GUARDED_BY(mu_);
  // A fresh index and key (mu_ held); 0 with the error in `why` if none.
  std::uint32_t draw_locked(Status& why) REQUIRES(mu_);
  void quarantine_locked(std::uint32_t index) REQUIRES(mu_);

  // One word per candidate STag: index from its low 24 bits, key from the 8 above them.
  RandomPool random_ GUARDED_BY(mu_);
};

}  // namespace uwarp::verbs
