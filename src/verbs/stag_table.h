// The device's table of STags. An STag is a 24-bit index and an 8-bit key; both come from a
// random generator seeded from the OS, the index is never 0 (STag 0 is the one peers probe
// first), and a freed index stays out of use until kQuarantine later registrations have passed,
// so a stale STag held by a peer does not quickly name new memory.
// Thread: all methods are thread-safe (a reader-writer lock; lookups share it).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "base/mutex.h"
#include "verbs/memory_region.h"

namespace uwarp::verbs {

class StagTable {
 public:
  static constexpr std::uint32_t kIndexBits = 24;
  static constexpr std::size_t kQuarantine = 4096;

  StagTable();
  // Assigns a fresh STag to `mr` and publishes it; fails only when the table is full.
  bool insert(const MemoryRegionRef& mr);
  void erase(std::uint32_t stag);
  MemoryRegionRef find(std::uint32_t stag) const;
  std::size_t size() const;

 private:
  mutable SharedMutex mu_;
  std::unordered_map<std::uint32_t, MemoryRegionRef> by_stag_ GUARDED_BY(mu_);
  std::unordered_set<std::uint32_t> used_index_ GUARDED_BY(mu_);
  std::deque<std::uint32_t> quarantine_ GUARDED_BY(mu_);
  std::unordered_set<std::uint32_t> quarantined_ GUARDED_BY(mu_);
  std::mt19937_64 rng_ GUARDED_BY(mu_);
};

}  // namespace uwarp::verbs
