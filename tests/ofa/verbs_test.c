/* verbs_test: an application written against the public rdma-core headers only, linked (BIND_NOW)
 * against Debian's libibverbs.so.1 and run with uwarp's drop-in library first on
 * LD_LIBRARY_PATH. It exercises every verb uwarp's libibverbs.so.1 supports without a
 * connection (connections come with librdmacm.so.1): device, port, GID and P_Key queries and
 * the values they report, PDs, MRs with every access combination, CQs and completion channels
 * (O_NONBLOCK, EAGAIN, cancellation, destroy waiting for acknowledgements), QPs through the
 * states reachable without a peer, SRQs, asynchronous events, and the error paths of
 * ibv_post_send(3) and friends.
 *
 * Completions and events are produced without a peer: work posted to a QP in the ERROR state
 * completes at once with IBV_WC_WR_FLUSH_ERR, an SRQ-attached QP entering ERROR raises
 * IBV_EVENT_QP_LAST_WQE_REACHED, and a full CQ raises IBV_EVENT_CQ_ERR.
 *
 * Exit status 0 if every check passed; each failure prints the file line and the expression. */
#define _GNU_SOURCE /* pthread_getattr_np */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Exported by libibverbs (IBVERBS_1.0 and IBVERBS_PRIVATE_34) but declared in no installed
 * header; ibv_devinfo calls both. */
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index,
                       int* type);

#include "check.h"
#include "wait_support.h"

static void set_nonblocking(int fd, int on) {
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

static struct ibv_qp* create_rc_qp(struct ibv_pd* pd, struct ibv_cq* scq, struct ibv_cq* rcq,
                                   struct ibv_srq* srq, uint32_t max_inline) {
  struct ibv_qp_init_attr a = {
      .send_cq = scq,
      .recv_cq = rcq,
      .srq = srq,
      .cap = {.max_send_wr = 8,
              .max_recv_wr = 8,
              .max_send_sge = 2,
              .max_recv_sge = 2,
              .max_inline_data = max_inline},
      .qp_type = IBV_QPT_RC,
      .sq_sig_all = 0,
  };
  return ibv_create_qp(pd, &a);
}

static int modify_state(struct ibv_qp* qp, enum ibv_qp_state state) {
  struct ibv_qp_attr a = {.qp_state = state};
  return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int to_init(struct ibv_qp* qp) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* Polls until `n` completions arrived (or a second passed); returns how many. */
static int poll_n(struct ibv_cq* cq, struct ibv_wc* wc, int n) {
  int got = 0;
  double deadline = now_ms() + 1000;
  while (got < n && now_ms() < deadline) {
    int r = ibv_poll_cq(cq, n - got, wc + got);
    if (r < 0) return -1;
    got += r;
  }
  return got;
}

/* --- device, port, GID, P_Key ------------------------------------------------------------- */

static struct ibv_device* test_device_list(struct ibv_device*** list_out) {
  int n = -1;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list != NULL);
  if (list == NULL) return NULL;
  CHECK(n == 1);
  CHECK(list[0] != NULL && list[1] == NULL);
  struct ibv_device* dev = list[0];
  if (dev == NULL) return NULL;
  if (strcmp(ibv_get_device_name(dev), "uwarp0") != 0) {
    fprintf(stderr,
            "verbs_test: device is %s, not uwarp0: is uwarp's libibverbs.so.1 first on "
            "LD_LIBRARY_PATH?\n",
            ibv_get_device_name(dev));
    exit(1);
  }
  CHECK(dev->node_type == IBV_NODE_RNIC);
  CHECK(dev->transport_type == IBV_TRANSPORT_IWARP);
  CHECK(ibv_get_device_guid(dev) != 0);
  CHECK(ibv_get_device_index(dev) == 0);
  char buf[128];
  CHECK(ibv_read_sysfs_file(dev->ibdev_path, "board_id", buf, sizeof buf) > 0);
  CHECK(ibv_read_sysfs_file(dev->ibdev_path, "node_type", buf, sizeof buf) == 7);
  CHECK(strcmp(buf, "4: RNIC") == 0);
  CHECK(ibv_read_sysfs_file(dev->ibdev_path, "ports/1/link_layer", buf, sizeof buf) > 0);
  CHECK(strcmp(buf, "Ethernet") == 0);
  CHECK(ibv_read_sysfs_file(dev->ibdev_path, "no_such_file", buf, sizeof buf) == -1);
  *list_out = list;
  return dev;
}

static void test_queries(struct ibv_context* ctx) {
  CHECK(ctx->num_comp_vectors == 1);
  CHECK(ctx->async_fd >= 0);

  struct ibv_device_attr da;
  CHECK_ERR(ibv_query_device(ctx, &da), 0);
  CHECK(da.vendor_id == 0x757770);
  CHECK(da.vendor_id != 0x1425 && da.vendor_id != 0x8086 && da.vendor_id != 0x02c9 &&
        da.vendor_id != 0x626d74);
  CHECK(da.max_qp_rd_atom == 128);
  CHECK(da.max_qp_init_rd_atom == 128);
  CHECK(da.atomic_cap == IBV_ATOMIC_GLOB);
  CHECK(da.phys_port_cnt == 1);
  CHECK(da.max_pkeys == 1);
  CHECK(da.max_sge >= 2 && da.max_qp_wr >= 8 && da.max_cqe >= 16 && da.max_srq_wr >= 16);
  CHECK(strlen(da.fw_ver) > 0);
  CHECK(da.node_guid == ibv_get_device_guid(ctx->device));

  struct ibv_device_attr_ex dx;
  CHECK_ERR(ibv_query_device_ex(ctx, NULL, &dx), 0);
  CHECK(dx.orig_attr.vendor_id == 0x757770);
  CHECK(dx.phys_port_cnt_ex == 1);
  CHECK(dx.odp_caps.general_caps == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
  CHECK((dx.odp_caps.per_transport_caps.rc_odp_caps & (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                       IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                                       IBV_ODP_SUPPORT_ATOMIC)) ==
        (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
         IBV_ODP_SUPPORT_ATOMIC));
  struct ibv_query_device_ex_input bad_input = {.comp_mask = 1};
  CHECK_ERR(ibv_query_device_ex(ctx, &bad_input, &dx), EINVAL);

  struct ibv_port_attr pa;
  CHECK_ERR(ibv_query_port(ctx, 1, &pa), 0);
  CHECK(pa.state == IBV_PORT_ACTIVE);
  CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(pa.gid_tbl_len == 1);
  CHECK(pa.pkey_tbl_len == 1);
  CHECK(pa.max_msg_sz >= 0x80000000u);
  CHECK(pa.port_cap_flags2 == 0);
  CHECK(ibv_query_port(ctx, 2, &pa) != 0);
  CHECK(ibv_query_port(ctx, 0, &pa) != 0);

  /* The exported ibv_query_port (the macro is bypassed by the parentheses) fills the 48-byte
   * struct of old binaries and writes nothing beyond it. */
  unsigned char compat[64];
  memset(compat, 0xa5, sizeof compat);
  CHECK_ERR((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr*)compat), 0);
  struct ibv_port_attr head;
  memcpy(&head, compat, 48);
  CHECK(head.state == IBV_PORT_ACTIVE && head.link_layer == IBV_LINK_LAYER_ETHERNET &&
        head.gid_tbl_len == 1);
  int untouched = 1;
  for (size_t i = 48; i < sizeof compat; ++i) untouched &= compat[i] == 0xa5;
  CHECK(untouched);

  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  CHECK(gid.raw[0] == 0xfe && gid.raw[1] == 0x80);
  int nonzero = 0;
  for (int i = 8; i < 16; ++i) nonzero |= gid.raw[i];
  CHECK(nonzero); /* ibv_devinfo prints only GIDs with a nonzero interface id */
  CHECK(ibv_query_gid(ctx, 1, 1, &gid) == -1);
  CHECK(ibv_query_gid(ctx, 2, 0, &gid) == -1);
  int gid_type = -1;
  CHECK(ibv_query_gid_type(ctx, 1, 0, &gid_type) == 0);
  CHECK(gid_type == 0);
  struct ibv_gid_entry entry;
  CHECK_ERR(ibv_query_gid_ex(ctx, 1, 0, &entry, 0), 0);
  CHECK(memcmp(&entry.gid, &gid, sizeof gid) == 0 && entry.port_num == 1 && entry.gid_index == 0);
  CHECK(entry.gid_type == IBV_GID_TYPE_IB);
  CHECK_ERR(ibv_query_gid_ex(ctx, 1, 1, &entry, 0), EINVAL);
  struct ibv_gid_entry table[4];
  CHECK(ibv_query_gid_table(ctx, table, 4, 0) == 1);

  __be16 pkey = 0;
  CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0);
  CHECK(ntohs(pkey) == 0xffff);
  CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1);
  CHECK(ibv_get_pkey_index(ctx, 1, htons(0xffff)) == 0);
  CHECK(ibv_get_pkey_index(ctx, 1, htons(0x8001)) < 0);
}

static void test_strings_and_misc(void) {
  CHECK(strcmp(ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC") == 0);
  CHECK(strcmp(ibv_node_type_str((enum ibv_node_type)99), "unknown") == 0);
  CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0);
  CHECK(strcmp(ibv_event_type_str(IBV_EVENT_QP_LAST_WQE_REACHED), "last WQE reached") == 0);
  CHECK(strcmp(ibv_event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal") == 0);
  CHECK(strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") == 0);
  CHECK(strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error") == 0);
  CHECK(strcmp(ibv_wc_status_str((enum ibv_wc_status)1000), "unknown") == 0);
  CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && mult_to_ibv_rate(4) == IBV_RATE_10_GBPS);
  CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 &&
        mbps_to_ibv_rate(103125) == IBV_RATE_100_GBPS);
  CHECK(ibv_fork_init() == 0);
  CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
}

/* --- PD and MR ------------------------------------------------------------------------------ */

static void test_memory(struct ibv_context* ctx) {
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != NULL);
  if (pd == NULL) return;
  CHECK(pd->context == ctx);
  static char buf[8192];

  /* Every combination of the five rights: remote write or atomic need local write. */
  for (int access = 0; access < 32; ++access) {
    int ok = !(access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) ||
             (access & IBV_ACCESS_LOCAL_WRITE);
    errno = 0;
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, access);
    if (ok) {
      CHECK(mr != NULL);
      if (mr == NULL) {
        fprintf(stderr, "  access 0x%x: %s\n", access, strerror(errno));
        continue;
      }
      CHECK(mr->lkey != 0 && mr->lkey == mr->rkey);
      CHECK(mr->addr == buf && mr->length == sizeof buf && mr->pd == pd && mr->context == ctx);
      CHECK_ERR(ibv_dereg_mr(mr), 0);
    } else {
      CHECK(mr == NULL && errno == EINVAL);
      if (mr != NULL) ibv_dereg_mr(mr);
    }
  }
  /* The optional bits (IBV_ACCESS_OPTIONAL_RANGE) are ignored: perftest passes RELAXED_ORDERING. */
  int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, rw | IBV_ACCESS_RELAXED_ORDERING);
  CHECK(mr != NULL);
  if (mr != NULL) ibv_dereg_mr(mr);
  mr = ibv_reg_mr(pd, buf, sizeof buf, rw | (1 << 29));
  CHECK(mr != NULL);
  if (mr != NULL) ibv_dereg_mr(mr);
  mr = ibv_reg_mr(pd, buf, sizeof buf, rw | IBV_ACCESS_HUGETLB);
  CHECK(mr != NULL);
  if (mr != NULL) ibv_dereg_mr(mr);
  /* On-demand paging: a region, the implicit one over the whole address space, advice. */
  mr = ibv_reg_mr(pd, buf, sizeof buf, rw | IBV_ACCESS_ON_DEMAND);
  CHECK(mr != NULL);
  if (mr != NULL) {
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = sizeof buf, .lkey = mr->lkey};
    CHECK_ERR(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1), 0);
    sge.length = sizeof buf + 1; /* beyond the region */
    CHECK_ERR(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EINVAL);
    ibv_dereg_mr(mr);
  }
  mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  CHECK(mr != NULL);
  if (mr != NULL) {
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
    CHECK_ERR(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), 0);
    sge.addr = 8; /* no page there */
    CHECK_ERR(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EFAULT);
    ibv_dereg_mr(mr);
  }
  CHECK_NULL_ERRNO(ibv_reg_mr(pd, NULL, SIZE_MAX, rw), EINVAL); /* implicit: on demand only */
  CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 0, rw), EINVAL);
  CHECK_NULL_ERRNO(ibv_reg_mr(pd, NULL, 4096, rw), EINVAL);
  CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, sizeof buf, 1 << 12), EINVAL);

  /* IOVA-based registration (ibv_reg_mr_iova is a macro over ibv_reg_mr_iova/_iova2). */
  mr = ibv_reg_mr_iova(pd, buf, sizeof buf, 0x100000, rw);
  CHECK(mr != NULL);
  if (mr != NULL) ibv_dereg_mr(mr);
  mr = ibv_reg_mr_iova2(pd, buf, sizeof buf, 0x200000, (unsigned)rw | IBV_ACCESS_RELAXED_ORDERING);
  CHECK(mr != NULL);

  /* A PD with a registration cannot go. */
  CHECK_ERR(ibv_dealloc_pd(pd), EBUSY);
  if (mr != NULL) CHECK_ERR(ibv_dereg_mr(mr), 0);
  CHECK_ERR(ibv_dealloc_pd(pd), 0);
}

/* Memory windows without a connection: the device capabilities, ibv_alloc_mw / ibv_dealloc_mw
 * and what the inline ibv_bind_mw refuses. Binds, invalidations and peer accesses through
 * windows need a connection: rdmacm_test.c. */
static void test_memory_windows(struct ibv_context* ctx) {
  struct ibv_device_attr attr;
  CHECK_ERR(ibv_query_device(ctx, &attr), 0);
  CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) != 0);
  CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
  CHECK((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A) == 0);
  CHECK(attr.max_mw > 0);
  struct ibv_device_attr_ex attr_ex;
  CHECK_ERR(ibv_query_device_ex(ctx, NULL, &attr_ex), 0);
  CHECK(attr_ex.orig_attr.max_mw == attr.max_mw);
  CHECK((attr_ex.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);

  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != NULL);
  if (pd == NULL) return;
  struct ibv_mw* mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  struct ibv_mw* mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECK(mw1 != NULL && mw2 != NULL);
  if (mw1 == NULL || mw2 == NULL) return;
  CHECK(mw1->context == ctx && mw1->pd == pd && mw1->type == IBV_MW_TYPE_1 && mw1->rkey != 0);
  CHECK(mw2->context == ctx && mw2->pd == pd && mw2->type == IBV_MW_TYPE_2 && mw2->rkey != 0);
  CHECK(mw1->rkey >> 8 != mw2->rkey >> 8); /* STags of their own */
  CHECK(mw1->handle != mw2->handle);
  CHECK_NULL_ERRNO(ibv_alloc_mw(pd, (enum ibv_mw_type)3), EINVAL);

  /* A region windows may be bound in (the access loop of test_memory registers MW_BIND too). */
  static char buf[4096];
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  CHECK(mr != NULL);
  struct ibv_mw_bind bind;
  memset(&bind, 0, sizeof bind);
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info.mr = mr;
  bind.bind_info.addr = (uintptr_t)buf;
  bind.bind_info.length = sizeof buf;
  bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
  struct ibv_cq* cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
  struct ibv_qp* qp = cq != NULL ? create_rc_qp(pd, cq, cq, NULL, 0) : NULL;
  CHECK(qp != NULL);
  if (qp != NULL) {
    CHECK_ERR(ibv_bind_mw(qp, mw2, &bind), EINVAL); /* type 2: IBV_WR_BIND_MW only */
    const uint32_t rkey = mw1->rkey;
    CHECK_ERR(ibv_bind_mw(qp, mw1, &bind), EINVAL); /* a QP in RESET takes no work requests */
    CHECK(mw1->rkey == rkey);
    CHECK_ERR(ibv_destroy_qp(qp), 0);
  }
  if (cq != NULL) ibv_destroy_cq(cq);

  /* Windows count as users of their PD. */
  CHECK_ERR(ibv_dealloc_pd(pd), EBUSY);
  CHECK_ERR(ibv_dealloc_mw(mw1), 0);
  CHECK_ERR(ibv_dealloc_mw(mw2), 0);
  if (mr != NULL) CHECK_ERR(ibv_dereg_mr(mr), 0); /* no window bound */
  CHECK_ERR(ibv_dealloc_pd(pd), 0);
}

/* --- CQ and completion channel -------------------------------------------------------------- */

/* Cancellation unwinds with _Unwind_ForcedUnwind, which AddressSanitizer does not see: the
 * redzones of the unwound frames stay poisoned and its own thread exit trips on them. A cleanup
 * handler of the cancelled thread clears them. */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
static void unpoison_stack(void* unused) {
  (void)unused;
  pthread_attr_t attr;
  void* addr = NULL;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  __asan_unpoison_memory_region(addr, size);
}
#else
static void unpoison_stack(void* unused) {
  (void)unused;
}
#endif

struct cancel_arg {
  struct ibv_comp_channel* channel;
  int started;
};

static void* blocked_reader(void* p) {
  struct cancel_arg* a = p;
  struct ibv_cq* cq;
  void* ctx;
  pthread_cleanup_push(unpoison_stack, NULL);
  __atomic_store_n(&a->started, 1, __ATOMIC_RELEASE);
  ibv_get_cq_event(a->channel, &cq, &ctx); /* blocks until cancelled */
  pthread_cleanup_pop(0);
  return NULL;
}

static void test_cq_and_channel(struct ibv_context* ctx) {
  struct ibv_device_attr da;
  ibv_query_device(ctx, &da);
  CHECK_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
  CHECK_NULL_ERRNO(ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0), EINVAL);
  /* A completion vector the device does not have (it has num_comp_vectors, here 1). */
  CHECK_NULL_ERRNO(ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors), EINVAL);
  /* Extended CQs have ibv_wc's fields (tests/ofa/extended_verbs_test.c polls one), no more. */
  struct ibv_cq_init_attr_ex cq_ex = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_CVLAN};
  CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &cq_ex), EOPNOTSUPP);
  cq_ex.wc_flags = IBV_WC_STANDARD_FLAGS;
  cq_ex.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &cq_ex), EOPNOTSUPP);
  cq_ex.comp_mask = 0;
  struct ibv_cq_ex* cqx = ibv_create_cq_ex(ctx, &cq_ex);
  CHECK(cqx != NULL);
  if (cqx != NULL) {
    CHECK(ibv_start_poll(cqx, NULL) == ENOENT);
    CHECK_ERR(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
  }

  struct ibv_cq* cq = ibv_create_cq(ctx, 16, (void*)0x1234, NULL, 0);
  CHECK(cq != NULL);
  if (cq == NULL) return;
  CHECK(cq->cqe >= 16 && cq->context == ctx && cq->cq_context == (void*)0x1234 &&
        cq->channel == NULL);
  struct ibv_wc wc[4];
  CHECK(ibv_poll_cq(cq, 4, wc) == 0);
  CHECK(ibv_poll_cq(cq, 0, wc) == 0);
  CHECK_ERR(ibv_req_notify_cq(cq, 0), 0); /* no channel: accepted, no event */
  CHECK_ERR(ibv_resize_cq(cq, 8), 0);
  CHECK_ERR(ibv_destroy_cq(cq), 0);

  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  CHECK(ch != NULL);
  if (ch == NULL) return;
  CHECK(ch->fd >= 0 && ch->context == ctx);
  CHECK(!readable(ch->fd, 0));
  cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
  CHECK(cq != NULL && cq->channel == ch);
  CHECK_ERR(ibv_destroy_comp_channel(ch), EBUSY);

  /* O_NONBLOCK set by the application: no event -> -1, EAGAIN. */
  set_nonblocking(ch->fd, 1);
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  errno = 0;
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1);
  CHECK(errno == EAGAIN);
  set_nonblocking(ch->fd, 0);

  /* A blocking ibv_get_cq_event is a cancellation point (rping cancels its CQ thread). */
  struct cancel_arg arg = {.channel = ch};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, blocked_reader, &arg) == 0);
  while (!__atomic_load_n(&arg.started, __ATOMIC_ACQUIRE)) usleep(1000);
  usleep(50 * 1000);
  CHECK(pthread_cancel(t) == 0);
  void* res = NULL;
  CHECK(pthread_join(t, &res) == 0);
  CHECK(res == PTHREAD_CANCELED);

  if (cq != NULL) CHECK_ERR(ibv_destroy_cq(cq), 0);
  CHECK_ERR(ibv_destroy_comp_channel(ch), 0);
}

/* --- QP ----------------------------------------------------------------------------------------
 */

struct ack_arg {
  struct ibv_cq* cq;
  unsigned n;
  int acked;
};

static void* late_ack(void* p) {
  struct ack_arg* a = p;
  usleep(200 * 1000);
  __atomic_store_n(&a->acked, 1, __ATOMIC_RELEASE);
  ibv_ack_cq_events(a->cq, a->n);
  return NULL;
}

static void test_qp(struct ibv_context* ctx) {
  struct ibv_device_attr da;
  ibv_query_device(ctx, &da);
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  struct ibv_cq* scq = ibv_create_cq(ctx, 64, (void*)0x5c, NULL, 0);
  struct ibv_cq* rcq = ibv_create_cq(ctx, 64, (void*)0x7c, ch, 0);
  CHECK(pd != NULL && ch != NULL && scq != NULL && rcq != NULL);
  if (pd == NULL || ch == NULL || scq == NULL || rcq == NULL) return;
  static char buf[4096];
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr != NULL);
  if (mr == NULL) return;

  /* Only RC exists on iWARP. */
  struct ibv_qp_init_attr bad = {
      .send_cq = scq,
      .recv_cq = rcq,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  bad.qp_type = IBV_QPT_UD;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EOPNOTSUPP);
  bad.qp_type = IBV_QPT_UC;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EOPNOTSUPP);
  bad.qp_type = IBV_QPT_XRC_SEND;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EOPNOTSUPP);
  bad.qp_type = IBV_QPT_RAW_PACKET;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EOPNOTSUPP);
  bad.qp_type = IBV_QPT_RC;
  bad.send_cq = NULL;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EINVAL);
  bad.send_cq = scq;
  bad.cap.max_send_wr = (uint32_t)da.max_qp_wr + 1;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EINVAL);
  bad.cap.max_send_wr = 4;
  bad.cap.max_send_sge = (uint32_t)da.max_sge + 1;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EINVAL);
  bad.cap.max_send_sge = 1;
  bad.cap.max_inline_data = 1u << 20;
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &bad), EINVAL);

  /* ibv_create_qp_ex: the PD-only form works, extended send ops do not exist. */
  struct ibv_qp_init_attr_ex ax = {
      .send_cq = scq,
      .recv_cq = rcq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .comp_mask = IBV_QP_INIT_ATTR_PD,
      .pd = pd};
  struct ibv_qp* qx = ibv_create_qp_ex(ctx, &ax);
  CHECK(qx != NULL);
  if (qx != NULL) {
    CHECK(ibv_qp_to_qp_ex(qx) == NULL);
    CHECK_ERR(ibv_destroy_qp(qx), 0);
  }
  /* With send operations it is extended (tests/ofa/extended_verbs_test.c posts through one),
   * unless it asks for one that iWARP does not carry. */
  ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO;
  CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &ax), EOPNOTSUPP);
  ax.send_ops_flags = IBV_QP_EX_WITH_SEND;
  qx = ibv_create_qp_ex(ctx, &ax);
  CHECK(qx != NULL && ibv_qp_to_qp_ex(qx) != NULL);
  if (qx != NULL) CHECK_ERR(ibv_destroy_qp(qx), 0);

  /* A QP asking for no inline data still reports (and accepts) the device maximum. */
  struct ibv_qp_init_attr ia = {
      .qp_context = (void*)0x99,
      .send_cq = scq,
      .recv_cq = rcq,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 2},
      .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(pd, &ia);
  CHECK(qp != NULL);
  if (qp == NULL) return;
  CHECK(ia.cap.max_send_wr >= 8 && ia.cap.max_recv_wr >= 8 && ia.cap.max_send_sge >= 2);
  uint32_t max_inline = ia.cap.max_inline_data;
  CHECK(max_inline >= 64);
  CHECK(qp->qp_num != 0 && qp->qp_type == IBV_QPT_RC && qp->pd == pd &&
        qp->qp_context == (void*)0x99);
  /* As Linux siw: the device reports INIT from creation, the ibv_qp's own field says RESET. */
  CHECK(qp->state == IBV_QPS_RESET && query_state(qp) == IBV_QPS_INIT);
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qia;
  CHECK_ERR(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qia), 0);
  CHECK(qia.send_cq == scq && qia.recv_cq == rcq && qia.qp_type == IBV_QPT_RC &&
        qia.cap.max_send_wr >= 8);

  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
  struct ibv_sge sges[3] = {sge, sge, sge};
  struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* bad_rwr = NULL;
  struct ibv_send_wr swr = {.wr_id = 2,
                            .sg_list = &sge,
                            .num_sge = 1,
                            .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr* bad_swr = NULL;

  /* RESET: nothing may be posted. */
  CHECK_ERR(modify_state(qp, IBV_QPS_RESET), 0);
  CHECK_ERR(ibv_post_recv(qp, &rwr, &bad_rwr), EINVAL);
  CHECK(bad_rwr == &rwr);
  CHECK_ERR(ibv_post_send(qp, &swr, &bad_swr), EINVAL);
  CHECK(bad_swr == &swr);

  /* RESET -> INIT, with the attributes rdma_cm passes. Bad port or P_Key index: EINVAL. */
  struct ibv_qp_attr badattr = {.qp_state = IBV_QPS_INIT, .port_num = 2};
  CHECK_ERR(ibv_modify_qp(qp, &badattr, IBV_QP_STATE | IBV_QP_PORT), EINVAL);
  badattr.port_num = 1;
  badattr.pkey_index = 3;
  CHECK_ERR(ibv_modify_qp(qp, &badattr, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX), EINVAL);
  badattr.pkey_index = 0;
  badattr.max_dest_rd_atomic = 200;
  CHECK_ERR(ibv_modify_qp(qp, &badattr, IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC), EINVAL);
  CHECK(query_state(qp) == IBV_QPS_RESET);
  CHECK_ERR(to_init(qp), 0);
  CHECK(qp->state == IBV_QPS_INIT && query_state(qp) == IBV_QPS_INIT);
  CHECK_ERR(ibv_query_qp(qp, &qa, IBV_QP_ACCESS_FLAGS, &qia), 0);
  CHECK(qa.qp_access_flags == (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) &&
        qa.port_num == 1);

  /* RTR and RTS need a connection (rdma_connect / rdma_accept through librdmacm). */
  CHECK_ERR(modify_state(qp, IBV_QPS_RTR), EINVAL);
  CHECK_ERR(modify_state(qp, IBV_QPS_RTS), EINVAL);
  CHECK(query_state(qp) == IBV_QPS_INIT);
  CHECK_ERR(modify_state(qp, (enum ibv_qp_state)42), EINVAL);

  /* INIT: receives may be posted, sends not. */
  CHECK_ERR(ibv_post_send(qp, &swr, &bad_swr), EINVAL);
  struct ibv_recv_wr r3 = {.wr_id = 30, .sg_list = sges, .num_sge = 3}; /* > max_recv_sge */
  bad_rwr = NULL;
  CHECK_ERR(ibv_post_recv(qp, &r3, &bad_rwr), EINVAL);
  CHECK(bad_rwr == &r3);
  /* A chain stops at its first bad request; the ones before it are posted. */
  struct ibv_recv_wr chain[3] = {{.wr_id = 10, .sg_list = &sge, .num_sge = 1},
                                 {.wr_id = 11, .sg_list = sges, .num_sge = 3},
                                 {.wr_id = 12, .sg_list = &sge, .num_sge = 1}};
  chain[0].next = &chain[1];
  chain[1].next = &chain[2];
  CHECK_ERR(ibv_post_recv(qp, chain, &bad_rwr), EINVAL);
  CHECK(bad_rwr == &chain[1]);
  /* Fill the receive queue: ENOMEM when full. */
  int posted = 1, err = 0;
  for (int i = 0; i < 64 && err == 0; ++i) {
    struct ibv_recv_wr r = {.wr_id = 100 + (uint64_t)i, .sg_list = &sge, .num_sge = 1};
    err = ibv_post_recv(qp, &r, &bad_rwr);
    if (err == 0) ++posted;
  }
  CHECK(err == ENOMEM);
  CHECK(posted == (int)ia.cap.max_recv_wr);

  /* INIT -> ERR flushes every posted receive, in order, and fires the armed channel. */
  CHECK_ERR(ibv_req_notify_cq(rcq, 0), 0);
  CHECK_ERR(modify_state(qp, IBV_QPS_ERR), 0);
  CHECK(query_state(qp) == IBV_QPS_ERR);
  CHECK(readable(ch->fd, 1000));
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
  CHECK(ev_cq == rcq && ev_ctx == (void*)0x7c);
  CHECK(!readable(ch->fd, 0)); /* one event per arm */
  struct ibv_wc wc[64];
  int n = poll_n(rcq, wc, posted);
  CHECK(n == posted);
  for (int i = 0; i < n; ++i) {
    CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].qp_num == qp->qp_num &&
          wc[i].opcode == IBV_WC_RECV);
  }
  CHECK(n > 0 && wc[0].wr_id == 10);
  CHECK(ibv_poll_cq(rcq, 64, wc) == 0);

  /* ERR: posting completes at once with a flush error; request errors are still reported. */
  CHECK_ERR(ibv_req_notify_cq(rcq, 0), 0);
  CHECK_ERR(ibv_post_recv(qp, &rwr, &bad_rwr), 0);
  CHECK(readable(ch->fd, 1000));
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == rcq);
  CHECK(poll_n(rcq, wc, 1) == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
  CHECK_ERR(ibv_post_send(qp, &swr, &bad_swr), 0);
  CHECK(poll_n(scq, wc, 1) == 1 && wc[0].wr_id == 2 && wc[0].status == IBV_WC_WR_FLUSH_ERR);

  struct ibv_send_wr w = swr;
  /* RFC 7306 RDMA Write with Immediate is accepted (flushed here: the QP is in ERROR); Send
   * with Immediate is not (RFC 7306 defines none). */
  w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w.imm_data = htonl(5);
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), 0);
  CHECK(poll_n(scq, wc, 1) == 1 && wc[0].wr_id == w.wr_id && wc[0].status == IBV_WC_WR_FLUSH_ERR);
  const enum ibv_wr_opcode unsupported[] = {IBV_WR_SEND_WITH_IMM,
                                            IBV_WR_ATOMIC_CMP_AND_SWP,
                                            IBV_WR_ATOMIC_FETCH_AND_ADD,
                                            IBV_WR_TSO,
                                            (enum ibv_wr_opcode)77};
  for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; ++i) {
    w.opcode = unsupported[i];
    bad_swr = NULL;
    CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL);
    CHECK(bad_swr == &w);
  }
  /* Memory window requests: a local invalidation is taken (flushed here); a bind needs a type 2
   * window. */
  w = swr;
  w.opcode = IBV_WR_LOCAL_INV;
  w.invalidate_rkey = 0x12345;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), 0);
  CHECK(poll_n(scq, wc, 1) == 1 && wc[0].wr_id == w.wr_id && wc[0].status == IBV_WC_WR_FLUSH_ERR);
  w = swr;
  w.opcode = IBV_WR_BIND_MW;
  memset(&w.wr, 0, sizeof w.wr);
  bad_swr = NULL;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL);
  CHECK(bad_swr == &w);
  w = swr;
  w.sg_list = sges;
  w.num_sge = 3; /* > max_send_sge */
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL);
  w = swr;
  w.send_flags |= IBV_SEND_IP_CSUM;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL);
  w = swr;
  w.num_sge = -1;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL);

  /* Inline: up to the device maximum although the QP asked for none (rdma_xclient does). */
  static char payload[8192];
  struct ibv_sge inl = {.addr = (uintptr_t)payload, .length = max_inline, .lkey = 0};
  w = swr;
  w.sg_list = &inl;
  w.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), 0);
  CHECK(poll_n(scq, wc, 1) == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
  struct ibv_sge inl3[3] = {
      {(uintptr_t)payload, 8, 0}, {(uintptr_t)payload, 8, 0}, {(uintptr_t)payload, 8, 0}};
  w.sg_list = inl3;
  w.num_sge = 3; /* inline may gather more pieces than max_send_sge */
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), 0);
  CHECK(poll_n(scq, wc, 1) == 1);
  inl.length = max_inline + 1;
  w.sg_list = &inl;
  w.num_sge = 1;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL);
  w.opcode = IBV_WR_RDMA_READ;
  inl.length = 8;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), EINVAL); /* a Read has nothing to inline */

  /* A chain: the bad request in the middle stops it; the first one was posted. */
  struct ibv_send_wr schain[3] = {swr, swr, swr};
  schain[0].wr_id = 40;
  schain[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  schain[0].next = &schain[1];
  schain[1].next = &schain[2];
  CHECK_ERR(ibv_post_send(qp, schain, &bad_swr), EINVAL);
  CHECK(bad_swr == &schain[1]);
  CHECK(poll_n(scq, wc, 1) == 1 && wc[0].wr_id == 40);
  CHECK(ibv_poll_cq(scq, 4, wc) == 0);
  /* Unsignaled successful sends complete silently, but flushed ones always complete. */
  w = swr;
  w.send_flags = 0;
  w.wr_id = 41;
  CHECK_ERR(ibv_post_send(qp, &w, &bad_swr), 0);
  CHECK(poll_n(scq, wc, 1) == 1 && wc[0].wr_id == 41 && wc[0].status == IBV_WC_WR_FLUSH_ERR);

  /* CQs and PDs in use cannot go. */
  CHECK_ERR(ibv_destroy_cq(rcq), EBUSY);
  CHECK_ERR(ibv_dealloc_pd(pd), EBUSY);

  /* ERR -> RESET -> INIT again. */
  CHECK_ERR(modify_state(qp, IBV_QPS_RESET), 0);
  CHECK(query_state(qp) == IBV_QPS_RESET);
  CHECK_ERR(to_init(qp), 0);
  CHECK_ERR(ibv_destroy_qp(qp), 0);

  /* ibv_destroy_cq waits until every event it delivered was acknowledged. Two events are still
   * unacknowledged on rcq: a thread acknowledges them 200 ms from now. */
  struct ack_arg aa = {.cq = rcq, .n = 2};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, late_ack, &aa) == 0);
  double start = now_ms();
  CHECK_ERR(ibv_destroy_cq(rcq), 0);
  CHECK(__atomic_load_n(&aa.acked, __ATOMIC_ACQUIRE) == 1);
  CHECK(now_ms() - start >= 150);
  pthread_join(t, NULL);

  /* A CQ destroyed while its event is still in the channel: the event goes with it (and
   * destroying does not wait for it, it was never delivered). */
  struct ibv_cq* gone = ibv_create_cq(ctx, 4, NULL, ch, 0);
  CHECK(gone != NULL);
  struct ibv_qp* gq = gone != NULL ? create_rc_qp(pd, scq, gone, NULL, 0) : NULL;
  CHECK(gq != NULL);
  if (gq != NULL) {
    CHECK_ERR(to_init(gq), 0);
    CHECK_ERR(modify_state(gq, IBV_QPS_ERR), 0);
    CHECK_ERR(ibv_req_notify_cq(gone, 0), 0);
    CHECK_ERR(ibv_post_recv(gq, &rwr, &bad_rwr), 0);
    CHECK(readable(ch->fd, 1000));
    CHECK_ERR(ibv_destroy_qp(gq), 0);
    CHECK_ERR(ibv_destroy_cq(gone), 0);
    set_nonblocking(ch->fd, 1);
    errno = 0;
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN);
    set_nonblocking(ch->fd, 0);
    CHECK(!readable(ch->fd, 0));
  }

  CHECK_ERR(ibv_destroy_cq(scq), 0);
  CHECK_ERR(ibv_destroy_comp_channel(ch), 0);
  CHECK_ERR(ibv_dereg_mr(mr), 0);
  CHECK_ERR(ibv_dealloc_pd(pd), 0);
}

/* --- SRQ and asynchronous events ------------------------------------------------------------ */

static void test_srq_and_async(struct ibv_context* ctx) {
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_cq* cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  CHECK(pd != NULL && cq != NULL);
  if (pd == NULL || cq == NULL) return;
  static char buf[4096];
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr ? mr->lkey : 0};
  struct ibv_sge sges[3] = {sge, sge, sge};

  struct ibv_srq_init_attr sia = {.srq_context = (void*)0x55, .attr = {.max_wr = 16, .max_sge = 2}};
  struct ibv_srq* srq = ibv_create_srq(pd, &sia);
  CHECK(srq != NULL);
  if (srq == NULL) return;
  CHECK(sia.attr.max_wr >= 16 && sia.attr.max_sge >= 2 && srq->srq_context == (void*)0x55 &&
        srq->pd == pd);
  struct ibv_srq_init_attr zero = {.attr = {.max_wr = 0, .max_sge = 1}};
  CHECK_NULL_ERRNO(ibv_create_srq(pd, &zero), EINVAL);
  struct ibv_srq_attr sa;
  CHECK_ERR(ibv_query_srq(srq, &sa), 0);
  CHECK(sa.max_wr == sia.attr.max_wr && sa.max_sge == sia.attr.max_sge && sa.srq_limit == 0);
  sa.srq_limit = 4;
  CHECK_ERR(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0);
  CHECK_ERR(ibv_query_srq(srq, &sa), 0);
  CHECK(sa.srq_limit == 4);
  sa.max_wr = 32;
  CHECK_ERR(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR), EOPNOTSUPP);
  sa.srq_limit = 1000;
  CHECK_ERR(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), EINVAL);

  struct ibv_recv_wr rwr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* bad = NULL;
  CHECK_ERR(ibv_post_srq_recv(srq, &rwr, &bad), 0);
  struct ibv_recv_wr r3 = {.wr_id = 8, .sg_list = sges, .num_sge = 3};
  CHECK_ERR(ibv_post_srq_recv(srq, &r3, &bad), EINVAL);
  CHECK(bad == &r3);

  struct ibv_qp* qp = create_rc_qp(pd, cq, cq, srq, 0);
  CHECK(qp != NULL);
  if (qp == NULL) return;
  CHECK(qp->srq == srq);
  CHECK_ERR(ibv_destroy_srq(srq), EBUSY);
  CHECK_ERR(to_init(qp), 0);
  CHECK_ERR(ibv_post_recv(qp, &rwr, &bad), EINVAL); /* its receives go to the SRQ */

  /* No event yet: the application's O_NONBLOCK makes ibv_get_async_event fail with EAGAIN. */
  struct ibv_async_event ev;
  set_nonblocking(ctx->async_fd, 1);
  errno = 0;
  CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN);

  /* An SRQ-attached QP entering ERROR raises LAST_WQE_REACHED for that QP. */
  CHECK_ERR(modify_state(qp, IBV_QPS_ERR), 0);
  CHECK(readable(ctx->async_fd, 1000));
  CHECK(ibv_get_async_event(ctx, &ev) == 0);
  CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == qp);
  CHECK(!readable(ctx->async_fd, 0));
  ibv_ack_async_event(&ev);
  CHECK(qp->events_completed == 1);
  CHECK_ERR(ibv_destroy_qp(qp), 0);
  CHECK_ERR(ibv_destroy_srq(srq), 0);

  /* A full CQ raises CQ_ERR for that CQ (here the receive CQ of one entry). */
  struct ibv_cq* tiny = ibv_create_cq(ctx, 1, NULL, NULL, 0);
  CHECK(tiny != NULL);
  if (tiny != NULL) {
    qp = create_rc_qp(pd, cq, tiny, NULL, 0);
    CHECK(qp != NULL);
    if (qp != NULL) {
      CHECK_ERR(to_init(qp), 0);
      CHECK_ERR(modify_state(qp, IBV_QPS_ERR), 0);
      CHECK_ERR(ibv_post_recv(qp, &rwr, &bad), 0);
      CHECK_ERR(ibv_post_recv(qp, &rwr, &bad), 0); /* its completion does not fit */
      CHECK(readable(ctx->async_fd, 1000));
      CHECK(ibv_get_async_event(ctx, &ev) == 0);
      CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny);
      ibv_ack_async_event(&ev);
      CHECK(tiny->async_events_completed == 1);
      CHECK_ERR(ibv_destroy_qp(qp), 0);
    }
    CHECK_ERR(ibv_destroy_cq(tiny), 0);
  }
  set_nonblocking(ctx->async_fd, 0);

  /* A destroyed QP's completions not yet polled go with it (their wr_ids may name buffers freed
   * with the QP, as libfabric's ofi_rxm frees them); another QP's on the same CQ stay. */
  struct ibv_wc wcs[4];
  while (ibv_poll_cq(cq, 4, wcs) > 0) {
  }
  struct ibv_qp* qa = create_rc_qp(pd, cq, cq, NULL, 0);
  struct ibv_qp* qb = create_rc_qp(pd, cq, cq, NULL, 0);
  CHECK(qa != NULL && qb != NULL);
  if (qa != NULL && qb != NULL) {
    for (int i = 0; i < 2; ++i) {
      struct ibv_qp* q = i == 0 ? qa : qb;
      CHECK_ERR(to_init(q), 0);
      CHECK_ERR(modify_state(q, IBV_QPS_ERR), 0);
      CHECK_ERR(ibv_post_recv(q, &rwr, &bad), 0); /* flushed at once */
    }
    const uint32_t qb_num = qb->qp_num;
    CHECK_ERR(ibv_destroy_qp(qa), 0);
    qa = NULL;
    int n = ibv_poll_cq(cq, 4, wcs);
    CHECK(n == 1 && wcs[0].qp_num == qb_num && wcs[0].status == IBV_WC_WR_FLUSH_ERR);
  }
  if (qa != NULL) CHECK_ERR(ibv_destroy_qp(qa), 0);
  if (qb != NULL) CHECK_ERR(ibv_destroy_qp(qb), 0);

  if (mr != NULL) CHECK_ERR(ibv_dereg_mr(mr), 0);
  CHECK_ERR(ibv_destroy_cq(cq), 0);
  CHECK_ERR(ibv_dealloc_pd(pd), 0);
}

static void test_unsupported(struct ibv_context* ctx) {
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_ah_attr ah = {.port_num = 1};
  CHECK_NULL_ERRNO(ibv_create_ah(pd, &ah), EOPNOTSUPP);
  CHECK_NULL_ERRNO(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), EOPNOTSUPP);
  CHECK_NULL_ERRNO(ibv_import_pd(ctx, 1), EOPNOTSUPP);
  struct ibv_td_init_attr td = {0};
  CHECK_NULL_ERRNO(ibv_alloc_td(ctx, &td), EOPNOTSUPP);
  ibv_dealloc_pd(pd);
}

/* Opening and closing a device (fi_getinfo does it several times) must leave the calling
 * thread's blocking system calls alone: its next epoll_wait waits as long as asked, without
 * EINTR. */
static void test_open_close_leaves_caller_alone(struct ibv_device* dev) {
  for (int round = 0; round < 2; ++round) {
    struct ibv_context* ctx = ibv_open_device(dev);
    CHECK(ctx != NULL);
    if (ctx == NULL) return;
    CHECK_ERR(ibv_close_device(ctx), 0);
    int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(epoll_fd >= 0);
    struct epoll_event event;
    double start = now_ms();
    int n = epoll_wait(epoll_fd, &event, 1, 250);
    if (n != 0) {
      fprintf(stderr, "epoll_wait after ibv_close_device: %d (%s) after %.1f ms\n", n,
              n < 0 ? strerror(errno) : "an event", now_ms() - start);
    }
    CHECK(n == 0);
    close(epoll_fd);
  }
}

/* A signal interrupts ibv_get_cq_event as it interrupts the read() it is in rdma-core: with a
 * handler installed without SA_RESTART, the call fails with EINTR (qperf ends its tests so: a
 * SIGALRM handler sets a flag, and the blocked ibv_get_cq_event must return). A watchdog thread
 * ends the process after 3 s if the call does not return. */
static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
  (void)sig;
  alarms = alarms + 1;
}
static void* watchdog(void* arg) {
  volatile int* done = arg;
  for (int i = 0; i < 300 && !__atomic_load_n(done, __ATOMIC_ACQUIRE); ++i) usleep(10000);
  if (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
    fprintf(stderr, "FAIL: ibv_get_cq_event ignored SIGALRM for 3 s\n");
    _exit(1);
  }
  return NULL;
}
static void test_signal_interrupts_get_cq_event(struct ibv_context* ctx) {
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  struct ibv_cq* cq = ch != NULL ? ibv_create_cq(ctx, 4, NULL, ch, 0) : NULL;
  CHECK(cq != NULL);
  if (cq == NULL) return;
  CHECK_ERR(ibv_req_notify_cq(cq, 0), 0);
  struct sigaction act = {0}, old;
  act.sa_handler = on_alarm; /* no SA_RESTART */
  sigemptyset(&act.sa_mask);
  CHECK(sigaction(SIGALRM, &act, &old) == 0);
  /* The first alarm after 50 ms, then every 10 ms (as qperf's timer repeats). */
  struct itimerval timer = {.it_interval = {0, 10000}, .it_value = {0, 50000}};
  CHECK(setitimer(ITIMER_REAL, &timer, NULL) == 0);
  int done = 0;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, watchdog, &done) == 0);
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  double start = now_ms();
  errno = 0;
  int rc = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
  int err = errno;
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  pthread_join(t, NULL);
  sigaction(SIGALRM, &old, NULL);
  if (rc != -1 || err != EINTR) {
    fprintf(stderr, "ibv_get_cq_event under SIGALRM: %d (%s) after %.1f ms\n", rc, strerror(err),
            now_ms() - start);
  }
  CHECK(rc == -1 && err == EINTR);
  CHECK(alarms >= 1);
  CHECK_ERR(ibv_destroy_cq(cq), 0);
  CHECK_ERR(ibv_destroy_comp_channel(ch), 0);
}

int main(void) {
  struct ibv_device** list = NULL;
  struct ibv_device* dev = test_device_list(&list);
  if (dev == NULL) {
    fprintf(stderr, "verbs_test: no device\n");
    return 1;
  }
  CHECK_NULL_ERRNO(ibv_open_device(NULL), ENODEV);
  test_open_close_leaves_caller_alone(dev);
  struct ibv_context* ctx = ibv_open_device(dev);
  CHECK(ctx != NULL);
  if (ctx == NULL) return 1;
  ibv_free_device_list(list); /* an opened device stays usable */

  test_queries(ctx);
  test_strings_and_misc();
  test_memory(ctx);
  test_memory_windows(ctx);
  test_cq_and_channel(ctx);
  test_signal_interrupts_get_cq_event(ctx);
  test_qp(ctx);
  test_srq_and_async(ctx);
  test_unsupported(ctx);

  CHECK_ERR(ibv_close_device(ctx), 0);
  printf("verbs_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
