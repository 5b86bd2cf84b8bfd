// libFuzzer target: MPA request and reply frames (decode_mpa_frame, mpa_frame_needed_bytes) and the
// RFC 6581 IRD/ORD words; every bit of a frame is a field, so a decoded frame must re-encode to
// the same bytes.
#include <array>
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include "wire/mpa_frame.h"

namespace uwarp::wire {
namespace {

// Returns whether `in` decoded as a frame of `kind`.
bool fuzz_kind(MpaFrameKind kind, ConstByteSpan in) {
  const auto decoded = decode_mpa_frame(kind, in);
  const auto needed = mpa_frame_needed_bytes(in);
  if (!decoded.has_value()) {
    switch (decoded.error()) {
      case MpaFrameError::kNeedMore:
        FUZZ_CHECK(!needed.has_value() || in.size() < *needed);
        break;
      case MpaFrameError::kPrivateDataTooLong:
        FUZZ_CHECK(needed.has_value() && *needed > kMpaMaxFrameSize);
        break;
      case MpaFrameError::kBadKey:
        FUZZ_CHECK(!in.empty());
        break;
    }
    return false;
  }
  const MpaFrame& frame = decoded->frame;
  FUZZ_CHECK(frame.kind == kind);
  FUZZ_CHECK(needed.has_value() && *needed == decoded->consumed);
  FUZZ_CHECK(decoded->consumed <= in.size() && decoded->consumed <= kMpaMaxFrameSize);
  FUZZ_CHECK(frame.private_data.data() == in.data() + kMpaFrameHeaderSize);
  FUZZ_CHECK(frame.private_data.size() == decoded->consumed - kMpaFrameHeaderSize);

  // Canonical: key, flags, reserved bits, revision and PD_Length all come back as they were.
  std::array<std::uint8_t, kMpaMaxFrameSize> out{};
  const std::size_t n = encode_mpa_frame(frame, out);
  FUZZ_CHECK(n == decoded->consumed);
  FUZZ_CHECK(fuzz::same_bytes(ConstByteSpan(out).first(n), in.first(n)));

  // A frame cut short is never a frame.
  for (std::size_t len : {n - 1, kMpaFrameHeaderSize - 1, in.size() % n}) {
    if (len >= n) continue;
    const auto partial = decode_mpa_frame(kind, in.first(len));
    FUZZ_CHECK(!partial.has_value() && partial.error() == MpaFrameError::kNeedMore);
  }

  if (const auto words = decode_mpa_enhanced_words(frame.private_data)) {
    FUZZ_CHECK(words->ird <= kMpaIrdOrdMask && words->ord <= kMpaIrdOrdMask);
    std::uint8_t again[kMpaEnhancedWordsSize] = {};
    encode_mpa_enhanced_words(*words, again);
    FUZZ_CHECK(fuzz::same_bytes(again, frame.private_data.first(kMpaEnhancedWordsSize)));
  } else {
    FUZZ_CHECK(frame.private_data.size() < kMpaEnhancedWordsSize);
  }
  return true;
}

}  // namespace
}  // namespace uwarp::wire

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using uwarp::wire::MpaFrameKind;
  const uwarp::ConstByteSpan in(data, size);
  const bool request = uwarp::wire::fuzz_kind(MpaFrameKind::kRequest, in);
  const bool reply = uwarp::wire::fuzz_kind(MpaFrameKind::kReply, in);
  FUZZ_CHECK(!(request && reply));  // the keys differ
  return 0;
}
