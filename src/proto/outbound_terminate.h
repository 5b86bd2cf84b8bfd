// The one Terminate a connection sends (RFC 5040 section 7): encoded when reception fails, sent
// once, as the next message to start (ahead of anything queued), after which the stream closes.
//
// Owner: the connection's RdmapEngine (a member; the body is inline, no allocation).
// Thread: not thread-safe; the engine's owner thread. The body stays valid for the engine's
// lifetime, so a transmit batch may point at it until the batch is sent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "base/bytes.h"
#include "proto/fpdu_reader.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

class OutboundTerminate {
 public:
  bool queued() const { return queued_; }
  // Encodes the Terminate that answers `failure`, with copies of the DDP header (and a Read
  // Request's RDMAP header) it terminates. The caller checked !queued(). Returns its code.
  const wire::TerminateCode& queue(const RxFailure& failure);
  // The body to send: true the first time after queue(), false before and afterwards.
  bool start(ConstByteSpan& body) {
    if (!queued_ || started_) return false;
    started_ = true;
    body = ConstByteSpan(body_.data(), size_);
    return true;
  }

 private:
  bool queued_ = false;
  bool started_ = false;
  wire::TerminateCode code_;
  std::array<std::uint8_t, wire::kTerminateMaxSize> body_{};
  std::size_t size_ = 0;
};

}  // namespace uwarp::proto
