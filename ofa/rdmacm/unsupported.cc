// librdmacm.so.1: the calls that cannot work on iWARP. They fail cleanly (never crash or hang)
// with a message on stderr, so that programs such as mckey say why they stop.
//
// Exports: rdma_join_multicast, rdma_join_multicast_ex, rdma_leave_multicast (multicast needs UD
// QPs: ENOSYS), rdma_set_local_ece and rdma_get_remote_ece (ECE is an InfiniBand CM feature:
// EOPNOTSUPP).
#include <cerrno>
#include <cstdio>

#include "rdmacm/cma.h"

namespace uwarp::rdmacm {
namespace {

int no_multicast() {
  std::fprintf(stderr,
               "uwarp librdmacm: multicast is not supported on iWARP (it needs UD QPs, which "
               "iWARP does not have)\n");
  return fail(ENOSYS);
}

}  // namespace
}  // namespace uwarp::rdmacm

using namespace uwarp::rdmacm;

extern "C" {

int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  (void)id, (void)addr, (void)context;
  return no_multicast();
}

int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  (void)id, (void)mc_join_attr, (void)context;
  return no_multicast();
}

int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  (void)id, (void)addr;
  return fail(EADDRNOTAVAIL);  // nothing was ever joined
}

int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  (void)id, (void)ece;
  return fail(EOPNOTSUPP);
}

int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  (void)id, (void)ece;
  return fail(EOPNOTSUPP);
}

}  // extern "C"
