// The atomic operations of RFC 7306 section 4 on one naturally aligned 64-bit word, as the
// responder carries them out: Fetch-and-Add, Swap and Compare-and-Swap, each with its masks
// (docs/atomics.md). Pure functions, except execute_atomic, which changes the word.
//
// Atomicity: execute_atomic reads and writes the word with one compare-and-exchange loop (a
// plain fetch-and-add when unmasked) of std::atomic_ref, lock-free on the 64-bit machines uwarp
// runs on: atomic against every other atomic of this process (every QP, every thread) and
// against the CPU's own atomic instructions on that word, in any process that maps it. Plain
// loads and stores of the word by the application, and RDMA Writes or Reads that cover it, are
// not ordered with it (as on an RNIC).
#pragma once

#include <cstdint>

#include "wire/rdmap_ext.h"

namespace uwarp::proto {

// `opcode` is an operation RFC 7306 defines.
constexpr bool is_known_atomic(std::uint8_t opcode) {
  return opcode <= static_cast<std::uint8_t>(wire::AtomicOpcode::kCompareSwap);
}

// The value the word holds after `request` when it held `old` (request.opcode is known):
// - Fetch-and-Add: old + Add Data, where a set bit of the Add Mask ends a field: no carry
//   leaves that bit (mask 0: one 64-bit addition);
// - Swap: the bits of the Swap Mask taken from Swap Data;
// - Compare-and-Swap: as Swap, if old equals Compare Data in the bits of the Compare Mask; else
//   old.
std::uint64_t atomic_result(const wire::AtomicRequest& request, std::uint64_t old);

// Carries out `request` on `word` atomically; returns the value before.
std::uint64_t execute_atomic(const wire::AtomicRequest& request, std::uint64_t& word);

}  // namespace uwarp::proto
