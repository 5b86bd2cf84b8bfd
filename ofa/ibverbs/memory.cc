// Protection domains, memory registration and memory windows of libibverbs.so.1, over
// uwarp::ProtectionDomain, uwarp::MemoryRegion and uwarp::MemoryWindow.
//
// Access rights: IBV_ACCESS_LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC and MW_BIND map
// one to one onto uwarp::access; remote write or atomic without local write is EINVAL (the
// verbs rule). The optional bits (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING, which
// perftest passes by default) are ignored, as rdma-core does for devices without them.
// HUGETLB is a hint and ignored; ON_DEMAND is on-demand paging (access::kOnDemand; with NULL and
// SIZE_MAX the implicit region over the whole address space); ZERO_BASED (windows) is EOPNOTSUPP.
// Registration pins nothing: the memory stays the application's. ibv_dereg_mr answers EBUSY
// while memory windows are bound in the region (the region stays registered).
//
// Memory windows (the ops table's alloc_mw, dealloc_mw, bind_mw; ibv_alloc_mw and friends are
// static inlines): type 1 and type 2, where uwarp's type 2 is type 2B (bound to the QP the bind
// is posted on). Type 1 binds through ibv_bind_mw (QueuePair::bind_mw), each bind and unbind
// (length 0) moving mw->rkey to the next key; type 2 through IBV_WR_BIND_MW of ibv_post_send
// (queue_pair.cc). A bind takes effect in posting order and completes as IBV_WC_BIND_MW, or
// IBV_WC_MW_BIND_ERR if it breaks the rules (verbs/stag_slot.h).
#include <cstdint>

#include "api/impl.h"
#include "base/faulting_memory.h"
#include "common/boundary.h"
#include "common/errno_map.h"
#include "common/objects.h"
#include "ibverbs/ops.h"

namespace uwarp::ofa {
namespace {

constexpr unsigned kCoreAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                 IBV_ACCESS_MW_BIND;
static_assert(IBV_ACCESS_LOCAL_WRITE == access::kLocalWrite &&
              IBV_ACCESS_REMOTE_WRITE == access::kRemoteWrite &&
              IBV_ACCESS_REMOTE_READ == access::kRemoteRead &&
              IBV_ACCESS_REMOTE_ATOMIC == access::kRemoteAtomic &&
              IBV_ACCESS_MW_BIND == access::kMwBind);

ibv_mr* reg_mr(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova,
               unsigned access_flags) {
  // The implicit on-demand region (NULL, SIZE_MAX): the whole address space.
  const bool implicit = addr == nullptr && length == SIZE_MAX &&
                        (access_flags & IBV_ACCESS_ON_DEMAND) != 0;
  if (pd == nullptr || length == 0 || (addr == nullptr && !implicit)) {
    errno = EINVAL;
    return nullptr;
  }
  access_flags &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  access_flags &= ~static_cast<unsigned>(IBV_ACCESS_HUGETLB);
  if ((access_flags & IBV_ACCESS_ZERO_BASED) != 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((access_flags & ~(kCoreAccess | IBV_ACCESS_ON_DEMAND)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  std::uint32_t core_access = access_flags & kCoreAccess;
  if ((access_flags & IBV_ACCESS_ON_DEMAND) != 0) core_access |= access::kOnDemand;
  OfaPd* p = OfaPd::from(pd);
  auto core = p->core.reg_mr_iova(addr, length, iova, core_access);  // implicit: the core's iova 0
  if (!core) {
    errno = to_errno(core.error());
    return nullptr;
  }
  auto* m = new OfaMr(std::move(*core));
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.addr = addr;
  m->ibv.length = length;
  m->ibv.handle = m->core.lkey();
  m->ibv.lkey = m->core.lkey();
  m->ibv.rkey = m->core.rkey();
  p->users.fetch_add(1);
  return &m->ibv;
}

}  // namespace

bool window_rights(unsigned mw_access_flags, std::uint32_t& rights) {
  // Local write means nothing for a window (its memory is written through the region);
  // rdma-core's providers ignore it, and rdma-core's own tests pass it.
  mw_access_flags &= ~static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE);
  constexpr unsigned kWindowRights =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if ((mw_access_flags & ~kWindowRights) != 0) return false;  // ZERO_BASED, MW_BIND, ...
  rights = mw_access_flags;  // the same bits as access:: (static_assert above)
  return true;
}

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
              std::uint32_t num_sges) {
  if (pd == nullptr || sg_list == nullptr || num_sges == 0) return EINVAL;
  if ((flags & ~static_cast<std::uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0) return EINVAL;
  const auto& p = detail::Access::impl(OfaPd::from(pd)->core);
  const bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
  for (std::uint32_t i = 0; i < num_sges; ++i) {
    const ibv_sge& s = sg_list[i];
    // Only regions of this PD registered for on-demand paging take advice.
    const verbs::MemoryRegionRef mr = p->ctx->device.stags().find(s.lkey);
    if (!mr || mr->pd != &p->pd || !mr->on_demand() || verbs::is_window(mr->kind)) return EINVAL;
    auto r = mr->resolve(&p->pd, nullptr, s.addr, s.length, write ? access::kLocalWrite : 0);
    if (!r) return EINVAL;
    // Prefetching is done before the call returns, IBV_ADVISE_MR_FLAG_FLUSH or not; NO_FAULT
    // would bring in only pages present already, which is nothing to do here.
    if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) continue;
    if (!prefault(*r, write ? Prefault::kWrite : Prefault::kRead)) return EFAULT;
  }
  return 0;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  return c_boundary<ibv_mw*>(nullptr, [&]() -> ibv_mw* {
    const int t = enum_value(type);
    if (pd == nullptr || (t != IBV_MW_TYPE_1 && t != IBV_MW_TYPE_2)) {
      errno = EINVAL;
      return nullptr;
    }
    OfaPd* p = OfaPd::from(pd);
    auto core = p->core.alloc_mw(t == IBV_MW_TYPE_1 ? WindowType::kType1 : WindowType::kType2);
    if (!core) {
      errno = to_errno(core.error());
      return nullptr;
    }
    auto* m = new OfaMw(std::move(*core));
    m->ibv.context = pd->context;
    m->ibv.pd = pd;
    m->ibv.rkey = m->core.rkey();
    m->ibv.handle = static_cast<std::uint32_t>(OfaContext::from(pd->context)->next_id.fetch_add(1));
    m->ibv.type = type;
    p->users.fetch_add(1);
    return &m->ibv;
  });
}

int dealloc_mw(ibv_mw* mw) {
  if (mw == nullptr) return EINVAL;
  OfaPd::from(mw->pd)->users.fetch_sub(1);
  delete OfaMw::from(mw);  // a binding still valid is invalidated: peers are refused from now on
  return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  // The inline ibv_bind_mw has checked: type 1, a region unless unbinding, the same PD.
  if (qp == nullptr || mw == nullptr || bind == nullptr) return EINVAL;
  return c_boundary<int>(ENOMEM, [&] {
    const ibv_mw_bind_info& info = bind->bind_info;
    std::uint32_t rights = 0;
    if (!window_rights(info.mw_access_flags, rights)) return EINVAL;
    if ((bind->send_flags & ~static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE)) != 0) {
      return EINVAL;
    }
    std::uint32_t flags = 0;
    if ((bind->send_flags & IBV_SEND_SIGNALED) != 0) flags |= send_flags::kSignaled;
    if ((bind->send_flags & IBV_SEND_FENCE) != 0) flags |= send_flags::kFence;
    QueuePair& q = OfaQp::from(qp)->core;
    OfaMw* m = OfaMw::from(mw);
    if (info.length > UINT32_MAX) return EINVAL;  // a range is 32 bits long in the core
    if (info.mr != nullptr) {
      const Sge range{info.addr, static_cast<std::uint32_t>(info.length), 0};
      auto rkey = q.bind_mw(m->core, OfaMr::from(info.mr)->core, range, rights, bind->wr_id, flags);
      if (!rkey) return to_errno(rkey.error());
      mw->rkey = *rkey;
      return 0;
    }
    // An unbind without a region (length 0): the request QueuePair::bind_mw posts, naming none.
    const std::uint32_t next = detail::Access::impl(m->core)->slot->next_type1_stag();
    const Sge none{0, 0, 0};
    SendWr wr;
    wr.wr_id = bind->wr_id;
    wr.opcode = WrOpcode::kBindWindow;
    wr.sg_list = std::span<const Sge>(&none, 1);
    wr.flags = flags;
    wr.rkey = next;
    if (Status s = q.post_send(wr); !s) return to_errno(s);
    mw->rkey = next;
    return 0;
  });
}

}  // namespace uwarp::ofa

using namespace uwarp::ofa;

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  return c_boundary<ibv_pd*>(nullptr, [&]() -> ibv_pd* {
    OfaContext* c = OfaContext::from(context);
    if (c == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    auto core = c->core.alloc_pd();
    if (!core) {
      errno = to_errno(core.error());
      return nullptr;
    }
    auto* p = new OfaPd(std::move(*core));
    p->ibv.context = context;
    p->ibv.handle = static_cast<std::uint32_t>(c->next_id.fetch_add(1));
    return &p->ibv;
  });
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (pd == nullptr) return EINVAL;
  OfaPd* p = OfaPd::from(pd);
  if (p->users.load() != 0) return EBUSY;
  delete p;
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  return c_boundary<ibv_mr*>(nullptr, [&] { return reg_mr(pd, addr, length, iova, access); });
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  OfaMr* m = OfaMr::from(mr);
  // Later accesses by peers are refused; EBUSY (and still registered) while windows are bound.
  if (uwarp::Status s = m->core.deregister(); !s) return to_errno(s);
  OfaPd::from(mr->pd)->users.fetch_sub(1);
  delete m;
  return 0;
}

}  // extern "C"
