#include "proto/atomic_operation.h"

#include <atomic>

namespace uwarp::proto {
namespace {

using wire::AtomicOpcode;

// Addition by fields: a set bit of `boundaries` keeps its carry out of the next bit.
std::uint64_t masked_add(std::uint64_t a, std::uint64_t b, std::uint64_t boundaries) {
  if (boundaries == 0) return a + b;
  std::uint64_t sum = 0;
  std::uint64_t carry = 0;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t bit_sum = ((a >> i) & 1) + ((b >> i) & 1) + carry;
    sum |= (bit_sum & 1) << i;
    carry = ((boundaries >> i) & 1) != 0 ? 0 : bit_sum >> 1;
  }
  return sum;
}

std::uint64_t merge(std::uint64_t old, std::uint64_t data, std::uint64_t mask) {
  return (old & ~mask) | (data & mask);
}

}  // namespace

std::uint64_t atomic_result(const wire::AtomicRequest& r, std::uint64_t old) {
  switch (static_cast<AtomicOpcode>(r.opcode)) {
    case AtomicOpcode::kFetchAdd:
      return masked_add(old, r.add_swap_data, r.add_swap_mask);
    case AtomicOpcode::kSwap:
      return merge(old, r.add_swap_data, r.add_swap_mask);
    case AtomicOpcode::kCompareSwap:
      if (((old ^ r.compare_data) & r.compare_mask) != 0) return old;
      return merge(old, r.add_swap_data, r.add_swap_mask);
  }
  return old;
}

std::uint64_t execute_atomic(const wire::AtomicRequest& r, std::uint64_t& word) {
  std::atomic_ref<std::uint64_t> ref(word);
  if (static_cast<AtomicOpcode>(r.opcode) == AtomicOpcode::kFetchAdd && r.add_swap_mask == 0) {
    return ref.fetch_add(r.add_swap_data, std::memory_order_acq_rel);
  }
  std::uint64_t old = ref.load(std::memory_order_acquire);
  while (!ref.compare_exchange_weak(old, atomic_result(r, old), std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
  }
  return old;
}

}  // namespace uwarp::proto
