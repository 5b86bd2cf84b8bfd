/* extended_verbs_test: the extended verbs of libibverbs through uwarp (ibv_create_cq_ex(3),
 * ibv_wr_post(3)), written against the public rdma-core headers only and run with uwarp's
 * drop-in libraries (uwarp-run), over an rdma_cm connection with both ends in this process:
 *   - ibv_create_cq_ex with the standard completion fields; fields uwarp does not have
 *     (timestamps) refused with EOPNOTSUPP;
 *   - rdma_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; ibv_qp_to_qp_ex gives the extended
 *     QP, and NULL for a QP made without send operations; Send with Immediate refused;
 *   - one ibv_wr_start .. ibv_wr_complete batch of an RDMA Write, a Send with inline data, an
 *     RDMA Write with Immediate, a Fetch-and-Add, a Compare-and-Swap and an RDMA Read, each with
 *     its own wr_id and flags, then the data at the peer;
 *   - their completions through ibv_start_poll, ibv_next_poll and the ibv_wc_read_* functions,
 *     and through ibv_poll_cq on the same CQ; ENOENT when empty;
 *   - ibv_wr_abort posts nothing; a batch with an operation uwarp refuses fails in
 *     ibv_wr_complete.
 * Exit status 0 if every check passed; each failure prints the file line and the expression. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cm_support.h"

enum { kData = 4096, kImmLen = 100 };

/* The server's memory: what the client writes, reads back and operates on. */
struct target {
  uint8_t data[2 * kData];
  uint64_t word;
  uint8_t recv[2][64];
};

/* The client's memory. */
struct source {
  uint8_t data[kData];
  uint8_t back[kData];
  uint64_t fetched;
  uint64_t swapped;
};

/* Polls `cq` with the extended interface until `n` completions are in `out` (within 5 s). */
static int poll_ex(struct ibv_cq_ex* cq, struct ibv_wc* out, int n) {
  int got = 0;
  for (int tries = 0; tries < 5000 && got < n; ++tries) {
    struct ibv_poll_cq_attr attr = {.comp_mask = 0};
    int rc = ibv_start_poll(cq, &attr);
    if (rc == ENOENT) {
      usleep(1000);
      continue;
    }
    if (rc != 0) return -1;
    do {
      struct ibv_wc* w = &out[got++];
      w->wr_id = cq->wr_id;
      w->status = cq->status;
      w->opcode = ibv_wc_read_opcode(cq);
      w->byte_len = ibv_wc_read_byte_len(cq);
      w->qp_num = ibv_wc_read_qp_num(cq);
      w->wc_flags = ibv_wc_read_wc_flags(cq);
    } while (got < n && ibv_next_poll(cq) == 0);
    ibv_end_poll(cq);
  }
  return got;
}

/* Attributes of an RC QP of `max_wr` requests that completes on `cq` and asks for the send
 * operations `ops` (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; the caller adds the PD or lets
 * open_conn_ex do it). */
static struct ibv_qp_init_attr_ex qp_ex_attr(struct ibv_cq_ex* cq, uint32_t max_wr, uint64_t ops) {
  struct ibv_qp_init_attr_ex a;
  memset(&a, 0, sizeof a);
  a.qp_type = IBV_QPT_RC;
  a.send_cq = a.recv_cq = ibv_cq_ex_to_cq(cq);
  a.cap.max_send_wr = a.cap.max_recv_wr = max_wr;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.send_ops_flags = ops;
  return a;
}

static void test_creation(struct ibv_context* verbs, struct ibv_pd* pd, struct ibv_cq_ex* cq) {
  struct ibv_cq_init_attr_ex bad = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
  errno = 0;
  CHECK(ibv_create_cq_ex(verbs, &bad) == NULL && errno == EOPNOTSUPP);
  struct ibv_qp_init_attr_ex a =
      qp_ex_attr(cq, 4, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
  a.comp_mask |= IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  errno = 0;
  CHECK(ibv_create_qp_ex(verbs, &a) == NULL && errno == EOPNOTSUPP);
}

/* The batch: one of each operation, signaled, wr_id 1..6. */
static int post_batch(struct ibv_qp_ex* qpx, struct source* src, uint32_t lkey, struct target* t,
                      uint32_t rkey) {
  ibv_wr_start(qpx);
  qpx->wr_flags = IBV_SEND_SIGNALED;
  qpx->wr_id = 1;
  ibv_wr_rdma_write(qpx, rkey, (uintptr_t)t->data);
  ibv_wr_set_sge(qpx, lkey, (uintptr_t)src->data, kData);
  qpx->wr_id = 2;
  ibv_wr_send(qpx);
  static const char hello[] = "hello, extended verbs";
  char copy[sizeof hello];
  memcpy(copy, hello, sizeof hello);
  ibv_wr_set_inline_data(qpx, copy, sizeof copy);
  memset(copy, 0, sizeof copy); /* inline data is copied when it is set */
  qpx->wr_id = 3;
  ibv_wr_rdma_write_imm(qpx, rkey, (uintptr_t)t->data + kData, htonl(0x1234abcd));
  ibv_wr_set_sge(qpx, lkey, (uintptr_t)src->data, kImmLen);
  qpx->wr_id = 4;
  ibv_wr_atomic_fetch_add(qpx, rkey, (uintptr_t)&t->word, 5);
  ibv_wr_set_sge(qpx, lkey, (uintptr_t)&src->fetched, 8);
  qpx->wr_id = 5;
  ibv_wr_atomic_cmp_swp(qpx, rkey, (uintptr_t)&t->word, 105, 7);
  ibv_wr_set_sge(qpx, lkey, (uintptr_t)&src->swapped, 8);
  qpx->wr_id = 6;
  ibv_wr_rdma_read(qpx, rkey, (uintptr_t)t->data);
  ibv_wr_set_sge(qpx, lkey, (uintptr_t)src->back, kData);
  return ibv_wr_complete(qpx);
}

static void test_batch(const char* host) {
  fprintf(stderr, "extended_verbs_test: a batch over %s\n", host);
  struct rdma_cm_id* probe = NULL;
  struct rdma_event_channel* ch = rdma_create_event_channel();
  CHECK(ch != NULL && rdma_create_id(ch, &probe, NULL, RDMA_PS_TCP) == 0);
  struct sockaddr_storage addr;
  make_addr(host, 0, &addr);
  CHECK(rdma_bind_addr(probe, (struct sockaddr*)&addr) == 0 && probe->verbs != NULL);
  struct ibv_cq_init_attr_ex ca = {.cqe = 32, .wc_flags = IBV_WC_STANDARD_FLAGS};
  struct ibv_cq_ex* cq = ibv_create_cq_ex(probe->verbs, &ca);
  CHECK(cq != NULL);
  if (cq == NULL) return;
  CHECK(ibv_start_poll(cq, NULL) == ENOENT);

  struct ibv_qp_init_attr_ex a =
      qp_ex_attr(cq, 8,
                 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ |
                     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
  a.cap.max_inline_data = 64;
  struct conn k;
  CHECK(open_conn_ex(host, &k, &a) == 0);
  if (k.s == NULL || k.s->qp == NULL || k.c == NULL || k.c->qp == NULL) {
    close_conn(&k);
    return;
  }
  test_creation(probe->verbs, k.c->pd, cq);
  struct ibv_qp_ex* qpx = ibv_qp_to_qp_ex(k.c->qp);
  CHECK(qpx != NULL && ibv_qp_to_qp_ex(k.s->qp) == NULL);
  if (qpx == NULL) {
    close_conn(&k);
    return;
  }

  static struct target t;
  static struct source src;
  for (int i = 0; i < kData; ++i) src.data[i] = (uint8_t)(i * 7 + 1);
  t.word = 100;
  struct ibv_mr* tmr = ibv_reg_mr(k.s->pd, &t, sizeof t,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  struct ibv_mr* smr = ibv_reg_mr(k.c->pd, &src, sizeof src, IBV_ACCESS_LOCAL_WRITE);
  CHECK(tmr != NULL && smr != NULL);
  if (tmr == NULL || smr == NULL) {
    close_conn(&k);
    return;
  }
  for (int i = 0; i < 2; ++i) {
    struct ibv_sge sge = {(uintptr_t)t.recv[i], sizeof t.recv[i], tmr->lkey};
    struct ibv_recv_wr wr = {.wr_id = 10 + (uint64_t)i, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr* bad = NULL;
    CHECK(ibv_post_recv(k.s->qp, &wr, &bad) == 0);
  }

  /* An aborted batch posts nothing; one with Send with Immediate fails as a whole. */
  ibv_wr_start(qpx);
  qpx->wr_id = 99;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx);
  ibv_wr_set_sge(qpx, smr->lkey, (uintptr_t)src.data, 8);
  ibv_wr_abort(qpx);
  ibv_wr_start(qpx);
  ibv_wr_send_imm(qpx, htonl(1));
  CHECK(ibv_wr_complete(qpx) == EINVAL);

  CHECK(post_batch(qpx, &src, smr->lkey, &t, tmr->rkey) == 0);
  struct ibv_wc wc[6];
  memset(wc, 0, sizeof wc);
  CHECK(poll_ex(cq, wc, 6) == 6);
  static const enum ibv_wc_opcode kOpcodes[6] = {IBV_WC_RDMA_WRITE, IBV_WC_SEND,
                                                 IBV_WC_RDMA_WRITE, IBV_WC_FETCH_ADD,
                                                 IBV_WC_COMP_SWAP,  IBV_WC_RDMA_READ};
  for (int i = 0; i < 6; ++i) {
    CHECK(wc[i].wr_id == (uint64_t)i + 1);
    CHECK(wc[i].status == IBV_WC_SUCCESS);
    CHECK(wc[i].opcode == kOpcodes[i]);
    CHECK(wc[i].qp_num == k.c->qp->qp_num);
  }
  CHECK(wc[5].byte_len == kData);
  CHECK(memcmp(t.data, src.data, kData) == 0);
  CHECK(memcmp(src.back, src.data, kData) == 0);
  CHECK(memcmp(t.data + kData, src.data, kImmLen) == 0);
  CHECK(src.fetched == 100 && src.swapped == 105 && t.word == 7);

  /* The server's receives: the inline Send, then the Immediate Data; ibv_poll_cq on its CQ. */
  struct ibv_wc r;
  CHECK(wait_wc(k.s->recv_cq, &r) == 1 && r.status == IBV_WC_SUCCESS && r.wr_id == 10);
  CHECK(r.opcode == IBV_WC_RECV && r.byte_len == 22 &&
        strcmp((const char*)t.recv[0], "hello, extended verbs") == 0);
  CHECK(wait_wc(k.s->recv_cq, &r) == 1 && r.status == IBV_WC_SUCCESS && r.wr_id == 11);
  CHECK(r.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (r.wc_flags & IBV_WC_WITH_IMM) != 0 &&
        r.imm_data == htonl(0x1234abcd) && r.byte_len == kImmLen);

  /* Nothing else completed: not the aborted Send, not the refused batch. */
  CHECK(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &r) == 0);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(tmr);
  close_conn(&k);
  CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);
  rdma_destroy_id(probe);
  rdma_destroy_event_channel(ch);
}

int main(void) {
  test_batch("127.0.0.1");
  printf("extended_verbs_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
