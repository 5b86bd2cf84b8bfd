// Protection domains and memory registration of libibverbs.so.1, over uwarp::ProtectionDomain
// and uwarp::MemoryRegion.
//
// Access rights: IBV_ACCESS_LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC and MW_BIND map
// one to one onto uwarp::access; remote write or atomic without local write is EINVAL (the
// verbs rule). The optional bits (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING, which
// perftest passes by default) are ignored, as rdma-core does for devices without them.
// HUGETLB is a hint and ignored; ON_DEMAND (paging) and ZERO_BASED (windows) are EOPNOTSUPP.
// Registration pins nothing: the memory stays the application's.
#include <cstdint>

#include "common/boundary.h"
#include "common/errno_map.h"
#include "common/objects.h"

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
  if (pd == nullptr || length == 0 || addr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  access_flags &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  access_flags &= ~static_cast<unsigned>(IBV_ACCESS_HUGETLB);
  if ((access_flags & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_ZERO_BASED)) != 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((access_flags & ~kCoreAccess) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  OfaPd* p = OfaPd::from(pd);
  auto core = p->core.reg_mr_iova(addr, length, iova, access_flags);
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
  OfaPd::from(mr->pd)->users.fetch_sub(1);
  delete m;  // deregisters: later accesses by peers are refused
  return 0;
}

}  // extern "C"
