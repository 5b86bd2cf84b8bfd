// A raw frame injector for the siw matrix (tests/interop/siw_matrix.sh): it speaks MPA, DDP and
// RDMAP by hand (tests/integration/raw_peer.h) to the Linux siw driver in the QEMU guest, puts
// one malformed or out-of-contract frame on the wire per connection, and checks byte for byte
// what siw answers: the Terminate of docs/interop.md ("Injected faults"), or that it sends none.
//
//   siw_inject connect --port P [--host H] [--crc] [--mpa1] --faults F1,F2,...
//       siw passive: `verbs_peer server -i 0` in the guest. Per fault one connection: the MPA
//       request (revision 2 with the RFC 6581 words, or 1 with --mpa1; CRC asked with --crc),
//       verbs_peer's hellos (its STag and address), C_INJECT with the fault's name (the server
//       posts a receive, ACKs and reports what siw tells it), then the fault. Faults named
//       mpa-* break the MPA request itself; verbs_peer never sees those connections.
//   siw_inject listen --port P --faults F1,...
//       siw active: one `verbs_peer client` connection per fault to 127.0.0.1:P; the fault is
//       in the MPA reply.
//   siw_inject list
//   --peer uwarp: the peer is uwarp (`uwarp-run verbs_peer ...` on the host, tests/interop/
//       inject_uwarp.sh) and the answers expected are uwarp's: RFC 5040 Terminates (control word
//       layer << 4 | etype, M D R in its third byte's top bits; with M the terminated segment's
//       whole ULPDU length, with D its DDP header, with R a Read Request's RDMAP header).
//
// Per fault it prints the bytes it injected ("sent HEX", one line per frame, as the guest's
// capture shows them: the matrix matches its tshark check against them), siw's answer ("got
// HEX", whole FPDUs), a decoded line and "ok" or "MISMATCH: ...". Exit status 0 if every fault
// got the expected answer, 1 otherwise, 2 on a usage error.
//
// siw's Terminate layout (Linux 6.1, iwarp.h): the control word is little-endian bitfields, so
// its first byte is etype << 4 | layer and the M, D, R flags are bits 0, 1, 2 of its third byte;
// the Terminate's own DDP header has QN 2, MSN 1, MO 0; with D it copies the terminated
// segment's DDP header (14 or 18 bytes, never the Read Request body), preceded by that segment's
// length less siw's header length for the opcode (the payload; 0 for a Read Request).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "integration/raw_peer.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"

namespace {

using uwarp::testing::RawFpdu;
using uwarp::testing::RawListener;
using uwarp::testing::RawMpaOptions;
using uwarp::testing::RawPeer;
using uwarp::testing::ReadStatus;
using uwarp::wire::DdpHeader;
using uwarp::wire::MpaFrameKind;
using uwarp::wire::RdmapOpcode;
using Bytes = std::vector<std::uint8_t>;

constexpr int kMpaTimeoutMs = 15000;     // siw waits 10 s for a reply itself; the guest is slow
constexpr int kReplyTimeoutMs = 15000;   // a verbs_peer message
constexpr int kNudgeAfterMs = 300;       // see open_session
constexpr int kAnswerTimeoutMs = 10000;  // siw's Terminate (or close) after the fault
constexpr int kCloseTimeoutMs = 5000;    // the close after the Terminate
constexpr int kAcceptTimeoutMs = 90000;  // listen: the guest boots first
constexpr int kSettleMs = 300;           // siw: after verbs_peer's ACK, before the fault

// verbs_peer.c's struct msg: 72 bytes, little-endian (x86-64 on both ends), no padding; the
// fault's name of C_INJECT overlays the address fields.
namespace msg {
constexpr std::size_t kSize = 72;
constexpr std::uint32_t kMagic = 0x75776d31;
constexpr std::uint32_t kHello = 1, kAck = 2, kInject = 8;  // enum cmd
constexpr std::size_t kMagicAt = 0, kCmdAt = 4, kSizeAt = 8, kStatusAt = 20, kAddrAt = 24,
                      kRkeyAt = 56, kNameAt = 24, kNameSize = 48;
}  // namespace msg

void put_le32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_le32(const Bytes& b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | b[at + i];
  return v;
}
std::uint64_t get_le64(const Bytes& b, std::size_t at) {
  return std::uint64_t{get_le32(b, at)} | std::uint64_t{get_le32(b, at + 4)} << 32;
}

std::string hex(const Bytes& b, std::size_t from = 0, std::size_t n = SIZE_MAX) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (std::size_t i = from; i < b.size() && i - from < n; ++i) {
    s += d[b[i] >> 4];
    s += d[b[i] & 15];
  }
  return s;
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The implementation behind verbs_peer: whose answers are expected (--peer).
enum class Target : std::uint8_t { kSiw, kUwarp };
const char* target_name(Target t) { return t == Target::kSiw ? "siw" : "uwarp"; }

// What verbs_peer's hello says about its data region.
struct ServerRegion {
  std::uint64_t addr = 0;
  std::uint32_t stag = 0;
  std::uint32_t size = 0;
};

// One connection's state as the injector sees it.
struct Session {
  RawPeer peer;
  bool crc = false;
  ServerRegion region;
  std::uint32_t send_msn = 1;  // the next MSN of our Sends (queue 0)
  Target target = Target::kSiw;
};

// What one fault puts on the wire: frames (each printed as a "sent" line, written in one go).
struct Injection {
  std::vector<Bytes> frames;
  Bytes terminated;        // the ULPDU of the segment the Terminate is about (header copies)
  Bytes uwarp_terminated;  // the one uwarp's Terminate is about, if another one
};

// What the peer must answer.
enum class Answer : std::uint8_t {
  kTerminate,            // exactly `control` (+ the header copy with D), then the close
  kCloseNoTerminate,     // only the close (FPDUs before it allowed, no Terminate)
  kCloseMaybeTerminate,  // the same, or exactly `control` as the last FPDU before the close
  kDataThenTerminate,    // FPDUs, then exactly `control` as the last FPDU, then the close
  kServed,               // the Read is served (a Read Response), no Terminate within 1 s
  kNothing,              // no FPDU and no close within 1 s (the frame was accepted)
  kMpaClose,             // no MPA reply, the close
  kMpaReject,            // exactly `mpa_reply`, then the close
  kMpaAccept,            // an MPA reply that accepts
};

struct Fault;
using Inject = std::function<std::optional<Injection>(Session&, const Fault&)>;

struct Fault {
  const char* name = "";
  const char* condition = "";  // the receiver's condition (RFC 5040 / 5041 / 5044 terms)
  const char* rfc = "";        // the answer the RFCs (and ../shared/docs/siw-interop.md) ask for
  bool listen = false;         // siw active: the fault is in our MPA reply
  std::uint16_t ord = 0;       // our ORD word (siw's IRD, with verbs_peer server -i 0)
  Answer answer = Answer::kTerminate;
  std::array<std::uint8_t, 4> control{};  // siw's Terminate control word, as on the wire
  Inject inject{};             // siw passive, after the hellos (or the MPA request for mpa-*)
  RawMpaOptions reply{};       // listen: our reply
  bool reply_bad_key = false;  // listen: with its key broken
  Bytes mpa_reply{};           // kMpaReject: siw's reply, byte for byte
  int rcvbuf = 0;              // shrink our receive buffer (a Read Response that must stall)
  // uwarp's answer (--peer uwarp); its control word in the RFC 5040 layout.
  Answer uwarp_answer = Answer::kTerminate;
  std::array<std::uint8_t, 4> uwarp_control{};
  Bytes uwarp_mpa_reply{};
};

// The answer `f` expects from `t`.
struct Expected {
  Answer answer;
  std::array<std::uint8_t, 4> control;
  const Bytes& mpa_reply;
};
Expected expected(const Fault& f, Target t) {
  if (t == Target::kSiw) return {f.answer, f.control, f.mpa_reply};
  return {f.uwarp_answer, f.uwarp_control, f.uwarp_mpa_reply};
}

// ---- frames ----

Bytes fpdu(const Session& s, const DdpHeader& h, const Bytes& data) {
  return RawPeer::build_fpdu(h, data, s.crc);
}
Bytes ulpdu_fpdu(const Session& s, const Bytes& ulpdu) {
  return RawPeer::build_fpdu_from_ulpdu(ulpdu, s.crc);
}
DdpHeader send_header(std::uint32_t msn) {
  return RawPeer::untagged_header(RdmapOpcode::kSend, uwarp::wire::kQueueSend, msn);
}
Bytes payload(std::size_t n, std::uint8_t seed = 0x5a) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(seed + i);
  return b;
}
Bytes read_request(std::uint32_t msn, std::uint32_t queue, const ServerRegion& r,
                   std::uint32_t size) {
  uwarp::wire::ReadRequest rr;
  rr.sink_stag = 0x00001234;  // ours; nothing is placed (we parse and drop)
  rr.sink_to = 0;
  rr.size = size;
  rr.source_stag = r.stag;
  rr.source_to = r.addr;
  return cat(RawPeer::header_bytes(RawPeer::untagged_header(RdmapOpcode::kReadRequest, queue, msn)),
             RawPeer::read_request_body(rr));
}
// An injection of one FPDU, the one a Terminate is about.
Injection one(const Session& s, const Bytes& ulpdu) {
  Injection in;
  in.frames.push_back(ulpdu_fpdu(s, ulpdu));
  in.terminated = ulpdu;
  return in;
}
Injection send_with(const Session& s, const DdpHeader& h, std::size_t n = 16) {
  return one(s, cat(RawPeer::header_bytes(h), payload(n)));
}

// ---- the MPA exchange and verbs_peer's protocol ----

RawMpaOptions request_options(bool crc, bool mpa1, std::uint16_t ord) {
  RawMpaOptions o;
  o.revision = mpa1 ? 1 : 2;
  o.enhanced = !mpa1;
  o.crc = crc;
  o.ird = 16;   // siw's ORD: at most 16 (verbs_peer accepts with initiator depth 16)
  o.ord = ord;  // siw's IRD = max(this, verbs_peer's -i)
  return o;
}

void say(const char* fault, const std::string& what) {
  std::printf("siw_inject: %s: %s\n", fault, what.c_str());
  std::fflush(stdout);
}

// The verbs_peer message of `cmd` as a Send.
Bytes message(std::uint32_t cmd, const std::string& name = "") {
  Bytes m(msg::kSize, 0);
  put_le32(m, msg::kMagicAt, msg::kMagic);
  put_le32(m, msg::kCmdAt, cmd);
  std::memcpy(m.data() + msg::kNameAt, name.data(), std::min(name.size(), msg::kNameSize - 1));
  return m;
}
bool send_message(Session& s, const Bytes& m) {
  return s.peer.send_fpdu(send_header(s.send_msn++), m);
}
// One verbs_peer message; a failure is described in `why`.
std::optional<Bytes> read_message(Session& s, std::uint32_t cmd, int timeout_ms, std::string& why) {
  ReadStatus st;
  auto f = s.peer.read_fpdu(timeout_ms, &st);
  if (!f) {
    why = std::string("no message: ") + uwarp::testing::to_string(st);
    return std::nullopt;
  }
  if (!f->header || f->header->tagged ||
      f->header->opcode != static_cast<std::uint8_t>(RdmapOpcode::kSend) ||
      f->payload.size() != msg::kSize || get_le32(f->payload, msg::kMagicAt) != msg::kMagic ||
      get_le32(f->payload, msg::kCmdAt) != cmd) {
    why = "unexpected FPDU " + hex(f->bytes, 0, 64);
    return std::nullopt;
  }
  return f->payload;
}

// MPA request, reply, and verbs_peer's hellos. siw can miss bytes that arrive while it hands
// the socket from connection setup to the QP (docs/interop.md, "A first run"); as uwarp does,
// one zero-length RDMA Write to STag 1, TO 0 follows if siw has not answered our first Send
// after kNudgeAfterMs.
bool open_session(Session& s, const Fault& f, const std::string& host, std::uint16_t port, bool crc,
                  bool mpa1) {
  s.peer = RawPeer::connect_to(host, port, f.rcvbuf);
  if (!s.peer.valid()) return say(f.name, "cannot connect"), false;
  if (!s.peer.send_mpa_request(request_options(crc, mpa1, f.ord)))
    return say(f.name, "cannot send the MPA request"), false;
  ReadStatus st;
  auto rep = s.peer.read_mpa(MpaFrameKind::kReply, kMpaTimeoutMs, &st);
  if (!rep || rep->reject)
    return say(f.name, std::string("no MPA reply: ") + (rep ? "rejected" : to_string(st))), false;
  s.crc = rep->crc;
  s.peer.set_crc(rep->crc);
  std::string why;
  if (!send_message(s, message(msg::kHello))) return say(f.name, "cannot send the hello"), false;
  auto hello = read_message(s, msg::kHello, kNudgeAfterMs, why);
  if (!hello && why == "no message: timeout") {
    say(f.name, "no answer yet: one zero-length RDMA Write to STag 1, TO 0");
    s.peer.send_fpdu(RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, 1, 0), {});
    hello = read_message(s, msg::kHello, kReplyTimeoutMs, why);
  }
  if (!hello) return say(f.name, "no hello from verbs_peer: " + why), false;
  s.region.addr = get_le64(*hello, msg::kAddrAt);
  s.region.stag = get_le32(*hello, msg::kRkeyAt);
  s.region.size = get_le32(*hello, msg::kSizeAt);
  if (!send_message(s, message(msg::kInject, f.name)))
    return say(f.name, "cannot send C_INJECT"), false;
  auto ack = read_message(s, msg::kAck, kReplyTimeoutMs, why);
  if (!ack || get_le32(*ack, msg::kStatusAt) != 0) return say(f.name, "no ACK: " + why), false;
  // siw sends no Terminate while a transmit work request is in progress (siw_send_terminate),
  // and its ACK's request can still be when the ACK has arrived here (seen: the ACK completed
  // with "local QP operation error" and the connection closed without a Terminate). Let siw's
  // transmitter go idle first. uwarp needs no such pause: the fault follows the ACK at once.
  if (s.target == Target::kSiw) std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs));
  return true;
}

// ---- checking the peer's answer ----

// A terminated segment's headers: its DDP header (14 bytes tagged, 18 untagged) and, for a Read
// Request, the RDMAP header after it (uwarp::wire::kReadRequestSize bytes).
bool is_tagged(const Bytes& ulpdu) { return !ulpdu.empty() && (ulpdu[0] & 0x80) != 0; }
bool is_read_request(const Bytes& ulpdu) {
  return ulpdu.size() >= 2 && !is_tagged(ulpdu) &&
         (ulpdu[1] & 0x0f) == static_cast<std::uint8_t>(RdmapOpcode::kReadRequest);
}
std::size_t ddp_header_size(const Bytes& ulpdu) {
  return is_tagged(ulpdu) ? uwarp::wire::kTaggedHeaderSize : uwarp::wire::kUntaggedHeaderSize;
}
void put_be16(Bytes& b, std::size_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

// The Terminate for `control` after `in`, as a whole FPDU, as the target lays it out.
// siw: with D (bit 1 of the third byte) the segment's length less siw's header length for the
// opcode (so a Read Request's is 0), then its DDP header only. RFC 5040 section 4.8 (uwarp): with
// M or D (0x80, 0x40) the DDP Segment Length (the whole ULPDU), with D the DDP header, with R
// (0x20) a Read Request's RDMAP header.
Bytes expected_terminate(const Session& s, const std::array<std::uint8_t, 4>& control,
                         const Injection& in) {
  Bytes u = RawPeer::header_bytes(
      RawPeer::untagged_header(RdmapOpcode::kTerminate, uwarp::wire::kQueueTerminate, 1));
  u.insert(u.end(), control.begin(), control.end());
  const Bytes& seg = s.target == Target::kUwarp && !in.uwarp_terminated.empty()
                         ? in.uwarp_terminated
                         : in.terminated;
  const std::size_t ddp = ddp_header_size(seg);
  const auto copy = [&](std::size_t from, std::size_t n) {
    from = std::min(from, seg.size());
    n = std::min(n, seg.size() - from);
    u.insert(u.end(), seg.begin() + static_cast<long>(from),
             seg.begin() + static_cast<long>(from + n));
  };
  if (s.target == Target::kSiw) {
    if (control[2] & 0x02) {
      const std::size_t siw_header =
          is_read_request(seg) ? ddp + uwarp::wire::kReadRequestSize : ddp;
      put_be16(u, seg.size() - std::min(seg.size(), siw_header));
      copy(0, ddp);
    }
  } else {
    if (control[2] & 0xc0) put_be16(u, seg.size());
    if (control[2] & 0x40) copy(0, ddp);
    if (control[2] & 0x20) copy(ddp, uwarp::wire::kReadRequestSize);
  }
  return ulpdu_fpdu(s, u);
}

// The codes of RFC 5040 section 7, RFC 5041 section 7 and RFC 5044 section 8 / RFC 6581, keyed
// layer << 12 | etype << 8 | code.
struct CodeName {
  int key;
  const char* name;
};
constexpr CodeName kCodeNames[] = {{0x0100, "invalid STag"},
                                   {0x0101, "base or bounds violation"},
                                   {0x0102, "access rights violation"},
                                   {0x0103, "STag not associated with the stream"},
                                   {0x0104, "TO wrap"},
                                   {0x0109, "STag cannot be invalidated"},
                                   {0x0209, "STag cannot be invalidated"},
                                   {0x0205, "invalid RDMAP version"},
                                   {0x0206, "unexpected opcode"},
                                   {0x0207, "catastrophic, local to the stream"},
                                   {0x0208, "catastrophic, global"},
                                   {0x1000, "DDP catastrophic"},
                                   {0x1100, "invalid STag"},
                                   {0x1101, "base or bounds violation"},
                                   {0x1102, "STag not associated with the stream"},
                                   {0x1103, "TO wrap"},
                                   {0x1104, "invalid DDP version (tagged)"},
                                   {0x1201, "invalid QN"},
                                   {0x1202, "invalid MSN, no buffer"},
                                   {0x1203, "invalid MSN, out of range"},
                                   {0x1204, "invalid MO"},
                                   {0x1205, "message too long"},
                                   {0x1206, "invalid DDP version (untagged)"},
                                   {0x2001, "TCP stream lost"},
                                   {0x2002, "MPA CRC mismatch"},
                                   {0x2003, "bad FPDU (markers, ULPDU length)"},
                                   {0x2004, "invalid MPA request or reply"},
                                   {0x2005, "local catastrophic"},
                                   {0x2006, "insufficient IRD"},
                                   {0x2007, "no matching RTR"}};
const char* code_name(int layer, int etype, int ecode) {
  for (const CodeName& c : kCodeNames)
    if (c.key == (layer << 12 | etype << 8 | ecode)) return c.name;
  return "?";
}

// The code as the target means it: siw's bitfield layout swaps layer and error type and keeps
// M D R in bits 0-2 of the third byte; RFC 5040's has them in bits 7-5.
uwarp::wire::TerminateCode terminate_code(const std::uint8_t* c, Target t) {
  const bool swapped = t == Target::kSiw;
  uwarp::wire::TerminateCode code;
  code.layer = static_cast<uwarp::wire::TermLayer>(swapped ? c[0] & 0x0f : c[0] >> 4);
  code.etype = static_cast<std::uint8_t>(swapped ? c[0] >> 4 : c[0] & 0x0f);
  code.ecode = c[1];
  return code;
}
struct TermFlags {
  bool m, d, r;
};
TermFlags term_flags(const std::uint8_t* c, Target t) {
  if (t == Target::kSiw) return {(c[2] & 1) != 0, (c[2] & 2) != 0, (c[2] & 4) != 0};
  return {(c[2] & 0x80) != 0, (c[2] & 0x40) != 0, (c[2] & 0x20) != 0};
}
// e.g. "DDP/2/0x01 (invalid QN), M, D".
std::string decode_control(const std::uint8_t* c, Target t) {
  const auto code = terminate_code(c, t);
  const TermFlags fl = term_flags(c, t);
  return uwarp::wire::describe(code) + " (" +
         code_name(static_cast<int>(code.layer), code.etype, code.ecode) + ")" +
         (fl.m ? ", M" : "") + (fl.d ? ", D" : "") + (fl.r ? ", R" : "");
}

std::string describe_terminate(const RawFpdu& t, Target target) {
  const Bytes& p = t.payload;
  if (p.size() < 4) return "a Terminate shorter than its control word";
  std::string s = "Terminate " + decode_control(p.data(), target);
  if (term_flags(p.data(), target).d && p.size() >= 6) {
    const unsigned len = static_cast<unsigned>(p[4]) << 8 | p[5];
    s += ", segment length " + std::to_string(len) + ", terminated header " + hex(p, 6);
  }
  return s;
}

// Reads until the close; the FPDUs that came and whether the close came within the time.
struct Rest {
  std::vector<RawFpdu> fpdus;  // the first few, and every Terminate
  bool closed = false;
  std::size_t terminates = 0;
  bool last_is_terminate = false;  // the last FPDU before the close
  std::size_t payload_bytes = 0;
};
Rest read_rest(Session& s, int timeout_ms, std::size_t keep = 8) {
  Rest r;
  const auto deadline = RawPeer::deadline_after(timeout_ms);
  for (int i = 0; i < 1 << 20; ++i) {
    ReadStatus st;
    auto f = s.peer.read_fpdu_until(deadline, &st);
    if (!f) {
      r.closed = st == ReadStatus::kClosed || st == ReadStatus::kError;
      return r;
    }
    r.last_is_terminate = f->is_terminate();
    if (f->is_terminate()) ++r.terminates;
    r.payload_bytes += f->payload.size();
    if (r.fpdus.size() < keep || f->is_terminate()) r.fpdus.push_back(std::move(*f));
  }
  return r;
}

bool check_terminate(Session& s, const Fault& f, const Injection& in) {
  ReadStatus st;
  auto t = s.peer.read_fpdu(kAnswerTimeoutMs, &st);
  if (!t) {
    say(f.name, std::string("MISMATCH: no Terminate, ") +
                    (st == ReadStatus::kTimeout ? "nothing within 10 s" : "the connection closed"));
    return false;
  }
  say(f.name, "got " + hex(t->bytes));
  if (!t->is_terminate()) {
    say(f.name, "MISMATCH: the first FPDU is not a Terminate");
    return false;
  }
  say(f.name, describe_terminate(*t, s.target));
  const std::string who = target_name(s.target);
  if (t->payload.size() >= 4) {
    const std::string code = uwarp::wire::describe(terminate_code(t->payload.data(), s.target));
    const bool as_rfc = std::string(f.rfc).rfind(code, 0) == 0;
    say(f.name, std::string("RFC: ") + f.rfc + "; " + who +
                    (as_rfc ? " answers so" : " answers otherwise"));
  }
  const Bytes want = expected_terminate(s, expected(f, s.target).control, in);
  bool ok = t->bytes == want;
  if (!ok) say(f.name, "MISMATCH: expected " + hex(want));
  Rest rest = read_rest(s, kCloseTimeoutMs);
  if (!rest.fpdus.empty()) {
    say(f.name, "MISMATCH: " + std::to_string(rest.fpdus.size()) +
                    " FPDU(s) after the Terminate, first " + hex(rest.fpdus[0].bytes, 0, 64));
    ok = false;
  }
  if (!rest.closed) {
    say(f.name, "MISMATCH: the connection stayed open after the Terminate");
    ok = false;
  } else {
    say(f.name, who + " closed the connection");
  }
  return ok;
}

// kCloseNoTerminate, or with `in` kCloseMaybeTerminate (kDataThenTerminate: `required`).
bool check_close_no_terminate(Session& s, const Fault& f, int timeout_ms,
                              const Injection* in = nullptr, bool required = false) {
  Rest r = read_rest(s, timeout_ms);
  say(f.name, std::to_string(r.payload_bytes) + " payload bytes in " +
                  std::to_string(r.fpdus.size()) + "+ FPDU(s), " + std::to_string(r.terminates) +
                  " Terminate(s), " + (r.closed ? "closed" : "still open"));
  for (const auto& t : r.fpdus) {
    if (!t.is_terminate()) continue;
    say(f.name, "got " + hex(t.bytes));
    say(f.name, describe_terminate(t, s.target));
  }
  if (in != nullptr && r.closed && r.terminates == 1 && r.last_is_terminate) {
    const Bytes want = expected_terminate(s, expected(f, s.target).control, *in);
    const bool ok = r.fpdus.back().bytes == want;
    say(f.name, ok ? "the Terminate after the data, then the close"
                   : "MISMATCH: expected the close, or before it " + hex(want));
    return ok;
  }
  if (required) {
    say(f.name, "MISMATCH: expected the Terminate as the last FPDU before the close");
    return false;
  }
  const bool ok = r.closed && r.terminates == 0;
  say(f.name, ok ? std::string("no Terminate, ") + target_name(s.target) + " closed the connection"
                 : "MISMATCH: expected the close and no Terminate");
  return ok;
}

// ---- the faults ----

constexpr std::uint32_t kBadQueue = 5;

std::vector<Fault> make_faults() {
  using uwarp::wire::kQueueReadRequest;
  std::vector<Fault> v;
  auto add = [&](Fault f) { v.push_back(std::move(f)); };

  // Untagged buffer errors (RFC 5041 section 7.2); verbs_peer has posted a receive.
  add({.name = "send-bad-qn",
       .condition = "Send on queue 5",
       .rfc = "DDP/2/0x01",
       .control = {0x21, 0x01, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         auto h = send_header(s.send_msn);
         h.queue = kBadQueue;
         return std::optional(send_with(s, h));
       },
       .uwarp_control = {0x12, 0x01, 0xc0, 0x00}});
  add({.name = "send-bad-msn",
       .condition = "Send with an MSN 7 ahead of the expected one",
       .rfc = "DDP/2/0x03",
       .control = {0x21, 0x03, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         return std::optional(send_with(s, send_header(s.send_msn + 7)));
       },
       .uwarp_control = {0x12, 0x03, 0xc0, 0x00}});
  add({.name = "send-bad-mo",
       .condition = "first (and last) segment of a Send with MO 100",
       .rfc = "DDP/2/0x04",
       .control = {0x21, 0x04, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         auto h = send_header(s.send_msn);
         h.message_offset = 100;
         return std::optional(send_with(s, h));
       },
       .uwarp_control = {0x12, 0x04, 0xc0, 0x00}});
  add({.name = "read-bad-msn",
       .condition = "Read Request with MSN 5 on the Read Request queue (expected 1)",
       .rfc = "DDP/2/0x03",
       .ord = 1,
       .control = {0x21, 0x03, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         return std::optional(one(s, read_request(5, kQueueReadRequest, s.region, 64)));
       },
       .uwarp_control = {0x12, 0x03, 0xc0, 0x00}});
  add({.name = "read-bad-qn",
       .condition = "Read Request on queue 5 (MSN 1, a valid source)",
       .rfc = "DDP/2/0x01",
       .ord = 1,
       .answer = Answer::kServed,
       .inject = [](Session& s, const Fault&) {
         return std::optional(one(s, read_request(1, kBadQueue, s.region, 64)));
       },
       .uwarp_control = {0x12, 0x01, 0xc0, 0x00}});
  // RDMAP (RFC 5040 section 7.2, 6.3: the responder's IRD bounds the Read Requests in flight).
  add({.name = "read-ird-0",
       .condition = "Read Request with IRD 0 negotiated",
       .rfc = "RDMAP/2/0x07",
       .control = {0x20, 0x07, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         return std::optional(one(s, read_request(1, kQueueReadRequest, s.region, 64)));
       },
       .uwarp_control = {0x02, 0x07, 0xe0, 0x00}});
  // The first Read (the whole 16 MiB region) stalls because we stop reading (small receive
  // buffer); then two more make three outstanding with IRD 1. siw sees the overrun and stops
  // its transmitter, but sends no Terminate while a transmission is in progress
  // (siw_send_terminate): whether the Terminate comes (after the Read Response data already
  // queued) depends on whether the transmitter finished its segment before siw's close work
  // ran. Both were seen; either is accepted, the Terminate byte for byte.
  add({.name = "read-beyond-ird",
       .condition = "a third outstanding Read Request with IRD 1, during the first Read Response",
       .rfc = "RDMAP/2/0x07",
       .ord = 1,
       .answer = Answer::kCloseMaybeTerminate,
       .control = {0x20, 0x07, 0x03, 0x00},
       .inject = [](Session& s, const Fault& f) -> std::optional<Injection> {
         const Bytes first =
             ulpdu_fpdu(s, read_request(1, kQueueReadRequest, s.region, s.region.size));
         say(f.name, "sent " + hex(first));
         if (!s.peer.send_raw(first)) return std::nullopt;
         ReadStatus st;
         auto r = s.peer.read_fpdu(kAnswerTimeoutMs, &st);
         if (!r || !r->header ||
             r->header->opcode != static_cast<std::uint8_t>(RdmapOpcode::kReadResponse)) {
           say(f.name, "MISMATCH: no Read Response to the first Read Request");
           return std::nullopt;
         }
         say(f.name, "the Read Response to the first Read Request is under way; two more Reads");
         std::this_thread::sleep_for(std::chrono::milliseconds(500));
         Injection in;
         const Bytes second = read_request(2, kQueueReadRequest, s.region, 64);
         const Bytes third = read_request(3, kQueueReadRequest, s.region, 64);
         in.frames.push_back(ulpdu_fpdu(s, second));
         in.frames.push_back(ulpdu_fpdu(s, third));
         in.terminated = third;
         in.uwarp_terminated = second;  // uwarp counts the Read in progress (IRD 1)
         return in;
       },
       .rcvbuf = 16384,
       .uwarp_answer = Answer::kDataThenTerminate,
       .uwarp_control = {0x02, 0x07, 0xe0, 0x00}});
  // Versions and opcodes (RFC 5041 section 7.2, RFC 5040 section 7.2): siw copies no header.
  add({.name = "ddp-version-tagged",
       .condition = "RDMA Write with DDP version 2",
       .rfc = "DDP/1/0x04",
       .control = {0x11, 0x04, 0x00, 0x00},
       .inject = [](Session& s, const Fault&) {
         auto h = RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, s.region.stag, s.region.addr);
         h.ddp_version = 2;
         return std::optional(send_with(s, h));
       },
       .uwarp_control = {0x11, 0x04, 0xc0, 0x00}});
  add({.name = "ddp-version-untagged",
       .condition = "Send with DDP version 0",
       .rfc = "DDP/2/0x06",
       .control = {0x21, 0x06, 0x00, 0x00},
       .inject = [](Session& s, const Fault&) {
         auto h = send_header(s.send_msn);
         h.ddp_version = 0;
         return std::optional(send_with(s, h));
       },
       .uwarp_control = {0x12, 0x06, 0xc0, 0x00}});
  add({.name = "rdmap-version",
       .condition = "Send with RDMAP version 2",
       .rfc = "RDMAP/2/0x05",
       .control = {0x20, 0x05, 0x00, 0x00},
       .inject = [](Session& s, const Fault&) {
         auto h = send_header(s.send_msn);
         h.rdmap_version = 2;
         return std::optional(send_with(s, h));
       },
       .uwarp_control = {0x02, 0x05, 0xc0, 0x00}});
  add({.name = "opcode-unknown",
       .condition = "untagged message with the unassigned RDMAP opcode 0xC",
       .rfc = "RDMAP/2/0x06",
       .control = {0x20, 0x06, 0x00, 0x00},
       .inject = [](Session& s, const Fault&) {
         auto h = send_header(s.send_msn);
         h.opcode = 0xC;
         return std::optional(send_with(s, h));
       },
       .uwarp_control = {0x02, 0x06, 0xc0, 0x00}});
  add({.name = "opcode-atomic",
       .condition = "RFC 7306 Atomic Request (opcode 0xA, queue 1, MSN 1) of the undefined "
                    "operation 0xD",
       .rfc = "RDMAP/2/0x06 (from a peer without RFC 7306, and for the operation)",
       .ord = 1,  // an IRD slot for it: the operation, not IRD 0, is what uwarp refuses
       .control = {0x20, 0x06, 0x00, 0x00},
       .inject = [](Session& s, const Fault&) {
         const auto h = RawPeer::untagged_header(static_cast<RdmapOpcode>(0xA),
                                                 uwarp::wire::kQueueReadRequest, 1);
         return std::optional(send_with(s, h, 52));  // its first word ends in 0xD
       },
       .uwarp_control = {0x02, 0x06, 0xc0, 0x00}});
  // Tagged buffer errors a verbs sender cannot make (RFC 5041 section 7.2).
  add({.name = "write-to-wrap",
       .condition = "RDMA Write of 64 bytes at TO 0xfffffffffffffff0 (the TO wraps)",
       .rfc = "DDP/1/0x03",
       // siw's bounds check wraps too and passes; the page lookup then fails ("bogus addr")
       .control = {0x01, 0x00, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         return std::optional(send_with(
             s, RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, s.region.stag, ~std::uint64_t{15}),
             64));
       },
       .uwarp_control = {0x11, 0x03, 0xc0, 0x00}});
  // An RDMA Write in two segments, the second one wrong.
  auto segmented = [](Session& s, std::uint32_t stag2, std::uint64_t to2) {
    Injection in;
    in.frames.push_back(fpdu(
        s, RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, s.region.stag, s.region.addr, false),
        payload(16)));
    const DdpHeader h2 = RawPeer::tagged_header(RdmapOpcode::kRdmaWrite, stag2, to2);
    in.frames.push_back(fpdu(s, h2, payload(16, 0x6a)));
    in.terminated = cat(RawPeer::header_bytes(h2), payload(16, 0x6a));
    return std::optional(in);
  };
  add({.name = "write-segment-stag",
       .condition = "second segment of an RDMA Write with another STag",
       .rfc = "no code (DDP places each tagged segment by its own STag and TO)",
       .control = {0x11, 0x00, 0x03, 0x00},
       .inject = [segmented](Session& s, const Fault&) {
         return segmented(s, s.region.stag ^ 0x100, s.region.addr + 16);
       },
       .uwarp_control = {0x11, 0x00, 0xc0, 0x00}});
  add({.name = "write-segment-to",
       .condition = "second segment of an RDMA Write 8 bytes past the first one's end",
       .rfc = "no code (DDP places each tagged segment by its own STag and TO)",
       .control = {0x11, 0x01, 0x03, 0x00},
       .inject = [segmented](Session& s, const Fault&) {
         return segmented(s, s.region.stag, s.region.addr + 24);
       },
       .uwarp_answer = Answer::kNothing});
  add({.name = "rresp-unsolicited",
       .condition = "Read Response with no Read Request outstanding",
       .rfc = "no code named; DDP/1/0x00 fits (no sink STag is valid)",
       .control = {0x01, 0x00, 0x03, 0x00},
       .inject = [](Session& s, const Fault&) {
         return std::optional(
             send_with(s, RawPeer::tagged_header(RdmapOpcode::kReadResponse, 0x1234, 0)));
       },
       .uwarp_control = {0x11, 0x00, 0xc0, 0x00}});
  // MPA framing and CRC (RFC 5044 sections 4 and 4.4).
  add({.name = "fpdu-short",
       .condition = "FPDU whose ULPDU (4 bytes) is shorter than a DDP header",
       .rfc = "LLP/0/0x03",
       .control = {0x02, 0x03, 0x00, 0x00},
       .inject = [](Session& s, const Fault&) {
         Injection in;
         in.frames.push_back(ulpdu_fpdu(s, Bytes{0x41, 0x43, 0x00, 0x00}));
         // siw reads a whole header before it looks at the length: a valid Send follows.
         in.frames.push_back(fpdu(s, send_header(s.send_msn), payload(16)));
         return std::optional(in);
       },
       .uwarp_control = {0x20, 0x03, 0x00, 0x00}});
  add({.name = "crc-bad",
       .condition = "Send whose CRC field is inverted (CRC negotiated)",
       .rfc = "LLP/0/0x02",
       .control = {0x02, 0x02, 0x00, 0x00},
       .inject = [](Session& s, const Fault& f) -> std::optional<Injection> {
         if (!s.crc) {
           say(f.name, "MISMATCH: CRC was not negotiated (run with --crc)");
           return std::nullopt;
         }
         Injection in = send_with(s, send_header(s.send_msn));
         Bytes& fr = in.frames[0];
         for (std::size_t i = fr.size() - uwarp::wire::kMpaCrcSize; i < fr.size(); ++i)
           fr[i] ^= 0xff;
         return in;
       },
       .uwarp_control = {0x20, 0x02, 0xc0, 0x00}});
  // Terminates sent to the peer: RFC 5040 never answers a Terminate with one, so whatever is
  // wrong with it, the peer reports it and closes; unless it is not taken for a Terminate at all.
  auto terminate = [](bool send_queue, Bytes body) {
    return [send_queue, body](Session& s, const Fault&) {
      const DdpHeader h =
          send_queue ? RawPeer::untagged_header(RdmapOpcode::kTerminate, uwarp::wire::kQueueSend,
                                                s.send_msn)
                     : RawPeer::untagged_header(RdmapOpcode::kTerminate,
                                                uwarp::wire::kQueueTerminate, 1);
      return std::optional(one(s, cat(RawPeer::header_bytes(h), body)));
    };
  };
  add({.name = "terminate",
       .condition = "a Terminate RDMAP / remote protection / invalid STag, no header copied",
       .rfc = "the close, no Terminate",
       .answer = Answer::kCloseNoTerminate,
       .inject = terminate(false, {0x01, 0x00, 0x00, 0x00}),
       .uwarp_answer = Answer::kCloseNoTerminate});
  add({.name = "terminate-short",
       .condition = "a Terminate without its control word (an 18-byte ULPDU)",
       .rfc = "the close, no Terminate (or LLP/0/0x03: an FPDU too short for its opcode)",
       .control = {0x02, 0x03, 0x00, 0x00},  // siw: "short mpa_len 18 for opcode 7"
       .inject = terminate(false, {}),
       .uwarp_answer = Answer::kCloseNoTerminate});
  add({.name = "terminate-bad-layer",
       .condition = "a Terminate naming the undefined layer 3",
       .rfc = "the close, no Terminate",
       .answer = Answer::kCloseNoTerminate,
       .inject = terminate(false, {0x30, 0x00, 0x00, 0x00}),
       .uwarp_answer = Answer::kCloseNoTerminate});
  add({.name = "terminate-bad-qn",
       .condition = "a Terminate on queue 0 (the Send queue), with the Send queue's next MSN",
       .rfc = "the close, or RDMAP/2/0x06 (no Terminate: a Terminate belongs on queue 2)",
       .answer = Answer::kCloseNoTerminate,
       .inject = terminate(true, {0x01, 0x00, 0x00, 0x00}),
       .uwarp_control = {0x02, 0x06, 0xc0, 0x00}});

  // MPA requests siw refuses (siw passive; verbs_peer never sees these connections).
  auto request = [](auto edit) {
    return [edit](Session& s, const Fault&) {
      RawMpaOptions o = request_options(s.crc, false, 0);
      Bytes b = edit(o);
      Injection in;
      in.frames.push_back(b.empty() ? RawPeer::build_mpa(MpaFrameKind::kRequest, o) : b);
      return std::optional(in);
    };
  };
  add({.name = "mpa-bad-key",
       .condition = "MPA request with the key \"MPA ID Req Framf\"",
       .rfc = "LLP/0/0x04, or the close",
       .answer = Answer::kMpaClose,
       .inject = request([](RawMpaOptions& o) {
         Bytes b = RawPeer::build_mpa(MpaFrameKind::kRequest, o);
         b[uwarp::wire::kMpaKeySize - 1] = 'f';
         return b;
       }),
       .uwarp_answer = Answer::kMpaClose});
  add({.name = "mpa-markers",
       .condition = "MPA request asking for markers (M)",
       .rfc = "a reply without markers, or one with R",
       .answer = Answer::kMpaReject,
       .inject = request([](RawMpaOptions& o) {
         o.markers = true;
         return Bytes{};
       }),
       // the request's key and bits less M plus R, and siw's IRD/ORD words, still zero
       .mpa_reply = {'M', 'P', 'A', ' ', 'I',  'D',  ' ',  'R',  'e',  'p',  ' ',  'F',
                     'r', 'a', 'm', 'e', 0x30, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00},
       // uwarp takes the request and sends markers (RFC 5044 section 5)
       .uwarp_answer = Answer::kMpaAccept});
  add({.name = "mpa-revision-3",
       .condition = "MPA request with revision 3",
       .rfc = "LLP/0/0x04, or the close",
       .answer = Answer::kMpaClose,
       .inject = request([](RawMpaOptions& o) {
         o.revision = 3;
         return Bytes{};
       }),
       .uwarp_answer = Answer::kMpaClose});
  add({.name = "mpa-pd-257",
       .condition = "MPA request with 257 bytes of private data (RFC 5044 allows 512)",
       .rfc = "a reply (512 bytes are allowed)",
       .answer = Answer::kMpaClose,
       .inject = request([](RawMpaOptions& o) {
         o.private_data.assign(257 - uwarp::wire::kMpaEnhancedWordsSize, 0x70);
         return Bytes{};
       }),
       .uwarp_answer = Answer::kMpaAccept});

  // MPA replies siw refuses (siw active: verbs_peer client in the p2p flavour, which offers
  // WRITE and READ RTR). The reply otherwise accepts: IRD = ORD = 16, WRITE RTR.
  RawMpaOptions rep;
  rep.ird = 16;
  rep.ord = 16;
  rep.peer_to_peer = true;
  rep.write_rtr = true;
  RawMpaOptions big_ord = rep, no_rtr = rep, markers = rep;
  big_ord.ord = 200;
  no_rtr.write_rtr = false;
  markers.markers = true;
  add({.name = "reply-bad-key",
       .condition = "MPA reply with the key \"MPA ID Rep Framf\"",
       .rfc = "LLP/0/0x04",
       .listen = true,
       .control = {0x02, 0x04, 0x00, 0x00},
       .reply = rep,
       .reply_bad_key = true,
       .uwarp_control = {0x20, 0x04, 0x00, 0x00}});
  add({.name = "reply-ord-200",
       .condition = "MPA reply with ORD 200 (the initiator's IRD is at most 128)",
       .rfc = "LLP/0/0x06",
       .listen = true,
       .control = {0x02, 0x06, 0x00, 0x00},
       .reply = big_ord,
       .uwarp_control = {0x20, 0x06, 0x00, 0x00}});
  add({.name = "reply-no-rtr",
       .condition = "MPA reply that picks no RTR for a peer-to-peer request",
       .rfc = "LLP/0/0x07",
       .listen = true,
       .control = {0x02, 0x07, 0x00, 0x00},
       .reply = no_rtr,
       .uwarp_control = {0x20, 0x07, 0x00, 0x00}});
  // Not a fault for uwarp, which takes such a reply and sends markers: siw only.
  add({.name = "reply-markers",
       .condition = "MPA reply with markers (M)",
       .rfc = "the close (markers are negotiable; siw supports none)",
       .listen = true,
       .answer = Answer::kCloseNoTerminate,
       .reply = markers});
  return v;
}

// ---- running one fault ----

bool run_connect(const Fault& f, Target target, const std::string& host, std::uint16_t port,
                 bool crc, bool mpa1) {
  Session s;
  s.target = target;
  const Expected want = expected(f, target);
  const std::string who = target_name(target);
  const bool mpa_fault = std::strncmp(f.name, "mpa-", 4) == 0;
  if (mpa_fault) {
    s.crc = crc;
    s.peer = RawPeer::connect_to(host, port);
    if (!s.peer.valid()) return say(f.name, "MISMATCH: cannot connect"), false;
  } else if (!open_session(s, f, host, port, crc, mpa1)) {
    say(f.name, "MISMATCH: the connection was not set up");
    return false;
  }
  auto in = f.inject(s, f);
  if (!in) return false;
  Bytes all;
  for (const auto& fr : in->frames) {
    say(f.name, "sent " + hex(fr));
    all = cat(all, fr);
  }
  if (!s.peer.send_raw(all))
    return say(f.name, "MISMATCH: the connection failed while sending"), false;
  switch (want.answer) {
    case Answer::kTerminate:
      return check_terminate(s, f, *in);
    case Answer::kCloseNoTerminate:
      return check_close_no_terminate(s, f, 30000);
    case Answer::kCloseMaybeTerminate:
      return check_close_no_terminate(s, f, 30000, &*in);
    case Answer::kDataThenTerminate:
      return check_close_no_terminate(s, f, 30000, &*in, true);
    case Answer::kNothing: {
      ReadStatus st;
      auto r = s.peer.read_fpdu(1000, &st);
      if (r) say(f.name, "MISMATCH: got " + hex(r->bytes, 0, 64));
      if (!r && st != ReadStatus::kTimeout) say(f.name, "MISMATCH: the close");
      const bool ok = !r && st == ReadStatus::kTimeout;
      if (ok) say(f.name, "no answer within 1 s: " + who + " accepted the frame");
      return ok;  // we close
    }
    case Answer::kServed: {
      ReadStatus st;
      auto r = s.peer.read_fpdu(kAnswerTimeoutMs, &st);
      if (!r) return say(f.name, "MISMATCH: no answer"), false;
      say(f.name, "got " + hex(r->bytes, 0, 64) + (r->bytes.size() > 64 ? "..." : ""));
      const bool resp =
          r->header && r->header->tagged && r->header->last &&
          r->header->opcode == static_cast<std::uint8_t>(RdmapOpcode::kReadResponse) &&
          r->header->stag == 0x1234 && r->header->tagged_offset == 0 && r->payload.size() == 64;
      say(f.name, resp ? "a Read Response of 64 bytes to STag 0x1234, TO 0: " + who +
                             " served the Read"
                       : std::string("MISMATCH: not the Read Response"));
      auto more = s.peer.read_fpdu(1000, &st);
      if (more) say(f.name, "MISMATCH: then " + hex(more->bytes, 0, 64));
      if (!more && st != ReadStatus::kTimeout) say(f.name, "MISMATCH: then the close");
      return resp && !more && st == ReadStatus::kTimeout;  // we close
    }
    case Answer::kMpaClose: {
      std::size_t got = 0;
      const bool closed = s.peer.wait_closed(kAnswerTimeoutMs, &got);
      say(f.name, std::to_string(got) + " bytes back, " + (closed ? "closed" : "still open"));
      const bool ok = closed && got == 0;
      say(f.name, ok ? "no MPA reply, " + who + " closed the connection"
                     : std::string("MISMATCH: expected the close and nothing else"));
      return ok;
    }
    case Answer::kMpaAccept: {
      ReadStatus st;
      auto rep = s.peer.read_mpa(MpaFrameKind::kReply, kAnswerTimeoutMs, &st);
      if (!rep) return say(f.name, std::string("MISMATCH: no MPA reply: ") + to_string(st)), false;
      say(f.name, rep->reject ? "MISMATCH: an MPA reply with R (rejected)"
                              : "an MPA reply that accepts: " + who + " took the request");
      return !rep->reject;  // we close
    }
    case Answer::kMpaReject: {
      Bytes rep(want.mpa_reply.size());
      const auto st =
          s.peer.read_exact(rep.data(), rep.size(), RawPeer::deadline_after(kAnswerTimeoutMs));
      if (st != ReadStatus::kOk) return say(f.name, "MISMATCH: no MPA reply"), false;
      say(f.name, "got " + hex(rep));
      bool ok = rep == want.mpa_reply;
      if (!ok)
        say(f.name, "MISMATCH: expected " + hex(want.mpa_reply));
      else
        say(f.name, "MPA reply with R (rejected), IRD/ORD words 0");
      std::size_t more = 0;
      const bool closed = s.peer.wait_closed(kCloseTimeoutMs, &more);
      say(f.name, std::to_string(more) + " more bytes, " + (closed ? "closed" : "still open"));
      return ok && closed && more == 0;
    }
  }
  return false;
}

bool run_listen(const Fault& f, Target target, RawListener& l) {
  Session s;
  s.target = target;
  s.peer = l.accept(kAcceptTimeoutMs);
  if (!s.peer.valid())
    return say(f.name, std::string("MISMATCH: no connection from ") + target_name(target)), false;
  ReadStatus st;
  auto req = s.peer.read_mpa(MpaFrameKind::kRequest, kMpaTimeoutMs, &st);
  if (!req) return say(f.name, std::string("MISMATCH: no MPA request: ") + to_string(st)), false;
  Bytes b = RawPeer::build_mpa(MpaFrameKind::kReply, f.reply);
  if (f.reply_bad_key) b[15] = 'f';
  say(f.name, "sent " + hex(b));
  if (!s.peer.send_raw(b))
    return say(f.name, "MISMATCH: the connection failed while sending"), false;
  if (expected(f, target).answer == Answer::kCloseNoTerminate)
    return check_close_no_terminate(s, f, kAnswerTimeoutMs);
  return check_terminate(s, f, Injection{});
}

int usage() {
  std::fprintf(stderr,
               "usage: siw_inject connect --port P [--host H] [--crc] [--mpa1] [--peer siw|uwarp]\n"
               "                         --faults F1,F2,...\n"
               "       siw_inject listen --port P [--peer siw|uwarp] --faults F1,F2,...\n"
               "       siw_inject list\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  const auto faults = make_faults();
  if (mode == "list") {
    for (const auto& f : faults)
      std::printf("%-22s %-7s %s\n", f.name, f.listen ? "listen" : "connect", f.condition);
    return 0;
  }
  std::string host = "127.0.0.1", list;
  int port = 0;
  bool crc = false, mpa1 = false;
  Target target = Target::kSiw;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--crc")
      crc = true;
    else if (a == "--mpa1")
      mpa1 = true;
    else if (i + 1 < argc && a == "--port")
      port = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--host")
      host = argv[++i];
    else if (i + 1 < argc && a == "--faults")
      list = argv[++i];
    else if (i + 1 < argc && a == "--peer" && std::strcmp(argv[i + 1], "siw") == 0 && ++i)
      target = Target::kSiw;
    else if (i + 1 < argc && a == "--peer" && std::strcmp(argv[i + 1], "uwarp") == 0 && ++i)
      target = Target::kUwarp;
    else
      return usage();
  }
  if ((mode != "connect" && mode != "listen") || port <= 0 || port > 65535 || list.empty())
    return usage();
  std::vector<const Fault*> run;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    at = comma + 1;
    const Fault* found = nullptr;
    for (const auto& f : faults)
      if (name == f.name) found = &f;
    if (!found || found->listen != (mode == "listen")) {
      std::fprintf(stderr, "siw_inject: no %s fault '%s' (siw_inject list)\n", mode.c_str(),
                   name.c_str());
      return 2;
    }
    run.push_back(found);
  }
  std::optional<RawListener> listener;
  if (mode == "listen") {
    listener.emplace("127.0.0.1", static_cast<std::uint16_t>(port));
    if (!listener->valid()) {
      std::fprintf(stderr, "siw_inject: cannot listen on 127.0.0.1:%d\n", port);
      return 1;
    }
    std::printf("siw_inject: listening on 127.0.0.1:%d\n", port);
    std::fflush(stdout);
  }
  int bad = 0;
  for (const Fault* f : run) {
    say(f->name, std::string(f->condition));
    const bool ok =
        mode == "listen"
            ? run_listen(*f, target, *listener)
            : run_connect(*f, target, host, static_cast<std::uint16_t>(port), crc, mpa1);
    if (expected(*f, target).answer != Answer::kTerminate)
      say(f->name, std::string("RFC: ") + f->rfc);
    say(f->name, ok ? "ok" : "FAILED");
    if (!ok) ++bad;
  }
  std::printf("siw_inject: %zu fault(s), %d failed\n", run.size(), bad);
  return bad ? 1 : 0;
}
