// What a connection does with the MPA bytes it has received so far, one function per role: the
// initiator reads the reply (read_reply), the responder the request (read_request). They add to
// proto::MpaInitiator / MpaResponder what the connection decides around the frame: a bound on
// the bytes it waits through, the bytes a frame may not be followed by, and the parameters the
// stream starts with. Sans I/O; the connection acts on the verdict.
//
// Thread: the connection's engine thread (they change the negotiator they are given).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/bytes.h"
#include "proto/mpa_negotiator.h"
#include "uwarp/status.h"
#include "verbs/queue_pair.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"

namespace uwarp::cm {

// More bytes than this without a complete frame end the exchange (a frame is at most
// wire::kMpaMaxFrameSize).
inline constexpr std::size_t kMaxHandshakeBytes = wire::kMpaMaxFrameSize + 64;

struct ReplyVerdict {
  enum class Next : std::uint8_t {
    kReceiveMore,  // the reply is incomplete
    kFail,         // kConnectError with `why`, after sending `terminate` if it is set
    kRejected,     // the peer refused: kRejected with `why` (its private data is in the outcome)
    kEstablish,    // start the stream with `link`, handing it `early`
  };
  Next next = Next::kReceiveMore;
  Status why;
  std::optional<wire::TerminateCode> terminate;
  verbs::LinkParams link;
  ConstByteSpan early;  // the bytes after the reply (the first FPDUs); points into `received`
};

// Initiator: `received` holds every byte read since the request was sent.
ReplyVerdict read_reply(proto::MpaInitiator& initiator, ConstByteSpan received);

struct RequestVerdict {
  enum class Next : std::uint8_t {
    kReceiveMore,  // the request is incomplete
    kDrop,         // not a request to answer: close without a word or an event
    kReport,       // a complete request for the application to accept or reject
  };
  Next next = Next::kReceiveMore;
};

// Responder: `received` holds every byte read since the connection was accepted.
RequestVerdict read_request(proto::MpaResponder& responder, ConstByteSpan received);

// Private data of a request, reply or rejection: at most proto::kMaxPrivateData bytes.
Status check_private_data(std::span<const std::uint8_t> private_data);

// What the QP's stream needs from the negotiation and from this side's own parameters. The
// initiator sends the agreed RTR, the responder waits for it.
verbs::LinkParams link_params(const proto::MpaOutcome& outcome, const proto::MpaParams& local,
                              bool initiator);

}  // namespace uwarp::cm
