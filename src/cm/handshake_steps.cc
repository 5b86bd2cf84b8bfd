#include "cm/handshake_steps.h"

namespace uwarp::cm {

ReplyVerdict read_reply(proto::MpaInitiator& initiator, ConstByteSpan received) {
  const proto::MpaProgress p = initiator.on_reply_bytes(received);
  ReplyVerdict v;
  switch (p.step) {
    case proto::MpaStep::kNeedMore:
      if (received.size() > kMaxHandshakeBytes) {
        v.next = ReplyVerdict::Next::kFail;
        v.why = Status(Errc::kProtocolError, "oversized MPA reply");
      }
      break;
    case proto::MpaStep::kFailed:
      v.next = ReplyVerdict::Next::kFail;
      v.why = Status(Errc::kProtocolError, p.reason);
      v.terminate = p.terminate;
      break;
    case proto::MpaStep::kRejected:
      v.next = ReplyVerdict::Next::kRejected;
      v.why = Status(Errc::kRejected, p.reason);
      break;
    case proto::MpaStep::kDone:
      v.next = ReplyVerdict::Next::kEstablish;
      v.link = link_params(initiator.outcome(), initiator.params(), /*initiator=*/true);
      v.early = received.subspan(p.consumed);
      break;
  }
  return v;
}

RequestVerdict read_request(proto::MpaResponder& responder, ConstByteSpan received) {
  const proto::MpaProgress p = responder.on_request_bytes(received);
  RequestVerdict v;
  switch (p.step) {
    case proto::MpaStep::kNeedMore:
      if (received.size() > kMaxHandshakeBytes) v.next = RequestVerdict::Next::kDrop;
      break;
    case proto::MpaStep::kFailed:
    case proto::MpaStep::kRejected:
      v.next = RequestVerdict::Next::kDrop;
      break;
    case proto::MpaStep::kDone:
      if (p.consumed != received.size()) {
        // An initiator sends nothing after its request until it has the reply.
        v.next = RequestVerdict::Next::kDrop;
      } else {
        v.next = RequestVerdict::Next::kReport;
      }
      break;
  }
  return v;
}

verbs::LinkParams link_params(const proto::MpaOutcome& outcome, const proto::MpaParams& local,
                              bool initiator) {
  verbs::LinkParams lp;
  lp.fpdu_size = local.fpdu_size;
  lp.crc = outcome.crc;
  lp.send_markers = outcome.send_markers;
  lp.receive_markers = outcome.receive_markers;
  lp.ird = outcome.ird;
  lp.ord = outcome.ord;
  (initiator ? lp.send_rtr : lp.expect_rtr) = outcome.rtr;
  lp.initiator = initiator;
  return lp;
}

Status check_private_data(std::span<const std::uint8_t> private_data) {
  if (private_data.size() <= proto::kMaxPrivateData) return Status::ok();
  return Status(Errc::kInvalidArgument, "private data longer than " +
                                            std::to_string(proto::kMaxPrivateData) + " bytes");
}

}  // namespace uwarp::cm
