// MPA connection setup, RFC 5044 section 7.1 (request/reply exchange, revision and CRC rules,
// rejection with private data) and RFC 6581 (enhanced mode: IRD/ORD exchange and peer-to-peer
// RTR selection). Sans I/O: bytes in, bytes and a verdict out; timeouts are the caller's.
//
// Markers (RFC 5044 section 5) are agreed per direction: the M bit of a frame asks the other
// side to send markers to the frame's sender. uwarp asks for them only when told to, and sends
// them whenever asked.
//
// Towards Linux siw (docs/interop.md): siw initiates with revision 2 and the enhanced bit and
// cannot fall back; as responder it echoes the request's revision and flags and rejects markers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "proto/rtr.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"

namespace uwarp::proto {

// What the local side asks for.
struct MpaParams {
  std::uint8_t revision = 2;   // 1 or 2; revision 2 sends the RFC 6581 IRD/ORD words
  bool crc = false;            // ask for CRC (it is used if either side asks)
  bool markers = false;        // ask the peer to send MPA markers
  bool peer_to_peer = false;   // RFC 6581 peer-to-peer mode: an RTR precedes all data
  bool offer_write_rtr = true;  // initiator: RTR kinds it can send
  bool offer_read_rtr = true;
  bool offer_send_rtr = false;
  std::uint16_t ird = 16;  // inbound RDMA Reads we serve at once
  std::uint16_t ord = 16;  // outbound RDMA Reads we issue at once
  std::vector<std::uint8_t> private_data;
  // Not negotiated, not sent: the FPDU size this side's transmitter aims for where the TCP MSS
  // is smaller (0: FPDUs fit the segment, as RFC 5044 has senders do): ConnectionParams::fpdu_size.
  std::size_t fpdu_size = 0;
};

// The agreed connection parameters.
struct MpaOutcome {
  std::uint8_t revision = 2;
  bool crc = false;
  bool send_markers = false;     // the peer asked for markers: ours carry them
  bool receive_markers = false;  // we asked for them: the peer's FPDUs carry them
  bool enhanced = false;
  std::uint16_t ird = 0;
  std::uint16_t ord = 0;
  RtrType rtr = RtrType::kNone;  // initiator: RTR to send; responder: RTR to expect
  std::vector<std::uint8_t> peer_private_data;
};

// Largest application private data: 512 bytes by RFC 5044, less the IRD/ORD words in enhanced
// mode. (Linux siw accepts only 256 in all, so 252 towards siw.)
inline constexpr std::size_t kMaxPrivateData = wire::kMpaMaxPrivateData - wire::kMpaEnhancedWordsSize;

enum class MpaStep : std::uint8_t { kNeedMore, kDone, kRejected, kFailed };

struct MpaProgress {
  MpaStep step = MpaStep::kNeedMore;
  std::size_t consumed = 0;  // bytes of input used; the rest belongs to the FPDU stream
  std::string reason;        // kFailed, kRejected: what went wrong, for logs and events
  // kFailed: a Terminate to send before closing, when the RFC asks for one.
  std::optional<wire::TerminateCode> terminate;
};

class MpaInitiator {
 public:
  explicit MpaInitiator(MpaParams params) : params_(std::move(params)) {}
  // The MPA request frame to send first (empty if the private data is too long).
  std::vector<std::uint8_t> request() const;
  // Feed reply bytes (accumulated by the caller from the start of the stream).
  MpaProgress on_reply_bytes(ConstByteSpan received);
  // Valid after kDone (rtr: the RTR this side must send) or kRejected (peer_private_data).
  const MpaOutcome& outcome() const { return outcome_; }
  const MpaParams& params() const { return params_; }

 private:
  // The steps of on_reply_bytes after the frame has decoded and was not rejected: they agree on
  // IRD, ORD and the RTR in outcome_, or return the failure that refuses the reply.
  std::optional<MpaProgress> agree_on_words(const wire::MpaEnhancedWords& words);
  std::optional<MpaProgress> agree_without_words(std::uint8_t revision);
  // The RTR the reply chose among those we offered (Write before Read before Send, as the
  // responder prefers); kNone if it chose none of them.
  RtrType rtr_chosen_by(const wire::MpaEnhancedWords& words) const;

  MpaParams params_;
  MpaOutcome outcome_;
};

// What an initiator asked for, as the responder sees it.
struct MpaRequestInfo {
  std::uint8_t revision = 0;
  bool crc = false;
  bool markers = false;
  bool enhanced = false;
  std::optional<wire::MpaEnhancedWords> words;
  std::vector<std::uint8_t> private_data;  // application private data (IRD/ORD words removed)
};

class MpaResponder {
 public:
  MpaProgress on_request_bytes(ConstByteSpan received);
  const MpaRequestInfo& request() const { return request_; }
  // After kDone: the reply frame accepting the request with the local parameters.
  std::vector<std::uint8_t> accept(const MpaParams& local);
  // A reply frame with the R bit; private data may explain.
  std::vector<std::uint8_t> reject(ConstByteSpan private_data) const;
  const MpaOutcome& outcome() const { return outcome_; }

 private:
  MpaRequestInfo request_;
  MpaOutcome outcome_;
};

}  // namespace uwarp::proto
