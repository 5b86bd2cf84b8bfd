// Helpers shared by the proto and verbs tests: FPDU and DDP header builders, batch flattening,
// a whole-stream FPDU parser, and gtest printers for the proto and wire enums.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "proto/fpdu_reader.h"
#include "proto/mpa_negotiator.h"
#include "proto/rtr.h"
#include "proto/tx_batch.h"
#include "support/quantity_printers.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/rdmap.h"

namespace uwarp::proto::testing {

// "00 0e c1 40": readable in a failed expectation.
inline std::string to_hex(ConstByteSpan bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i != 0) s += ' ';
    s += kDigits[bytes[i] >> 4];
    s += kDigits[bytes[i] & 0x0F];
  }
  return s;
}

}  // namespace uwarp::proto::testing

namespace uwarp::wire {
inline void PrintTo(const TerminateCode& c, std::ostream* os) {
  *os << describe(c);
}
}  // namespace uwarp::wire

namespace uwarp::proto {

inline void PrintTo(MpaStep s, std::ostream* os) {
  switch (s) {
    case MpaStep::kNeedMore:
      *os << "kNeedMore";
      return;
    case MpaStep::kDone:
      *os << "kDone";
      return;
    case MpaStep::kRejected:
      *os << "kRejected";
      return;
    case MpaStep::kFailed:
      *os << "kFailed";
      return;
  }
  *os << "MpaStep(" << static_cast<int>(s) << ")";
}

inline void PrintTo(RtrType t, std::ostream* os) {
  static constexpr const char* kNames[] = {"kNone", "kWrite", "kRead", "kSend"};
  const auto i = static_cast<unsigned>(t);
  *os << (i < 4 ? kNames[i] : "RtrType(?)");
}

namespace testing {

using Bytes = std::vector<std::uint8_t>;

inline Bytes bytes_of(std::string_view s) {
  return Bytes(s.begin(), s.end());
}
inline Bytes to_vector(ConstByteSpan s) {
  return Bytes(s.begin(), s.end());
}

// A byte pattern that differs per seed and offset, so that misplaced bytes show.
inline Bytes pattern(std::size_t n, std::uint32_t seed) {
  Bytes b(n);
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (auto& v : b) {
    x = x * 1103515245u + 12345u;
    v = static_cast<std::uint8_t>(x >> 16);
  }
  return b;
}

inline wire::DdpHeader tagged_header(wire::RdmapOpcode op, std::uint32_t stag, std::uint64_t to,
                                     bool last = true) {
  wire::DdpHeader h;
  h.tagged = true;
  h.last = last;
  h.opcode = static_cast<std::uint8_t>(op);
  h.stag = stag;
  h.tagged_offset = to;
  return h;
}

inline wire::DdpHeader untagged_header(wire::RdmapOpcode op, std::uint32_t queue, std::uint32_t msn,
                                       std::uint32_t mo = 0, bool last = true) {
  wire::DdpHeader h;
  h.tagged = false;
  h.last = last;
  h.opcode = static_cast<std::uint8_t>(op);
  h.queue = queue;
  h.msn = msn;
  h.message_offset = mo;
  return h;
}

inline Bytes encode_header(const wire::DdpHeader& h) {
  Bytes out(h.size());
  wire::encode_ddp_header(h, out);
  return out;
}

// One whole FPDU: length, DDP header, payload, pad, CRC (zero without crc).
inline Bytes fpdu(const wire::DdpHeader& h, ConstByteSpan payload, bool crc) {
  Bytes ulpdu = encode_header(h);
  ulpdu.insert(ulpdu.end(), payload.begin(), payload.end());
  Bytes out(wire::fpdu_size(ulpdu.size()));
  const std::size_t n = wire::encode_fpdu(ulpdu, crc, out);
  out.resize(n);
  return out;
}

// An FPDU whose ULPDU is given raw (for headers the encoder cannot produce).
inline Bytes fpdu_raw(ConstByteSpan ulpdu, bool crc) {
  Bytes out(wire::fpdu_size(ulpdu.size()));
  out.resize(wire::encode_fpdu(ulpdu, crc, out));
  return out;
}

inline Bytes read_request_body(const wire::ReadRequest& rr) {
  Bytes b(wire::kReadRequestSize);
  wire::encode_read_request(rr, b);
  return b;
}

inline void append(Bytes& to, ConstByteSpan from) {
  to.insert(to.end(), from.begin(), from.end());
}

// The bytes an iovec list describes, in order.
inline Bytes flatten(std::span<const iovec> iov) {
  Bytes out;
  for (const iovec& v : iov) {
    const auto* p = static_cast<const std::uint8_t*>(v.iov_base);
    out.insert(out.end(), p, p + v.iov_len);
  }
  return out;
}

// Every cookie pop_sent() reports now, oldest first; bounded by the batch's mark slots even if
// pop_sent() misbehaves.
inline std::vector<std::uint64_t> pop_all_sent(TxBatch& batch) {
  std::vector<std::uint64_t> out;
  std::uint64_t cookie = 0;
  for (std::size_t i = 0; i <= TxBatch::kMaxMarks && batch.pop_sent(cookie); ++i)
    out.push_back(cookie);
  return out;
}

// One FPDU of a parsed stream.
struct ParsedFpdu {
  std::size_t offset = 0;  // in the stream
  std::size_t size = 0;    // whole FPDU
  Bytes ulpdu;
  wire::DdpHeader header;
  Bytes payload;  // ULPDU after the DDP header
  Bytes pad;
  std::uint32_t crc_field = 0;
  bool crc_ok = false;  // the trailer matches the CRC32c of length, ULPDU and pad
};

// Splits a stream into FPDUs; stops at the first incomplete one (nullopt if any is malformed).
inline std::optional<std::vector<ParsedFpdu>> parse_stream(ConstByteSpan stream,
                                                           std::size_t* rest = nullptr) {
  std::vector<ParsedFpdu> out;
  std::size_t at = 0;
  while (at + wire::kMpaLengthFieldSize <= stream.size()) {
    const std::size_t len = load_be16(stream.data() + at);
    const std::size_t total = wire::fpdu_size(len);
    if (at + total > stream.size()) break;
    ParsedFpdu f;
    f.offset = at;
    f.size = total;
    const ConstByteSpan whole = stream.subspan(at, total);
    f.ulpdu.assign(whole.begin() + 2, whole.begin() + 2 + static_cast<std::ptrdiff_t>(len));
    auto h = wire::decode_ddp_header(f.ulpdu);
    if (!h) return std::nullopt;
    f.header = *h;
    f.payload.assign(f.ulpdu.begin() + static_cast<std::ptrdiff_t>(h->size()), f.ulpdu.end());
    const std::size_t pad = wire::fpdu_pad_length(len);
    f.pad.assign(whole.begin() + 2 + static_cast<std::ptrdiff_t>(len),
                 whole.begin() + 2 + static_cast<std::ptrdiff_t>(len + pad));
    f.crc_field = wire::load_crc_trailer(whole.data() + total - wire::kMpaCrcSize);
    f.crc_ok = wire::decode_fpdu(whole, true).has_value();
    out.push_back(std::move(f));
    at += total;
  }
  if (rest != nullptr) *rest = stream.size() - at;
  return out;
}

}  // namespace testing
}  // namespace uwarp::proto
