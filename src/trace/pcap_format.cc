#include "trace/pcap_format.h"

#include <algorithm>

namespace uwarp::trace {
namespace {

void put_le16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

void put_le32(std::uint8_t* p, std::uint32_t v) {
  put_le16(p, static_cast<std::uint16_t>(v));
  put_le16(p + 2, static_cast<std::uint16_t>(v >> 16));
}

// The ones' complement sum of RFC 1071 over `bytes`, continued from `sum`; an odd length is
// padded with a zero byte.
std::uint32_t add_sum(std::uint32_t sum, const std::uint8_t* p, std::size_t n) {
  for (; n >= 2; p += 2, n -= 2) sum += load_be16(p);
  if (n == 1) sum += static_cast<std::uint32_t>(p[0]) << 8;
  return sum;
}

std::uint16_t fold(std::uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

std::size_t address_size(const Endpoint& e) {
  return e.ipv6 ? 16 : 4;
}

}  // namespace

std::array<std::uint8_t, 6> synthetic_mac(const Endpoint& e) {
  const std::size_t n = address_size(e);
  return {0x02, 0x00, e.address[n - 4], e.address[n - 3], e.address[n - 2], e.address[n - 1]};
}

void append_file_header(std::vector<std::uint8_t>& out) {
  std::uint8_t h[kPcapFileHeaderSize] = {};
  put_le32(h, 0xA1B2C3D4);
  put_le16(h + 4, 2);
  put_le16(h + 6, 4);
  // thiszone and sigfigs stay 0.
  put_le32(h + 16, kPcapSnapLength);
  put_le32(h + 20, kLinkTypeEthernet);
  out.insert(out.end(), h, h + sizeof h);
}

std::size_t tcp_packet_record_size(bool ipv6, std::size_t payload) {
  return kPcapRecordHeaderSize + kEthernetHeaderSize + (ipv6 ? kIpv6HeaderSize : kIpv4HeaderSize) +
         kTcpHeaderSize + payload;
}

std::size_t append_tcp_packet(std::vector<std::uint8_t>& out, PacketTime time,
                              const TcpSegment& s) {
  const bool v6 = s.source.ipv6;
  const std::size_t ip_size = v6 ? kIpv6HeaderSize : kIpv4HeaderSize;
  const std::size_t tcp_length = kTcpHeaderSize + s.payload.size();
  const std::size_t frame = kEthernetHeaderSize + ip_size + tcp_length;
  const std::size_t start = out.size();
  out.resize(start + kPcapRecordHeaderSize + frame - s.payload.size());
  std::uint8_t* p = out.data() + start;

  put_le32(p, time.seconds);
  put_le32(p + 4, time.microseconds);
  put_le32(p + 8, static_cast<std::uint32_t>(frame));
  put_le32(p + 12, static_cast<std::uint32_t>(frame));
  p += kPcapRecordHeaderSize;

  const auto dst_mac = synthetic_mac(s.destination);
  const auto src_mac = synthetic_mac(s.source);
  std::copy(dst_mac.begin(), dst_mac.end(), p);
  std::copy(src_mac.begin(), src_mac.end(), p + 6);
  store_be16(p + 12, v6 ? 0x86DD : 0x0800);
  p += kEthernetHeaderSize;

  const std::size_t alen = address_size(s.source);
  std::uint8_t* ip = p;
  if (v6) {
    store_be32(ip, 0x60000000);  // version 6, no traffic class, no flow label
    store_be16(ip + 4, static_cast<std::uint16_t>(tcp_length));
    ip[6] = 6;   // next header: TCP
    ip[7] = 64;  // hop limit
    std::copy_n(s.source.address.begin(), 16, ip + 8);
    std::copy_n(s.destination.address.begin(), 16, ip + 24);
  } else {
    ip[0] = 0x45;  // version 4, 5 words
    ip[1] = 0;
    store_be16(ip + 2, static_cast<std::uint16_t>(kIpv4HeaderSize + tcp_length));
    store_be16(ip + 4, 0);       // identification
    store_be16(ip + 6, 0x4000);  // don't fragment
    ip[8] = 64;                  // TTL
    ip[9] = 6;                   // TCP
    store_be16(ip + 10, 0);
    std::copy_n(s.source.address.begin(), 4, ip + 12);
    std::copy_n(s.destination.address.begin(), 4, ip + 16);
    store_be16(ip + 10, fold(add_sum(0, ip, kIpv4HeaderSize)));
  }
  std::uint8_t* tcp = ip + ip_size;
  store_be16(tcp, s.source.port);
  store_be16(tcp + 2, s.destination.port);
  store_be32(tcp + 4, s.seq);
  store_be32(tcp + 8, s.ack);
  tcp[12] = (kTcpHeaderSize / 4) << 4;
  tcp[13] = s.flags;
  store_be16(tcp + 14, 65535);  // window
  store_be16(tcp + 16, 0);      // checksum, below
  store_be16(tcp + 18, 0);      // urgent pointer

  // The pseudo-header: addresses, protocol and TCP length (RFC 9293 section 3.1, RFC 8200 8.1).
  std::uint32_t sum = add_sum(0, s.source.address.data(), alen);
  sum = add_sum(sum, s.destination.address.data(), alen);
  sum += 6;
  sum += static_cast<std::uint32_t>(tcp_length & 0xFFFF) +
         static_cast<std::uint32_t>(tcp_length >> 16);
  sum = add_sum(sum, tcp, kTcpHeaderSize);
  sum = add_sum(sum, s.payload.data(), s.payload.size());
  std::uint16_t checksum = fold(sum);
  store_be16(tcp + 16, checksum);

  out.insert(out.end(), s.payload.begin(), s.payload.end());
  return out.size() - start;
}

}  // namespace uwarp::trace
