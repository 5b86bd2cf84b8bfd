// The initiator's watch for a silent peer (docs/interop.md): a Linux siw responder that missed
// the first FPDUs of a connection answers nothing until more arrive. For the first 5 s of the
// connection the stream looks every kSilentPeerQuiet: once the peer has sent anything the watch
// ends; if it is still silent while this side has sent something, one nudge (a zero-length
// RTR Write, RdmapDriver::queue_nudge) ends it.
#pragma once

#include <chrono>
#include <cstdint>

namespace uwarp::runtime {

inline constexpr std::chrono::milliseconds kSilentPeerQuiet{200};
inline constexpr int kSilentPeerRounds = 25;

enum class SilentPeerStep : std::uint8_t { kDone, kNudge, kLookAgain };

// What the look number `round` (from 0) does, given the bytes received and sent so far.
inline SilentPeerStep silent_peer_step(int round, std::uint64_t received, std::uint64_t sent) {
  if (received > 0) return SilentPeerStep::kDone;  // the peer is alive
  if (sent > 0) return SilentPeerStep::kNudge;     // it had something to answer
  return round + 1 < kSilentPeerRounds ? SilentPeerStep::kLookAgain : SilentPeerStep::kDone;
}

}  // namespace uwarp::runtime
