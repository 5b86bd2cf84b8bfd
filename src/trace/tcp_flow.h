// The packets of one traced connection: a synthesized three-way handshake before its first
// bytes (the SYN from the end that sent first: in iWARP the MPA initiator), then its bytes, each
// direction with its own consecutive sequence numbers and every segment acknowledging all the
// other direction has sent so far. A segment holds one MPA unit (trace/mpa_units.h: the MPA
// frame, one FPDU), written once all of it has been sent or received (its time is then); a unit
// larger than kMaxSegmentPayload (or a stream that is not MPA) is cut into segments of at most
// that. The sequence
// numbers are not the kernel's (uwarp does not see them); they are consistent, which is what a
// dissector that reassembles the stream (tshark's MPA) needs.
//
// Pure: appends pcap records (trace/pcap_format.h) to a vector. Not thread-safe: the caller
// serializes the calls for one flow (io/pcap_recorder.cc: its lock).
#pragma once

#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "trace/mpa_units.h"
#include "trace/pcap_format.h"

namespace uwarp::trace {

class TcpFlow {
 public:
  // The initial sequence numbers of the synthesized handshake: the initiator's, the responder's.
  static constexpr std::uint32_t kInitiatorIsn = 0x10000000;
  static constexpr std::uint32_t kResponderIsn = 0x20000000;

  TcpFlow(const Endpoint& local, const Endpoint& peer) : local_(local), peer_(peer) {}

  // Bytes this end sent (from_local) or received, in the order it did so.
  void bytes(PacketTime time, bool from_local, ConstByteSpan bytes, std::vector<std::uint8_t>& out);
  // This end closed: what is held of an incomplete unit either way, then this end's FIN (once).
  void closed(PacketTime time, std::vector<std::uint8_t>& out);

  const Endpoint& local() const { return local_; }
  const Endpoint& peer() const { return peer_; }
  bool opened() const { return opened_; }

 private:
  void open(PacketTime time, bool local_first, std::vector<std::uint8_t>& out);
  void segment(PacketTime time, bool from_local, std::uint8_t flags, ConstByteSpan payload,
               std::vector<std::uint8_t>& out);
  // Writes the complete units held for one direction (all that is held, if `flush`).
  void emit(PacketTime time, bool from_local, bool flush, std::vector<std::uint8_t>& out);
  void data(PacketTime time, bool from_local, ConstByteSpan bytes, std::vector<std::uint8_t>& out);

  Endpoint local_;
  Endpoint peer_;
  bool opened_ = false;
  bool fin_sent_ = false;
  std::uint32_t local_next_ = 0;  // the sequence number of the next byte this end sends
  std::uint32_t peer_next_ = 0;   // ... the peer sends
  MpaUnits local_units_;          // what this end sent, not yet written
  MpaUnits peer_units_;           // what it received, not yet written
};

}  // namespace uwarp::trace
