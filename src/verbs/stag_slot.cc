#include "verbs/stag_slot.h"

#include <utility>

namespace uwarp::verbs {

bool invalidate_binding(StagTable& table, const MemoryRegionRef& binding) {
  bool was_valid = true;
  if (!binding->valid.compare_exchange_strong(was_valid, false, std::memory_order_acq_rel)) {
    return false;
  }
  table.withdraw(binding->stag, binding.get());
  if (binding->parent) binding->parent->windows.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

Status check_window_rights(const MemoryRegion& region, std::uint32_t access) {
  if ((access & ~kWindowAccess) != 0) {
    return Status(Errc::kInvalidArgument, "a window carries remote read, write and atomic rights only");
  }
  if ((region.access & access::kMwBind) == 0) {
    return Status(Errc::kInvalidArgument, "the region does not allow binding windows (no MW_BIND access)");
  }
  const bool writes = (access & (access::kRemoteWrite | access::kRemoteAtomic)) != 0;
  if (writes && (region.access & access::kLocalWrite) == 0) {
    return Status(Errc::kInvalidArgument, "remote write or atomic rights need a region with local write");
  }
  return Status::ok();
}

void StagSlotRegistry::add(const std::shared_ptr<StagSlot>& slot) {
  MutexLock lock(mu_);
  std::erase_if(by_index_, [](const auto& entry) { return entry.second.expired(); });
  by_index_[slot->stag() >> 8] = slot;
}

std::shared_ptr<StagSlot> StagSlotRegistry::find(std::uint32_t stag) const {
  MutexLock lock(mu_);
  auto it = by_index_.find(stag >> 8);
  return it == by_index_.end() ? nullptr : it->second.lock();
}

Result<std::shared_ptr<StagSlot>> StagSlot::allocate(StagTable& table, const ProtectionDomain* pd,
                                                     StagKind kind) {
  if (kind == StagKind::kRegion) return error(Errc::kInvalidArgument, "a registered region has no slot");
  Result<std::uint32_t> stag = table.reserve();
  if (!stag) return Unexpected{stag.error()};
  return std::shared_ptr<StagSlot>(new StagSlot(table, pd, kind, *stag));
}

StagSlot::~StagSlot() {
  MutexLock lock(mu_);
  if (binding_) invalidate_binding(table_, binding_);
  table_.release(stag_);
}

std::uint32_t StagSlot::stag() const {
  MutexLock lock(mu_);
  return stag_;
}

MemoryRegionRef StagSlot::binding() const {
  MutexLock lock(mu_);
  return binding_ && binding_->valid.load(std::memory_order_acquire) ? binding_ : nullptr;
}

std::uint32_t StagSlot::next_type1_stag() {
  MutexLock lock(mu_);
  posted_stag_ = (posted_stag_ & ~0xFFu) | ((posted_stag_ + 1) & 0xFFu);
  return posted_stag_;
}

Status StagSlot::check_rebind_locked(std::uint32_t new_stag) const {
  if ((new_stag >> 8) != (stag_ >> 8)) {
    return Status(Errc::kInvalidArgument, "the new STag does not keep the index of the window or region");
  }
  if (binding_ && binding_->valid.load(std::memory_order_acquire)) {
    return Status(Errc::kInvalidState, "bound already: invalidate it first");
  }
  return Status::ok();
}

Status StagSlot::publish_locked(const MemoryRegionRef& binding) {
  if (!table_.publish(binding)) return Status(Errc::kInvalidState, "the STag is in use");
  binding_ = binding;
  stag_ = binding->stag;
  return Status::ok();
}

Result<MemoryRegionRef> StagSlot::bind_window(const WindowBind& b) {
  if (!is_window(kind_)) return error(Errc::kInvalidArgument, "not a memory window");
  MutexLock lock(mu_);
  const std::uint32_t new_stag = b.new_stag;
  if (kind_ == StagKind::kWindow2) {
    if (Status s = check_rebind_locked(new_stag); !s) return Unexpected{std::move(s)};
  } else if ((new_stag >> 8) != (stag_ >> 8)) {
    return error(Errc::kInvalidArgument, "the new STag does not keep the index of the window");
  }
  MemoryRegionRef replaced = binding_ && binding_->valid.load(std::memory_order_acquire) ? binding_ : nullptr;
  if (kind_ == StagKind::kWindow1 && b.length == 0) {  // unbind
    if (replaced) invalidate_binding(table_, replaced);
    return replaced;
  }
  const MemoryRegion* region = b.region.get();
  if (region == nullptr || region->pd != pd_ || !region->valid.load(std::memory_order_acquire) ||
      is_window(region->kind)) {
    return error(Errc::kInvalidArgument, "no valid region of this PD to bind the window in");
  }
  if (Status s = check_window_rights(*region, b.access); !s) return Unexpected{std::move(s)};
  if (b.addr + b.length < b.addr || b.addr < region->iova || b.addr + b.length > region->iova + region->length) {
    return error(Errc::kInvalidArgument, "the window reaches outside its region");
  }
  auto binding = std::make_shared<MemoryRegion>();
  binding->stag = new_stag;
  binding->addr = region->addr + (b.addr - region->iova);
  binding->length = b.length;
  binding->iova = b.addr;
  binding->access = b.access;
  binding->pd = pd_;
  binding->kind = kind_;
  binding->qp = kind_ == StagKind::kWindow2 ? b.qp : nullptr;
  binding->parent = b.region;
  // Counted before it is published, so that a deregistration either sees the window and
  // refuses, or has begun and this bind fails (memory_region.h, kRegionClosing).
  if ((b.region->windows.fetch_add(1, std::memory_order_acq_rel) & kRegionClosing) != 0) {
    b.region->windows.fetch_sub(1, std::memory_order_acq_rel);
    return error(Errc::kInvalidArgument, "the region is being deregistered");
  }
  if (replaced) invalidate_binding(table_, replaced);
  if (Status s = publish_locked(binding); !s) {
    b.region->windows.fetch_sub(1, std::memory_order_acq_rel);
    return Unexpected{std::move(s)};
  }
  return replaced;
}

Status StagSlot::register_fast(const FastRegistration& r) {
  if (kind_ != StagKind::kFastRegion) return Status(Errc::kInvalidArgument, "not a fast-registration region");
  MutexLock lock(mu_);
  if (Status s = check_rebind_locked(r.new_stag); !s) return s;
  if (r.iova + r.length < r.iova) return Status(Errc::kInvalidArgument, "the region wraps");
  auto binding = std::make_shared<MemoryRegion>();
  binding->stag = r.new_stag;
  binding->addr = r.addr;
  binding->length = r.length;
  binding->iova = r.iova;
  binding->access = r.access;
  binding->pd = pd_;
  binding->kind = kind_;
  return publish_locked(binding);
}

Result<MemoryRegionRef> StagSlot::invalidate(std::uint32_t stag) {
  if (!invalidatable(kind_)) return error(Errc::kInvalidArgument, "this STag cannot be invalidated");
  MutexLock lock(mu_);
  if (!binding_ || binding_->stag != stag || !invalidate_binding(table_, binding_)) {
    return error(Errc::kNotFound, "no valid binding under this STag");
  }
  return binding_;
}

}  // namespace uwarp::verbs
