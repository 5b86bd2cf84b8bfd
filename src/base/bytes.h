// Big-endian field access over byte spans. Wire formats are serialized field by field through
// these helpers; there are no packed structs or bitfields anywhere in uwarp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uwarp {

using ByteSpan = std::span<std::uint8_t>;
using ConstByteSpan = std::span<const std::uint8_t>;

// Whether two byte ranges share a byte (empty ranges share none). Compared as addresses, so that
// ranges of unrelated objects may be compared.
inline bool overlaps(ConstByteSpan a, ConstByteSpan b) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
  return !a.empty() && !b.empty() && a0 < b0 + b.size() && b0 < a0 + a.size();
}

// Whether any of `spans` shares a byte with `memory`.
inline bool overlaps_any(std::span<const ByteSpan> spans, ConstByteSpan memory) {
  for (const ByteSpan& s : spans) {
    if (overlaps(s, memory)) return true;
  }
  return false;
}

inline std::uint16_t load_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}
inline std::uint64_t load_be64(const std::uint8_t* p) {
  return (std::uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}
inline void store_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
inline void store_be64(std::uint8_t* p, std::uint64_t v) {
  store_be32(p, static_cast<std::uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<std::uint32_t>(v));
}

}  // namespace uwarp
