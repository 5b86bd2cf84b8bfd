#include "wire/ddp.h"

namespace uwarp::wire {

Expected<DdpHeader, DdpHeaderError> decode_ddp_header(ConstByteSpan in) {
  if (in.size() < kDdpControlSize || in.size() < ddp_header_size(in[0])) {
    return Unexpected{DdpHeaderError::kTruncated};
  }
  DdpHeader h;
  const std::uint8_t ddp = in[0];
  const std::uint8_t rdmap = in[1];
  h.tagged = (ddp & kDdpFlagTagged) != 0;
  h.last = (ddp & kDdpFlagLast) != 0;
  h.ddp_reserved = static_cast<std::uint8_t>((ddp & kDdpReservedMask) >> 2);
  h.ddp_version = ddp & kDdpVersionMask;
  h.rdmap_version = static_cast<std::uint8_t>((rdmap & kRdmapVersionMask) >> 6);
  h.rdmap_reserved = static_cast<std::uint8_t>((rdmap & kRdmapReservedMask) >> 4);
  h.opcode = rdmap & kRdmapOpcodeMask;
  if (h.tagged) {
    h.stag = load_be32(in.data() + 2);
    h.tagged_offset = load_be64(in.data() + 6);
  } else {
    h.ulp_reserved = load_be32(in.data() + 2);
    h.queue = load_be32(in.data() + 6);
    h.msn = load_be32(in.data() + 10);
    h.message_offset = load_be32(in.data() + 14);
  }
  return h;
}

std::size_t encode_ddp_header(const DdpHeader& h, ByteSpan out) {
  if (out.size() < h.size()) return 0;
  std::uint8_t ddp = static_cast<std::uint8_t>((h.ddp_reserved << 2) & kDdpReservedMask) |
                     (h.ddp_version & kDdpVersionMask);
  if (h.tagged) ddp |= kDdpFlagTagged;
  if (h.last) ddp |= kDdpFlagLast;
  out[0] = ddp;
  out[1] = static_cast<std::uint8_t>(((h.rdmap_version << 6) & kRdmapVersionMask) |
                                     ((h.rdmap_reserved << 4) & kRdmapReservedMask) |
                                     (h.opcode & kRdmapOpcodeMask));
  if (h.tagged) {
    store_be32(out.data() + 2, h.stag);
    store_be64(out.data() + 6, h.tagged_offset);
  } else {
    store_be32(out.data() + 2, h.ulp_reserved);
    store_be32(out.data() + 6, h.queue);
    store_be32(out.data() + 10, h.msn);
    store_be32(out.data() + 14, h.message_offset);
  }
  return h.size();
}

}  // namespace uwarp::wire
