// MPA connection setup frames: RFC 5044 section 7.1 (request and reply frames) and the enhanced
// connection establishment of RFC 6581 section 3 (IRD/ORD words and peer-to-peer RTR bits).
// Pure functions over byte spans: no allocation, no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/bytes.h"
#include "uwarp/expected.h"

namespace uwarp::wire {

inline constexpr std::size_t kMpaKeySize = 16;
inline constexpr std::size_t kMpaFrameHeaderSize = kMpaKeySize + 4;  // key, flags/revision, PD_Length
inline constexpr std::size_t kMpaMaxPrivateData = 512;               // RFC 5044 section 7.1
inline constexpr std::size_t kMpaMaxFrameSize = kMpaFrameHeaderSize + kMpaMaxPrivateData;
inline constexpr std::size_t kMpaEnhancedWordsSize = 4;  // RFC 6581: IRD word, ORD word

enum class MpaFrameKind : std::uint8_t { kRequest, kReply };

// Bits of the 16-bit word after the key (big-endian on the wire).
inline constexpr std::uint16_t kMpaFlagMarkers = 0x8000;
inline constexpr std::uint16_t kMpaFlagCrc = 0x4000;
inline constexpr std::uint16_t kMpaFlagReject = 0x2000;
inline constexpr std::uint16_t kMpaFlagEnhanced = 0x1000;  // RFC 6581 "S" bit
inline constexpr std::uint16_t kMpaReservedMask = 0x0F00;
inline constexpr std::uint16_t kMpaRevisionMask = 0x00FF;

// A decoded (or to-be-encoded) MPA request or reply frame. private_data views the input buffer.
struct MpaFrame {
  MpaFrameKind kind = MpaFrameKind::kRequest;
  bool markers = false;
  bool crc = false;
  bool reject = false;
  bool enhanced = false;
  std::uint8_t reserved_bits = 0;  // the 4 reserved bits (0x0F00 >> 8); sent as zero by uwarp
  std::uint8_t revision = 2;
  ConstByteSpan private_data;
};

enum class MpaFrameError : std::uint8_t {
  kNeedMore,            // not an error yet: more bytes are needed (see needed_bytes)
  kBadKey,              // neither the expected key: LLP / MPA / 0x04 (invalid request/reply)
  kPrivateDataTooLong,  // PD_Length > 512
};

struct MpaFrameDecoded {
  MpaFrame frame;
  std::size_t consumed = 0;  // bytes of input the frame occupies
};

// Decodes a frame of the expected kind from the start of `input`. With kNeedMore, more input
// is needed; mpa_frame_needed_bytes() says how much in total, when it can tell.
Expected<MpaFrameDecoded, MpaFrameError> decode_mpa_frame(MpaFrameKind expected, ConstByteSpan input);

// Total frame size once the header is known, or nullopt with fewer than 20 bytes of input.
std::optional<std::size_t> mpa_frame_needed_bytes(ConstByteSpan input);

// Encodes `frame` into `out`; returns the bytes written, or 0 if `out` is too small or the
// private data exceeds 512 bytes.
std::size_t encode_mpa_frame(const MpaFrame& frame, ByteSpan out);

// RFC 6581 section 3: the two 16-bit words at the start of the private data when S is set.
struct MpaEnhancedWords {
  bool peer_to_peer = false;    // IRD word bit A (0x8000)
  bool send_rtr = false;        // IRD word bit B (0x4000): zero-length SEND as RTR
  std::uint16_t ird = 0;        // 14 bits
  bool write_rtr = false;       // ORD word bit C (0x8000): zero-length RDMA WRITE as RTR
  bool read_rtr = false;        // ORD word bit D (0x4000): zero-length RDMA READ as RTR
  std::uint16_t ord = 0;        // 14 bits
};
inline constexpr std::uint16_t kMpaIrdOrdMask = 0x3FFF;

std::optional<MpaEnhancedWords> decode_mpa_enhanced_words(ConstByteSpan private_data);
void encode_mpa_enhanced_words(const MpaEnhancedWords& words, std::uint8_t out[kMpaEnhancedWordsSize]);

}  // namespace uwarp::wire
