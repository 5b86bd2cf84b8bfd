// librdmacm.so.1: the process state, event channels and events, and the dispatcher that turns
// uwarp connection-manager events into rdma_cm events (see cma.h for the design).
//
// Exports: rdma_create_event_channel, rdma_destroy_event_channel, rdma_get_cm_event,
// rdma_ack_cm_event, rdma_event_str, rdma_get_devices, rdma_free_devices.
//
// Event mapping (as the Linux kernel's rdma_cm maps iw_cm events for iWARP devices):
//   kConnectRequest -> CONNECT_REQUEST on the listening id's channel, with a new id (verbs, PD,
//                      port 1 and both addresses set), the private data, and the peer's IRD/ORD
//                      as initiator_depth/responder_resources
//   kEstablished    -> ESTABLISHED (active side: the reply's private data)
//   kRejected       -> REJECTED, status -ECONNREFUSED, the reject's private data
//   kConnectError   -> REJECTED (-ECONNREFUSED, -ECONNRESET: nobody listens), UNREACHABLE
//                      (-ETIMEDOUT) or CONNECT_ERROR (-errno), as siw reports them
//   kDisconnected   -> DISCONNECTED, once the completions that preceded it were polled (below)
#include "rdmacm/cma.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "base/log.h"
#include "common/boundary.h"
#include "common/errno_map.h"

namespace uwarp::rdmacm {

using ofa::c_boundary;
using ofa::c_boundary_void;

Mutex cma_mu;

Cma& cma() {
  // Never destroyed: the dispatcher thread and the device context live until the process ends.
  static Cma* c = new Cma;
  return *c;
}

// --- channels ----------------------------------------------------------------------------------

ChannelState::ChannelState() : efd(::eventfd(0, EFD_CLOEXEC)) {}

ChannelState::~ChannelState() {
  for (Event* e : q) {
    if (e->child != nullptr) discard_child(e->child);
    delete e;
  }
  if (efd >= 0) ::close(efd);
}

void ChannelState::push(Event* e) {
  uwarp::MutexLock lock(mu);
  const bool was_empty = q.empty();
  q.push_back(e);
  if (was_empty) {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(efd, &one, sizeof one);
  }
}

void ChannelState::drain_locked() {
  // The counter is non-zero here (it was written when the queue became non-empty), so this
  // read never blocks, whatever mode the application set on the fd.
  std::uint64_t v;
  [[maybe_unused]] ssize_t n = ::read(efd, &v, sizeof v);
}

Event* ChannelState::take() {
  for (;;) {
    {
      uwarp::MutexLock lock(mu);
      if (!q.empty()) {
        Event* e = q.front();
        q.pop_front();
        if (q.empty()) drain_locked();
        {
          uwarp::MutexLock ilock(e->owner->mu);
          ++e->owner->delivered;
          if (e->ev.event == RDMA_CM_EVENT_DISCONNECTED && e->child == nullptr) {
            e->owner->disconnected_taken = true;
          }
        }
        return e;
      }
    }
    const int flags = ::fcntl(efd, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK) != 0) {
      errno = EAGAIN;
      return nullptr;
    }
    pollfd p{efd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno == EINTR) return nullptr;
  }
}

Channel* new_channel() {
  auto* s = new ChannelState;
  if (s->efd < 0) {
    const int err = errno;
    delete s;
    errno = err;
    return nullptr;
  }
  auto* c = new Channel{};
  c->ch.fd = s->efd;
  c->s = s;
  return c;
}

void delete_channel(Channel* c) {
  if (c == nullptr) return;
  {
    // Ids still on the channel (an application should destroy them first; one that exits with
    // a connection it never took over from CONNECT_REQUEST does not) get their later events
    // dropped, as the kernel drops them once the channel's fd is closed.
    uwarp::MutexLock lock(cma_mu);
    for (IdState* s : cma().ids) {
      if (s->self->id.channel == &c->ch) s->channel_gone = true;
    }
  }
  delete c->s;
  delete c;
}

// --- events ------------------------------------------------------------------------------------

Event* new_event(IdState* owner, rdma_cm_event_type type, int status) {
  auto* e = new Event{};
  e->owner = owner;
  e->child = nullptr;
  e->ev.id = &owner->self->id;
  e->ev.event = type;
  e->ev.status = status;
  return e;
}

void queue_event_locked(Event* e) {
  if (e->owner->channel_gone) {
    delete e;  // never a CONNECT_REQUEST (on_connect_request rejects those first)
    return;
  }
  Channel::from(e->owner->self->id.channel)->s->push(e);
}

namespace {

void set_private_data(Event* e, std::span<const std::uint8_t> data) {
  const std::size_t n = std::min<std::size_t>(data.size(), 255);
  if (n == 0) return;
  std::memcpy(e->private_data, data.data(), n);
  e->ev.param.conn.private_data = e->private_data;
  e->ev.param.conn.private_data_len = static_cast<std::uint8_t>(n);
}

// Event processing at delivery, in the application's thread (as rdma-core does in
// rdma_get_cm_event): a rejected connection moves its QP to ERR, flushing posted work.
void on_delivery(Event* e) {
  if (e->ev.event == RDMA_CM_EVENT_REJECTED && e->ev.id->qp != nullptr) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(e->ev.id->qp, &a, IBV_QP_STATE);
  }
}

}  // namespace

int complete_sync(IdState* s, int timeout_ms) {
  rdma_cm_id* id = &s->self->id;
  if (!s->sync) return 0;
  if (id->event != nullptr) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  ChannelState* ch = Channel::from(id->channel)->s;
  if (timeout_ms >= 0) {
    pollfd p{ch->fd(), POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) == 0) return fail(ETIMEDOUT);
  }
  Event* e = ch->take();
  if (e == nullptr) return -1;
  on_delivery(e);
  id->event = &e->ev;
  if (e->ev.status != 0) {
    if (e->ev.event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(e->ev.status < 0 ? -e->ev.status : e->ev.status);
  }
  return 0;
}

// --- ids: registry -----------------------------------------------------------------------------

void register_locked(IdState* s) {
  if (s->registered) return;
  cma().ids.push_back(s);
  s->registered = true;
}

void unregister_locked(IdState* s) {
  if (!s->registered) return;
  auto& v = cma().ids;
  v.erase(std::remove(v.begin(), v.end(), s), v.end());
  s->registered = false;
}

void discard_child(IdState* child) {
  {
    uwarp::MutexLock lock(cma_mu);
    unregister_locked(child);
  }
  if (child->conn.valid()) [[maybe_unused]]
    Status s = child->conn.reject();
  Channel* ch = Channel::from(child->self->id.channel);
  const bool own_channel = child->sync;
  delete child->self;
  delete child;
  if (own_channel) delete_channel(ch);
}

void queue_disconnected_locked(IdState* s) {
  if (s->disconnected_queued) return;
  s->phase = IdPhase::kDisconnected;
  s->disconnected_queued = true;
  queue_event_locked(new_event(s, RDMA_CM_EVENT_DISCONNECTED, 0));
}

// --- the dispatcher ----------------------------------------------------------------------------

namespace {

// The MPA markers of an established connection, by direction, for the debug trace.
const char* markers_agreed(const Connection& c) {
  if (c.sends_markers() && c.receives_markers()) return "both ways";
  if (c.sends_markers()) return "sent";
  if (c.receives_markers()) return "received";
  return "off";
}

IdState* find_listener_locked(const Listener& l) REQUIRES(cma_mu) {
  for (IdState* s : cma().ids) {
    if (s->listener.valid() && s->listener.same(l)) return s;
  }
  return nullptr;
}

IdState* find_connection_locked(const Connection& c) REQUIRES(cma_mu) {
  for (IdState* s : cma().ids) {
    if (s->conn.valid() && s->conn.same(c)) return s;
  }
  return nullptr;
}

void set_endpoint(sockaddr_storage* dst, const std::string& text) {
  sockaddr_storage a{};
  if (parse_endpoint(text, &a)) *dst = a;
}

void on_connect_request(CmEvent& e) REQUIRES(cma_mu) {
  Cma& g = cma();
  IdState* l = find_listener_locked(e.listener);
  if (l == nullptr || l->phase != IdPhase::kListening || l->channel_gone) {
    [[maybe_unused]] Status s = e.connection.reject();
    return;
  }
  rdma_cm_id* lid = &l->self->id;
  Channel* ch = Channel::from(lid->channel);
  if (l->sync) {
    // A synchronous listener's requests get their own private channel (rdma-core migrates
    // them to a new channel); the event itself is reported on the listener's.
    ch = new_channel();
    if (ch == nullptr) {
      [[maybe_unused]] Status s = e.connection.reject();
      return;
    }
    ch->s->owned_by_id = true;
  }
  Id* child = new_id(ch, l->sync, lid->context, lid->ps, lid->qp_type);
  IdState* c = child->s;
  child->id.verbs = g.verbs;
  child->id.pd = g.pd;
  child->id.port_num = 1;
  child->id.route.addr.addr.ibaddr = lid->route.addr.addr.ibaddr;
  set_endpoint(&child->id.route.addr.src_storage, e.connection.local_address());
  set_endpoint(&child->id.route.addr.dst_storage, e.connection.peer_address());
  c->conn = e.connection;
  c->phase = IdPhase::kRequest;
  // The peer's IRD bounds what this side may read (initiator_depth) and its ORD what this side
  // must serve (responder_resources). MPA revision 1 carries neither: the device maximum.
  const std::uint16_t peer_ird = e.connection.peer_ird();
  const std::uint16_t peer_ord = e.connection.peer_ord();
  c->req_initiator_depth =
      static_cast<std::uint8_t>(peer_ird != 0 ? std::min<std::uint16_t>(peer_ird, 255) : g.max_ord);
  c->req_responder_resources =
      static_cast<std::uint8_t>(peer_ord != 0 ? std::min<std::uint16_t>(peer_ord, 255) : g.max_ird);
  register_locked(c);

  Event* ev = new_event(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  ev->child = c;
  ev->ev.id = &child->id;
  ev->ev.listen_id = lid;
  set_private_data(ev, e.private_data);
  ev->ev.param.conn.initiator_depth = c->req_initiator_depth;
  ev->ev.param.conn.responder_resources = c->req_responder_resources;
  queue_event_locked(ev);
}

void on_connection_event(CmEvent& e) REQUIRES(cma_mu) {
  IdState* s = find_connection_locked(e.connection);
  if (s == nullptr) return;  // its id was destroyed
  rdma_cm_id* id = &s->self->id;
  Event* ev = nullptr;
  switch (e.type) {
    case CmEventType::kEstablished:
      s->phase = IdPhase::kConnected;
      set_endpoint(&id->route.addr.src_storage, e.connection.local_address());
      set_endpoint(&id->route.addr.dst_storage, e.connection.peer_address());
      ev = new_event(s, RDMA_CM_EVENT_ESTABLISHED, 0);
      set_private_data(ev, e.private_data);
      ev->ev.param.conn.initiator_depth = s->initiator_depth;
      ev->ev.param.conn.responder_resources = s->responder_resources;
      break;
    case CmEventType::kRejected:
      s->phase = IdPhase::kIdle;
      ev = new_event(s, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED);
      set_private_data(ev, e.private_data);
      break;
    case CmEventType::kConnectError: {
      s->phase = IdPhase::kIdle;
      const Errc code = e.status.code();
      if (code == Errc::kConnectionRefused) {
        ev = new_event(s, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED);
      } else if (code == Errc::kConnectionReset) {
        ev = new_event(s, RDMA_CM_EVENT_REJECTED, -ECONNRESET);
      } else if (code == Errc::kTimedOut) {
        ev = new_event(s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      } else {
        ev = new_event(s, RDMA_CM_EVENT_CONNECT_ERROR, -ofa::to_errno(e.status));
      }
      break;
    }
    case CmEventType::kDisconnected:
      queue_disconnected_locked(s);
      return;
    case CmEventType::kConnectRequest:
      return;
  }
  queue_event_locked(ev);
}

// UWARP_LOG=debug (or UWARP_RDMACM_DEBUG=1, its older name) logs every core event.
bool debug_enabled() {
  return uwarp::log::enabled(uwarp::log::Level::kDebug);
}

void trace_core_event(const CmEvent& e) {
  std::string line = "core event " + std::string(to_string(e.type)) + " " +
                     e.connection.local_address() + " -> " + e.connection.peer_address() + " (" +
                     e.status.to_string() + ")";
  if (e.type == CmEventType::kEstablished) {
    line += " MPA revision " + std::to_string(e.connection.mpa_revision()) + ", CRC " +
            (e.connection.crc() ? "on" : "off") + ", markers " + markers_agreed(e.connection);
  }
  uwarp::log::emit(uwarp::log::Level::kDebug, "rdmacm", line);
}

void route(CmEvent& e) {
  try {
    uwarp::MutexLock lock(cma_mu);
    if (e.type == CmEventType::kConnectRequest) {
      on_connect_request(e);
    } else {
      on_connection_event(e);
    }
  } catch (...) {
    // Out of memory while routing: the event is lost (its id sees no progress), the
    // dispatcher goes on.
  }
}

// A peer's disconnection is reported after the completions that preceded it. The core reports
// it once the connection's last bytes were processed, so the Send that came just before the
// peer closed is already a completion in the CQ. An application that polls its CQ and then reads
// its event channel, in one thread (libfabric's ofi_rxm does), may find the CQ empty, then the
// completion and the DISCONNECTED arrive together, and it tears the connection down on the
// event: the message is lost. So DISCONNECTED waits until every completion that the QP's CQs
// held when the core reported it has been polled, or kDisconnectHold has passed (for an
// application that polls only after the event). Other events are not held.
constexpr auto kDisconnectHold = std::chrono::milliseconds(250);
constexpr int kHeldRecheckMs = 1;

struct HeldDisconnect {
  CmEvent event;
  std::function<bool()> polled;
  std::chrono::steady_clock::time_point deadline;
};

// The test for `e` (a kDisconnected), or an empty one when nothing is to be waited for.
std::function<bool()> preceding_completions(const CmEvent& e) {
  uwarp::MutexLock lock(cma_mu);
  IdState* s = find_connection_locked(e.connection);
  if (s == nullptr || s->self->id.qp == nullptr) return {};
  std::function<bool()> polled = ofa::completions_polled_test(s->self->id.verbs, s->self->id.qp);
  if (polled && polled()) return {};
  return polled;
}

// Routes the held disconnections whose completions were polled or whose time ran out.
void release_held(std::vector<HeldDisconnect>& held) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(held, [&](HeldDisconnect& h) {
    if (now < h.deadline && !h.polled()) return false;
    route(h.event);
    return true;
  });
}

void dispatch_loop(EventChannel core) {
  std::vector<HeldDisconnect> held;  // this thread's only
  for (;;) {
    std::optional<CmEvent> e = core.get_event(held.empty() ? -1 : kHeldRecheckMs);
    release_held(held);
    if (!e) continue;
    if (debug_enabled()) trace_core_event(*e);
    if (e->type == CmEventType::kDisconnected) {
      try {
        if (std::function<bool()> polled = preceding_completions(*e)) {
          held.push_back({std::move(*e), std::move(polled),
                          std::chrono::steady_clock::now() + kDisconnectHold});
          continue;
        }
      } catch (...) {
        // Out of memory: reported at once.
      }
    }
    route(*e);
  }
}

}  // namespace

int ensure_device() {
  Cma& g = cma();
  uwarp::MutexLock lock(cma_mu);
  if (g.verbs != nullptr) return 0;
  if (ofa::bridge_version() != ofa::kBridgeVersion) {
    std::fprintf(stderr,
                 "uwarp librdmacm: libibverbs.so.1 bridge version %d, expected %d (a stale "
                 "library on LD_LIBRARY_PATH?)\n",
                 ofa::bridge_version(), ofa::kBridgeVersion);
    return fail(ENODEV);
  }
  const char* mpa_env = std::getenv("UWARP_MPA");
  auto mpa = parse_mpa_choice(mpa_env != nullptr ? mpa_env : "");
  if (!mpa) {
    std::fprintf(stderr, "uwarp librdmacm: UWARP_MPA=%s: %s\n", mpa_env,
                 mpa.error().message().c_str());
    return fail(EINVAL);
  }
  g.mpa = *mpa;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return fail(ENODEV);
  }
  ibv_context* verbs = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  Context* core_ctx = verbs != nullptr ? ofa::context_of(verbs) : nullptr;
  if (core_ctx == nullptr) {
    // Not uwarp's libibverbs.so.1 (uwarp-run puts it first on the library path).
    if (verbs != nullptr) ibv_close_device(verbs);
    std::fprintf(stderr, "uwarp librdmacm: the loaded libibverbs.so.1 is not uwarp's\n");
    return fail(ENODEV);
  }
  ibv_device_attr attr{};
  if (ibv_query_device(verbs, &attr) != 0) {
    ibv_close_device(verbs);
    return fail(ENODEV);
  }
  ibv_pd* pd = ibv_alloc_pd(verbs);
  if (pd == nullptr) {
    const int err = errno;
    ibv_close_device(verbs);
    return fail(err);
  }
  auto core = EventChannel::create(*core_ctx);
  if (!core) {
    ibv_dealloc_pd(pd);
    ibv_close_device(verbs);
    return fail(ofa::to_errno(core.error()));
  }
  // The dispatcher never handles signals: they stay with the application's threads.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    std::thread(dispatch_loop, *core).detach();
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ibv_dealloc_pd(pd);
    ibv_close_device(verbs);
    return fail(EAGAIN);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  g.core = std::move(*core);
  g.max_ird = static_cast<std::uint8_t>(std::min(attr.max_qp_rd_atom, 255));
  g.max_ord = static_cast<std::uint8_t>(std::min(attr.max_qp_init_rd_atom, 255));
  g.pd = pd;
  g.verbs = verbs;
  return 0;
}

// --- addresses ---------------------------------------------------------------------------------

socklen_t sockaddr_len(const sockaddr* a) {
  if (a == nullptr) return 0;
  if (a->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (a->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

std::uint16_t sockaddr_port(const sockaddr* a) {
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  return 0;
}

void set_sockaddr_port(sockaddr* a, std::uint16_t port) {
  if (a->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  if (a->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
}

std::string sockaddr_host(const sockaddr* a) {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "";
  if (a->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, host, sizeof host);
    return host;
  }
  if (a->sa_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(a);
    ::inet_ntop(AF_INET6, &a6->sin6_addr, host, INET6_ADDRSTRLEN);
    std::string s = host;
    char name[IF_NAMESIZE];
    if (a6->sin6_scope_id != 0 && ::if_indextoname(a6->sin6_scope_id, name) != nullptr) {
      s += "%";
      s += name;
    }
    return s;
  }
  return "";
}

bool parse_endpoint(const std::string& text, sockaddr_storage* out) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = text.substr(0, colon);
  const int port = std::atoi(text.c_str() + colon + 1);
  *out = sockaddr_storage{};
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    auto* a6 = reinterpret_cast<sockaddr_in6*>(out);
    if (::inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) != 1) return false;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<std::uint16_t>(port));
    return true;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(out);
  if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) return false;
  a4->sin_family = AF_INET;
  a4->sin_port = htons(static_cast<std::uint16_t>(port));
  return true;
}

}  // namespace uwarp::rdmacm

using namespace uwarp::rdmacm;

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  return c_boundary<rdma_event_channel*>(nullptr, []() -> rdma_event_channel* {
    if (ensure_device() != 0) return nullptr;
    Channel* c = new_channel();
    return c != nullptr ? &c->ch : nullptr;
  });
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  c_boundary_void([&] {
    if (channel != nullptr) delete_channel(Channel::from(channel));
  });
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  return c_boundary(-1, [&]() -> int {
    if (channel == nullptr || event == nullptr) return fail(EINVAL);
    Event* e = Channel::from(channel)->s->take();
    if (e == nullptr) return -1;
    on_delivery(e);
    *event = &e->ev;
    return 0;
  });
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  return c_boundary(-1, [&]() -> int {
    if (event == nullptr) return fail(EINVAL);
    Event* e = Event::from(event);
    {
      // Notified under the lock: once it is released, rdma_destroy_id (waiting for this ack) may
      // free the id, condition variable included.
      uwarp::MutexLock lock(e->owner->mu);
      ++e->owner->acked;
      e->owner->cv.notify_all();
    }
    delete e;
    return 0;
  });
}

const char* rdma_event_str(rdma_cm_event_type event) {
  // The application may pass any int: switched on as one.
  switch (enum_value(event)) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

ibv_context** rdma_get_devices(int* num_devices) {
  return c_boundary<ibv_context**>(nullptr, [&]() -> ibv_context** {
    if (num_devices != nullptr) *num_devices = 0;
    if (ensure_device() != 0) return nullptr;
    auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
    if (list == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    list[0] = cma().verbs;
    if (num_devices != nullptr) *num_devices = 1;
    return list;
  });
}

void rdma_free_devices(ibv_context** list) {
  std::free(list);
}

}  // extern "C"
