// Read Request bodies of outbound Reads (and of our RFC 6581 RTR Read), and the bodies of the
// outbound RFC 7306 messages (Immediate Data, Atomic Request and Response), encoded into slots that
// outlive the transmit batch pointing at them: the batch's iovecs refer to a body until its
// FPDU is sent, and a batch holds several Read Requests, so each body gets its own slot. Until
// it is drained a batch holds at most kMaxInBatch Read Requests, and one more may have been
// encoded for the message that no longer fit; a slot is reused only kSlots encodes later.
//
// Owner: the connection's transmit side (a member; the slots are inline, no allocation).
// Thread: not thread-safe; the engine's owner thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "base/bytes.h"
#include "proto/tx_batch.h"
#include "wire/rdmap.h"
#include "wire/rdmap_ext.h"

namespace uwarp::proto {

// Fixed-size message bodies in slots that outlive the batch pointing at them.
template <std::size_t Size>
class BodySlots {
 public:
  static constexpr std::size_t kSlots = TxBatch::kMaxFpdus;
  // Such an FPDU takes three iovecs: header, body, pad and CRC.
  static constexpr std::size_t kMaxInBatch = std::min(TxBatch::kMaxFpdus, TxBatch::kMaxIov / 3);
  static_assert(kMaxInBatch + 1 <= kSlots, "a slot could be reused while a batch points at it");

  // The next slot; it stays valid for kSlots - 1 further calls.
  ByteSpan next() { return ByteSpan(slots_[next_++ % kSlots]); }

 private:
  std::array<std::array<std::uint8_t, Size>, kSlots> slots_{};
  std::size_t next_ = 0;
};

// Bodies of one kind, each encoded by `Encode` into a slot of its own.
template <typename Body, std::size_t Size, std::size_t (*Encode)(const Body&, ByteSpan)>
class EncodedBodies {
 public:
  static constexpr std::size_t kSlots = BodySlots<Size>::kSlots;
  static constexpr std::size_t kMaxInBatch = BodySlots<Size>::kMaxInBatch;

  // Encodes `body` into the next slot; the span stays valid for kSlots - 1 further encodes.
  ConstByteSpan encode(const Body& body) {
    const ByteSpan slot = slots_.next();
    Encode(body, slot);
    return slot;
  }

 private:
  BodySlots<Size> slots_;
};

using ReadRequestBodies =
    EncodedBodies<wire::ReadRequest, wire::kReadRequestSize, wire::encode_read_request>;
using ImmediateDataBodies =
    EncodedBodies<wire::ImmediateData, wire::kImmediateDataSize, wire::encode_immediate_data>;
using AtomicRequestBodies =
    EncodedBodies<wire::AtomicRequest, wire::kAtomicRequestSize, wire::encode_atomic_request>;
using AtomicResponseBodies =
    EncodedBodies<wire::AtomicResponse, wire::kAtomicResponseSize, wire::encode_atomic_response>;

}  // namespace uwarp::proto
