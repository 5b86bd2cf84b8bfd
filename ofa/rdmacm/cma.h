// The internal objects of uwarp's librdmacm.so.1: event channels, ids, events, and the process
// state that maps uwarp's connection-manager events (uwarp::EventChannel) onto rdma_cm ids.
//
// Shape. rdma_cm hands out `struct rdma_event_channel` and `struct rdma_cm_id`; each is the
// first member of a small standard-layout wrapper (Channel, Id) whose second member points to the
// C++ state (ChannelState, IdState). One process-wide device context (`Cma::verbs`, opened from
// uwarp's libibverbs.so.1 on first use, never closed) backs every id, with one default PD, as
// rdma-core's librdmacm does. All connections and listeners of the process live on one
// uwarp::EventChannel of that context; a dispatcher thread takes its events and routes each to
// the id it concerns, on that id's current channel (so rdma_migrate_id and the synchronous ids
// of rdma_create_ep work without any help from the core).
//
// Event channel fd: a counting eventfd that is readable exactly while undelivered events exist
// (written when the queue becomes non-empty, drained when it becomes empty, both under the
// queue's lock). rdma_get_cm_event waits with poll(), so the application's O_NONBLOCK on the fd
// is honoured (EAGAIN) and the wait is a cancellation point.
//
// Locks, in this order: Cma::mu (ids registry, routing, channel membership) -> ChannelState::mu
// (queue) -> IdState::mu (event accounting). The uwarp core never calls back into this library,
// so core calls may be made while holding Cma::mu (the engine thread never waits for it).
//
// Lifetime: an Event points to the id it is accounted to (`owner`: the listening id for
// CONNECT_REQUEST, as rdma-core). rdma_destroy_id and rdma_migrate_id remove the id's undelivered
// events and wait until the delivered ones are acknowledged, so an owner always outlives its
// events.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "base/mutex.h"
#include "rdmacm/api.h"
#include "rdmacm/mpa_choice.h"

namespace uwarp::rdmacm {

struct ChannelState;
struct IdState;

// Private data an event carries (rdma-core's RDMA_MAX_PRIVATE_DATA); rdma_conn_param reports
// at most 255 bytes (its length is a uint8_t).
inline constexpr std::size_t kEventPrivateData = 256;

struct Channel {
  rdma_event_channel ch;  // first member: what the application sees
  ChannelState* s;
  static Channel* from(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }
};

struct Id {
  rdma_cm_id id;  // first member: what the application sees
  IdState* s;
  static Id* from(rdma_cm_id* i) { return reinterpret_cast<Id*>(i); }
};

struct Event {
  rdma_cm_event ev;  // first member: what the application sees
  IdState* owner;    // whose event count it belongs to
  IdState* child;    // CONNECT_REQUEST: the new id (ev.id), to clean up if never delivered
  std::uint8_t private_data[kEventPrivateData];
  static Event* from(rdma_cm_event* e) { return reinterpret_cast<Event*>(e); }
};

struct ChannelState {
  ChannelState();
  ~ChannelState();
  int fd() const { return efd; }
  void push(Event* e);
  // The next event, waiting unless the application made fd() non-blocking (then nullptr with
  // errno EAGAIN). nullptr with errno EINTR when a signal interrupted the wait.
  Event* take();
  // Removes (and returns) the undelivered events for which pred holds.
  template <typename Pred>
  std::vector<Event*> remove_if(Pred pred);

  int efd = -1;
  Mutex mu;
  std::deque<Event*> q GUARDED_BY(mu);  // efd is readable exactly while q is non-empty
  bool owned_by_id = false;             // a synchronous id's private channel

 private:
  void drain_locked() REQUIRES(mu);
};

template <typename Pred>
std::vector<Event*> ChannelState::remove_if(Pred pred) {
  std::vector<Event*> out;
  MutexLock lock(mu);
  for (auto it = q.begin(); it != q.end();) {
    if (pred(*it)) {
      out.push_back(*it);
      it = q.erase(it);
    } else {
      ++it;
    }
  }
  if (!out.empty() && q.empty()) drain_locked();
  return out;
}

enum class IdPhase : std::uint8_t {
  kIdle,           // created, or after a failed or rejected connection
  kBound,          // rdma_bind_addr
  kListening,      // rdma_listen
  kAddrResolved,   // rdma_resolve_addr
  kRouteResolved,  // rdma_resolve_route
  kConnecting,     // rdma_connect sent, or rdma_accept waiting for ESTABLISHED
  kRequest,        // a new id from CONNECT_REQUEST, not yet accepted or rejected
  kConnected,      // ESTABLISHED
  kDisconnected,   // DISCONNECTED
};

// The process state's lock (Cma, and the routing and phase fields of every IdState). A plain
// global: it outlives every thread that may take it (its destructor does nothing).
extern Mutex cma_mu;

struct IdState {
  Id* self = nullptr;
  bool sync = false;  // created with a NULL channel: the channel is private, calls block
  // Guarded by cma_mu.
  IdPhase phase GUARDED_BY(cma_mu) = IdPhase::kIdle;
  Listener listener;
  Connection conn;
  bool registered GUARDED_BY(cma_mu) = false;           // in Cma::ids (events are routed to it)
  bool disconnected_queued GUARDED_BY(cma_mu) = false;  // a DISCONNECTED event was queued
  bool channel_gone GUARDED_BY(cma_mu) = false;  // its channel was destroyed: events are dropped
  // rdma_cm keeps a connection's events apart from its QP, uwarp's core ties the connection to
  // the QP: destroying the QP aborts the connection without a DISCONNECTED event. These two
  // flags let the library report the DISCONNECTED that rdma_cm would (see rdma_destroy_qp).
  bool disconnect_requested GUARDED_BY(cma_mu) = false;  // rdma_disconnect was called
  bool qp_destroyed GUARDED_BY(cma_mu) = false;          // rdma_destroy_qp ended the connection
  std::uint8_t req_initiator_depth = 0;                  // from the CONNECT_REQUEST (peer's IRD)
  std::uint8_t req_responder_resources = 0;              // (peer's ORD)
  std::uint8_t initiator_depth = 0;                      // what this side asked for
  std::uint8_t responder_resources = 0;
  // Set by the application's thread only.
  std::optional<ibv_qp_init_attr> ep_qp_attr;  // rdma_create_ep on a passive endpoint
  std::vector<std::uint8_t> connect_data;      // rdma_addrinfo ai_connect, sent first
  bool own_send_cq = false;                    // created by rdma_create_qp
  bool own_recv_cq = false;
  // RDMA_OPTION_ID_ACK_TIMEOUT: kept for the QP's IBV_QP_TIMEOUT (ibv_query_qp reports it, as
  // rdma_cm sets it on the QP); TCP does the retransmission.
  std::optional<std::uint8_t> ack_timeout;
  // Event accounting. cv: acked or delivered changed (waited on with mu).
  Mutex mu;
  std::condition_variable_any cv;
  std::uint64_t delivered GUARDED_BY(mu) = 0;
  std::uint64_t acked GUARDED_BY(mu) = 0;
  bool disconnected_taken GUARDED_BY(mu) = false;  // the DISCONNECTED event was delivered
  // Waits until every delivered event was acknowledged.
  void wait_all_acked() EXCLUDES(mu) {
    MutexLock lock(mu);
    while (acked < delivered) cv.wait(mu);
  }
};

// The process state. The device fields are set once, under cma_mu, by ensure_device and only
// read afterwards; the routing registry is guarded by cma_mu.
struct Cma {
  ibv_context* verbs = nullptr;  // the one device context (never closed)
  ibv_pd* pd = nullptr;          // the default PD of every id
  std::uint8_t max_ird = 0;      // device max_qp_rd_atom
  std::uint8_t max_ord = 0;      // device max_qp_init_rd_atom
  MpaChoice mpa;                 // from UWARP_MPA, for every connection
  std::optional<EventChannel> core;
  // Ids with a listener or a connection: event routing targets.
  std::vector<IdState*> ids GUARDED_BY(cma_mu);
};
Cma& cma();

// Opens the device, the default PD and the core channel, and starts the dispatcher, once.
// Returns 0, or -1 with errno (ENODEV without a uwarp device).
int ensure_device();

// Channels.
Channel* new_channel();
void delete_channel(Channel* c);

// Events. `owner` is the id the event is accounted to; `id` is ev.id.
Event* new_event(IdState* owner, rdma_cm_event_type type, int status);
// Queues `e` on the owner's current channel. Caller holds cma_mu.
void queue_event_locked(Event* e) REQUIRES(cma_mu);
// For synchronous ids: acknowledges id->event, waits for the next event of the private
// channel and leaves it in id->event; -1 with errno if it reports a failure (rdma-core's
// ucma_complete). timeout_ms < 0 waits without limit; on timeout -1 with ETIMEDOUT.
int complete_sync(IdState* s, int timeout_ms = -1);

// Ids.
Id* new_id(Channel* channel, bool sync, void* context, rdma_port_space ps, ibv_qp_type qp_type);
// Adds/removes an id to/from the routing registry. Caller holds cma_mu.
void register_locked(IdState* s) REQUIRES(cma_mu);
void unregister_locked(IdState* s) REQUIRES(cma_mu);
// Queues the DISCONNECTED event of `s` unless one was queued already. Caller holds cma_mu.
void queue_disconnected_locked(IdState* s) REQUIRES(cma_mu);
// Frees an id that the application never saw (a child whose CONNECT_REQUEST was not
// delivered), rejecting its pending connection.
void discard_child(IdState* child);

// Sets *errno and returns -1 (rdma-core's ERR()).
inline int fail(int err) {
  errno = err;
  return -1;
}

// RDMA_OPTION_ID_ACK_TIMEOUT's value as `qp`'s IBV_QP_TIMEOUT; 0 or -1 with errno.
inline int apply_ack_timeout(ibv_qp* qp, std::uint8_t timeout) {
  ibv_qp_attr a{};
  a.timeout = timeout;
  const int r = ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT);
  return r == 0 ? 0 : fail(r);
}

// Addresses: rdma_cm keeps sockaddrs; the core speaks "host" strings and ports.
socklen_t sockaddr_len(const sockaddr* a);
std::uint16_t sockaddr_port(const sockaddr* a);  // host byte order
void set_sockaddr_port(sockaddr* a, std::uint16_t port);
std::string sockaddr_host(const sockaddr* a);  // numeric, with %scope for link-local IPv6
// Parses "1.2.3.4:5" or "[::1]:5" (uwarp::Connection::peer_address()) into `out`.
bool parse_endpoint(const std::string& text, sockaddr_storage* out);

}  // namespace uwarp::rdmacm
