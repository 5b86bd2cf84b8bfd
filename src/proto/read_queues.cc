// Matching Read Responses to outstanding Reads (RFC 5040 section 5.2: responses come in the
// order of the Read Requests; RFC 5041 section 7.2: the DDP tagged-buffer errors of a segment
// that does not fit the sink advertised).
#include "proto/read_queues.h"

namespace uwarp::proto {
namespace term = wire::term;
namespace {
constexpr ReadResponseTarget kRtrRead{true, 0, 0};
}  // namespace

Expected<ReadResponseTarget, wire::TerminateCode> OutboundReadQueue::match_segment(
    wire::Stag stag, wire::TaggedOffset to, std::size_t length) const {
  if (rtr_read_pending_) {
    // The answer to our own zero-length RTR Read.
    if (length != 0) return Unexpected{term::kDdpTaggedBaseBounds};
    return kRtrRead;
  }
  if (reads_.empty() || stag != reads_.front().sink_stag) {
    return Unexpected{term::kDdpTaggedInvalidStag};
  }
  const OutboundRead& read = reads_.front();
  if (to < read.sink_offset || to - read.sink_offset + length > read.length) {
    return Unexpected{term::kDdpTaggedBaseBounds};
  }
  return ReadResponseTarget{false, read.seq, static_cast<std::size_t>(to - read.sink_offset)};
}

Expected<ReadResponseTarget, wire::TerminateCode> OutboundReadQueue::complete() {
  if (rtr_read_pending_) {
    rtr_read_pending_ = false;
    return kRtrRead;
  }
  if (reads_.empty()) return Unexpected{term::kDdpTaggedInvalidStag};
  if (reads_.front().placed != reads_.front().length) {
    return Unexpected{term::kDdpTaggedBaseBounds};  // a short response
  }
  const std::uint64_t seq = reads_.front().seq;
  reads_.pop_front();
  return ReadResponseTarget{false, seq, 0};
}

}  // namespace uwarp::proto
