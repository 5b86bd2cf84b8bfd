#include "proto/mpa_negotiator.h"

#include <algorithm>
#include <string>

namespace uwarp::proto {
namespace {

// A frame with the bits of `f` (kind, revision, markers, CRC, reject), the IRD/ORD words if any,
// then the application's private data.
std::vector<std::uint8_t> build_frame(wire::MpaFrame f,
                                      const std::optional<wire::MpaEnhancedWords>& words,
                                      ConstByteSpan app_data) {
  std::vector<std::uint8_t> pd;
  pd.reserve(wire::kMpaEnhancedWordsSize + app_data.size());
  if (words) {
    pd.resize(wire::kMpaEnhancedWordsSize);
    wire::encode_mpa_enhanced_words(*words, pd.data());
  }
  pd.insert(pd.end(), app_data.begin(), app_data.end());
  if (pd.size() > wire::kMpaMaxPrivateData) return {};
  f.enhanced = words.has_value();
  f.private_data = pd;
  std::vector<std::uint8_t> out(wire::kMpaFrameHeaderSize + pd.size());
  wire::encode_mpa_frame(f, out);
  return out;
}

MpaProgress failed(std::string reason, std::optional<wire::TerminateCode> t = std::nullopt) {
  MpaProgress p;
  p.step = MpaStep::kFailed;
  p.reason = std::move(reason);
  p.terminate = t;
  return p;
}

std::uint16_t clamp14(std::uint16_t v) { return std::min<std::uint16_t>(v, wire::kMpaIrdOrdMask); }

// The revision the request carries: 2, or 1 if the parameters ask for it.
std::uint8_t offered_revision(const MpaParams& params) { return params.revision >= 2 ? 2 : 1; }

// A reply that did not decode: not complete yet (kNeedMore), or refused with an LLP Terminate
// (RFC 5044 section 7.1.2, as siw).
MpaProgress reply_decode_failure(wire::MpaFrameError error) {
  switch (error) {
    case wire::MpaFrameError::kNeedMore:
      break;
    case wire::MpaFrameError::kBadKey:
      return failed("MPA reply has a wrong key", wire::term::kLlpInvalidRequestReply);
    case wire::MpaFrameError::kPrivateDataTooLong:
      return failed("MPA reply private data longer than 512 bytes", wire::term::kLlpInvalidRequestReply);
  }
  return {};
}

}  // namespace

std::vector<std::uint8_t> MpaInitiator::request() const {
  std::optional<wire::MpaEnhancedWords> words;
  if (params_.revision >= 2) {
    wire::MpaEnhancedWords w;
    w.ird = clamp14(params_.ird);
    w.ord = clamp14(params_.ord);
    if (params_.peer_to_peer) {
      w.peer_to_peer = true;
      w.write_rtr = params_.offer_write_rtr;
      w.read_rtr = params_.offer_read_rtr;
      w.send_rtr = params_.offer_send_rtr;
    }
    words = w;
  }
  wire::MpaFrame f;
  f.kind = wire::MpaFrameKind::kRequest;
  f.revision = offered_revision(params_);
  f.markers = params_.markers;
  f.crc = params_.crc;
  return build_frame(f, words, params_.private_data);
}

MpaProgress MpaInitiator::on_reply_bytes(ConstByteSpan received) {
  auto d = wire::decode_mpa_frame(wire::MpaFrameKind::kReply, received);
  if (!d) return reply_decode_failure(d.error());
  const wire::MpaFrame& f = d->frame;
  if (f.revision < 1 || f.revision > offered_revision(params_)) {
    return failed("MPA reply revision " + std::to_string(f.revision) + " not offered",
                  wire::term::kLlpInvalidRequestReply);
  }
  outcome_.revision = f.revision;
  outcome_.enhanced = f.revision == 2 && f.enhanced;
  ConstByteSpan app = f.private_data;
  std::optional<wire::MpaEnhancedWords> words;
  if (outcome_.enhanced) {
    words = wire::decode_mpa_enhanced_words(app);
    if (!words) return failed("enhanced MPA reply without IRD/ORD words", wire::term::kLlpInvalidRequestReply);
    app = app.subspan(wire::kMpaEnhancedWordsSize);
  }
  outcome_.peer_private_data.assign(app.begin(), app.end());
  MpaProgress p;
  p.consumed = d->consumed;
  if (f.reject) {
    p.step = MpaStep::kRejected;
    p.reason = "connection rejected by the peer";
    return p;
  }
  outcome_.crc = params_.crc || f.crc;
  outcome_.send_markers = f.markers;
  outcome_.receive_markers = params_.markers;
  std::optional<MpaProgress> refused = words ? agree_on_words(*words) : agree_without_words(f.revision);
  if (refused) return std::move(*refused);
  p.step = MpaStep::kDone;
  return p;
}

std::optional<MpaProgress> MpaInitiator::agree_on_words(const wire::MpaEnhancedWords& words) {
  // RFC 6581 section 3: the responder's ORD must fit the IRD our request offered; a reply
  // that asks for more Reads in flight than we would accept is refused with "insufficient
  // IRD" (as siw does) rather than failing its 129th Read later.
  if (words.ord > clamp14(params_.ird)) {
    return failed("MPA reply's ORD " + std::to_string(words.ord) + " exceeds our IRD " +
                      std::to_string(clamp14(params_.ird)),
                  wire::term::kLlpInsufficientIrd);
  }
  // Our ORD cannot exceed what the responder will serve, nor our IRD what it will send.
  outcome_.ord = std::min(clamp14(params_.ord), words.ird);
  outcome_.ird = std::min(clamp14(params_.ird), words.ord);
  if (params_.peer_to_peer) {
    const RtrType rtr = rtr_chosen_by(words);
    if (rtr == RtrType::kNone) {
      return failed("MPA reply chose no RTR that was offered", wire::term::kLlpNoMatchingRtr);
    }
    outcome_.rtr = rtr;
  }
  return std::nullopt;
}

std::optional<MpaProgress> MpaInitiator::agree_without_words(std::uint8_t revision) {
  outcome_.ord = clamp14(params_.ord);
  outcome_.ird = clamp14(params_.ird);
  if (params_.peer_to_peer && revision == 2) {
    return failed("peer-to-peer requested but the reply has no RTR words", wire::term::kLlpNoMatchingRtr);
  }
  return std::nullopt;
}

RtrType MpaInitiator::rtr_chosen_by(const wire::MpaEnhancedWords& words) const {
  if (words.write_rtr && params_.offer_write_rtr) return RtrType::kWrite;
  if (words.read_rtr && params_.offer_read_rtr) return RtrType::kRead;
  if (words.send_rtr && params_.offer_send_rtr) return RtrType::kSend;
  return RtrType::kNone;
}

MpaProgress MpaResponder::on_request_bytes(ConstByteSpan received) {
  auto d = wire::decode_mpa_frame(wire::MpaFrameKind::kRequest, received);
  if (!d) {
    switch (d.error()) {
      case wire::MpaFrameError::kNeedMore: return {};
      case wire::MpaFrameError::kBadKey: return failed("MPA request has a wrong key");
      case wire::MpaFrameError::kPrivateDataTooLong:
        return failed("MPA request private data longer than 512 bytes");
    }
  }
  const wire::MpaFrame& f = d->frame;
  if (f.revision < 1 || f.revision > 2) return failed("unsupported MPA revision " + std::to_string(f.revision));
  request_.revision = f.revision;
  request_.crc = f.crc;
  request_.markers = f.markers;
  request_.enhanced = f.revision == 2 && f.enhanced;
  ConstByteSpan app = f.private_data;
  if (request_.enhanced) {
    request_.words = wire::decode_mpa_enhanced_words(app);
    if (!request_.words) return failed("enhanced MPA request without IRD/ORD words");
    app = app.subspan(wire::kMpaEnhancedWordsSize);
  }
  request_.private_data.assign(app.begin(), app.end());
  MpaProgress p;
  p.step = MpaStep::kDone;
  p.consumed = d->consumed;
  return p;
}

std::vector<std::uint8_t> MpaResponder::accept(const MpaParams& local) {
  outcome_ = {};
  outcome_.revision = request_.revision;
  outcome_.enhanced = request_.enhanced;
  outcome_.crc = request_.crc || local.crc;
  outcome_.send_markers = request_.markers;
  outcome_.receive_markers = local.markers;
  std::optional<wire::MpaEnhancedWords> words;
  if (request_.words) {
    const auto& peer = *request_.words;
    outcome_.ird = std::min(clamp14(local.ird), peer.ord);
    outcome_.ord = std::min(clamp14(local.ord), peer.ird);
    wire::MpaEnhancedWords w;
    w.ird = outcome_.ird;
    w.ord = outcome_.ord;
    if (peer.peer_to_peer) {
      // Prefer a zero-length WRITE, then READ, then SEND, as Linux siw does.
      w.peer_to_peer = true;
      if (peer.write_rtr) {
        w.write_rtr = true;
        outcome_.rtr = RtrType::kWrite;
      } else if (peer.read_rtr) {
        w.read_rtr = true;
        outcome_.rtr = RtrType::kRead;
      } else if (peer.send_rtr) {
        w.send_rtr = true;
        outcome_.rtr = RtrType::kSend;
      }
    }
    words = w;
  } else {
    outcome_.ird = clamp14(local.ird);
    outcome_.ord = clamp14(local.ord);
  }
  outcome_.peer_private_data = request_.private_data;
  wire::MpaFrame f;
  f.kind = wire::MpaFrameKind::kReply;
  f.revision = request_.revision;
  f.markers = local.markers;
  f.crc = outcome_.crc;
  return build_frame(f, words, local.private_data);
}

std::vector<std::uint8_t> MpaResponder::reject(ConstByteSpan private_data) const {
  std::optional<wire::MpaEnhancedWords> words;
  if (request_.enhanced) words = wire::MpaEnhancedWords{};
  wire::MpaFrame f;
  f.kind = wire::MpaFrameKind::kReply;
  f.revision = request_.revision == 1 ? 1 : 2;
  f.crc = request_.crc;
  f.reject = true;
  return build_frame(f, words, private_data);
}

}  // namespace uwarp::proto
