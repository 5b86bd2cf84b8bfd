// Read Request bodies of outbound Reads (and of our RFC 6581 RTR Read), and the bodies of
// outbound Immediate Data messages (RFC 7306), encoded into slots that
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

class ReadRequestBodies {
 public:
  static constexpr std::size_t kSlots = BodySlots<wire::kReadRequestSize>::kSlots;
  static constexpr std::size_t kMaxInBatch = BodySlots<wire::kReadRequestSize>::kMaxInBatch;

  // Encodes `rr` into the next slot; the span stays valid for kSlots - 1 further encodes.
  ConstByteSpan encode(const wire::ReadRequest& rr) {
    const ByteSpan body = slots_.next();
    wire::encode_read_request(rr, body);
    return body;
  }

 private:
  BodySlots<wire::kReadRequestSize> slots_;
};

// The same for the eight bytes of RFC 7306 Immediate Data messages.
class ImmediateDataBodies {
 public:
  ConstByteSpan encode(const wire::ImmediateData& imm) {
    const ByteSpan body = slots_.next();
    wire::encode_immediate_data(imm, body);
    return body;
  }

 private:
  BodySlots<wire::kImmediateDataSize> slots_;
};

}  // namespace uwarp::proto
