#include "wire/fpdu.h"

#include <cstring>

#include "wire/crc32c.h"

namespace uwarp::wire {

Expected<FpduDecoded, FpduError> decode_fpdu(ConstByteSpan input, bool check_crc) {
  if (input.size() < kMpaLengthFieldSize) return Unexpected{FpduError::kNeedMore};
  const std::size_t ulpdu_length = load_be16(input.data());
  const std::size_t total = fpdu_size(ulpdu_length);
  if (input.size() < total) return Unexpected{FpduError::kNeedMore};
  const std::size_t covered = total - kMpaCrcSize;
  if (check_crc && crc32c(input.first(covered)) != load_crc_trailer(input.data() + covered)) {
    return Unexpected{FpduError::kBadCrc};
  }
  return FpduDecoded{input.subspan(kMpaLengthFieldSize, ulpdu_length), total};
}

std::size_t encode_fpdu(ConstByteSpan ulpdu, bool with_crc, ByteSpan out) {
  if (ulpdu.size() > kMaxUlpduLength) return 0;
  const std::size_t total = fpdu_size(ulpdu.size());
  if (out.size() < total) return 0;
  store_be16(out.data(), static_cast<std::uint16_t>(ulpdu.size()));
  if (!ulpdu.empty()) std::memcpy(out.data() + kMpaLengthFieldSize, ulpdu.data(), ulpdu.size());
  const std::size_t covered = total - kMpaCrcSize;
  std::memset(out.data() + kMpaLengthFieldSize + ulpdu.size(), 0, covered - kMpaLengthFieldSize - ulpdu.size());
  store_crc_trailer(out.data() + covered, with_crc ? crc32c(ConstByteSpan(out.data(), covered)) : 0);
  return total;
}

}  // namespace uwarp::wire
