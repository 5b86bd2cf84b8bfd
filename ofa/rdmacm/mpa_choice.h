// MPA choices that rdma_conn_param cannot express: CRC, peer-to-peer mode (RFC 6581) and MPA
// revision 1. An unmodified program gets them for all its connections from the environment:
// UWARP_MPA is a comma-separated list of
//   crc   ask for MPA CRC32c (used if either side asks)
//   markers  ask the peer to send MPA markers (RFC 5044 section 5; uwarp sends them whenever
//         the peer asks, with or without this word)
//   p2p   active side: peer-to-peer mode, offering a zero-length WRITE or READ as RTR (the
//         passive side follows what the active side asks for)
//   p2p-write, p2p-read  the same, offering only that RTR
//   rev1  active side: MPA revision 1 (no IRD/ORD exchange, no peer-to-peer; the passive side
//         answers in the revision of the request)
//   fpdu=N  either side: send FPDUs of up to N bytes (at most 65544) where the TCP MSS is
//         smaller, spanning segments (ConnectionParams::fpdu_size: only towards software peers)
// Unset or empty: revision 2, no CRC, no markers asked for, no peer-to-peer, FPDUs within a
// segment.
#pragma once

#include <cstdint>
#include <string_view>

#include "uwarp/cm.h"
#include "uwarp/status.h"

namespace uwarp::rdmacm {

struct MpaChoice {
  bool crc = false;
  bool markers = false;
  bool peer_to_peer = false;
  RtrOffer rtr_offer = RtrOffer::kWriteOrRead;
  std::uint8_t revision = 2;
  std::uint32_t fpdu_size = 0;
};

// Parses a UWARP_MPA value; the error names the word it could not use.
Result<MpaChoice> parse_mpa_choice(std::string_view text);

}  // namespace uwarp::rdmacm
