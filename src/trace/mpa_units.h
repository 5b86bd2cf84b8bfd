// MpaUnits: cuts one direction of a traced connection's byte stream into its MPA units: the MPA
// request or reply frame, then each FPDU (RFC 5044), markers included where that direction
// carries them. trace::TcpFlow starts every synthesized segment at a unit: tshark's MPA
// dissector finds FPDUs, and the markers' places, from where segments begin, and misreads a
// stream cut elsewhere (a segment that ends a few bytes into the next FPDU's header).
//
// Bytes are taken as they come, in any pieces; a unit is handed out once all of it is there.
// What does not parse as MPA (a stream that is not iWARP) is handed out as it comes. Pure; not
// thread-safe (the flow's caller serializes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/bytes.h"

namespace uwarp::trace {

class MpaUnits {
 public:
  // Appends `bytes`: next_unit() then says whether a complete unit is at the front.
  void add(ConstByteSpan bytes);
  // The size of the complete unit at the front (0: none yet; in a stream that is not MPA, all
  // that is held).
  std::size_t next_unit();
  // The bytes held, from the front: the unit next_unit() measured, and what follows it.
  ConstByteSpan front() const { return ConstByteSpan(buffer_).subspan(start_); }
  // Removes the n bytes at the front: the unit next_unit() measured, or (at the end of the
  // stream) whatever is held.
  void take(std::size_t n);
  std::size_t held() const { return buffer_.size() - start_; }

  // This direction's first unit is an MPA frame; its M bit asks the *other* direction for
  // markers. The caller tells each direction what the other's frame asked (markers_from_peer).
  bool frame_seen() const { return frame_seen_; }
  bool frame_asks_markers() const { return frame_asks_markers_; }
  void set_markers(bool on) { markers_ = on; }

 private:
  enum class Phase : std::uint8_t { kFrame, kFpdus, kRaw };

  std::vector<std::uint8_t> buffer_;  // held bytes are buffer_[start_, end)
  std::size_t start_ = 0;
  Phase phase_ = Phase::kFrame;
  bool frame_seen_ = false;
  bool frame_asks_markers_ = false;
  bool markers_ = false;
  std::uint64_t fpdu_offset_ = 0;  // bytes of FPDUs handed out (markers are placed by it)
};

}  // namespace uwarp::trace
