// The pcap file format (the classic one: microsecond timestamps, little-endian) and the packets
// of a synthesized TCP connection in it: Ethernet, IPv4 or IPv6, and a 20-byte TCP header with
// correct checksums. Pure: appends bytes to a vector, nothing else. trace::TcpFlow decides what
// the packets of a connection are; io/pcap_recorder writes them to the file UWARP_PCAP names.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/bytes.h"

namespace uwarp::trace {

// One end of a TCP connection: an IPv4 address (the first 4 bytes of `address`) or an IPv6 one.
struct Endpoint {
  std::array<std::uint8_t, 16> address{};
  bool ipv6 = false;
  std::uint16_t port = 0;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct PacketTime {
  std::uint32_t seconds = 0;
  std::uint32_t microseconds = 0;
};

inline constexpr std::uint8_t kTcpFin = 0x01;
inline constexpr std::uint8_t kTcpSyn = 0x02;
inline constexpr std::uint8_t kTcpPsh = 0x08;
inline constexpr std::uint8_t kTcpAck = 0x10;

// One TCP segment from `source` to `destination`.
struct TcpSegment {
  Endpoint source;
  Endpoint destination;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  std::uint8_t flags = 0;
  ConstByteSpan payload;
};

inline constexpr std::size_t kPcapFileHeaderSize = 24;
inline constexpr std::size_t kPcapRecordHeaderSize = 16;
inline constexpr std::uint32_t kPcapSnapLength = 262144;
inline constexpr std::uint32_t kLinkTypeEthernet = 1;
inline constexpr std::size_t kEthernetHeaderSize = 14;
inline constexpr std::size_t kIpv4HeaderSize = 20;
inline constexpr std::size_t kIpv6HeaderSize = 40;
inline constexpr std::size_t kTcpHeaderSize = 20;
// The largest payload of one segment: an IPv4 packet's total length is a 16-bit field.
inline constexpr std::size_t kMaxSegmentPayload = 65535 - kIpv4HeaderSize - kTcpHeaderSize;

// The file header: version 2.4, snap length kPcapSnapLength, Ethernet.
void append_file_header(std::vector<std::uint8_t>& out);
// One record: the packet of `segment` (payload at most kMaxSegmentPayload bytes), stamped `time`.
// Returns the bytes appended.
std::size_t append_tcp_packet(std::vector<std::uint8_t>& out, PacketTime time,
                              const TcpSegment& segment);
// The bytes append_tcp_packet adds for a payload of `payload` bytes.
std::size_t tcp_packet_record_size(bool ipv6, std::size_t payload);
// The locally administered MAC address a synthesized packet gives an endpoint: 02:00 and the
// last four bytes of its IP address.
std::array<std::uint8_t, 6> synthetic_mac(const Endpoint& e);

}  // namespace uwarp::trace
