// uwarp's connection manager: listen, connect, accept, reject and disconnect iWARP
// connections (MPA revision 1 or 2, RFC 6581 IRD/ORD and peer-to-peer RTR, CRC), with private
// data both ways, over IPv4 or IPv6. Events arrive on an EventChannel whose fd is pollable.
//
//   auto ch = uwarp::EventChannel::create(ctx).value();
//   auto listener = ch.listen("0.0.0.0", 7174).value();
//   auto ev = ch.get_event(5000);              // kConnectRequest
//   ev->connection.accept(qp, {});            // kEstablished follows
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "uwarp/status.h"
#include "uwarp/verbs.h"

namespace uwarp {

namespace detail {
struct EventChannelImpl;
struct Access;
}
namespace cm {
class Connection;
class Listener;
}  // namespace cm

// Peer-to-peer mode (RFC 6581): the RTR messages the active side offers; the passive side picks
// one (uwarp and siw prefer WRITE).
enum class RtrOffer : std::uint8_t { kWriteOrRead, kWrite, kRead };

// The largest FPDU: a ULPDU of 65535 bytes (MPA's 16-bit length), its length field, pad and CRC.
inline constexpr std::uint32_t kMaxFpduSize = 65544;

struct ConnectionParams {
  std::vector<std::uint8_t> private_data;  // at most 508 bytes (252 towards Linux siw)
  bool crc = false;                        // ask for MPA CRC32c (used if either side asks)
  bool markers = false;                    // ask the peer to send MPA markers (RFC 5044 section 5)
  bool peer_to_peer = false;               // RFC 6581 peer-to-peer mode (RTR before data)
  RtrOffer rtr_offer = RtrOffer::kWriteOrRead;  // active side, peer-to-peer: the RTRs offered
  std::uint8_t mpa_revision = 2;           // 1 or 2
  std::uint16_t ird = 16;                  // inbound RDMA Reads served at once (<= 128)
  std::uint16_t ord = 16;                  // outbound RDMA Reads in flight (<= 128)
  // Active side: for the MPA reply. Passive side, peer-to-peer: for the peer's RTR after
  // accept; then kConnectError (kTimedOut), the QP goes to ERROR and the connection closes.
  int timeout_ms = 10000;
  // Active side: the connection's TCP source address and port (empty and 0: the kernel's choice
  // for the destination, and an ephemeral port), as rdma_bind_addr fixes them for rdma_cm.
  std::string local_host;
  std::uint16_t local_port = 0;
  // This side's FPDUs: 0 (the default) keeps each within one TCP segment, as RFC 5044 has a
  // sender do; N (at most kMaxFpduSize) lets them grow to N bytes where the MSS is smaller,
  // across segments. Fewer, larger FPDUs cost both ends less per byte (between namespaces at
  // MTU 1500, perftest's Writes and Reads moved 1.4-1.5 times as much: docs/performance.md).
  // uwarp's and Linux siw's receivers reassemble such FPDUs; a hardware RNIC may not: set it
  // only towards software peers. Not negotiated: each side chooses for what it sends.
  std::uint32_t fpdu_size = 0;
};

class Connection {
 public:
  Connection() = default;
  bool valid() const { return impl_ != nullptr; }
  // Passive side, after kConnectRequest.
  Status accept(QueuePair& qp, const ConnectionParams& params);
  Status reject(std::span<const std::uint8_t> private_data = {});
  // Graceful close; kDisconnected follows on both sides.
  void disconnect();
  std::string peer_address() const;
  std::string local_address() const;
  // What the peer asked for (passive side) or answered (active side).
  bool crc() const;
  // MPA markers in what this side sends (the peer asked) and in what it receives (it asked).
  bool sends_markers() const;
  bool receives_markers() const;
  std::uint8_t mpa_revision() const;
  std::uint16_t peer_ird() const;
  std::uint16_t peer_ord() const;
  bool same(const Connection& other) const { return impl_ == other.impl_; }

 private:
  friend struct detail::Access;
  friend class EventChannel;
  explicit Connection(std::shared_ptr<cm::Connection> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<cm::Connection> impl_;
};

// How a listener accepts. A pending connection is one accepted whose MPA request has not yet
// arrived, or whose kConnectRequest the application has not yet accepted or rejected.
struct ListenParams {
  int backlog = 128;              // the kernel's queue of connections not yet accepted
  // At most this many pending connections; each further one is closed as soon as it is
  // accepted (and counted in ListenerStats::dropped). 0: UWARP_MAX_PENDING, else 1024.
  std::uint32_t max_pending = 0;
  // A connection whose MPA request is not complete this long after it was accepted is closed
  // (ListenerStats::timed_out). 0: UWARP_MPA_REQUEST_TIMEOUT_MS, else 5000 (as Linux siw).
  int request_timeout_ms = 0;
};

// What a listener has done so far (counts since listen), readable from any thread. Of the
// connections accepted, accepted - dropped - timed_out - requests were closed before their MPA
// request was complete (by the peer, or as malformed) or still wait for it.
struct ListenerStats {
  std::uint64_t accepted = 0;       // connections taken from the kernel's queue (dropped ones too)
  std::uint64_t requests = 0;       // complete MPA requests (each reported as kConnectRequest)
  std::uint64_t pending = 0;        // pending connections now
  std::uint64_t dropped = 0;        // closed at once: max_pending were pending
  std::uint64_t timed_out = 0;      // closed: no complete MPA request in request_timeout_ms
  std::uint64_t accept_errors = 0;  // accepts that failed (out of descriptors: retried after a pause)
};

class Listener {
 public:
  Listener() = default;
  bool valid() const { return impl_ != nullptr; }
  std::uint16_t port() const;
  ListenerStats stats() const;
  void close();
  bool same(const Listener& other) const { return impl_ == other.impl_; }

 private:
  friend struct detail::Access;
  friend class EventChannel;
  explicit Listener(std::shared_ptr<cm::Listener> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<cm::Listener> impl_;
};

struct CmEvent {
  CmEventType type = CmEventType::kConnectError;
  Connection connection;
  Listener listener;  // kConnectRequest: the listener the request arrived on
  std::vector<std::uint8_t> private_data;
  Status status;
};

class EventChannel {
 public:
  static Result<EventChannel> create(const Context& context);
  int fd() const;  // readable while events are undelivered
  std::optional<CmEvent> get_event(int timeout_ms);
  // Listens on host:port (port 0: any; "0.0.0.0" or "::" for all addresses). Its
  // kConnectRequest events come in the order the TCP connections were accepted (a connection
  // that has sent no request holds back the ones behind it for at most 50 ms).
  Result<Listener> listen(const std::string& host, std::uint16_t port, int backlog = 128);
  Result<Listener> listen(const std::string& host, std::uint16_t port, const ListenParams& params);
  // Connects `qp` to host:port; kEstablished, kRejected or kConnectError follows.
  Result<Connection> connect(const std::string& host, std::uint16_t port, QueuePair& qp,
                             const ConnectionParams& params = {});

 private:
  friend struct detail::Access;
  explicit EventChannel(std::shared_ptr<detail::EventChannelImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::EventChannelImpl> impl_;
};

}  // namespace uwarp
