// DDP segment headers, RFC 5041 section 4 (tagged: STag + TO; untagged: QN, MSN, MO), with the
// RDMAP control byte of RFC 5040 section 4.2 carried in DDP's "reserved for ULP" byte, and the
// 32-bit untagged "reserved for ULP" field that RDMAP uses for the STag to invalidate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"
#include "uwarp/expected.h"

namespace uwarp::wire {

inline constexpr std::uint8_t kDdpFlagTagged = 0x80;
inline constexpr std::uint8_t kDdpFlagLast = 0x40;
inline constexpr std::uint8_t kDdpReservedMask = 0x3C;
inline constexpr std::uint8_t kDdpVersionMask = 0x03;
inline constexpr std::uint8_t kDdpVersion = 1;

inline constexpr std::uint8_t kRdmapVersionMask = 0xC0;
inline constexpr std::uint8_t kRdmapReservedMask = 0x30;
inline constexpr std::uint8_t kRdmapOpcodeMask = 0x0F;
inline constexpr std::uint8_t kRdmapVersion = 1;

inline constexpr std::size_t kDdpControlSize = 2;  // DDP control byte + RDMAP control byte
inline constexpr std::size_t kTaggedHeaderSize = 14;
inline constexpr std::size_t kUntaggedHeaderSize = 18;
inline constexpr std::size_t kMaxDdpHeaderSize = kUntaggedHeaderSize;

// Untagged queue numbers used by RDMAP (RFC 5040 section 5.1). RFC 7306 as uwarp reads it
// (docs/atomics.md): Atomic Requests share queue 1 with Read Requests (one MSN sequence, one
// ORD/IRD), Atomic Responses have queue 3, Immediate Data messages use queue 0.
inline constexpr std::uint32_t kQueueSend = 0;
inline constexpr std::uint32_t kQueueReadRequest = 1;
inline constexpr std::uint32_t kQueueTerminate = 2;
inline constexpr std::uint32_t kQueueAtomicResponse = 3;
inline constexpr std::uint32_t kUntaggedQueues = 4;

// The header of one DDP segment, fields as on the wire (validation is the receiver's job).
struct DdpHeader {
  bool tagged = false;
  bool last = false;
  std::uint8_t ddp_reserved = 0;  // the 4 reserved bits of the DDP control byte
  std::uint8_t ddp_version = kDdpVersion;
  std::uint8_t rdmap_version = kRdmapVersion;
  std::uint8_t rdmap_reserved = 0;
  std::uint8_t opcode = 0;  // 4 bits; see RdmapOpcode
  // Tagged buffer model.
  std::uint32_t stag = 0;
  std::uint64_t tagged_offset = 0;
  // Untagged buffer model.
  std::uint32_t ulp_reserved = 0;  // RDMAP: the STag to invalidate for Send with Invalidate
  std::uint32_t queue = 0;
  std::uint32_t msn = 0;
  std::uint32_t message_offset = 0;

  std::size_t size() const { return tagged ? kTaggedHeaderSize : kUntaggedHeaderSize; }
};

// Size of the header that starts with this DDP control byte.
constexpr std::size_t ddp_header_size(std::uint8_t ddp_control) {
  return (ddp_control & kDdpFlagTagged) != 0 ? kTaggedHeaderSize : kUntaggedHeaderSize;
}

enum class DdpHeaderError : std::uint8_t { kTruncated };

Expected<DdpHeader, DdpHeaderError> decode_ddp_header(ConstByteSpan input);
// Writes header.size() bytes; `out` must be large enough (returns 0 otherwise).
std::size_t encode_ddp_header(const DdpHeader& header, ByteSpan out);

}  // namespace uwarp::wire
