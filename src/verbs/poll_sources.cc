#include "verbs/poll_sources.h"

#include <algorithm>

#include "verbs/completion_queue.h"

namespace uwarp::verbs {

void PollSources::add(const std::shared_ptr<CqPollSource>& source) {
  MutexLock lock(mu_);
  for (auto& [raw, weak] : sources_) {
    if (raw == source.get()) return;
  }
  sources_.emplace_back(source.get(), source);
  count_.store(sources_.size(), std::memory_order_release);
}

void PollSources::remove(const CqPollSource* source) {
  MutexLock lock(mu_);
  std::erase_if(sources_, [source](const auto& e) { return e.first == source; });
  count_.store(sources_.size(), std::memory_order_release);
}

PollSources::Driven PollSources::drive(bool claim, PollTime now, const Driven* skip) {
  Driven driven;
  if (empty()) return driven;
  const auto skipped = [skip](const CqPollSource* s) {
    return skip != nullptr && std::find(skip->sources.begin(), skip->sources.begin() + skip->count,
                                        s) != skip->sources.begin() + skip->count;
  };
  // Strong references taken under the lock and used without it: a source torn down meanwhile
  // stays alive until its call returns, and then finds itself unbound.
  std::shared_ptr<CqPollSource> picked[kDrivePerCall];
  {
    MutexLock lock(mu_);
    const std::size_t total = sources_.size();
    for (std::size_t i = 0; i < total && driven.count < kDrivePerCall; ++i) {
      if (next_ >= total) next_ = 0;
      auto& [raw, weak] = sources_[next_++];
      if (skipped(raw)) continue;
      if (auto s = weak.lock()) {
        driven.sources[driven.count] = raw;
        picked[driven.count++] = std::move(s);
      }
    }
  }
  for (std::size_t i = 0; i < driven.count; ++i) {
    driven.progress |= picked[i]->cq_poll_rx(claim, now);
  }
  return driven;
}

void PollSources::armed() {
  if (empty()) return;
  std::vector<std::shared_ptr<CqPollSource>> live;
  {
    MutexLock lock(mu_);
    live.reserve(sources_.size());
    for (auto& [raw, weak] : sources_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->cq_armed();
}

PollSources& process_poll_sources() {
  static PollSources* const all = new PollSources;  // never destroyed: streams outlive exit
  return *all;
}

}  // namespace uwarp::verbs
