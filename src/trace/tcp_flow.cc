#include "trace/tcp_flow.h"

#include <algorithm>

namespace uwarp::trace {

void TcpFlow::open(PacketTime time, bool local_first, std::vector<std::uint8_t>& out) {
  opened_ = true;
  // Each SYN takes one sequence number.
  local_next_ = local_first ? kInitiatorIsn : kResponderIsn;
  peer_next_ = local_first ? kResponderIsn : kInitiatorIsn;
  if (local_first) {
    segment(time, true, kTcpSyn, {}, out);
    ++local_next_;
    segment(time, false, kTcpSyn | kTcpAck, {}, out);
    ++peer_next_;
    segment(time, true, kTcpAck, {}, out);
  } else {
    segment(time, false, kTcpSyn, {}, out);
    ++peer_next_;
    segment(time, true, kTcpSyn | kTcpAck, {}, out);
    ++local_next_;
    segment(time, false, kTcpAck, {}, out);
  }
}

void TcpFlow::segment(PacketTime time, bool from_local, std::uint8_t flags, ConstByteSpan payload,
                      std::vector<std::uint8_t>& out) {
  TcpSegment s;
  s.source = from_local ? local_ : peer_;
  s.destination = from_local ? peer_ : local_;
  s.seq = from_local ? local_next_ : peer_next_;
  // A SYN acknowledges nothing; every later segment all the other direction has sent.
  const bool first_syn = flags == kTcpSyn;
  s.ack = first_syn ? 0 : (from_local ? peer_next_ : local_next_);
  s.flags = flags;
  s.payload = payload;
  append_tcp_packet(out, time, s);
}

void TcpFlow::bytes(PacketTime time, bool from_local, ConstByteSpan bytes,
                    std::vector<std::uint8_t>& out) {
  if (!opened_) open(time, from_local, out);
  (from_local ? local_units_ : peer_units_).add(bytes);
  emit(time, from_local, false, out);
}

void TcpFlow::emit(PacketTime time, bool from_local, bool flush, std::vector<std::uint8_t>& out) {
  MpaUnits& units = from_local ? local_units_ : peer_units_;
  const MpaUnits& other = from_local ? peer_units_ : local_units_;
  for (;;) {
    // A direction carries markers if the other end asked for them in its MPA frame.
    units.set_markers(other.frame_seen() && other.frame_asks_markers());
    std::size_t n = units.next_unit();
    if (n == 0 && flush) n = units.held();
    if (n == 0) return;
    data(time, from_local, units.front().first(n), out);
    units.take(n);
  }
}

void TcpFlow::data(PacketTime time, bool from_local, ConstByteSpan bytes,
                   std::vector<std::uint8_t>& out) {
  while (!bytes.empty()) {
    const ConstByteSpan piece = bytes.first(std::min(bytes.size(), kMaxSegmentPayload));
    segment(time, from_local, kTcpAck | kTcpPsh, piece, out);
    (from_local ? local_next_ : peer_next_) += static_cast<std::uint32_t>(piece.size());
    bytes = bytes.subspan(piece.size());
  }
}

void TcpFlow::closed(PacketTime time, std::vector<std::uint8_t>& out) {
  if (!opened_ || fin_sent_) return;
  emit(time, true, true, out);
  emit(time, false, true, out);
  fin_sent_ = true;
  segment(time, true, kTcpFin | kTcpAck, {}, out);
  ++local_next_;
}

}  // namespace uwarp::trace
