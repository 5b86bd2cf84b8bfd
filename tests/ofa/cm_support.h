/* What the C tests of uwarp's libibverbs and librdmacm over rdma_cm connections share: waiting
 * for rdma_cm events and completions within a bound, and one loopback connection with both ends
 * in the calling process (the checks: check.h; clock, fd and QP-state waits: wait_support.h). */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "wait_support.h"

/* The next event of `ch` within 5 s, or NULL. */
static inline struct rdma_cm_event* next_event(struct rdma_event_channel* ch) {
  struct rdma_cm_event* e = NULL;
  if (!readable(ch->fd, 5000)) return NULL;
  if (rdma_get_cm_event(ch, &e) != 0) return NULL;
  return e;
}

/* Waits for an event of type `type`; returns it (to be acknowledged) or NULL. */
static inline struct rdma_cm_event* expect_event(struct rdma_event_channel* ch,
                                                 enum rdma_cm_event_type type, int line) {
  struct rdma_cm_event* e = next_event(ch);
  ++checks;
  if (e == NULL || e->event != type) {
    ++failures;
    fprintf(stderr, "%s:%d: expected %s, got %s (status %d)\n", __FILE__, line,
            rdma_event_str(type), e ? rdma_event_str(e->event) : "no event", e ? e->status : 0);
    if (e != NULL) rdma_ack_cm_event(e);
    return NULL;
  }
  return e;
}
#define EXPECT_EVENT(ch, type) expect_event((ch), (type), __LINE__)

static inline int make_addr(const char* host, uint16_t port, struct sockaddr_storage* out) {
  memset(out, 0, sizeof *out);
  struct sockaddr_in* a4 = (struct sockaddr_in*)out;
  struct sockaddr_in6* a6 = (struct sockaddr_in6*)out;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    return 0;
  }
  if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    return 0;
  }
  return -1;
}

static inline struct ibv_qp_init_attr qp_attr(void) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.cap.max_send_wr = 8;
  a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.qp_type = IBV_QPT_RC;
  return a;
}

/* An active id resolved to host:port (events checked). */
static inline struct rdma_cm_id* resolved_id(struct rdma_event_channel* ch, const char* host,
                                             uint16_t port) {
  struct rdma_cm_id* id = NULL;
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) return NULL;
  struct sockaddr_storage dst;
  make_addr(host, port, &dst);
  CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) == 0);
  struct rdma_cm_event* e = EXPECT_EVENT(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (e != NULL) {
    /* Set before the event is delivered. */
    CHECK(e->id == id);
    CHECK(id->verbs != NULL && id->pd != NULL && id->port_num == 1);
    CHECK(id->route.addr.src_addr.sa_family == dst.ss_family);
    CHECK(id->route.addr.dst_addr.sa_family == dst.ss_family);
    CHECK(rdma_get_dst_port(id) == htons(port));
    rdma_ack_cm_event(e);
  }
  CHECK(rdma_resolve_route(id, 2000) == 0);
  e = EXPECT_EVENT(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  if (e != NULL) rdma_ack_cm_event(e);
  return id;
}

/* An id of `ch` listening on `host` at an ephemeral port (rdma_get_src_port tells which), or
 * NULL. */
static inline struct rdma_cm_id* listening_id(struct rdma_event_channel* ch, const char* host) {
  struct rdma_cm_id* id = NULL;
  struct sockaddr_storage any;
  make_addr(host, 0, &any);
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) return NULL;
  if (rdma_bind_addr(id, (struct sockaddr*)&any) != 0 || rdma_listen(id, 1) != 0) {
    rdma_destroy_id(id);
    return NULL;
  }
  return id;
}

/* One connection over `host`: the client's and the server's ids, each QP with its own CQs
 * (made by rdma_create_qp), in the process's one PD. open_conn_ex makes the client's QP with
 * rdma_create_qp_ex and `client_ex` instead (its PD is filled in). */
struct conn {
  struct rdma_event_channel* sch;
  struct rdma_event_channel* cch;
  struct rdma_cm_id* listen_id;
  struct rdma_cm_id* c;
  struct rdma_cm_id* s;
};

static inline int open_conn_ex(const char* host, struct conn* k,
                               struct ibv_qp_init_attr_ex* client_ex) {
  memset(k, 0, sizeof *k);
  k->sch = rdma_create_event_channel();
  k->cch = rdma_create_event_channel();
  if (k->sch == NULL || k->cch == NULL) return -1;
  k->listen_id = listening_id(k->sch, host);
  if (k->listen_id == NULL) return -1;
  k->c = resolved_id(k->cch, host, ntohs(rdma_get_src_port(k->listen_id)));
  struct ibv_qp_init_attr a = qp_attr();
  if (k->c == NULL) return -1;
  if (client_ex != NULL) {
    client_ex->pd = k->c->pd;
    client_ex->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if ((client_ex != NULL ? rdma_create_qp_ex(k->c, client_ex) : rdma_create_qp(k->c, NULL, &a)) !=
          0 ||
      rdma_connect(k->c, NULL) != 0) {
    return -1;
  }
  struct rdma_cm_event* e = EXPECT_EVENT(k->sch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (e == NULL) return -1;
  k->s = e->id;
  rdma_ack_cm_event(e);
  a = qp_attr();
  if (rdma_create_qp(k->s, NULL, &a) != 0 || rdma_accept(k->s, NULL) != 0) return -1;
  e = EXPECT_EVENT(k->sch, RDMA_CM_EVENT_ESTABLISHED);
  if (e != NULL) rdma_ack_cm_event(e);
  e = EXPECT_EVENT(k->cch, RDMA_CM_EVENT_ESTABLISHED);
  if (e == NULL) return -1;
  rdma_ack_cm_event(e);
  return 0;
}

static inline int open_conn(const char* host, struct conn* k) {
  return open_conn_ex(host, k, NULL);
}

static inline void close_conn(struct conn* k) {
  struct rdma_cm_id* ids[] = {k->c, k->s, k->listen_id};
  for (int i = 0; i < 3; ++i) {
    if (ids[i] == NULL) continue;
    if (ids[i]->qp != NULL) rdma_destroy_qp(ids[i]);
    rdma_destroy_id(ids[i]);
  }
  if (k->cch != NULL) rdma_destroy_event_channel(k->cch);
  if (k->sch != NULL) rdma_destroy_event_channel(k->sch);
}

/* The next completion of `cq` within 5 s; 1 if there was one. */
static inline int wait_wc(struct ibv_cq* cq, struct ibv_wc* wc) {
  for (int i = 0; i < 5000; ++i) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0) return n;
    usleep(1000);
  }
  return 0;
}
