// Tests for wire/mpa_frame.h: MPA request/reply frames and RFC 6581 IRD/ORD words, against the
// frames Linux siw sends, with the expected error at every truncation point.
#include "wire/mpa_frame.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "wire/siw_vectors.h"
#include "wire/wire_test_util.h"

namespace uwarp::wire {
namespace {

constexpr std::string_view kRequestKey = "MPA ID Req Frame";
constexpr std::string_view kReplyKey = "MPA ID Rep Frame";

std::string_view as_text(ConstByteSpan bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

struct SiwFrame {
  const char* name;
  MpaFrameKind kind;
  ConstByteSpan bytes;
};

const SiwFrame kSiwFrames[] = {
    {"crc-p2p request", MpaFrameKind::kRequest, siw::kMpaRequestCrcP2p},
    {"crc-p2p reply", MpaFrameKind::kReply, siw::kMpaReplyCrcP2p},
    {"default request", MpaFrameKind::kRequest, siw::kMpaRequestDefault},
    {"default reply", MpaFrameKind::kReply, siw::kMpaReplyDefault},
    {"p2p-read request", MpaFrameKind::kRequest, siw::kMpaRequestP2pRead},
    {"p2p-no-rtr reply", MpaFrameKind::kReply, siw::kMpaReplyP2pNoRtr},
    {"mpa1 request", MpaFrameKind::kRequest, siw::kMpaRequestRev1},
    {"mpa1 reply", MpaFrameKind::kReply, siw::kMpaReplyRev1},
};

MpaFrameKind other(MpaFrameKind kind) {
  return kind == MpaFrameKind::kRequest ? MpaFrameKind::kReply : MpaFrameKind::kRequest;
}

TEST(wire_mpa_frame, DecodesSiwCrcP2pRequest) {
  const ConstByteSpan in(siw::kMpaRequestCrcP2p);
  auto r = decode_mpa_frame(MpaFrameKind::kRequest, in);
  ASSERT_TRUE(r.has_value()) << testing::PrintToString(r.error());
  EXPECT_EQ(r->consumed, 24u);
  const MpaFrame& f = r->frame;
  EXPECT_EQ(f.kind, MpaFrameKind::kRequest);
  EXPECT_FALSE(f.markers);
  EXPECT_TRUE(f.crc);
  EXPECT_FALSE(f.reject);
  EXPECT_TRUE(f.enhanced);
  EXPECT_EQ(f.reserved_bits, 0);
  EXPECT_EQ(f.revision, 2);
  // The private data views the input; it is not copied.
  EXPECT_EQ(f.private_data.data(), in.data() + 20);
  EXPECT_EQ(to_hex(f.private_data), "80 01 c0 01");

  const auto w = decode_mpa_enhanced_words(f.private_data);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->peer_to_peer);
  EXPECT_FALSE(w->send_rtr);
  EXPECT_EQ(w->ird, 1);
  EXPECT_TRUE(w->write_rtr);
  EXPECT_TRUE(w->read_rtr);
  EXPECT_EQ(w->ord, 1);
}

TEST(wire_mpa_frame, DecodesSiwCrcP2pReply) {
  auto r = decode_mpa_frame(MpaFrameKind::kReply, siw::kMpaReplyCrcP2p);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.kind, MpaFrameKind::kReply);
  EXPECT_TRUE(r->frame.crc);
  EXPECT_TRUE(r->frame.enhanced);
  EXPECT_FALSE(r->frame.reject);
  EXPECT_EQ(r->frame.revision, 2);
  const auto w = decode_mpa_enhanced_words(r->frame.private_data);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->peer_to_peer);
  EXPECT_EQ(w->ird, 1);
  EXPECT_TRUE(w->write_rtr);  // siw as responder picks WRITE when it is offered...
  EXPECT_FALSE(w->read_rtr);  // ...and only WRITE
  EXPECT_FALSE(w->send_rtr);
  EXPECT_EQ(w->ord, 1);
}

TEST(wire_mpa_frame, DecodesSiwDefaultRequestWithoutCrcOrPeerToPeer) {
  auto r = decode_mpa_frame(MpaFrameKind::kRequest, siw::kMpaRequestDefault);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->frame.crc);
  EXPECT_TRUE(r->frame.enhanced);  // siw always sends S with revision 2
  EXPECT_EQ(r->frame.revision, 2);
  const auto w = decode_mpa_enhanced_words(r->frame.private_data);
  ASSERT_TRUE(w.has_value());
  EXPECT_FALSE(w->peer_to_peer);
  EXPECT_FALSE(w->send_rtr || w->write_rtr || w->read_rtr);
  EXPECT_EQ(w->ird, 1);
  EXPECT_EQ(w->ord, 1);
}

TEST(wire_mpa_frame, DecodesSiwReadRtrRequestAndNoRtrReply) {
  auto req = decode_mpa_frame(MpaFrameKind::kRequest, siw::kMpaRequestP2pRead);
  ASSERT_TRUE(req.has_value());
  const auto wq = decode_mpa_enhanced_words(req->frame.private_data);
  ASSERT_TRUE(wq.has_value());
  EXPECT_TRUE(wq->peer_to_peer);
  EXPECT_TRUE(wq->read_rtr);
  EXPECT_FALSE(wq->write_rtr);

  auto rep = decode_mpa_frame(MpaFrameKind::kReply, siw::kMpaReplyP2pNoRtr);
  ASSERT_TRUE(rep.has_value());
  const auto wp = decode_mpa_enhanced_words(rep->frame.private_data);
  ASSERT_TRUE(wp.has_value());
  EXPECT_TRUE(wp->peer_to_peer);
  EXPECT_FALSE(wp->send_rtr || wp->write_rtr || wp->read_rtr);
}

TEST(wire_mpa_frame, DecodesSiwRevision1RequestWithoutPrivateData) {
  auto r = decode_mpa_frame(MpaFrameKind::kRequest, siw::kMpaRequestRev1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->consumed, 20u);
  EXPECT_EQ(r->frame.revision, 1);
  EXPECT_FALSE(r->frame.enhanced);
  EXPECT_FALSE(r->frame.crc);
  EXPECT_TRUE(r->frame.private_data.empty());
  EXPECT_FALSE(decode_mpa_enhanced_words(r->frame.private_data).has_value());
}

TEST(wire_mpa_frame, SiwFramesRoundTripByteForByte) {
  for (const SiwFrame& v : kSiwFrames) {
    SCOPED_TRACE(v.name);
    auto r = decode_mpa_frame(v.kind, v.bytes);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->consumed, v.bytes.size());
    std::array<std::uint8_t, kMpaMaxFrameSize> out{};
    const std::size_t n = encode_mpa_frame(r->frame, out);
    EXPECT_EQ(to_hex(ConstByteSpan(out).first(n)), to_hex(v.bytes));
  }
}

TEST(wire_mpa_frame, SiwEnhancedWordsRoundTrip) {
  for (const SiwFrame& v : kSiwFrames) {
    SCOPED_TRACE(v.name);
    auto r = decode_mpa_frame(v.kind, v.bytes);
    ASSERT_TRUE(r.has_value());
    const auto w = decode_mpa_enhanced_words(r->frame.private_data);
    if (!r->frame.enhanced) {
      EXPECT_FALSE(w.has_value());
      continue;
    }
    ASSERT_TRUE(w.has_value());
    std::uint8_t out[kMpaEnhancedWordsSize] = {};
    encode_mpa_enhanced_words(*w, out);
    EXPECT_EQ(to_hex(out), to_hex(r->frame.private_data.first(kMpaEnhancedWordsSize)));
  }
}

// Every proper prefix of a valid frame is "need more", never a frame and never a key error.
TEST(wire_mpa_frame, EveryTruncationNeedsMore) {
  for (const SiwFrame& v : kSiwFrames) {
    SCOPED_TRACE(v.name);
    for (std::size_t len = 0; len < v.bytes.size(); ++len) {
      ASSERT_EQ(error_of(decode_mpa_frame(v.kind, v.bytes.first(len))), MpaFrameError::kNeedMore)
          << "prefix of " << len << " bytes";
    }
    EXPECT_TRUE(decode_mpa_frame(v.kind, v.bytes).has_value());
  }
}

TEST(wire_mpa_frame, NeededBytesOnceTheHeaderIsIn) {
  for (const SiwFrame& v : kSiwFrames) {
    SCOPED_TRACE(v.name);
    for (std::size_t len = 0; len < kMpaFrameHeaderSize; ++len) {
      EXPECT_EQ(mpa_frame_needed_bytes(v.bytes.first(len)), std::nullopt) << len;
    }
    for (std::size_t len = kMpaFrameHeaderSize; len <= v.bytes.size(); ++len) {
      EXPECT_EQ(mpa_frame_needed_bytes(v.bytes.first(len)), v.bytes.size()) << len;
    }
  }
}

// A key corrupted at byte k: prefixes up to k bytes cannot tell yet; from k + 1 bytes on the
// frame is refused, before the rest of it arrives.
TEST(wire_mpa_frame, CorruptedKeyIsRefusedAsSoonAsTheBadByteArrives) {
  for (const SiwFrame& v : kSiwFrames) {
    SCOPED_TRACE(v.name);
    for (std::size_t k = 0; k < kMpaKeySize; ++k) {
      std::vector<std::uint8_t> bad = to_vector(v.bytes);
      bad[k] ^= 0x20;  // 'M' -> 'm', ' ' -> '\0', ...
      for (std::size_t len = 0; len <= bad.size(); ++len) {
        const auto err = error_of(decode_mpa_frame(v.kind, ConstByteSpan(bad).first(len)));
        ASSERT_EQ(err, len <= k ? MpaFrameError::kNeedMore : MpaFrameError::kBadKey)
            << "key byte " << k << " corrupted, prefix of " << len << " bytes";
      }
    }
  }
}

// Request and reply keys differ at byte 9 ('q' / 'p'): a request read as a reply (or the
// reverse) is refused from the tenth byte on.
TEST(wire_mpa_frame, RequestAndReplyKeysAreNotInterchangeable) {
  for (const SiwFrame& v : kSiwFrames) {
    SCOPED_TRACE(v.name);
    for (std::size_t len = 0; len <= v.bytes.size(); ++len) {
      const auto err = error_of(decode_mpa_frame(other(v.kind), v.bytes.first(len)));
      ASSERT_EQ(err, len <= 9 ? MpaFrameError::kNeedMore : MpaFrameError::kBadKey) << len;
    }
  }
}

TEST(wire_mpa_frame, NonMpaBytesAreRefusedAtTheFirstByte) {
  constexpr std::string_view kHttp = "GET / HTTP/1.1\r\n\r\n";
  const ConstByteSpan in(reinterpret_cast<const std::uint8_t*>(kHttp.data()), kHttp.size());
  EXPECT_EQ(error_of(decode_mpa_frame(MpaFrameKind::kRequest, in.first(1))),
            MpaFrameError::kBadKey);
  EXPECT_EQ(error_of(decode_mpa_frame(MpaFrameKind::kRequest, in)), MpaFrameError::kBadKey);
  // An FPDU arriving where a reply was expected (a peer that skipped the handshake).
  EXPECT_EQ(error_of(decode_mpa_frame(MpaFrameKind::kReply, siw::kFpduSendNoCrc)),
            MpaFrameError::kBadKey);
}

std::vector<std::uint8_t> header_with_pd_length(std::uint16_t pd_length) {
  std::vector<std::uint8_t> f(kRequestKey.begin(), kRequestKey.end());
  f.push_back(0x10);  // S=1
  f.push_back(0x02);  // revision 2
  f.push_back(static_cast<std::uint8_t>(pd_length >> 8));
  f.push_back(static_cast<std::uint8_t>(pd_length));
  return f;
}

TEST(wire_mpa_frame, PrivateDataLongerThan512IsRefusedFromTheHeaderAlone) {
  for (std::uint16_t pd : {std::uint16_t{513}, std::uint16_t{0x8000}, std::uint16_t{0xffff}}) {
    const auto f = header_with_pd_length(pd);
    EXPECT_EQ(error_of(decode_mpa_frame(MpaFrameKind::kRequest, f)),
              MpaFrameError::kPrivateDataTooLong)
        << pd;
  }
}

TEST(wire_mpa_frame, PrivateDataOf512IsAccepted) {
  auto f = header_with_pd_length(512);
  EXPECT_EQ(error_of(decode_mpa_frame(MpaFrameKind::kRequest, f)), MpaFrameError::kNeedMore);
  for (int i = 0; i < 511; ++i) f.push_back(static_cast<std::uint8_t>(i));
  EXPECT_EQ(error_of(decode_mpa_frame(MpaFrameKind::kRequest, f)), MpaFrameError::kNeedMore);
  f.push_back(0xee);
  auto r = decode_mpa_frame(MpaFrameKind::kRequest, f);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->consumed, kMpaMaxFrameSize);
  EXPECT_EQ(r->frame.private_data.size(), 512u);
  EXPECT_EQ(r->frame.private_data.back(), 0xee);
}

// decode consumes exactly one frame; what follows (the first FPDU, coalesced by TCP) is left.
TEST(wire_mpa_frame, ConsumesOnlyTheFrame) {
  std::vector<std::uint8_t> stream = to_vector(siw::kMpaRequestCrcP2p);
  stream.insert(stream.end(), std::begin(siw::kFpduRtrWriteCrc), std::end(siw::kFpduRtrWriteCrc));
  auto r = decode_mpa_frame(MpaFrameKind::kRequest, stream);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->consumed, sizeof siw::kMpaRequestCrcP2p);
  EXPECT_EQ(r->frame.private_data.size(), 4u);
}

// A reject reply as uwarp would send it: R set, revision 2, S echoed, an explanation as private
// data (no IRD/ORD words needed for a reject, but S set means they come first).
TEST(wire_mpa_frame, EncodesRejectReply) {
  constexpr std::uint8_t kPrivate[] = {
      0x00, 0x00,  // IRD word: IRD 0
      0x00, 0x00,  // ORD word: ORD 0
      'b',  'u',  's', 'y',
  };
  constexpr std::uint8_t kExpected[] = {
      'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',  // key
      0x30, 0x02,  // M=0 C=0 R=1 S=1, reserved 0, revision 2
      0x00, 0x08,  // PD_Length 8
      0x00, 0x00,  // IRD word
      0x00, 0x00,  // ORD word
      'b',  'u',  's', 'y',
  };
  MpaFrame f;
  f.kind = MpaFrameKind::kReply;
  f.reject = true;
  f.enhanced = true;
  f.revision = 2;
  f.private_data = kPrivate;
  std::array<std::uint8_t, 64> out{};
  const std::size_t n = encode_mpa_frame(f, out);
  ASSERT_EQ(n, sizeof kExpected);
  EXPECT_EQ(to_hex(ConstByteSpan(out).first(n)), to_hex(kExpected));

  auto r = decode_mpa_frame(MpaFrameKind::kReply, kExpected);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->frame.reject);
  EXPECT_FALSE(r->frame.crc);
  EXPECT_EQ(as_text(r->frame.private_data.subspan(4)), "busy");
}

// Each flag lands on its own bit; values too wide for their field do not spill into others.
TEST(wire_mpa_frame, EncodesEachFlagOnItsOwnBit) {
  struct Case {
    const char* name;
    MpaFrame frame;
    std::uint16_t bits;
  };
  auto with = [](auto set) {
    MpaFrame f;
    f.revision = 0;
    set(f);
    return f;
  };
  const Case cases[] = {
      {"M", with([](MpaFrame& f) { f.markers = true; }), 0x8000},
      {"C", with([](MpaFrame& f) { f.crc = true; }), 0x4000},
      {"R", with([](MpaFrame& f) { f.reject = true; }), 0x2000},
      {"S", with([](MpaFrame& f) { f.enhanced = true; }), 0x1000},
      {"reserved", with([](MpaFrame& f) { f.reserved_bits = 0xff; }), 0x0f00},
      {"revision", with([](MpaFrame& f) { f.revision = 0xff; }), 0x00ff},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::array<std::uint8_t, kMpaFrameHeaderSize> out{};
    ASSERT_EQ(encode_mpa_frame(c.frame, out), kMpaFrameHeaderSize);
    EXPECT_EQ(as_text(ConstByteSpan(out).first(kMpaKeySize)), kRequestKey);
    EXPECT_EQ(load_be16(out.data() + 16), c.bits);
    EXPECT_EQ(load_be16(out.data() + 18), 0);  // PD_Length
  }
}

TEST(wire_mpa_frame, ReservedBitsAndMarkersDecodeAndRoundTrip) {
  // Neither siw nor uwarp sends these, but a decoder must report them (siw rejects M; reserved
  // bits are echoed by siw, so they must survive a round trip).
  std::vector<std::uint8_t> f(kReplyKey.begin(), kReplyKey.end());
  f.insert(f.end(), {
                        0x8a, 0x01,  // M=1 C=0 R=0 S=0, reserved 0xa, revision 1
                        0x00, 0x00,  // PD_Length 0
                    });
  auto r = decode_mpa_frame(MpaFrameKind::kReply, f);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->frame.markers);
  EXPECT_FALSE(r->frame.enhanced);
  EXPECT_EQ(r->frame.reserved_bits, 0xa);
  EXPECT_EQ(r->frame.revision, 1);
  std::array<std::uint8_t, kMpaFrameHeaderSize> out{};
  ASSERT_EQ(encode_mpa_frame(r->frame, out), f.size());
  EXPECT_EQ(to_hex(out), to_hex(f));
}

TEST(wire_mpa_frame, EncodeRefusesOversizedPrivateData) {
  std::vector<std::uint8_t> pd(kMpaMaxPrivateData + 1, 0x55);
  std::vector<std::uint8_t> out(kMpaMaxFrameSize + 64, 0xaa);
  MpaFrame f;
  f.private_data = pd;
  EXPECT_EQ(encode_mpa_frame(f, out), 0u);
  f.private_data = ConstByteSpan(pd).first(kMpaMaxPrivateData);
  EXPECT_EQ(encode_mpa_frame(f, out), kMpaMaxFrameSize);
}

TEST(wire_mpa_frame, EncodeRefusesSmallOutputAndWritesNothing) {
  auto r = decode_mpa_frame(MpaFrameKind::kRequest, siw::kMpaRequestCrcP2p);
  ASSERT_TRUE(r.has_value());
  std::vector<std::uint8_t> out(sizeof siw::kMpaRequestCrcP2p - 1, 0xaa);
  EXPECT_EQ(encode_mpa_frame(r->frame, out), 0u);
  EXPECT_EQ(out, std::vector<std::uint8_t>(out.size(), 0xaa));
  out.push_back(0xaa);
  EXPECT_EQ(encode_mpa_frame(r->frame, out), out.size());
  EXPECT_EQ(to_hex(out), to_hex(siw::kMpaRequestCrcP2p));
}

TEST(wire_mpa_frame, EnhancedWordsNeedFourBytes) {
  const ConstByteSpan pd = ConstByteSpan(siw::kMpaRequestCrcP2p).subspan(20);
  for (std::size_t len = 0; len < kMpaEnhancedWordsSize; ++len) {
    EXPECT_FALSE(decode_mpa_enhanced_words(pd.first(len)).has_value()) << len;
  }
  EXPECT_TRUE(decode_mpa_enhanced_words(pd).has_value());
}

TEST(wire_mpa_frame, EnhancedWordsEachBitAndTheFourteenBitCounts) {
  struct Case {
    const char* name;
    MpaEnhancedWords words;
    std::array<std::uint8_t, 4> bytes;
  };
  auto with = [](auto set) {
    MpaEnhancedWords w;
    set(w);
    return w;
  };
  const Case cases[] = {
      {"A", with([](MpaEnhancedWords& w) { w.peer_to_peer = true; }), {0x80, 0x00, 0x00, 0x00}},
      {"B", with([](MpaEnhancedWords& w) { w.send_rtr = true; }), {0x40, 0x00, 0x00, 0x00}},
      {"C", with([](MpaEnhancedWords& w) { w.write_rtr = true; }), {0x00, 0x00, 0x80, 0x00}},
      {"D", with([](MpaEnhancedWords& w) { w.read_rtr = true; }), {0x00, 0x00, 0x40, 0x00}},
      {"IRD max", with([](MpaEnhancedWords& w) { w.ird = 0x3fff; }), {0x3f, 0xff, 0x00, 0x00}},
      {"ORD max", with([](MpaEnhancedWords& w) { w.ord = 0x3fff; }), {0x00, 0x00, 0x3f, 0xff}},
      {"IRD/ORD 128",
       with([](MpaEnhancedWords& w) { w.ird = w.ord = 128; }),
       {0x00, 0x80, 0x00, 0x80}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::uint8_t out[kMpaEnhancedWordsSize] = {};
    encode_mpa_enhanced_words(c.words, out);
    EXPECT_EQ(to_hex(out), to_hex(c.bytes));
    const auto back = decode_mpa_enhanced_words(c.bytes);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->peer_to_peer, c.words.peer_to_peer);
    EXPECT_EQ(back->send_rtr, c.words.send_rtr);
    EXPECT_EQ(back->write_rtr, c.words.write_rtr);
    EXPECT_EQ(back->read_rtr, c.words.read_rtr);
    EXPECT_EQ(back->ird, c.words.ird);
    EXPECT_EQ(back->ord, c.words.ord);
  }
}

TEST(wire_mpa_frame, EnhancedWordsCountsWiderThanFourteenBitsDoNotSetFlags) {
  MpaEnhancedWords w;
  w.ird = 0xffff;
  w.ord = 0xc001;
  std::uint8_t out[kMpaEnhancedWordsSize] = {};
  encode_mpa_enhanced_words(w, out);
  EXPECT_EQ(to_hex(out), "3f ff 00 01");
}

}  // namespace
}  // namespace uwarp::wire
