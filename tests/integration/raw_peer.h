// Test support: a raw iWARP peer on a blocking socket: hand-built frames out, decoded replies in.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "wire/ddp.h"
#include "wire/fpdu.h"
#include "wire/mpa_frame.h"
#include "wire/rdmap.h"

namespace uwarp::testing {

// What the raw peer puts into its MPA request or reply.
struct RawMpaOptions {
  std::uint8_t revision = 2;
  bool enhanced = true;  // RFC 6581 IRD/ORD words at the start of the private data
  bool crc = false;
  bool markers = false;
  bool reject = false;
  std::uint16_t ird = 8;
  std::uint16_t ord = 8;
  // RFC 6581 peer-to-peer bits in the IRD/ORD words (enhanced only): A, and the RTR types C, D.
  bool peer_to_peer = false;
  bool write_rtr = false;
  bool read_rtr = false;
  std::vector<std::uint8_t> private_data;  // application private data (after the IRD/ORD words)
};

// An MPA frame as received, with its private data copied out.
struct RawMpaFrame {
  bool markers = false;
  bool crc = false;
  bool reject = false;
  bool enhanced = false;
  std::uint8_t revision = 0;
  std::vector<std::uint8_t> private_data;  // all of it, IRD/ORD words included
  std::optional<wire::MpaEnhancedWords> words;
  std::vector<std::uint8_t> app_data;  // private data after the IRD/ORD words (if enhanced)
};

// One FPDU as received.
struct RawFpdu {
  std::vector<std::uint8_t> bytes;  // the whole FPDU: length field, ULPDU, pad, CRC field
  std::vector<std::uint8_t> ulpdu;  // DDP header + payload
  bool crc_ok = true;               // checked only when CRC is on
  std::optional<wire::DdpHeader> header;
  std::vector<std::uint8_t> payload;  // the ULPDU after its DDP header
  bool is_terminate() const {
    return header && !header->tagged && header->queue == wire::kQueueTerminate &&
           header->opcode == static_cast<std::uint8_t>(wire::RdmapOpcode::kTerminate);
  }
};

// A Terminate message as received, with its header fields copied out.
struct RawTerminate {
  wire::DdpHeader header;  // the DDP header of the Terminate FPDU itself
  std::uint32_t raw_control = 0;
  std::uint8_t first_byte = 0;  // RFC 5040 layout: layer << 4 | etype
  wire::TerminateCode code;
  bool m_flag = false;
  bool d_flag = false;
  bool r_flag = false;
  std::uint16_t segment_length = 0;
  std::vector<std::uint8_t> ddp_header;    // the terminated segment's DDP header (D flag)
  std::vector<std::uint8_t> rdmap_header;  // the terminated Read Request (R flag)
  bool crc_ok = true;
};

enum class ReadStatus : std::uint8_t { kOk, kTimeout, kClosed, kError };

inline const char* to_string(ReadStatus s) {
  switch (s) {
    case ReadStatus::kOk:
      return "ok";
    case ReadStatus::kTimeout:
      return "timeout";
    case ReadStatus::kClosed:
      return "closed";
    case ReadStatus::kError:
      return "error";
  }
  return "?";
}

// A blocking TCP connection to (or from) uwarp, with a receive buffer and timed reads.
class RawPeer {
 public:
  static constexpr int kDefaultTimeoutMs = 10000;

  RawPeer() = default;
  explicit RawPeer(int fd) : fd_(fd) {}
  ~RawPeer() { close(); }
  RawPeer(RawPeer&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), crc_(o.crc_), rx_(std::move(o.rx_)), rx_pos_(o.rx_pos_) {}
  RawPeer& operator=(RawPeer&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
      crc_ = o.crc_;
      rx_ = std::move(o.rx_);
      rx_pos_ = o.rx_pos_;
    }
    return *this;
  }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // Connects to host:port (numeric IPv4 or IPv6). rcvbuf > 0 shrinks the socket receive buffer
  // before connecting (a small TCP window makes a peer's large transmissions block).
  static RawPeer connect_to(const std::string& host, std::uint16_t port, int rcvbuf = 0) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (!make_address(host, port, ss, len)) return RawPeer();
    const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return RawPeer();
    if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      ::close(fd);
      return RawPeer();
    }
    return RawPeer(fd);
  }

  static bool make_address(const std::string& host, std::uint16_t port, sockaddr_storage& ss,
                           socklen_t& len) {
    ss = {};
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port);
      len = sizeof(sockaddr_in);
      return true;
    }
    if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(port);
      len = sizeof(sockaddr_in6);
      return true;
    }
    return false;
  }

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Abortive close: SO_LINGER 0 makes close() send a TCP RST instead of a FIN.
  void reset() {
    if (fd_ < 0) return;
    const linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
  }
  // Half-close: no more bytes from us; uwarp sees EOF.
  void shutdown_write() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
  }

  // Bytes received and not yet taken as a whole FPDU (after a close: a cut-off FPDU).
  std::size_t buffered() const { return rx_.size() - rx_pos_; }

  // FPDUs carry (and are checked for) a CRC once CRC was negotiated.
  void set_crc(bool on) { crc_ = on; }
  bool crc() const { return crc_; }

  // Sends all of `bytes`; false if the connection failed.
  bool send_raw(const std::vector<std::uint8_t>& bytes) {
    return send_raw(bytes.data(), bytes.size());
  }
  bool send_raw(const std::uint8_t* p, std::size_t n) {
    std::size_t sent = 0;
    for (int guard = 0; sent < n && guard < 1000000; ++guard) {
      const ssize_t r = ::send(fd_, p + sent, n - sent, MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      sent += static_cast<std::size_t>(r);
    }
    return sent == n;
  }

  // ---- MPA ----

  static std::vector<std::uint8_t> build_mpa(wire::MpaFrameKind kind, const RawMpaOptions& o) {
    std::vector<std::uint8_t> pd;
    if (o.enhanced) {
      wire::MpaEnhancedWords w;
      w.ird = o.ird;
      w.ord = o.ord;
      w.peer_to_peer = o.peer_to_peer;
      w.write_rtr = o.write_rtr;
      w.read_rtr = o.read_rtr;
      pd.resize(wire::kMpaEnhancedWordsSize);
      wire::encode_mpa_enhanced_words(w, pd.data());
    }
    pd.insert(pd.end(), o.private_data.begin(), o.private_data.end());
    wire::MpaFrame f;
    f.kind = kind;
    f.markers = o.markers;
    f.crc = o.crc;
    f.reject = o.reject;
    f.enhanced = o.enhanced;
    f.revision = o.revision;
    f.private_data = pd;
    std::vector<std::uint8_t> out(wire::kMpaFrameHeaderSize + pd.size());
    out.resize(wire::encode_mpa_frame(f, out));
    return out;
  }
  bool send_mpa_request(const RawMpaOptions& o) {
    return send_raw(build_mpa(wire::MpaFrameKind::kRequest, o));
  }
  bool send_mpa_reply(const RawMpaOptions& o) {
    return send_raw(build_mpa(wire::MpaFrameKind::kReply, o));
  }

  // Reads one whole MPA frame of `kind`; nullopt on timeout, close or a frame that does not
  // decode (wrong key, PD_Length > 512).
  std::optional<RawMpaFrame> read_mpa(wire::MpaFrameKind kind, int timeout_ms = kDefaultTimeoutMs,
                                      ReadStatus* status = nullptr) {
    const auto deadline = deadline_after(timeout_ms);
    std::vector<std::uint8_t> frame(wire::kMpaFrameHeaderSize);
    ReadStatus s = read_exact(frame.data(), frame.size(), deadline);
    if (s == ReadStatus::kOk) {
      const std::size_t total = *wire::mpa_frame_needed_bytes(frame);
      if (total > wire::kMpaMaxFrameSize) {
        if (status != nullptr) *status = ReadStatus::kError;
        return std::nullopt;
      }
      frame.resize(total);
      s = read_exact(frame.data() + wire::kMpaFrameHeaderSize, total - wire::kMpaFrameHeaderSize,
                     deadline);
    }
    if (status != nullptr) *status = s;
    if (s != ReadStatus::kOk) return std::nullopt;
    auto d = wire::decode_mpa_frame(kind, frame);
    if (!d) {
      if (status != nullptr) *status = ReadStatus::kError;
      return std::nullopt;
    }
    RawMpaFrame out;
    out.markers = d->frame.markers;
    out.crc = d->frame.crc;
    out.reject = d->frame.reject;
    out.enhanced = d->frame.enhanced;
    out.revision = d->frame.revision;
    out.private_data.assign(d->frame.private_data.begin(), d->frame.private_data.end());
    if (out.enhanced) {
      out.words = wire::decode_mpa_enhanced_words(out.private_data);
      if (out.words)
        out.app_data.assign(out.private_data.begin() + wire::kMpaEnhancedWordsSize,
                            out.private_data.end());
    } else {
      out.app_data = out.private_data;
    }
    return out;
  }

  // ---- FPDUs ----

  // One FPDU carrying `header` and `payload`.
  static std::vector<std::uint8_t> build_fpdu(const wire::DdpHeader& header,
                                              const std::vector<std::uint8_t>& payload, bool crc) {
    std::vector<std::uint8_t> ulpdu(header.size() + payload.size());
    wire::encode_ddp_header(header, ulpdu);
    if (!payload.empty()) std::memcpy(ulpdu.data() + header.size(), payload.data(), payload.size());
    return build_fpdu_from_ulpdu(ulpdu, crc);
  }
  // One FPDU carrying arbitrary ULPDU bytes.
  static std::vector<std::uint8_t> build_fpdu_from_ulpdu(const std::vector<std::uint8_t>& ulpdu,
                                                         bool crc) {
    std::vector<std::uint8_t> out(wire::fpdu_size(ulpdu.size()));
    out.resize(wire::encode_fpdu(ulpdu, crc, out));
    return out;
  }
  bool send_fpdu(const wire::DdpHeader& header, const std::vector<std::uint8_t>& payload) {
    return send_raw(build_fpdu(header, payload, crc_));
  }

  // Headers of the usual kinds.
  static wire::DdpHeader untagged_header(wire::RdmapOpcode op, std::uint32_t queue,
                                         std::uint32_t msn, std::uint32_t mo = 0,
                                         bool last = true) {
    wire::DdpHeader h;
    h.tagged = false;
    h.last = last;
    h.opcode = static_cast<std::uint8_t>(op);
    h.queue = queue;
    h.msn = msn;
    h.message_offset = mo;
    return h;
  }
  static wire::DdpHeader tagged_header(wire::RdmapOpcode op, std::uint32_t stag, std::uint64_t to,
                                       bool last = true) {
    wire::DdpHeader h;
    h.tagged = true;
    h.last = last;
    h.opcode = static_cast<std::uint8_t>(op);
    h.stag = stag;
    h.tagged_offset = to;
    return h;
  }
  static std::vector<std::uint8_t> read_request_body(const wire::ReadRequest& rr) {
    std::vector<std::uint8_t> b(wire::kReadRequestSize);
    wire::encode_read_request(rr, b);
    return b;
  }
  // The bytes a header encodes to (to compare with a Terminate's copy).
  static std::vector<std::uint8_t> header_bytes(const wire::DdpHeader& h) {
    std::vector<std::uint8_t> b(h.size());
    wire::encode_ddp_header(h, b);
    return b;
  }

  // Reads one FPDU; nullopt on timeout or close (see `status`).
  std::optional<RawFpdu> read_fpdu(int timeout_ms = kDefaultTimeoutMs,
                                   ReadStatus* status = nullptr) {
    return read_fpdu_until(deadline_after(timeout_ms), status);
  }

  std::optional<RawFpdu> read_fpdu_until(std::chrono::steady_clock::time_point deadline,
                                         ReadStatus* status) {
    std::uint8_t len_field[wire::kMpaLengthFieldSize];
    ReadStatus s = read_exact(len_field, sizeof len_field, deadline);
    std::vector<std::uint8_t> fpdu;
    if (s == ReadStatus::kOk) {
      const std::size_t ulpdu_length = load_be16(len_field);
      fpdu.resize(wire::fpdu_size(ulpdu_length));
      std::memcpy(fpdu.data(), len_field, sizeof len_field);
      s = read_exact(fpdu.data() + sizeof len_field, fpdu.size() - sizeof len_field, deadline);
    }
    if (status != nullptr) *status = s;
    if (s != ReadStatus::kOk) return std::nullopt;
    RawFpdu out;
    auto d = wire::decode_fpdu(fpdu, crc_);
    if (!d) {
      out.crc_ok = false;
      d = wire::decode_fpdu(fpdu, false);
    }
    out.ulpdu.assign(d->ulpdu.begin(), d->ulpdu.end());
    out.bytes = std::move(fpdu);
    auto h = wire::decode_ddp_header(out.ulpdu);
    if (h) {
      out.header = *h;
      out.payload.assign(out.ulpdu.begin() + static_cast<std::ptrdiff_t>(h->size()),
                         out.ulpdu.end());
    }
    return out;
  }

  static std::optional<RawTerminate> as_terminate(const RawFpdu& f) {
    if (!f.is_terminate()) return std::nullopt;
    auto t = wire::decode_terminate(f.payload);
    if (!t) return std::nullopt;
    RawTerminate out;
    out.header = *f.header;
    out.raw_control = t->raw_control;
    out.first_byte = static_cast<std::uint8_t>(t->raw_control >> 24);
    out.code = t->code;
    out.m_flag = (t->raw_control & wire::kTermFlagM) != 0;
    out.d_flag = (t->raw_control & wire::kTermFlagD) != 0;
    out.r_flag = (t->raw_control & wire::kTermFlagR) != 0;
    out.segment_length = t->segment_length;
    out.ddp_header.assign(t->ddp_header.begin(), t->ddp_header.end());
    out.rdmap_header.assign(t->rdmap_header.begin(), t->rdmap_header.end());
    out.crc_ok = f.crc_ok;
    return out;
  }

  // What arrived until the connection closed (or the time ran out).
  struct Drain {
    std::vector<RawTerminate> terminates;  // every Terminate, in order
    std::size_t fpdus = 0;                 // FPDUs of any kind
    std::size_t payload_bytes = 0;
    bool closed = false;  // EOF or reset seen
    ReadStatus last = ReadStatus::kOk;
  };
  // Reads FPDUs until the peer closes, at most `max_fpdus` of them and until `timeout_ms` ends;
  // `visit` (if set) sees each FPDU as it arrives.
  Drain drain_until_closed(int timeout_ms = kDefaultTimeoutMs, std::size_t max_fpdus = 1u << 20,
                           const std::function<void(const RawFpdu&)>& visit = {}) {
    Drain d;
    const auto deadline = deadline_after(timeout_ms);
    for (std::size_t i = 0; i < max_fpdus; ++i) {
      ReadStatus s;
      auto f = read_fpdu_until(deadline, &s);
      d.last = s;
      if (!f) {
        d.closed = s == ReadStatus::kClosed || s == ReadStatus::kError;
        return d;
      }
      ++d.fpdus;
      d.payload_bytes += f->payload.size();
      if (visit) visit(*f);
      if (auto t = as_terminate(*f)) d.terminates.push_back(std::move(*t));
    }
    return d;
  }

  // Waits for the peer to close (EOF or reset) within the time bound, discarding what arrives.
  bool wait_closed(int timeout_ms = kDefaultTimeoutMs, std::size_t* discarded = nullptr) {
    const auto deadline = deadline_after(timeout_ms);
    std::size_t dropped = rx_.size() - rx_pos_;
    rx_.clear();
    rx_pos_ = 0;
    std::vector<std::uint8_t> scratch(64 * 1024);
    for (int guard = 0; guard < 1000000; ++guard) {
      const ReadStatus s = fill(scratch, deadline);
      if (s == ReadStatus::kClosed || s == ReadStatus::kError) {
        if (discarded != nullptr) *discarded = dropped;
        return true;
      }
      if (s == ReadStatus::kTimeout) break;
      dropped += rx_.size();
      rx_.clear();
    }
    if (discarded != nullptr) *discarded = dropped;
    return false;
  }

  static std::chrono::steady_clock::time_point deadline_after(int timeout_ms) {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }

  // Reads exactly n bytes (from the buffer first) before the deadline.
  ReadStatus read_exact(std::uint8_t* p, std::size_t n,
                        std::chrono::steady_clock::time_point deadline) {
    std::size_t got = 0;
    std::vector<std::uint8_t> scratch;
    while (got < n) {
      if (rx_pos_ < rx_.size()) {
        const std::size_t take = std::min(n - got, rx_.size() - rx_pos_);
        std::memcpy(p + got, rx_.data() + rx_pos_, take);
        rx_pos_ += take;
        got += take;
        if (rx_pos_ == rx_.size()) {
          rx_.clear();
          rx_pos_ = 0;
        }
        continue;
      }
      if (scratch.empty()) scratch.resize(256 * 1024);
      const ReadStatus s = fill(scratch, deadline);
      if (s != ReadStatus::kOk) return s;
    }
    return ReadStatus::kOk;
  }

 private:
  // Appends what one recv() returns to rx_, waiting until the deadline for it.
  ReadStatus fill(std::vector<std::uint8_t>& scratch,
                  std::chrono::steady_clock::time_point deadline) {
    if (fd_ < 0) return ReadStatus::kError;
    for (int guard = 0; guard < 100000; ++guard) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return ReadStatus::kTimeout;
      pollfd pfd{fd_, POLLIN, 0};
      const int rc = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) return ReadStatus::kError;
      if (rc == 0) continue;
      const ssize_t r = ::recv(fd_, scratch.data(), scratch.size(), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return ReadStatus::kClosed;
      if (r < 0) return errno == ECONNRESET ? ReadStatus::kClosed : ReadStatus::kError;
      rx_.insert(rx_.end(), scratch.begin(), scratch.begin() + r);
      return ReadStatus::kOk;
    }
    return ReadStatus::kTimeout;
  }

  int fd_ = -1;
  bool crc_ = false;
  std::vector<std::uint8_t> rx_;  // received, not yet consumed: rx_[rx_pos_, end)
  std::size_t rx_pos_ = 0;
};

// A blocking listening socket on the loopback, for tests where uwarp is the client. Port 0
// picks a free port (see port()).
class RawListener {
 public:
  explicit RawListener(const std::string& host = "127.0.0.1", std::uint16_t port = 0) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (!RawPeer::make_address(host, port, ss, len)) return;
    fd_ = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd_, 16) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof bound;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &blen);
    port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  ~RawListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;

  bool valid() const { return fd_ >= 0; }
  std::uint16_t port() const { return port_; }

  // Accepts one connection within the time bound (an invalid RawPeer otherwise).
  RawPeer accept(int timeout_ms = RawPeer::kDefaultTimeoutMs) {
    pollfd pfd{fd_, POLLIN, 0};
    const auto deadline = RawPeer::deadline_after(timeout_ms);
    for (int guard = 0; guard < 100000; ++guard) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return RawPeer();
      const int rc = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) return RawPeer();
      const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0 && errno == EINTR) continue;
      if (fd < 0) return RawPeer();
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return RawPeer(fd);
    }
    return RawPeer();
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace uwarp::testing
