#include "wire/rdmap.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace uwarp::wire {

std::string_view to_string(RdmapOpcode op) {
  switch (op) {
    case RdmapOpcode::kRdmaWrite: return "RDMA Write";
    case RdmapOpcode::kReadRequest: return "RDMA Read Request";
    case RdmapOpcode::kReadResponse: return "RDMA Read Response";
    case RdmapOpcode::kSend: return "Send";
    case RdmapOpcode::kSendInvalidate: return "Send with Invalidate";
    case RdmapOpcode::kSendSe: return "Send with Solicited Event";
    case RdmapOpcode::kSendSeInvalidate: return "Send with SE and Invalidate";
    case RdmapOpcode::kTerminate: return "Terminate";
    case RdmapOpcode::kImmediateData: return "Immediate Data";
    case RdmapOpcode::kImmediateDataSe: return "Immediate Data with SE";
    case RdmapOpcode::kAtomicRequest: return "Atomic Request";
    case RdmapOpcode::kAtomicResponse: return "Atomic Response";
  }
  return "reserved opcode";
}

Expected<ReadRequest, DdpHeaderError> decode_read_request(ConstByteSpan b) {
  if (b.size() < kReadRequestSize) return Unexpected{DdpHeaderError::kTruncated};
  ReadRequest rr;
  rr.sink_stag = load_be32(b.data());
  rr.sink_to = load_be64(b.data() + 4);
  rr.size = load_be32(b.data() + 12);
  rr.source_stag = load_be32(b.data() + 16);
  rr.source_to = load_be64(b.data() + 20);
  return rr;
}

std::size_t encode_read_request(const ReadRequest& rr, ByteSpan out) {
  if (out.size() < kReadRequestSize) return 0;
  store_be32(out.data(), rr.sink_stag);
  store_be64(out.data() + 4, rr.sink_to);
  store_be32(out.data() + 12, rr.size);
  store_be32(out.data() + 16, rr.source_stag);
  store_be64(out.data() + 20, rr.source_to);
  return kReadRequestSize;
}

std::string describe(const TerminateCode& c) {
  static constexpr const char* kLayers[] = {"RDMAP", "DDP", "LLP"};
  const auto layer = static_cast<unsigned>(c.layer);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s/%u/0x%02x", layer < 3 ? kLayers[layer] : "layer?", c.etype, c.ecode);
  return buf;
}

namespace {

std::string_view etype_name(const TerminateCode& c) {
  switch (c.layer) {
    case TermLayer::kRdmap:
      if (c.etype == 0) return "local catastrophic error";
      if (c.etype == 1) return "remote protection error";
      if (c.etype == 2) return "remote operation error";
      break;
    case TermLayer::kDdp:
      if (c.etype == 0) return "local catastrophic error";
      if (c.etype == 1) return "tagged buffer error";
      if (c.etype == 2) return "untagged buffer error";
      break;
    case TermLayer::kLlp:
      if (c.etype == 0) return "MPA error";
      break;
  }
  return "unknown error type";
}

std::string_view ecode_name(const TerminateCode& c) {
  const auto e = c.ecode;
  switch (c.layer) {
    case TermLayer::kRdmap:
      if (c.etype == 0) return e == 0 ? "unspecified" : "unknown code";
      if (c.etype == 1) {
        switch (e) {
          case 0x00:
            return "invalid STag";
          case 0x01:
            return "base or bounds violation";
          case 0x02:
            return "access rights violation";
          case 0x03:
            return "STag not associated with RDMAP stream";
          case 0x04:
            return "TO wrap";
          case 0x09:
            return "STag cannot be invalidated";
          case 0xFF:
            return "unspecified";
        }
      }
      if (c.etype == 2) {
        switch (e) {
          case 0x01:
            return "invalid STag";
          case 0x05:
            return "invalid RDMAP version";
          case 0x06:
            return "unexpected opcode";
          case 0x07:
            return "catastrophic error localized to RDMAP stream";
          case 0x08:
            return "catastrophic error global";
          case 0x09:
            return "STag cannot be invalidated";
          case 0xFF:
            return "unspecified";
        }
      }
      break;
    case TermLayer::kDdp:
      if (c.etype == 0) return e == 0 ? "unspecified" : "unknown code";
      if (c.etype == 1) {
        switch (e) {
          case 0x00:
            return "invalid STag";
          case 0x01:
            return "base or bounds violation";
          case 0x02:
            return "STag not associated with DDP stream";
          case 0x03:
            return "TO wrap";
          case 0x04:
            return "invalid DDP version";
        }
      }
      if (c.etype == 2) {
        switch (e) {
          case 0x01:
            return "invalid QN";
          case 0x02:
            return "invalid MSN, no buffer available";
          case 0x03:
            return "invalid MSN, MSN range is not valid";
          case 0x04:
            return "invalid MO";
          case 0x05:
            return "DDP message too long for available buffer";
          case 0x06:
            return "invalid DDP version";
        }
      }
      break;
    case TermLayer::kLlp:
      if (c.etype == 0) {
        switch (e) {
          case 0x01:
            return "TCP connection closed or lost";
          case 0x02:
            return "CRC error";
          case 0x03:
            return "marker and ULPDU length mismatch";
          case 0x04:
            return "invalid MPA request or reply";
          case 0x05:
            return "local catastrophic error";
          case 0x06:
            return "insufficient IRD resources";
          case 0x07:
            return "no matching RTR";
        }
      }
      break;
  }
  return "unknown code";
}

}  // namespace

std::string terminate_error_name(const TerminateCode& c) {
  std::string s(etype_name(c));
  s += ": ";
  s += ecode_name(c);
  return s;
}

std::string describe_named(const TerminateCode& c) {
  return describe(c) + " (" + terminate_error_name(c) + ")";
}

Expected<TerminateMessage, TerminateError> decode_terminate(ConstByteSpan b) {
  if (b.size() < kTerminateControlSize) return Unexpected{TerminateError::kTruncated};
  TerminateMessage m;
  const std::uint32_t ctrl = load_be32(b.data());
  m.raw_control = ctrl;
  m.code.layer = static_cast<TermLayer>(ctrl >> 28);
  m.code.etype = static_cast<std::uint8_t>((ctrl >> 24) & 0x0F);
  m.code.ecode = static_cast<std::uint8_t>(ctrl >> 16);
  std::size_t at = kTerminateControlSize;
  if ((ctrl & kTermFlagM) != 0) {
    if (b.size() < at + 2) return Unexpected{TerminateError::kTruncated};
    m.has_segment_length = true;
    m.segment_length = load_be16(b.data() + at);
    at += 2;
  }
  if ((ctrl & kTermFlagD) != 0) {
    if (b.size() < at + kDdpControlSize) return Unexpected{TerminateError::kTruncated};
    const std::size_t n = ddp_header_size(b[at]);
    if (b.size() < at + n) return Unexpected{TerminateError::kTruncated};
    m.ddp_header = b.subspan(at, n);
    at += n;
  }
  if ((ctrl & kTermFlagR) != 0) {
    if (b.size() < at + kReadRequestSize) return Unexpected{TerminateError::kTruncated};
    m.rdmap_header = b.subspan(at, kReadRequestSize);
  }
  return m;
}

std::size_t encode_terminate(const TerminateMessage& m, ByteSpan out) {
  const bool d = !m.ddp_header.empty();
  const bool r = !m.rdmap_header.empty();
  const std::size_t total = kTerminateControlSize + (m.has_segment_length ? 2 : 0) +
                            m.ddp_header.size() + m.rdmap_header.size();
  if (out.size() < total) return 0;
  std::uint32_t ctrl = (std::uint32_t{static_cast<std::uint8_t>(m.code.layer)} & 0x0F) << 28 |
                       (std::uint32_t{m.code.etype} & 0x0F) << 24 | std::uint32_t{m.code.ecode} << 16;
  if (m.has_segment_length) ctrl |= kTermFlagM;
  if (d) ctrl |= kTermFlagD;
  if (r) ctrl |= kTermFlagR;
  store_be32(out.data(), ctrl);
  std::size_t at = kTerminateControlSize;
  if (m.has_segment_length) {
    store_be16(out.data() + at, m.segment_length);
    at += 2;
  }
  if (d) {
    std::memcpy(out.data() + at, m.ddp_header.data(), m.ddp_header.size());
    at += m.ddp_header.size();
  }
  if (r) {
    std::memcpy(out.data() + at, m.rdmap_header.data(), m.rdmap_header.size());
    at += m.rdmap_header.size();
  }
  return at;
}

}  // namespace uwarp::wire
