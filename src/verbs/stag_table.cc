#include "verbs/stag_table.h"

#include <mutex>
#include <utility>

namespace uwarp::verbs {

StagTable::StagTable(RandomSource random) : random_(std::move(random)) {}

Status StagTable::insert(const MemoryRegionRef& mr) {
  WriterLock lock(mu_);
  constexpr std::uint32_t kIndexMask = (1u << kIndexBits) - 1;
  if (used_index_.size() + quarantined_.size() >= kIndexMask - 1) {
    return Status(Errc::kNoResources, "STag table is full");
  }
  std::uint32_t index = 0;
  std::uint32_t key = 0;
  do {
    const Result<std::uint64_t> word = random_.next();
    if (!word) return Status(word.error().code(), "no random STag: " + word.error().message());
    index = static_cast<std::uint32_t>(*word) & kIndexMask;
    key = static_cast<std::uint32_t>(*word >> kIndexBits) & 0xFF;
  } while (index == 0 || used_index_.count(index) != 0 || quarantined_.count(index) != 0);
  mr->stag = (index << 8) | key;
  used_index_.insert(index);
  by_stag_.emplace(mr->stag, mr);
  return Status::ok();
}

void StagTable::erase(std::uint32_t stag) {
  WriterLock lock(mu_);
  auto it = by_stag_.find(stag);
  if (it == by_stag_.end()) return;
  it->second->valid.store(false, std::memory_order_release);
  by_stag_.erase(it);
  const std::uint32_t index = stag >> 8;
  used_index_.erase(index);
  quarantine_.push_back(index);
  quarantined_.insert(index);
  if (quarantine_.size() > kQuarantine) {
    quarantined_.erase(quarantine_.front());
    quarantine_.pop_front();
  }
}

MemoryRegionRef StagTable::find(std::uint32_t stag) const {
  ReaderLock lock(mu_);
  auto it = by_stag_.find(stag);
  return it == by_stag_.end() ? nullptr : it->second;
}

std::size_t StagTable::size() const {
  ReaderLock lock(mu_);
  return by_stag_.size();
}

}  // namespace uwarp::verbs
