// What each kind of send work request is: which check it passes when posted, how the engine
// transmits it (proto::OutboundRequest::Kind) and which completion opcode it ends with. Pure
// functions of the request; the send queue (verbs/send_queue.h) holds the requests.
#pragma once

#include <cstdint>

#include "proto/rdmap_port.h"
#include "wire/rdmap_ext.h"
#include "uwarp/status.h"
#include "uwarp/types.h"

namespace uwarp::verbs {

// A bind, local invalidation or fast registration: carried out by the QP, nothing on the wire.
inline bool is_local_operation(WrOpcode opcode) {
  return opcode == WrOpcode::kBindWindow || opcode == WrOpcode::kLocalInvalidate ||
         opcode == WrOpcode::kRegisterFastRegion;
}
// An RFC 7306 atomic operation: answered by the peer, like an RDMA Read.
inline bool is_atomic(WrOpcode opcode) {
  static_assert(static_cast<int>(WrOpcode::kAtomicSwap) -
                    static_cast<int>(WrOpcode::kAtomicFetchAdd) == 2,
                "the three atomic opcodes are consecutive");
  return opcode >= WrOpcode::kAtomicFetchAdd && opcode <= WrOpcode::kAtomicSwap;
}
// Its result, or a Read's data, is written to the request's local memory.
inline bool writes_local_memory(WrOpcode opcode) {
  return opcode == WrOpcode::kRdmaRead || is_atomic(opcode);
}
// Messages of at most kLittleMessageBytes that take at most kLittleMessageFpdus FPDUs, and
// Reads of at most kLittleReadBytes, count as little (posts_little).
inline constexpr std::uint64_t kLittleMessageBytes = 64 * 1024;
inline constexpr std::uint64_t kLittleMessageFpdus = 16;
inline constexpr std::uint64_t kLittleReadBytes = 256 * 1024;
// Whether the request is little enough that its doorbell may wait for the posts after it
// (verbs::Doorbell::kMayWait, runtime/doorbell_batching.h): a local operation (nothing on the
// wire), an atomic, a Read of at most kLittleReadBytes, or a message (Send, Write) of at most
// kLittleMessageBytes that takes at most kLittleMessageFpdus FPDUs of `fpdu_payload` bytes
// (LinkBinding::fpdu_payload). Such messages share one send with the posts after them, at least
// three to a send (TxBatch::kMaxFpdus is 48): at MSS 1448 those of up to about 22 KiB, on
// loopback (FPDUs of about 64 KiB) those of up to 64 KiB, where one `sendmsg` per 64 KiB Write
// held ib_write_bw to 0.8x iperf3. A message of many more FPDUs fills most of a send by itself,
// so holding it back only delays it: 32 KiB Writes between namespaces (23 FPDUs) gained
// nothing, 64 KiB ones (46) lost a fifth. A larger Read's Request is also a small
// FPDU, but one send per Read is nothing beside the data it brings, and holding it back cost 1
// MiB Reads between namespaces a tenth of their rate (docs/performance.md, "A burst of Read
// Requests in one send", "Writes of up to 64 KiB in one send").
// length: its payload (PostedShape::length).
inline bool posts_little(WrOpcode opcode, std::uint64_t length, std::uint64_t fpdu_payload) {
  if (is_local_operation(opcode) || is_atomic(opcode)) return true;
  if (opcode == WrOpcode::kRdmaRead) return length <= kLittleReadBytes;
  return length <= kLittleMessageBytes && length <= kLittleMessageFpdus * fpdu_payload;
}
// The Atomic Request of an atomic work request: the RFC 7306 operation, its operands and masks
// (the verbs operations act on the whole word); the transmitter adds identifier and target.
wire::AtomicRequest atomic_operands(WrOpcode opcode, std::uint64_t compare_add, std::uint64_t swap);

// The request's shape as posted: its payload length, and whether its data is copied at post
// (inline).
struct PostedShape {
  std::uint64_t length = 0;
  bool is_inline = false;
};
// Checks `wr` against the QP's SGE limit and the device's limits (reads_allowed: false refuses
// an RDMA Read or an atomic, the connection's ORD being 0) and fills in `shape`; the queue's own room is the
// caller's. Returns why the request is refused (an invalid argument), or null if it is not. (No
// Status here: this is on every post's path, and a refusal is rare.)
const char* check_send_wr(const SendWr& wr, std::uint32_t max_sge, const DeviceLimits& limits,
                          bool reads_allowed, PostedShape& shape);

proto::OutboundRequest::Kind request_kind(WrOpcode opcode, std::uint32_t length);
WcOpcode completion_opcode(WrOpcode opcode);

}  // namespace uwarp::verbs
