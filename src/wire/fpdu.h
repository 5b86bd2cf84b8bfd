// MPA FPDU framing: RFC 5044 section 4 (FPDU format: ULPDU_Length, ULPDU, pad, CRC) and 4.4 (CRC:
// over the length field, the ULPDU and the pad; the 4-byte trailer is the little-endian bytes of
// the CRC value, as iSCSI sends it; zero when CRC was not negotiated). Markers (section 5) are not
// used: uwarp refuses peers that ask for them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"
#include "uwarp/expected.h"

namespace uwarp::wire {

inline constexpr std::size_t kMpaLengthFieldSize = 2;
inline constexpr std::size_t kMpaCrcSize = 4;
inline constexpr std::size_t kMaxUlpduLength = 0xFFFF;

// Pad bytes that follow a ULPDU so that length field + ULPDU + pad is a multiple of 4.
constexpr std::size_t fpdu_pad_length(std::size_t ulpdu_length) {
  return (4 - ((kMpaLengthFieldSize + ulpdu_length) & 3)) & 3;
}
constexpr std::size_t fpdu_size(std::size_t ulpdu_length) {
  return kMpaLengthFieldSize + ulpdu_length + fpdu_pad_length(ulpdu_length) + kMpaCrcSize;
}
// The largest ULPDU whose FPDU fits in `bytes` (0 if none does), capped at 65534, the largest
// ULPDU that needs no pad. The result never needs pad: length field + ULPDU is 4-aligned.
constexpr std::size_t max_ulpdu_for_fpdu_size(std::size_t bytes) {
  // The smallest FPDU (empty ULPDU) is 8 bytes; below that the subtraction below would wrap.
  if (bytes < fpdu_size(0)) return 0;
  std::size_t ulpdu = (bytes - kMpaCrcSize) & ~std::size_t{3};  // length+ulpdu+pad, 4-aligned
  ulpdu -= kMpaLengthFieldSize;
  constexpr std::size_t kLargestAligned = kMaxUlpduLength - 1;  // 2 + 65534 is a multiple of 4
  return ulpdu > kLargestAligned ? kLargestAligned : ulpdu;
}

inline void store_crc_trailer(std::uint8_t* p, std::uint32_t crc) {
  p[0] = static_cast<std::uint8_t>(crc);
  p[1] = static_cast<std::uint8_t>(crc >> 8);
  p[2] = static_cast<std::uint8_t>(crc >> 16);
  p[3] = static_cast<std::uint8_t>(crc >> 24);
}
inline std::uint32_t load_crc_trailer(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}

enum class FpduError : std::uint8_t {
  kNeedMore,  // not an error yet: the FPDU is incomplete
  kBadCrc,    // LLP / MPA / 0x02
};

struct FpduDecoded {
  ConstByteSpan ulpdu;
  std::size_t consumed = 0;
};

// Decodes one whole FPDU from the start of `input` (for tests, tools and fuzzers; the data path
// uses the resumable proto::FpduReader). With check_crc, the trailer must match.
Expected<FpduDecoded, FpduError> decode_fpdu(ConstByteSpan input, bool check_crc);

// Writes one whole FPDU carrying `ulpdu`; returns bytes written, 0 if `out` is too small or the
// ULPDU is longer than 65535 bytes.
std::size_t encode_fpdu(ConstByteSpan ulpdu, bool with_crc, ByteSpan out);

}  // namespace uwarp::wire
