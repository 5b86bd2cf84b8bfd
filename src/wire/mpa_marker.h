// MPA markers, RFC 5044 section 5. A side that set the M bit in its MPA frame asks its peer to
// place a 4-byte marker every 512 bytes of the TCP stream the peer sends, counted from the first
// byte of the peer's first FPDU (which therefore begins with a marker). Each direction is agreed
// on its own. A marker is 16 reserved bits (zero) and FPDUPTR: how many bytes back from the
// marker its FPDU begins. A marker at the very start of an FPDU belongs to that FPDU (FPDUPTR 0);
// one after the pad and before the CRC belongs to the FPDU it ends. Markers are counted in the
// CRC, but not in ULPDU_Length nor in the pad.
// Pure functions and constants: no allocation, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"

namespace uwarp::wire {

inline constexpr std::size_t kMarkerInterval = 512;
inline constexpr std::size_t kMarkerSize = 4;

// With markers, uwarp's FPDUs carry at most this many bytes besides their markers, so that the
// markers and the pieces they split fit in one send's scatter list (proto::TxBatch). Peers may
// send larger FPDUs, up to what FPDUPTR (16 bits) can point back across.
inline constexpr std::size_t kMaxFpduWithMarkers = 4096;

// Where the stream is between two markers: bytes sent (or received) since the first FPDU,
// modulo the interval. Phase 0 is a marker's place.
constexpr std::size_t marker_phase(std::size_t stream_offset) {
  return stream_offset % kMarkerInterval;
}

inline void store_marker(std::uint8_t* p, std::uint16_t fpduptr) {
  p[0] = 0;
  p[1] = 0;
  store_be16(p + 2, fpduptr);
}
inline std::uint16_t marker_fpduptr(const std::uint8_t* p) {
  return load_be16(p + 2);
}

}  // namespace uwarp::wire
