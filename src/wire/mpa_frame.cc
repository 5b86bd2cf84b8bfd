#include "wire/mpa_frame.h"

#include <algorithm>
#include <cstring>

namespace uwarp::wire {
namespace {

constexpr std::array<std::uint8_t, kMpaKeySize> kRequestKey = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                                               'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
constexpr std::array<std::uint8_t, kMpaKeySize> kReplyKey = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                                             'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};

const std::array<std::uint8_t, kMpaKeySize>& key_for(MpaFrameKind kind) {
  return kind == MpaFrameKind::kRequest ? kRequestKey : kReplyKey;
}

}  // namespace

std::optional<std::size_t> mpa_frame_needed_bytes(ConstByteSpan input) {
  if (input.size() < kMpaFrameHeaderSize) return std::nullopt;
  return kMpaFrameHeaderSize + load_be16(input.data() + kMpaKeySize + 2);
}

Expected<MpaFrameDecoded, MpaFrameError> decode_mpa_frame(MpaFrameKind expected, ConstByteSpan input) {
  // Check the key as far as it has arrived, so that garbage is refused early.
  const auto& key = key_for(expected);
  const std::size_t key_bytes = std::min(input.size(), kMpaKeySize);
  if (!std::equal(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(key_bytes), key.begin())) {
    return Unexpected{MpaFrameError::kBadKey};
  }
  if (input.size() < kMpaFrameHeaderSize) return Unexpected{MpaFrameError::kNeedMore};
  const std::uint16_t bits = load_be16(input.data() + kMpaKeySize);
  const std::uint16_t pd_length = load_be16(input.data() + kMpaKeySize + 2);
  if (pd_length > kMpaMaxPrivateData) return Unexpected{MpaFrameError::kPrivateDataTooLong};
  if (input.size() < kMpaFrameHeaderSize + pd_length) return Unexpected{MpaFrameError::kNeedMore};

  MpaFrameDecoded out;
  out.frame.kind = expected;
  out.frame.markers = (bits & kMpaFlagMarkers) != 0;
  out.frame.crc = (bits & kMpaFlagCrc) != 0;
  out.frame.reject = (bits & kMpaFlagReject) != 0;
  out.frame.enhanced = (bits & kMpaFlagEnhanced) != 0;
  out.frame.reserved_bits = static_cast<std::uint8_t>((bits & kMpaReservedMask) >> 8);
  out.frame.revision = static_cast<std::uint8_t>(bits & kMpaRevisionMask);
  out.frame.private_data = input.subspan(kMpaFrameHeaderSize, pd_length);
  out.consumed = kMpaFrameHeaderSize + pd_length;
  return out;
}

std::size_t encode_mpa_frame(const MpaFrame& frame, ByteSpan out) {
  const std::size_t pd = frame.private_data.size();
  if (pd > kMpaMaxPrivateData || out.size() < kMpaFrameHeaderSize + pd) return 0;
  const auto& key = key_for(frame.kind);
  std::memcpy(out.data(), key.data(), key.size());
  std::uint16_t bits = frame.revision;
  if (frame.markers) bits |= kMpaFlagMarkers;
  if (frame.crc) bits |= kMpaFlagCrc;
  if (frame.reject) bits |= kMpaFlagReject;
  if (frame.enhanced) bits |= kMpaFlagEnhanced;
  bits |= static_cast<std::uint16_t>((frame.reserved_bits << 8) & kMpaReservedMask);
  store_be16(out.data() + kMpaKeySize, bits);
  store_be16(out.data() + kMpaKeySize + 2, static_cast<std::uint16_t>(pd));
  if (pd > 0) std::memcpy(out.data() + kMpaFrameHeaderSize, frame.private_data.data(), pd);
  return kMpaFrameHeaderSize + pd;
}

std::optional<MpaEnhancedWords> decode_mpa_enhanced_words(ConstByteSpan private_data) {
  if (private_data.size() < kMpaEnhancedWordsSize) return std::nullopt;
  const std::uint16_t ird = load_be16(private_data.data());
  const std::uint16_t ord = load_be16(private_data.data() + 2);
  MpaEnhancedWords w;
  w.peer_to_peer = (ird & 0x8000) != 0;
  w.send_rtr = (ird & 0x4000) != 0;
  w.ird = ird & kMpaIrdOrdMask;
  w.write_rtr = (ord & 0x8000) != 0;
  w.read_rtr = (ord & 0x4000) != 0;
  w.ord = ord & kMpaIrdOrdMask;
  return w;
}

void encode_mpa_enhanced_words(const MpaEnhancedWords& w, std::uint8_t out[kMpaEnhancedWordsSize]) {
  std::uint16_t ird = w.ird & kMpaIrdOrdMask;
  if (w.peer_to_peer) ird |= 0x8000;
  if (w.send_rtr) ird |= 0x4000;
  std::uint16_t ord = w.ord & kMpaIrdOrdMask;
  if (w.write_rtr) ord |= 0x8000;
  if (w.read_rtr) ord |= 0x4000;
  store_be16(out, ird);
  store_be16(out + 2, ord);
}

}  // namespace uwarp::wire
