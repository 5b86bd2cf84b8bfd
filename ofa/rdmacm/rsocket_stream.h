// One stream rsocket: an rdma_cm id with its own event channel, and once connected an RC QP, a
// CQ with its completion channel, and the registered buffers of the rsocket protocol
// (rsocket_protocol.h). The r* calls of rsocket.cc drive it; nothing else moves its data, as in
// rdma-core: the peer's RDMA Writes land without the application (riostream spins on its mapped
// buffer), but messages, credits and completions are handled in the application's calls.
//
// Threads: any application thread; the accept service (rsocket_accept.cc) sets up accepted
// sockets before the application sees them. `mu` guards the state. One thread at a time waits on
// the CQ's completion channel (`cq_waiter`); others wait on `cv`. A thread that handles
// completions while another waits on the channel wakes it through `kick_fd`.
//
// Descriptors: the rsocket's number is its rdma_cm event channel's fd (as in rdma-core), so it
// is a real, unique descriptor. Every fd the socket owns is non-blocking; blocking calls are
// waits with poll().
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/mutex.h"
#include "rdmacm/api.h"
#include "rdmacm/rsocket_protocol.h"

namespace uwarp::rdmacm::rs {

enum class State : std::uint8_t {
  kFresh,         // created (maybe bound)
  kListening,     // rlisten: the accept service answers its connection requests
  kConnecting,    // rconnect under way (address, route, connection)
  kAccepting,     // an accepted socket before ESTABLISHED (the accept service holds it)
  kConnected,     // connected; `readable`/`writable` say which halves are still open
  kConnectError,  // the connection attempt failed (`err`)
  kClosed,        // rclose
};

// What rsetsockopt sets before the connection exists; an accepted socket inherits its
// listener's.
struct Options {
  std::uint32_t rbuf_size = 128u << 10;  // rdma-core's default rmem
  std::uint32_t sbuf_size = 128u << 10;  // and wmem
  std::uint16_t sq_size = 384;
  std::uint16_t rq_size = 384;
  std::uint32_t inline_size = 64;
  int iomap_size = 0;
  // Option bits reported back by rgetsockopt (1 << optname), per level.
  std::uint64_t so_opts = 0;
  std::uint64_t tcp_opts = 0;
  std::uint64_t ipv6_opts = 0;
  int keepalive_idle = 7200;
};

// A registered, page-aligned, zeroed buffer.
struct Region {
  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() { reset(); }
  // Deregisters and frees.
  void reset();
  // Allocates `len` bytes and registers them with `access`; false with errno on failure.
  bool allocate(ibv_pd* pd, std::size_t len, int access);
  std::uint8_t* data = nullptr;
  std::size_t len = 0;
  ibv_mr* mr = nullptr;
};

// riomap'ed memory of this side, offered to the peer through its iomap table.
struct LocalIomap {
  ibv_mr* mr = nullptr;
  std::uint64_t offset = 0;
  int index = -1;     // in the peer's iomap table; -1: not offered (no PROT_WRITE)
  bool sent = false;  // its entry was written to the peer
};

struct Rsocket {
  Rsocket() = default;
  Rsocket(const Rsocket&) = delete;
  Rsocket& operator=(const Rsocket&) = delete;
  ~Rsocket();  // frees what is left (rclose frees in order first)

  // Fixed once the socket is in the table.
  int fd = -1;
  rdma_event_channel* cm_channel = nullptr;
  rdma_cm_id* id = nullptr;
  int kick_fd = -1;  // eventfd

  Mutex mu;
  std::condition_variable_any cv;  // completions handled, accept queue, state changes
  State state GUARDED_BY(mu) = State::kFresh;
  bool nonblocking GUARDED_BY(mu) = false;   // the application's O_NONBLOCK
  bool readable GUARDED_BY(mu) = false;      // data may still arrive (not shut down, not ended)
  bool writable GUARDED_BY(mu) = false;      // data may still be sent
  bool disconnected GUARDED_BY(mu) = false;  // the connection ended (either side, or failed)
  bool peer_spoke GUARDED_BY(mu) = false;
  bool disconnect_called GUARDED_BY(mu) =
      false;                             // may send: initiator, or the peer's first message came
  int err GUARDED_BY(mu) = 0;            // SO_ERROR: the failure that ended it
  int connect_phase GUARDED_BY(mu) = 0;  // kConnecting: resolving the address, the route,
                                         // or connecting (0, 1, 2)
  Options opt GUARDED_BY(mu);

  // Listening: connected sockets the accept service hands over, and an eventfd readable while
  // there are any.
  std::deque<std::shared_ptr<Rsocket>> accepted GUARDED_BY(mu);
  int accept_fd = -1;
  bool accept_signalled GUARDED_BY(mu) = false;
  // Accepting: the listener to hand this socket to once ESTABLISHED.
  std::weak_ptr<Rsocket> listener;

  // Connected endpoint (set up by setup_endpoint, kept until rclose).
  ibv_comp_channel* cq_channel = nullptr;
  ibv_cq* cq = nullptr;
  bool cq_armed GUARDED_BY(mu) = false;
  bool cq_waiter GUARDED_BY(mu) = false;  // a thread waits on cq_channel
  unsigned unacked_events GUARDED_BY(mu) = 0;
  Region rbuf;    // receive ring, then one 4-byte message slot per receive
  Region target;  // target_sgl entries the peer writes, then its iomap entries
  Region sbuf;    // send staging ring, then the control area
  std::optional<ReceiveRing> ring GUARDED_BY(mu);
  std::uint16_t sq_size = 0;
  std::uint16_t rq_size = 0;
  std::uint32_t sq_inline = 0;
  std::uint32_t rbuf_size = 0;  // the ring part of rbuf
  std::uint32_t sbuf_size = 0;  // the ring part of sbuf
  int target_iomap_entries = 0;

  // Sending.
  std::uint32_t sqe_avail GUARDED_BY(mu) = 0;      // send queue entries for data and iomaps
  std::uint32_t ctrl_inflight GUARDED_BY(mu) = 0;  // control WRs posted, not completed
  std::uint32_t ctrl_slot GUARDED_BY(mu) = 0;      // next control area slot
  std::uint32_t sbuf_free GUARDED_BY(mu) = 0;
  std::uint32_t sbuf_head GUARDED_BY(mu) = 0;
  std::uint16_t sseq_no GUARDED_BY(mu) = 0;     // data messages sent
  std::uint16_t sseq_comp GUARDED_BY(mu) = 0;   // the peer's credit limit
  std::uint32_t target_sge GUARDED_BY(mu) = 0;  // the target_sgl entry in use
  WireSge remote_sgl GUARDED_BY(mu);            // the peer's target_sgl (length: its entry count)
  WireSge remote_iomap GUARDED_BY(mu);          // the peer's iomap table (length: its entry count)
  std::vector<LocalIomap> iomaps GUARDED_BY(mu);

  // --- connection ---
  // Creates the socket's own event channel (non-blocking; its fd is the socket's number) and
  // kick_fd. false with errno on failure (release() frees what exists).
  bool open_channel();
  // Creates the QP, the buffers, posts the receives and fills `conn` (this side's
  // connection data). 0 or -1 with errno.
  int setup_endpoint(ConnData* conn) REQUIRES(mu);
  // Takes the peer's connection data; false (errno EPROTO) if unusable.
  bool accept_conn_data(std::span<const std::uint8_t> private_data) REQUIRES(mu);
  // Connected: both halves open. An acceptor (initiator = false) sends nothing, not even
  // credits, until the peer's first message has arrived: RFC 5044 lets only the initiator send
  // first (Linux siw as initiator fails a connection whose reply is followed by an FPDU it did
  // not ask for); every rsocket initiator sends credits at once.
  void set_connected(bool initiator) REQUIRES(mu);
  // Drives rconnect's steps with the events on cm_channel: waits for them unless
  // `nonblocking` (then EINPROGRESS while under way). 0 once connected, -1 with errno.
  int drive_connect(bool nonblocking) REQUIRES(mu);

  // --- data ---
  // Sends up to `total` bytes of `iov`; returns the bytes sent or -1 with errno (EAGAIN when
  // non-blocking and nothing could be sent).
  ssize_t send(const iovec* iov, int iovcnt, bool nonblocking) REQUIRES(mu);
  // Receives into `iov`; 0 at the end of the stream.
  ssize_t recv(const iovec* iov, int iovcnt, int flags, bool nonblocking) REQUIRES(mu);
  // riowrite: RDMA Writes into the peer's riomap'ed memory at `offset`.
  ssize_t iowrite(const std::uint8_t* buf, std::size_t count, std::uint64_t offset,
                  bool nonblocking) REQUIRES(mu);
  // rshutdown: sends the control message for `how` and waits (bounded) for the sends to finish.
  int shutdown(int how) REQUIRES(mu);
  // Frees the endpoint and the id. `graceful` (rclose): a connection is first disconnected and
  // given up to a few seconds to close, so that what was sent reaches the peer.
  void release(bool graceful) REQUIRES(mu);

  // --- readiness (rpoll) ---
  bool can_send() const REQUIRES(mu);
  bool have_data() const REQUIRES(mu);
  // Handles what the CQ holds; the number of completions.
  int process_cq() REQUIRES(mu);
  // poll() events for rpoll: which fd to wait on and what the socket reports now.
  short revents(short events) REQUIRES(mu);
  int wait_fd() const REQUIRES(mu);
  // After poll() saw wait_fd() readable: takes the channel's event and re-arms.
  void after_wait() REQUIRES(mu);
  // Arms the CQ so that wait_fd() becomes readable on the next completion; true if completions
  // arrived meanwhile (then do not wait).
  bool arm() REQUIRES(mu);

 private:
  template <typename Pred>
  int wait_for(Pred pred, bool nonblocking,
               std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt)
      REQUIRES(mu);
  bool post_send(ibv_send_wr* wr) REQUIRES(mu);
  bool post_recv(std::uint32_t slot);
  // One inline WR (a message Send, an SGL or iomap entry Write): copied at the post.
  bool post_inline(ibv_wr_opcode opcode, const void* bytes, std::size_t len, std::uint64_t wr_id,
                   std::uint64_t addr = 0, std::uint32_t rkey = 0) REQUIRES(mu);
  bool send_message(std::uint32_t msg, std::uint64_t wr_id) REQUIRES(mu);
  void give_credits() REQUIRES(mu);
  int send_iomaps(bool nonblocking) REQUIRES(mu);
  void fail_connection(int error) REQUIRES(mu);
  void disconnect() REQUIRES(mu);  // rdma_disconnect, once
  void await_close() REQUIRES(mu);
  void on_message(std::uint32_t msg) REQUIRES(mu);
  WireSge target_entry(std::uint32_t index) const;
  void consume_target(std::uint32_t index, std::uint32_t length);
  bool all_sends_done() const REQUIRES(mu);
};

}  // namespace uwarp::rdmacm::rs
