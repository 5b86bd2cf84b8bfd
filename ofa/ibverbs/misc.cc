// The device-independent parts of libibverbs.so.1: the *_str functions (the same strings as
// rdma-core 44), rate conversions, fork support, and the kernel-ABI copy helpers that older
// librdmacm builds import. Pure functions, no uwarp state.
// clang-format off
// First: gives the declarations of <infiniband/verbs.h> default visibility (see verbs_api.h).
#include "common/verbs_api.h"

#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
// clang-format on

#include <cstdint>
#include <cstring>

extern "C" {

const char* ibv_node_type_str(ibv_node_type node_type) {
  static const char* const kNames[] = {"InfiniBand channel adapter",
                                       "InfiniBand switch",
                                       "InfiniBand router",
                                       "iWARP NIC",
                                       "usNIC",
                                       "usNIC UDP",
                                       "unspecified"};
  static_assert(IBV_NODE_CA == 1 && IBV_NODE_UNSPECIFIED == 7);
  const int v = enum_value(node_type);
  if (v < IBV_NODE_CA || v > IBV_NODE_UNSPECIFIED) return "unknown";
  return kNames[v - IBV_NODE_CA];
}

const char* ibv_port_state_str(ibv_port_state port_state) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed", "active",
                                       "active defer"};
  const int v = enum_value(port_state);
  if (v < IBV_PORT_NOP || v > IBV_PORT_ACTIVE_DEFER) return "unknown";
  return kNames[v];
}

const char* ibv_event_type_str(ibv_event_type event) {
  static const char* const kNames[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  static_assert(IBV_EVENT_WQ_FATAL == 19);
  const int v = enum_value(event);
  if (v < IBV_EVENT_CQ_ERR || v > IBV_EVENT_WQ_FATAL) return "unknown";
  return kNames[v];
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  static const char* const kNames[] = {
      "success",
      "local length error",
      "local QP operation error",
      "local EE context operation error",
      "local protection error",
      "Work Request Flushed Error",
      "memory management operation error",
      "bad response error",
      "local access error",
      "remote invalid request error",
      "remote access error",
      "remote operation error",
      "transport retry counter exceeded",
      "RNR retry counter exceeded",
      "local RDD violation error",
      "remote invalid RD request",
      "aborted error",
      "invalid EE context number",
      "invalid EE context state",
      "fatal error",
      "response timeout error",
      "general error",
      "TM error",
      "TM software rendezvous",
  };
  static_assert(IBV_WC_TM_RNDV_INCOMPLETE == 23);
  const int v = enum_value(status);
  if (v < IBV_WC_SUCCESS || v > IBV_WC_TM_RNDV_INCOMPLETE) return "unknown";
  return kNames[v];
}

int ibv_rate_to_mult(ibv_rate rate) {
  switch (enum_value(rate)) {
    case IBV_RATE_2_5_GBPS:
      return 1;
    case IBV_RATE_5_GBPS:
      return 2;
    case IBV_RATE_10_GBPS:
      return 4;
    case IBV_RATE_20_GBPS:
      return 8;
    case IBV_RATE_30_GBPS:
      return 12;
    case IBV_RATE_40_GBPS:
      return 16;
    case IBV_RATE_60_GBPS:
      return 24;
    case IBV_RATE_80_GBPS:
      return 32;
    case IBV_RATE_120_GBPS:
      return 48;
    case IBV_RATE_28_GBPS:
      return 11;
    case IBV_RATE_50_GBPS:
      return 20;
    case IBV_RATE_400_GBPS:
      return 160;
    case IBV_RATE_600_GBPS:
      return 240;
    case IBV_RATE_800_GBPS:
      return 320;
    case IBV_RATE_1200_GBPS:
      return 480;
    default:
      return -1;
  }
}

ibv_rate mult_to_ibv_rate(int mult) {
  switch (mult) {
    case 1:
      return IBV_RATE_2_5_GBPS;
    case 2:
      return IBV_RATE_5_GBPS;
    case 4:
      return IBV_RATE_10_GBPS;
    case 8:
      return IBV_RATE_20_GBPS;
    case 12:
      return IBV_RATE_30_GBPS;
    case 16:
      return IBV_RATE_40_GBPS;
    case 24:
      return IBV_RATE_60_GBPS;
    case 32:
      return IBV_RATE_80_GBPS;
    case 48:
      return IBV_RATE_120_GBPS;
    case 11:
      return IBV_RATE_28_GBPS;
    case 20:
      return IBV_RATE_50_GBPS;
    case 160:
      return IBV_RATE_400_GBPS;
    case 240:
      return IBV_RATE_600_GBPS;
    case 320:
      return IBV_RATE_800_GBPS;
    case 480:
      return IBV_RATE_1200_GBPS;
    default:
      return IBV_RATE_MAX;
  }
}

int ibv_rate_to_mbps(ibv_rate rate) {
  switch (enum_value(rate)) {
    case IBV_RATE_2_5_GBPS:
      return 2500;
    case IBV_RATE_5_GBPS:
      return 5000;
    case IBV_RATE_10_GBPS:
      return 10000;
    case IBV_RATE_20_GBPS:
      return 20000;
    case IBV_RATE_30_GBPS:
      return 30000;
    case IBV_RATE_40_GBPS:
      return 40000;
    case IBV_RATE_60_GBPS:
      return 60000;
    case IBV_RATE_80_GBPS:
      return 80000;
    case IBV_RATE_120_GBPS:
      return 120000;
    case IBV_RATE_14_GBPS:
      return 14062;
    case IBV_RATE_56_GBPS:
      return 56250;
    case IBV_RATE_112_GBPS:
      return 112500;
    case IBV_RATE_168_GBPS:
      return 168750;
    case IBV_RATE_25_GBPS:
      return 25781;
    case IBV_RATE_100_GBPS:
      return 103125;
    case IBV_RATE_200_GBPS:
      return 206250;
    case IBV_RATE_300_GBPS:
      return 309375;
    case IBV_RATE_28_GBPS:
      return 28125;
    case IBV_RATE_50_GBPS:
      return 53125;
    case IBV_RATE_400_GBPS:
      return 425000;
    case IBV_RATE_600_GBPS:
      return 637500;
    case IBV_RATE_800_GBPS:
      return 850000;
    case IBV_RATE_1200_GBPS:
      return 1275000;
    default:
      return -1;
  }
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  switch (mbps) {
    case 2500:
      return IBV_RATE_2_5_GBPS;
    case 5000:
      return IBV_RATE_5_GBPS;
    case 10000:
      return IBV_RATE_10_GBPS;
    case 20000:
      return IBV_RATE_20_GBPS;
    case 30000:
      return IBV_RATE_30_GBPS;
    case 40000:
      return IBV_RATE_40_GBPS;
    case 60000:
      return IBV_RATE_60_GBPS;
    case 80000:
      return IBV_RATE_80_GBPS;
    case 120000:
      return IBV_RATE_120_GBPS;
    case 14062:
      return IBV_RATE_14_GBPS;
    case 56250:
      return IBV_RATE_56_GBPS;
    case 112500:
      return IBV_RATE_112_GBPS;
    case 168750:
      return IBV_RATE_168_GBPS;
    case 25781:
      return IBV_RATE_25_GBPS;
    case 103125:
      return IBV_RATE_100_GBPS;
    case 206250:
      return IBV_RATE_200_GBPS;
    case 309375:
      return IBV_RATE_300_GBPS;
    case 28125:
      return IBV_RATE_28_GBPS;
    case 53125:
      return IBV_RATE_50_GBPS;
    case 425000:
      return IBV_RATE_400_GBPS;
    case 637500:
      return IBV_RATE_600_GBPS;
    case 850000:
      return IBV_RATE_800_GBPS;
    case 1275000:
      return IBV_RATE_1200_GBPS;
    default:
      return IBV_RATE_MAX;
  }
}

// Registration pins nothing, so fork needs no MADV_DONTFORK: copy-on-write is harmless.
int ibv_fork_init(void) {
  return 0;
}
ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}
int ibv_dontfork_range(void* base, size_t size) {
  (void)base;
  (void)size;
  return 0;
}
int ibv_dofork_range(void* base, size_t size) {
  (void)base;
  (void)size;
  return 0;
}

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->qp_state = static_cast<ibv_qp_state>(src->qp_state);
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<int>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = static_cast<std::uint8_t>(src->mtu);
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
  dst->packet_life_time_selector = src->packet_life_time_selector;
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<std::uint32_t>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<std::uint32_t>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
  dst->packet_life_time_selector = src->packet_life_time_selector;
}

}  // extern "C"
