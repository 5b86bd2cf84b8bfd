// The exports of libibverbs.so.1 that uwarp does not implement, as harmless stubs: the Debian
// binaries are linked BIND_NOW, so every symbol they, librdmacm.so.1 or the providers perftest
// loads (libmlx5.so.1, libefa.so.1) import must exist, even if never called.
//
// Public verbs: address handles, multicast, ECE, import/export, dma-buf and
// re-registration fail as rdma-core documents for an unsupported operation (NULL or an error
// with errno EOPNOTSUPP). IBVERBS_PRIVATE_34 (the provider interface): the providers' load-time
// constructor calls verbs_register_driver_34, a no-op here, so they never match a device;
// everything else returns EOPNOTSUPP or NULL and is never reached.
#include <cerrno>
#include <cstdint>

#include "common/verbs_api.h"
#include "ibverbs/ops.h"

namespace uwarp::ofa {

namespace {
template <typename T>
T* fail_null() {
  errno = EOPNOTSUPP;
  return nullptr;
}
}  // namespace

}  // namespace uwarp::ofa

using uwarp::ofa::fail_null;

extern "C" {

// --- IBVERBS_1.1 and later: public verbs uwarp does not offer -------------------------------

ibv_ah* ibv_create_ah(ibv_pd* /*pd*/, ibv_ah_attr* /*attr*/) {
  return fail_null<ibv_ah>();
}
ibv_ah* ibv_create_ah_from_wc(ibv_pd* /*pd*/, ibv_wc* /*wc*/, ibv_grh* /*grh*/, uint8_t /*port*/) {
  return fail_null<ibv_ah>();
}
int ibv_init_ah_from_wc(ibv_context* /*context*/, uint8_t /*port_num*/, ibv_wc* /*wc*/,
                        ibv_grh* /*grh*/, ibv_ah_attr* /*ah_attr*/) {
  errno = EOPNOTSUPP;
  return -1;
}
int ibv_destroy_ah(ibv_ah* /*ah*/) {
  return EOPNOTSUPP;
}
int ibv_attach_mcast(ibv_qp* /*qp*/, const ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return EOPNOTSUPP;
}
int ibv_detach_mcast(ibv_qp* /*qp*/, const ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return EOPNOTSUPP;
}
int ibv_resolve_eth_l2_from_gid(ibv_context* /*context*/, ibv_ah_attr* /*attr*/,
                                uint8_t* /*eth_mac*/, uint16_t* /*vid*/) {
  return EOPNOTSUPP;
}
int ibv_rereg_mr(ibv_mr* /*mr*/, int /*flags*/, ibv_pd* /*pd*/, void* /*addr*/, size_t /*length*/,
                 int /*access*/) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;  // the old MR stays valid
}
ibv_context* ibv_import_device(int /*cmd_fd*/) {
  return fail_null<ibv_context>();
}
ibv_pd* ibv_import_pd(ibv_context* /*context*/, uint32_t /*pd_handle*/) {
  return fail_null<ibv_pd>();
}
void ibv_unimport_pd(ibv_pd* /*pd*/) {}
ibv_mr* ibv_import_mr(ibv_pd* /*pd*/, uint32_t /*mr_handle*/) {
  return fail_null<ibv_mr>();
}
void ibv_unimport_mr(ibv_mr* /*mr*/) {}
ibv_dm* ibv_import_dm(ibv_context* /*context*/, uint32_t /*dm_handle*/) {
  return fail_null<ibv_dm>();
}
void ibv_unimport_dm(ibv_dm* /*dm*/) {}
int ibv_query_ece(ibv_qp* /*qp*/, ibv_ece* /*ece*/) {
  return EOPNOTSUPP;
}
int ibv_set_ece(ibv_qp* /*qp*/, ibv_ece* /*ece*/) {
  return EOPNOTSUPP;
}
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* /*pd*/, uint64_t /*offset*/, size_t /*length*/, uint64_t /*iova*/,
                          int /*fd*/, int /*access*/) {
  return fail_null<ibv_mr>();
}

// --- IBVERBS_PRIVATE_34: the provider interface ------------------------------------------------
// No installed header declares these; the signatures only need to agree in how the result is
// returned (int errno, pointer, or nothing).

#pragma GCC visibility push(default)

// Called by every provider's constructor; uwarp loads no providers and matches no device.
void verbs_register_driver_34(const void* /*ops*/) {}

bool verbs_allow_disassociate_destroy = false;

void __verbs_log(void* /*ctx*/, uint32_t /*level*/, const char* /*fmt*/, ...) {}
void* _verbs_init_and_alloc_context(void*, int, size_t, void*, uint32_t) {
  return fail_null<void>();
}
ibv_context* verbs_open_device(ibv_device* /*device*/, void* /*private_data*/) {
  return fail_null<ibv_context>();
}
void verbs_uninit_context(void* /*context*/) {}
void verbs_set_ops(void* /*context*/, const void* /*ops*/) {}
void verbs_init_cq(ibv_cq* /*cq*/, ibv_context* /*context*/, ibv_comp_channel* /*channel*/,
                   void* /*cq_context*/) {}
int execute_ioctl(ibv_context* /*context*/, void* /*cmd*/) {
  return EOPNOTSUPP;
}
unsigned int __ioctl_final_num_attrs(unsigned int /*num_attrs*/, void* /*link*/) {
  return 0;
}
int ibv_read_ibdev_sysfs_file(char* /*buf*/, size_t /*size*/, void* /*sysfs_dev*/,
                              const char* /*fnfmt*/, ...) {
  errno = EOPNOTSUPP;
  return -1;
}

// The kernel command wrappers: every one returns an errno value.
#define UWARP_CMD_STUB(name) \
  int name() {               \
    return EOPNOTSUPP;       \
  }
UWARP_CMD_STUB(ibv_cmd_advise_mr)
UWARP_CMD_STUB(ibv_cmd_alloc_dm)
UWARP_CMD_STUB(ibv_cmd_alloc_mw)
UWARP_CMD_STUB(ibv_cmd_alloc_pd)
UWARP_CMD_STUB(ibv_cmd_attach_mcast)
UWARP_CMD_STUB(ibv_cmd_close_xrcd)
UWARP_CMD_STUB(ibv_cmd_create_ah)
UWARP_CMD_STUB(ibv_cmd_create_counters)
UWARP_CMD_STUB(ibv_cmd_create_cq)
UWARP_CMD_STUB(ibv_cmd_create_cq_ex)
UWARP_CMD_STUB(ibv_cmd_create_flow)
UWARP_CMD_STUB(ibv_cmd_create_flow_action_esp)
UWARP_CMD_STUB(ibv_cmd_create_qp)
UWARP_CMD_STUB(ibv_cmd_create_qp_ex)
UWARP_CMD_STUB(ibv_cmd_create_qp_ex2)
UWARP_CMD_STUB(ibv_cmd_create_rwq_ind_table)
UWARP_CMD_STUB(ibv_cmd_create_srq)
UWARP_CMD_STUB(ibv_cmd_create_srq_ex)
UWARP_CMD_STUB(ibv_cmd_create_wq)
UWARP_CMD_STUB(ibv_cmd_dealloc_mw)
UWARP_CMD_STUB(ibv_cmd_dealloc_pd)
UWARP_CMD_STUB(ibv_cmd_dereg_mr)
UWARP_CMD_STUB(ibv_cmd_destroy_ah)
UWARP_CMD_STUB(ibv_cmd_destroy_counters)
UWARP_CMD_STUB(ibv_cmd_destroy_cq)
UWARP_CMD_STUB(ibv_cmd_destroy_flow)
UWARP_CMD_STUB(ibv_cmd_destroy_flow_action)
UWARP_CMD_STUB(ibv_cmd_destroy_qp)
UWARP_CMD_STUB(ibv_cmd_destroy_rwq_ind_table)
UWARP_CMD_STUB(ibv_cmd_destroy_srq)
UWARP_CMD_STUB(ibv_cmd_destroy_wq)
UWARP_CMD_STUB(ibv_cmd_detach_mcast)
UWARP_CMD_STUB(ibv_cmd_free_dm)
UWARP_CMD_STUB(ibv_cmd_get_context)
UWARP_CMD_STUB(ibv_cmd_modify_cq)
UWARP_CMD_STUB(ibv_cmd_modify_flow_action_esp)
UWARP_CMD_STUB(ibv_cmd_modify_qp)
UWARP_CMD_STUB(ibv_cmd_modify_qp_ex)
UWARP_CMD_STUB(ibv_cmd_modify_srq)
UWARP_CMD_STUB(ibv_cmd_modify_wq)
UWARP_CMD_STUB(ibv_cmd_open_qp)
UWARP_CMD_STUB(ibv_cmd_open_xrcd)
UWARP_CMD_STUB(ibv_cmd_poll_cq)
UWARP_CMD_STUB(ibv_cmd_post_recv)
UWARP_CMD_STUB(ibv_cmd_post_send)
UWARP_CMD_STUB(ibv_cmd_post_srq_recv)
UWARP_CMD_STUB(ibv_cmd_query_context)
UWARP_CMD_STUB(ibv_cmd_query_device_any)
UWARP_CMD_STUB(ibv_cmd_query_mr)
UWARP_CMD_STUB(ibv_cmd_query_port)
UWARP_CMD_STUB(ibv_cmd_query_qp)
UWARP_CMD_STUB(ibv_cmd_query_srq)
UWARP_CMD_STUB(ibv_cmd_read_counters)
UWARP_CMD_STUB(ibv_cmd_reg_dm_mr)
UWARP_CMD_STUB(ibv_cmd_reg_dmabuf_mr)
UWARP_CMD_STUB(ibv_cmd_reg_mr)
UWARP_CMD_STUB(ibv_cmd_req_notify_cq)
UWARP_CMD_STUB(ibv_cmd_rereg_mr)
UWARP_CMD_STUB(ibv_cmd_resize_cq)
#undef UWARP_CMD_STUB

#pragma GCC visibility pop

}  // extern "C"
