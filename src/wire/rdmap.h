// RDMAP messages: opcodes (RFC 5040 section 4.3, RFC 7306 section 8), the Read Request header
// (RFC 5040 section 4.4) and the Terminate message (RFC 5040 section 4.8, error codes section 7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/bytes.h"
#include "uwarp/expected.h"
#include "wire/ddp.h"
#include "wire/quantities.h"

namespace uwarp::wire {

enum class RdmapOpcode : std::uint8_t {
  kRdmaWrite = 0x0,
  kReadRequest = 0x1,
  kReadResponse = 0x2,
  kSend = 0x3,
  kSendInvalidate = 0x4,
  kSendSe = 0x5,
  kSendSeInvalidate = 0x6,
  kTerminate = 0x7,
  // RFC 7306 (bodies in wire/rdmap_ext.h): Immediate Data on queue 0, Atomic Requests on
  // queue 1, Atomic Responses on queue 3.
  kImmediateData = 0x8,
  kImmediateDataSe = 0x9,
  kAtomicRequest = 0xA,
  kAtomicResponse = 0xB,
};

std::string_view to_string(RdmapOpcode op);
constexpr bool is_rfc7306_opcode(std::uint8_t op) { return op >= 0x8 && op <= 0xB; }
constexpr bool is_send_opcode(RdmapOpcode op) {
  return op == RdmapOpcode::kSend || op == RdmapOpcode::kSendInvalidate || op == RdmapOpcode::kSendSe ||
         op == RdmapOpcode::kSendSeInvalidate;
}
constexpr bool is_immediate_data(RdmapOpcode op) {
  return op == RdmapOpcode::kImmediateData || op == RdmapOpcode::kImmediateDataSe;
}
// The message asks for a Solicited Event at the receiver (RFC 5040 section 5.1, RFC 7306).
constexpr bool is_solicited(RdmapOpcode op) {
  return op == RdmapOpcode::kSendSe || op == RdmapOpcode::kSendSeInvalidate ||
         op == RdmapOpcode::kImmediateDataSe;
}
constexpr bool carries_invalidate(RdmapOpcode op) {
  return op == RdmapOpcode::kSendInvalidate || op == RdmapOpcode::kSendSeInvalidate;
}

// The DDP header of an RDMAP message on untagged queue `queue` (RFC 5040 section 4.2: Send,
// Read Request, Terminate) and of one placed at a tagged buffer (section 4.1: Write, Read
// Response), for its first segment.
constexpr DdpHeader untagged_header(RdmapOpcode op, std::uint32_t queue, Msn msn) {
  DdpHeader h;
  h.tagged = false;
  h.opcode = static_cast<std::uint8_t>(op);
  h.queue = queue;
  h.msn = msn.value();
  return h;
}
constexpr DdpHeader tagged_header(RdmapOpcode op, Stag stag, TaggedOffset to) {
  DdpHeader h;
  h.tagged = true;
  h.opcode = static_cast<std::uint8_t>(op);
  h.stag = stag.value();
  h.tagged_offset = to.value();
  return h;
}

// RDMA Read Request message body (after the untagged DDP header, queue 1).
inline constexpr std::size_t kReadRequestSize = 28;
struct ReadRequest {
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_to = 0;
  std::uint32_t size = 0;
  std::uint32_t source_stag = 0;
  std::uint64_t source_to = 0;
};
Expected<ReadRequest, DdpHeaderError> decode_read_request(ConstByteSpan body);
std::size_t encode_read_request(const ReadRequest& rr, ByteSpan out);

// Terminate: layers, error types and codes.
enum class TermLayer : std::uint8_t { kRdmap = 0, kDdp = 1, kLlp = 2 };

struct TerminateCode {
  TermLayer layer = TermLayer::kRdmap;
  std::uint8_t etype = 0;  // 4 bits
  std::uint8_t ecode = 0;
  friend bool operator==(const TerminateCode&, const TerminateCode&) = default;
};

// The codes uwarp sends, named after RFC 5040 section 7 and RFC 5041 section 7.
namespace term {
inline constexpr TerminateCode kRdmapLocalCatastrophic{TermLayer::kRdmap, 0, 0x00};
inline constexpr TerminateCode kRdmapInvalidStag{TermLayer::kRdmap, 1, 0x00};
inline constexpr TerminateCode kRdmapBaseBounds{TermLayer::kRdmap, 1, 0x01};
inline constexpr TerminateCode kRdmapAccessRights{TermLayer::kRdmap, 1, 0x02};
inline constexpr TerminateCode kRdmapStagNotAssociated{TermLayer::kRdmap, 1, 0x03};
inline constexpr TerminateCode kRdmapToWrap{TermLayer::kRdmap, 1, 0x04};
inline constexpr TerminateCode kRdmapCannotInvalidateProtection{TermLayer::kRdmap, 1, 0x09};
inline constexpr TerminateCode kRdmapBadVersion{TermLayer::kRdmap, 2, 0x05};
inline constexpr TerminateCode kRdmapUnexpectedOpcode{TermLayer::kRdmap, 2, 0x06};
inline constexpr TerminateCode kRdmapCatastrophicStream{TermLayer::kRdmap, 2, 0x07};
inline constexpr TerminateCode kRdmapCannotInvalidate{TermLayer::kRdmap, 2, 0x09};
inline constexpr TerminateCode kRdmapUnspecified{TermLayer::kRdmap, 2, 0xFF};
inline constexpr TerminateCode kDdpCatastrophic{TermLayer::kDdp, 0, 0x00};
inline constexpr TerminateCode kDdpTaggedInvalidStag{TermLayer::kDdp, 1, 0x00};
inline constexpr TerminateCode kDdpTaggedBaseBounds{TermLayer::kDdp, 1, 0x01};
inline constexpr TerminateCode kDdpTaggedStagNotAssociated{TermLayer::kDdp, 1, 0x02};
inline constexpr TerminateCode kDdpTaggedToWrap{TermLayer::kDdp, 1, 0x03};
inline constexpr TerminateCode kDdpTaggedBadVersion{TermLayer::kDdp, 1, 0x04};
inline constexpr TerminateCode kDdpUntaggedInvalidQn{TermLayer::kDdp, 2, 0x01};
inline constexpr TerminateCode kDdpUntaggedNoBuffer{TermLayer::kDdp, 2, 0x02};
inline constexpr TerminateCode kDdpUntaggedInvalidMsn{TermLayer::kDdp, 2, 0x03};
inline constexpr TerminateCode kDdpUntaggedInvalidMo{TermLayer::kDdp, 2, 0x04};
inline constexpr TerminateCode kDdpUntaggedTooLong{TermLayer::kDdp, 2, 0x05};
inline constexpr TerminateCode kDdpUntaggedBadVersion{TermLayer::kDdp, 2, 0x06};
inline constexpr TerminateCode kLlpTcpStreamLost{TermLayer::kLlp, 0, 0x01};
inline constexpr TerminateCode kLlpBadCrc{TermLayer::kLlp, 0, 0x02};
inline constexpr TerminateCode kLlpBadFpdu{TermLayer::kLlp, 0, 0x03};
inline constexpr TerminateCode kLlpInvalidRequestReply{TermLayer::kLlp, 0, 0x04};
inline constexpr TerminateCode kLlpLocalCatastrophic{TermLayer::kLlp, 0, 0x05};
inline constexpr TerminateCode kLlpInsufficientIrd{TermLayer::kLlp, 0, 0x06};
inline constexpr TerminateCode kLlpNoMatchingRtr{TermLayer::kLlp, 0, 0x07};
}  // namespace term

std::string describe(const TerminateCode& code);
// The RFC's names of the code's error type and error code (RFC 5040 section 7.2, RFC 5041
// section 7.2, the LLP codes of RFC 5044 and RFC 6581): "untagged buffer error: invalid MSN, no
// buffer available"; "unknown" parts for codes no RFC names.
std::string terminate_error_name(const TerminateCode& code);
// describe() and the names: "DDP/2/0x02 (untagged buffer error: invalid MSN, no buffer available)".
std::string describe_named(const TerminateCode& code);

// Terminate control word flags ("Hdrct", RFC 5040 section 4.8).
inline constexpr std::uint32_t kTermFlagM = 0x00008000;  // DDP segment length valid
inline constexpr std::uint32_t kTermFlagD = 0x00004000;  // DDP header included
inline constexpr std::uint32_t kTermFlagR = 0x00002000;  // RDMAP header included
inline constexpr std::size_t kTerminateControlSize = 4;
inline constexpr std::size_t kTerminateMaxSize =
    kTerminateControlSize + 2 + kMaxDdpHeaderSize + kReadRequestSize;

// A Terminate message body (after the untagged DDP header, queue 2).
struct TerminateMessage {
  TerminateCode code;
  std::uint32_t raw_control = 0;  // as received: siw swaps layer and etype (see docs/interop.md)
  bool has_control = true;        // false: the body ended before its control word
  bool has_segment_length = false;
  std::uint16_t segment_length = 0;  // ULPDU length of the terminated segment
  ConstByteSpan ddp_header;          // the terminated segment's DDP header (14 or 18 bytes)
  ConstByteSpan rdmap_header;        // a terminated Read Request's 28-byte body
};

enum class TerminateError : std::uint8_t { kTruncated };
Expected<TerminateMessage, TerminateError> decode_terminate(ConstByteSpan body);
// Returns the bytes written, 0 if `out` is too small.
std::size_t encode_terminate(const TerminateMessage& msg, ByteSpan out);

}  // namespace uwarp::wire
