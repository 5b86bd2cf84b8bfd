// cm::read_reply / read_request: what a connection does with the MPA bytes received so far,
// fed in every split a TCP stream may deliver them in.
#include "cm/handshake_steps.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "wire/mpa_frame.h"

namespace uwarp::cm {
namespace {

using Bytes = std::vector<std::uint8_t>;
using ReplyNext = ReplyVerdict::Next;
using RequestNext = RequestVerdict::Next;

proto::MpaParams params(bool crc, bool peer_to_peer, std::uint16_t ird, std::uint16_t ord) {
  proto::MpaParams p;
  p.crc = crc;
  p.peer_to_peer = peer_to_peer;
  p.ird = ird;
  p.ord = ord;
  return p;
}

// A request with the markers bit set: the initiator wants markers in what it receives.
Bytes markers_request() {
  const Bytes words = {0x00, 0x01, 0x00, 0x01};
  wire::MpaFrame f;
  f.kind = wire::MpaFrameKind::kRequest;
  f.markers = true;
  f.enhanced = true;
  f.private_data = words;
  Bytes out(wire::kMpaFrameHeaderSize + words.size());
  out.resize(wire::encode_mpa_frame(f, out));
  return out;
}

TEST(cm_handshake_steps, ReplyInEverySplitEstablishesOnceCompleteAndKeepsTheEarlyBytes) {
  proto::MpaInitiator peer_initiator(params(true, true, 4, 8));
  proto::MpaResponder responder;
  ASSERT_EQ(read_request(responder, peer_initiator.request()).next, RequestNext::kReport);
  Bytes stream = responder.accept(params(false, false, 2, 16));
  const std::size_t reply_size = stream.size();
  const Bytes first_fpdu = {0x00, 0x0e, 0xc1, 0x40, 0x01, 0x02};  // a part of one, say
  stream.insert(stream.end(), first_fpdu.begin(), first_fpdu.end());

  proto::MpaInitiator initiator(params(true, true, 4, 8));
  for (std::size_t got = 1; got < reply_size; ++got) {
    EXPECT_EQ(read_reply(initiator, ConstByteSpan(stream).first(got)).next, ReplyNext::kReceiveMore)
        << got << " bytes";
  }
  const ReplyVerdict v = read_reply(initiator, stream);
  ASSERT_EQ(v.next, ReplyNext::kEstablish);
  EXPECT_EQ(Bytes(v.early.begin(), v.early.end()), first_fpdu);
  EXPECT_TRUE(v.link.initiator);
  EXPECT_TRUE(v.link.crc);
  EXPECT_EQ(v.link.ird, 4);  // min(our IRD 4, its ORD min(16, 4))
  EXPECT_EQ(v.link.ord, 2);  // min(our ORD 8, its IRD 2)
  EXPECT_EQ(v.link.send_rtr, proto::RtrType::kWrite);
  EXPECT_EQ(v.link.expect_rtr, proto::RtrType::kNone);
}

TEST(cm_handshake_steps, RejectedReplyCarriesThePeersReason) {
  proto::MpaInitiator initiator(params(false, false, 16, 16));
  proto::MpaResponder responder;
  ASSERT_EQ(read_request(responder, initiator.request()).next, RequestNext::kReport);
  const Bytes why = {'b', 'u', 's', 'y'};
  const ReplyVerdict v = read_reply(initiator, responder.reject(why));
  ASSERT_EQ(v.next, ReplyNext::kRejected);
  EXPECT_EQ(v.why.code(), Errc::kRejected);
  EXPECT_FALSE(v.terminate);
  EXPECT_EQ(initiator.outcome().peer_private_data, why);
}

TEST(cm_handshake_steps, BrokenReplyFailsWithTheTerminateTheNegotiatorAsksFor) {
  proto::MpaInitiator initiator(params(false, false, 16, 16));
  // A request where the reply belongs: its key is wrong.
  const ReplyVerdict v =
      read_reply(initiator, proto::MpaInitiator(params(false, false, 1, 1)).request());
  ASSERT_EQ(v.next, ReplyNext::kFail);
  EXPECT_EQ(v.why.code(), Errc::kProtocolError);
  EXPECT_EQ(v.terminate, wire::term::kLlpInvalidRequestReply);
}

TEST(cm_handshake_steps, RequestInEverySplitIsReportedOnceComplete) {
  const Bytes request = proto::MpaInitiator(params(false, true, 16, 16)).request();
  proto::MpaResponder responder;
  for (std::size_t got = 1; got < request.size(); ++got) {
    EXPECT_EQ(read_request(responder, ConstByteSpan(request).first(got)).next,
              RequestNext::kReceiveMore)
        << got << " bytes";
  }
  const RequestVerdict v = read_request(responder, request);
  EXPECT_EQ(v.next, RequestNext::kReport);
}

TEST(cm_handshake_steps, BytesAfterTheRequestDropTheConnection) {
  Bytes stream = proto::MpaInitiator(params(false, false, 16, 16)).request();
  stream.push_back(0x00);
  proto::MpaResponder responder;
  EXPECT_EQ(read_request(responder, stream).next, RequestNext::kDrop);
}

TEST(cm_handshake_steps, BrokenRequestDropsTheConnection) {
  const std::string junk = "GET / HTTP/1.1\r\nHost: uwarp\r\n\r\n";
  proto::MpaResponder responder;
  const RequestVerdict v = read_request(
      responder, ConstByteSpan(reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size()));
  EXPECT_EQ(v.next, RequestNext::kDrop);
}

TEST(cm_handshake_steps, MarkersAreAgreedPerDirection) {
  // The initiator asked for markers: the responder sends them, and receives them only if it
  // asks too (its reply's M bit).
  for (const bool responder_asks : {false, true}) {
    proto::MpaResponder responder;
    ASSERT_EQ(read_request(responder, markers_request()).next, RequestNext::kReport);
    proto::MpaParams local;
    local.markers = responder_asks;
    auto reply = wire::decode_mpa_frame(wire::MpaFrameKind::kReply, responder.accept(local));
    ASSERT_TRUE(reply);
    EXPECT_FALSE(reply->frame.reject);
    EXPECT_EQ(reply->frame.markers, responder_asks);
    const verbs::LinkParams link = link_params(responder.outcome(), local, /*initiator=*/false);
    EXPECT_TRUE(link.send_markers);
    EXPECT_EQ(link.receive_markers, responder_asks);
  }
}

TEST(cm_handshake_steps, ResponderLinkWaitsForTheRtrItChose) {
  proto::MpaResponder responder;
  ASSERT_EQ(
      read_request(responder, proto::MpaInitiator(params(false, true, 16, 16)).request()).next,
      RequestNext::kReport);
  const proto::MpaParams local = params(true, false, 8, 4);
  (void)responder.accept(local);
  const verbs::LinkParams link = link_params(responder.outcome(), local, /*initiator=*/false);
  EXPECT_FALSE(link.initiator);
  EXPECT_EQ(link.fpdu_size, 0u);
  EXPECT_TRUE(link.crc);
  EXPECT_EQ(link.ird, 8);
  EXPECT_EQ(link.ord, 4);
  EXPECT_EQ(link.expect_rtr, proto::RtrType::kWrite);
  EXPECT_EQ(link.send_rtr, proto::RtrType::kNone);
}

TEST(cm_handshake_steps, FpduSizeReachesOnlyThisSidesLinkAndNeverTheWire) {
  // A larger FPDU size is this side's transmit choice: the request and the reply are the same
  // bytes with it, and the peer's link does not see it.
  proto::MpaParams plain = params(true, false, 16, 16);
  proto::MpaParams large = plain;
  large.fpdu_size = 65536;
  EXPECT_EQ(proto::MpaInitiator(plain).request(), proto::MpaInitiator(large).request());

  proto::MpaResponder plain_responder;
  proto::MpaResponder large_responder;
  ASSERT_EQ(read_request(plain_responder, proto::MpaInitiator(large).request()).next, RequestNext::kReport);
  ASSERT_EQ(read_request(large_responder, proto::MpaInitiator(large).request()).next, RequestNext::kReport);
  const std::vector<std::uint8_t> plain_reply = plain_responder.accept(plain);
  EXPECT_EQ(plain_reply, large_responder.accept(large));
  EXPECT_EQ(link_params(plain_responder.outcome(), plain, /*initiator=*/false).fpdu_size, 0u);
  EXPECT_EQ(link_params(large_responder.outcome(), large, /*initiator=*/false).fpdu_size, 65536u);

  proto::MpaInitiator initiator(large);
  const ReplyVerdict reply = read_reply(initiator, plain_reply);
  ASSERT_EQ(reply.next, ReplyVerdict::Next::kEstablish);
  EXPECT_EQ(reply.link.fpdu_size, 65536u);
}

}  // namespace
}  // namespace uwarp::cm
