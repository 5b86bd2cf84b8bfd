#include "trace/mpa_units.h"

#include <algorithm>
#include <cstring>

namespace uwarp::trace {
namespace {

constexpr std::size_t kFrameHeader = 20;  // key, flags, revision, private data length
constexpr std::uint8_t kMarkerFlag = 0x80;
constexpr std::size_t kMarkerInterval = 512;
constexpr std::size_t kMarkerSize = 4;
constexpr std::size_t kCrcSize = 4;

// Whether the first n bytes (at most 16) may begin an MPA request or reply key.
bool mpa_key_prefix(const std::uint8_t* p, std::size_t n) {
  n = std::min<std::size_t>(n, 16);
  return std::memcmp(p, "MPA ID Req Frame", n) == 0 || std::memcmp(p, "MPA ID Rep Frame", n) == 0;
}

}  // namespace

void MpaUnits::add(ConstByteSpan bytes) {
  if (start_ > 0) {  // what was taken goes now, before the buffer grows
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

std::size_t MpaUnits::next_unit() {
  const std::uint8_t* p = buffer_.data() + start_;
  const std::size_t size = held();
  if (size == 0) return 0;
  switch (phase_) {
    case Phase::kRaw:
      return size;
    case Phase::kFrame: {
      if (!mpa_key_prefix(p, size)) {
        phase_ = Phase::kRaw;
        return size;
      }
      if (size < kFrameHeader) return 0;
      const std::size_t frame = kFrameHeader + load_be16(p + 18);
      return size >= frame ? frame : 0;
    }
    case Phase::kFpdus: {
      // A marker sits before every byte at a multiple of 512 from the first FPDU, and before the
      // CRC when the pad ends there (never inside the 4-byte-aligned length field or CRC).
      std::size_t at = 0;
      std::uint64_t pos = fpdu_offset_;
      const auto skip_marker = [&] {
        if (markers_ && pos % kMarkerInterval == 0) {
          at += kMarkerSize;
          pos += kMarkerSize;
        }
      };
      skip_marker();
      if (size < at + 2) return 0;
      const std::size_t ulpdu = load_be16(p + at);
      std::size_t content = (2 + ulpdu + 3) & ~std::size_t{3};
      while (content > 0) {
        skip_marker();
        const std::size_t chunk =
            markers_ ? std::min<std::size_t>(content, kMarkerInterval - pos % kMarkerInterval)
                     : content;
        at += chunk;
        pos += chunk;
        content -= chunk;
      }
      skip_marker();
      at += kCrcSize;
      return size >= at ? at : 0;
    }
  }
  return 0;
}

void MpaUnits::take(std::size_t n) {
  n = std::min(n, held());
  if (phase_ == Phase::kFrame && n >= kFrameHeader) {
    frame_seen_ = true;
    frame_asks_markers_ = (buffer_[start_ + 16] & kMarkerFlag) != 0;
    phase_ = Phase::kFpdus;
  } else if (phase_ == Phase::kFpdus) {
    fpdu_offset_ += n;
  }
  start_ += n;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  }
}

}  // namespace uwarp::trace
