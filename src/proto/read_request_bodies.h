// Read Request bodies of outbound Reads (and of our RFC 6581 RTR Read), encoded into slots that
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

namespace uwarp::proto {

class ReadRequestBodies {
 public:
  static constexpr std::size_t kSlots = TxBatch::kMaxFpdus;
  // A Read Request FPDU takes three iovecs: header, body, pad and CRC.
  static constexpr std::size_t kMaxInBatch = std::min(TxBatch::kMaxFpdus, TxBatch::kMaxIov / 3);
  static_assert(kMaxInBatch + 1 <= kSlots, "a slot could be reused while a batch points at it");

  // Encodes `rr` into the next slot; the span stays valid for kSlots - 1 further encodes.
  ConstByteSpan encode(const wire::ReadRequest& rr) {
    auto& body = slots_[next_++ % kSlots];
    wire::encode_read_request(rr, body);
    return ConstByteSpan(body);
  }

 private:
  std::array<std::array<std::uint8_t, wire::kReadRequestSize>, kSlots> slots_{};
  std::size_t next_ = 0;
};

}  // namespace uwarp::proto
