// MPA markers (RFC 5044 section 5) on both sides: proto::TxBatch places them, proto::FpduReader
// takes and checks them. The transmit side is compared byte for byte with a plain model of the
// rule (support/marker_model.h) and one literal vector; the receive side takes what the transmit
// side sends in pieces of every size, through feed() and the direct path, and ends with the LLP
// Terminate 0x03 on a marker that points wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "proto/fpdu_reader.h"
#include "proto/proto_test_util.h"
#include "proto/tx_batch.h"
#include "support/marker_model.h"
#include "wire/crc32c.h"
#include "wire/fpdu.h"
#include "wire/mpa_marker.h"

namespace uwarp::proto {
namespace {

using testing::Bytes;
using testing::pattern;
using testing::tagged_header;
using testing::untagged_header;
using uwarp::testing::with_markers;
using wire::RdmapOpcode;

constexpr std::size_t kMaxUlpdu = 1440;

struct Message {
  wire::DdpHeader header;
  Bytes payload;
};

// Sends, Writes and Read Requests of many sizes, so that markers fall in headers, payloads, pads
// and between FPDUs.
std::vector<Message> mixed_messages(std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  std::vector<Message> out;
  for (int i = 0; i < count; ++i) {
    const std::size_t size = std::uniform_int_distribution<std::size_t>(0, 3000)(rng);
    Message m;
    m.payload = pattern(size, seed + static_cast<std::uint32_t>(i));
    m.header = i % 2 == 0
                   ? untagged_header(RdmapOpcode::kSend, 0, static_cast<std::uint32_t>(i + 1))
                   : tagged_header(RdmapOpcode::kRdmaWrite, 0x1234,
                                   0x1000 * static_cast<std::uint64_t>(i));
    out.push_back(std::move(m));
  }
  return out;
}

// Segments the messages into one batch after another, sending `chunk` bytes at a time; returns
// the stream.
Bytes transmit(const std::vector<Message>& messages, const Framing& framing, std::size_t chunk) {
  TxBatch batch;
  Bytes stream;
  for (const Message& m : messages) {
    const ConstByteSpan gather[] = {m.payload};
    MessageSegmenter::Message msg;
    msg.header = m.header;
    msg.gather = gather;
    msg.length = m.payload.size();
    MessageSegmenter seg;
    seg.start(msg);
    for (int round = 0; round < 10000; ++round) {
      const bool done = seg.fill(batch, kMaxUlpdu, framing);
      while (!batch.empty()) {
        const Bytes pending = testing::flatten(batch.pending());
        const std::size_t n = std::min(chunk, pending.size());
        stream.insert(stream.end(), pending.begin(),
                      pending.begin() + static_cast<std::ptrdiff_t>(n));
        batch.consume(n);
        testing::pop_all_sent(batch);
      }
      if (done) break;
    }
  }
  return stream;
}

TEST(proto_mpa_markers, TheFirstFpduBeginsWithAMarker) {
  // A Send of "ab" (MSN 1), CRC off: marker, length 20, DDP/RDMAP header, payload, pad, CRC 0.
  const Bytes payload = {'a', 'b'};
  const Bytes stream = transmit({{untagged_header(RdmapOpcode::kSend, 0, 1), payload}},
                                Framing{.markers = true}, 1 << 20);
  const Bytes expected = {
      0x00, 0x00, 0x00, 0x00,  // marker: FPDUPTR 0
      0x00, 0x14,              // ULPDU_Length 20 (markers not counted)
      0x41, 0x43,              // DDP L, version 1; RDMAP version 1, Send
      0x00, 0x00, 0x00, 0x00,  // invalidate STag
      0x00, 0x00, 0x00, 0x00,  // queue 0
      0x00, 0x00, 0x00, 0x01,  // MSN 1
      0x00, 0x00, 0x00, 0x00,  // MO 0
      'a',  'b',  0x00, 0x00,  // payload, pad to 4 (markers not counted)
      0x00, 0x00, 0x00, 0x00,  // CRC (not negotiated)
  };
  EXPECT_EQ(testing::to_hex(stream), testing::to_hex(expected));
}

TEST(proto_mpa_markers, TransmitPlacesThemWhereTheModelDoes) {
  for (const bool crc : {false, true}) {
    for (const std::size_t chunk : {std::size_t{1} << 20, std::size_t{97}, std::size_t{1}}) {
      const auto messages = mixed_messages(crc ? 7 : 8, 60);
      const Bytes plain = transmit(messages, Framing{.crc = crc}, 1 << 20);
      const Bytes marked = transmit(messages, Framing{.crc = crc, .markers = true}, chunk);
      ASSERT_GT(marked.size(), plain.size());
      EXPECT_EQ(marked, with_markers(plain, crc)) << "crc " << crc << ", chunk " << chunk;
    }
  }
}

TEST(proto_mpa_markers, FpdusStayWithinTheLimitAndTheBatchsScatterList) {
  // A 64 KiB Write in one gather piece of a page each: every FPDU and its markers fit a batch.
  Bytes payload = pattern(65536, 3);
  std::vector<ConstByteSpan> pages;
  for (std::size_t at = 0; at < payload.size(); at += 4096)
    pages.push_back(ConstByteSpan(payload).subspan(at, 4096));
  MessageSegmenter::Message msg;
  msg.header = tagged_header(RdmapOpcode::kRdmaWrite, 7, 0);
  msg.gather = pages;
  msg.length = payload.size();
  MessageSegmenter seg;
  seg.start(msg);
  TxBatch batch;
  const Framing framing{.crc = true, .markers = true};
  const std::size_t max_ulpdu = wire::max_ulpdu_for_fpdu_size(wire::kMaxFpduWithMarkers);
  bool done = false;
  for (int round = 0; round < 1000 && !done; ++round) {
    done = seg.fill(batch, max_ulpdu, framing);
    ASSERT_FALSE(batch.empty()) << "no FPDU fits an empty batch";
    ASSERT_LE(batch.pending().size(), TxBatch::kMaxIov);
    batch.consume(batch.pending_bytes());
    testing::pop_all_sent(batch);
  }
  EXPECT_TRUE(done);
}

// Collects what an FpduReader places: payloads by segment, in order.
class CollectingSink final : public FpduSink {
 public:
  std::vector<Bytes> payloads;
  Placement on_segment_header(const wire::DdpHeader&, std::size_t payload_length) override {
    payloads.emplace_back(payload_length, 0xEE);
    span_[0] = ByteSpan(payloads.back());
    return Placement::into(std::span<const ByteSpan>(span_, 1));
  }
  std::optional<wire::TerminateCode> on_segment_end(ConstByteSpan) override { return std::nullopt; }

 private:
  ByteSpan span_[1];
};

// The payload of each FPDU in a marker-free stream.
std::vector<Bytes> payloads_of(const Bytes& plain) {
  std::vector<Bytes> out;
  const auto fpdus = testing::parse_stream(plain);
  if (fpdus) {
    for (const auto& f : *fpdus) out.push_back(f.payload);
  }
  return out;
}

TEST(proto_mpa_markers, ReceiveTakesThemInPiecesOfEverySize) {
  for (const bool crc : {false, true}) {
    const auto messages = mixed_messages(crc ? 11 : 12, 40);
    const Bytes plain = transmit(messages, Framing{.crc = crc}, 1 << 20);
    const Bytes marked = transmit(messages, Framing{.crc = crc, .markers = true}, 1 << 20);
    for (const std::size_t piece :
         {std::size_t{1}, std::size_t{3}, std::size_t{509}, std::size_t{4096}, marked.size()}) {
      CollectingSink sink;
      FpduReader reader(sink, crc, /*markers=*/true);
      std::size_t at = 0;
      for (std::size_t round = 0; at < marked.size() && round < marked.size() + 1; ++round) {
        // Payload straight into place while the reader offers a target, the rest through feed().
        const ByteSpan target = reader.direct_target();
        const std::size_t n = std::min(piece, marked.size() - at);
        if (!target.empty() && round % 2 == 0) {
          const std::size_t d = std::min(n, target.size());
          std::copy_n(marked.begin() + static_cast<std::ptrdiff_t>(at), d, target.begin());
          reader.commit_direct(d);
          at += d;
        } else {
          at += reader.feed(ConstByteSpan(marked).subspan(at, n));
        }
        ASSERT_FALSE(reader.failed()) << "piece " << piece << " at " << at << ": "
                                      << static_cast<int>(reader.failure()->code.ecode);
      }
      EXPECT_EQ(at, marked.size());
      EXPECT_TRUE(reader.at_boundary());
      EXPECT_EQ(sink.payloads, payloads_of(plain)) << "crc " << crc << ", piece " << piece;
    }
  }
}

// Feeds `stream` whole to a reader with markers; the failure, if any.
std::optional<RxFailure> receive_all(const Bytes& stream, bool crc) {
  CollectingSink sink;
  FpduReader reader(sink, crc, /*markers=*/true);
  reader.feed(stream);
  return reader.failure();
}

TEST(proto_mpa_markers, AMarkerThatPointsWrongEndsTheStream) {
  const auto messages = mixed_messages(5, 10);
  const Bytes marked = transmit(messages, Framing{.markers = true}, 1 << 20);
  ASSERT_FALSE(receive_all(marked, false));
  // Every marker in turn: one bit of FPDUPTR off (with the CRC off, nothing else notices).
  for (std::size_t at = 0; at < marked.size(); at += wire::kMarkerInterval) {
    Bytes broken = marked;
    broken[at + 3] ^= 0x04;
    const auto failure = receive_all(broken, false);
    ASSERT_TRUE(failure) << "marker at " << at;
    EXPECT_EQ(failure->code, wire::term::kLlpBadFpdu) << "marker at " << at;
  }
  // A stream without markers, to a reader that expects them: its first FPDU fails.
  const auto unmarked = receive_all(transmit(messages, Framing{}, 1 << 20), false);
  ASSERT_TRUE(unmarked);
  EXPECT_EQ(unmarked->code, wire::term::kLlpBadFpdu);
}

TEST(proto_mpa_markers, TheCrcCoversTheMarkers) {
  const Bytes marked =
      transmit(mixed_messages(9, 10), Framing{.crc = true, .markers = true}, 1 << 20);
  ASSERT_FALSE(receive_all(marked, true));
  // The reserved half of the second marker is not checked, but the CRC covers it.
  Bytes broken = marked;
  broken[wire::kMarkerInterval] ^= 0x80;
  const auto failure = receive_all(broken, true);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, wire::term::kLlpBadCrc);
}

TEST(proto_mpa_markers, AbandoningKeepsTheStreamsPlaceBetweenMarkers) {
  // Messages queued in one batch; the first FPDU and 5 bytes of the second are sent, then the
  // rest is abandoned (the QP failed) and a last message follows, as a Terminate would.
  const auto messages = mixed_messages(13, 6);
  const Message last{untagged_header(RdmapOpcode::kTerminate, 2, 1), pattern(28, 1)};
  const auto queue = [](TxBatch& batch, const Message& m, const Framing& framing) {
    const ConstByteSpan gather[] = {m.payload};
    MessageSegmenter seg;
    seg.start(MessageSegmenter::Message{m.header, gather, m.payload.size(), 0});
    seg.fill(batch, kMaxUlpdu, framing);
  };
  const auto run = [&](const Framing& framing, std::size_t sent) {
    TxBatch batch;
    for (const Message& m : messages) queue(batch, m, framing);
    const Bytes pending = testing::flatten(batch.pending());
    Bytes stream(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(sent));
    batch.consume(sent);
    batch.abandon_after_current_fpdu();
    queue(batch, last, framing);
    testing::append(stream, testing::flatten(batch.pending()));
    return stream;
  };
  TxBatch first_only;
  queue(first_only, messages[0], Framing{});
  const std::size_t first_plain =
      wire::fpdu_size(load_be16(testing::flatten(first_only.pending()).data()));
  const Bytes plain = run(Framing{}, first_plain + 5);
  ASSERT_EQ(payloads_of(plain).size(), 3u);
  const std::size_t first_marked =
      with_markers(Bytes(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(first_plain)),
                   false)
          .size();
  EXPECT_EQ(run(Framing{.markers = true}, first_marked + 5), with_markers(plain, false));
}

}  // namespace
}  // namespace uwarp::proto
