#include "verbs/memory_region.h"

namespace uwarp::verbs {

Expected<ByteSpan, AccessError> MemoryRegion::resolve(const ProtectionDomain* requester,
                                                      const void* requester_qp, std::uint64_t to,
                                                      std::uint64_t len, std::uint32_t needed) const {
  if (!valid.load(std::memory_order_acquire)) return Unexpected{AccessError::kInvalidStag};
  if (requester != pd) return Unexpected{AccessError::kWrongPd};
  if (qp != nullptr && qp != requester_qp) return Unexpected{AccessError::kNotOwnQp};
  if ((access & needed) != needed) return Unexpected{AccessError::kAccessRights};
  if (to + len < to) return Unexpected{AccessError::kWrap};
  if (to < iova || to + len > iova + length) return Unexpected{AccessError::kBounds};
  // As integers: the implicit on-demand region starts at address 0.
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(addr) + (to - iova);
  return ByteSpan(reinterpret_cast<std::uint8_t*>(at), static_cast<std::size_t>(len));
}

}  // namespace uwarp::verbs
