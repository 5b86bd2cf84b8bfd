#include "verbs/stag_table.h"

#include <mutex>
#include <utility>

namespace uwarp::verbs {

StagTable::StagTable(RandomSource random) : random_(std::move(random)) {}

std::uint32_t StagTable::draw_locked(Status& why) {
  constexpr std::uint32_t kIndexMask = (1u << kIndexBits) - 1;
  if (used_index_.size() + quarantined_.size() >= kIndexMask - 1) {
    why = Status(Errc::kNoResources, "STag table is full");
    return 0;
  }
  std::uint32_t index = 0;
  std::uint32_t key = 0;
  do {
    const Result<std::uint64_t> word = random_.next();
    if (!word) {
      why = Status(word.error().code(), "no random STag: " + word.error().message());
      return 0;
    }
    index = static_cast<std::uint32_t>(*word) & kIndexMask;
    key = static_cast<std::uint32_t>(*word >> kIndexBits) & 0xFF;
  } while (index == 0 || used_index_.count(index) != 0 || quarantined_.count(index) != 0);
  used_index_.insert(index);
  return (index << 8) | key;
}

void StagTable::quarantine_locked(std::uint32_t index) {
  used_index_.erase(index);
  quarantine_.push_back(index);
  quarantined_.insert(index);
  if (quarantine_.size() > kQuarantine) {
    quarantined_.erase(quarantine_.front());
    quarantine_.pop_front();
  }
}

Status StagTable::insert(const MemoryRegionRef& mr) {
  WriterLock lock(mu_);
  Status why;
  const std::uint32_t stag = draw_locked(why);
  if (stag == 0) return why;
  mr->stag = stag;
  by_stag_.emplace(mr->stag, mr);
  return Status::ok();
}

void StagTable::erase(std::uint32_t stag) {
  WriterLock lock(mu_);
  auto it = by_stag_.find(stag);
  if (it == by_stag_.end()) return;
  it->second->valid.store(false, std::memory_order_release);
  by_stag_.erase(it);
  quarantine_locked(stag >> 8);
}

Result<std::uint32_t> StagTable::reserve() {
  WriterLock lock(mu_);
  Status why;
  const std::uint32_t stag = draw_locked(why);
  if (stag == 0) return Unexpected{std::move(why)};
  return stag;
}

bool StagTable::publish(const MemoryRegionRef& mr) {
  WriterLock lock(mu_);
  return by_stag_.emplace(mr->stag, mr).second;
}

bool StagTable::withdraw(std::uint32_t stag, const MemoryRegion* mr) {
  WriterLock lock(mu_);
  auto it = by_stag_.find(stag);
  if (it == by_stag_.end() || it->second.get() != mr) return false;
  by_stag_.erase(it);
  return true;
}

void StagTable::release(std::uint32_t stag) {
  WriterLock lock(mu_);
  if (used_index_.count(stag >> 8) != 0) quarantine_locked(stag >> 8);
}

MemoryRegionRef StagTable::find(std::uint32_t stag) const {
  ReaderLock lock(mu_);
  auto it = by_stag_.find(stag);
  return it == by_stag_.end() ? nullptr : it->second;
}

std::vector<MemoryRegionRef> StagTable::windows_in(const MemoryRegion* region) const {
  ReaderLock lock(mu_);
  std::vector<MemoryRegionRef> out;
  for (const auto& [stag, mr] : by_stag_) {
    if (mr->parent.get() == region) out.push_back(mr);
  }
  return out;
}

std::size_t StagTable::size() const {
  ReaderLock lock(mu_);
  return by_stag_.size();
}

}  // namespace uwarp::verbs
