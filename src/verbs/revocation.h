// Deregistration and invalidation with revocation (verbs: once dereg_mr returns, or an
// invalidation completes, the RNIC no longer reads or writes that memory through that STag, and
// the application may free it at once).
//
// The region leaves the STag table first, so that no new access finds it (a peer's gets the
// Terminate for an invalid STag). Then every QP of its protection domain is visited under its
// own lock (QueuePair::revoke): every access to registered memory happens under that lock and
// is a system call or a copy that has ended before the lock is released, so after the visit no
// access is in progress, and none that was started can continue. A QP whose access in progress
// reaches into the region fails with a Terminate (docs/errors.md, "Revocation") rather than
// touch it again. The wait is bounded by what one QP does under its lock (a bounded receive
// round or send).
//
// Thread: any application thread, not the progress thread inside a callback that holds a QP's
// lock.
#pragma once

#include "verbs/device.h"
#include "uwarp/status.h"
#include "verbs/memory_region.h"

namespace uwarp::verbs {

// Deregisters `mr` (a registered or fast-registered region) and revokes it. A region with
// windows bound in it is not deregistered (kBusy), unless `force` (its handle is destroyed): the
// windows are then invalidated and revoked first.
Status deregister_region(Device& device, const MemoryRegionRef& mr, bool force = false);
// Revokes a binding that was invalidated (verbs/stag_slot.h): no QP of its PD accesses its memory
// through it any more once this returns.
void revoke_binding(Device& device, const MemoryRegionRef& binding);
// Revokes the bindings QP `qp_num`'s local operations took away (QueuePair::take_sweeps), then
// completes those operations. The progress thread, no QP lock held (TxRequests::sweep).
void sweep_invalidations(Device& device, std::uint32_t qp_num);

}  // namespace uwarp::verbs
