// Matching Read Responses to outstanding Reads (RFC 5040 section 5.2: responses come in the
// order of the Read Requests; RFC 5041 section 7.2: the DDP tagged-buffer errors of a segment
// that does not fit the sink advertised).
//
// A Read Response is one tagged DDP message to the Data Sink STag and TO of its Read Request,
// RDMA Read Message Size bytes long (RFC 5040 sections 4.4 and 5.2). Its segments arrive in
// order over TCP, so the next one must start at sink TO + the bytes placed so far. A segment
// anywhere else (overlapping or repeating placed bytes, or leaving a gap) would let the
// response reach the Read's length while part of the sink was never written. RFC 5041 section
// 7.2 has no "invalid TO" code for tagged buffers (its codes are invalid STag, base or bounds
// violation, STag not associated, TO wrap and version): such a segment lies outside the part of
// the sink the response may still write, so it is a base or bounds violation (DDP / 1 / 0x01),
// like a segment outside the advertised sink. Linux siw makes the same check and choice for a
// Read Response whose TO is not the one it expects next (siw_rresp_check_ntoh).
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
  if (reads_.empty() || reads_.front().atomic || stag != reads_.front().sink_stag) {
    return Unexpected{term::kDdpTaggedInvalidStag};
  }
  const OutboundRead& read = reads_.front();
  if (to < read.sink_offset || to - read.sink_offset != read.placed ||
      length > read.length - read.placed) {
    return Unexpected{term::kDdpTaggedBaseBounds};
  }
  return ReadResponseTarget{false, read.seq, read.placed};
}

Expected<ReadResponseTarget, wire::TerminateCode> OutboundReadQueue::complete() {
  if (rtr_read_pending_) {
    rtr_read_pending_ = false;
    return kRtrRead;
  }
  if (reads_.empty() || reads_.front().atomic) return Unexpected{term::kDdpTaggedInvalidStag};
  if (reads_.front().placed != reads_.front().length) {
    return Unexpected{term::kDdpTaggedBaseBounds};  // a short response
  }
  const std::uint64_t seq = reads_.front().seq;
  reads_.pop_front();
  return ReadResponseTarget{false, seq, 0};
}

Expected<std::uint64_t, wire::TerminateCode> OutboundReadQueue::complete_atomic(
    std::uint32_t request_id) {
  if (rtr_read_pending_ || reads_.empty() || !reads_.front().atomic ||
      reads_.front().request_id != request_id) {
    return Unexpected{term::kRdmapUnexpectedOpcode};
  }
  const std::uint64_t seq = reads_.front().seq;
  reads_.pop_front();
  return seq;
}

}  // namespace uwarp::proto
