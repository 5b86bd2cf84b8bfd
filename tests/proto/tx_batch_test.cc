// proto::TxBatch and MessageSegmenter: FPDU segmentation at the siw FPDU size, L bit, TO/MO,
// gather lists, batch limits, partial sends with pop_sent() cookies, pad and CRC trailers, small
// FPDUs in the wire image.
#include "proto/tx_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "proto/proto_test_util.h"
#include "wire/fpdu.h"

namespace uwarp::proto {
namespace {

using testing::Bytes;
using testing::ParsedFpdu;
using testing::pattern;
using testing::tagged_header;
using testing::untagged_header;
using wire::RdmapOpcode;

// The FPDU size siw uses at MSS 1448 (runtime::max_ulpdu_for_mss): the MSS rounded down to a
// multiple of 8 bounds the whole FPDU.
constexpr std::size_t kMss = 1448;
const std::size_t kMaxUlpdu = wire::max_ulpdu_for_fpdu_size(kMss & ~std::size_t{7});

struct Drained {
  Bytes bytes;
  std::vector<std::uint64_t> cookies;
};

// Sends everything pending at once and collects the finished messages.
void drain(TxBatch& batch, Drained& out) {
  const Bytes b = testing::flatten(batch.pending());
  EXPECT_EQ(b.size(), batch.pending_bytes());
  testing::append(out.bytes, b);
  batch.consume(b.size());
  for (std::uint64_t c : testing::pop_all_sent(batch)) out.cookies.push_back(c);
  EXPECT_TRUE(batch.empty());
}

// Segments `m` completely, draining the batch whenever it fills; bounded. `images`: the batch's
// wire images (null: none).
Drained send_message(const MessageSegmenter::Message& m, std::size_t max_ulpdu, bool crc,
                     WireImagePool* images = &WireImagePool::process()) {
  TxBatch batch(images);
  MessageSegmenter seg;
  seg.start(m);
  Drained out;
  for (int i = 0; i < 10000; ++i) {
    const bool done = seg.fill(batch, max_ulpdu, Framing{.crc = crc});
    drain(batch, out);
    if (done) break;
  }
  EXPECT_FALSE(seg.active());
  return out;
}

// A message of `length` bytes gathered from `gather` (which must outlive it).
MessageSegmenter::Message message(const wire::DdpHeader& header,
                                  std::span<const ConstByteSpan> gather, std::size_t length,
                                  std::uint64_t cookie = 0) {
  MessageSegmenter::Message m;
  m.header = header;
  m.gather = gather;
  m.length = length;
  m.cookie = cookie;
  return m;
}

std::vector<ParsedFpdu> parse_all(const Bytes& stream) {
  std::size_t rest = 0;
  auto parsed = testing::parse_stream(stream, &rest);
  EXPECT_TRUE(parsed.has_value());
  EXPECT_EQ(rest, 0u);
  return parsed ? *parsed : std::vector<ParsedFpdu>{};
}

TEST(proto_tx_batch, SiwFpduSizeAtMss1448) {
  EXPECT_EQ(kMaxUlpdu, 1442u);
  EXPECT_EQ(wire::fpdu_size(kMaxUlpdu), kMss);
  EXPECT_EQ(kMaxUlpdu - wire::kTaggedHeaderSize, 1428u);  // siw: 1428 payload bytes per WRITE FPDU
}

TEST(proto_tx_batch, WriteIsSegmentedAt1428PayloadBytes) {
  for (bool crc : {false, true}) {
    const Bytes data = pattern(10000, 1);
    const ConstByteSpan gather[] = {data};
    MessageSegmenter::Message m;
    m.header = tagged_header(RdmapOpcode::kRdmaWrite, 0xABCD01, 0x7000000000);
    m.gather = gather;
    m.length = data.size();
    m.cookie = 42;
    const Drained d = send_message(m, kMaxUlpdu, crc);
    const auto fpdus = parse_all(d.bytes);
    ASSERT_EQ(fpdus.size(), 8u);  // 7 x 1428 + 4
    Bytes payload;
    for (std::size_t i = 0; i < fpdus.size(); ++i) {
      const ParsedFpdu& f = fpdus[i];
      EXPECT_LE(f.size, kMss);
      EXPECT_EQ(f.payload.size(), i + 1 < fpdus.size() ? 1428u : 4u);
      EXPECT_EQ(f.header.last, i + 1 == fpdus.size()) << i;
      EXPECT_TRUE(f.header.tagged);
      EXPECT_EQ(f.header.opcode, 0);
      EXPECT_EQ(f.header.stag, 0xABCD01u);
      EXPECT_EQ(f.header.tagged_offset, 0x7000000000u + i * 1428);
      EXPECT_EQ(f.crc_ok, crc) << i;
      if (!crc) {
        EXPECT_EQ(f.crc_field, 0u);
      }
      testing::append(payload, f.payload);
    }
    EXPECT_EQ(payload, data);
    EXPECT_EQ(d.cookies, std::vector<std::uint64_t>{42});
  }
}

TEST(proto_tx_batch, SendIsSegmentedWithAdvancingMessageOffset) {
  const Bytes data = pattern(5000, 2);
  const ConstByteSpan gather[] = {data};
  MessageSegmenter::Message m;
  m.header = untagged_header(RdmapOpcode::kSendSeInvalidate, 0, 7);
  m.header.ulp_reserved = 0x55AA01;
  m.gather = gather;
  m.length = data.size();
  const Drained d = send_message(m, kMaxUlpdu, true);
  const auto fpdus = parse_all(d.bytes);
  ASSERT_EQ(fpdus.size(), 4u);  // 3 x 1424 + 728
  Bytes payload;
  for (std::size_t i = 0; i < fpdus.size(); ++i) {
    const ParsedFpdu& f = fpdus[i];
    EXPECT_FALSE(f.header.tagged);
    EXPECT_EQ(f.header.opcode, static_cast<std::uint8_t>(RdmapOpcode::kSendSeInvalidate));
    EXPECT_EQ(f.header.queue, 0u);
    EXPECT_EQ(f.header.msn, 7u);
    EXPECT_EQ(f.header.ulp_reserved, 0x55AA01u);
    EXPECT_EQ(f.header.message_offset, i * 1424);
    EXPECT_EQ(f.header.last, i == 3);
    EXPECT_TRUE(f.crc_ok);
    EXPECT_EQ(f.payload.size(), i < 3 ? 1424u : 728u);
    testing::append(payload, f.payload);
  }
  EXPECT_EQ(payload, data);
}

TEST(proto_tx_batch, ZeroLengthMessagesAreOneHeaderOnlyFpdu) {
  TxBatch batch;
  MessageSegmenter seg;
  MessageSegmenter::Message w;
  w.header = tagged_header(RdmapOpcode::kRdmaWrite, 1, 0);
  w.cookie = 1;
  seg.start(w);
  ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
  MessageSegmenter::Message s;
  s.header = untagged_header(RdmapOpcode::kSend, 0, 1);
  s.cookie = 2;
  seg.start(s);
  ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
  const Bytes all = testing::flatten(batch.pending());
  const auto fpdus = parse_all(all);
  ASSERT_EQ(fpdus.size(), 2u);
  EXPECT_EQ(fpdus[0].ulpdu.size(), wire::kTaggedHeaderSize);
  EXPECT_EQ(fpdus[1].ulpdu.size(), wire::kUntaggedHeaderSize);
  EXPECT_TRUE(fpdus[0].header.last);
  EXPECT_TRUE(fpdus[1].header.last);
  EXPECT_TRUE(fpdus[0].crc_ok);
  EXPECT_TRUE(fpdus[1].crc_ok);
  // siw's RTR Write, byte for byte (ULPDU 14, CRC 0x5f4cd3eb).
  const Bytes siw_rtr = {0x00, 0x0e, 0xc1, 0x40, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                         0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xeb, 0xd3, 0x4c, 0x5f};
  EXPECT_EQ(Bytes(all.begin(), all.begin() + 20), siw_rtr);
  // The first cookie is due only once its last byte is gone.
  std::uint64_t c = 0;
  batch.consume(19);
  EXPECT_FALSE(batch.pop_sent(c));
  batch.consume(1);
  ASSERT_TRUE(batch.pop_sent(c));
  EXPECT_EQ(c, 1u);
  EXPECT_FALSE(batch.pop_sent(c));
}

TEST(proto_tx_batch, PadAndCrcForEveryUlpduLengthModuloFour) {
  for (bool crc : {false, true}) {
    for (std::size_t len = 0; len < 8; ++len) {
      const Bytes data = pattern(len, 3);
      const ConstByteSpan gather[] = {data};
      MessageSegmenter::Message m;
      m.header = tagged_header(RdmapOpcode::kRdmaWrite, 9, 0);
      m.gather = gather;
      m.length = len;
      const Drained d = send_message(m, kMaxUlpdu, crc);
      const auto fpdus = parse_all(d.bytes);
      ASSERT_EQ(fpdus.size(), 1u);
      EXPECT_EQ(d.bytes.size() % 4, 0u);
      EXPECT_EQ(fpdus[0].pad.size(), wire::fpdu_pad_length(14 + len));
      for (std::uint8_t p : fpdus[0].pad) EXPECT_EQ(p, 0);
      EXPECT_EQ(fpdus[0].crc_ok, crc);
      EXPECT_EQ(wire::decode_fpdu(d.bytes, crc).has_value(), true);
    }
  }
}

TEST(proto_tx_batch, GatherListsWithManyAndEmptyPieces) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    const std::size_t pieces = std::uniform_int_distribution<std::size_t>(1, 400)(rng);
    std::vector<Bytes> store;
    std::vector<ConstByteSpan> gather;
    Bytes whole;
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t n = std::uniform_int_distribution<int>(0, 2)(rng) == 0
                                ? 0
                                : std::uniform_int_distribution<std::size_t>(1, 60)(rng);
      store.push_back(pattern(n, static_cast<std::uint32_t>(round * 1000 + i)));
    }
    for (const Bytes& b : store) {
      gather.push_back(b);
      testing::append(whole, b);
    }
    const std::size_t max_ulpdu = std::uniform_int_distribution<int>(0, 1)(rng) ? kMaxUlpdu : 100;
    MessageSegmenter::Message m;
    m.header = untagged_header(RdmapOpcode::kSend, 0, 1);
    m.gather = gather;
    m.length = whole.size();
    m.cookie = 5;

    TxBatch batch;
    MessageSegmenter seg;
    seg.start(m);
    Drained d;
    int fills = 0;
    for (; fills < 10000; ++fills) {
      const bool done = seg.fill(batch, max_ulpdu, Framing{.crc = true});
      for (const iovec& v : batch.pending()) EXPECT_GT(v.iov_len, 0u) << "empty iovec";
      drain(batch, d);
      if (done) break;
    }
    ASSERT_LT(fills, 10000);
    const auto fpdus = parse_all(d.bytes);
    ASSERT_FALSE(fpdus.empty());
    Bytes payload;
    std::size_t mo = 0;
    for (std::size_t i = 0; i < fpdus.size(); ++i) {
      const ParsedFpdu& f = fpdus[i];
      EXPECT_LE(f.ulpdu.size(), max_ulpdu);
      EXPECT_EQ(f.header.message_offset, mo);
      EXPECT_EQ(f.header.last, i + 1 == fpdus.size());
      if (!f.header.last) {
        EXPECT_FALSE(f.payload.empty()) << "empty middle segment at " << i;
      }
      EXPECT_TRUE(f.crc_ok);
      mo += f.payload.size();
      testing::append(payload, f.payload);
    }
    EXPECT_EQ(payload, whole) << "round " << round;
    EXPECT_EQ(d.cookies, std::vector<std::uint64_t>{5});
  }
}

TEST(proto_tx_batch, MessageLongerThanOneBatchContinuesInTheNext) {
  const Bytes data = pattern(60 * 100, 4);
  const ConstByteSpan gather[] = {data};
  MessageSegmenter::Message m;
  m.header = tagged_header(RdmapOpcode::kReadResponse, 3, 1000);
  m.gather = gather;
  m.length = data.size();
  m.cookie = 9;
  const std::size_t max_ulpdu = wire::kTaggedHeaderSize + 100;  // 100 payload bytes per FPDU
  TxBatch batch(/*images=*/nullptr);
  MessageSegmenter seg;
  seg.start(m);
  // Each FPDU takes three iovecs (header, payload, trailer; no wire image): 42 fit in 128.
  EXPECT_FALSE(seg.fill(batch, max_ulpdu, Framing{}));
  EXPECT_TRUE(seg.active());
  Drained d;
  drain(batch, d);
  EXPECT_TRUE(d.cookies.empty());
  EXPECT_EQ(parse_all(d.bytes).size(), TxBatch::kMaxIov / 3);
  EXPECT_TRUE(seg.fill(batch, max_ulpdu, Framing{}));
  EXPECT_FALSE(seg.active());
  drain(batch, d);
  const auto fpdus = parse_all(d.bytes);
  ASSERT_EQ(fpdus.size(), 60u);
  for (std::size_t i = 0; i < 60; ++i) {
    EXPECT_EQ(fpdus[i].header.tagged_offset, 1000 + i * 100);
    EXPECT_EQ(fpdus[i].header.last, i == 59);
  }
  EXPECT_EQ(d.cookies, std::vector<std::uint64_t>{9});
}

// A batch of three messages; returns it filled, with the stream and each message's end offset.
struct ThreeMessages {
  Bytes a = pattern(3000, 5), b, c = pattern(77, 6);
  std::vector<ConstByteSpan> ga{ConstByteSpan(a)}, gb, gc{ConstByteSpan(c)};

  void fill(TxBatch& batch) {
    MessageSegmenter seg;
    MessageSegmenter::Message m;
    m.header = untagged_header(RdmapOpcode::kSend, 0, 1);
    m.gather = ga;
    m.length = a.size();
    m.cookie = 11;
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
    m.header = tagged_header(RdmapOpcode::kRdmaWrite, 2, 0);
    m.gather = gb;
    m.length = 0;
    m.cookie = 22;
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
    m.header = untagged_header(RdmapOpcode::kSend, 0, 2);
    m.gather = gc;
    m.length = c.size();
    m.cookie = 33;
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
  }
};

TEST(proto_tx_batch, PartialConsumeAtEveryOffset) {
  ThreeMessages msgs;
  TxBatch ref;
  msgs.fill(ref);
  const Bytes full = testing::flatten(ref.pending());
  const auto fpdus = parse_all(full);
  // Message ends: after the last FPDU of each message.
  std::vector<std::size_t> ends;
  for (const ParsedFpdu& f : fpdus) {
    if (f.header.last) ends.push_back(f.offset + f.size);
  }
  ASSERT_EQ(ends.size(), 3u);
  const std::uint64_t cookies[] = {11, 22, 33};

  for (std::size_t k = 0; k <= full.size(); ++k) {
    TxBatch batch;
    msgs.fill(batch);
    // Two partial sends adding up to k.
    batch.consume(k / 2);
    batch.consume(k - k / 2);
    ASSERT_EQ(batch.pending_bytes(), full.size() - k) << k;
    ASSERT_EQ(testing::flatten(batch.pending()),
              Bytes(full.begin() + static_cast<std::ptrdiff_t>(k), full.end()))
        << k;
    std::vector<std::uint64_t> got = testing::pop_all_sent(batch);
    std::vector<std::uint64_t> want;
    for (std::size_t i = 0; i < 3; ++i) {
      if (ends[i] <= k) want.push_back(cookies[i]);
    }
    ASSERT_EQ(got, want) << "consumed " << k;
    ASSERT_EQ(batch.empty(), k == full.size());
    // The rest, then every remaining cookie.
    batch.consume(full.size() - k);
    for (std::uint64_t c : testing::pop_all_sent(batch)) got.push_back(c);
    ASSERT_EQ(got, (std::vector<std::uint64_t>{11, 22, 33}));
    EXPECT_TRUE(batch.empty());
    // Drained and all cookies taken: the batch starts over with all its room.
    EXPECT_EQ(batch.free_iov(), TxBatch::kMaxIov);
  }
}

TEST(proto_tx_batch, RandomPartialSendsReportCookiesExactlyAtMessageEnds) {
  ThreeMessages msgs;
  TxBatch ref;
  msgs.fill(ref);
  const Bytes full = testing::flatten(ref.pending());
  std::vector<std::size_t> ends;
  for (const ParsedFpdu& f : parse_all(full)) {
    if (f.header.last) ends.push_back(f.offset + f.size);
  }
  std::mt19937 rng(99);
  for (int round = 0; round < 200; ++round) {
    TxBatch batch;
    msgs.fill(batch);
    std::size_t sent = 0;
    std::size_t popped = 0;
    Bytes seen;
    for (int guard = 0; sent < full.size() && guard < 100000; ++guard) {
      const std::size_t n =
          std::min(full.size() - sent, std::uniform_int_distribution<std::size_t>(1, 400)(rng));
      // What a partial writev() takes: the first n bytes of pending().
      const Bytes pend = testing::flatten(batch.pending());
      testing::append(seen, ConstByteSpan(pend).first(n));
      batch.consume(n);
      sent += n;
      for (std::uint64_t c : testing::pop_all_sent(batch)) {
        ASSERT_LT(popped, ends.size());
        ASSERT_LE(ends[popped], sent);
        ASSERT_EQ(c, 11u * (popped + 1));  // 11, 22, 33 in order
        ++popped;
      }
      // Nothing whose end has passed is still held back.
      ASSERT_TRUE(popped == ends.size() || ends[popped] > sent);
    }
    ASSERT_EQ(popped, 3u);
    ASSERT_EQ(seen, full);
  }
}

TEST(proto_tx_batch, FullIovecRoomNeverProducesAnEmptyMiddleSegment) {
  // 42 one-byte messages use 126 of the 128 iovecs (header, payload, trailer each). A Read
  // Request (one 28-byte piece) does not fit: it must wait for the next batch, whole, rather
  // than go out as an empty non-last segment, which the peer would refuse (DDP/2/0x05). (No wire
  // image: it would hold these FPDUs in one iovec.)
  const Bytes one = {0x5A};
  const ConstByteSpan g1[] = {one};
  const Bytes body = pattern(28, 7);
  const ConstByteSpan g2[] = {body};
  TxBatch batch(/*images=*/nullptr);
  MessageSegmenter seg;
  for (std::uint32_t i = 0; i < 42; ++i) {
    MessageSegmenter::Message m;
    m.header = untagged_header(RdmapOpcode::kSend, 0, i + 1);
    m.gather = g1;
    m.length = 1;
    m.cookie = i;
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{}));
  }
  ASSERT_EQ(batch.free_iov(), 2u);
  MessageSegmenter::Message rr;
  rr.header = untagged_header(RdmapOpcode::kReadRequest, 1, 1);
  rr.gather = g2;
  rr.length = body.size();
  rr.cookie = 100;
  seg.start(rr);
  Drained d;
  for (int i = 0; i < 10 && seg.active(); ++i) {
    seg.fill(batch, kMaxUlpdu, Framing{});
    drain(batch, d);
  }
  ASSERT_FALSE(seg.active());
  const auto fpdus = parse_all(d.bytes);
  ASSERT_EQ(fpdus.size(), 43u);
  const ParsedFpdu& last = fpdus.back();
  EXPECT_EQ(last.header.queue, 1u);
  EXPECT_TRUE(last.header.last);
  EXPECT_EQ(last.payload, body);
  EXPECT_EQ(d.cookies.size(), 43u);
}

TEST(proto_tx_batch, LimitsOnFpdusAndMarks) {
  // 48 zero-length messages fill every FPDU and mark slot.
  TxBatch batch;
  MessageSegmenter seg;
  for (std::uint64_t i = 0; i < TxBatch::kMaxFpdus; ++i) {
    MessageSegmenter::Message m;
    m.header = tagged_header(RdmapOpcode::kRdmaWrite, 1, 0);
    m.cookie = i;
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
  }
  EXPECT_FALSE(batch.can_add_fpdu(0, Framing{}));
  MessageSegmenter::Message m;
  m.header = tagged_header(RdmapOpcode::kRdmaWrite, 1, 0);
  m.cookie = 1000;
  seg.start(m);
  const std::size_t before = batch.pending_bytes();
  EXPECT_FALSE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
  EXPECT_EQ(batch.pending_bytes(), before);
  Drained d;
  drain(batch, d);
  EXPECT_EQ(d.cookies.size(), TxBatch::kMaxFpdus);
  EXPECT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
  drain(batch, d);
  EXPECT_EQ(d.cookies.back(), 1000u);
}

TEST(proto_tx_batch, ClearForgetsEverything) {
  ThreeMessages msgs;
  TxBatch batch;
  msgs.fill(batch);
  batch.consume(10);
  batch.clear();
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(batch.pending_bytes(), 0u);
  EXPECT_TRUE(batch.pending().empty());
  std::uint64_t c = 0;
  EXPECT_FALSE(batch.pop_sent(c));
  EXPECT_EQ(batch.free_iov(), TxBatch::kMaxIov);
  // Usable again.
  msgs.fill(batch);
  Drained d;
  drain(batch, d);
  EXPECT_EQ(d.cookies, (std::vector<std::uint64_t>{11, 22, 33}));
}

// Small FPDUs copied into the wire image are the same bytes as the same FPDUs framed as iovecs:
// payload sizes around the pad's four cases and the batch's limits, gather lists cut anywhere,
// CRC off and on, FPDUs small enough for the image (MSS 1448) and too large for it.
TEST(proto_tx_batch, WireImageIsTheSameBytesAsIovecs) {
  const Bytes data = pattern(70000, 9);
  for (const std::size_t max_ulpdu : {kMaxUlpdu, wire::kTaggedHeaderSize + 37, std::size_t{4096}}) {
    for (const std::size_t length :
         {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1427}, std::size_t{1428},
          std::size_t{1430}, std::size_t{65536}, std::size_t{69999}}) {
      for (const bool crc : {false, true}) {
        // Pieces of 1, 700 and the rest.
        std::vector<ConstByteSpan> gather;
        const ConstByteSpan all(data.data(), length);
        std::size_t at = 0;
        for (const std::size_t piece : {std::size_t{1}, std::size_t{700}, length}) {
          const std::size_t n = std::min(piece, length - at);
          if (n > 0) gather.push_back(all.subspan(at, n));
          at += n;
        }
        const auto m = message(tagged_header(RdmapOpcode::kRdmaWrite, 7, 4096), gather, length, 5);
        WireImagePool pool(1);
        const Drained imaged = send_message(m, max_ulpdu, crc, &pool);
        const Drained framed = send_message(m, max_ulpdu, crc, nullptr);
        EXPECT_EQ(imaged.bytes, framed.bytes)
            << "ulpdu " << max_ulpdu << ", length " << length << ", crc " << crc;
        EXPECT_EQ(imaged.cookies, framed.cookies);
        EXPECT_EQ(pool.lent(), 0u) << "the drained batch kept its image";
      }
    }
  }
}

// A 64 KiB Write at MSS 1448 (46 FPDUs) is one batch with one iovec; the image goes back to the
// pool when the batch drains, and comes from it again for the next one.
TEST(proto_tx_batch, SmallFpdusOfABatchAreOnePiece) {
  const Bytes data = pattern(65536, 3);
  const ConstByteSpan gather[] = {data};
  const auto m = message(tagged_header(RdmapOpcode::kRdmaWrite, 7, 0), gather, data.size(), 1);
  WireImagePool pool(1);
  TxBatch batch(&pool);
  MessageSegmenter seg;
  for (int round = 0; round < 2; ++round) {
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{.crc = true}));
    EXPECT_EQ(batch.fpdus(), 46u);
    ASSERT_EQ(batch.pending().size(), 1u);
    EXPECT_TRUE(batch.owns(batch.pending()[0].iov_base));
    EXPECT_EQ(pool.lent(), 1u);
    Drained d;
    drain(batch, d);
    EXPECT_EQ(d.cookies, std::vector<std::uint64_t>{1});
    EXPECT_EQ(parse_all(d.bytes).size(), 46u);
    EXPECT_EQ(pool.lent(), 0u);
  }
}

// On a connection with large FPDUs (loopback's MSS) nothing is copied, not even a message's last
// small FPDU; nor are the small FPDUs of a message larger than WireImagePool::kMaxMessageBytes.
// Their payload bytes stay in the application's memory.
TEST(proto_tx_batch, LargeFpdusAndLargeMessagesAreNotImaged) {
  const Bytes data = pattern(WireImagePool::kMaxMessageBytes + 1, 3);
  const ConstByteSpan gather[] = {data};
  auto m = message(tagged_header(RdmapOpcode::kRdmaWrite, 7, 0), gather, 65536);
  WireImagePool pool(1);
  TxBatch batch(&pool);
  MessageSegmenter seg;
  seg.start(m);
  ASSERT_TRUE(seg.fill(batch, 65000, Framing{.crc = true}));
  EXPECT_EQ(batch.fpdus(), 2u);
  EXPECT_EQ(batch.pending().size(), 6u);
  EXPECT_EQ(pool.lent(), 0u);
  batch.clear();
  m.length = data.size();
  seg.start(m);
  EXPECT_FALSE(seg.fill(batch, kMaxUlpdu, Framing{}));  // more than one batch
  EXPECT_EQ(batch.pending().size(), 3 * batch.fpdus());
  EXPECT_EQ(pool.lent(), 0u);
}

// With every image lent, a batch frames its small FPDUs as iovecs (three each) and still sends
// the same bytes.
TEST(proto_tx_batch, NoImageLeftFramesWithIovecs) {
  const Bytes data = pattern(5000, 4);
  const ConstByteSpan gather[] = {data};
  const auto m = message(untagged_header(RdmapOpcode::kSend, 0, 1), gather, data.size());
  WireImagePool pool(1);
  TxBatch holder(&pool);  // holds the pool's one image
  MessageSegmenter seg;
  seg.start(m);
  ASSERT_TRUE(seg.fill(holder, kMaxUlpdu, Framing{}));
  ASSERT_EQ(pool.lent(), 1u);
  TxBatch batch(&pool);
  seg.start(m);
  ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{}));
  EXPECT_EQ(batch.pending().size(), 3 * batch.fpdus());
  Drained a;
  Drained b;
  drain(holder, a);
  drain(batch, b);
  EXPECT_EQ(a.bytes, b.bytes);
}

// Bytes in the wire image were copied from the application's memory when their FPDU was added:
// revoking that memory afterwards finds nothing read from it, where iovecs still read it.
TEST(proto_tx_batch, ImagedBytesReadNothingOnceAdded) {
  const Bytes data = pattern(4000, 8);
  const ConstByteSpan gather[] = {data};
  const auto m = message(tagged_header(RdmapOpcode::kRdmaWrite, 7, 0), gather, data.size());
  const RevokedRegion revoked{.memory = ConstByteSpan(data), .region = nullptr};
  WireImagePool pool(1);
  for (WireImagePool* images : {&pool, static_cast<WireImagePool*>(nullptr)}) {
    TxBatch batch(images);
    MessageSegmenter seg;
    seg.start(m);
    ASSERT_TRUE(seg.fill(batch, kMaxUlpdu, Framing{}));
    EXPECT_EQ(batch.reads_from(revoked), images == nullptr);
  }
}

}  // namespace
}  // namespace uwarp::proto
