// The rsocket protocol of rdma-core's librdmacm, as it runs on iWARP, without any I/O: its wire
// formats and the receiver's accounting of the peer's data. rsocket.cc and rsocket_stream.cc
// drive it over verbs; the fuzzer feeds it arbitrary peer input.
//
// The protocol (one RC QP per stream socket):
//   - Connection: rdma_connect/rdma_accept carry ConnData (40 bytes) both ways: the version (1),
//     the sender's byte order and iomap support, its receive credits (its receive queue depth),
//     where the peer may write SGL updates (`target_sgl`: RS_SGL_SIZE = 2 entries of 16 bytes,
//     followed by `iomap_entries` iomap entries of 24 bytes, all in one remotely writable
//     region) and the first half of its receive buffer (`data_buf`).
//   - Data: an RDMA Write of the bytes into the peer's receive buffer at the position of the
//     SGL entry in use, then a 4-byte Send carrying message(kData, length). iWARP has no Write
//     with Immediate, so the message travels as a Send (rdma-core's RS_OPT_MSG_SEND).
//   - Credits: the receiver grants "sequence numbers" (messages it can take) and buffer halves.
//     A credit update is message(kSgl, consumed + queue depth); when half of the receive buffer
//     is free again, it is preceded by an RDMA Write of a 16-byte SGL entry (address, key,
//     length of that half) into the sender's target_sgl, entries used alternately.
//   - riomap/riowrite: a 24-byte iomap entry (offset, SGL entry) written into the peer's iomap
//     table, then message(kIomapSgl, index); riowrite is a plain RDMA Write to that memory.
//   - Control: message(kCtrl, kDisconnect | kShutdown | kKeepalive).
// Messages and SGL/iomap entries are in the sender's byte order (flag kConnFlagNetOrder tells a
// big-endian sender); uwarp runs on little-endian hosts and refuses a big-endian peer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace uwarp::rdmacm::rs {

inline constexpr std::uint8_t kProtocolVersion = 1;
inline constexpr std::uint8_t kConnFlagNetOrder = 1 << 0;  // the sender is big-endian
inline constexpr std::uint8_t kConnFlagIomap = 1 << 1;     // iomap entries follow target_sgl
inline constexpr std::size_t kConnDataSize = 40;
inline constexpr std::size_t kSglEntries = 2;
inline constexpr std::size_t kSgeSize = 16;
inline constexpr std::size_t kIomapEntrySize = 24;
inline constexpr std::size_t kMessageSize = 4;

enum class Op : std::uint32_t {
  kData = 0,
  kWrite = 2,  // never sent: marks riowrite's Writes locally
  kSgl = 4,
  kIomapSgl = 6,
  kCtrl = 7,
};
enum class Ctrl : std::uint32_t { kDisconnect = 0, kKeepalive = 1, kShutdown = 2 };

inline constexpr std::uint32_t kMessageDataMask = 0x1FFFFFFF;
constexpr std::uint32_t message(Op op, std::uint32_t data) {
  return (static_cast<std::uint32_t>(op) << 29) | (data & kMessageDataMask);
}
constexpr Op op_of(std::uint32_t msg) {
  return static_cast<Op>(msg >> 29);
}
constexpr std::uint32_t data_of(std::uint32_t msg) {
  return msg & kMessageDataMask;
}

// A message as it travels (little-endian: the byte order of every host uwarp runs on).
std::array<std::uint8_t, kMessageSize> encode_message(std::uint32_t msg);
std::uint32_t decode_message(std::span<const std::uint8_t> bytes);  // short input: zero-filled

// rdma-core's struct rs_sge: where, with which key, how much.
struct WireSge {
  std::uint64_t addr = 0;
  std::uint32_t key = 0;
  std::uint32_t length = 0;
};
std::array<std::uint8_t, kSgeSize> encode_sge(const WireSge& sge);
WireSge decode_sge(std::span<const std::uint8_t, kSgeSize> bytes);

// rdma-core's struct rs_iomap: the peer's riomap'ed memory at `offset` of its iomap space.
struct IomapEntry {
  std::uint64_t offset = 0;
  WireSge sge;
};
std::array<std::uint8_t, kIomapEntrySize> encode_iomap(const IomapEntry& entry);
IomapEntry decode_iomap(std::span<const std::uint8_t, kIomapEntrySize> bytes);

// rdma-core's struct rs_conn_data (multi-byte fields big-endian).
struct ConnData {
  std::uint8_t version = kProtocolVersion;
  std::uint8_t flags = kConnFlagIomap;
  std::uint16_t credits = 0;     // receive queue depth: messages the sender may send at once
  std::uint8_t iomap_scale = 0;  // iomap table size, encoded by iomap_scale_of
  WireSge target_sgl;            // `length` is the number of SGL entries (2)
  WireSge data_buf;              // the first half of the receive buffer
};
std::array<std::uint8_t, kConnDataSize> encode_conn_data(const ConnData& conn);
// nullopt: shorter than kConnDataSize (private data may be longer: the rest is ignored).
std::optional<ConnData> decode_conn_data(std::span<const std::uint8_t> bytes);

// The iomap table size's one-byte encoding (rdma-core's rs_value_to_scale/rs_scale_to_value
// with 8 bits): values up to 128 as they are, larger ones in units of 256.
std::uint8_t iomap_scale_of(int entries);
int iomap_entries_of(std::uint8_t scale);

// The receiver's side of one connection: a ring of `size` bytes that the peer fills through the
// halves it was offered, and the queue of its data messages. It decides when credits are due and
// checks every data message against what was offered, so that nothing the peer sends can make
// the application read outside the ring or past what was written. Not thread-safe (the owner
// locks).
class ReceiveRing {
 public:
  // `size`: even, at least 2. `depth`: the receive queue depth (credits granted at a time).
  ReceiveRing(std::uint32_t size, std::uint16_t depth);

  std::uint32_t size() const { return size_; }
  std::uint32_t half() const { return size_ / 2; }

  // The half offered in the connection data is the first (offset 0). Updates then offer the
  // halves in turn, each into the next of the peer's `entries` target_sgl entries (its
  // connection data says how many; 2 with every rsocket implementation).
  void set_peer_sgl_entries(std::uint32_t entries);

  // A data message: `length` more bytes at the write position. False (the peer broke the
  // protocol) when they exceed what was offered and not yet announced, or when more messages are
  // outstanding than the credits allow.
  bool on_data(std::uint32_t length);

  // Bytes the application can take now.
  std::uint64_t readable() const { return announced_ - consumed_; }
  bool has_data() const { return messages_ != 0; }

  // Where the next `n` (<= readable()) bytes are: one or two pieces of the ring.
  struct Piece {
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
  };
  std::array<Piece, 2> pieces(std::uint64_t n) const;
  // The application took `n` (<= readable()) bytes: frees them and counts the messages they
  // complete.
  void consume(std::uint64_t n);

  // A credit update is due: half the ring is free to offer again, or half the queue's messages
  // were taken since the last update.
  bool credit_due() const;
  struct CreditUpdate {
    std::uint32_t credits = 0;           // message(kSgl, credits)
    std::optional<std::uint32_t> offer;  // a half to offer: its offset in the ring
    std::uint32_t sgl_index = 0;         // which target_sgl entry of the peer it goes to
  };
  // Makes the update (call when credit_due() and the control slots allow it).
  CreditUpdate take_credit_update();

 private:
  std::uint32_t size_;
  std::uint16_t depth_;
  std::uint64_t offered_;         // bytes offered to the peer, cumulative
  std::uint64_t announced_ = 0;   // bytes announced by data messages, cumulative
  std::uint64_t consumed_ = 0;    // bytes the application took, cumulative
  std::uint64_t free_unoffered_;  // consumed bytes (and the initial second half) not re-offered
  std::uint32_t next_offer_;      // ring offset of the next half to offer
  std::uint32_t next_sgl_ = 1;    // entry 0 went in the connection data
  std::uint32_t peer_sgl_entries_ = kSglEntries;
  // The data messages announced and not fully consumed, oldest first, as a ring of `depth`
  // entries (the unconsumed length of each).
  std::vector<std::uint32_t> lengths_;
  std::uint32_t head_ = 0;
  std::uint32_t messages_ = 0;
  std::uint16_t taken_ = 0;        // messages fully consumed (rdma-core's rseq_no), mod 2^16
  std::uint16_t credit_mark_ = 0;  // taken_ at which the next update is due (rseq_comp)
};

}  // namespace uwarp::rdmacm::rs
