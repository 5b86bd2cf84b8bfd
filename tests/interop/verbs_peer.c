/* An interoperability test peer written against the standard verbs and rdma_cm API only
 * (<infiniband/verbs.h>, <rdma/rdma_cma.h>), linked against Debian's libibverbs and librdmacm.
 * The same binary runs over Linux siw (in the QEMU guest) and over uwarp (build/bin/uwarp-run).
 *
 *   verbs_peer server -p PORT [-a ADDR] [-c CONNECTIONS] [-i IRD] [-t SECS]
 *   verbs_peer client -a HOST -p PORT [-s SIZES|none] [-x PROVOCATIONS] [-r RETRIES] [-t SECS]
 *
 * The client drives, the server answers; every step is lock-step: the client sends a command
 * (a Send of struct msg), the server prepares, answers with an ACK (a Send), the client acts.
 * Connection 1 (unless -s none) runs, per size of SIZES (default 1,4096,65536,1048576,16777216):
 * Send (server verifies length and data), RDMA Write (server verifies its memory), RDMA Read
 * (server fills, client verifies); then zero-length Send, Write and Read; a Send with Solicited
 * Event (the server, its receive CQ armed for solicited completions only, reports whether the
 * event came) and a plain Send under the same arm (an event fails); a Send with Invalidate of an
 * STag the server advertised (the server reports IBV_WC_WITH_INV and the rkey; a wrong rkey
 * fails). Whether the event and the invalidation were reported is checked by the caller.
 * Then one connection per provocation of PROVOCATIONS (comma-separated, see provoke_names): the
 * client does something the server must answer with a Terminate; both sides print every
 * completion, async event and rdma_cm event they see, and "provoke NAME: ... error reported:
 * yes|no". The exit status is 0 if every data step verified and every connection was set up and
 * torn down; what each side reported for a provocation is checked by the caller.
 * The server handles CONNECTIONS connections (default 1) one after the other, accepting each
 * with responder resources IRD (default 16; siw raises it to the initiator's ORD).
 * A raw frame injector (tests/interop/siw_inject.cc) speaks the same protocol as a client: after
 * the hellos it sends C_INJECT with the name of the fault it is about to put on the wire; the
 * server posts a receive, answers with an ACK, and reports like for a provocation ("inject
 * NAME: ... error reported: yes|no"), ending one second after the first error or the
 * disconnect.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

enum { MSG_MAGIC = 0x75776d31 };
enum cmd {
  C_HELLO = 1, /* client -> server first (the initiator sends first), then server -> client:
                  addr, rkey, inv_addr, inv_rkey, noacc_*, other_*, size */
  C_ACK,       /* status 0 = ok */
  C_SEND,      /* size, seed, kind: the next message is a data Send */
  C_CHECK,     /* size, seed: verify the data region */
  C_FILL,      /* size, seed: fill the data region */
  C_PROVOKE,   /* kind = provocation: prepare, ACK, then wait for the error */
  C_DONE,
  C_INJECT,    /* name = the fault a raw injector sends next: post a receive, ACK, watch */
};
enum send_kind { K_PLAIN, K_SOLICITED, K_PLAIN_SOLICITED_ARM, K_INVALIDATE };

/* Sent as the host's bytes (both ends are x86-64 here); tests/interop/siw_inject.cc writes and
 * reads this layout field by field (72 bytes, little-endian, no padding): keep them in step. */
struct msg {
  uint32_t magic, cmd, size, seed, kind, status;
  union {
    struct {
      uint64_t addr, inv_addr, noacc_addr, other_addr;
      uint32_t rkey, inv_rkey, noacc_rkey, other_rkey;
    };
    char name[48]; /* C_INJECT: the fault's name, NUL-terminated */
  };
};
_Static_assert(sizeof(struct msg) == 72, "struct msg is a wire format (siw_inject.cc)");

enum provoke {
  P_WRITE_BAD_STAG, P_WRITE_OOB, P_WRITE_INVALIDATED, P_READ_BAD_STAG, P_READ_OOB,
  P_READ_NO_ACCESS, P_SEND_NO_RECV, P_SEND_TOO_LONG, P_SENDINV_BAD_STAG, P_WRITE_NO_ACCESS,
  P_WRITE_OTHER_PD, P_COUNT
};
static const char* const provoke_names[P_COUNT] = {
    "write-bad-stag",      /* RDMA Write to an STag the server never registered */
    "write-oob",           /* RDMA Write past the end of the server's region */
    "write-invalidated",   /* Send with Invalidate of an STag, then RDMA Write to it */
    "read-bad-stag",       /* RDMA Read from an unknown STag */
    "read-oob",            /* RDMA Read past the end of the region */
    "read-no-access",      /* RDMA Read from a region registered without remote read */
    "send-no-recv",        /* Send while the server has no receive posted */
    "send-too-long",       /* Send of 64 bytes into a 16-byte receive */
    "sendinv-bad-stag",    /* Send with Invalidate of an unknown STag */
    "write-no-access",     /* RDMA Write to a region registered without remote write */
    "write-other-pd",      /* RDMA Write to a region of another protection domain */
};
enum { BAD_STAG = 0x5eadbe00u, INV_LEN = 4096 };

static const char* role = "?";
static int timeout_s = 30;
static int server_ird = 16; /* -i: responder resources the server accepts with */

static void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("verbs_peer %s: ", role);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t pattern(uint64_t i, uint32_t seed) {
  return (uint8_t)((i * 131u) ^ (i >> 8) ^ (i >> 16) ^ seed);
}
static void fill(uint8_t* p, uint32_t n, uint32_t seed) {
  for (uint32_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}
static int verify(const uint8_t* p, uint32_t n, uint32_t seed, const char* what) {
  for (uint32_t i = 0; i < n; ++i) {
    if (p[i] != pattern(i, seed)) {
      say("FAIL: %s: %u bytes: byte %u is 0x%02x, expected 0x%02x", what, n, i, p[i], pattern(i, seed));
      return -1;
    }
  }
  return 0;
}

struct peer {
  struct rdma_event_channel* ec;
  struct rdma_cm_id* id;
  struct ibv_context* verbs;
  struct ibv_pd* pd;
  struct ibv_comp_channel *sch, *rch;
  struct ibv_cq *scq, *rcq;
  struct ibv_qp* qp;
  uint32_t max;                 /* data size limit */
  uint8_t *data, *recv, *ctl, *inv;  /* ctl: [0, 2048) to send, [2048, 4096) to receive */
  struct ibv_mr *data_mr, *recv_mr, *ctl_mr, *inv_mr;
  /* The STag the peer may invalidate: a type 2 window over inv where the device has them (only
   * such a window or a fast-registered region is the peer's to invalidate), else inv_mr's. */
  struct ibv_mw* inv_mw;
  uint32_t inv_rkey;
  uint8_t* spare;               /* [0, 4096): remote read only; [4096, 8192): in other_pd */
  struct ibv_pd* other_pd;
  struct ibv_mr *noacc_mr, *other_mr;
  struct msg hello;             /* client: the server's description */
  int errors_seen;              /* error completions, async events */
  int disconnected;             /* RDMA_CM_EVENT_DISCONNECTED seen */
  /* Server: waits for messages by polling its receive CQ, never arming it (see server_data_send). */
  int poll_messages;
};

/* A connection request that arrived while the server was still busy with the previous one. */
static struct rdma_cm_event* pending_request;

/* --- events ---------------------------------------------------------------------------- */

static void print_wc(const struct ibv_wc* wc) {
  say("wc: status %s (%d), opcode %d, byte_len %u, flags 0x%x, vendor_err 0x%08x%s", ibv_wc_status_str(wc->status),
      wc->status, wc->opcode, wc->byte_len, wc->wc_flags, wc->vendor_err,
      (wc->wc_flags & IBV_WC_WITH_INV) ? ", with invalidate" : "");
}

/* Drains async events (non-blocking), printing them. */
static void drain_async(struct peer* p) {
  struct ibv_async_event ae;
  struct pollfd pfd = {.fd = p->verbs->async_fd, .events = POLLIN};
  while (poll(&pfd, 1, 0) == 1 && ibv_get_async_event(p->verbs, &ae) == 0) {
    say("async event: %s (%d)", ibv_event_type_str(ae.event_type), ae.event_type);
    p->errors_seen++;
    ibv_ack_async_event(&ae);
  }
}

/* Drains rdma_cm events (non-blocking), printing them. Returns 1 once the peer disconnected. */
static int drain_cm(struct peer* p) {
  struct rdma_cm_event* ev;
  struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
  while (poll(&pfd, 1, 0) == 1 && rdma_get_cm_event(p->ec, &ev) == 0) {
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && !pending_request) {
      pending_request = ev; /* the next connection's: kept for cm_wait */
      continue;
    }
    say("cm event: %s, status %d", rdma_event_str(ev->event), ev->status);
    if (ev->event == RDMA_CM_EVENT_DISCONNECTED) p->disconnected = 1;
    rdma_ack_cm_event(ev);
  }
  return p->disconnected;
}

/* Waits (bounded) for one completion on cq: sleeping on its channel (which may leave cq armed for
 * the next completion, when the poll after arming finds one), or with sleep 0 by polling alone
 * (cq is never armed). 0: got one. */
static int wait_wc(struct peer* p, struct ibv_cq* cq, struct ibv_comp_channel* ch, struct ibv_wc* wc, double secs,
                   int sleep) {
  const double deadline = now() + secs;
  double next_async = now() + 0.1; /* look at async events in between */
  for (;;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n > 0) return 0;
    if (n < 0) { say("ibv_poll_cq failed"); return -1; }
    if (sleep) {
      if (ibv_req_notify_cq(cq, 0)) { say("ibv_req_notify_cq failed"); return -1; }
      n = ibv_poll_cq(cq, 1, wc);
      if (n > 0) return 0;
    }
    double left = deadline - now();
    if (left <= 0) return -1;
    if (!sleep) {
      usleep(1000);
      if (now() < next_async) continue;
      next_async = now() + 0.1;
      drain_async(p);
      continue;
    }
    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    int ms = (int)(left * 1000) + 1;
    if (ms > 100) ms = 100;
    if (poll(&pfd, 1, ms) == 1) {
      struct ibv_cq* ecq;
      void* ctx;
      if (ibv_get_cq_event(ch, &ecq, &ctx) == 0) ibv_ack_cq_events(ecq, 1);
    }
    drain_async(p);
  }
}

/* Waits (see wait_wc) for one successful completion of the given opcode; fails on an error
 * completion. */
static int expect_wc_waiting(struct peer* p, int recv, enum ibv_wc_opcode op, struct ibv_wc* out, const char* what,
                             int sleep) {
  struct ibv_wc wc;
  if (wait_wc(p, recv ? p->rcq : p->scq, recv ? p->rch : p->sch, &wc, timeout_s, sleep)) {
    say("FAIL: %s: no completion in %d s", what, timeout_s);
    return -1;
  }
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != op) {
    say("FAIL: %s: unexpected completion", what);
    print_wc(&wc);
    return -1;
  }
  if (out) *out = wc;
  return 0;
}

static int expect_wc(struct peer* p, int recv, enum ibv_wc_opcode op, struct ibv_wc* out, const char* what) {
  return expect_wc_waiting(p, recv, op, out, what, 1);
}

static int cm_wait(struct peer* p, enum rdma_cm_event_type want, struct rdma_cm_event** keep) {
  struct pollfd pfd = {.fd = p->ec->fd, .events = POLLIN};
  const double deadline = now() + timeout_s;
  if (want == RDMA_CM_EVENT_CONNECT_REQUEST && pending_request) {
    *keep = pending_request;
    pending_request = NULL;
    return 0;
  }
  for (;;) {
    double left = deadline - now();
    if (left <= 0 || poll(&pfd, 1, (int)(left * 1000) + 1) != 1) {
      say("FAIL: no %s in %d s", rdma_event_str(want), timeout_s);
      return -1;
    }
    struct rdma_cm_event* ev;
    if (rdma_get_cm_event(p->ec, &ev)) { say("FAIL: rdma_get_cm_event: %s", strerror(errno)); return -1; }
    if (ev->event == want) {
      if (keep) *keep = ev;
      else rdma_ack_cm_event(ev);
      return 0;
    }
    say("%s: waiting for %s, got %s, status %d", want == RDMA_CM_EVENT_ESTABLISHED ? "connect" : "FAIL",
        rdma_event_str(want), rdma_event_str(ev->event), ev->status);
    const int refused = want == RDMA_CM_EVENT_ESTABLISHED &&
                        (ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
                         ev->event == RDMA_CM_EVENT_CONNECT_ERROR);
    rdma_ack_cm_event(ev);
    return refused ? -2 : -1;
  }
}

/* --- resources ------------------------------------------------------------------------- */

static int setup(struct peer* p, struct rdma_cm_id* id) {
  p->id = id;
  p->verbs = id->verbs;
  int fl = fcntl(p->verbs->async_fd, F_GETFL);
  fcntl(p->verbs->async_fd, F_SETFL, fl | O_NONBLOCK);
  p->pd = ibv_alloc_pd(p->verbs);
  p->sch = ibv_create_comp_channel(p->verbs);
  p->rch = ibv_create_comp_channel(p->verbs);
  if (!p->pd || !p->sch || !p->rch) { say("FAIL: pd/channel: %s", strerror(errno)); return -1; }
  p->scq = ibv_create_cq(p->verbs, 32, NULL, p->sch, 0);
  p->rcq = ibv_create_cq(p->verbs, 32, NULL, p->rch, 0);
  if (!p->scq || !p->rcq) { say("FAIL: cq: %s", strerror(errno)); return -1; }
  struct ibv_qp_init_attr qa = {.send_cq = p->scq, .recv_cq = p->rcq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
                                        .max_recv_sge = 1}};
  if (rdma_create_qp(id, p->pd, &qa)) { say("FAIL: rdma_create_qp: %s", strerror(errno)); return -1; }
  p->qp = id->qp;
  p->data = aligned_alloc(4096, p->max ? p->max : 4096);
  p->recv = aligned_alloc(4096, p->max + 4096);
  p->ctl = aligned_alloc(4096, 4096);
  p->inv = aligned_alloc(4096, INV_LEN);
  if (!p->data || !p->recv || !p->ctl || !p->inv) { say("FAIL: out of memory"); return -1; }
  memset(p->data, 0, p->max ? p->max : 4096);
  memset(p->inv, 0, INV_LEN);
  const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  p->data_mr = ibv_reg_mr(p->pd, p->data, p->max ? p->max : 4096, all);
  p->recv_mr = ibv_reg_mr(p->pd, p->recv, p->max + 4096, IBV_ACCESS_LOCAL_WRITE);
  p->ctl_mr = ibv_reg_mr(p->pd, p->ctl, 4096, IBV_ACCESS_LOCAL_WRITE);
  /* The region the client invalidates (remote write, no remote read), through a type 2 window
   * where the device offers them (bound once connected: bind_inv_window). */
  struct ibv_device_attr da;
  const int windows = ibv_query_device(p->verbs, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  p->inv_mr = ibv_reg_mr(p->pd, p->inv, INV_LEN,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | (windows ? IBV_ACCESS_MW_BIND : 0));
  if (!p->data_mr || !p->recv_mr || !p->ctl_mr || !p->inv_mr) { say("FAIL: ibv_reg_mr: %s", strerror(errno)); return -1; }
  p->inv_rkey = p->inv_mr->rkey;
  if (windows && !(p->inv_mw = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2))) { say("FAIL: ibv_alloc_mw: %s", strerror(errno)); return -1; }
  /* Targets for the write-no-access and write-other-pd provocations. */
  p->spare = aligned_alloc(4096, 8192);
  p->other_pd = ibv_alloc_pd(p->verbs);
  if (!p->spare || !p->other_pd) { say("FAIL: spare region: %s", strerror(errno)); return -1; }
  memset(p->spare, 0, 8192);
  p->noacc_mr = ibv_reg_mr(p->pd, p->spare, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  p->other_mr = ibv_reg_mr(p->other_pd, p->spare + 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!p->noacc_mr || !p->other_mr) { say("FAIL: ibv_reg_mr (spare): %s", strerror(errno)); return -1; }
  return 0;
}

static void teardown(struct peer* p) {
  if (p->qp) rdma_destroy_qp(p->id);
  p->qp = NULL;
  if (p->inv_mw) ibv_dealloc_mw(p->inv_mw);
  struct ibv_mr* mrs[] = {p->data_mr, p->recv_mr, p->ctl_mr, p->inv_mr, p->noacc_mr, p->other_mr};
  for (size_t i = 0; i < sizeof mrs / sizeof mrs[0]; ++i)
    if (mrs[i]) ibv_dereg_mr(mrs[i]);
  if (p->other_pd) ibv_dealloc_pd(p->other_pd);
  free(p->spare);
  if (p->scq) ibv_destroy_cq(p->scq);
  if (p->rcq) ibv_destroy_cq(p->rcq);
  if (p->sch) ibv_destroy_comp_channel(p->sch);
  if (p->rch) ibv_destroy_comp_channel(p->rch);
  if (p->pd) ibv_dealloc_pd(p->pd);
  free(p->data);
  free(p->recv);
  free(p->ctl);
  free(p->inv);
  if (p->id) rdma_destroy_id(p->id);
  struct rdma_event_channel* ec = p->ec;
  uint32_t max = p->max;
  memset(p, 0, sizeof *p);
  p->ec = ec;
  p->max = max;
}

/* --- posting --------------------------------------------------------------------------- */

/* A receive into the large buffer (wr_id 1). */
static int post_recv(struct peer* p, uint32_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)p->recv, .length = len, .lkey = p->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(p->qp, &wr, &bad)) { say("FAIL: ibv_post_recv: %s", strerror(errno)); return -1; }
  return 0;
}

/* Posts one send-queue request; len 0 posts no SGE (a zero-length operation). */
static int post(struct peer* p, enum ibv_wr_opcode op, void* buf, struct ibv_mr* mr, uint32_t len, uint64_t raddr,
                uint32_t rkey, uint32_t inv_rkey, unsigned flags) {
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED | flags}, *bad;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (op == IBV_WR_SEND_WITH_INV) {
    wr.invalidate_rkey = inv_rkey;
    /* rdma-core's siw provider (push_send_wqe) sends wr.rdma.rkey as the STag to invalidate and
     * ignores invalidate_rkey; providers that follow ibv_post_send(3) ignore wr.rdma here. */
    wr.wr.rdma.rkey = inv_rkey;
  }
  if (ibv_post_send(p->qp, &wr, &bad)) { say("FAIL: ibv_post_send: %s", strerror(errno)); return -1; }
  return 0;
}

/* A receive into the small control buffer (wr_id 3), for a message that follows a data Send. */
static int post_recv_ctl(struct peer* p) {
  struct ibv_sge sge = {.addr = (uintptr_t)p->ctl + 2048, .length = 2048, .lkey = p->ctl_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = 3, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(p->qp, &wr, &bad)) { say("FAIL: ibv_post_recv: %s", strerror(errno)); return -1; }
  return 0;
}

static int send_msg(struct peer* p, struct msg m) {
  m.magic = MSG_MAGIC;
  memcpy(p->ctl, &m, sizeof m);
  if (post(p, IBV_WR_SEND, p->ctl, p->ctl_mr, sizeof m, 0, 0, 0, 0)) return -1;
  return expect_wc(p, 0, IBV_WC_SEND, NULL, "Send of a message");
}

/* Receives one message (the receive must be posted); reposts a full-size receive unless told. */
static int recv_msg(struct peer* p, struct msg* m, int repost) {
  struct ibv_wc wc;
  if (expect_wc_waiting(p, 1, IBV_WC_RECV, &wc, "message", !p->poll_messages)) return -1;
  memcpy(m, wc.wr_id == 3 ? p->ctl + 2048 : p->recv, sizeof *m);
  if (wc.byte_len != sizeof *m || m->magic != MSG_MAGIC) {
    say("FAIL: bad message (%u bytes)", wc.byte_len);
    return -1;
  }
  return repost ? post_recv(p, p->max + 4096) : 0;
}

/* Client: one command and its ACK. */
static int command(struct peer* p, enum cmd c, uint32_t size, uint32_t seed, uint32_t kind) {
  struct msg m = {.cmd = c, .size = size, .seed = seed, .kind = kind};
  struct msg a;
  if (send_msg(p, m) || recv_msg(p, &a, 1)) return -1;
  if (a.cmd != C_ACK || a.status != 0) {
    say("FAIL: command %u (size %u, kind %u): the server answered status %u", c, size, kind, a.status);
    return -1;
  }
  return 0;
}

/* --- the data steps (client) ----------------------------------------------------------- */

static int client_data(struct peer* p, const uint32_t* sizes, int nsizes) {
  const struct msg* h = &p->hello;
  for (int i = 0; i < nsizes; ++i) {
    const uint32_t n = sizes[i], seed = 0x10u + (uint32_t)i;
    fill(p->data, n, seed);
    if (command(p, C_SEND, n, seed, K_PLAIN) ||
        post(p, IBV_WR_SEND, p->data, p->data_mr, n, 0, 0, 0, 0) ||
        expect_wc(p, 0, IBV_WC_SEND, NULL, "data Send") || command(p, C_ACK, 0, 0, 0))
      return -1;
    fill(p->data, n, seed + 0x40);
    if (post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, n, h->addr, h->rkey, 0, 0) ||
        expect_wc(p, 0, IBV_WC_RDMA_WRITE, NULL, "RDMA Write") || command(p, C_CHECK, n, seed + 0x40, 0))
      return -1;
    memset(p->data, 0, n);
    if (command(p, C_FILL, n, seed + 0x80, 0) ||
        post(p, IBV_WR_RDMA_READ, p->data, p->data_mr, n, h->addr, h->rkey, 0, 0) ||
        expect_wc(p, 0, IBV_WC_RDMA_READ, NULL, "RDMA Read") || verify(p->data, n, seed + 0x80, "RDMA Read"))
      return -1;
    say("size %u: Send, RDMA Write, RDMA Read verified", n);
  }
  /* Zero-length Send, Write (to the region) and Read (from it). */
  if (command(p, C_SEND, 0, 0, K_PLAIN) || post(p, IBV_WR_SEND, p->data, p->data_mr, 0, 0, 0, 0, 0) ||
      expect_wc(p, 0, IBV_WC_SEND, NULL, "zero-length Send") || command(p, C_ACK, 0, 0, 0) ||
      post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, 0, h->addr, h->rkey, 0, 0) ||
      expect_wc(p, 0, IBV_WC_RDMA_WRITE, NULL, "zero-length RDMA Write"))
    return -1;
  /* Linux siw (6.1) answers a zero-length Read Request that it queues while its transmitter is
   * busy (here: just after its ACK) with a Read Response carrying the previous work request's
   * bytes (docs/interop.md); an idle transmitter answers correctly, so wait for it. */
  usleep(200000);
  if (post(p, IBV_WR_RDMA_READ, p->data, p->data_mr, 0, h->addr, h->rkey, 0, 0) ||
      expect_wc(p, 0, IBV_WC_RDMA_READ, NULL, "zero-length RDMA Read") || command(p, C_CHECK, 0, 0, 0))
    return -1;
  say("zero-length Send, RDMA Write, RDMA Read completed");
  /* Send with Solicited Event, then a plain Send under a solicited-only arm. */
  fill(p->data, 64, 0x33);
  if (command(p, C_SEND, 64, 0x33, K_SOLICITED) ||
      post(p, IBV_WR_SEND, p->data, p->data_mr, 64, 0, 0, 0, IBV_SEND_SOLICITED) ||
      expect_wc(p, 0, IBV_WC_SEND, NULL, "Send with Solicited Event") || command(p, C_ACK, 0, 0, 0))
    return -1;
  if (command(p, C_SEND, 64, 0x33, K_PLAIN_SOLICITED_ARM) || post(p, IBV_WR_SEND, p->data, p->data_mr, 64, 0, 0, 0, 0) ||
      expect_wc(p, 0, IBV_WC_SEND, NULL, "plain Send") || command(p, C_ACK, 0, 0, 0))
    return -1;
  say("Send with Solicited Event and plain Send: acknowledged");
  /* Send with Invalidate of the server's second region. */
  if (command(p, C_SEND, 64, 0x33, K_INVALIDATE) ||
      post(p, IBV_WR_SEND_WITH_INV, p->data, p->data_mr, 64, 0, 0, h->inv_rkey, 0) ||
      expect_wc(p, 0, IBV_WC_SEND, NULL, "Send with Invalidate") || command(p, C_ACK, 0, 0, 0))
    return -1;
  say("Send with Invalidate of rkey 0x%08x: acknowledged", h->inv_rkey);
  return 0;
}

/* --- the server's side ------------------------------------------------------------------- */

/* Waits for the next data message after an ACK; verifies it; answers the client's C_ACK. */
static int server_data_send(struct peer* p, const struct msg* c) {
  /* For the solicited kinds the receive CQ is armed before the ACK, so the data Send (which the
   * client posts only after the ACK) finds it armed. An arm for the next completion must not be
   * pending then: it cannot be turned into "solicited only" (InfiniBand C11-31 and C11-32; rxe
   * and uwarp keep "next", siw replaces it) and would fire for the plain Send. So the
   * server receives its messages by polling (poll_messages), and the event of any arm an earlier
   * wait left pending came with the message after it, and is drained here. */
  struct ibv_cq* ecq;
  void* ctx;
  struct pollfd pfd = {.fd = p->rch->fd, .events = POLLIN};
  while (poll(&pfd, 1, 0) == 1 && ibv_get_cq_event(p->rch, &ecq, &ctx) == 0) ibv_ack_cq_events(ecq, 1);
  const int solicited = c->kind == K_SOLICITED || c->kind == K_PLAIN_SOLICITED_ARM;
  if (solicited && ibv_req_notify_cq(p->rcq, 1)) { say("FAIL: ibv_req_notify_cq(solicited)"); return -1; }
  /* The client sends its next message right behind the data: a second receive takes it. */
  if (post_recv_ctl(p)) return -1;
  struct msg ack = {.cmd = C_ACK};
  if (send_msg(p, ack)) return -1;
  int status = 0, event = -1;
  struct ibv_wc wc;
  int got = -1;
  if (solicited) {
    /* Poll the CQ (not the channel) for the completion, then look whether the event came. */
    const double deadline = now() + timeout_s;
    while ((got = ibv_poll_cq(p->rcq, 1, &wc)) == 0 && now() < deadline) usleep(1000);
    if (got != 1) { say("FAIL: no completion for the data Send"); return -1; }
    event = poll(&pfd, 1, c->kind == K_SOLICITED ? 1000 : 300) == 1;
    if (event && ibv_get_cq_event(p->rch, &ecq, &ctx) == 0) ibv_ack_cq_events(ecq, 1);
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) { print_wc(&wc); return -1; }
  } else if (expect_wc(p, 1, IBV_WC_RECV, &wc, "data Send")) {
    return -1;
  }
  if (wc.byte_len != c->size) {
    say("FAIL: data Send: %u bytes, expected %u", wc.byte_len, c->size);
    status = 1;
  } else if (verify(p->recv, c->size, c->seed, "data Send")) {
    status = 1;
  }
  if (c->kind == K_SOLICITED) {
    say("Send with Solicited Event, receive CQ armed for solicited only: event %s", event ? "delivered" : "NOT delivered");
  } else if (c->kind == K_PLAIN_SOLICITED_ARM) {
    say("plain Send, receive CQ armed for solicited only: event %s", event ? "DELIVERED" : "not delivered");
    if (event) status = 1;
  } else if (c->kind == K_INVALIDATE) {
    const int inv = (wc.wc_flags & IBV_WC_WITH_INV) != 0;
    /* Not every provider reports the invalidation (checked by the caller); a wrong rkey fails. */
    say("Send with Invalidate: wc flags 0x%x, IBV_WC_WITH_INV %s, invalidated_rkey 0x%08x, advertised 0x%08x%s",
        wc.wc_flags, inv ? "set" : "not set", inv ? wc.invalidated_rkey : 0, p->inv_rkey,
        !inv ? "" : wc.invalidated_rkey == p->inv_rkey ? ": match" : ": MISMATCH");
    if (inv && wc.invalidated_rkey != p->inv_rkey) status = 1;
  }
  struct msg c2;
  if (recv_msg(p, &c2, 1) || c2.cmd != C_ACK) return -1;
  ack.status = (uint32_t)status;
  return send_msg(p, ack) || status ? -1 : 0;
}

/* After a provocation: prints everything seen for up to secs; 1 if an error was reported. what is
 * "provoke" or "inject"; with until_disconnect, the disconnect ends the watch too (one second
 * later, like an error): an injected fault siw ignores ends when the injector closes. */
static int watch_errors(struct peer* p, double secs, const char* what, const char* name, int until_disconnect) {
  const double deadline = now() + secs;
  double quiet_until = 0;
  p->errors_seen = 0;
  while (now() < deadline && (quiet_until == 0 || now() < quiet_until)) {
    struct ibv_wc wc;
    struct ibv_cq* cqs[2] = {p->scq, p->rcq};
    for (int i = 0; i < 2; ++i) {
      while (ibv_poll_cq(cqs[i], 1, &wc) == 1) {
        print_wc(&wc);
        if (wc.status != IBV_WC_SUCCESS) p->errors_seen++;
      }
    }
    drain_async(p);
    drain_cm(p);
    if ((p->errors_seen || (until_disconnect && p->disconnected)) && quiet_until == 0)
      quiet_until = now() + 1.0; /* collect what follows */
    usleep(10000);
  }
  say("%s %s: error reported: %s%s", what, name, p->errors_seen ? "yes" : "no", p->disconnected ? ", disconnected" : "");
  return p->errors_seen > 0;
}

static int server_provoke(struct peer* p, const struct msg* c) {
  if (c->kind >= P_COUNT) return -1;
  const char* name = provoke_names[c->kind];
  /* The command's receive was consumed; what is posted next decides the Send cases. */
  if (c->kind == P_SEND_TOO_LONG) {
    if (post_recv(p, 16)) return -1;
  } else if (c->kind != P_SEND_NO_RECV) {
    if (post_recv(p, p->max + 4096)) return -1;
  }
  /* The ACK's own completion is not awaited: the client acts as soon as it has the ACK, and
   * the QP may enter the error state before the ACK completes here (watch_errors prints it). */
  struct msg ack = {.cmd = C_ACK, .magic = MSG_MAGIC};
  memcpy(p->ctl, &ack, sizeof ack);
  if (post(p, IBV_WR_SEND, p->ctl, p->ctl_mr, sizeof ack, 0, 0, 0, 0)) return -1;
  say("provoke %s: waiting", name);
  watch_errors(p, c->kind == P_READ_NO_ACCESS ? 5 : 10, "provoke", name, 0);
  return 0;
}

/* C_INJECT: the client is a raw injector; what it sends next is not a verbs operation. The
 * receive posted here makes Send faults meet a buffer (so that siw checks QN, MSN and MO). */
static int server_inject(struct peer* p, const struct msg* c) {
  char name[sizeof c->name + 1];
  memcpy(name, c->name, sizeof c->name);
  name[sizeof c->name] = 0;
  for (char* q = name; *q; ++q)
    if (*q < '!' || *q > '~') *q = '?';
  if (post_recv(p, p->max + 4096)) return -1;
  struct msg ack = {.cmd = C_ACK, .magic = MSG_MAGIC};
  memcpy(p->ctl, &ack, sizeof ack);
  if (post(p, IBV_WR_SEND, p->ctl, p->ctl_mr, sizeof ack, 0, 0, 0, 0)) return -1;
  say("inject %s: waiting", name);
  watch_errors(p, 10, "inject", name, 1);
  return 0;
}

/* Binds the type 2 window over inv (if there is one) to this QP, unsignaled: it takes effect
 * before anything posted after it, the hello that advertises it among them. */
static int bind_inv_window(struct peer* p) {
  if (!p->inv_mw) return 0;
  struct ibv_send_wr wr = {.wr_id = 5, .opcode = IBV_WR_BIND_MW}, *bad;
  wr.bind_mw.mw = p->inv_mw;
  wr.bind_mw.rkey = ibv_inc_rkey(p->inv_mw->rkey);
  wr.bind_mw.bind_info.mr = p->inv_mr;
  wr.bind_mw.bind_info.addr = (uintptr_t)p->inv;
  wr.bind_mw.bind_info.length = INV_LEN;
  wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_post_send(p->qp, &wr, &bad)) { say("FAIL: IBV_WR_BIND_MW: %s", strerror(errno)); return -1; }
  p->inv_rkey = wr.bind_mw.rkey;
  say("window 0x%08x bound over the region the peer invalidates", p->inv_rkey);
  return 0;
}

static int server_conn(struct peer* p, int conn) {
  struct rdma_cm_event* ev;
  if (cm_wait(p, RDMA_CM_EVENT_CONNECT_REQUEST, &ev)) return -1;
  struct rdma_cm_id* id = ev->id;
  say("connection %d: request (initiator depth %u, responder resources %u)", conn,
      ev->param.conn.initiator_depth, ev->param.conn.responder_resources);
  rdma_ack_cm_event(ev);
  if (setup(p, id) || post_recv(p, p->max + 4096)) return -1;
  struct rdma_conn_param cp = {.initiator_depth = 16, .responder_resources = (uint8_t)server_ird};
  if (rdma_accept(id, &cp)) { say("FAIL: rdma_accept: %s", strerror(errno)); return -1; }
  if (cm_wait(p, RDMA_CM_EVENT_ESTABLISHED, NULL) || bind_inv_window(p)) return -1;
  /* The initiator sends first (RFC 5044 without peer-to-peer mode): its hello, then ours. */
  struct msg first;
  if (recv_msg(p, &first, 1)) return -1;
  if (first.cmd != C_HELLO) { say("FAIL: the client's first message is %u, not a hello", first.cmd); return -1; }
  struct msg hello = {.cmd = C_HELLO, .size = p->max, .addr = (uintptr_t)p->data, .rkey = p->data_mr->rkey,
                      .inv_addr = (uintptr_t)p->inv, .inv_rkey = p->inv_rkey,
                      .noacc_addr = (uintptr_t)p->spare, .noacc_rkey = p->noacc_mr->rkey,
                      .other_addr = (uintptr_t)p->spare + 4096, .other_rkey = p->other_mr->rkey};
  if (send_msg(p, hello)) return -1;
  int rc = 0;
  for (int steps = 0; steps < 10000; ++steps) {
    struct msg c;
    if (recv_msg(p, &c, 0)) { rc = -1; break; }
    if (c.cmd == C_PROVOKE) {
      rc = server_provoke(p, &c);
      break;
    }
    if (c.cmd == C_INJECT) {
      rc = server_inject(p, &c);
      break;
    }
    if (c.cmd == C_DONE) break;
    if (post_recv(p, p->max + 4096)) { rc = -1; break; }
    if (c.cmd == C_SEND) {
      if (server_data_send(p, &c)) { rc = -1; break; }
      continue;
    }
    struct msg ack = {.cmd = C_ACK};
    if (c.size > p->max) ack.status = 2;
    else if (c.cmd == C_CHECK) ack.status = verify(p->data, c.size, c.seed, "RDMA Write") ? 1 : 0;
    else if (c.cmd == C_FILL) fill(p->data, c.size, c.seed);
    if (ack.status) rc = -1;
    if (send_msg(p, ack)) { rc = -1; break; }
  }
  /* After C_DONE the client disconnects; otherwise (or if it does not within 5 s) we do. */
  double deadline = now() + 5;
  while (rc == 0 && now() < deadline && !drain_cm(p)) usleep(10000);
  if (!p->disconnected) rdma_disconnect(p->id);
  /* Wait (bounded) for the disconnect to complete on our side. */
  deadline = now() + 3;
  while (now() < deadline && !drain_cm(p)) usleep(10000);
  say("connection %d: %s", conn, rc ? "FAILED" : "done");
  teardown(p);
  return rc;
}

static int run_server(const char* addr, const char* port, int conns) {
  struct peer p = {.max = 16u << 20, .poll_messages = 1};
  p.ec = rdma_create_event_channel();
  struct rdma_cm_id* lid;
  if (!p.ec || rdma_create_id(p.ec, &lid, NULL, RDMA_PS_TCP)) { say("FAIL: rdma_create_id: %s", strerror(errno)); return 1; }
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
  if (getaddrinfo(addr, port, &hints, &ai)) { say("FAIL: getaddrinfo %s", addr); return 1; }
  if (rdma_bind_addr(lid, ai->ai_addr) || rdma_listen(lid, 4)) { say("FAIL: bind/listen: %s", strerror(errno)); return 1; }
  freeaddrinfo(ai);
  say("listening on %s:%s for %d connection(s)", addr, port, conns);
  int failed = 0;
  for (int i = 1; i <= conns; ++i) {
    if (server_conn(&p, i)) failed++;
  }
  rdma_destroy_id(lid);
  rdma_destroy_event_channel(p.ec);
  say("%d connection(s), %d failed", conns, failed);
  return failed ? 1 : 0;
}

/* --- the client's side ------------------------------------------------------------------- */

static int client_connect(struct peer* p, const char* host, const char* port) {
  if (rdma_create_id(p->ec, &p->id, NULL, RDMA_PS_TCP)) { say("FAIL: rdma_create_id"); return -1; }
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
  if (getaddrinfo(host, port, &hints, &ai)) { say("FAIL: getaddrinfo %s", host); return -1; }
  int rr = rdma_resolve_addr(p->id, NULL, ai->ai_addr, 5000);
  freeaddrinfo(ai);
  if (rr || cm_wait(p, RDMA_CM_EVENT_ADDR_RESOLVED, NULL)) return -1;
  if (rdma_resolve_route(p->id, 5000) || cm_wait(p, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL)) return -1;
  struct rdma_cm_id* id = p->id;
  p->id = NULL;
  if (setup(p, id) || post_recv(p, p->max + 4096)) return -1;
  struct rdma_conn_param cp = {.initiator_depth = 16, .responder_resources = 16, .retry_count = 7};
  if (rdma_connect(p->id, &cp)) { say("FAIL: rdma_connect: %s", strerror(errno)); return -1; }
  int rc = cm_wait(p, RDMA_CM_EVENT_ESTABLISHED, NULL);
  if (rc) return rc;
  if (send_msg(p, (struct msg){.cmd = C_HELLO}) || recv_msg(p, &p->hello, 1)) return -1;
  if (p->hello.cmd != C_HELLO || p->hello.size < p->max) {
    say("FAIL: bad hello (size %u)", p->hello.size);
    return -1;
  }
  return 0;
}

static int client_provoke(struct peer* p, int k) {
  const char* name = provoke_names[k];
  const struct msg* h = &p->hello;
  if (command(p, C_PROVOKE, 0, 0, (uint32_t)k)) return -1;
  /* Linux siw sends no Terminate while a transmit work request is in progress, and the
   * server's ACK can still be when it has arrived here (docs/interop.md, "Injected faults"):
   * seen as a provocation answered with the close alone. Let its transmitter go idle. */
  usleep(300000);
  say("provoke %s", name);
  fill(p->data, 64, 0x55);
  int rc = 0;
  switch (k) {
    case P_WRITE_BAD_STAG: rc = post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, 64, h->addr, BAD_STAG, 0, 0); break;
    case P_WRITE_OOB: rc = post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, 64, h->addr + h->size - 16, h->rkey, 0, 0); break;
    case P_WRITE_INVALIDATED:
      rc = post(p, IBV_WR_SEND_WITH_INV, p->data, p->data_mr, 16, 0, 0, h->inv_rkey, 0) ||
           post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, 64, h->inv_addr, h->inv_rkey, 0, 0);
      break;
    case P_READ_BAD_STAG: rc = post(p, IBV_WR_RDMA_READ, p->data, p->data_mr, 64, h->addr, BAD_STAG, 0, 0); break;
    case P_READ_OOB: rc = post(p, IBV_WR_RDMA_READ, p->data, p->data_mr, 64, h->addr + h->size - 16, h->rkey, 0, 0); break;
    case P_READ_NO_ACCESS: rc = post(p, IBV_WR_RDMA_READ, p->data, p->data_mr, 64, h->inv_addr, h->inv_rkey, 0, 0); break;
    case P_SEND_NO_RECV: rc = post(p, IBV_WR_SEND, p->data, p->data_mr, 64, 0, 0, 0, 0); break;
    case P_SEND_TOO_LONG: rc = post(p, IBV_WR_SEND, p->data, p->data_mr, 64, 0, 0, 0, 0); break;
    case P_SENDINV_BAD_STAG: rc = post(p, IBV_WR_SEND_WITH_INV, p->data, p->data_mr, 16, 0, 0, BAD_STAG, 0); break;
    case P_WRITE_NO_ACCESS: rc = post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, 64, h->noacc_addr, h->noacc_rkey, 0, 0); break;
    case P_WRITE_OTHER_PD: rc = post(p, IBV_WR_RDMA_WRITE, p->data, p->data_mr, 64, h->other_addr, h->other_rkey, 0, 0); break;
  }
  if (rc) return -1;
  watch_errors(p, k == P_READ_NO_ACCESS ? 5 : 10, "provoke", name, 0);
  return 0;
}

/* Connects, retrying (bounded) while the server is not listening yet: in the guest it is started
 * again for each connection group, and the client may come first. */
static int connect_retry(struct peer* p, const char* host, const char* port, int retries) {
  for (int attempt = 0;; ++attempt) {
    int rc = client_connect(p, host, port);
    if (rc != -2 || attempt >= retries) return rc ? -1 : 0;
    teardown(p);
    usleep(500000);
  }
}

static int connect_retries = 0;

static int run_client(const char* host, const char* port, const uint32_t* sizes, int nsizes, const int* prov, int nprov) {
  uint32_t max = 4096;
  for (int i = 0; i < nsizes; ++i)
    if (sizes[i] > max) max = sizes[i];
  struct peer p = {.max = max};
  p.ec = rdma_create_event_channel();
  if (!p.ec) { say("FAIL: rdma_create_event_channel"); return 1; }
  int failed = 0, conn = 0;
  if (nsizes >= 0) {
    conn++;
    int rc = connect_retry(&p, host, port, connect_retries) || client_data(&p, sizes, nsizes);
    /* The client, which sends last, closes: siw fails a Send it has already transmitted with
     * "local QP operation error" when the peer closes right after receiving it. That can be the
     * server's last ACK too, so the close waits a little. */
    if (!rc) rc = send_msg(&p, (struct msg){.cmd = C_DONE});
    if (!rc) {
      usleep(200000);
      rdma_disconnect(p.id);
      const double deadline = now() + 3;
      while (now() < deadline && !drain_cm(&p)) usleep(10000);
    }
    say("connection %d (data): %s", conn, rc ? "FAILED" : "all steps verified");
    if (rc) failed++;
    teardown(&p);
  }
  for (int i = 0; i < nprov; ++i) {
    conn++;
    int rc = connect_retry(&p, host, port, connect_retries) || client_provoke(&p, prov[i]);
    if (p.id) rdma_disconnect(p.id);
    say("connection %d (provoke %s): %s", conn, provoke_names[prov[i]], rc ? "FAILED" : "done");
    if (rc) failed++;
    teardown(&p);
  }
  rdma_destroy_event_channel(p.ec);
  return failed ? 1 : 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: verbs_peer server -p PORT [-a ADDR] [-c CONNECTIONS] [-i IRD] [-t SECS]\n"
          "       verbs_peer client -a HOST -p PORT [-s SIZES|none] [-x PROVOCATIONS] [-r RETRIES] [-t SECS]\n");
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 2) usage();
  role = argv[1];
  const char *addr = NULL, *port = NULL, *sizes_arg = "1,4096,65536,1048576,16777216", *prov_arg = "";
  int conns = 1;
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) usage();
    ++i;
    if (!strcmp(a, "-a")) addr = v;
    else if (!strcmp(a, "-p")) port = v;
    else if (!strcmp(a, "-c")) conns = atoi(v);
    else if (!strcmp(a, "-i")) server_ird = atoi(v);
    else if (!strcmp(a, "-t")) timeout_s = atoi(v);
    else if (!strcmp(a, "-s")) sizes_arg = v;
    else if (!strcmp(a, "-x")) prov_arg = v;
    else if (!strcmp(a, "-r")) connect_retries = atoi(v);
    else usage();
  }
  if (!port) usage();
  if (!strcmp(role, "server")) return run_server(addr ? addr : "0.0.0.0", port, conns);
  if (strcmp(role, "client") || !addr) usage();
  uint32_t sizes[16];
  int nsizes = 0, prov[P_COUNT * 2], nprov = 0;
  if (!strcmp(sizes_arg, "none")) {
    nsizes = -1;
  } else {
    char* s = strdup(sizes_arg);
    for (char* t = strtok(s, ","); t && nsizes < 16; t = strtok(NULL, ",")) sizes[nsizes++] = (uint32_t)strtoul(t, NULL, 0);
    free(s);
  }
  if (*prov_arg) {
    char* s = strdup(prov_arg);
    for (char* t = strtok(s, ","); t && nprov < P_COUNT * 2; t = strtok(NULL, ",")) {
      int k = 0;
      while (k < P_COUNT && strcmp(t, provoke_names[k])) ++k;
      if (k == P_COUNT) { fprintf(stderr, "verbs_peer: unknown provocation %s\n", t); return 2; }
      prov[nprov++] = k;
    }
    free(s);
  }
  return run_client(addr, port, sizes, nsizes, prov, nprov);
}
