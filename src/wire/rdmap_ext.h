// The message bodies of the RDMAP extensions of RFC 7306 (after the untagged DDP header): the
// Immediate Data message (opcodes 0x8 and 0x9, queue 0), the Atomic Request (0xA, queue 1) and
// the Atomic Response (0xB, queue 3). Pure codecs over byte spans; every field big-endian.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"
#include "uwarp/expected.h"

namespace uwarp::wire {

enum class ExtBodyError : std::uint8_t { kTruncated };

// Immediate Data: eight bytes of data for the receiver's completion. uwarp's verbs carry 32 bits
// of it (ibverbs' imm_data): the first four bytes, the last four sent as zero.
inline constexpr std::size_t kImmediateDataSize = 8;
struct ImmediateData {
  std::uint64_t data = 0;  // the eight bytes, read big-endian
  // The verbs' 32-bit immediate value: the first four bytes, big-endian; and back.
  constexpr std::uint32_t verbs_value() const { return static_cast<std::uint32_t>(data >> 32); }
  static constexpr ImmediateData from_verbs(std::uint32_t imm) {
    return ImmediateData{std::uint64_t{imm} << 32};
  }
};
Expected<ImmediateData, ExtBodyError> decode_immediate_data(ConstByteSpan body);
// Returns the bytes written (kImmediateDataSize), 0 if `out` is too small.
std::size_t encode_immediate_data(const ImmediateData& imm, ByteSpan out);

// Atomic Request: the operation in the low 4 bits of the first word (the other 28 reserved),
// the requester's identifier, the target (a 64-bit word at STag + TO) and four 64-bit operands.
inline constexpr std::size_t kAtomicRequestSize = 52;
enum class AtomicOpcode : std::uint8_t { kFetchAdd = 0x0, kSwap = 0x1, kCompareSwap = 0x2 };
struct AtomicRequest {
  std::uint8_t opcode = 0;          // AtomicOpcode, 4 bits as received
  std::uint32_t reserved = 0;       // the 28 bits before it, as received (sent as zero)
  std::uint32_t request_id = 0;
  std::uint32_t remote_stag = 0;
  std::uint64_t remote_to = 0;
  std::uint64_t add_swap_data = 0;  // FetchAdd: Add Data; Swap and CompareSwap: Swap Data
  std::uint64_t add_swap_mask = 0;  // Add Mask / Swap Mask
  std::uint64_t compare_data = 0;   // CompareSwap
  std::uint64_t compare_mask = 0;
};
Expected<AtomicRequest, ExtBodyError> decode_atomic_request(ConstByteSpan body);
std::size_t encode_atomic_request(const AtomicRequest& r, ByteSpan out);

// Atomic Response: the request's identifier and the 64-bit value the target held before.
inline constexpr std::size_t kAtomicResponseSize = 12;
struct AtomicResponse {
  std::uint32_t original_request_id = 0;
  std::uint64_t original_value = 0;
};
Expected<AtomicResponse, ExtBodyError> decode_atomic_response(ConstByteSpan body);
std::size_t encode_atomic_response(const AtomicResponse& r, ByteSpan out);

}  // namespace uwarp::wire
