// libFuzzer target: trace::MpaUnits (the pcap recorder's cutter of a received byte stream into
// MPA units) on any byte stream, fed whole and in fuzzed pieces. The units handed out, followed
// by what is still held at the end, must be the stream itself, byte for byte; no unit may be
// larger than what is held; and once the stream parsed as MPA (its frame seen), the units must
// not depend on how the stream was cut.
//
// Input: one byte of flags (bit 0: this direction carries MPA markers), four bytes that seed the
// piece sizes, then the stream.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "trace/mpa_units.h"

namespace uwarp::trace {
namespace {

struct Run {
  std::vector<std::vector<std::uint8_t>> units;
  std::vector<std::uint8_t> rest;
  bool frame_seen = false;
};

// Feeds `stream` in pieces whose sizes come from `seed` (0: whole), taking every complete unit.
Run feed(ConstByteSpan stream, bool markers, std::uint32_t seed) {
  MpaUnits m;
  m.set_markers(markers);
  Run r;
  std::size_t at = 0;
  while (at < stream.size()) {
    std::size_t piece = stream.size() - at;
    if (seed != 0) {
      seed = seed * 1103515245u + 12345u;
      piece = std::min<std::size_t>(piece, 1 + (seed >> 16) % 700);
    }
    m.add(stream.subspan(at, piece));
    at += piece;
    for (std::size_t n = m.next_unit(); n > 0; n = m.next_unit()) {
      FUZZ_CHECK(n <= m.held());
      const ConstByteSpan unit = m.front().first(n);
      r.units.emplace_back(unit.begin(), unit.end());
      m.take(n);
    }
  }
  r.rest.assign(m.front().begin(), m.front().end());
  FUZZ_CHECK(r.rest.size() == m.held());
  r.frame_seen = m.frame_seen();
  return r;
}

void check_reassembles(const Run& r, ConstByteSpan stream) {
  std::vector<std::uint8_t> all;
  for (const auto& u : r.units) {
    FUZZ_CHECK(!u.empty());
    all.insert(all.end(), u.begin(), u.end());
  }
  all.insert(all.end(), r.rest.begin(), r.rest.end());
  FUZZ_CHECK(fuzz::same_bytes(all, stream));
}

}  // namespace
}  // namespace uwarp::trace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace uwarp;
  if (size < 5) return 0;
  const bool markers = (data[0] & 1) != 0;
  std::uint32_t seed;
  std::memcpy(&seed, data + 1, sizeof seed);
  const ConstByteSpan stream(data + 5, size - 5);
  const trace::Run whole = trace::feed(stream, markers, 0);
  const trace::Run pieces = trace::feed(stream, markers, seed | 1);
  trace::check_reassembles(whole, stream);
  trace::check_reassembles(pieces, stream);
  FUZZ_CHECK(whole.frame_seen == pieces.frame_seen);
  if (whole.frame_seen) {
    FUZZ_CHECK(whole.units == pieces.units);
    FUZZ_CHECK(whole.rest == pieces.rest);
  }
  return 0;
}
