// The statistics file of one process: its layout, shared by the writer (the library, in the
// process that uses uwarp: stats/export.h) and the readers (`uwarp stat`: stats/snapshot.h).
// The format and its versioning rule are described in docs/statistics.md; a change here follows
// that rule.
//
// The file is a shared-memory mapping: a FileHeader, then `device_count` DeviceRecords, then
// `qp_count` QpSlots, each table at the offset and stride the header gives. Every field that
// changes while the process runs is a lock-free 64- or 32-bit atomic, written with relaxed
// stores; readers load them relaxed and accept that a snapshot is not one instant (each value is
// whole, the set of values is not taken at once). What is written once (names, sizes) is written
// before the record's `state` is published with a release store.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uwarp::stats {

// "uwarpst" and a NUL: the first eight bytes of every statistics file.
inline constexpr char kMagic[8] = {'u', 'w', 'a', 'r', 'p', 's', 't', '\0'};
// Bumped on every change a reader of the previous version would misread (docs/statistics.md).
// Appending counters (below kCounterSlots) or fields at the end of a record, where the header's
// sizes tell readers to skip them, does not change it.
inline constexpr std::uint32_t kVersion = 1;

// The counters of a QP, or a device's totals. Indexes are part of the format: a new counter is
// appended before kCount (readers show the ones they know, up to the header's counter_count).
enum class Counter : std::uint16_t {
  kTxBytes,  // bytes handed to TCP (FPDUs: headers, payload, markers, CRC)
  kRxBytes,  // bytes received from TCP
  kTxFpdus,  // FPDUs framed for sending
  kRxFpdus,  // FPDUs received whole
  // Work requests posted, by opcode: kPostedSend + uwarp::WrOpcode (include/uwarp/types.h).
  kPostedSend,
  kPostedSendInvalidate,
  kPostedWrite,
  kPostedRead,
  kPostedBindWindow,
  kPostedLocalInvalidate,
  kPostedRegisterFastRegion,
  kPostedWriteImm,
  kPostedFetchAdd,
  kPostedCompareSwap,
  kPostedSwap,
  kPostedSolicited,  // Sends (plain or with Invalidate) with Solicited Event, also counted above
  kPostedRecv,       // receives posted to the QP's own receive queue
  // Completions by status: kCompletedSuccess + uwarp::WcStatus.
  kCompletedSuccess,
  kCompletedLocalLengthError,
  kCompletedLocalQpOperationError,
  kCompletedLocalProtectionError,
  kCompletedWrFlushError,
  kCompletedRemoteInvalidRequestError,
  kCompletedRemoteAccessError,
  kCompletedRemoteOperationError,
  kCompletedFatalError,
  kCompletedMemoryWindowBindError,
  kTerminatesSent,      // by code: DeviceRecord::terminates
  kTerminatesReceived,  // by code: DeviceRecord::terminates
  kCrcErrors,           // FPDUs whose MPA CRC did not match (each ends the connection)
  kSendStalls,  // waits for send space: a send found the socket full (its share of the send budget)
  kTcpRetransmits,  // TCP_INFO tcpi_total_retrans, sampled (runtime::Stream)
  // Doorbell batching (runtime/doorbell_batching.h): posts left queued for the posting thread's
  // next poll, and deadlines that found posts still queued (the engine thread sent them).
  kPostsLeftForPoll,
  kBatchDeadlines,
  kCount,
};
inline constexpr std::size_t kCounterCount = static_cast<std::size_t>(Counter::kCount);
// Room in the layout for counters of later versions.
inline constexpr std::size_t kCounterSlots = 48;
static_assert(kCounterCount <= kCounterSlots);

// The JSON and display name of each counter ("tx_bytes", "posted_send", "completed_success").
std::string_view counter_name(Counter c);
// Counters shown as a rate in `uwarp stat -i` (bytes, FPDUs, work requests, completions).
bool counter_is_rate(Counter c);

struct alignas(64) Counters {
  std::atomic<std::uint64_t> value[kCounterSlots];
  std::atomic<std::uint64_t>& operator[](Counter c) { return value[static_cast<std::size_t>(c)]; }
  const std::atomic<std::uint64_t>& operator[](Counter c) const {
    return value[static_cast<std::size_t>(c)];
  }
};

// A Terminate code as a key: 0x01LLTTCC (layer, etype, ecode); 0 marks an unused entry.
constexpr std::uint32_t terminate_key(std::uint8_t layer, std::uint8_t etype, std::uint8_t ecode) {
  return 0x01000000u | (std::uint32_t{layer} << 16) | (std::uint32_t{etype} << 8) | ecode;
}
struct TerminateCount {
  std::atomic<std::uint32_t> key;  // terminate_key(); written once, before the counts move
  std::uint32_t reserved;
  std::atomic<std::uint64_t> sent;
  std::atomic<std::uint64_t> received;
};
inline constexpr std::size_t kTerminateCodes = 32;

// Record states: a free record, or one in use (its fixed fields are written).
inline constexpr std::uint32_t kFree = 0;
inline constexpr std::uint32_t kLive = 1;

// One device (a Context: an open uwarp0) of the process.
struct alignas(64) DeviceRecord {
  std::atomic<std::uint32_t> state;  // kFree or kLive, published with release
  // Odd while the writer moves a closing QP's counters into `retired` (and frees its slot): a
  // reader that sees it odd, or changed across its read, reads again (a seqlock).
  std::atomic<std::uint32_t> seq;
  std::uint32_t index;        // the number of the device in this process, from 0
  std::uint32_t send_budget;  // bytes (runtime/send_budget.h); 0: no bound
  std::uint64_t opened_ns;    // CLOCK_REALTIME
  char name[16];              // "uwarp0"
  char io_backend[16];        // "io_uring", "epoll"
  std::atomic<std::uint64_t> qps_created;
  std::atomic<std::uint64_t> qps_destroyed;
  std::atomic<std::uint64_t> qps_without_slot;      // created while the QP table was full
  std::atomic<std::uint64_t> terminate_codes_lost;  // Terminates whose code found no free entry
  std::uint8_t reserved[64];
  // The counters of the device's QPs that are gone (and of live QPs that have no slot, as they
  // close); a device's totals are these plus its live slots'.
  Counters retired;
  TerminateCount terminates[kTerminateCodes];
};

// One QP, from its creation to its destruction.
struct alignas(64) QpSlot {
  std::atomic<std::uint32_t> state;  // kFree or kLive, published with release
  // Incremented each time the slot is taken or freed: a reader that sees it change across its
  // read of the slot discards what it read.
  std::atomic<std::uint32_t> generation;
  std::uint32_t device;  // DeviceRecord::index
  std::uint32_t qp_num;
  std::uint64_t created_ns;  // CLOCK_REALTIME
  // The connection, once the QP has one (written by the stream's start before `connected` is
  // set with release; a QP taken through RESET to a new connection writes them again).
  std::atomic<std::uint32_t> connected;  // a count of connections: 0 none yet
  std::uint16_t local_port;
  std::uint16_t peer_port;
  std::uint8_t family;  // AF_INET or AF_INET6
  std::uint8_t reserved0[3];
  std::uint8_t local_addr[16];  // network byte order (IPv4: the first four bytes)
  std::uint8_t peer_addr[16];
  // TCP_INFO, sampled every second by the engine thread while connected (runtime::Stream).
  std::atomic<std::uint32_t> tcp_rtt_us;
  std::atomic<std::uint32_t> tcp_rttvar_us;
  std::atomic<std::uint32_t> tcp_snd_cwnd;  // segments
  std::atomic<std::uint32_t> tcp_state;     // TCP_ESTABLISHED, ...
  std::uint8_t reserved[40];
  Counters counters;
};

struct alignas(64) FileHeader {
  char magic[8];          // kMagic
  std::uint32_t version;  // kVersion
  // Sizes and places: readers take strides and offsets from here, never from their own
  // sizeof, so that records that grew at the end in a compatible version still read.
  std::uint32_t header_size;
  std::uint32_t device_size;
  std::uint32_t device_count;
  std::uint64_t device_offset;
  std::uint32_t qp_size;
  std::uint32_t qp_count;
  std::uint64_t qp_offset;
  std::uint32_t counter_count;  // counters the writer knows (kCounterCount), at most kCounterSlots
  std::uint32_t terminate_codes;  // kTerminateCodes
  std::uint64_t file_size;
  std::uint32_t pid;
  std::uint32_t reserved0;
  // The process's start time (/proc/PID/stat field 22, clock ticks since boot): a reader that
  // finds another start time for the PID knows the file outlived its process.
  std::uint64_t process_start_ticks;
  std::uint64_t created_ns;          // CLOCK_REALTIME
  char library_version[32];          // "0.1.0"
  char program[64];                  // /proc/self/comm
  std::atomic<std::uint32_t> ready;  // 1 once every field above is written (release)
  std::uint8_t reserved[60];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && sizeof(std::atomic<std::uint32_t>) == 4);
static_assert(sizeof(Counters) == kCounterSlots * 8);
static_assert(sizeof(FileHeader) == 256);

// The directories the files are in, in order: $XDG_RUNTIME_DIR/uwarp when XDG_RUNTIME_DIR is set
// (an absolute path), then /dev/shm/uwarp-UID. A writer puts its file in the first one it can
// create (0700); readers look in both. Each file is named after its process's PID.
std::vector<std::string> directories();

// "192.0.2.1:7174" or "[2001:db8::1]:7174" from a slot's address fields; empty for another family.
std::string endpoint(std::uint8_t family, const std::uint8_t* addr, std::uint16_t port);

}  // namespace uwarp::stats
