// How a cm::Connection connects and accepts: the MPA parameters it offers and the deadlines of
// the waits its peer controls.
#pragma once

#include <chrono>
#include <optional>

#include "io/socket.h"
#include "proto/mpa_negotiator.h"

namespace uwarp::cm {

// Active side.
struct ConnectOptions {
  proto::MpaParams mpa;
  std::optional<io::SocketAddress> local;        // the TCP source address, if the caller chose one
  std::chrono::milliseconds mpa_timeout{10000};  // as Linux siw: 10 s for the reply
};

// Passive side, peer-to-peer (RFC 6581): from the accept to the peer's RTR, as the MPA reply.
inline constexpr std::chrono::milliseconds kDefaultRtrTimeout{10000};

}  // namespace uwarp::cm
