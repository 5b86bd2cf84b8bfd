// Test support: RFC 5044 section 5 written out plainly, without uwarp's framing code, as the
// model the transmit side is compared with and raw peers send by. A stream of FPDUs without
// markers is rewritten with a marker before every byte at a multiple of 512 from the stream's
// start and, when the pad ends there, before the CRC; each marker holds the distance back to its
// FPDU's first byte. The CRC, when on, is computed again over everything before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "wire/crc32c.h"
#include "wire/fpdu.h"
#include "wire/mpa_marker.h"

namespace uwarp::testing {

inline std::vector<std::uint8_t> with_markers(const std::vector<std::uint8_t>& plain, bool crc) {
  std::vector<std::uint8_t> out;
  std::size_t at = 0;
  while (at + wire::kMpaLengthFieldSize <= plain.size()) {
    const std::size_t len = load_be16(plain.data() + at);
    const std::size_t content = wire::kMpaLengthFieldSize + len + wire::fpdu_pad_length(len);
    const std::size_t start = out.size();
    const auto marker_if_due = [&] {
      if (out.size() % wire::kMarkerInterval != 0) return;
      const std::size_t back = out.size() - start;
      out.insert(out.end(),
                 {0, 0, static_cast<std::uint8_t>(back >> 8), static_cast<std::uint8_t>(back)});
    };
    for (std::size_t i = 0; i < content && at + i < plain.size(); ++i) {
      marker_if_due();
      out.push_back(plain[at + i]);
    }
    marker_if_due();
    std::uint8_t trailer[wire::kMpaCrcSize] = {};
    if (crc) {
      wire::Crc32c c;
      c.update(ConstByteSpan(out).subspan(start));
      wire::store_crc_trailer(trailer, c.value());
    }
    out.insert(out.end(), trailer, trailer + wire::kMpaCrcSize);
    at += content + wire::kMpaCrcSize;
  }
  return out;
}

}  // namespace uwarp::testing
