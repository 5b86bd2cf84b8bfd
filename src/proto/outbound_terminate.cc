// The Terminate message for a receive failure (RFC 5040 section 7.1: the layer, type and code,
// and copies of the terminated DDP segment's header and, for a Read Request, its RDMAP header).
#include "proto/outbound_terminate.h"

namespace uwarp::proto {

const wire::TerminateCode& OutboundTerminate::queue(const RxFailure& f) {
  wire::TerminateMessage m;
  m.code = f.code;
  if (f.have_header) {
    m.has_segment_length = true;
    m.segment_length = f.ulpdu_length;
    m.ddp_header = ConstByteSpan(f.header.data(), f.header_size);
    if (f.have_rdmap_header) m.rdmap_header = ConstByteSpan(f.rdmap_header);
  }
  size_ = wire::encode_terminate(m, body_);
  code_ = m.code;
  queued_ = true;
  return code_;
}

}  // namespace uwarp::proto
