#include "verbs/revocation.h"

#include <algorithm>
#include <vector>

#include "verbs/queue_pair.h"
#include "verbs/stag_slot.h"

namespace uwarp::verbs {

namespace {

void revoke_memory(const std::vector<QueuePair*>& qps, const MemoryRegion& mr) {
  const proto::RevokedRegion revoked{ConstByteSpan(mr.addr, mr.length), &mr};
  for (QueuePair* qp : qps) {
    if (qp->config().pd == mr.pd) qp->revoke(revoked);
  }
}

void revoke_memory(Device& device, const MemoryRegion& mr) {
  device.qps().with_all([&](const std::vector<QueuePair*>& qps) { revoke_memory(qps, mr); });
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

void sweep_invalidations(Device& device, std::uint32_t qp_num) {
  device.qps().with_all([&](const std::vector<QueuePair*>& qps) {
    auto target = std::find_if(qps.begin(), qps.end(), [&](QueuePair* q) { return q->qp_num() == qp_num; });
    if (target == qps.end()) return;  // destroyed meanwhile: its requests went with it
    const std::vector<Sweep> sweeps = (*target)->take_sweeps();
    for (const Sweep& s : sweeps) revoke_memory(qps, *s.second);
    (*target)->swept(sweeps);
  });
}

}  // namespace uwarp::verbs
