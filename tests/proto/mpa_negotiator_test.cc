// proto::MpaInitiator / MpaResponder: against each other and against byte-exact Linux siw frames.
#include "proto/mpa_negotiator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "proto/proto_test_util.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"

namespace uwarp::proto {
namespace {

using testing::Bytes;
using testing::bytes_of;

// siw frames (docs/interop "Wire facts per flavour"): key, flags, revision, PD_Length, words.
Bytes siw_frame(bool reply, std::uint8_t flags, std::uint8_t revision,
                std::vector<std::uint8_t> pd) {
  const std::string key = reply ? "MPA ID Rep Frame" : "MPA ID Req Frame";
  Bytes b(key.begin(), key.end());
  b.push_back(flags);
  b.push_back(revision);
  b.push_back(static_cast<std::uint8_t>(pd.size() >> 8));
  b.push_back(static_cast<std::uint8_t>(pd.size()));
  b.insert(b.end(), pd.begin(), pd.end());
  return b;
}
const Bytes kSiwRequestDefault = siw_frame(false, 0x10, 2, {0x00, 0x01, 0x00, 0x01});
const Bytes kSiwRequestCrc = siw_frame(false, 0x50, 2, {0x00, 0x01, 0x00, 0x01});
const Bytes kSiwRequestP2p = siw_frame(false, 0x10, 2, {0x80, 0x01, 0xc0, 0x01});
const Bytes kSiwRequestCrcP2p = siw_frame(false, 0x50, 2, {0x80, 0x01, 0xc0, 0x01});
const Bytes kSiwRequestP2pRead = siw_frame(false, 0x10, 2, {0x80, 0x01, 0x40, 0x01});
const Bytes kSiwRequestRev1 = siw_frame(false, 0x00, 1, {});
const Bytes kSiwReplyDefault = siw_frame(true, 0x10, 2, {0x00, 0x01, 0x00, 0x01});
const Bytes kSiwReplyCrc = siw_frame(true, 0x50, 2, {0x00, 0x01, 0x00, 0x01});
const Bytes kSiwReplyCrcP2p = siw_frame(true, 0x50, 2, {0x80, 0x01, 0x80, 0x01});
const Bytes kSiwReplyP2pRead = siw_frame(true, 0x10, 2, {0x80, 0x01, 0x40, 0x01});
const Bytes kSiwReplyP2pNoRtr = siw_frame(true, 0x10, 2, {0x80, 0x01, 0x00, 0x01});
const Bytes kSiwReplyRev1 = siw_frame(true, 0x00, 1, {});
const Bytes kSiwReplyGso = siw_frame(true, 0x18, 2, {0x00, 0x01, 0x00, 0x01});

// What rping asks for through siw: IRD = ORD = 1.
MpaParams rping_params(bool crc, bool p2p) {
  MpaParams p;
  p.crc = crc;
  p.peer_to_peer = p2p;
  p.ird = 1;
  p.ord = 1;
  return p;
}

// The whole handshake in memory; returns both outcomes through the objects.
struct Handshake {
  MpaInitiator initiator;
  MpaResponder responder;
  Bytes request;
  Bytes reply;
  MpaProgress request_progress;
  MpaProgress reply_progress;

  Handshake(const MpaParams& init, const MpaParams& resp) : initiator(init) {
    request = initiator.request();
    request_progress = responder.on_request_bytes(request);
    if (request_progress.step != MpaStep::kDone) return;
    reply = responder.accept(resp);
    reply_progress = initiator.on_reply_bytes(reply);
  }
};

TEST(proto_mpa_negotiator, InitiatorRequestsAreByteExactSiw) {
  EXPECT_EQ(MpaInitiator(rping_params(false, false)).request(), kSiwRequestDefault);
  EXPECT_EQ(MpaInitiator(rping_params(true, false)).request(), kSiwRequestCrc);
  EXPECT_EQ(MpaInitiator(rping_params(false, true)).request(), kSiwRequestP2p);
  EXPECT_EQ(MpaInitiator(rping_params(true, true)).request(), kSiwRequestCrcP2p);
  MpaParams read_only = rping_params(false, true);
  read_only.offer_write_rtr = false;
  EXPECT_EQ(MpaInitiator(read_only).request(), kSiwRequestP2pRead);
  MpaParams rev1 = rping_params(false, false);
  rev1.revision = 1;
  EXPECT_EQ(MpaInitiator(rev1).request(), kSiwRequestRev1);
}

TEST(proto_mpa_negotiator, ResponderAnswersSiwCrcP2pRequestAsSiwDoes) {
  MpaResponder r;
  const MpaProgress p = r.on_request_bytes(kSiwRequestCrcP2p);
  ASSERT_EQ(p.step, MpaStep::kDone);
  EXPECT_EQ(p.consumed, kSiwRequestCrcP2p.size());
  EXPECT_EQ(r.request().revision, 2);
  EXPECT_TRUE(r.request().crc);
  EXPECT_TRUE(r.request().enhanced);
  EXPECT_FALSE(r.request().markers);
  ASSERT_TRUE(r.request().words.has_value());
  EXPECT_TRUE(r.request().words->peer_to_peer);
  EXPECT_TRUE(r.request().words->write_rtr);
  EXPECT_TRUE(r.request().words->read_rtr);
  EXPECT_TRUE(r.request().private_data.empty());
  // siw replies 0x50, 0x8001, 0x8001: CRC echoed, WRITE chosen as RTR.
  EXPECT_EQ(r.accept(rping_params(false, false)), kSiwReplyCrcP2p);
  EXPECT_TRUE(r.outcome().crc);
  EXPECT_TRUE(r.outcome().enhanced);
  EXPECT_EQ(r.outcome().rtr, RtrType::kWrite);
  EXPECT_EQ(r.outcome().ird, 1);
  EXPECT_EQ(r.outcome().ord, 1);
}

TEST(proto_mpa_negotiator, ResponderAnswersEverySiwFlavourByteExact) {
  struct Case {
    const Bytes* request;
    const Bytes* reply;
    RtrType rtr;
  };
  const Case cases[] = {
      {&kSiwRequestDefault, &kSiwReplyDefault, RtrType::kNone},
      {&kSiwRequestCrc, &kSiwReplyCrc, RtrType::kNone},
      {&kSiwRequestCrcP2p, &kSiwReplyCrcP2p, RtrType::kWrite},
      {&kSiwRequestP2pRead, &kSiwReplyP2pRead, RtrType::kRead},
      {&kSiwRequestRev1, &kSiwReplyRev1, RtrType::kNone},
  };
  for (const Case& c : cases) {
    MpaResponder r;
    ASSERT_EQ(r.on_request_bytes(*c.request).step, MpaStep::kDone);
    EXPECT_EQ(r.accept(rping_params(false, false)), *c.reply);
    EXPECT_EQ(r.outcome().rtr, c.rtr);
  }
}

TEST(proto_mpa_negotiator, InitiatorAcceptsSiwReplies) {
  {
    MpaInitiator i(rping_params(true, true));
    const MpaProgress p = i.on_reply_bytes(kSiwReplyCrcP2p);
    ASSERT_EQ(p.step, MpaStep::kDone) << p.reason;
    EXPECT_EQ(p.consumed, kSiwReplyCrcP2p.size());
    EXPECT_TRUE(i.outcome().crc);
    EXPECT_TRUE(i.outcome().enhanced);
    EXPECT_EQ(i.outcome().revision, 2);
    EXPECT_EQ(i.outcome().rtr, RtrType::kWrite);
    EXPECT_EQ(i.outcome().ird, 1);
    EXPECT_EQ(i.outcome().ord, 1);
  }
  {
    MpaInitiator i(rping_params(false, false));
    ASSERT_EQ(i.on_reply_bytes(kSiwReplyDefault).step, MpaStep::kDone);
    EXPECT_FALSE(i.outcome().crc);
    EXPECT_EQ(i.outcome().rtr, RtrType::kNone);
  }
  {
    // siw echoes reserved flag bits (its GSO flag 0x08): ignored on receipt.
    MpaInitiator i(rping_params(false, false));
    ASSERT_EQ(i.on_reply_bytes(kSiwReplyGso).step, MpaStep::kDone);
  }
}

TEST(proto_mpa_negotiator, CrcIsOnIfEitherSideAsks) {
  for (bool init_crc : {false, true}) {
    for (bool resp_crc : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "initiator " << init_crc << " responder " << resp_crc);
      Handshake h(rping_params(init_crc, false), rping_params(resp_crc, false));
      ASSERT_EQ(h.reply_progress.step, MpaStep::kDone) << h.reply_progress.reason;
      const bool want = init_crc || resp_crc;
      EXPECT_EQ(h.responder.outcome().crc, want);
      EXPECT_EQ(h.initiator.outcome().crc, want);
      EXPECT_EQ((h.reply[16] & 0x40) != 0, want);  // the C bit of the reply
    }
  }
}

TEST(proto_mpa_negotiator, RevisionOne) {
  MpaParams init = rping_params(false, false);
  init.revision = 1;
  init.private_data = bytes_of("hello");
  MpaParams resp = rping_params(false, false);
  resp.private_data = bytes_of("world!");
  Handshake h(init, resp);
  ASSERT_EQ(h.request_progress.step, MpaStep::kDone);
  EXPECT_EQ(h.responder.request().revision, 1);
  EXPECT_FALSE(h.responder.request().enhanced);
  EXPECT_FALSE(h.responder.request().words.has_value());
  EXPECT_EQ(h.responder.request().private_data, bytes_of("hello"));
  ASSERT_EQ(h.reply_progress.step, MpaStep::kDone) << h.reply_progress.reason;
  EXPECT_EQ(h.reply[17], 1);         // revision echoed
  EXPECT_EQ(h.reply[16] & 0x10, 0);  // no S bit
  EXPECT_EQ(h.reply[19], 6);         // PD_Length: the application's data only
  EXPECT_EQ(h.initiator.outcome().revision, 1);
  EXPECT_FALSE(h.initiator.outcome().enhanced);
  EXPECT_EQ(h.initiator.outcome().peer_private_data, bytes_of("world!"));
  EXPECT_EQ(h.responder.outcome().peer_private_data, bytes_of("hello"));

  // A revision 2 initiator accepts a revision 1 reply (without words).
  MpaInitiator i2(rping_params(false, false));
  const MpaProgress p2 = i2.on_reply_bytes(kSiwReplyRev1);
  ASSERT_EQ(p2.step, MpaStep::kDone) << p2.reason;
  EXPECT_EQ(i2.outcome().revision, 1);
  EXPECT_FALSE(i2.outcome().enhanced);

  // A revision 1 initiator refuses a revision 2 reply: it never offered revision 2.
  MpaInitiator i1(init);
  const MpaProgress p1 = i1.on_reply_bytes(kSiwReplyDefault);
  EXPECT_EQ(p1.step, MpaStep::kFailed);
  EXPECT_EQ(p1.terminate, wire::term::kLlpInvalidRequestReply);
}

TEST(proto_mpa_negotiator, ResponderPrefersWriteThenReadThenSend) {
  struct Case {
    bool write, read, send;
    RtrType want;
  };
  const Case cases[] = {
      {true, true, true, RtrType::kWrite},  {true, false, true, RtrType::kWrite},
      {false, true, true, RtrType::kRead},  {false, true, false, RtrType::kRead},
      {false, false, true, RtrType::kSend},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.write << c.read << c.send);
    MpaParams init = rping_params(false, true);
    init.offer_write_rtr = c.write;
    init.offer_read_rtr = c.read;
    init.offer_send_rtr = c.send;
    Handshake h(init, rping_params(false, false));
    ASSERT_EQ(h.reply_progress.step, MpaStep::kDone) << h.reply_progress.reason;
    EXPECT_EQ(h.responder.outcome().rtr, c.want);
    EXPECT_EQ(h.initiator.outcome().rtr, c.want);
    // Exactly one RTR bit in the reply, and the A bit.
    const std::uint16_t ird_word = static_cast<std::uint16_t>(h.reply[20] << 8 | h.reply[21]);
    const std::uint16_t ord_word = static_cast<std::uint16_t>(h.reply[22] << 8 | h.reply[23]);
    EXPECT_NE(ird_word & 0x8000, 0);
    const int bits =
        ((ird_word & 0x4000) != 0) + ((ord_word & 0x8000) != 0) + ((ord_word & 0x4000) != 0);
    EXPECT_EQ(bits, 1);
  }
}

TEST(proto_mpa_negotiator, InitiatorTakesTheRtrTheReplyChose) {
  MpaParams all = rping_params(false, true);
  all.offer_send_rtr = true;
  {
    MpaInitiator i(all);
    ASSERT_EQ(i.on_reply_bytes(kSiwReplyP2pRead).step, MpaStep::kDone);
    EXPECT_EQ(i.outcome().rtr, RtrType::kRead);
  }
  {
    MpaInitiator i(all);
    ASSERT_EQ(i.on_reply_bytes(siw_frame(true, 0x10, 2, {0xc0, 0x01, 0x00, 0x01})).step,
              MpaStep::kDone);
    EXPECT_EQ(i.outcome().rtr, RtrType::kSend);
  }
}

TEST(proto_mpa_negotiator, ReplyWhoseOrdExceedsOurIrdFailsWithInsufficientIrd) {
  // The request offered IRD 1 (rping_params); a reply with ORD 2 wants two Reads in flight.
  {
    MpaInitiator i(rping_params(false, false));
    const MpaProgress p = i.on_reply_bytes(siw_frame(true, 0x10, 2, {0x00, 0x01, 0x00, 0x02}));
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpInsufficientIrd);
    EXPECT_NE(p.reason.find("ORD 2 exceeds our IRD 1"), std::string::npos) << p.reason;
  }
  // ORD equal to the IRD offered, and below it, are accepted.
  for (std::uint8_t ord : {1, 0}) {
    MpaInitiator i(rping_params(false, false));
    ASSERT_EQ(i.on_reply_bytes(siw_frame(true, 0x10, 2, {0x00, 0x01, 0x00, ord})).step,
              MpaStep::kDone);
    EXPECT_EQ(i.outcome().ird, ord);
  }
}

TEST(proto_mpa_negotiator, ReplyWithoutMatchingRtrFailsWithTerminate) {
  // siw-flavour-p2p-no-rtr: the reply picks no RTR; siw answers Terminate LLP/0/0x07.
  {
    MpaInitiator i(rping_params(false, true));
    const MpaProgress p = i.on_reply_bytes(kSiwReplyP2pNoRtr);
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpNoMatchingRtr);
    EXPECT_FALSE(p.reason.empty());
  }
  // The reply picks SEND, which this initiator did not offer.
  {
    MpaInitiator i(rping_params(false, true));
    const MpaProgress p = i.on_reply_bytes(siw_frame(true, 0x10, 2, {0xc0, 0x01, 0x00, 0x01}));
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpNoMatchingRtr);
  }
  // The reply picks READ, but only WRITE was offered.
  {
    MpaParams write_only = rping_params(false, true);
    write_only.offer_read_rtr = false;
    MpaInitiator i(write_only);
    const MpaProgress p = i.on_reply_bytes(kSiwReplyP2pRead);
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpNoMatchingRtr);
  }
  // Revision 2 without the S bit carries no RTR words at all.
  {
    MpaInitiator i(rping_params(false, true));
    const MpaProgress p = i.on_reply_bytes(siw_frame(true, 0x00, 2, {}));
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpNoMatchingRtr);
  }
}

TEST(proto_mpa_negotiator, WrongReplyKeyFailsWithInvalidRequestReply) {
  // A request frame where the reply belongs.
  {
    MpaInitiator i(rping_params(false, false));
    const MpaProgress p = i.on_reply_bytes(kSiwRequestDefault);
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpInvalidRequestReply);
  }
  // Garbage is refused from its first wrong byte on, without waiting for 20 bytes.
  {
    MpaInitiator i(rping_params(false, false));
    const Bytes garbage = bytes_of("MPA ID Rxp");
    const MpaProgress p = i.on_reply_bytes(garbage);
    EXPECT_EQ(p.step, MpaStep::kFailed);
    EXPECT_EQ(p.terminate, wire::term::kLlpInvalidRequestReply);
  }
  // The responder refuses a wrong request key too (no Terminate: nothing is established).
  {
    MpaResponder r;
    const MpaProgress p = r.on_request_bytes(kSiwReplyDefault);
    EXPECT_EQ(p.step, MpaStep::kFailed);
  }
}

TEST(proto_mpa_negotiator, RejectCarriesPrivateData) {
  for (std::uint8_t rev : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "revision " << int{rev});
    MpaParams init = rping_params(false, false);
    init.revision = rev;
    MpaInitiator i(init);
    MpaResponder r;
    ASSERT_EQ(r.on_request_bytes(i.request()).step, MpaStep::kDone);
    const Bytes why = bytes_of("no room at the inn");
    const Bytes reply = r.reject(why);
    ASSERT_GE(reply.size(), wire::kMpaFrameHeaderSize);
    EXPECT_NE(reply[16] & 0x20, 0);  // R
    EXPECT_EQ(reply[17], rev);
    const MpaProgress p = i.on_reply_bytes(reply);
    EXPECT_EQ(p.step, MpaStep::kRejected);
    EXPECT_EQ(p.consumed, reply.size());
    EXPECT_EQ(i.outcome().peer_private_data, why);
  }
}

TEST(proto_mpa_negotiator, PrivateDataLimits) {
  // Revision 2: 4 bytes of words + at most 508 of application data.
  MpaParams p = rping_params(false, false);
  p.private_data.assign(kMaxPrivateData, 0xAB);
  EXPECT_EQ(MpaInitiator(p).request().size(), wire::kMpaFrameHeaderSize + wire::kMpaMaxPrivateData);
  p.private_data.push_back(0xAB);
  EXPECT_TRUE(MpaInitiator(p).request().empty());
  // Revision 1: all 512 bytes are the application's.
  p.revision = 1;
  p.private_data.assign(wire::kMpaMaxPrivateData, 0xCD);
  EXPECT_EQ(MpaInitiator(p).request().size(), wire::kMpaFrameHeaderSize + wire::kMpaMaxPrivateData);
  p.private_data.push_back(0xCD);
  EXPECT_TRUE(MpaInitiator(p).request().empty());

  // The responder cannot accept with too much private data either.
  MpaResponder r;
  ASSERT_EQ(r.on_request_bytes(kSiwRequestDefault).step, MpaStep::kDone);
  MpaParams big = rping_params(false, false);
  big.private_data.assign(kMaxPrivateData + 1, 1);
  EXPECT_TRUE(r.accept(big).empty());

  // A peer's frame that announces more than 512 bytes fails at once (no waiting for them).
  Bytes reply = siw_frame(true, 0x10, 2, {});
  reply[18] = 0x02;
  reply[19] = 0x01;  // PD_Length 513
  MpaInitiator i(rping_params(false, false));
  const MpaProgress pi = i.on_reply_bytes(reply);
  EXPECT_EQ(pi.step, MpaStep::kFailed);
  EXPECT_EQ(pi.terminate, wire::term::kLlpInvalidRequestReply);
  Bytes request = siw_frame(false, 0x10, 2, {});
  request[18] = 0x02;
  request[19] = 0x01;
  MpaResponder r2;
  EXPECT_EQ(r2.on_request_bytes(request).step, MpaStep::kFailed);
}

TEST(proto_mpa_negotiator, ReplyFedOneByteAtATime) {
  MpaParams resp = rping_params(true, false);
  resp.private_data = bytes_of("responder says hi");
  MpaInitiator i(rping_params(false, true));
  MpaResponder r;
  ASSERT_EQ(r.on_request_bytes(i.request()).step, MpaStep::kDone);
  const Bytes reply = r.accept(resp);
  // The first FPDU (the RTR) follows in the same stream.
  Bytes stream = reply;
  const Bytes after = {0x00, 0x0e, 0xc1, 0x40, 0, 0, 0, 1};
  stream.insert(stream.end(), after.begin(), after.end());

  Bytes received;
  for (std::size_t k = 0; k < stream.size(); ++k) {
    received.push_back(stream[k]);
    const MpaProgress p = i.on_reply_bytes(received);
    if (received.size() < reply.size()) {
      ASSERT_EQ(p.step, MpaStep::kNeedMore) << "at " << received.size() << ": " << p.reason;
      ASSERT_EQ(p.consumed, 0u);
      continue;
    }
    // Complete: consumed is the frame exactly, whatever followed it.
    ASSERT_EQ(p.step, MpaStep::kDone) << p.reason;
    ASSERT_EQ(p.consumed, reply.size());
  }
  EXPECT_TRUE(i.outcome().crc);
  EXPECT_EQ(i.outcome().rtr, RtrType::kWrite);
  EXPECT_EQ(i.outcome().peer_private_data, bytes_of("responder says hi"));
}

TEST(proto_mpa_negotiator, RequestFedOneByteAtATime) {
  MpaParams init = rping_params(true, true);
  init.private_data = bytes_of("initiator");
  const Bytes request = MpaInitiator(init).request();
  Bytes stream = request;
  stream.push_back(0x00);  // a byte of the stream that follows
  MpaResponder r;
  Bytes received;
  for (std::size_t k = 0; k < stream.size(); ++k) {
    received.push_back(stream[k]);
    const MpaProgress p = r.on_request_bytes(received);
    if (received.size() < request.size()) {
      ASSERT_EQ(p.step, MpaStep::kNeedMore) << "at " << received.size();
      continue;
    }
    ASSERT_EQ(p.step, MpaStep::kDone);
    ASSERT_EQ(p.consumed, request.size());
  }
  EXPECT_EQ(r.request().private_data, bytes_of("initiator"));
  EXPECT_TRUE(r.request().crc);
}

TEST(proto_mpa_negotiator, IrdOrdAreTheMinimaOfWhatEachSideCanDo) {
  MpaParams init = rping_params(false, false);
  init.ird = 10;
  init.ord = 20;
  MpaParams resp = rping_params(false, false);
  resp.ird = 5;
  resp.ord = 30;
  Handshake h(init, resp);
  ASSERT_EQ(h.reply_progress.step, MpaStep::kDone);
  // Responder: IRD = min(own IRD, peer ORD), ORD = min(own ORD, peer IRD).
  EXPECT_EQ(h.responder.outcome().ird, 5);
  EXPECT_EQ(h.responder.outcome().ord, 10);
  // The reply carries those; the initiator's ORD never exceeds the responder's IRD and
  // the responder's ORD never exceeds the initiator's IRD.
  EXPECT_EQ(h.reply[21], 5);
  EXPECT_EQ(h.reply[23], 10);
  EXPECT_EQ(h.initiator.outcome().ord, 5);
  EXPECT_EQ(h.initiator.outcome().ird, 10);
  EXPECT_LE(h.initiator.outcome().ord, h.responder.outcome().ird);
  EXPECT_LE(h.responder.outcome().ord, h.initiator.outcome().ird);

  // Values beyond 14 bits are clamped, not truncated into the flag bits.
  MpaParams huge = rping_params(false, false);
  huge.ird = 0xFFFF;
  huge.ord = 0xFFFF;
  const Bytes req = MpaInitiator(huge).request();
  EXPECT_EQ(req[20], 0x3F);  // no A bit
  EXPECT_EQ(req[21], 0xFF);
  EXPECT_EQ(req[22], 0x3F);  // no C/D bits
  EXPECT_EQ(req[23], 0xFF);
  Handshake h2(huge, huge);
  ASSERT_EQ(h2.reply_progress.step, MpaStep::kDone);
  EXPECT_EQ(h2.initiator.outcome().ird, 0x3FFF);
  EXPECT_EQ(h2.initiator.outcome().ord, 0x3FFF);
  EXPECT_EQ(h2.initiator.outcome().rtr, RtrType::kNone);
}

TEST(proto_mpa_negotiator, ResponderSendsTheMarkersAskedForAndRefusesBrokenRequests) {
  // Markers asked: the reply accepts, and the responder sends markers (it does not ask for them).
  MpaResponder r;
  ASSERT_EQ(r.on_request_bytes(siw_frame(false, 0x90, 2, {0, 1, 0, 1})).step, MpaStep::kDone);
  EXPECT_TRUE(r.request().markers);
  const auto reply =
      wire::decode_mpa_frame(wire::MpaFrameKind::kReply, r.accept(rping_params(false, false)));
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->frame.markers);
  EXPECT_FALSE(reply->frame.reject);
  EXPECT_TRUE(r.outcome().send_markers);
  EXPECT_FALSE(r.outcome().receive_markers);
  // S set but no room for the IRD/ORD words.
  MpaResponder r2;
  EXPECT_EQ(r2.on_request_bytes(siw_frame(false, 0x10, 2, {0, 1})).step, MpaStep::kFailed);
  // Revisions other than 1 and 2.
  MpaResponder r3;
  EXPECT_EQ(r3.on_request_bytes(siw_frame(false, 0x10, 3, {0, 1, 0, 1})).step, MpaStep::kFailed);
  MpaResponder r4;
  EXPECT_EQ(r4.on_request_bytes(siw_frame(false, 0x00, 0, {})).step, MpaStep::kFailed);
}

TEST(proto_mpa_negotiator, MarkersAreAgreedPerDirection) {
  // The M bit of each frame asks the other side to send markers.
  for (const bool initiator_asks : {false, true}) {
    for (const bool responder_asks : {false, true}) {
      MpaParams init = rping_params(false, true);
      init.markers = initiator_asks;
      MpaParams resp = rping_params(false, false);
      resp.markers = responder_asks;
      Handshake h(init, resp);
      ASSERT_EQ(h.reply_progress.step, MpaStep::kDone);
      EXPECT_EQ(h.responder.request().markers, initiator_asks);
      EXPECT_EQ(h.initiator.outcome().send_markers, responder_asks);
      EXPECT_EQ(h.initiator.outcome().receive_markers, initiator_asks);
      EXPECT_EQ(h.responder.outcome().send_markers, initiator_asks);
      EXPECT_EQ(h.responder.outcome().receive_markers, responder_asks);
    }
  }
  // A reply from a peer that wants markers (M in the reply): the initiator sends them.
  MpaInitiator i(rping_params(false, false));
  EXPECT_EQ(i.on_reply_bytes(siw_frame(true, 0x90, 2, {0, 1, 0, 1})).step, MpaStep::kDone);
  EXPECT_TRUE(i.outcome().send_markers);
  EXPECT_FALSE(i.outcome().receive_markers);
}

TEST(proto_mpa_negotiator, InitiatorRefusesBrokenReplies) {
  MpaInitiator i2(rping_params(false, false));
  const MpaProgress p2 = i2.on_reply_bytes(siw_frame(true, 0x10, 2, {0, 1}));
  EXPECT_EQ(p2.step, MpaStep::kFailed);
  EXPECT_EQ(p2.terminate, wire::term::kLlpInvalidRequestReply);
  MpaInitiator i3(rping_params(false, false));
  const MpaProgress p3 = i3.on_reply_bytes(siw_frame(true, 0x10, 3, {0, 1, 0, 1}));
  EXPECT_EQ(p3.step, MpaStep::kFailed);
  EXPECT_EQ(p3.terminate, wire::term::kLlpInvalidRequestReply);
}

TEST(proto_mpa_negotiator, PrivateDataTravelsBothWaysInEnhancedMode) {
  MpaParams init = rping_params(false, true);
  init.private_data = bytes_of("from the initiator");
  MpaParams resp = rping_params(false, false);
  resp.private_data = bytes_of("from the responder");
  Handshake h(init, resp);
  ASSERT_EQ(h.reply_progress.step, MpaStep::kDone);
  EXPECT_EQ(h.responder.request().private_data, init.private_data);
  EXPECT_EQ(h.responder.outcome().peer_private_data, init.private_data);
  EXPECT_EQ(h.initiator.outcome().peer_private_data, resp.private_data);
}

}  // namespace
}  // namespace uwarp::proto
