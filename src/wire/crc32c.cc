#include "wire/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace uwarp::wire {

namespace {

#if defined(__x86_64__)
// A piece shorter than this (an FPDU's length and header, its pad) goes through the CPU's crc32
// instruction here: ISA-L's call costs more than the work on such a piece.
constexpr std::size_t kSmallPiece = 64;

const bool kCrcInstruction = __builtin_cpu_supports("sse4.2");

__attribute__((target("sse4.2"))) std::uint32_t crc_small(std::uint32_t state,
                                                          const std::uint8_t* p, std::size_t n) {
  std::uint64_t c = state;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

// ISA-L's AVX2 and AVX-512 variants return with the upper halves of the vector registers in use
// (no vzeroupper): each legacy SSE instruction after that, in uwarp's code or glibc's, then pays
// the AVX-SSE transition. Cleared after each call.
const bool kAvx = __builtin_cpu_supports("avx");

__attribute__((target("avx"))) void clear_upper_halves() {
  _mm256_zeroupper();
}
#endif

}  // namespace

void Crc32c::update(ConstByteSpan bytes) {
#if defined(__x86_64__)
  if (bytes.size() < kSmallPiece && kCrcInstruction) {
    state_ = crc_small(state_, bytes.data(), bytes.size());
    return;
  }
#endif
  // crc32_iscsi takes an int length and a non-const pointer (it does not write through it).
  auto* p = const_cast<unsigned char*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {
    const std::size_t chunk = std::min<std::size_t>(left, INT_MAX / 2);
    state_ = crc32_iscsi(p, static_cast<int>(chunk), state_);
    p += chunk;
    left -= chunk;
  }
#if defined(__x86_64__)
  if (kAvx) clear_upper_halves();
#endif
}

std::uint32_t crc32c(ConstByteSpan bytes) {
  Crc32c crc;
  crc.update(bytes);
  return crc.value();
}

}  // namespace uwarp::wire
