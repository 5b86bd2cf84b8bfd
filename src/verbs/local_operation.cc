// MemoryProtection::run_local: the send queue's local operations on windows and fast regions
// (verbs/stag_slot.h), when their turn in the queue comes.
#include "verbs/memory_protection.h"

#include <utility>

namespace uwarp::verbs {

Expected<MemoryRegionRef, WcStatus> MemoryProtection::run_local(const LocalOperation& op) {
  const bool bind = op.opcode == WrOpcode::kBindWindow;
  const WcStatus refused = bind ? WcStatus::kMemoryWindowBindError : WcStatus::kLocalProtectionError;
  if (op.opcode == WrOpcode::kLocalInvalidate) {
    // The STag names a binding of a slot of this PD (a window or a fast region).
    MemoryRegionRef binding = stags_.find(op.stag);
    if (!binding || binding->pd != pd_ || !invalidatable(binding->kind)) return Unexpected{refused};
    if (!invalidate_binding(stags_, binding)) return Unexpected{refused};
    return binding;
  }
  std::shared_ptr<StagSlot> slot = slots_ != nullptr ? slots_->find(op.stag) : nullptr;
  if (!slot || slot->pd() != pd_) return Unexpected{refused};
  if (bind) {
    StagSlot::WindowBind b;
    b.region = op.range.length == 0 && slot->kind() == StagKind::kWindow1 ? nullptr : stags_.find(op.range.lkey);
    b.addr = op.range.addr;
    b.length = op.range.length;
    b.access = op.access;
    b.new_stag = op.stag;
    b.qp = qp_;
    Result<MemoryRegionRef> replaced = slot->bind_window(b);
    if (!replaced) return Unexpected{refused};
    return std::move(*replaced);
  }
  StagSlot::FastRegistration r;
  r.addr = reinterpret_cast<std::uint8_t*>(op.range.addr);
  r.length = op.range.length;
  r.iova = op.iova;
  r.access = op.access;
  r.new_stag = op.stag;
  if (!slot->register_fast(r)) return Unexpected{refused};
  return MemoryRegionRef{};
}

}  // namespace uwarp::verbs
