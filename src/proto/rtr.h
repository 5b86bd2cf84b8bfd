// Peer-to-peer Ready-To-Receive message types, RFC 6581 section 3.
#pragma once

#include <cstdint>

namespace uwarp::proto {

enum class RtrType : std::uint8_t { kNone, kWrite, kRead, kSend };

// The STag a zero-length RTR Write or Read carries: nonzero, since a hardware RNIC rejected
// STag 0 (siw sends 1 too). It is never validated: zero-length tagged messages touch no memory.
inline constexpr std::uint32_t kRtrStag = 1;

}  // namespace uwarp::proto
