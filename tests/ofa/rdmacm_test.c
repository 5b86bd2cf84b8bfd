/* rdmacm_test: an application written against the public rdma-core headers only, linked
 * (BIND_NOW) against Debian's librdmacm.so.1 and libibverbs.so.1 and run with uwarp's drop-in
 * libraries first on LD_LIBRARY_PATH (uwarp-run). It checks the rdma_cm semantics that programs
 * rely on, in one process with both ends of each connection:
 *   - devices, event strings, rdma_getaddrinfo, options, rdma_init_qp_attr;
 *   - event channels: a real fd, readable while events wait, EAGAIN under O_NONBLOCK;
 *   - RDMA_PS_UDP and RDMA_PS_IB refused with EPROTONOSUPPORT;
 *   - ADDR_RESOLVED then ROUTE_RESOLVED with id->verbs, id->pd, port_num and both addresses set;
 *   - CONNECT_REQUEST on a new id (verbs, PD, addresses, private data, the peer's IRD/ORD);
 *   - rdma_reject with private data (REJECTED on the active side), a refused connection;
 *   - rdma_accept with private data (ESTABLISHED on both sides, the active side gets the data),
 *     a Send over the connection, ports and addresses of both ids;
 *   - rdma_disconnect: the posted receive is flushed, the armed completion channel fires, and
 *     DISCONNECTED reaches both sides;
 *   - the synchronous mode: rdma_create_ep, rdma_get_request, blocking connect/accept;
 *   - memory windows over a connection: type 1 bound with ibv_bind_mw (rkey advances), type 2
 *     with IBV_WR_BIND_MW, the peer's RDMA Write and Read through them, IBV_WR_LOCAL_INV,
 *     ibv_dereg_mr EBUSY while bound, the completion opcodes, IBV_WC_MW_BIND_ERR for a bad bind;
 *   - a peer's DISCONNECTED comes after the completions that preceded it were polled, and
 *     within a bound when they are not;
 *   - a channel destroyed before its ids: their events are dropped, requests refused;
 *   - external QPs: made with ibv_create_qp and named by rdma_conn_param.qp_num on both sides
 *     (ESTABLISHED, as the kernel's iWARP CM reports, and a Send over them); a number that names
 *     no QP of the device is refused with EINVAL.
 * Over 127.0.0.1 and ::1. Exit status 0 if every check passed; each failure prints the file
 * line and the expression. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cm_support.h"

static int same_host(const struct sockaddr* a, const struct sockaddr* b) {
  if (a->sa_family != b->sa_family) return 0;
  if (a->sa_family == AF_INET) {
    return ((const struct sockaddr_in*)a)->sin_addr.s_addr ==
           ((const struct sockaddr_in*)b)->sin_addr.s_addr;
  }
  return memcmp(&((const struct sockaddr_in6*)a)->sin6_addr,
                &((const struct sockaddr_in6*)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

static void test_basics(void) {
  int n = -1;
  struct ibv_context** devs = rdma_get_devices(&n);
  CHECK(devs != NULL && n == 1);
  if (devs != NULL) {
    CHECK(devs[0] != NULL && devs[1] == NULL);
    if (devs[0] != NULL) CHECK(devs[0]->device->transport_type == IBV_TRANSPORT_IWARP);
    rdma_free_devices(devs);
  }
  CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED") == 0);
  CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)99), "UNKNOWN EVENT") == 0);

  struct rdma_event_channel* ch = rdma_create_event_channel();
  CHECK(ch != NULL && ch->fd >= 0);
  if (ch == NULL) return;
  /* Nothing waits: not readable; O_NONBLOCK gives EAGAIN. */
  CHECK(!readable(ch->fd, 0));
  fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  struct rdma_cm_event* e = NULL;
  CHECK_ERRNO(rdma_get_cm_event(ch, &e), EAGAIN);

  struct rdma_cm_id* id = NULL;
  CHECK_ERRNO(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), EPROTONOSUPPORT);
  CHECK_ERRNO(rdma_create_id(ch, &id, NULL, RDMA_PS_IB), EPROTONOSUPPORT);
  CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
  if (id != NULL) {
    uint8_t tos = 32;
    CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) == 0);
    uint8_t timeout = 14;
    CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                          sizeof timeout) == 0);
    int wide = 14; /* the kernel takes one byte */
    CHECK_ERRNO(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &wide, sizeof wide),
                EINVAL);
    /* Resolving makes the id usable for QP attributes. */
    struct sockaddr_storage dst;
    make_addr("127.0.0.1", 9, &dst);
    CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) == 0);
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT};
    int mask = 0;
    CHECK(rdma_init_qp_attr(id, &qa, &mask) == 0);
    CHECK((mask & IBV_QP_STATE) && (mask & IBV_QP_ACCESS_FLAGS) && (mask & IBV_QP_PORT));
    CHECK(qa.port_num == 1);
    /* The ack timeout is the QP's IBV_QP_TIMEOUT: set before the QP existed, and after. */
    struct ibv_qp_init_attr qia = {
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC};
    CHECK(rdma_create_qp(id, NULL, &qia) == 0);
    if (id->qp != NULL) {
      struct ibv_qp_attr got;
      struct ibv_qp_init_attr got_init;
      CHECK(ibv_query_qp(id->qp, &got, IBV_QP_TIMEOUT, &got_init) == 0 && got.timeout == 14);
      timeout = 21;
      CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                            sizeof timeout) == 0);
      CHECK(ibv_query_qp(id->qp, &got, IBV_QP_TIMEOUT, &got_init) == 0 && got.timeout == 21);
      rdma_destroy_qp(id);
    }
    CHECK(readable(ch->fd, 1000));
    CHECK(rdma_destroy_id(id) == 0); /* with ADDR_RESOLVED undelivered: no hang */
    CHECK(!readable(ch->fd, 0));
  }
  rdma_destroy_event_channel(ch);

  struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP};
  struct rdma_addrinfo* res = NULL;
  CHECK(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0);
  if (res != NULL) {
    CHECK(res->ai_src_addr != NULL && res->ai_src_addr->sa_family == AF_INET);
    CHECK(ntohs(((struct sockaddr_in*)res->ai_src_addr)->sin_port) == 7471);
    CHECK(res->ai_port_space == RDMA_PS_TCP && res->ai_qp_type == IBV_QPT_RC);
    rdma_freeaddrinfo(res);
  }
  res = NULL;
  struct rdma_addrinfo active = {.ai_port_space = RDMA_PS_TCP};
  CHECK(rdma_getaddrinfo("::1", "7471", &active, &res) == 0);
  if (res != NULL) {
    CHECK(res->ai_dst_addr != NULL && res->ai_dst_addr->sa_family == AF_INET6);
    CHECK(!(res->ai_flags & RAI_PASSIVE));
    rdma_freeaddrinfo(res);
  }
}

struct side {
  struct rdma_event_channel* ch;
  struct rdma_cm_id* id;
  struct ibv_mr* mr;
  char buf[64];
};

static int post_recv(struct side* s) {
  struct ibv_sge sge = {(uintptr_t)s->buf, sizeof s->buf, s->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* bad = NULL;
  return ibv_post_recv(s->id->qp, &wr, &bad);
}

static void test_connection(const char* host) {
  fprintf(stderr, "rdmacm_test: connections over %s\n", host);
  struct rdma_event_channel* sch = rdma_create_event_channel();
  struct rdma_event_channel* cch = rdma_create_event_channel();
  CHECK(sch != NULL && cch != NULL);
  if (sch == NULL || cch == NULL) return;

  /* The listener, on an ephemeral port. */
  struct rdma_cm_id* listen_id = NULL;
  CHECK(rdma_create_id(sch, &listen_id, (void*)0x1234, RDMA_PS_TCP) == 0);
  struct sockaddr_storage any;
  make_addr(host, 0, &any);
  CHECK(rdma_bind_addr(listen_id, (struct sockaddr*)&any) == 0);
  CHECK(rdma_listen(listen_id, 8) == 0);
  const uint16_t port = ntohs(rdma_get_src_port(listen_id));
  CHECK(port != 0);

  /* 1. Rejected, with private data both ways. */
  struct rdma_cm_id* rid = resolved_id(cch, host, port);
  if (rid == NULL) return;
  struct ibv_qp_init_attr a = qp_attr();
  CHECK(rdma_create_qp(rid, NULL, &a) == 0);
  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.private_data = "knock";
  cp.private_data_len = 6;
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  CHECK(rdma_connect(rid, &cp) == 0);
  struct rdma_cm_event* e = EXPECT_EVENT(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (e != NULL) {
    CHECK(e->listen_id == listen_id && e->id != listen_id);
    CHECK(e->id->context == (void*)0x1234);
    CHECK(e->param.conn.private_data_len >= 6 &&
          memcmp(e->param.conn.private_data, "knock", 6) == 0);
    CHECK(rdma_reject(e->id, "go away", 8) == 0);
    struct rdma_cm_id* child = e->id;
    rdma_ack_cm_event(e);
    CHECK(rdma_destroy_id(child) == 0);
  }
  e = EXPECT_EVENT(cch, RDMA_CM_EVENT_REJECTED);
  if (e != NULL) {
    CHECK(e->id == rid && e->status != 0);
    CHECK(e->param.conn.private_data_len >= 8 &&
          memcmp(e->param.conn.private_data, "go away", 8) == 0);
    rdma_ack_cm_event(e);
  }
  rdma_destroy_qp(rid);
  CHECK(rdma_destroy_id(rid) == 0);

  /* 2. Accepted; a Send; disconnected. The client's CQs are created by rdma_create_qp. */
  struct side c = {.ch = cch};
  struct side s = {.ch = sch};
  c.id = resolved_id(cch, host, port);
  if (c.id == NULL) return;
  a = qp_attr();
  CHECK(rdma_create_qp(c.id, NULL, &a) == 0);
  CHECK(c.id->qp != NULL && c.id->send_cq != NULL && c.id->recv_cq != NULL &&
        c.id->recv_cq_channel != NULL);
  c.mr = ibv_reg_mr(c.id->pd, c.buf, sizeof c.buf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(c.mr != NULL && post_recv(&c) == 0);
  memset(&cp, 0, sizeof cp);
  cp.private_data = "hello";
  cp.private_data_len = 6;
  cp.responder_resources = 3; /* this side's IRD */
  cp.initiator_depth = 2;     /* this side's ORD */
  CHECK(rdma_connect(c.id, &cp) == 0);

  e = EXPECT_EVENT(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (e == NULL) return;
  s.id = e->id;
  CHECK(s.id->verbs != NULL && s.id->pd != NULL && s.id->port_num == 1);
  CHECK(e->param.conn.private_data_len >= 6 && memcmp(e->param.conn.private_data, "hello", 6) == 0);
  /* The peer's IRD bounds this side's ORD and the other way round. */
  CHECK(e->param.conn.initiator_depth == 3 && e->param.conn.responder_resources == 2);
  CHECK(same_host(rdma_get_local_addr(s.id), rdma_get_peer_addr(c.id)));
  CHECK(rdma_get_src_port(s.id) == htons(port));
  rdma_ack_cm_event(e);
  struct ibv_cq* scq = ibv_create_cq(s.id->verbs, 16, NULL, NULL, 0);
  CHECK(scq != NULL);
  a = qp_attr();
  a.send_cq = scq;
  a.recv_cq = scq;
  CHECK(rdma_create_qp(s.id, NULL, &a) == 0);
  s.mr = ibv_reg_mr(s.id->pd, s.buf, sizeof s.buf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(s.mr != NULL && post_recv(&s) == 0);
  memset(&cp, 0, sizeof cp);
  cp.private_data = "welcome";
  cp.private_data_len = 8;
  CHECK(rdma_accept(s.id, &cp) == 0);
  e = EXPECT_EVENT(sch, RDMA_CM_EVENT_ESTABLISHED);
  if (e != NULL) {
    CHECK(e->id == s.id);
    rdma_ack_cm_event(e);
  }
  e = EXPECT_EVENT(cch, RDMA_CM_EVENT_ESTABLISHED);
  if (e != NULL) {
    CHECK(e->id == c.id);
    CHECK(e->param.conn.private_data_len >= 8 &&
          memcmp(e->param.conn.private_data, "welcome", 8) == 0);
    rdma_ack_cm_event(e);
  }
  CHECK(same_host(rdma_get_local_addr(c.id), rdma_get_peer_addr(s.id)));
  CHECK(rdma_get_dst_port(s.id) == rdma_get_src_port(c.id) && rdma_get_src_port(c.id) != 0);
  CHECK(rdma_get_dst_port(c.id) == htons(port));

  /* A Send from the client reaches the server's posted receive (rdma_verbs.h helpers). */
  strcpy(c.buf, "ping");
  CHECK(rdma_post_send(c.id, NULL, c.buf, 5, c.mr, IBV_SEND_SIGNALED) == 0);
  struct ibv_wc wc;
  CHECK(rdma_get_send_comp(c.id, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
  int got = 0;
  for (int i = 0; i < 5000000 && got == 0; ++i) got = ibv_poll_cq(scq, 1, &wc);
  CHECK(got == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 5);
  CHECK(strcmp(s.buf, "ping") == 0);

  /* RFC 7306 RDMA Write with Immediate: the data lands in the server's memory and its next
   * receive completes as IBV_WC_RECV_RDMA_WITH_IMM with imm_data as the client stored it (network
   * order) and byte_len the Write's length. Send with Immediate is refused (RFC 7306 has none). */
  static char target[64];
  struct ibv_mr* tmr = ibv_reg_mr(s.id->pd, target, sizeof target,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(tmr != NULL && post_recv(&s) == 0);
  strcpy(c.buf, "with imm");
  struct ibv_sge wsge = {(uintptr_t)c.buf, 9, c.mr->lkey};
  struct ibv_send_wr wimm;
  memset(&wimm, 0, sizeof wimm);
  wimm.wr_id = 21;
  wimm.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wimm.sg_list = &wsge;
  wimm.num_sge = 1;
  wimm.send_flags = IBV_SEND_SIGNALED;
  wimm.imm_data = htonl(0x12345678);
  wimm.wr.rdma.remote_addr = (uintptr_t)target + 8;
  wimm.wr.rdma.rkey = tmr != NULL ? tmr->rkey : 0;
  struct ibv_send_wr* bad_wr = NULL;
  CHECK(ibv_post_send(c.id->qp, &wimm, &bad_wr) == 0);
  CHECK(rdma_get_send_comp(c.id, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
        wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == 21);
  got = 0;
  for (int i = 0; i < 5000000 && got == 0; ++i) got = ibv_poll_cq(scq, 1, &wc);
  CHECK(got == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
  CHECK((wc.wc_flags & IBV_WC_WITH_IMM) != 0 && wc.imm_data == htonl(0x12345678));
  CHECK(wc.byte_len == 9 && strcmp(target + 8, "with imm") == 0);
  struct ibv_send_wr simm = wimm;
  simm.opcode = IBV_WR_SEND_WITH_IMM;
  bad_wr = NULL;
  CHECK(ibv_post_send(c.id->qp, &simm, &bad_wr) == EINVAL && bad_wr == &simm);
  if (tmr != NULL) ibv_dereg_mr(tmr);

  /* rdma_disconnect flushes the client's posted receive and fires its armed channel. */
  CHECK(ibv_req_notify_cq(c.id->recv_cq, 0) == 0);
  CHECK(rdma_disconnect(c.id) == 0);
  CHECK(readable(c.id->recv_cq_channel->fd, 5000));
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  CHECK(ibv_get_cq_event(c.id->recv_cq_channel, &ev_cq, &ev_ctx) == 0 && ev_cq == c.id->recv_cq);
  ibv_ack_cq_events(c.id->recv_cq, 1);
  CHECK(ibv_poll_cq(c.id->recv_cq, 1, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR);
  e = EXPECT_EVENT(sch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) {
    CHECK(e->id == s.id);
    rdma_ack_cm_event(e);
  }
  CHECK(rdma_disconnect(s.id) == 0);
  e = EXPECT_EVENT(cch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) {
    CHECK(e->id == c.id);
    rdma_ack_cm_event(e);
  }
  rdma_destroy_qp(s.id);
  ibv_dereg_mr(s.mr);
  ibv_destroy_cq(scq);
  CHECK(rdma_destroy_id(s.id) == 0);
  rdma_destroy_qp(c.id);
  ibv_dereg_mr(c.mr);
  CHECK(rdma_destroy_id(c.id) == 0);
  CHECK(rdma_destroy_id(listen_id) == 0);

  /* 3. Nobody listens any more: the connection is refused. */
  rid = resolved_id(cch, host, port);
  if (rid != NULL) {
    a = qp_attr();
    CHECK(rdma_create_qp(rid, NULL, &a) == 0);
    CHECK(rdma_connect(rid, NULL) == 0);
    e = next_event(cch);
    CHECK(e != NULL &&
          (e->event == RDMA_CM_EVENT_REJECTED || e->event == RDMA_CM_EVENT_CONNECT_ERROR ||
           e->event == RDMA_CM_EVENT_UNREACHABLE));
    if (e != NULL) {
      CHECK(e->status < 0);
      rdma_ack_cm_event(e);
    }
    rdma_destroy_qp(rid);
    CHECK(rdma_destroy_id(rid) == 0);
  }
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(sch);
}

/* The synchronous mode (NULL channel) of rdma_server / rdma_client. */
struct sync_args {
  const char* host;
  const char* port;
  int result;
};

static void* sync_client(void* p) {
  struct sync_args* args = p;
  struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP};
  struct rdma_addrinfo* res = NULL;
  args->result = -1;
  if (rdma_getaddrinfo(args->host, args->port, &hints, &res) != 0) return NULL;
  struct ibv_qp_init_attr a = qp_attr();
  struct rdma_cm_id* id = NULL;
  int ok = rdma_create_ep(&id, res, NULL, &a) == 0;
  rdma_freeaddrinfo(res);
  if (!ok) return NULL;
  ok = id->qp != NULL;
  struct rdma_conn_param cp = {.private_data = "sync", .private_data_len = 5};
  if (ok && rdma_connect(id, &cp) == 0) { /* blocks until ESTABLISHED */
    ok = id->event != NULL && id->event->event == RDMA_CM_EVENT_ESTABLISHED;
    if (rdma_disconnect(id) != 0) ok = 0; /* blocks until DISCONNECTED */
    args->result = ok ? 0 : -1;
  }
  rdma_destroy_ep(id);
  return NULL;
}

static void test_sync(const char* host) {
  fprintf(stderr, "rdmacm_test: synchronous ids over %s\n", host);
  struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP};
  struct rdma_addrinfo* res = NULL;
  char port[8];
  snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 10000));
  CHECK(rdma_getaddrinfo(host, port, &hints, &res) == 0);
  if (res == NULL) return;
  struct ibv_qp_init_attr a = qp_attr();
  struct rdma_cm_id* listen_id = NULL;
  CHECK(rdma_create_ep(&listen_id, res, NULL, &a) == 0);
  rdma_freeaddrinfo(res);
  if (listen_id == NULL) return;
  CHECK(rdma_listen(listen_id, 2) == 0);
  struct sync_args args = {.host = host, .port = port};
  pthread_t t;
  pthread_create(&t, NULL, sync_client, &args);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_get_request(listen_id, &id) == 0); /* blocks until CONNECT_REQUEST */
  if (id != NULL) {
    CHECK(id->qp != NULL);
    CHECK(id->event != NULL && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST);
    CHECK(id->event->param.conn.private_data_len >= 5 &&
          memcmp(id->event->param.conn.private_data, "sync", 5) == 0);
    CHECK(rdma_accept(id, NULL) == 0); /* blocks until ESTABLISHED */
    CHECK(rdma_disconnect(id) == 0);
    rdma_destroy_ep(id);
  }
  pthread_join(t, NULL);
  CHECK(args.result == 0);
  rdma_destroy_ep(listen_id);
}

/* --- memory windows ------------------------------------------------------------------------ */

/* `id` posts one RDMA Write or Read of `len` bytes of `local` (lkey) at `remote` of `rkey`; the
 * status of its completion (-1 if it could not be posted or did not complete). */
static int rdma_op(struct rdma_cm_id* id, enum ibv_wr_opcode op, void* local, uint32_t lkey,
                   uint32_t len, uint64_t remote, uint32_t rkey) {
  struct ibv_sge sge = {(uintptr_t)local, len, lkey};
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 60;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr* bad = NULL;
  if (ibv_post_send(id->qp, &wr, &bad) != 0) return -1;
  struct ibv_wc wc;
  if (wait_wc(id->send_cq, &wc) != 1 || wc.wr_id != 60) return -1;
  return (int)wc.status;
}

/* A type 2 bind of `mw` as `rkey` over [addr, addr + len) of `mr`, signaled. */
static struct ibv_send_wr bind_wr(struct ibv_mw* mw, uint32_t rkey, struct ibv_mr* mr, void* addr,
                                  uint64_t len, unsigned rights) {
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 71;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = mr;
  wr.bind_mw.bind_info.addr = (uintptr_t)addr;
  wr.bind_mw.bind_info.length = len;
  wr.bind_mw.bind_info.mw_access_flags = rights;
  return wr;
}

static void test_memory_windows(const char* host) {
  fprintf(stderr, "rdmacm_test: memory windows over %s\n", host);
  struct conn k;
  CHECK(open_conn(host, &k) == 0);
  if (k.s == NULL || k.s->qp == NULL || k.c == NULL || k.c->qp == NULL) {
    close_conn(&k);
    return;
  }
  static char mem[8192]; /* the server's memory, reached only through windows */
  static char cbuf[512]; /* the client's */
  const unsigned remote_rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  /* Local write and binding only: the remote rights come from the windows. */
  struct ibv_mr* mr = ibv_reg_mr(k.s->pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  struct ibv_mr* cmr = ibv_reg_mr(k.c->pd, cbuf, sizeof cbuf, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mw* mw1 = ibv_alloc_mw(k.s->pd, IBV_MW_TYPE_1);
  struct ibv_mw* mw2 = ibv_alloc_mw(k.s->pd, IBV_MW_TYPE_2);
  CHECK(mr != NULL && cmr != NULL && mw1 != NULL && mw2 != NULL);
  if (mr == NULL || cmr == NULL || mw1 == NULL || mw2 == NULL) {
    close_conn(&k);
    return;
  }
  struct ibv_wc wc;
  struct ibv_send_wr* bad = NULL;

  /* Type 1: ibv_bind_mw moves mw->rkey to the next key at once; the bind completes in order. */
  const uint32_t rkey0 = mw1->rkey;
  struct ibv_mw_bind b1;
  memset(&b1, 0, sizeof b1);
  b1.wr_id = 51;
  b1.send_flags = IBV_SEND_SIGNALED;
  b1.bind_info.mr = mr;
  b1.bind_info.addr = (uintptr_t)mem;
  b1.bind_info.length = 4096;
  b1.bind_info.mw_access_flags = remote_rw | IBV_ACCESS_LOCAL_WRITE; /* local write: ignored */
  CHECK(ibv_bind_mw(k.s->qp, mw1, &b1) == 0);
  CHECK(mw1->rkey == ibv_inc_rkey(rkey0));
  CHECK(wait_wc(k.s->send_cq, &wc) == 1 && wc.wr_id == 51 && wc.status == IBV_WC_SUCCESS &&
        wc.opcode == IBV_WC_BIND_MW);
  strcpy(cbuf, "through window one");
  CHECK(rdma_op(k.c, IBV_WR_RDMA_WRITE, cbuf, cmr->lkey, 19, (uintptr_t)mem + 100, mw1->rkey) ==
        IBV_WC_SUCCESS);
  memset(cbuf, 0, sizeof cbuf);
  CHECK(rdma_op(k.c, IBV_WR_RDMA_READ, cbuf, cmr->lkey, 19, (uintptr_t)mem + 100, mw1->rkey) ==
        IBV_WC_SUCCESS);
  CHECK(strcmp(cbuf, "through window one") == 0 && strcmp(mem + 100, "through window one") == 0);
  CHECK(ibv_dereg_mr(mr) == EBUSY); /* a window is bound in it */
  /* Unbind (no region, length 0): the key advances again. */
  const uint32_t rkey1 = mw1->rkey;
  memset(&b1.bind_info, 0, sizeof b1.bind_info);
  b1.wr_id = 52;
  CHECK(ibv_bind_mw(k.s->qp, mw1, &b1) == 0);
  CHECK(mw1->rkey == ibv_inc_rkey(rkey1));
  CHECK(wait_wc(k.s->send_cq, &wc) == 1 && wc.wr_id == 52 && wc.status == IBV_WC_SUCCESS &&
        wc.opcode == IBV_WC_BIND_MW);
  /* A type 1 window is not bound by IBV_WR_BIND_MW. */
  struct ibv_send_wr w = bind_wr(mw1, ibv_inc_rkey(mw1->rkey), mr, mem, 64, remote_rw);
  CHECK(ibv_post_send(k.s->qp, &w, &bad) == EINVAL && bad == &w);

  /* Type 2: bound with the key the application chose; mw->rkey is set when posted. */
  const uint32_t rkey2 = ibv_inc_rkey(mw2->rkey);
  w = bind_wr(mw2, rkey2, mr, mem + 4096, 4096, remote_rw);
  CHECK(ibv_post_send(k.s->qp, &w, &bad) == 0);
  CHECK(mw2->rkey == rkey2);
  CHECK(wait_wc(k.s->send_cq, &wc) == 1 && wc.wr_id == 71 && wc.status == IBV_WC_SUCCESS &&
        wc.opcode == IBV_WC_BIND_MW);
  strcpy(cbuf, "through window two");
  CHECK(rdma_op(k.c, IBV_WR_RDMA_WRITE, cbuf, cmr->lkey, 19, (uintptr_t)mem + 5000, rkey2) ==
        IBV_WC_SUCCESS);
  memset(cbuf, 0, sizeof cbuf);
  CHECK(rdma_op(k.c, IBV_WR_RDMA_READ, cbuf, cmr->lkey, 19, (uintptr_t)mem + 5000, rkey2) ==
        IBV_WC_SUCCESS);
  CHECK(strcmp(cbuf, "through window two") == 0 && strcmp(mem + 5000, "through window two") == 0);
  CHECK(ibv_dereg_mr(mr) == EBUSY);
  /* Invalidated locally: then the region can go. */
  struct ibv_send_wr inv;
  memset(&inv, 0, sizeof inv);
  inv.wr_id = 72;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = rkey2;
  CHECK(ibv_post_send(k.s->qp, &inv, &bad) == 0);
  CHECK(wait_wc(k.s->send_cq, &wc) == 1 && wc.wr_id == 72 && wc.status == IBV_WC_SUCCESS &&
        wc.opcode == IBV_WC_LOCAL_INV);
  /* The invalidated key names nothing: the peer is refused (and the connection ends). */
  CHECK(rdma_op(k.c, IBV_WR_RDMA_READ, cbuf, cmr->lkey, 8, (uintptr_t)mem + 5000, rkey2) ==
        IBV_WC_REM_ACCESS_ERR);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_mw(mw1) == 0 && ibv_dealloc_mw(mw2) == 0);
  ibv_dereg_mr(cmr);
  close_conn(&k);

  /* A bind that breaks the rules (a region registered without IBV_ACCESS_MW_BIND) completes with
   * IBV_WC_MW_BIND_ERR. */
  CHECK(open_conn(host, &k) == 0);
  if (k.s != NULL && k.s->qp != NULL) {
    mr = ibv_reg_mr(k.s->pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    mw2 = ibv_alloc_mw(k.s->pd, IBV_MW_TYPE_2);
    CHECK(mr != NULL && mw2 != NULL);
    if (mr != NULL && mw2 != NULL) {
      w = bind_wr(mw2, ibv_inc_rkey(mw2->rkey), mr, mem, 64, IBV_ACCESS_REMOTE_READ);
      CHECK(ibv_post_send(k.s->qp, &w, &bad) == 0);
      CHECK(wait_wc(k.s->send_cq, &wc) == 1 && wc.wr_id == 71 && wc.status == IBV_WC_MW_BIND_ERR &&
            wc.opcode == IBV_WC_BIND_MW);
      CHECK(ibv_dereg_mr(mr) == 0); /* nothing was bound */
      CHECK(ibv_dealloc_mw(mw2) == 0);
    }
  }
  close_conn(&k);
}

/* `id` posts one atomic `op` on the word at `remote` of `rkey`, its result to `result`; the
 * completion's status (-1 if it could not be posted or did not complete), and in *wc_out the
 * completion. */
static int atomic_op(struct rdma_cm_id* id, enum ibv_wr_opcode op, uint64_t* result, uint32_t lkey,
                     uint64_t remote, uint32_t rkey, uint64_t compare_add, uint64_t swap,
                     struct ibv_wc* wc_out) {
  struct ibv_sge sge = {(uintptr_t)result, 8, lkey};
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 80;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = remote;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  struct ibv_send_wr* bad = NULL;
  int rc = ibv_post_send(id->qp, &wr, &bad);
  if (rc != 0) return -rc - 1000;
  if (wait_wc(id->send_cq, wc_out) != 1 || wc_out->wr_id != 80) return -1;
  return (int)wc_out->status;
}

/* RFC 7306 atomics through libibverbs: IBV_WR_ATOMIC_FETCH_AND_ADD and _CMP_AND_SWP on a word
 * registered with IBV_ACCESS_REMOTE_ATOMIC, their completions (IBV_WC_FETCH_ADD, _COMP_SWAP,
 * byte_len 8) and the value before in the local buffer; a misaligned word is EINVAL at post;
 * a region without the right ends in IBV_WC_REM_ACCESS_ERR. */
static void test_atomics(const char* host) {
  fprintf(stderr, "rdmacm_test: atomics over %s\n", host);
  struct conn k;
  CHECK(open_conn(host, &k) == 0);
  if (k.s == NULL || k.s->qp == NULL || k.c == NULL || k.c->qp == NULL) {
    close_conn(&k);
    return;
  }
  static uint64_t words[2] = {100, 0};
  static uint64_t result[1];
  struct ibv_mr* wmr = ibv_reg_mr(k.s->pd, words, sizeof words,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  struct ibv_mr* nmr = ibv_reg_mr(k.s->pd, &words[1], 8, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr* rmr = ibv_reg_mr(k.c->pd, result, sizeof result, IBV_ACCESS_LOCAL_WRITE);
  CHECK(wmr != NULL && nmr != NULL && rmr != NULL);
  if (wmr == NULL || nmr == NULL || rmr == NULL) {
    close_conn(&k);
    return;
  }
  struct ibv_wc wc;
  CHECK(atomic_op(k.c, IBV_WR_ATOMIC_FETCH_AND_ADD, result, rmr->lkey, (uintptr_t)&words[0],
                  wmr->rkey, 23, 0, &wc) == IBV_WC_SUCCESS);
  CHECK(wc.opcode == IBV_WC_FETCH_ADD && wc.byte_len == 8 && result[0] == 100);
  CHECK(atomic_op(k.c, IBV_WR_ATOMIC_CMP_AND_SWP, result, rmr->lkey, (uintptr_t)&words[0],
                  wmr->rkey, 123, 7, &wc) == IBV_WC_SUCCESS);
  CHECK(wc.opcode == IBV_WC_COMP_SWAP && wc.byte_len == 8 && result[0] == 123);
  CHECK(atomic_op(k.c, IBV_WR_ATOMIC_CMP_AND_SWP, result, rmr->lkey, (uintptr_t)&words[0],
                  wmr->rkey, 123, 9, &wc) == IBV_WC_SUCCESS);
  CHECK(result[0] == 7 && __atomic_load_n(&words[0], __ATOMIC_ACQUIRE) == 7);
  CHECK(atomic_op(k.c, IBV_WR_ATOMIC_FETCH_AND_ADD, result, rmr->lkey, (uintptr_t)&words[0] + 4,
                  wmr->rkey, 1, 0, &wc) == -EINVAL - 1000);
  CHECK(atomic_op(k.c, IBV_WR_ATOMIC_FETCH_AND_ADD, result, rmr->lkey, (uintptr_t)&words[1],
                  nmr->rkey, 1, 0, &wc) == IBV_WC_REM_ACCESS_ERR);
  CHECK(__atomic_load_n(&words[1], __ATOMIC_ACQUIRE) == 0);
  ibv_dereg_mr(rmr);
  ibv_dereg_mr(nmr);
  ibv_dereg_mr(wmr);
  close_conn(&k);
}

/* On-demand paging through libibverbs over an rdma_cm connection: the server registers the
 * implicit region (NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND) and memory it maps afterwards takes a
 * 256 KiB RDMA Write and gives it back to a Read; a Write to an address with no page behind it
 * fails the writer's QP (the server's Terminate, docs/on-demand-paging.md), and the server lives. */
static void test_on_demand(const char* host) {
  fprintf(stderr, "rdmacm_test: on-demand paging over %s\n", host);
  struct conn k;
  CHECK(open_conn(host, &k) == 0);
  if (k.s == NULL || k.s->qp == NULL || k.c == NULL || k.c->qp == NULL) {
    close_conn(&k);
    return;
  }
  const size_t len = 256 * 1024;
  struct ibv_mr* all = ibv_reg_mr(k.s->pd, NULL, SIZE_MAX,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
  uint8_t* later = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint8_t* src = malloc(len);
  uint8_t* back = calloc(1, len);
  struct ibv_mr* smr = src != NULL ? ibv_reg_mr(k.c->pd, src, len, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_mr* bmr = back != NULL ? ibv_reg_mr(k.c->pd, back, len, IBV_ACCESS_LOCAL_WRITE) : NULL;
  CHECK(all != NULL && later != MAP_FAILED && smr != NULL && bmr != NULL);
  if (all != NULL && later != MAP_FAILED && smr != NULL && bmr != NULL) {
    for (size_t i = 0; i < len; ++i) src[i] = (uint8_t)(i * 7 + 1);
    CHECK(rdma_op(k.c, IBV_WR_RDMA_WRITE, src, smr->lkey, (uint32_t)len, (uintptr_t)later,
                  all->rkey) == IBV_WC_SUCCESS);
    CHECK(rdma_op(k.c, IBV_WR_RDMA_READ, back, bmr->lkey, (uint32_t)len, (uintptr_t)later,
                  all->rkey) == IBV_WC_SUCCESS);
    CHECK(memcmp(back, src, len) == 0 && memcmp(later, src, len) == 0);
    /* Page 0 is never mapped: the Write may complete (TCP took it) before the Terminate ends
     * the QP, which the next request then finds. */
    rdma_op(k.c, IBV_WR_RDMA_WRITE, src, smr->lkey, 64, 64, all->rkey);
    int status = IBV_WC_SUCCESS;
    for (int i = 0; i < 50 && status == IBV_WC_SUCCESS; ++i) {
      status = rdma_op(k.c, IBV_WR_RDMA_READ, back, bmr->lkey, 8, (uintptr_t)later, all->rkey);
      if (status == IBV_WC_SUCCESS) usleep(10000);
    }
    CHECK(status != IBV_WC_SUCCESS);
  }
  if (bmr != NULL) ibv_dereg_mr(bmr);
  if (smr != NULL) ibv_dereg_mr(smr);
  if (all != NULL) ibv_dereg_mr(all);
  if (later != MAP_FAILED) munmap(later, len);
  free(back);
  free(src);
  close_conn(&k);
}

/* An active id bound with rdma_bind_addr connects from the bound address and port: the server
 * sees that port as the peer's, and the client keeps it as its source port (as with the
 * kernel's rdma_cm; libfabric's verbs provider relies on it). */
static void test_bound_source(const char* host) {
  fprintf(stderr, "rdmacm_test: a bound source port over %s\n", host);
  struct rdma_event_channel* sch = rdma_create_event_channel();
  struct rdma_event_channel* cch = rdma_create_event_channel();
  struct rdma_cm_id* listen_id = NULL;
  struct rdma_cm_id* c = NULL;
  struct sockaddr_storage any;
  make_addr(host, 0, &any);
  CHECK(rdma_create_id(sch, &listen_id, NULL, RDMA_PS_TCP) == 0);
  CHECK(rdma_bind_addr(listen_id, (struct sockaddr*)&any) == 0 && rdma_listen(listen_id, 1) == 0);
  CHECK(rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) == 0);
  CHECK(rdma_bind_addr(c, (struct sockaddr*)&any) == 0);
  const uint16_t bound = ntohs(rdma_get_src_port(c));
  CHECK(bound != 0);
  struct sockaddr_storage dst;
  make_addr(host, ntohs(rdma_get_src_port(listen_id)), &dst);
  CHECK(rdma_resolve_addr(c, NULL, (struct sockaddr*)&dst, 2000) == 0);
  struct rdma_cm_event* e = EXPECT_EVENT(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (e != NULL) rdma_ack_cm_event(e);
  CHECK(rdma_resolve_route(c, 2000) == 0);
  e = EXPECT_EVENT(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  if (e != NULL) rdma_ack_cm_event(e);
  struct ibv_qp_init_attr a = qp_attr();
  CHECK(rdma_create_qp(c, NULL, &a) == 0 && rdma_connect(c, NULL) == 0);
  e = EXPECT_EVENT(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (e != NULL) {
    struct rdma_cm_id* s = e->id;
    CHECK(ntohs(rdma_get_dst_port(s)) == bound);
    rdma_ack_cm_event(e);
    a = qp_attr();
    CHECK(rdma_create_qp(s, NULL, &a) == 0 && rdma_accept(s, NULL) == 0);
    e = EXPECT_EVENT(cch, RDMA_CM_EVENT_ESTABLISHED);
    if (e != NULL) rdma_ack_cm_event(e);
    CHECK(ntohs(rdma_get_src_port(c)) == bound);
    e = EXPECT_EVENT(sch, RDMA_CM_EVENT_ESTABLISHED);
    if (e != NULL) rdma_ack_cm_event(e);
    rdma_destroy_qp(s);
    rdma_destroy_id(s);
  }
  rdma_destroy_qp(c);
  rdma_destroy_id(c);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(sch);
}

/* The peer sends one message and disconnects at once. Its completion reaches the receiver's CQ
 * before the disconnection, and the receiver's DISCONNECTED waits until that completion was
 * polled (an application that polls its CQ and then reads its events must not see the
 * disconnection first and lose the message). An application that does not poll gets the event
 * all the same, within a bound, and still finds the completion. */
static void test_disconnect_after_completions(const char* host, int poll_first) {
  fprintf(stderr, "rdmacm_test: DISCONNECTED after the completions before it over %s (%s)\n", host,
          poll_first ? "the receiver polls" : "the receiver does not poll");
  struct conn k;
  static char rbuf[64], sbuf[16] = "last message";
  CHECK(open_conn(host, &k) == 0);
  struct ibv_mr* mr =
      k.s != NULL ? ibv_reg_mr(k.s->pd, rbuf, sizeof rbuf, IBV_ACCESS_LOCAL_WRITE) : NULL;
  CHECK(mr != NULL);
  if (mr == NULL) {
    close_conn(&k);
    return;
  }
  struct ibv_sge rsge = {(uintptr_t)rbuf, sizeof rbuf, mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 90, .sg_list = &rsge, .num_sge = 1};
  struct ibv_recv_wr* rbad = NULL;
  CHECK(ibv_post_recv(k.s->qp, &rwr, &rbad) == 0);
  struct ibv_sge ssge = {(uintptr_t)sbuf, sizeof sbuf, 0};
  struct ibv_send_wr swr = {.wr_id = 91,
                            .sg_list = &ssge,
                            .num_sge = 1,
                            .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED};
  struct ibv_send_wr* sbad = NULL;
  struct ibv_wc wc;
  CHECK(ibv_post_send(k.c->qp, &swr, &sbad) == 0);
  CHECK(wait_wc(k.c->send_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
  CHECK(rdma_disconnect(k.c) == 0);
  /* The receiver has processed the disconnection once its QP left RTS. */
  enum ibv_qp_state state = query_state(k.s->qp);
  for (int i = 0; i < 5000 && state == IBV_QPS_RTS; ++i) {
    usleep(1000);
    state = query_state(k.s->qp);
  }
  const double left_rts = now_ms();
  CHECK(state != IBV_QPS_RTS && state != IBV_QPS_UNKNOWN);
  if (poll_first) {
    /* Held for 250 ms at most: asserted only when this thread got here well within that. */
    const int early = readable(k.sch->fd, 0);
    if (now_ms() - left_rts < 100) CHECK(!early);
    CHECK(ibv_poll_cq(k.s->recv_cq, 1, &wc) == 1 && wc.wr_id == 90 && wc.status == IBV_WC_SUCCESS &&
          wc.byte_len == sizeof sbuf && memcmp(rbuf, sbuf, sizeof sbuf) == 0);
  }
  struct rdma_cm_event* e = EXPECT_EVENT(k.sch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) rdma_ack_cm_event(e);
  if (!poll_first) {
    CHECK(ibv_poll_cq(k.s->recv_cq, 1, &wc) == 1 && wc.wr_id == 90 && wc.status == IBV_WC_SUCCESS &&
          wc.byte_len == sizeof sbuf);
  }
  e = EXPECT_EVENT(k.cch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) rdma_ack_cm_event(e);
  close_conn(&k);
  ibv_dereg_mr(mr);
}

/* The application destroys the event channel of a connected id and of a listener before the ids
 * (rdma-core allows it: the channel's fd is closed, later events are lost). The peer's
 * disconnection and a new connection request then find no channel: the disconnection is
 * dropped, the request refused, and nothing else is harmed. */
static void test_channel_destroyed_first(const char* host) {
  fprintf(stderr, "rdmacm_test: a channel destroyed before its ids over %s\n", host);
  struct conn k;
  CHECK(open_conn(host, &k) == 0);
  if (k.s == NULL) {
    close_conn(&k);
    return;
  }
  rdma_destroy_event_channel(k.sch);
  k.sch = NULL;
  CHECK(rdma_disconnect(k.c) == 0);
  struct rdma_cm_event* e = EXPECT_EVENT(k.cch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) rdma_ack_cm_event(e);
  usleep(400 * 1000); /* longer than a held DISCONNECTED waits */
  struct rdma_cm_id* c2 = resolved_id(k.cch, host, ntohs(rdma_get_src_port(k.listen_id)));
  struct ibv_qp_init_attr a = qp_attr();
  CHECK(c2 != NULL && rdma_create_qp(c2, NULL, &a) == 0 && rdma_connect(c2, NULL) == 0);
  e = EXPECT_EVENT(k.cch, RDMA_CM_EVENT_REJECTED);
  if (e != NULL) rdma_ack_cm_event(e);
  if (c2 != NULL) {
    rdma_destroy_qp(c2);
    rdma_destroy_id(c2);
  }
  close_conn(&k);
}

/* QPs the application made with ibv_create_qp, named by rdma_conn_param.qp_num on both sides. */
static void test_external_qp(const char* host) {
  fprintf(stderr, "rdmacm_test: external QPs over %s\n", host);
  struct rdma_event_channel* sch = rdma_create_event_channel();
  struct rdma_event_channel* cch = rdma_create_event_channel();
  CHECK(sch != NULL && cch != NULL);
  if (sch == NULL || cch == NULL) return;
  struct rdma_cm_id* listen_id = listening_id(sch, host);
  CHECK(listen_id != NULL);
  if (listen_id == NULL) return;
  struct rdma_cm_id* c = resolved_id(cch, host, ntohs(rdma_get_src_port(listen_id)));
  if (c == NULL) return;
  struct ibv_cq* ccq = ibv_create_cq(c->verbs, 16, NULL, NULL, 0);
  struct ibv_qp_init_attr a = qp_attr();
  a.send_cq = a.recv_cq = ccq;
  struct ibv_qp* cqp = ibv_create_qp(c->pd, &a);
  CHECK(ccq != NULL && cqp != NULL);
  if (cqp == NULL) return;
  static char cbuf[64], sbuf[64];
  struct ibv_mr* cmr = ibv_reg_mr(c->pd, cbuf, sizeof cbuf, IBV_ACCESS_LOCAL_WRITE);
  struct rdma_conn_param cp;
  memset(&cp, 0, sizeof cp);
  cp.qp_num = cqp->qp_num + 1000; /* no QP of the device has this number */
  errno = 0;
  CHECK(rdma_connect(c, &cp) == -1 && errno == EINVAL);
  cp.qp_num = cqp->qp_num;
  CHECK(rdma_connect(c, &cp) == 0);
  CHECK(c->qp == NULL);
  struct rdma_cm_event* e = EXPECT_EVENT(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (e == NULL) return;
  struct rdma_cm_id* s = e->id;
  rdma_ack_cm_event(e);
  struct ibv_cq* scq = ibv_create_cq(s->verbs, 16, NULL, NULL, 0);
  a = qp_attr();
  a.send_cq = a.recv_cq = scq;
  struct ibv_qp* sqp = ibv_create_qp(s->pd, &a);
  struct ibv_mr* smr = ibv_reg_mr(s->pd, sbuf, sizeof sbuf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(scq != NULL && sqp != NULL && smr != NULL);
  if (sqp == NULL || smr == NULL) return;
  struct ibv_sge rsge = {(uintptr_t)sbuf, sizeof sbuf, smr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 5, .sg_list = &rsge, .num_sge = 1};
  struct ibv_recv_wr* bad_rwr = NULL;
  CHECK(ibv_post_recv(sqp, &rwr, &bad_rwr) == 0);
  memset(&cp, 0, sizeof cp);
  cp.qp_num = sqp->qp_num;
  CHECK(rdma_accept(s, &cp) == 0);
  e = EXPECT_EVENT(sch, RDMA_CM_EVENT_ESTABLISHED);
  if (e != NULL) rdma_ack_cm_event(e);
  e = EXPECT_EVENT(cch, RDMA_CM_EVENT_ESTABLISHED);
  if (e != NULL) rdma_ack_cm_event(e);
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qia;
  CHECK(ibv_query_qp(cqp, &qa, IBV_QP_STATE, &qia) == 0 && qa.qp_state == IBV_QPS_RTS);
  CHECK(ibv_query_qp(sqp, &qa, IBV_QP_STATE, &qia) == 0 && qa.qp_state == IBV_QPS_RTS);
  strcpy(cbuf, "external");
  struct ibv_sge ssge = {(uintptr_t)cbuf, 9, cmr != NULL ? cmr->lkey : 0};
  struct ibv_send_wr swr;
  memset(&swr, 0, sizeof swr);
  swr.wr_id = 6;
  swr.opcode = IBV_WR_SEND;
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_SIGNALED;
  struct ibv_send_wr* bad_swr = NULL;
  CHECK(ibv_post_send(cqp, &swr, &bad_swr) == 0);
  struct ibv_wc wc;
  CHECK(wait_wc(ccq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 6);
  CHECK(wait_wc(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 5 &&
        wc.byte_len == 9 && wc.qp_num == sqp->qp_num);
  CHECK(strcmp(sbuf, "external") == 0);
  CHECK(rdma_disconnect(c) == 0);
  e = EXPECT_EVENT(sch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) rdma_ack_cm_event(e);
  CHECK(rdma_disconnect(s) == 0);
  e = EXPECT_EVENT(cch, RDMA_CM_EVENT_DISCONNECTED);
  if (e != NULL) rdma_ack_cm_event(e);
  CHECK(rdma_destroy_id(s) == 0 && rdma_destroy_id(c) == 0 && rdma_destroy_id(listen_id) == 0);
  CHECK(ibv_destroy_qp(sqp) == 0 && ibv_destroy_qp(cqp) == 0);
  ibv_dereg_mr(smr);
  if (cmr != NULL) ibv_dereg_mr(cmr);
  CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(ccq) == 0);
  rdma_destroy_event_channel(sch);
  rdma_destroy_event_channel(cch);
}

int main(void) {
  test_basics();
  test_connection("127.0.0.1");
  test_connection("::1");
  test_sync("127.0.0.1");
  test_sync("::1");
  test_memory_windows("127.0.0.1");
  test_atomics("127.0.0.1");
  test_on_demand("127.0.0.1");
  test_bound_source("127.0.0.1");
  test_bound_source("::1");
  test_disconnect_after_completions("127.0.0.1", 1);
  test_disconnect_after_completions("127.0.0.1", 0);
  test_channel_destroyed_first("127.0.0.1");
  test_external_qp("127.0.0.1");
  printf("rdmacm_test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
