#include "runtime/planned_receive.h"

#include <algorithm>
#include <cstring>

namespace uwarp::runtime {

bool PlannedReceive::plan(verbs::QueuePair& qp, RdmapDriver& rdmap, ByteSpan buffer,
                          std::size_t tail, const Limits& limits) {
  planned_ = rdmap.plan_ahead(qp, plan_, limits.most, limits.min_ahead);
  std::size_t in_place = 0;
  for (std::size_t k = 0; k < planned_; ++k) {
    if (plan_[k].place != nullptr) in_place += plan_[k].size;
  }
  if (planned_ == 0 || in_place < limits.min_in_place) return false;
  std::size_t buffered = 0;
  size_ = 0;
  for (std::size_t k = 0; k <= planned_; ++k) {
    ByteSpan where;
    if (k < planned_ && plan_[k].place != nullptr) {
      where = ByteSpan(plan_[k].place, plan_[k].size);
    } else {
      where = buffer.subspan(buffered, k < planned_ ? plan_[k].size : tail);
      buffered += where.size();
    }
    iov_[k] = iovec{where.data(), where.size()};
    size_ += where.size();
  }
  count_ = planned_ + 1;
  return true;
}

ConstByteSpan PlannedReceive::take(verbs::QueuePair& qp, RdmapDriver& rdmap, std::size_t n,
                                   ByteSpan gather) {
  std::size_t taken = 0;
  for (std::size_t k = 0; k < count_ && taken < n; ++k) {
    const ByteSpan got = piece(k).first(std::min(iov_[k].iov_len, n - taken));
    const bool in_place = k < planned_ && plan_[k].place != nullptr;
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
  for (std::size_t k = 0, at = 0; k < count_ && at < n; at += iov_[k].iov_len, ++k) {
    const std::size_t end = std::min(at + iov_[k].iov_len, n);
    if (end <= taken) continue;
    const std::size_t from = std::max(at, taken);
    std::memcpy(gather.data() + gathered, piece(k).data() + (from - at), end - from);
    gathered += end - from;
  }
  return gather.first(gathered);
}

}  // namespace uwarp::runtime
