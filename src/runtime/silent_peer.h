// The initiator's watch for a peer that missed its first bytes (docs/interop.md): a Linux siw
// responder does not see bytes that arrive between its MPA reply and its QP taking the socket
// over, until more bytes arrive; it can still send meanwhile (an rsocket acceptor sends its
// credits), so its own traffic does not show that it saw ours. The stream looks kSilentPeerQuiet
// after the connection is up: if this side has sent anything by then, one nudge (a zero-length
// RTR Write, RdmapDriver::queue_nudge) follows, whether or not the peer has sent. Otherwise it
// looks every kSilentPeerQuiet for the first 5 s: once the peer has sent anything the watch
// ends; if it is still silent when this side has sent something, the one nudge ends it.
#pragma once

#include <chrono>
#include <cstdint>

namespace uwarp::runtime {

inline constexpr std::chrono::milliseconds kSilentPeerQuiet{200};
inline constexpr int kSilentPeerRounds = 25;

enum class SilentPeerStep : std::uint8_t { kDone, kNudge, kLookAgain };

// What the look number `round` (from 0) does, given the bytes received and sent so far.
inline SilentPeerStep silent_peer_step(int round, std::uint64_t received, std::uint64_t sent) {
  if (round == 0 && sent > 0)
    return SilentPeerStep::kNudge;                 // sent early: the peer may have missed it
  if (received > 0) return SilentPeerStep::kDone;  // the peer is alive
  if (sent > 0) return SilentPeerStep::kNudge;     // it had something to answer
  return round + 1 < kSilentPeerRounds ? SilentPeerStep::kLookAgain : SilentPeerStep::kDone;
}

}  // namespace uwarp::runtime
