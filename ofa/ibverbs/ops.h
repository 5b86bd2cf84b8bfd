// The entries of a uwarp ibv_context's ops table (struct ibv_context_ops) and of its extended
// verbs_context, which the static inline functions of <infiniband/verbs.h> call (ibv_poll_cq,
// ibv_post_send, ibv_query_port, ibv_query_device_ex, ibv_create_qp_ex, ...). Defined next to
// the exported functions of the same objects; installed by ibv_open_device (device.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/verbs_api.h"

namespace uwarp::ofa {

// The device's one port.
inline constexpr std::uint8_t kPortNum = 1;

// device.cc
int query_port_ex(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr,
                  std::size_t attr_len);
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, std::size_t attr_size);
int compat_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* attr);

// completion.cc
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);
// Not an op: a new CQ with the arguments of ibv_create_cq (null with errno set if refused).
struct OfaCq;
OfaCq* new_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector);

// completion_ex.cc: extended CQs (ibv_create_cq_ex, polled with ibv_start_poll and the
// ibv_wc_read_* functions).
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);

// queue_pair.cc
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);

// queue_pair_ex.cc: the ibv_wr_* functions of an extended QP. Not ops: the send operations an
// extended QP may ask for (ibv_qp_init_attr_ex.send_ops_flags), and making `qp` extended.
inline constexpr std::uint64_t kSendOpsFlags =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
    IBV_QP_EX_WITH_SEND_WITH_INV;
struct OfaQp;
void make_extended(OfaQp& qp);

// memory.cc: prefetching on-demand memory (ibv_advise_mr); memory windows (ibv_alloc_mw,
// ibv_dealloc_mw, ibv_bind_mw).
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
              std::uint32_t num_sges);
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
// Not an op: the access:: rights of a window from ibv_mw_bind_info.mw_access_flags (local write
// is ignored); false if a flag is not a right a window carries (EINVAL for the caller).
bool window_rights(unsigned mw_access_flags, std::uint32_t& rights);

}  // namespace uwarp::ofa
