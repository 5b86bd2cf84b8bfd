// The entries of a uwarp ibv_context's ops table (struct ibv_context_ops) and of its extended
// verbs_context, which the static inline functions of <infiniband/verbs.h> call (ibv_poll_cq,
// ibv_post_send, ibv_query_port, ibv_query_device_ex, ibv_create_qp_ex, ...). Defined next to
// the exported functions of the same objects; installed by ibv_open_device (device.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/verbs_api.h"

namespace uwarp::ofa {

// device.cc
int query_port_ex(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr,
                  std::size_t attr_len);
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, std::size_t attr_size);
int compat_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* attr);

// completion.cc
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);

// queue_pair.cc
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);

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
