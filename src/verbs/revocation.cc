#include "verbs/revocation.h"

#include "verbs/queue_pair.h"
#include "verbs/stag_slot.h"

namespace uwarp::verbs {

namespace {

void revoke_memory(Device& device, const MemoryRegion& mr) {
  const ConstByteSpan memory(mr.addr, mr.length);
  device.qps().for_each([&](QueuePair& qp) {
    if (qp.config().pd == mr.pd) qp.revoke(memory);
  });
}

}  // namespace

Status deregister_region(Device& device, const MemoryRegionRef& mr, bool force) {
  std::uint32_t none = 0;
  if (!mr->windows.compare_exchange_strong(none, kRegionClosing, std::memory_order_acq_rel)) {
    if (!force) return Status(Errc::kBusy, "memory windows are bound in the region");
    mr->windows.fetch_or(kRegionClosing, std::memory_order_acq_rel);  // no new binds
    for (const MemoryRegionRef& window : device.stags().windows_in(mr.get())) {
      if (invalidate_binding(device.stags(), window)) revoke_memory(device, *window);
    }
  }
  device.stags().erase(mr->stag);
  revoke_memory(device, *mr);
  return Status::ok();
}

void revoke_binding(Device& device, const MemoryRegionRef& binding) { revoke_memory(device, *binding); }

}  // namespace uwarp::verbs
