// proto::FpduReader: placement, buffering, CRC and framing errors, arbitrary stream splits, and
// the direct_target()/commit_direct() receive path, against a recording FpduSink.
#include "proto/fpdu_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "proto/proto_test_util.h"
#include "wire/fpdu.h"
#include "wire/rdmap.h"

namespace uwarp::proto {
namespace {

using testing::Bytes;
using testing::fpdu;
using testing::pattern;
using testing::tagged_header;
using testing::untagged_header;
using wire::RdmapOpcode;

constexpr std::uint8_t kCanary = 0xEE;
constexpr std::size_t kCanarySize = 8;

// Records every segment. By default untagged Read Requests and Terminates are buffered and the
// rest is scattered into three pieces (one of them empty) of a fresh buffer with a canary after
// it; tests can override either callback.
class RecordingSink final : public FpduSink {
 public:
  struct Segment {
    wire::DdpHeader header;
    std::size_t payload_length = 0;
    bool buffered = false;
    bool ended = false;
    Bytes data;  // the payload as placed (scatter) or handed over (buffered)
    friend bool operator==(const Segment& a, const Segment& b) {
      return testing::encode_header(a.header) == testing::encode_header(b.header) &&
             a.payload_length == b.payload_length && a.buffered == b.buffered &&
             a.ended == b.ended && a.data == b.data;
    }
    friend void PrintTo(const Segment& s, std::ostream* os) {
      *os << "{hdr " << testing::to_hex(testing::encode_header(s.header)) << ", len "
          << s.payload_length << (s.buffered ? ", buffered" : "") << (s.ended ? ", ended" : "")
          << ", data " << s.data.size() << " bytes}";
    }
  };

  std::function<std::optional<Placement>(const wire::DdpHeader&, std::size_t)> on_header;
  std::function<std::optional<wire::TerminateCode>(const Segment&)> on_end;
  std::vector<Segment> segments;
  bool canary_ok = true;

  Placement on_segment_header(const wire::DdpHeader& h, std::size_t payload_length) override {
    EXPECT_TRUE(segments.empty() || segments.back().ended)
        << "header before the previous segment ended";
    Segment s;
    s.header = h;
    s.payload_length = payload_length;
    segments.push_back(s);
    if (on_header) {
      if (auto p = on_header(h, payload_length)) {
        segments.back().buffered = p->kind == Placement::Kind::kBuffered;
        return *p;
      }
    }
    const auto op = static_cast<RdmapOpcode>(h.opcode);
    if (!h.tagged && (op == RdmapOpcode::kReadRequest || op == RdmapOpcode::kTerminate)) {
      segments.back().buffered = true;
      return Placement::buffered();
    }
    Bytes& buf = storage_.emplace_back(payload_length + kCanarySize, kCanary);
    const std::size_t first = payload_length / 3;
    spans_.clear();
    spans_.push_back(ByteSpan(buf.data(), first));
    spans_.push_back(ByteSpan(buf.data() + first, 0));
    spans_.push_back(ByteSpan(buf.data() + first, payload_length - first));
    return Placement::into(spans_);
  }

  std::optional<wire::TerminateCode> on_segment_end(ConstByteSpan buffered) override {
    Segment& s = segments.back();
    EXPECT_FALSE(s.ended);
    s.ended = true;
    if (s.buffered) {
      s.data.assign(buffered.begin(), buffered.end());
    } else {
      EXPECT_TRUE(buffered.empty());
      if (!storage_.empty() && storage_.back().size() == s.payload_length + kCanarySize) {
        const Bytes& buf = storage_.back();
        s.data.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(s.payload_length));
        for (std::size_t i = s.payload_length; i < buf.size(); ++i)
          canary_ok = canary_ok && buf[i] == kCanary;
      }
    }
    if (on_end) return on_end(s);
    return std::nullopt;
  }

 private:
  std::deque<Bytes> storage_;
  std::vector<ByteSpan> spans_;
};

// A stream of FPDUs covering every pad length, tagged and untagged, scattered and buffered,
// multi-segment messages and zero-length payloads.
struct TestStream {
  Bytes bytes;
  std::vector<Bytes> payloads;
  std::size_t fpdus = 0;
};

TestStream make_stream(bool crc) {
  TestStream s;
  auto add = [&](const wire::DdpHeader& h, const Bytes& payload) {
    testing::append(s.bytes, fpdu(h, payload, crc));
    s.payloads.push_back(payload);
    ++s.fpdus;
  };
  add(tagged_header(RdmapOpcode::kRdmaWrite, 0x1234, 0x1000), pattern(0, 1));  // pad 0
  add(tagged_header(RdmapOpcode::kRdmaWrite, 0x1234, 0x1000), pattern(1, 2));  // pad 3
  add(tagged_header(RdmapOpcode::kRdmaWrite, 0x1234, 0x1001), pattern(2, 3));  // pad 2
  add(tagged_header(RdmapOpcode::kRdmaWrite, 0x1234, 0x1003), pattern(3, 4));  // pad 1
  add(untagged_header(RdmapOpcode::kSend, 0, 1, 0, false), pattern(37, 5));
  add(untagged_header(RdmapOpcode::kSend, 0, 1, 37, true), pattern(5, 6));
  wire::ReadRequest rr;
  rr.sink_stag = 0xAABBCC01;
  rr.sink_to = 0x1122334455667788;
  rr.size = 4096;
  rr.source_stag = 0x01020304;
  rr.source_to = 0x8877665544332211;
  add(untagged_header(RdmapOpcode::kReadRequest, 1, 1), testing::read_request_body(rr));
  add(tagged_header(RdmapOpcode::kReadResponse, 0xAABBCC01, 0x1122334455667788, false),
      pattern(300, 7));
  add(tagged_header(RdmapOpcode::kReadResponse, 0xAABBCC01, 0x1122334455667788 + 300),
      pattern(1000, 8));
  add(untagged_header(RdmapOpcode::kTerminate, 2, 1), Bytes{0x12, 0x34, 0x00, 0x00});
  return s;
}

std::vector<RecordingSink::Segment> run_whole(ConstByteSpan stream, bool crc) {
  RecordingSink sink;
  FpduReader reader(sink, crc);
  EXPECT_EQ(reader.feed(stream), stream.size());
  EXPECT_FALSE(reader.failed());
  EXPECT_TRUE(reader.at_boundary());
  EXPECT_TRUE(sink.canary_ok);
  return sink.segments;
}

TEST(proto_fpdu_reader, WholeStreamDeliversEverySegment) {
  for (bool crc : {false, true}) {
    const TestStream s = make_stream(crc);
    const auto segs = run_whole(s.bytes, crc);
    ASSERT_EQ(segs.size(), s.fpdus);
    for (std::size_t i = 0; i < segs.size(); ++i) {
      EXPECT_TRUE(segs[i].ended);
      EXPECT_EQ(segs[i].payload_length, s.payloads[i].size()) << i;
      EXPECT_EQ(segs[i].data, s.payloads[i]) << i;
    }
    EXPECT_TRUE(segs[6].buffered);  // Read Request
    EXPECT_TRUE(segs[9].buffered);  // Terminate
    EXPECT_EQ(segs[5].header.message_offset, 37u);
    EXPECT_FALSE(segs[4].header.last);
    EXPECT_EQ(segs[8].header.tagged_offset, 0x1122334455667788u + 300);
  }
}

TEST(proto_fpdu_reader, PlacesIntoTheGivenScatterList) {
  Bytes a(3, 0), b(0), c(10, 0), d(4, 0);
  const ByteSpan spans[] = {ByteSpan(a), ByteSpan(b), ByteSpan(c), ByteSpan(d)};
  RecordingSink sink;
  sink.on_header = [&](const wire::DdpHeader&, std::size_t len) -> std::optional<Placement> {
    EXPECT_EQ(len, 17u);
    return Placement::into(spans);
  };
  FpduReader reader(sink, false);
  const Bytes payload = pattern(17, 9);
  const Bytes f = fpdu(tagged_header(RdmapOpcode::kRdmaWrite, 7, 0), payload, false);
  EXPECT_EQ(reader.feed(f), f.size());
  ASSERT_FALSE(reader.failed());
  Bytes placed = a;
  testing::append(placed, c);
  testing::append(placed, d);
  EXPECT_EQ(placed, payload);
  ASSERT_EQ(sink.segments.size(), 1u);
  EXPECT_TRUE(sink.segments[0].ended);
}

TEST(proto_fpdu_reader, ScatterShorterThanPayloadIsTheSinksBug) {
  Bytes a(5, 0);
  const ByteSpan spans[] = {ByteSpan(a)};
  RecordingSink sink;
  sink.on_header = [&](const wire::DdpHeader&, std::size_t) -> std::optional<Placement> {
    return Placement::into(spans);
  };
  FpduReader reader(sink, false);
  const Bytes f = fpdu(tagged_header(RdmapOpcode::kRdmaWrite, 7, 0), pattern(9, 1), false);
  EXPECT_LT(reader.feed(f), f.size());
  ASSERT_TRUE(reader.failed());
  EXPECT_EQ(reader.failure()->code, wire::term::kLlpLocalCatastrophic);
}

TEST(proto_fpdu_reader, BufferedPayloadIsHandedToSegmentEnd) {
  const Bytes body = pattern(28, 3);
  const Bytes f = fpdu(untagged_header(RdmapOpcode::kReadRequest, 1, 1), body, true);
  RecordingSink sink;
  FpduReader reader(sink, true);
  EXPECT_EQ(reader.feed(f), f.size());
  ASSERT_FALSE(reader.failed());
  ASSERT_EQ(sink.segments.size(), 1u);
  EXPECT_TRUE(sink.segments[0].buffered);
  EXPECT_EQ(sink.segments[0].data, body);
}

TEST(proto_fpdu_reader, BufferedPayloadLargerThanTheBufferFails) {
  RecordingSink sink;
  sink.on_header = [](const wire::DdpHeader&, std::size_t) -> std::optional<Placement> {
    return Placement::buffered();
  };
  FpduReader reader(sink, false);
  const Bytes f = fpdu(untagged_header(RdmapOpcode::kTerminate, 2, 1),
                       pattern(kMaxBufferedPayload + 1, 1), false);
  reader.feed(f);
  ASSERT_TRUE(reader.failed());
  EXPECT_EQ(reader.failure()->code, wire::term::kDdpUntaggedTooLong);
  // Exactly the maximum fits.
  RecordingSink sink2;
  sink2.on_header = sink.on_header;
  FpduReader reader2(sink2, false);
  const Bytes g =
      fpdu(untagged_header(RdmapOpcode::kTerminate, 2, 1), pattern(kMaxBufferedPayload, 1), false);
  EXPECT_EQ(reader2.feed(g), g.size());
  EXPECT_FALSE(reader2.failed());
}

TEST(proto_fpdu_reader, SiwFramesWithCrcAreAccepted) {
  // siw-flavour-crc-p2p: the RTR Write, CRC 0x5f4cd3eb.
  const Bytes rtr = {0x00, 0x0e, 0xc1, 0x40, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xeb, 0xd3, 0x4c, 0x5f};
  RecordingSink sink;
  FpduReader reader(sink, true);
  EXPECT_EQ(reader.feed(rtr), rtr.size());
  ASSERT_FALSE(reader.failed());
  ASSERT_EQ(sink.segments.size(), 1u);
  EXPECT_TRUE(sink.segments[0].header.tagged);
  EXPECT_EQ(sink.segments[0].header.stag, 1u);
  EXPECT_EQ(sink.segments[0].payload_length, 0u);
  EXPECT_TRUE(sink.segments[0].ended);
}

TEST(proto_fpdu_reader, BadCrcFailsWithLlpCrcErrorAndKeepsTheHeader) {
  const wire::DdpHeader h = untagged_header(RdmapOpcode::kSend, 0, 1);
  const Bytes good = fpdu(h, pattern(33, 4), true);
  const Bytes header_bytes = testing::encode_header(h);
  // Flip one bit anywhere except the length field and the DDP control byte (which change the
  // framing itself): in the rest of the header, the payload, the pad or the CRC.
  for (std::size_t at = 4; at < good.size(); ++at) {
    Bytes bad = good;
    bad[at] ^= 0x01;
    RecordingSink sink;
    FpduReader reader(sink, true);
    reader.feed(bad);
    ASSERT_TRUE(reader.failed()) << "flip at " << at;
    const RxFailure& f = *reader.failure();
    EXPECT_EQ(f.code, wire::term::kLlpBadCrc) << at;
    EXPECT_TRUE(f.have_header);
    EXPECT_EQ(f.ulpdu_length, 18 + 33);
    ASSERT_EQ(f.header_size, wire::kUntaggedHeaderSize);
    if (at >= 2 + wire::kUntaggedHeaderSize) {
      EXPECT_EQ(Bytes(f.header.begin(), f.header.begin() + 18), header_bytes);
    }
    // The segment never ended: its data must not be used.
    ASSERT_FALSE(sink.segments.empty());
    EXPECT_FALSE(sink.segments.back().ended);
  }
}

TEST(proto_fpdu_reader, CrcNotNegotiatedIgnoresTheTrailer) {
  Bytes f = fpdu(untagged_header(RdmapOpcode::kSend, 0, 1), pattern(10, 4), false);
  f[f.size() - 1] = 0x5A;  // a peer may put anything there
  RecordingSink sink;
  FpduReader reader(sink, false);
  EXPECT_EQ(reader.feed(f), f.size());
  EXPECT_FALSE(reader.failed());
  ASSERT_EQ(sink.segments.size(), 1u);
  EXPECT_TRUE(sink.segments[0].ended);
}

TEST(proto_fpdu_reader, UlpduShorterThanItsDdpHeaderIsABadFpdu) {
  struct Case {
    std::uint8_t ddp_control;
    std::uint16_t ulpdu_length;
  };
  const Case cases[] = {{0x41, 17}, {0x41, 2}, {0x41, 0}, {0xc1, 13}, {0xc1, 2}};
  for (const Case& c : cases) {
    Bytes ulpdu(c.ulpdu_length, 0);
    if (!ulpdu.empty()) ulpdu[0] = c.ddp_control;
    if (ulpdu.size() > 1) ulpdu[1] = 0x43;
    Bytes stream = testing::fpdu_raw(ulpdu, false);
    if (c.ulpdu_length < 2) {
      // The DDP control byte comes after the ULPDU: make it say untagged.
      stream.resize(std::max<std::size_t>(stream.size(), 4));
      stream[2] = c.ddp_control;
    }
    RecordingSink sink;
    FpduReader reader(sink, false);
    reader.feed(stream);
    ASSERT_TRUE(reader.failed()) << "length " << c.ulpdu_length;
    EXPECT_EQ(reader.failure()->code, wire::term::kLlpBadFpdu);
    EXPECT_FALSE(reader.failure()->have_header);
    EXPECT_TRUE(sink.segments.empty());
  }
}

TEST(proto_fpdu_reader, EverySplitIntoTwoPiecesGivesTheSameResult) {
  for (bool crc : {false, true}) {
    const TestStream s = make_stream(crc);
    const auto want = run_whole(s.bytes, crc);
    for (std::size_t cut = 0; cut <= s.bytes.size(); ++cut) {
      RecordingSink sink;
      FpduReader reader(sink, crc);
      const ConstByteSpan all(s.bytes);
      ASSERT_EQ(reader.feed(all.first(cut)), cut);
      ASSERT_EQ(reader.feed(all.subspan(cut)), s.bytes.size() - cut);
      ASSERT_FALSE(reader.failed()) << "cut " << cut;
      ASSERT_TRUE(sink.canary_ok) << "cut " << cut;
      ASSERT_EQ(sink.segments, want) << "cut " << cut;
    }
  }
}

TEST(proto_fpdu_reader, ByteAtATime) {
  const TestStream s = make_stream(true);
  const auto want = run_whole(s.bytes, true);
  RecordingSink sink;
  FpduReader reader(sink, true);
  for (std::size_t i = 0; i < s.bytes.size(); ++i) {
    ASSERT_EQ(reader.feed(ConstByteSpan(&s.bytes[i], 1)), 1u) << i;
  }
  EXPECT_EQ(sink.segments, want);
  EXPECT_TRUE(reader.at_boundary());
}

TEST(proto_fpdu_reader, RandomSplitsGiveTheSameResult) {
  for (bool crc : {false, true}) {
    const TestStream s = make_stream(crc);
    const auto want = run_whole(s.bytes, crc);
    std::mt19937 rng(crc ? 77 : 78);
    for (int round = 0; round < 300; ++round) {
      RecordingSink sink;
      FpduReader reader(sink, crc);
      std::size_t at = 0;
      for (int guard = 0; at < s.bytes.size() && guard < 100000; ++guard) {
        const std::size_t max_piece =
            std::uniform_int_distribution<std::size_t>(1, 3)(rng) == 1 ? 4 : 700;
        const std::size_t n = std::min(
            s.bytes.size() - at, std::uniform_int_distribution<std::size_t>(1, max_piece)(rng));
        ASSERT_EQ(reader.feed(ConstByteSpan(s.bytes).subspan(at, n)), n);
        at += n;
      }
      ASSERT_EQ(at, s.bytes.size());
      ASSERT_FALSE(reader.failed()) << "round " << round;
      ASSERT_EQ(sink.segments, want) << "round " << round;
    }
  }
}

TEST(proto_fpdu_reader, DirectTargetPathGivesTheSameResult) {
  for (bool crc : {false, true}) {
    const TestStream s = make_stream(crc);
    const auto want = run_whole(s.bytes, crc);
    std::mt19937 rng(crc ? 5 : 6);
    for (int round = 0; round < 300; ++round) {
      RecordingSink sink;
      FpduReader reader(sink, crc);
      std::size_t at = 0;
      std::size_t direct_bytes = 0;
      for (int guard = 0; at < s.bytes.size() && guard < 100000; ++guard) {
        const std::size_t want_n = std::uniform_int_distribution<std::size_t>(1, 64)(rng);
        const ByteSpan target = reader.direct_target();
        if (!target.empty()) {
          // "recv()" straight into the placement target, possibly less than it offers.
          const std::size_t n = std::min({want_n, target.size(), s.bytes.size() - at});
          std::memcpy(target.data(), s.bytes.data() + at, n);
          reader.commit_direct(n);
          at += n;
          direct_bytes += n;
        } else {
          // Header or trailer: a small bounce-buffer read, never past what is needed next.
          const std::size_t n = std::min<std::size_t>({want_n % 7 + 1, s.bytes.size() - at});
          at += reader.feed(ConstByteSpan(s.bytes).subspan(at, n));
        }
        ASSERT_FALSE(reader.failed());
      }
      ASSERT_EQ(at, s.bytes.size());
      ASSERT_GT(direct_bytes, 0u);
      ASSERT_EQ(sink.segments, want) << "round " << round;
      ASSERT_TRUE(reader.at_boundary());
    }
  }
}

TEST(proto_fpdu_reader, DirectTargetIsEmptyOutsidePayloads) {
  RecordingSink sink;
  FpduReader reader(sink, false);
  EXPECT_TRUE(reader.direct_target().empty());
  const Bytes f = fpdu(tagged_header(RdmapOpcode::kRdmaWrite, 1, 0), pattern(100, 1), false);
  reader.feed(ConstByteSpan(f).first(2 + 14));  // the whole header
  const ByteSpan t = reader.direct_target();
  EXPECT_FALSE(t.empty());
  EXPECT_LE(t.size(), 100u);
  reader.feed(ConstByteSpan(f).subspan(16, 100));
  EXPECT_TRUE(reader.direct_target().empty());  // trailer next
  EXPECT_FALSE(reader.at_boundary());
  reader.feed(ConstByteSpan(f).subspan(116));
  EXPECT_TRUE(reader.at_boundary());
  ASSERT_EQ(sink.segments.size(), 1u);
  EXPECT_EQ(sink.segments[0].data, pattern(100, 1));
}

TEST(proto_fpdu_reader, SinkRejectionCarriesTheDdpHeader) {
  const wire::DdpHeader h = tagged_header(RdmapOpcode::kRdmaWrite, 0xDEADBE01, 0x42);
  const Bytes f = fpdu(h, pattern(50, 1), false);
  RecordingSink sink;
  sink.on_header = [](const wire::DdpHeader&, std::size_t) -> std::optional<Placement> {
    return Placement::reject(wire::term::kDdpTaggedInvalidStag);
  };
  FpduReader reader(sink, false);
  Bytes stream = f;
  testing::append(stream, f);
  const std::size_t used = reader.feed(stream);
  EXPECT_EQ(used, 2 + wire::kTaggedHeaderSize);  // stopped right after the header
  ASSERT_TRUE(reader.failed());
  const RxFailure& fail = *reader.failure();
  EXPECT_EQ(fail.code, wire::term::kDdpTaggedInvalidStag);
  EXPECT_TRUE(fail.have_header);
  EXPECT_EQ(fail.ulpdu_length, 14 + 50);
  ASSERT_EQ(fail.header_size, wire::kTaggedHeaderSize);
  EXPECT_EQ(Bytes(fail.header.begin(), fail.header.begin() + 14), testing::encode_header(h));
  EXPECT_FALSE(fail.have_rdmap_header);
  // Nothing more is consumed once failed.
  EXPECT_EQ(reader.feed(stream), 0u);
  EXPECT_EQ(sink.segments.size(), 1u);
}

TEST(proto_fpdu_reader, SegmentEndErrorOnAReadRequestCarriesItsBody) {
  wire::ReadRequest rr;
  rr.sink_stag = 0x100;
  rr.sink_to = 0x200;
  rr.size = 0x300;
  rr.source_stag = 0x400;
  rr.source_to = 0x500;
  const Bytes body = testing::read_request_body(rr);
  const wire::DdpHeader h = untagged_header(RdmapOpcode::kReadRequest, 1, 1);
  const Bytes f = fpdu(h, body, true);
  RecordingSink sink;
  sink.on_end = [](const RecordingSink::Segment&) -> std::optional<wire::TerminateCode> {
    return wire::term::kRdmapInvalidStag;
  };
  FpduReader reader(sink, true);
  EXPECT_EQ(reader.feed(f), f.size());
  ASSERT_TRUE(reader.failed());
  const RxFailure& fail = *reader.failure();
  EXPECT_EQ(fail.code, wire::term::kRdmapInvalidStag);
  EXPECT_TRUE(fail.have_header);
  EXPECT_EQ(fail.ulpdu_length, 18 + 28);
  EXPECT_EQ(Bytes(fail.header.begin(), fail.header.begin() + 18), testing::encode_header(h));
  ASSERT_TRUE(fail.have_rdmap_header);
  EXPECT_EQ(Bytes(fail.rdmap_header.begin(), fail.rdmap_header.end()), body);
}

TEST(proto_fpdu_reader, SegmentEndErrorOnOtherMessagesHasNoRdmapHeader) {
  RecordingSink sink;
  sink.on_end = [](const RecordingSink::Segment&) -> std::optional<wire::TerminateCode> {
    return wire::term::kDdpUntaggedNoBuffer;
  };
  FpduReader reader(sink, false);
  const Bytes f = fpdu(untagged_header(RdmapOpcode::kSend, 0, 1), pattern(40, 2), false);
  reader.feed(f);
  ASSERT_TRUE(reader.failed());
  EXPECT_EQ(reader.failure()->code, wire::term::kDdpUntaggedNoBuffer);
  EXPECT_TRUE(reader.failure()->have_header);
  EXPECT_FALSE(reader.failure()->have_rdmap_header);
}

TEST(proto_fpdu_reader, LargestUlpdu) {
  // ULPDU 65535: a 14-byte header and 65521 payload bytes, 3 bytes of pad.
  const Bytes payload = pattern(0xFFFF - 14, 11);
  const Bytes f = fpdu(tagged_header(RdmapOpcode::kRdmaWrite, 3, 0), payload, true);
  ASSERT_EQ(f.size(), 2 + 0xFFFFu + 3 + 4);
  RecordingSink sink;
  FpduReader reader(sink, true);
  EXPECT_EQ(reader.feed(f), f.size());
  ASSERT_FALSE(reader.failed());
  ASSERT_EQ(sink.segments.size(), 1u);
  EXPECT_EQ(sink.segments[0].data, payload);
}

TEST(proto_fpdu_reader, HeaderOnlySegmentsEndWithoutPayload) {
  RecordingSink sink;
  FpduReader reader(sink, true);
  Bytes stream;
  for (std::uint32_t msn = 1; msn <= 3; ++msn) {
    testing::append(stream, fpdu(untagged_header(RdmapOpcode::kSend, 0, msn), {}, true));
  }
  EXPECT_EQ(reader.feed(stream), stream.size());
  ASSERT_EQ(sink.segments.size(), 3u);
  for (const auto& s : sink.segments) {
    EXPECT_TRUE(s.ended);
    EXPECT_EQ(s.payload_length, 0u);
  }
}

TEST(proto_fpdu_reader, DiscardedPayloadIsReadAndDropped) {
  for (bool crc : {false, true}) {
    RecordingSink sink;
    sink.on_header = [](const wire::DdpHeader& h, std::size_t) -> std::optional<Placement> {
      if (h.msn == 1) return Placement::discard();
      return std::nullopt;
    };
    FpduReader reader(sink, crc);
    Bytes stream = fpdu(untagged_header(RdmapOpcode::kSend, 0, 1), pattern(999, 1), crc);
    const Bytes second = pattern(50, 2);
    testing::append(stream, fpdu(untagged_header(RdmapOpcode::kSend, 0, 2), second, crc));
    // Byte by byte, checking that a discarded payload never offers a direct target.
    for (std::size_t i = 0; i < stream.size(); ++i) {
      if (sink.segments.size() == 1 && !sink.segments[0].ended) {
        EXPECT_TRUE(reader.direct_target().empty());
      }
      ASSERT_EQ(reader.feed(ConstByteSpan(&stream[i], 1)), 1u);
    }
    ASSERT_FALSE(reader.failed());
    ASSERT_EQ(sink.segments.size(), 2u);
    EXPECT_TRUE(sink.segments[0].ended);
    EXPECT_TRUE(sink.segments[0].data.empty());
    EXPECT_EQ(sink.segments[1].data, second);
  }
  // The CRC still covers a discarded payload.
  RecordingSink sink;
  sink.on_header = [](const wire::DdpHeader&, std::size_t) -> std::optional<Placement> {
    return Placement::discard();
  };
  FpduReader reader(sink, true);
  Bytes f = fpdu(untagged_header(RdmapOpcode::kSend, 0, 1), pattern(64, 3), true);
  f[40] ^= 1;
  reader.feed(f);
  ASSERT_TRUE(reader.failed());
  EXPECT_EQ(reader.failure()->code, wire::term::kLlpBadCrc);
}

TEST(proto_fpdu_reader, CommitOfZeroBytesOutsidePayloadChangesNothing) {
  // A receive straight into direct_target() that got no bytes must not disturb the reader,
  // even when called while it waits for header bytes.
  const TestStream s = make_stream(true);
  const auto want = run_whole(s.bytes, true);
  RecordingSink sink;
  FpduReader reader(sink, true);
  for (std::size_t i = 0; i < s.bytes.size(); ++i) {
    reader.commit_direct(0);
    ASSERT_EQ(reader.feed(ConstByteSpan(&s.bytes[i], 1)), 1u) << i;
  }
  EXPECT_FALSE(reader.failed());
  EXPECT_EQ(sink.segments, want);
}

}  // namespace
}  // namespace uwarp::proto
