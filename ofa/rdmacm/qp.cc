// librdmacm.so.1: QPs, SRQs and endpoints on rdma_cm ids, through uwarp's libibverbs.so.1 (plain
// ibv_* calls: the QP is an ordinary verbs QP; rdma_connect/rdma_accept bind its connection).
//
// Exports: rdma_create_qp, rdma_create_qp_ex, rdma_destroy_qp, rdma_create_srq,
// rdma_create_srq_ex, rdma_destroy_srq, rdma_create_ep, rdma_destroy_ep.
//
// As rdma-core: a NULL PD means the id's (default) PD; missing CQs are created, each with its
// own completion channel and the id as CQ context (what rdma_verbs.h's rdma_get_send_comp and
// rdma_get_recv_comp wait on), and destroyed with the QP; the new QP is moved to INIT with the
// attributes of rdma_init_qp_attr. Only RC QPs (and basic SRQs) exist on iWARP: other types fail
// with EOPNOTSUPP and a message.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/boundary.h"
#include "rdmacm/cma.h"

namespace uwarp::rdmacm {
namespace {

using ofa::c_boundary;
using ofa::c_boundary_void;

void destroy_cqs(rdma_cm_id* id) {
  if (id->recv_cq != nullptr) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq != nullptr && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
    id->recv_cq = nullptr;
  } else if (id->send_cq != nullptr) {
    ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
  }
  if (id->recv_cq_channel != nullptr) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    if (id->send_cq_channel != nullptr && id->send_cq_channel != id->recv_cq_channel) {
      ibv_destroy_comp_channel(id->send_cq_channel);
    }
    id->send_cq_channel = nullptr;
    id->recv_cq_channel = nullptr;
  } else if (id->send_cq_channel != nullptr) {
    ibv_destroy_comp_channel(id->send_cq_channel);
    id->send_cq_channel = nullptr;
  }
}

// One CQ with its own completion channel, the id as CQ context (rdma-core's ucma_create_cqs).
bool create_cq(rdma_cm_id* id, std::uint32_t size, ibv_comp_channel** channel, ibv_cq** cq) {
  *channel = ibv_create_comp_channel(id->verbs);
  if (*channel == nullptr) return false;
  *cq = ibv_create_cq(id->verbs, static_cast<int>(size), id, *channel, 0);
  return *cq != nullptr;
}

int create_cqs(rdma_cm_id* id, std::uint32_t send_size, std::uint32_t recv_size) {
  const bool ok =
      (recv_size == 0 || create_cq(id, recv_size, &id->recv_cq_channel, &id->recv_cq)) &&
      (send_size == 0 || create_cq(id, send_size, &id->send_cq_channel, &id->send_cq));
  if (ok) return 0;
  const int e = errno;
  destroy_cqs(id);
  return fail(e);
}

int unsupported_qp_type(int type) {
  const char* name = type == IBV_QPT_UD           ? "UD"
                     : type == IBV_QPT_UC         ? "UC"
                     : type == IBV_QPT_XRC_SEND   ? "XRC_SEND"
                     : type == IBV_QPT_XRC_RECV   ? "XRC_RECV"
                     : type == IBV_QPT_RAW_PACKET ? "RAW_PACKET"
                                                  : "this";
  std::fprintf(stderr,
               "uwarp librdmacm: %s QPs (type %d) are not supported on iWARP (only RC QPs; UD, "
               "UC and XRC do not exist on iWARP)\n",
               name, type);
  return fail(EOPNOTSUPP);
}

}  // namespace
}  // namespace uwarp::rdmacm

using namespace uwarp::rdmacm;

extern "C" {

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr || attr == nullptr || id->qp != nullptr) return fail(EINVAL);
    if (id->verbs == nullptr) return fail(EINVAL);  // neither bound nor resolved
    if (enum_value(attr->qp_type) != IBV_QPT_RC)
      return unsupported_qp_type(enum_value(attr->qp_type));
    if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
      attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
      attr->pd = id->pd;
    } else if (attr->pd->context != id->verbs) {
      return fail(EINVAL);
    }
    if ((id->recv_cq != nullptr && attr->recv_cq != nullptr && id->recv_cq != attr->recv_cq) ||
        (id->send_cq != nullptr && attr->send_cq != nullptr && id->send_cq != attr->send_cq)) {
      return fail(EINVAL);
    }
    const std::uint32_t send_size =
        attr->send_cq != nullptr || id->send_cq != nullptr ? 0 : attr->cap.max_send_wr;
    const std::uint32_t recv_size =
        attr->recv_cq != nullptr || id->recv_cq != nullptr ? 0 : attr->cap.max_recv_wr;
    if (create_cqs(id, send_size, recv_size) != 0) return -1;
    if (attr->send_cq == nullptr) attr->send_cq = id->send_cq;
    if (attr->recv_cq == nullptr) attr->recv_cq = id->recv_cq;
    if (id->srq != nullptr && attr->srq == nullptr) attr->srq = id->srq;
    ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
    if (qp == nullptr) {
      const int e = errno;
      destroy_cqs(id);
      return fail(e);
    }
    ibv_qp_attr qa{};
    int mask = 0;
    qa.qp_state = IBV_QPS_INIT;
    int r = rdma_init_qp_attr(id, &qa, &mask);
    if (r == 0) r = ibv_modify_qp(qp, &qa, mask);
    if (const auto timeout = Id::from(id)->s->ack_timeout; r == 0 && timeout) {
      r = apply_ack_timeout(qp, *timeout) == 0 ? 0 : errno;
    }
    if (r != 0) {
      const int e = r > 0 ? r : errno;
      ibv_destroy_qp(qp);
      destroy_cqs(id);
      return fail(e);
    }
    id->pd = qp->pd;
    id->qp = qp;
    return 0;
  });
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr || qp_init_attr == nullptr) return fail(EINVAL);
    ibv_qp_init_attr_ex ex{};
    std::memcpy(&ex, qp_init_attr, sizeof *qp_init_attr);
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd != nullptr ? pd : id->pd;
    const int r = rdma_create_qp_ex(id, &ex);
    std::memcpy(qp_init_attr, &ex, sizeof *qp_init_attr);
    return r;
  });
}

void rdma_destroy_qp(rdma_cm_id* id) {
  c_boundary_void([&] {
    if (id == nullptr) return;
    if (id->qp != nullptr) {
      // Destroying the QP aborts its connection in uwarp's core, without a DISCONNECTED event;
      // rdma_cm still reports one after rdma_disconnect (cmtime disconnects, destroys the QP,
      // then waits for the events). Reported here, or by a later rdma_disconnect.
      IdState* s = Id::from(id)->s;
      bool live;
      {
        uwarp::MutexLock lock(cma_mu);
        live = s->conn.valid() &&
               (s->phase == IdPhase::kConnected || s->phase == IdPhase::kConnecting);
      }
      ibv_destroy_qp(id->qp);  // may wait for async events: not under cma_mu
      if (live) {
        uwarp::MutexLock lock(cma_mu);
        s->qp_destroyed = true;
        if (s->disconnect_requested) queue_disconnected_locked(s);
      }
    }
    {
      uwarp::MutexLock lock(cma_mu);  // the dispatcher reads id->qp (preceding_completions)
      id->qp = nullptr;
    }
    destroy_cqs(id);
  });
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr || attr == nullptr || id->verbs == nullptr) return fail(EINVAL);
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) == 0) return fail(EINVAL);
    if (enum_value(attr->srq_type) != IBV_SRQT_BASIC) {
      std::fprintf(stderr,
                   "uwarp librdmacm: only basic SRQs exist on iWARP (no XRC or tag-matching "
                   "SRQs)\n");
      return fail(EOPNOTSUPP);
    }
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
      attr->pd = id->pd;
      attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    ibv_srq_init_attr basic{};
    basic.srq_context = attr->srq_context;
    basic.attr = attr->attr;
    ibv_srq* srq = ibv_create_srq(attr->pd, &basic);
    if (srq == nullptr) {
      const int e = errno;
      destroy_cqs(id);
      return fail(e);
    }
    attr->attr = basic.attr;
    if (id->pd == nullptr) id->pd = attr->pd;
    id->srq = srq;
    return 0;
  });
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr || attr == nullptr) return fail(EINVAL);
    ibv_srq_init_attr_ex ex{};
    std::memcpy(&ex, attr, sizeof *attr);
    ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    ex.srq_type = IBV_SRQT_BASIC;
    ex.pd = pd;
    const int r = rdma_create_srq_ex(id, &ex);
    std::memcpy(attr, &ex, sizeof *attr);
    return r;
  });
}

void rdma_destroy_srq(rdma_cm_id* id) {
  c_boundary_void([&] {
    if (id == nullptr) return;
    if (id->srq != nullptr) ibv_destroy_srq(id->srq);
    id->srq = nullptr;
    destroy_cqs(id);
  });
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
  return c_boundary(-1, [&]() -> int {
    if (id == nullptr || res == nullptr) return fail(EINVAL);
    if (res->ai_qp_type != 0 && res->ai_qp_type != IBV_QPT_RC) {
      return unsupported_qp_type(res->ai_qp_type);
    }
    rdma_cm_id* cm_id = nullptr;
    const auto ps =
        static_cast<rdma_port_space>(res->ai_port_space != 0 ? res->ai_port_space : RDMA_PS_TCP);
    if (rdma_create_id(nullptr, &cm_id, nullptr, ps) != 0) return -1;
    IdState* s = Id::from(cm_id)->s;
    int r = 0;
    if ((res->ai_flags & RAI_PASSIVE) != 0) {
      r = rdma_bind_addr(cm_id, res->ai_src_addr);
      if (r == 0) {
        if (pd != nullptr) cm_id->pd = pd;
        if (qp_init_attr != nullptr) {
          s->ep_qp_attr = *qp_init_attr;
          s->ep_qp_attr->qp_type = IBV_QPT_RC;
        }
      }
    } else {
      r = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
      if (r == 0) r = rdma_resolve_route(cm_id, 2000);
      if (r == 0 && qp_init_attr != nullptr) {
        qp_init_attr->qp_type = IBV_QPT_RC;
        r = rdma_create_qp(cm_id, pd, qp_init_attr);
      }
      if (r == 0 && res->ai_connect_len != 0 && res->ai_connect != nullptr) {
        const auto* p = static_cast<const std::uint8_t*>(res->ai_connect);
        s->connect_data.assign(p, p + res->ai_connect_len);
      }
    }
    if (r != 0) {
      const int e = errno;
      rdma_destroy_ep(cm_id);
      return fail(e);
    }
    *id = cm_id;
    return 0;
  });
}

void rdma_destroy_ep(rdma_cm_id* id) {
  c_boundary_void([&] {
    if (id == nullptr) return;
    if (id->qp != nullptr) rdma_destroy_qp(id);
    if (id->srq != nullptr) rdma_destroy_srq(id);
    rdma_destroy_id(id);
  });
}

}  // extern "C"
