// CRC32c (Castagnoli, the iSCSI polynomial) as MPA uses it: RFC 5044 section 4.4 and RFC 3720
// appendix B.4. Backed by ISA-L's crc32_iscsi, which picks the fastest instruction set at run time;
// pieces under 64 bytes go through the CPU's crc32 instruction inline (x86-64 with SSE 4.2).
#pragma once

#include <cstdint>

#include "base/bytes.h"

namespace uwarp::wire {

// Incremental CRC32c: update() over consecutive pieces equals one pass over their concatenation.
class Crc32c {
 public:
  void update(ConstByteSpan bytes);
  // The finished CRC value (final complement applied). Does not end the computation.
  std::uint32_t value() const { return ~state_; }
  void reset() { state_ = 0xFFFFFFFFu; }

 private:
  std::uint32_t state_ = 0xFFFFFFFFu;
};

std::uint32_t crc32c(ConstByteSpan bytes);

}  // namespace uwarp::wire
