#include "verbs/revocation.h"

#include "verbs/queue_pair.h"

namespace uwarp::verbs {

void deregister_region(Device& device, const MemoryRegionRef& mr) {
  device.stags().erase(mr->stag);
  const ConstByteSpan memory(mr->addr, mr->length);
  device.qps().for_each([&](QueuePair& qp) {
    if (qp.config().pd == mr->pd) qp.revoke(memory);
  });
}

}  // namespace uwarp::verbs
