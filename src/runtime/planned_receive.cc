#include "runtime/planned_receive.h"

#include <algorithm>
#include <cstring>

namespace uwarp::runtime {

bool PlannedReceive::plan(verbs::QueuePair& qp, RdmapDriver& rdmap, ByteSpan buffer,
                          std::size_t tail, const Limits& limits) {
  planned_ = rdmap.plan_ahead(qp, plan_, limits.most, limits.min_ahead);
  std::size_t in_place = 0;
  for (std::size_t k = 0; k < planned_; ++k) in_place += plan_[k].place.size();
  if (planned_ == 0 || in_place < limits.min_in_place) return false;
  std::size_t buffered = 0;
  size_ = 0;
  for (std::size_t k = 0; k <= planned_; ++k) {
    if (k < planned_ && !plan_[k].place.empty()) {
      into_[k] = plan_[k].place;
    } else {
      into_[k] = buffer.subspan(buffered, k < planned_ ? plan_[k].size : tail);
      buffered += into_[k].size();
    }
    iov_[k] = iovec{into_[k].data(), into_[k].size()};
    size_ += into_[k].size();
  }
  count_ = planned_ + 1;
  return true;
}

ConstByteSpan PlannedReceive::take(verbs::QueuePair& qp, RdmapDriver& rdmap, std::size_t n,
                                   ByteSpan gather) {
  std::size_t taken = 0;
  for (std::size_t k = 0; k < count_ && taken < n; ++k) {
    const ByteSpan got = into_[k].first(std::min(into_[k].size(), n - taken));
    const bool in_place = k < planned_ && !plan_[k].place.empty();
    // A trailer and header fed while payload is still due (a segment longer than guessed)
    // would place payload over later pieces before their bytes were taken.
    if (!in_place && k < planned_ && rdmap.rx_in_payload()) break;
    const std::size_t took = in_place            ? rdmap.take_in_place(qp, got)
                             : rdmap.rx_open(qp) ? rdmap.feed(qp, got)
                                                 : 0;
    taken += took;
    if (took < got.size()) break;
  }
  std::size_t gathered = 0;
  for (std::size_t k = 0, at = 0; k < count_ && at < n; at += into_[k].size(), ++k) {
    const std::size_t end = std::min(at + into_[k].size(), n);
    if (end <= taken) continue;
    const std::size_t from = std::max(at, taken);
    std::memcpy(gather.data() + gathered, into_[k].data() + (from - at), end - from);
    gathered += end - from;
  }
  return gather.first(gathered);
}

}  // namespace uwarp::runtime
