// Registered memory and its STag (RFC 5040 section 2.1, RFC 5041 section 3: the STag names a
// tagged buffer; a Tagged Offset addresses within it). uwarp's STags are a 24-bit index and an
// 8-bit key (as OFA's lkey/rkey), drawn at random so that a peer cannot guess them.
//
// Registration pins nothing: the application keeps the memory alive until deregistration.
// Thread: the fields other than `valid` are immutable after registration; `valid` is atomic
// (remote invalidation may clear it from the progress thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

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
};

struct MemoryRegion {
  std::uint32_t stag = 0;
  std::uint8_t* addr = nullptr;  // start of the registered memory
  std::uint64_t length = 0;
  std::uint64_t iova = 0;        // the Tagged Offset of addr (the virtual address, as OFA does)
  std::uint32_t access = 0;      // access::* bits
  const ProtectionDomain* pd = nullptr;
  std::atomic<bool> valid{true};

  // Checks rights and bounds of [to, to + len) and returns the bytes there. `needed` is the
  // access:: bit required (0 for local reads, which every registration allows).
  Expected<ByteSpan, AccessError> resolve(const ProtectionDomain* requester, std::uint64_t to, std::uint64_t len,
                                          std::uint32_t needed) const;
};

using MemoryRegionRef = std::shared_ptr<MemoryRegion>;

}  // namespace uwarp::verbs
