// libFuzzer target: proto::FpduReader on any byte stream, fed three ways (whole, one byte at a
// time, and in fuzzed pieces). The reader must not depend on how the stream was cut: the three
// runs must tell the sink the same segments, place the same bytes, consume the same bytes and end
// in the same state, failure and quoted header included. (feed() takes an FPDU that lies whole in
// its input in one step, and one that is cut in rounds of its state machine.)
//
// Input: one byte of flags (bit 0: CRC on; bit 1: MPA markers expected, a marker split across
// pieces included), four bytes that seed the piece sizes, then the stream.
// The sink decides from the header alone, so that every run gets the same answers: buffered for
// untagged Read Requests and Terminates, and otherwise by the low bits of the STag (tagged) or
// the MSN (untagged): scatter into two spans of an arena (as on-demand memory at times), a
// scatter list shorter than the payload (a sink bug the reader must catch), discard, or reject. A segment whose header names
// MSN 0xDEAD fails at its end.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "fuzz_check.h"
#include "proto/fpdu_reader.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"

namespace uwarp::proto {
namespace {

constexpr std::size_t kArenaSize = 3 * 65536;

struct Event {
  std::vector<std::uint8_t> header;  // the DDP header, re-encoded
  std::size_t payload_length = 0;
  int placement = 0;
  bool ended = false;
  std::vector<std::uint8_t> buffered;
  bool operator==(const Event&) const = default;
};

class Sink final : public FpduSink {
 public:
  Sink() : arena(kArenaSize, 0) {}

  Placement on_segment_header(const wire::DdpHeader& h, std::size_t payload_length) override {
    Event e;
    e.header.resize(h.size());
    wire::encode_ddp_header(h, e.header);
    e.payload_length = payload_length;
    const auto op = static_cast<wire::RdmapOpcode>(h.opcode);
    const std::uint32_t pick = h.tagged ? h.stag : h.msn;
    Placement p = Placement::reject(wire::term::kDdpTaggedInvalidStag);
    const bool queued =
        op == wire::RdmapOpcode::kReadRequest || op == wire::RdmapOpcode::kTerminate;
    if (!h.tagged && queued) {
      p = Placement::buffered();
    } else if (pick % 8 == 7) {
      p = Placement::discard();
    } else if (pick % 8 != 6) {
      // Two spans (the first possibly empty) at an offset from the header, so that later
      // segments overwrite earlier ones as a real sink's would; one byte short when pick % 8 == 5.
      const std::size_t at = (pick / 8) % (kArenaSize - 65536);
      const std::size_t len =
          pick % 8 == 5 && payload_length > 0 ? payload_length - 1 : payload_length;
      const std::size_t first = std::min<std::size_t>(len, pick % 3 == 0 ? 0 : len / 3);
      spans_[0] = ByteSpan(arena.data() + at, first);
      spans_[1] = ByteSpan(arena.data() + at + first, len - first);
      p = Placement::into(spans_);
      // As on-demand memory (placed by copies that report a fault) when pick % 8 == 4.
      if (pick % 8 == 4) {
        p.on_demand = true;
        p.error = wire::term::kDdpTaggedBaseBounds;
      }
    }
    e.placement = static_cast<int>(p.kind);
    events.push_back(e);
    return p;
  }

  std::optional<wire::TerminateCode> on_segment_end(ConstByteSpan buffered) override {
    FUZZ_CHECK(!events.empty() && !events.back().ended);
    Event& e = events.back();
    e.ended = true;
    e.buffered.assign(buffered.begin(), buffered.end());
    const bool tagged = (e.header[0] & wire::kDdpFlagTagged) != 0;
    if (!tagged && e.header.size() >= 14 && load_be32(e.header.data() + 10) == 0xDEAD) {
      return wire::term::kRdmapUnspecified;
    }
    return std::nullopt;
  }

  std::vector<Event> events;
  std::vector<std::uint8_t> arena;

 private:
  ByteSpan spans_[2];
};

struct Outcome {
  std::vector<Event> events;
  std::vector<std::uint8_t> arena;
  std::size_t consumed = 0;
  bool failed = false;
  bool at_boundary = false;
  std::vector<std::uint8_t> failure;  // the RxFailure's fields, flattened
};

template <typename NextPiece>
Outcome run(ConstByteSpan stream, bool crc, bool markers, NextPiece next_piece) {
  Sink sink;
  FpduReader reader(sink, crc, markers);
  Outcome o;
  std::size_t at = 0;
  while (at < stream.size() && !reader.failed()) {
    const std::size_t n = std::min(next_piece(), stream.size() - at);
    const std::size_t used = reader.feed(stream.subspan(at, n));
    FUZZ_CHECK(used <= n);
    FUZZ_CHECK(used == n || reader.failed());  // feed() stops early only on failure
    o.consumed += used;
    at += n;
  }
  o.events = std::move(sink.events);
  o.arena = std::move(sink.arena);
  o.failed = reader.failed();
  o.at_boundary = reader.at_boundary();
  if (const auto& f = reader.failure()) {
    o.failure = {static_cast<std::uint8_t>(f->code.layer), f->code.etype, f->code.ecode,
                 f->have_header, f->have_rdmap_header,
                 static_cast<std::uint8_t>(f->ulpdu_length >> 8),
                 static_cast<std::uint8_t>(f->ulpdu_length),
                 static_cast<std::uint8_t>(f->header_size)};
    o.failure.insert(o.failure.end(), f->header.begin(), f->header.begin() + f->header_size);
    if (f->have_rdmap_header) {
      o.failure.insert(o.failure.end(), f->rdmap_header.begin(), f->rdmap_header.end());
    }
  }
  return o;
}

bool same(const Outcome& a, const Outcome& b) {
  return a.events == b.events && a.arena == b.arena && a.consumed == b.consumed &&
         a.failed == b.failed && a.at_boundary == b.at_boundary && a.failure == b.failure;
}

void fuzz(ConstByteSpan in) {
  if (in.size() < 5) return;
  const bool crc = (in[0] & 1) != 0;
  const bool markers = (in[0] & 2) != 0;
  std::uint32_t seed = load_be32(in.data() + 1);
  const ConstByteSpan stream = in.subspan(5);

  const Outcome whole = run(stream, crc, markers, [&] { return stream.size(); });
  const Outcome bytewise = run(stream, crc, markers, [] { return std::size_t{1}; });
  const Outcome pieces = run(stream, crc, markers, [&] {
    seed = seed * 1103515245u + 12345u;  // pieces of 1 to 64 bytes, at times a whole FPDU's worth
    return std::size_t{1} + (seed >> 16) % ((seed & 0x100) != 0 ? 2048 : 64);
  });
  FUZZ_CHECK(same(whole, bytewise));
  FUZZ_CHECK(same(whole, pieces));
}

}  // namespace
}  // namespace uwarp::proto

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  uwarp::proto::fuzz(uwarp::ConstByteSpan(data, size));
  return 0;
}
