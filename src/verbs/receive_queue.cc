#include "verbs/receive_queue.h"

namespace uwarp::verbs {

Status ReceiveQueue::post(const RecvWr& wr) {
  if (wr.sg_list.size() > max_sge_) {
    return Status(Errc::kInvalidArgument, "receive work request has more SGEs than the queue allows");
  }
  std::vector<std::pair<const void*, std::function<void()>>> wakes;
  {
    MutexLock lock(mu_);
    if (entries_.size() >= max_wr_) return Status(Errc::kNoResources, "receive queue is full");
    RecvEntry& e = entries_.push_back();
    e.wr_id = wr.wr_id;
    e.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
    if (!wakes_.empty()) wakes.swap(wakes_);
  }
  for (auto& [key, wake] : wakes) wake();
  return Status::ok();
}

void ReceiveQueue::wake_on_post(const void* key, std::function<void()> wake) {
  MutexLock lock(mu_);
  for (auto& [k, w] : wakes_) {
    if (k == key) {
      w = std::move(wake);
      return;
    }
  }
  wakes_.emplace_back(key, std::move(wake));
}

bool ReceiveQueue::take(RecvEntry& out) {
  MutexLock lock(mu_);
  if (entries_.empty()) return false;
  out.wr_id = entries_.front().wr_id;
  out.sges.swap(entries_.front().sges);
  entries_.pop_front();
  if (limit_ != 0 && entries_.size() < limit_) {
    limit_ = 0;
    limit_fired_ = true;
  }
  return true;
}

std::vector<RecvEntry> ReceiveQueue::drain() {
  MutexLock lock(mu_);
  std::vector<RecvEntry> out(entries_.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::move(entries_[i]);
  entries_.clear();
  return out;
}

std::size_t ReceiveQueue::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

void ReceiveQueue::arm_limit(std::uint32_t limit) {
  MutexLock lock(mu_);
  limit_ = limit;
}

bool ReceiveQueue::consume_limit_event() {
  MutexLock lock(mu_);
  const bool fired = limit_fired_;
  limit_fired_ = false;
  return fired;
}

}  // namespace uwarp::verbs
