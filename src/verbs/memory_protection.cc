#include "verbs/memory_protection.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "base/faulting_memory.h"

namespace uwarp::verbs {
namespace term = wire::term;

MemoryProtection::MemoryProtection(StagTable& stags, const ProtectionDomain* pd, const void* qp,
                                   StagSlotRegistry* slots)
    : stags_(stags), pd_(pd), qp_(qp), slots_(slots) {
  scatter_.reserve(16);
}

bool MemoryProtection::resolve_local(std::span<const Sge> sges, std::uint32_t needed,
                                     std::vector<ByteSpan>& spans,
                                     std::vector<MemoryRegionRef>& keep) {
  for (const Sge& s : sges) {
    if (s.length == 0) continue;
    // Requests in a row mostly name the same region.
    // A window's STag is for peers only.
    if (!find_region(local_mr_, s.lkey) || is_window(local_mr_->kind)) return false;
    auto r = local_mr_->resolve(pd_, qp_, s.addr, s.length, needed);
    if (!r) return false;
    // On-demand memory is brought in now, so that the request fails here, with a local
    // protection error, if it is not there (the sends that read it happen later, in TCP).
    if (local_mr_->on_demand() &&
        !prefault(*r, (needed & access::kLocalWrite) != 0 ? Prefault::kWrite : Prefault::kRead)) {
      return false;
    }
    spans.push_back(*r);
    keep.push_back(local_mr_);
  }
  return true;
}

Expected<proto::ReadSource, wire::TerminateCode> MemoryProtection::resolve_read_source(
    wire::Stag stag, wire::TaggedOffset offset, std::uint32_t length) {
  MemoryRegionRef mr = stags_.find(stag.value());
  if (!mr) return Unexpected{term::kRdmapInvalidStag};
  auto r = mr->resolve(pd_, qp_, offset.value(), length, access::kRemoteRead);
  if (!r) return Unexpected{read_source_error(r.error())};
  // On-demand memory the response could not read is outside what the STag reaches.
  if (mr->on_demand() && !prefault(*r, Prefault::kRead)) return Unexpected{term::kRdmapBaseBounds};
  return proto::ReadSource{*r, std::move(mr)};
}

Expected<proto::ReadSource, wire::TerminateCode> MemoryProtection::resolve_atomic_target(
    wire::Stag stag, wire::TaggedOffset offset) {
  MemoryRegionRef mr = stags_.find(stag.value());
  if (!mr) return Unexpected{term::kRdmapInvalidStag};
  auto r = mr->resolve(pd_, qp_, offset.value(), sizeof(std::uint64_t), access::kRemoteAtomic);
  if (!r) return Unexpected{read_source_error(r.error())};
  if (reinterpret_cast<std::uintptr_t>(r->data()) % sizeof(std::uint64_t) != 0) {
    return Unexpected{term::kRdmapBaseBounds};
  }
  if (mr->on_demand() && !prefault(*r, Prefault::kWrite)) return Unexpected{term::kRdmapBaseBounds};
  return proto::ReadSource{*r, std::move(mr)};
}

std::optional<wire::TerminateCode> MemoryProtection::invalidate_remote(wire::Stag stag) {
  MemoryRegionRef mr = stags_.find(stag.value());
  if (!mr || mr->pd != pd_ || (mr->qp != nullptr && mr->qp != qp_)) {
    return term::kRdmapCannotInvalidateProtection;
  }
  if (!invalidatable(mr->kind)) return term::kRdmapCannotInvalidate;
  if (!invalidate_binding(stags_, mr)) return term::kRdmapCannotInvalidateProtection;  // just now
  remotely_invalidated_ = std::move(mr);
  return std::nullopt;
}

wire::TerminateCode write_error(AccessError e) {
  switch (e) {
    case AccessError::kInvalidStag: return term::kDdpTaggedInvalidStag;
    case AccessError::kWrongPd:
    case AccessError::kNotOwnQp: return term::kDdpTaggedStagNotAssociated;
    // DDP has no access-rights code.
    case AccessError::kAccessRights: return term::kDdpTaggedInvalidStag;
    case AccessError::kBounds: return term::kDdpTaggedBaseBounds;
    case AccessError::kWrap: return term::kDdpTaggedToWrap;
  }
  return term::kDdpTaggedInvalidStag;
}

wire::TerminateCode read_source_error(AccessError e) {
  switch (e) {
    case AccessError::kInvalidStag: return term::kRdmapInvalidStag;
    case AccessError::kWrongPd:
    case AccessError::kNotOwnQp: return term::kRdmapStagNotAssociated;
    case AccessError::kAccessRights: return term::kRdmapAccessRights;
    case AccessError::kBounds: return term::kRdmapBaseBounds;
    case AccessError::kWrap: return term::kRdmapToWrap;
  }
  return term::kRdmapInvalidStag;
}

bool slice(const std::vector<ByteSpan>& spans, std::size_t offset, std::size_t length,
           std::vector<ByteSpan>& out) {
  out.clear();
  for (const ByteSpan& s : spans) {
    if (length == 0) break;
    if (offset >= s.size()) {
      offset -= s.size();
      continue;
    }
    const std::size_t take = std::min(s.size() - offset, length);
    out.push_back(s.subspan(offset, take));
    length -= take;
    offset = 0;
  }
  return length == 0;
}

}  // namespace uwarp::verbs
