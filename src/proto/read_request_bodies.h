// Read Request bodies of outbound Reads (and of our RFC 6581 RTR Read), encoded into slots that
// outlive the transmit batch pointing at them: the batch's iovecs refer to a body until its
// FPDU is sent, and a batch holds several Read Requests, so each body gets its own slot. A
// batch holds at most TxBatch::kMaxFpdus FPDUs, and a slot is reused only that many encodes
// later.
//
// Owner: the connection's transmit side (a member; the slots are inline, no allocation).
// Thread: not thread-safe; the engine's owner thread.
#pragma once

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
