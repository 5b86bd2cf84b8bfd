// The vocabulary of uwarp's verbs: access flags, scatter/gather elements, work requests, work
// completions, queue pair states and device limits. Plain values, shared by the public API and
// the core; the names follow the OFA verbs that they mirror.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace uwarp {

// Memory access rights (bit mask), as ibv_access_flags.
namespace access {
inline constexpr std::uint32_t kLocalWrite = 1u << 0;
inline constexpr std::uint32_t kRemoteWrite = 1u << 1;
inline constexpr std::uint32_t kRemoteRead = 1u << 2;
inline constexpr std::uint32_t kRemoteAtomic = 1u << 3;
inline constexpr std::uint32_t kMwBind = 1u << 4;
inline constexpr std::uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic | kMwBind;
// Not a right but a promise: on-demand paging (docs/on-demand-paging.md). The region may cover
// memory that is not mapped (yet, or any more); an access to such memory ends in the error the
// RFCs give for it, not in a crash. Registered with address nullptr and length SIZE_MAX, it is
// the implicit region: the whole address space.
inline constexpr std::uint32_t kOnDemand = 1u << 5;
}  // namespace access

// One piece of local memory in a work request.
struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

enum class WrOpcode : std::uint8_t {
  kSend,
  kSendWithInvalidate,  // invalidates `invalidate_rkey` at the receiver
  kRdmaWrite,
  kRdmaRead,
  // Local operations, carried out in posting order (after the requests before them have
  // started; kFence: after earlier RDMA Reads have completed), nothing on the wire:
  kBindWindow,          // binds the window whose STag index `rkey` has, as `rkey`, over
                        // sg_list[0] (address, length, lkey: the region), with `access`
                        // (MemoryWindow::rkey_with_key; type 1: QueuePair::bind_mw)
  kLocalInvalidate,     // invalidates `invalidate_rkey` (a type 2 window or a fast region)
  kRegisterFastRegion,  // registers the fast region whose index `rkey` has, as `rkey`, over
                        // sg_list[0] (address, length), addressed from `remote_addr`, with
                        // `access` (FastRegion::rkey_with_key gives the STag)
  // RFC 7306 RDMA Write with Immediate Data: the Write, then an Immediate Data message that
  // consumes a receive at the peer and completes it with `imm_data` (kRecvRdmaWithImm). With no
  // data, only the Immediate Data message is sent. uwarp has no Send with Immediate: RFC 7306
  // defines none (docs/immediate-data.md).
  kRdmaWriteWithImm,
  // RFC 7306 atomic operations on the naturally aligned 64-bit word at `remote_addr` of `rkey`
  // (the peer's region needs access::kRemoteAtomic); the word's value before the operation is
  // stored, in host byte order, in sg_list[0] (one SGE of 8 bytes, with local write access).
  // The word is in the responder's host byte order (docs/atomics.md).
  kAtomicFetchAdd,      // adds `compare_add`
  kAtomicCompareSwap,   // if the word equals `compare_add`, stores `swap`
  kAtomicSwap,          // stores `swap` (RFC 7306 Swap; ibverbs has no such opcode)
};

namespace send_flags {
inline constexpr std::uint32_t kSignaled = 1u << 0;   // produce a completion on success
inline constexpr std::uint32_t kSolicited = 1u << 1;  // Send with Solicited Event
inline constexpr std::uint32_t kInline = 1u << 2;     // copy the data at post time
inline constexpr std::uint32_t kFence = 1u << 3;      // wait for prior RDMA Reads to complete
}  // namespace send_flags

struct SendWr {
  std::uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  std::span<const Sge> sg_list;
  std::uint32_t flags = send_flags::kSignaled;
  std::uint64_t remote_addr = 0;  // RDMA Write / Read: the remote tagged offset
  std::uint32_t rkey = 0;         // RDMA Write / Read: the remote STag
  std::uint32_t invalidate_rkey = 0;
  std::uint32_t access = 0;  // kBindWindow, kRegisterFastRegion: the rights granted
  // kRdmaWriteWithImm: the 32-bit immediate value, sent big-endian as the first four of the
  // eight bytes of the Immediate Data message (the other four zero).
  std::uint32_t imm_data = 0;
  // The atomic opcodes' operands (ibverbs' wr.atomic.compare_add and swap).
  std::uint64_t compare_add = 0;
  std::uint64_t swap = 0;
};

struct RecvWr {
  std::uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
};

enum class WcStatus : std::uint8_t {
  kSuccess,
  kLocalLengthError,       // the message does not fit the receive buffer
  kLocalQpOperationError,  // internal QP consistency error
  kLocalProtectionError,   // bad lkey, out of bounds, or missing local access right
  kWrFlushError,           // the QP went to the error state before this WR completed; also
                           // every WR outstanding when its connection fails (a reset, a
                           // timeout, the peer gone), as Linux siw; the cause comes with the
                           // CM's kDisconnected and an async event (docs/errors.md)
  kRemoteInvalidRequestError,  // the peer refused the request (Terminate: operation, opcode)
  kRemoteAccessError,          // the peer refused the access (Terminate: protection, bounds)
  kRemoteOperationError,       // the peer failed the operation (other Terminates)
  kFatalError,                 // not produced by uwarp (kept for the verbs mapping): a failed
                               // connection flushes, see kWrFlushError
  kMemoryWindowBindError,      // a window bind broke the binding rules (verbs/stag_slot.h)
};
std::string_view to_string(WcStatus s);

// kRecvRdmaWithImm: a receive consumed by an RFC 7306 Immediate Data message (an RDMA Write
// with Immediate): byte_len is the length of the RDMA Write that came just before it, 0 if none.
enum class WcOpcode : std::uint8_t {
  kSend, kRdmaWrite, kRdmaRead, kRecv, kRecvRdmaWithImm, kBindWindow, kLocalInvalidate, kRegisterFastRegion,
  kAtomicFetchAdd, kAtomicCompareSwap, kAtomicSwap
};

namespace wc_flags {
inline constexpr std::uint32_t kWithInvalidate = 1u << 0;  // recv: invalidated_rkey is valid
inline constexpr std::uint32_t kSolicited = 1u << 1;       // recv: the Send asked for an event
inline constexpr std::uint32_t kWithImm = 1u << 2;         // recv: imm_data is valid
}  // namespace wc_flags

struct WorkCompletion {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  std::uint32_t byte_len = 0;  // recv: bytes received; read: bytes read
  std::uint32_t qp_num = 0;
  std::uint32_t flags = 0;
  std::uint32_t invalidated_rkey = 0;
  std::uint32_t imm_data = 0;  // with wc_flags::kWithImm: the immediate value (host order)
  std::uint32_t vendor_err = 0;  // the peer's raw Terminate control word, when one was received
};

enum class QpState : std::uint8_t { kReset, kInit, kRtr, kRts, kSqd, kSqe, kError };
std::string_view to_string(QpState s);

struct QpCaps {
  std::uint32_t max_send_wr = 256;
  std::uint32_t max_recv_wr = 256;
  std::uint32_t max_send_sge = 8;
  std::uint32_t max_recv_sge = 8;
  std::uint32_t max_inline_data = 256;
};

struct DeviceLimits {
  std::uint32_t max_qp = 16384;
  std::uint32_t max_qp_wr = 32768;
  std::uint32_t max_sge = 16;
  std::uint32_t max_sge_rd = 16;  // RDMA Read sink SGEs (siw: 1)
  std::uint32_t max_cq = 32768;
  std::uint32_t max_cqe = 1u << 20;
  std::uint32_t max_mr = 1u << 20;
  std::uint64_t max_mr_size = ~std::uint64_t{0};
  std::uint32_t max_pd = 1u << 20;
  std::uint32_t max_qp_rd_atom = 128;      // IRD, RDMA Reads and atomics together (siw: 128)
  std::uint32_t max_qp_init_rd_atom = 128;  // ORD
  std::uint32_t max_srq = 16384;
  std::uint32_t max_srq_wr = 32768;
  std::uint32_t max_srq_sge = 16;
  std::uint32_t max_inline_data = 1024;  // siw: 80
  std::uint32_t max_msg_size = 0x80000000u;
  std::uint32_t max_private_data = 508;  // 512 less the RFC 6581 IRD/ORD words
};

enum class AsyncEventType : std::uint8_t {
  kQpFatal,          // the QP went to the error state (Terminate sent or received, connection lost)
  kQpAccessError,    // a remote access violation ended the QP
  kQpLastWqeReached, // SRQ-attached QP in error: no more receive completions
  kCqError,          // completion queue overflow
  kSrqLimitReached,
};
std::string_view to_string(AsyncEventType t);

// An asynchronous event of the device: the one definition, used inside the library and by
// both APIs.
struct AsyncEvent {
  AsyncEventType type = AsyncEventType::kQpFatal;
  std::uint32_t qp_num = 0;
  void* context = nullptr;  // the user context of the QP, CQ or SRQ concerned
  std::string detail;       // e.g. the Terminate that ended the QP
};

// Connection-manager events (uwarp/cm.h).
enum class CmEventType : std::uint8_t {
  kConnectRequest,  // passive side: a peer asks to connect; accept() or reject() it
  kEstablished,     // the QP is in RTS and may transfer data
  kRejected,        // active side: the peer rejected (private data may explain)
  kConnectError,    // active side: refused, timed out, or the MPA exchange failed
  kDisconnected,    // the connection ended (locally, by the peer, or by an error)
};
std::string_view to_string(CmEventType t);

}  // namespace uwarp
