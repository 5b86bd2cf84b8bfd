// libFuzzer target: one FPDU (decode_fpdu) with and without the CRC check; a decoded FPDU with a
// zero pad re-encodes to the same bytes, and the same bytes with a corrected trailer pass the
// check.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_check.h"
#include "wire/crc32c.h"
#include "wire/fpdu.h"

namespace uwarp::wire {
namespace {

bool pad_is_zero(ConstByteSpan fpdu, std::size_t ulpdu_length) {
  for (std::size_t i = 0; i < fpdu_pad_length(ulpdu_length); ++i) {
    if (fpdu[kMpaLengthFieldSize + ulpdu_length + i] != 0) return false;
  }
  return true;
}

void fuzz(ConstByteSpan in) {
  static std::vector<std::uint8_t> out(fpdu_size(kMaxUlpduLength));
  const auto unchecked = decode_fpdu(in, false);
  const auto checked = decode_fpdu(in, true);
  if (!unchecked.has_value()) {
    // Without a CRC check, the only way to fail is to be short.
    FUZZ_CHECK(unchecked.error() == FpduError::kNeedMore);
    FUZZ_CHECK(in.size() < kMpaLengthFieldSize || in.size() < fpdu_size(load_be16(in.data())));
    FUZZ_CHECK(!checked.has_value() && checked.error() == FpduError::kNeedMore);
    return;
  }
  const ConstByteSpan ulpdu = unchecked->ulpdu;
  const std::size_t consumed = unchecked->consumed;
  FUZZ_CHECK(ulpdu.size() == load_be16(in.data()));
  FUZZ_CHECK(ulpdu.data() == in.data() + kMpaLengthFieldSize);
  FUZZ_CHECK(consumed == fpdu_size(ulpdu.size()) && consumed <= in.size());
  const ConstByteSpan fpdu = in.first(consumed);
  const std::size_t covered = consumed - kMpaCrcSize;
  const std::uint32_t trailer = load_crc_trailer(fpdu.data() + covered);
  const std::uint32_t crc = crc32c(fpdu.first(covered));
  if (checked.has_value()) {
    FUZZ_CHECK(trailer == crc);
    FUZZ_CHECK(checked->ulpdu.data() == ulpdu.data() && checked->consumed == consumed);
  } else {
    FUZZ_CHECK(checked.error() == FpduError::kBadCrc && trailer != crc);
  }

  // Canonical except for the pad, which the receiver ignores.
  if (pad_is_zero(fpdu, ulpdu.size())) {
    if (checked.has_value()) {
      FUZZ_CHECK(encode_fpdu(ulpdu, true, out) == consumed);
      FUZZ_CHECK(fuzz::same_bytes(ConstByteSpan(out).first(consumed), fpdu));
    }
    if (trailer == 0) {
      FUZZ_CHECK(encode_fpdu(ulpdu, false, out) == consumed);
      FUZZ_CHECK(fuzz::same_bytes(ConstByteSpan(out).first(consumed), fpdu));
    }
  }

  // The same FPDU with its trailer corrected passes the check.
  std::vector<std::uint8_t> fixed(fpdu.begin(), fpdu.end());
  store_crc_trailer(fixed.data() + covered, crc);
  const auto refixed = decode_fpdu(fixed, true);
  FUZZ_CHECK(refixed.has_value() && refixed->consumed == consumed);

  // An FPDU cut short is never an FPDU.
  const auto partial = decode_fpdu(fpdu.first(consumed - 1), false);
  FUZZ_CHECK(!partial.has_value() && partial.error() == FpduError::kNeedMore);
}

}  // namespace
}  // namespace uwarp::wire

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  uwarp::wire::fuzz(uwarp::ConstByteSpan(data, size));
  return 0;
}
