// Queue pairs and shared receive queues of libibverbs.so.1, over uwarp::QueuePair and
// uwarp::SharedReceiveQueue: creation, the state machine as ibv_modify_qp exposes it, queries,
// and the posting entry points of the ops table (ibv_post_send/recv/srq_recv are static inline
// and call them).
//
// Only RC exists on iWARP: UD, UC, XRC and raw QPs fail with EOPNOTSUPP. A QP is created in
// RESET. RESET -> INIT -> ERR/RESET work without a connection; RTR and RTS are entered by the
// connection manager (librdmacm's rdma_connect/rdma_accept bind a connection through
// uwarp_ofa.h and the QP enters RTS when the MPA exchange completes). ibv_modify_qp to RTR or
// RTS therefore succeeds without effect once a connection is bound, and fails with EINVAL
// before (the QP has no peer yet).
//
// Posting follows ibv_post_send(3): on the first work request that cannot be posted, *bad_wr
// points at it and the errno value is returned (EINVAL: bad opcode, flags, SGE count, QP state,
// inline data longer than the device maximum; ENOMEM: queue full); the requests before it are
// posted. IBV_SEND_INLINE is accepted up to the device maximum whatever max_inline_data the QP
// was created with. Supported opcodes: SEND, SEND_WITH_INV, RDMA_WRITE, RDMA_READ and
// RDMA_WRITE_WITH_IMM (RFC 7306: the Write, then an Immediate Data message whose first four bytes
// are imm_data as the application stored it, network order), ATOMIC_FETCH_AND_ADD and
// ATOMIC_CMP_AND_SWP (RFC 7306 Atomic Requests; one 8-byte SGE, an 8-byte aligned remote_addr:
// docs/atomics.md). SEND_WITH_IMM fails with EINVAL:
// RFC 7306 defines no Send that carries immediate data (docs/immediate-data.md).
// IBV_WR_BIND_MW binds a type 2 window (type 1: ibv_bind_mw, EINVAL here) as bind_mw.rkey, the
// key the application chose (normally ibv_inc_rkey(mw->rkey)), over bind_info; mw->rkey becomes
// that STag once the request is posted. IBV_WR_LOCAL_INV invalidates invalidate_rkey (a type 2
// window). Both take effect in posting order (memory.cc, verbs/stag_slot.h).
#include <arpa/inet.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "api/impl.h"
#include "common/boundary.h"
#include "common/errno_map.h"
#include "common/objects.h"
#include "common/receive_wait.h"
#include "common/uwarp_ofa.h"
#include "ibverbs/ops.h"

namespace uwarp::ofa {
namespace {

constexpr unsigned kSendFlags =
    IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
constexpr std::size_t kStackSges = 16;

// SGEs of one work request, copied into the core's layout (on the stack unless there are many:
// only inline sends may have more SGEs than the device maximum).
class SgeList {
 public:
  // False if the list is malformed.
  bool assign(const ibv_sge* sg_list, int num_sge) {
    if (num_sge < 0 || (num_sge > 0 && sg_list == nullptr)) return false;
    const auto n = static_cast<std::size_t>(num_sge);
    Sge* out = stack_.data();
    if (n > stack_.size()) {
      heap_.resize(n);
      out = heap_.data();
    }
    for (std::size_t i = 0; i < n; ++i)
      out[i] = Sge{sg_list[i].addr, sg_list[i].length, sg_list[i].lkey};
    span_ = std::span<const Sge>(out, n);
    return true;
  }
  // Exactly one SGE (a window's range); false if its length does not fit the core's 32 bits.
  bool assign_one(std::uint64_t addr, std::uint64_t length, std::uint32_t lkey) {
    if (length > UINT32_MAX) return false;
    stack_[0] = Sge{addr, static_cast<std::uint32_t>(length), lkey};
    span_ = std::span<const Sge>(stack_.data(), 1);
    return true;
  }
  std::span<const Sge> span() const { return span_; }

 private:
  std::array<Sge, kStackSges> stack_;
  std::vector<Sge> heap_;
  std::span<const Sge> span_;
};

// Converts one work request (its SGEs into `sges`, which must outlive `w`); an errno value if
// it cannot be posted.
int convert_send(const ibv_send_wr& wr, SendWr& w, SgeList& sges) {
  w.wr_id = wr.wr_id;
  const int opcode = enum_value(wr.opcode);
  switch (opcode) {
    case IBV_WR_SEND:
      w.opcode = WrOpcode::kSend;
      break;
    case IBV_WR_SEND_WITH_INV:
      w.opcode = WrOpcode::kSendWithInvalidate;
      w.invalidate_rkey = wr.invalidate_rkey;
      break;
    case IBV_WR_RDMA_WRITE:
      w.opcode = WrOpcode::kRdmaWrite;
      w.remote_addr = wr.wr.rdma.remote_addr;
      w.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_RDMA_READ:
      w.opcode = WrOpcode::kRdmaRead;
      w.remote_addr = wr.wr.rdma.remote_addr;
      w.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      w.opcode = WrOpcode::kRdmaWriteWithImm;
      w.remote_addr = wr.wr.rdma.remote_addr;
      w.rkey = wr.wr.rdma.rkey;
      w.imm_data = ntohl(wr.imm_data);  // __be32: the core sends it big-endian again
      break;
    case IBV_WR_BIND_MW: {
      const ibv_mw_bind_info& info = wr.bind_mw.bind_info;
      if (wr.bind_mw.mw == nullptr || enum_value(wr.bind_mw.mw->type) != IBV_MW_TYPE_2 ||
          info.mr == nullptr || !window_rights(info.mw_access_flags, w.access)) {
        return EINVAL;
      }
      w.opcode = WrOpcode::kBindWindow;
      w.rkey = wr.bind_mw.rkey;
      // The range, in the region's address space, and the region by its lkey: the core's form.
      if (!sges.assign_one(info.addr, info.length, info.mr->lkey)) return EINVAL;
      break;
    }
    case IBV_WR_LOCAL_INV:
      w.opcode = WrOpcode::kLocalInvalidate;
      w.invalidate_rkey = wr.invalidate_rkey;
      break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      w.opcode = opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? WrOpcode::kAtomicFetchAdd
                                                       : WrOpcode::kAtomicCompareSwap;
      w.remote_addr = wr.wr.atomic.remote_addr;
      w.rkey = wr.wr.atomic.rkey;
      w.compare_add = wr.wr.atomic.compare_add;
      w.swap = wr.wr.atomic.swap;
      break;
    default:
      return EINVAL;  // Send with immediate, TSO, masked atomics: not on uwarp
  }
  if ((wr.send_flags & ~kSendFlags) != 0) return EINVAL;
  if ((wr.send_flags & IBV_SEND_INLINE) != 0 &&
      (opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
       opcode == IBV_WR_ATOMIC_CMP_AND_SWP)) {
    return EINVAL;
  }
  w.flags = 0;
  if ((wr.send_flags & IBV_SEND_SIGNALED) != 0) w.flags |= send_flags::kSignaled;
  if ((wr.send_flags & IBV_SEND_SOLICITED) != 0) w.flags |= send_flags::kSolicited;
  if ((wr.send_flags & IBV_SEND_INLINE) != 0) w.flags |= send_flags::kInline;
  if ((wr.send_flags & IBV_SEND_FENCE) != 0) w.flags |= send_flags::kFence;
  if (opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV) {
    if ((wr.send_flags & IBV_SEND_INLINE) != 0) return EINVAL;
    w.sg_list = sges.span();  // the range of a bind; none for an invalidation (wr.sg_list unused)
    return 0;
  }
  try {
    if (!sges.assign(wr.sg_list, wr.num_sge)) return EINVAL;
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  w.sg_list = sges.span();
  return 0;
}

// What a request does to the application's objects once posted: a bind gives mw->rkey the STag
// the window will have (rdma-core's providers set it at post time too).
void note_posted(const ibv_send_wr& wr) {
  if (enum_value(wr.opcode) == IBV_WR_BIND_MW) wr.bind_mw.mw->rkey = wr.bind_mw.rkey;
}

// A list of requests goes to the core in chunks of this many, each chunk one post (so its
// messages leave together); a single request needs no chunk.
constexpr std::size_t kPostChunk = 8;

int post_send_list(QueuePair& qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (wr != nullptr && wr->next == nullptr) {
    SendWr w;
    SgeList sges;
    int err = convert_send(*wr, w, sges);
    if (err == 0) {
      const Status s = qp.post_send(w);
      err = s ? 0 : to_errno(s);
    }
    if (err == 0) note_posted(*wr);
    if (err != 0 && bad_wr != nullptr) *bad_wr = wr;
    return err;
  }
  std::array<SendWr, kPostChunk> ws;
  std::array<SgeList, kPostChunk> sges;
  std::array<ibv_send_wr*, kPostChunk> from;
  while (wr != nullptr) {
    std::size_t n = 0;
    int convert_err = 0;
    for (; wr != nullptr && n < kPostChunk; wr = wr->next) {
      ws[n] = SendWr{};
      convert_err = convert_send(*wr, ws[n], sges[n]);
      if (convert_err != 0) break;
      from[n++] = wr;
    }
    if (n > 0) {
      std::size_t posted = 0;
      const Status s = qp.post_send(std::span<const SendWr>(ws.data(), n), &posted);
      for (std::size_t i = 0; i < (s ? n : posted); ++i) note_posted(*from[i]);
      if (!s) {
        if (bad_wr != nullptr) *bad_wr = from[std::min(posted, n - 1)];
        return to_errno(s);
      }
    }
    if (convert_err != 0) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return convert_err;
    }
  }
  return 0;
}

template <typename PostFn>
int post_recv_list(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, PostFn post) {
  for (; wr != nullptr; wr = wr->next) {
    SgeList sges;
    int err = EINVAL;
    if (sges.assign(wr->sg_list, wr->num_sge)) {
      const Status s = post(RecvWr{wr->wr_id, sges.span()});
      err = s ? 0 : to_errno(s);
    }
    if (err != 0) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return err;
    }
  }
  return 0;
}

std::optional<QpState> core_state(int s) {
  switch (s) {
    case IBV_QPS_RESET:
      return QpState::kReset;
    case IBV_QPS_INIT:
      return QpState::kInit;
    case IBV_QPS_RTR:
      return QpState::kRtr;
    case IBV_QPS_RTS:
      return QpState::kRts;
    case IBV_QPS_SQD:
      return QpState::kSqd;
    case IBV_QPS_SQE:
      return QpState::kSqe;
    case IBV_QPS_ERR:
      return QpState::kError;
    default:
      return std::nullopt;
  }
}

ibv_qp_state ibv_state(QpState s) {
  switch (s) {
    case QpState::kReset:
      return IBV_QPS_RESET;
    case QpState::kInit:
      return IBV_QPS_INIT;
    case QpState::kRtr:
      return IBV_QPS_RTR;
    case QpState::kRts:
      return IBV_QPS_RTS;
    case QpState::kSqd:
      return IBV_QPS_SQD;
    case QpState::kSqe:
      return IBV_QPS_SQE;
    case QpState::kError:
      return IBV_QPS_ERR;
  }
  return IBV_QPS_UNKNOWN;
}

ibv_qp* create_qp(OfaContext& c, ibv_pd* pd, ibv_qp_init_attr& attr) {
  if (enum_value(attr.qp_type) != IBV_QPT_RC) {
    errno = EOPNOTSUPP;  // iWARP has reliable connected QPs only
    return nullptr;
  }
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr || attr.send_cq->context != pd->context ||
      attr.recv_cq->context != pd->context ||
      (attr.srq != nullptr && attr.srq->context != pd->context)) {
    errno = EINVAL;
    return nullptr;
  }
  OfaPd* p = OfaPd::from(pd);
  OfaCq* send_cq = OfaCq::from(attr.send_cq);
  OfaCq* recv_cq = OfaCq::from(attr.recv_cq);
  OfaSrq* srq = attr.srq != nullptr ? OfaSrq::from(attr.srq) : nullptr;
  const std::uint64_t id = c.next_id.fetch_add(1);
  QpInitAttr ia;
  ia.send_cq = &*send_cq->core;
  ia.recv_cq = &*recv_cq->core;
  ia.srq = srq != nullptr ? &srq->core : nullptr;
  // Zero SGEs or send WRs would make the QP useless; providers round such requests up.
  ia.caps.max_send_wr = std::max(attr.cap.max_send_wr, 1u);
  ia.caps.max_recv_wr = srq != nullptr ? 0 : attr.cap.max_recv_wr;
  ia.caps.max_send_sge = std::max(attr.cap.max_send_sge, 1u);
  ia.caps.max_recv_sge = srq != nullptr ? 1 : std::max(attr.cap.max_recv_sge, 1u);
  ia.caps.max_inline_data = attr.cap.max_inline_data;
  ia.signal_all = attr.sq_sig_all != 0;
  ia.user_context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(id));
  // The device's state is INIT from creation, as Linux siw reports it (ibv_query_qp); the
  // ibv_qp's own `state` field starts at RESET, as libibverbs sets it (rdma-core's tests check
  // both: test_qp.py, node type RNIC).
  ia.start_in_reset = false;
  auto core = p->core.create_qp(ia);
  if (!core) {
    errno = to_errno(core.error());
    return nullptr;
  }
  auto* q = new OfaQp(std::move(*core));
  q->id = id;
  // Report what the QP accepts: inline data up to the device maximum, whatever was asked.
  attr.cap.max_send_wr = ia.caps.max_send_wr;
  attr.cap.max_recv_wr = ia.caps.max_recv_wr;
  attr.cap.max_send_sge = ia.caps.max_send_sge;
  attr.cap.max_recv_sge = srq != nullptr ? 0 : ia.caps.max_recv_sge;
  attr.cap.max_inline_data = c.core.limits().max_inline_data;
  q->cap = attr.cap;
  q->sq_sig_all = attr.sq_sig_all != 0;
  ibv_qp& i = q->ibv;
  i.context = pd->context;
  i.qp_context = attr.qp_context;
  i.pd = pd;
  i.send_cq = attr.send_cq;
  i.recv_cq = attr.recv_cq;
  i.srq = attr.srq;
  i.handle = static_cast<std::uint32_t>(id);
  i.qp_num = q->core.qp_num();
  i.state = IBV_QPS_RESET;
  i.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&i.mutex, nullptr);
  pthread_cond_init(&i.cond, nullptr);
  i.events_completed = 0;
  p->users.fetch_add(1);
  send_cq->qp_users.fetch_add(1);
  recv_cq->qp_users.fetch_add(1);
  if (srq != nullptr) srq->qp_users.fetch_add(1);
  MutexLock lock(c.objects_mu);
  c.qps.emplace(id, q);
  return &q->ibv;
}

int modify_qp(OfaQp& q, const ibv_qp_attr& attr, int mask) {
  OfaContext* c = OfaContext::from(q.ibv.context);
  const DeviceLimits& lim = c->core.limits();
  if ((mask & IBV_QP_PORT) != 0 && attr.port_num != kPortNum) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) != 0 && attr.pkey_index != 0) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0 && attr.max_rd_atomic > lim.max_qp_init_rd_atom) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0 && attr.max_dest_rd_atomic > lim.max_qp_rd_atom) {
    return EINVAL;
  }
  if ((mask & IBV_QP_CAP) != 0) return EINVAL;  // queues are not resized
  // ON_DEMAND is a region's property; programs that pass one access mask for both (rdma-core's
  // ODP tests) have it ignored here, as the kernel's drivers ignore it.
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0 &&
      (attr.qp_access_flags &
       ~static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                              IBV_ACCESS_ON_DEMAND)) != 0) {
    return EINVAL;
  }
  if ((mask & IBV_QP_STATE) != 0) {
    const int requested = enum_value(attr.qp_state);
    const std::optional<QpState> target = core_state(requested);
    if (!target) return EINVAL;
    const QpState now = q.core.state();
    if (*target == QpState::kRts && (now == QpState::kSqd || now == QpState::kSqe)) {
      if (Status s = q.core.modify_state(*target); !s) return to_errno(s);  // resume sending
    } else if (*target == QpState::kRtr || *target == QpState::kRts) {
      // The connection manager drives these; without a connection there is no peer.
      if (!qp_has_connection(&q.ibv) && now != QpState::kRts) return EINVAL;
    } else if (Status s = q.core.modify_state(*target); !s) {
      return to_errno(s);
    }
    q.ibv.state = static_cast<ibv_qp_state>(requested);  // valid: core_state knew it
  }
  MutexLock lock(q.attr_mu);
  QpAttributes& a = q.attr;
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0) {
    a.qp_access_flags = attr.qp_access_flags & ~static_cast<unsigned>(IBV_ACCESS_ON_DEMAND);
  }
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0) a.max_rd_atomic = attr.max_rd_atomic;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0) a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if ((mask & IBV_QP_PATH_MTU) != 0) a.path_mtu = enum_value(attr.path_mtu);
  if ((mask & IBV_QP_TIMEOUT) != 0) a.timeout = attr.timeout;
  if ((mask & IBV_QP_RETRY_CNT) != 0) a.retry_cnt = attr.retry_cnt;
  if ((mask & IBV_QP_RNR_RETRY) != 0) a.rnr_retry = attr.rnr_retry;
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0) a.min_rnr_timer = attr.min_rnr_timer;
  if ((mask & (IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER)) != 0) {
    q.core.set_receive_wait(receive_wait_for(a.rnr_retry, a.min_rnr_timer));
  }
  if ((mask & IBV_QP_SQ_PSN) != 0) a.sq_psn = attr.sq_psn;
  if ((mask & IBV_QP_RQ_PSN) != 0) a.rq_psn = attr.rq_psn;
  return 0;
}

}  // namespace

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  QueuePair& core = OfaQp::from(qp)->core;
  // Running out of memory fails the request it hit (ENOMEM, as a full queue): the conversion
  // and the core's list post catch it per request. Anything else thrown fails the first.
  const int err = c_boundary<int>(-1, [&] { return post_send_list(core, wr, bad_wr); });
  if (err != -1) return err;
  if (bad_wr != nullptr) *bad_wr = wr;
  return ENOMEM;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  QueuePair& core = OfaQp::from(qp)->core;
  return c_boundary<int>(ENOMEM, [&] {
    return post_recv_list(wr, bad_wr, [&](const RecvWr& w) { return core.post_recv(w); });
  });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  SharedReceiveQueue& core = OfaSrq::from(srq)->core;
  return c_boundary<int>(ENOMEM, [&] {
    return post_recv_list(wr, bad_wr, [&](const RecvWr& w) { return core.post_recv(w); });
  });
}

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  return c_boundary<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    OfaContext* c = OfaContext::from(context);
    if (c == nullptr || attr == nullptr || (attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 ||
        attr->pd == nullptr || attr->pd->context != context) {
      errno = EINVAL;
      return nullptr;
    }
    const std::uint32_t supported =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    const bool extended = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if ((attr->comp_mask & ~supported) != 0 ||
        ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr->create_flags != 0) ||
        (extended && (attr->send_ops_flags & ~kSendOpsFlags) != 0)) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
    // ibv_qp_init_attr is the leading part of ibv_qp_init_attr_ex (rdma-core relies on it too).
    ibv_qp_init_attr plain{};
    plain.qp_context = attr->qp_context;
    plain.send_cq = attr->send_cq;
    plain.recv_cq = attr->recv_cq;
    plain.srq = attr->srq;
    plain.cap = attr->cap;
    plain.qp_type =
        enum_value(attr->qp_type) == IBV_QPT_RC ? IBV_QPT_RC : IBV_QPT_UD;  // UD: refused
    plain.sq_sig_all = attr->sq_sig_all;
    ibv_qp* qp = create_qp(*c, attr->pd, plain);
    if (qp == nullptr) return nullptr;
    attr->cap = plain.cap;
    if (extended) make_extended(*OfaQp::from(qp));
    return qp;
  });
}

}  // namespace uwarp::ofa

using namespace uwarp::ofa;

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return c_boundary<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    OfaContext* c = pd != nullptr ? OfaContext::from(pd->context) : nullptr;
    if (c == nullptr || qp_init_attr == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    return create_qp(*c, pd, *qp_init_attr);
  });
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  return c_boundary<int>(ENOMEM, [&] { return modify_qp(*OfaQp::from(qp), *attr, attr_mask); });
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  (void)attr_mask;  // everything is cheap to report
  if (qp == nullptr || attr == nullptr || init_attr == nullptr) return EINVAL;
  OfaQp* q = OfaQp::from(qp);
  std::memset(attr, 0, sizeof *attr);
  std::memset(init_attr, 0, sizeof *init_attr);
  const ibv_qp_state state = ibv_state(q->core.state());
  qp->state = state;
  attr->qp_state = state;
  attr->cur_qp_state = state;
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->cap = q->cap;
  attr->port_num = kPortNum;
  attr->pkey_index = 0;
  {
    uwarp::MutexLock lock(q->attr_mu);
    const QpAttributes a = q->attr;                                // a copy, taken under the lock
    std::memcpy(&attr->path_mtu, &a.path_mtu, sizeof a.path_mtu);  // as the application set it
    attr->qp_access_flags = a.qp_access_flags;
    attr->max_rd_atomic = a.max_rd_atomic;
    attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr->timeout = a.timeout;
    attr->retry_cnt = a.retry_cnt;
    attr->rnr_retry = a.rnr_retry;
    attr->min_rnr_timer = a.min_rnr_timer;
    attr->sq_psn = a.sq_psn;
    attr->rq_psn = a.rq_psn;
  }
  // Once connected, the negotiated ORD and IRD.
  if (const std::uint16_t ord = q->core.ord(); ord != 0) {
    attr->max_rd_atomic = static_cast<std::uint8_t>(std::min<int>(ord, 255));
  }
  if (const std::uint16_t ird = q->core.ird(); ird != 0) {
    attr->max_dest_rd_atomic = static_cast<std::uint8_t>(std::min<int>(ird, 255));
  }
  init_attr->qp_context = qp->qp_context;
  init_attr->send_cq = qp->send_cq;
  init_attr->recv_cq = qp->recv_cq;
  init_attr->srq = qp->srq;
  init_attr->cap = q->cap;
  init_attr->qp_type = IBV_QPT_RC;
  init_attr->sq_sig_all = q->sq_sig_all ? 1 : 0;
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  if (qp == nullptr) return EINVAL;
  OfaQp* q = OfaQp::from(qp);
  OfaContext* c = OfaContext::from(qp->context);
  {
    // From here on, async events of this QP are dropped instead of delivered.
    uwarp::MutexLock lock(c->objects_mu);
    c->qps.erase(q->id);
  }
  pthread_mutex_lock(&qp->mutex);
  while (qp->events_completed != q->events_delivered) pthread_cond_wait(&qp->cond, &qp->mutex);
  pthread_mutex_unlock(&qp->mutex);
  const std::uint32_t qp_num = qp->qp_num;
  OfaPd* pd = OfaPd::from(qp->pd);
  OfaCq* send_cq = OfaCq::from(qp->send_cq);
  OfaCq* recv_cq = OfaCq::from(qp->recv_cq);
  OfaSrq* srq = qp->srq != nullptr ? OfaSrq::from(qp->srq) : nullptr;
  pthread_cond_destroy(&qp->cond);
  pthread_mutex_destroy(&qp->mutex);
  delete q;  // the core QP aborts its connection, if any
  // Its completions not yet polled go with it: their wr_ids name buffers the application frees
  // with the QP (mlx5 and other providers clean a destroyed QP's completions from its CQs too).
  uwarp::detail::Access::impl(*send_cq->core)->cq.purge(qp_num);
  if (recv_cq != send_cq) uwarp::detail::Access::impl(*recv_cq->core)->cq.purge(qp_num);
  pd->users.fetch_sub(1);
  send_cq->qp_users.fetch_sub(1);
  recv_cq->qp_users.fetch_sub(1);
  if (srq != nullptr) srq->qp_users.fetch_sub(1);
  return 0;
}

int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) {
  (void)op;
  // One TCP stream per QP, placed in order: every operation's data lands in order.
  return qp != nullptr && flags == 0 ? 1 : 0;
}

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
  return c_boundary<ibv_srq*>(nullptr, [&]() -> ibv_srq* {
    OfaContext* c = pd != nullptr ? OfaContext::from(pd->context) : nullptr;
    if (c == nullptr || srq_init_attr == nullptr || srq_init_attr->attr.max_wr == 0) {
      errno = EINVAL;
      return nullptr;
    }
    OfaPd* p = OfaPd::from(pd);
    const std::uint32_t max_wr = srq_init_attr->attr.max_wr;
    const std::uint32_t max_sge = std::max(srq_init_attr->attr.max_sge, 1u);
    auto core = p->core.create_srq(max_wr, max_sge, srq_init_attr->srq_context);
    if (!core) {
      errno = to_errno(core.error());
      return nullptr;
    }
    auto* s = new OfaSrq(std::move(*core));
    s->max_wr = max_wr;
    s->max_sge = max_sge;
    srq_init_attr->attr.max_wr = max_wr;
    srq_init_attr->attr.max_sge = max_sge;
    s->ibv.context = pd->context;
    s->ibv.srq_context = srq_init_attr->srq_context;
    s->ibv.pd = pd;
    s->ibv.handle = static_cast<std::uint32_t>(c->next_id.fetch_add(1));
    pthread_mutex_init(&s->ibv.mutex, nullptr);
    pthread_cond_init(&s->ibv.cond, nullptr);
    p->users.fetch_add(1);
    return &s->ibv;
  });
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
  if (srq == nullptr || srq_attr == nullptr) return EINVAL;
  OfaSrq* s = OfaSrq::from(srq);
  if ((srq_attr_mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) != 0) return EINVAL;
  if ((srq_attr_mask & IBV_SRQ_MAX_WR) != 0) return EOPNOTSUPP;  // no resizing (as Linux siw)
  if ((srq_attr_mask & IBV_SRQ_LIMIT) != 0) {
    if (srq_attr->srq_limit > s->max_wr) return EINVAL;
    s->core.arm_limit(srq_attr->srq_limit);
  }
  return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) {
  if (srq == nullptr || srq_attr == nullptr) return EINVAL;
  OfaSrq* s = OfaSrq::from(srq);
  srq_attr->max_wr = s->max_wr;
  srq_attr->max_sge = s->max_sge;
  srq_attr->srq_limit = uwarp::detail::Access::impl(s->core)->rq.limit();
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (srq == nullptr) return EINVAL;
  OfaSrq* s = OfaSrq::from(srq);
  if (s->qp_users.load() != 0) return EBUSY;
  pthread_mutex_lock(&srq->mutex);
  while (srq->events_completed != s->events_delivered) pthread_cond_wait(&srq->cond, &srq->mutex);
  pthread_mutex_unlock(&srq->mutex);
  OfaPd::from(srq->pd)->users.fetch_sub(1);
  pthread_cond_destroy(&srq->cond);
  pthread_mutex_destroy(&srq->mutex);
  delete s;
  return 0;
}

}  // extern "C"
