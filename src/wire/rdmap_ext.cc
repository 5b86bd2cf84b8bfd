#include "wire/rdmap_ext.h"

namespace uwarp::wire {

Expected<ImmediateData, ExtBodyError> decode_immediate_data(ConstByteSpan b) {
  if (b.size() < kImmediateDataSize) return Unexpected{ExtBodyError::kTruncated};
  return ImmediateData{load_be64(b.data())};
}

std::size_t encode_immediate_data(const ImmediateData& imm, ByteSpan out) {
  if (out.size() < kImmediateDataSize) return 0;
  store_be64(out.data(), imm.data);
  return kImmediateDataSize;
}

Expected<AtomicRequest, ExtBodyError> decode_atomic_request(ConstByteSpan b) {
  if (b.size() < kAtomicRequestSize) return Unexpected{ExtBodyError::kTruncated};
  AtomicRequest r;
  const std::uint32_t word = load_be32(b.data());
  r.opcode = static_cast<std::uint8_t>(word & 0x0F);
  r.reserved = word >> 4;
  r.request_id = load_be32(b.data() + 4);
  r.remote_stag = load_be32(b.data() + 8);
  r.remote_to = load_be64(b.data() + 12);
  r.add_swap_data = load_be64(b.data() + 20);
  r.add_swap_mask = load_be64(b.data() + 28);
  r.compare_data = load_be64(b.data() + 36);
  r.compare_mask = load_be64(b.data() + 44);
  return r;
}

std::size_t encode_atomic_request(const AtomicRequest& r, ByteSpan out) {
  if (out.size() < kAtomicRequestSize) return 0;
  store_be32(out.data(), std::uint32_t{r.opcode} & 0x0F);
  store_be32(out.data() + 4, r.request_id);
  store_be32(out.data() + 8, r.remote_stag);
  store_be64(out.data() + 12, r.remote_to);
  store_be64(out.data() + 20, r.add_swap_data);
  store_be64(out.data() + 28, r.add_swap_mask);
  store_be64(out.data() + 36, r.compare_data);
  store_be64(out.data() + 44, r.compare_mask);
  return kAtomicRequestSize;
}

Expected<AtomicResponse, ExtBodyError> decode_atomic_response(ConstByteSpan b) {
  if (b.size() < kAtomicResponseSize) return Unexpected{ExtBodyError::kTruncated};
  return AtomicResponse{load_be32(b.data()), load_be64(b.data() + 4)};
}

std::size_t encode_atomic_response(const AtomicResponse& r, ByteSpan out) {
  if (out.size() < kAtomicResponseSize) return 0;
  store_be32(out.data(), r.original_request_id);
  store_be64(out.data() + 4, r.original_value);
  return kAtomicResponseSize;
}

}  // namespace uwarp::wire
