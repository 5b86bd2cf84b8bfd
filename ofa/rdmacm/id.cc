// librdmacm.so.1: rdma_cm ids and their connection-manager calls, over uwarp's connection manager
// (uwarp::EventChannel, Listener, Connection) and the libibverbs bridge (connect_qp, accept_qp).
//
// Exports: rdma_create_id, rdma_destroy_id, rdma_migrate_id, rdma_bind_addr, rdma_resolve_addr,
// rdma_resolve_route, rdma_listen, rdma_get_request, rdma_connect, rdma_accept, rdma_reject,
// rdma_reject_ece, rdma_disconnect, rdma_establish, rdma_notify, rdma_set_option,
// rdma_init_qp_attr, rdma_get_src_port, rdma_get_dst_port.
//
// iWARP semantics (ofa-abi.md):
//   - Only RDMA_PS_TCP with RC QPs; RDMA_PS_UDP, RDMA_PS_IPOIB and RDMA_PS_IB fail with
//     EPROTONOSUPPORT and a message (UD QPs and multicast do not exist on iWARP).
//   - RDMA_PS_TCP ports are TCP ports, 1:1. rdma_bind_addr checks the address with a real bind
//     (EADDRNOTAVAIL, EADDRINUSE; port 0 takes an ephemeral port); rdma_listen listens with
//     SO_REUSEADDR, so a port may be listened on again while connections accepted on it live;
//     rdma_connect from a bound id connects from the bound address and port.
//   - Address and route resolution are immediate: ADDR_RESOLVED and ROUTE_RESOLVED are queued
//     at once, with id->verbs, id->pd, port_num = 1 and both addresses already set (the source
//     address is the one the kernel's routing picks for the destination). An unroutable
//     destination gives ADDR_ERROR.
//   - A connection binds the QP created on the id with rdma_create_qp or, for an id without one,
//     the QP of the id's device that rdma_conn_param.qp_num names (an "external" QP, made with
//     ibv_create_qp), as the kernel's iWARP CM does; the events are the same (ESTABLISHED, never
//     InfiniBand's CONNECT_RESPONSE). Neither: EINVAL with a message.
//   - Synchronous ids (NULL channel, rdma_create_ep): every call that produces an event waits for
//     it on the id's private channel and leaves it in id->event (rdma-core's ucma_complete).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/boundary.h"
#include "common/errno_map.h"
#include "rdmacm/cma.h"

namespace uwarp::rdmacm {

using ofa::c_boundary;

Id* new_id(Channel* channel, bool sync, void* context, rdma_port_space ps, ibv_qp_type qp_type) {
  auto* s = new IdState;
  auto* id = new Id{};
  id->s = s;
  s->self = id;
  s->sync = sync;
  id->id.channel = &channel->ch;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = qp_type;
  return id;
}

namespace {

IdState* state_of(rdma_cm_id* id) {
  return id != nullptr ? Id::from(id)->s : nullptr;
}

int unsupported_port_space(int ps) {
  const char* name = ps == RDMA_PS_UDP     ? "RDMA_PS_UDP"
                     : ps == RDMA_PS_IPOIB ? "RDMA_PS_IPOIB"
                     : ps == RDMA_PS_IB    ? "RDMA_PS_IB"
                                           : "port space";
  std::fprintf(stderr,
               "uwarp librdmacm: %s (0x%x) is not supported on iWARP (uwarp offers reliable "
               "connected QPs over RDMA_PS_TCP only; UD QPs and multicast do not exist on "
               "iWARP)\n",
               name, static_cast<unsigned>(ps));
  return fail(EPROTONOSUPPORT);
}

// The errno of a core status for address calls: a busy address is EADDRINUSE.
int address_errno(const Status& s) {
  if (s.code() == Errc::kBusy) {
    return s.message().find("not available") != std::string::npos ? EADDRNOTAVAIL : EADDRINUSE;
  }
  return ofa::to_errno(s);
}

// Sets what rdma_cm reports once an id is tied to the device.
void attach_device(rdma_cm_id* id) {
  Cma& g = cma();
  id->verbs = g.verbs;
  if (id->pd == nullptr) id->pd = g.pd;
  id->port_num = 1;
  id->route.addr.addr.ibaddr.pkey = htons(0xffff);
}

bool is_wildcard(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (a->sa_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  }
  return true;
}

// The source address the kernel's routing picks for `dst` (a connected UDP socket's name).
int route_source(const sockaddr* dst, sockaddr_storage* src) {
  const int fd = ::socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_storage probe{};
  std::memcpy(&probe, dst, sockaddr_len(dst));
  if (sockaddr_port(reinterpret_cast<sockaddr*>(&probe)) == 0) {
    set_sockaddr_port(reinterpret_cast<sockaddr*>(&probe), 9);
  }
  int err = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&probe), sockaddr_len(dst)) != 0) {
    err = errno;
  } else {
    socklen_t len = sizeof *src;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(src), &len) != 0) err = errno;
    set_sockaddr_port(reinterpret_cast<sockaddr*>(src), 0);
  }
  ::close(fd);
  return err;
}

// rdma_bind_addr's check: binds a TCP socket to `addr` (SO_REUSEADDR, as the listener will) and
// returns the port (the ephemeral one for port 0), or -errno.
int probe_bind(const sockaddr* addr) {
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int result;
  if (::bind(fd, addr, sockaddr_len(addr)) != 0) {
    result = -errno;
  } else {
    sockaddr_storage got{};
    socklen_t len = sizeof got;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
    result = sockaddr_port(reinterpret_cast<sockaddr*>(&got));
  }
  ::close(fd);
  return result;
}

// rdma-core's ucma_valid_param for RDMA_PS_TCP.
int check_conn_param(rdma_cm_id* id, const rdma_conn_param* p) {
  Cma& g = cma();
  if (id->qp == nullptr && p == nullptr) return fail(EINVAL);
  if (p == nullptr) return 0;
  if (p->responder_resources != RDMA_MAX_RESP_RES && p->responder_resources > g.max_ird) {
    return fail(EINVAL);
  }
  if (p->initiator_depth != RDMA_MAX_INIT_DEPTH && p->initiator_depth > g.max_ord) {
    return fail(EINVAL);
  }
  return 0;
}

ibv_qp* qp_to_bind(rdma_cm_id* id, const rdma_conn_param* p, const char* call) {
  if (id->qp != nullptr) {
    if (id->qp->context == cma().verbs) return id->qp;
    fail(EINVAL);
    return nullptr;
  }
  if (p != nullptr) {
    if (ibv_qp* qp = ofa::qp_by_number(cma().verbs, p->qp_num)) return qp;
  }
  std::fprintf(stderr,
               "uwarp librdmacm: %s needs a QP: created with rdma_create_qp on the id, or named by "
               "rdma_conn_param.qp_num (a QP of the id's device)\n",
               call);
  fail(EINVAL);
  return nullptr;
}

// IRD/ORD are at least 1: an RDMA Read must be able to make progress whatever the application
// asked for (rdma-core passes 0 through; siw then rounds up as well).
std::uint16_t at_least_one(std::uint8_t v) {
  return std::max<std::uint16_t>(v, 1);
}

void append(std::vector<std::uint8_t>& out, const void* data, std::size_t len) {
  if (data == nullptr || len == 0) return;
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + len);
}

}  // namespace

}  // namespace uwarp::rdmacm

using namespace uwarp;
using namespace uwarp::rdmacm;

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr) return fail(EINVAL);
    if (enum_value(ps) != RDMA_PS_TCP) return unsupported_port_space(enum_value(ps));
    if (ensure_device() != 0) return -1;
    Channel* ch = channel != nullptr ? Channel::from(channel) : new_channel();
    if (ch == nullptr) return -1;
    if (channel == nullptr) ch->s->owned_by_id = true;
    Id* i = new_id(ch, channel == nullptr, context, ps, IBV_QPT_RC);
    *id = &i->id;
    return 0;
  });
}

int rdma_destroy_id(rdma_cm_id* id) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    std::vector<Event*> removed;
    IdPhase phase;
    {
      uwarp::MutexLock lock(cma_mu);
      unregister_locked(s);
      phase = s->phase;
      if (!s->channel_gone) {
        removed = Channel::from(id->channel)->s->remove_if([s](Event* e) { return e->owner == s; });
      }
    }
    for (Event* e : removed) {
      if (e->child != nullptr) discard_child(e->child);
      delete e;
    }
    if (id->event != nullptr) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    { s->wait_all_acked(); }
    if (s->listener.valid()) s->listener.close();
    if (s->conn.valid()) {
      if (phase == IdPhase::kRequest) {
        [[maybe_unused]] Status st = s->conn.reject();  // never answered: the kernel rejects too
      } else {
        s->conn.disconnect();
      }
    }
    Channel* ch = Channel::from(id->channel);
    const bool own_channel = s->sync;
    delete Id::from(id);
    delete s;
    if (own_channel) delete_channel(ch);
    return 0;
  });
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    if (s->sync && channel == nullptr) return fail(EINVAL);
    Channel* to = channel != nullptr ? Channel::from(channel) : new_channel();
    if (to == nullptr) return -1;
    if (channel == nullptr) to->s->owned_by_id = true;
    Channel* from = Channel::from(id->channel);
    const bool was_sync = s->sync;
    if (was_sync && id->event != nullptr) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    {
      uwarp::MutexLock lock(cma_mu);
      if (!s->channel_gone) {
        for (Event* e : from->s->remove_if([s](Event* e) { return e->owner == s; })) to->s->push(e);
      }
      id->channel = &to->ch;
      s->channel_gone = false;
      s->sync = channel == nullptr;
    }
    { s->wait_all_acked(); }
    if (was_sync) delete_channel(from);
    return 0;
  });
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr || sockaddr_len(addr) == 0) return fail(EINVAL);
    uwarp::MutexLock lock(cma_mu);
    if (s->phase != IdPhase::kIdle) return fail(EINVAL);
    const int port = probe_bind(addr);
    if (port < 0) return fail(-port);
    std::memset(&id->route.addr.src_storage, 0, sizeof id->route.addr.src_storage);
    std::memcpy(&id->route.addr.src_storage, addr, sockaddr_len(addr));
    set_sockaddr_port(&id->route.addr.src_addr, static_cast<std::uint16_t>(port));
    attach_device(id);
    s->phase = IdPhase::kBound;
    return 0;
  });
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  (void)timeout_ms;
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr || sockaddr_len(dst_addr) == 0) return fail(EINVAL);
    if (src_addr != nullptr && sockaddr_len(src_addr) == 0) return fail(EINVAL);
    {
      uwarp::MutexLock lock(cma_mu);
      if (s->phase != IdPhase::kIdle && s->phase != IdPhase::kBound &&
          s->phase != IdPhase::kAddrResolved) {
        return fail(EINVAL);
      }
      std::memset(&id->route.addr.dst_storage, 0, sizeof id->route.addr.dst_storage);
      std::memcpy(&id->route.addr.dst_storage, dst_addr, sockaddr_len(dst_addr));
      int err = 0;
      if (s->phase != IdPhase::kBound && src_addr != nullptr && !is_wildcard(src_addr)) {
        std::memset(&id->route.addr.src_storage, 0, sizeof id->route.addr.src_storage);
        std::memcpy(&id->route.addr.src_storage, src_addr, sockaddr_len(src_addr));
      } else if (s->phase != IdPhase::kBound || is_wildcard(&id->route.addr.src_addr)) {
        // The kernel's choice for this destination; a bound port is kept.
        const std::uint16_t port =
            s->phase == IdPhase::kBound ? sockaddr_port(&id->route.addr.src_addr) : 0;
        sockaddr_storage src{};
        err = route_source(dst_addr, &src);
        if (err == 0) {
          id->route.addr.src_storage = src;
          set_sockaddr_port(&id->route.addr.src_addr, port);
        }
      }
      if (err == 0 && id->route.addr.src_addr.sa_family != dst_addr->sa_family) err = EINVAL;
      Event* e;
      if (err == 0) {
        attach_device(id);
        s->phase = IdPhase::kAddrResolved;
        e = new_event(s, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
      } else {
        e = new_event(s, RDMA_CM_EVENT_ADDR_ERROR, -err);
      }
      queue_event_locked(e);
    }
    return complete_sync(s);
  });
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  (void)timeout_ms;
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    {
      uwarp::MutexLock lock(cma_mu);
      if (s->phase != IdPhase::kAddrResolved) return fail(EINVAL);
      s->phase = IdPhase::kRouteResolved;
      queue_event_locked(new_event(s, RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
    }
    return complete_sync(s);
  });
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    Cma& g = cma();
    uwarp::MutexLock lock(cma_mu);
    if (s->phase == IdPhase::kIdle) {
      // Listening unbound: any IPv4 address, any port (as the kernel does).
      sockaddr_in any{};
      any.sin_family = AF_INET;
      std::memcpy(&id->route.addr.src_storage, &any, sizeof any);
      attach_device(id);
      s->phase = IdPhase::kBound;
    }
    if (s->phase != IdPhase::kBound) return fail(EINVAL);
    const sockaddr* src = &id->route.addr.src_addr;
    auto l = g.core->listen(sockaddr_host(src), sockaddr_port(src), backlog > 0 ? backlog : 128);
    if (!l) return fail(address_errno(l.error()));
    s->listener = *l;
    set_sockaddr_port(&id->route.addr.src_addr, l->port());
    s->phase = IdPhase::kListening;
    register_locked(s);
    return 0;
  });
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(listen);
    if (s == nullptr || id == nullptr || !s->sync) return fail(EINVAL);
    if (listen->event != nullptr) {
      rdma_ack_cm_event(listen->event);
      listen->event = nullptr;
    }
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
    if (event->status != 0) {
      listen->event = event;
      return fail(event->status < 0 ? -event->status : event->status);
    }
    if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      listen->event = event;
      return fail(EINVAL);
    }
    if (s->ep_qp_attr) {
      ibv_qp_init_attr attr = *s->ep_qp_attr;
      if (rdma_create_qp(event->id, listen->pd, &attr) != 0) {
        listen->event = event;
        return -1;
      }
    }
    *id = event->id;
    (*id)->event = event;
    return 0;
  });
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    if (check_conn_param(id, conn_param) != 0) return -1;
    ibv_qp* qp = qp_to_bind(id, conn_param, "rdma_connect");
    if (qp == nullptr) return -1;
    Cma& g = cma();
    ConnectionParams params;
    const bool given_ord =
        conn_param != nullptr && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH;
    const bool given_ird =
        conn_param != nullptr && conn_param->responder_resources != RDMA_MAX_RESP_RES;
    const std::uint8_t ord = given_ord ? conn_param->initiator_depth : g.max_ord;
    const std::uint8_t ird = given_ird ? conn_param->responder_resources : g.max_ird;
    params.ord = at_least_one(ord);
    params.ird = at_least_one(ird);
    params.crc = g.mpa.crc;
    params.markers = g.mpa.markers;
    params.peer_to_peer = g.mpa.peer_to_peer;
    params.rtr_offer = g.mpa.rtr_offer;
    params.mpa_revision = g.mpa.revision;
    params.fpdu_size = g.mpa.fpdu_size;
    params.private_data = s->connect_data;
    if (conn_param != nullptr) {
      append(params.private_data, conn_param->private_data, conn_param->private_data_len);
      ofa::set_rnr_retry(qp, conn_param->rnr_retry_count);
    }
    {
      uwarp::MutexLock lock(cma_mu);
      if (s->phase != IdPhase::kRouteResolved) return fail(EINVAL);
      const sockaddr* dst = &id->route.addr.dst_addr;
      // A port the application fixed (rdma_bind_addr, or a source given to rdma_resolve_addr) is
      // the connection's TCP source port, with the bound address, as in the kernel's rdma_cm.
      const sockaddr* src = &id->route.addr.src_addr;
      if (sockaddr_port(src) != 0) {
        params.local_host = sockaddr_host(src);
        params.local_port = sockaddr_port(src);
      }
      auto c = ofa::connect_qp(*g.core, qp, sockaddr_host(dst), sockaddr_port(dst), params);
      if (!c) return fail(ofa::to_errno(c.error()));
      s->conn = *c;
      s->initiator_depth = ord;
      s->responder_resources = ird;
      s->phase = IdPhase::kConnecting;
      // The source port is known once the connection is established (the dispatcher sets the
      // addresses then; the core writes them on its own thread until then).
      register_locked(s);
    }
    s->connect_data.clear();
    return complete_sync(s);
  });
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    if (check_conn_param(id, conn_param) != 0) return -1;
    ibv_qp* qp = qp_to_bind(id, conn_param, "rdma_accept");
    if (qp == nullptr) return -1;
    Cma& g = cma();
    {
      uwarp::MutexLock lock(cma_mu);
      if (s->phase != IdPhase::kRequest) return fail(EINVAL);
      std::uint8_t ord;
      std::uint8_t ird;
      if (conn_param == nullptr || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH) {
        ord = std::min(s->req_initiator_depth, g.max_ord);
      } else {
        ord = conn_param->initiator_depth;
      }
      if (conn_param == nullptr || conn_param->responder_resources == RDMA_MAX_RESP_RES) {
        ird = std::min(s->req_responder_resources, g.max_ird);
      } else {
        ird = conn_param->responder_resources;
      }
      ConnectionParams params;
      params.ord = at_least_one(ord);
      params.ird = at_least_one(ird);
      params.crc = g.mpa.crc;  // peer-to-peer and the revision follow the request
      params.markers = g.mpa.markers;
      params.fpdu_size = g.mpa.fpdu_size;
      if (conn_param != nullptr) {
        append(params.private_data, conn_param->private_data, conn_param->private_data_len);
        ofa::set_rnr_retry(qp, conn_param->rnr_retry_count);
      }
      s->initiator_depth = ord;
      s->responder_resources = ird;
      s->phase = IdPhase::kConnecting;
      if (Status st = ofa::accept_qp(s->conn, qp, params); !st) {
        s->phase = IdPhase::kRequest;
        return fail(ofa::to_errno(st));
      }
    }
    return complete_sync(s);
  });
}

int rdma_reject(rdma_cm_id* id, const void* private_data, std::uint8_t private_data_len) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    uwarp::MutexLock lock(cma_mu);
    if (s->phase != IdPhase::kRequest) return fail(EINVAL);
    std::vector<std::uint8_t> data;
    append(data, private_data, private_data_len);
    if (Status st = s->conn.reject(data); !st) return fail(ofa::to_errno(st));
    s->phase = IdPhase::kIdle;
    return 0;
  });
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, std::uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

int rdma_disconnect(rdma_cm_id* id) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr) return fail(EINVAL);
    bool wait = false;
    {
      uwarp::MutexLock lock(cma_mu);
      if (!s->conn.valid() || s->phase == IdPhase::kRequest) return fail(EINVAL);
      const bool up = s->phase == IdPhase::kConnected || s->phase == IdPhase::kConnecting;
      s->disconnect_requested = true;
      s->conn.disconnect();
      if (up && s->qp_destroyed) queue_disconnected_locked(s);  // the core reports none
      uwarp::MutexLock ilock(s->mu);
      wait = s->sync && (up || (s->disconnected_queued && !s->disconnected_taken));
    }
    if (!wait) return 0;
    // The DISCONNECTED event follows once both sides closed (the core waits at most a few
    // seconds for the peer); a QP destroyed meanwhile aborts the connection without one.
    const int r = complete_sync(s, 10000);
    return r != 0 && errno == ETIMEDOUT ? 0 : r;
  });
}

int rdma_establish(rdma_cm_id* id) {
  // Only for connections whose QP is not on the id (CONNECT_RESPONSE), which uwarp does not
  // produce: rdma_connect needs the id's QP.
  (void)id;
  return fail(EINVAL);
}

int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  (void)event;
  return id != nullptr ? 0 : fail(EINVAL);
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, std::size_t optlen) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr || (optval == nullptr && optlen != 0)) return fail(EINVAL);
    if (level == RDMA_OPTION_ID) {
      switch (optname) {
        case RDMA_OPTION_ID_TOS:        // the TCP socket's TOS is left to the system
        case RDMA_OPTION_ID_REUSEADDR:  // listeners use SO_REUSEADDR anyway
        case RDMA_OPTION_ID_AFONLY:     // IPv6 listeners stay dual-stack
          return 0;
        case RDMA_OPTION_ID_ACK_TIMEOUT: {
          // TCP does the retransmission; the value is the QP's IBV_QP_TIMEOUT, now or once
          // rdma_create_qp makes the QP (one byte, as the kernel's rdma_set_ack_timeout takes).
          if (optlen != sizeof(std::uint8_t)) return fail(EINVAL);
          const std::uint8_t timeout = *static_cast<const std::uint8_t*>(optval);
          state_of(id)->ack_timeout = timeout;
          if (id->qp != nullptr) return apply_ack_timeout(id->qp, timeout);
          return 0;
        }
        default:
          return fail(EINVAL);
      }
    }
    if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) return fail(ENOSYS);
    return fail(EINVAL);
  });
}

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  return c_boundary(-1, [&]() -> int {
    IdState* s = state_of(id);
    if (s == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr || id->verbs == nullptr) {
      return fail(EINVAL);
    }
    switch (enum_value(qp_attr->qp_state)) {
      case IBV_QPS_INIT:
        qp_attr->pkey_index = 0;
        qp_attr->port_num = id->port_num != 0 ? id->port_num : 1;
        qp_attr->qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        *qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        return 0;
      case IBV_QPS_RTR: {
        uwarp::MutexLock lock(cma_mu);
        qp_attr->max_dest_rd_atomic = s->responder_resources;
        *qp_attr_mask = IBV_QP_STATE;
        return 0;
      }
      case IBV_QPS_RTS: {
        uwarp::MutexLock lock(cma_mu);
        qp_attr->max_rd_atomic = s->initiator_depth;
        *qp_attr_mask = IBV_QP_STATE;
        return 0;
      }
      default:
        return fail(EINVAL);
    }
  });
}

__be16 rdma_get_src_port(rdma_cm_id* id) {
  return htons(id != nullptr ? sockaddr_port(&id->route.addr.src_addr) : 0);
}

__be16 rdma_get_dst_port(rdma_cm_id* id) {
  return htons(id != nullptr ? sockaddr_port(&id->route.addr.dst_addr) : 0);
}

}  // extern "C"
