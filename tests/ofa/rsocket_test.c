/* The rsocket API of uwarp's librdmacm.so.1 (rdma-core's rsocket protocol over RDMA), linked
 * against Debian's librdmacm and run through uwarp-run: what rstream and riostream do not show.
 *   - a connection completes before raccept (the accept service answers at once);
 *   - half-close: SHUT_WR ends the peer's stream, which can still answer;
 *   - MSG_PEEK and MSG_WAITALL;
 *   - rpoll reports the end (POLLHUP) only after the data before it was read;
 *   - a non-blocking rconnect: EINPROGRESS, POLLOUT, SO_ERROR 0;
 *   - riomap/riowrite: the peer's bytes land in the mapped buffer without a call;
 *   - a peer that breaks the protocol (a raw rdma_cm/verbs peer announcing data beyond the
 *     buffer it was offered): rrecv fails with EPROTO, nothing outside the ring is read, and the
 *     process goes on. */
#include <pthread.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cm_support.h"

static uint16_t listen_port(int l) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  if (rgetsockname(l, (struct sockaddr*)&a, &len) != 0) return 0;
  return ntohs(a.sin_port);
}

/* A listening rsocket on 127.0.0.1, an ephemeral port; options applied before rlisten. */
static int make_listener(uint16_t* port, int iomap) {
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  if (l < 0) return -1;
  if (iomap) rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap);
  struct sockaddr_storage a;
  make_addr("127.0.0.1", 0, &a);
  if (rbind(l, (struct sockaddr*)&a, sizeof(struct sockaddr_in)) != 0 || rlisten(l, 8) != 0) {
    rclose(l);
    return -1;
  }
  *port = listen_port(l);
  return l;
}

static int connect_to(uint16_t port, int iomap) {
  int c = rsocket(AF_INET, SOCK_STREAM, 0);
  if (c < 0) return -1;
  if (iomap) rsetsockopt(c, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap);
  struct sockaddr_storage a;
  make_addr("127.0.0.1", port, &a);
  if (rconnect(c, (struct sockaddr*)&a, sizeof(struct sockaddr_in)) != 0) {
    rclose(c);
    return -1;
  }
  return c;
}

/* A connected pair on a fresh listener: l listens, c connected to it, s accepted; 0 if all
 * three exist. */
static int open_pair(int iomap, int* l, int* c, int* s) {
  uint16_t port = 0;
  *l = make_listener(&port, iomap);
  *c = *l >= 0 ? connect_to(port, iomap) : -1;
  *s = *c >= 0 ? raccept(*l, NULL, NULL) : -1;
  return *l >= 0 && *c >= 0 && *s >= 0 ? 0 : -1;
}

static int send_all(int s, const void* buf, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t r = rsend(s, (const char*)buf + off, n - off, 0);
    if (r <= 0) return -1;
    off += (size_t)r;
  }
  return 0;
}

static void test_connect_before_accept(void) {
  uint16_t port = 0;
  int l = make_listener(&port, 0);
  CHECK(l >= 0 && port != 0);
  /* One thread: a blocking rconnect that needed raccept would never return. */
  int c = connect_to(port, 0);
  CHECK(c >= 0);
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  int s = raccept(l, (struct sockaddr*)&peer, &len);
  CHECK(s >= 0);
  CHECK(len == sizeof peer && peer.sin_family == AF_INET &&
        peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
  char msg[100], got[100];
  for (int i = 0; i < 100; ++i) msg[i] = (char)i;
  CHECK(send_all(c, msg, sizeof msg) == 0);
  CHECK(rrecv(s, got, sizeof got, MSG_WAITALL) == (ssize_t)sizeof got);
  CHECK(memcmp(msg, got, sizeof got) == 0);
  CHECK(send_all(s, msg, 10) == 0);
  CHECK(rrecv(c, got, sizeof got, 0) == 10);
  rclose(c);
  rclose(s);
  rclose(l);
}

static void test_half_close_peek_waitall(void) {
  int l, c, s;
  CHECK(open_pair(0, &l, &c, &s) == 0);
  CHECK(send_all(c, "abc", 3) == 0);
  CHECK(send_all(c, "defgh", 5) == 0);
  char buf[16] = {0};
  /* MSG_WAITALL gathers across messages; MSG_PEEK leaves the bytes. */
  CHECK(rrecv(s, buf, 2, MSG_PEEK) == 2 && memcmp(buf, "ab", 2) == 0);
  CHECK(rrecv(s, buf, 6, MSG_WAITALL) == 6 && memcmp(buf, "abcdef", 6) == 0);
  CHECK(rshutdown(c, SHUT_WR) == 0);
  CHECK(rrecv(s, buf, sizeof buf, 0) == 2 && memcmp(buf, "gh", 2) == 0);
  CHECK(rrecv(s, buf, sizeof buf, 0) == 0); /* the end of c's stream */
  CHECK(rsend(c, "x", 1, 0) < 0);           /* c's sending half is shut */
  CHECK(send_all(s, "reply", 5) == 0);      /* s can still answer */
  CHECK(rrecv(c, buf, 5, MSG_WAITALL) == 5 && memcmp(buf, "reply", 5) == 0);
  rclose(s);
  rclose(c);
  rclose(l);
}

static void test_rpoll_end_after_data(void) {
  int l, c, s;
  CHECK(open_pair(0, &l, &c, &s) == 0);
  CHECK(send_all(s, "last", 4) == 0);
  rclose(s); /* its data, then the disconnect */
  struct pollfd p = {.fd = c, .events = POLLIN};
  CHECK(rpoll(&p, 1, 5000) == 1);
  CHECK((p.revents & POLLIN) != 0 && (p.revents & POLLHUP) == 0);
  char buf[8];
  CHECK(rrecv(c, buf, sizeof buf, 0) == 4 && memcmp(buf, "last", 4) == 0);
  const double until = now_ms() + 5000;
  int hup = 0;
  while (!hup && now_ms() < until) {
    p.revents = 0;
    if (rpoll(&p, 1, 100) == 1 && (p.revents & POLLHUP)) hup = 1;
  }
  CHECK(hup);
  CHECK(rrecv(c, buf, sizeof buf, 0) == 0);
  rclose(c);
  rclose(l);
}

static void test_nonblocking_connect(void) {
  uint16_t port = 0;
  int l = make_listener(&port, 0);
  int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK(l >= 0 && c >= 0);
  struct sockaddr_storage a;
  make_addr("127.0.0.1", port, &a);
  /* Under way (EINPROGRESS), or already connected (0) when every step of the setup completed
   * before the call looked for the next one (the listener accepts in the background; seen on a
   * loaded machine): POSIX allows a non-blocking connect both, as librdmacm's rsockets do. */
  errno = 0;
  const int rc = rconnect(c, (struct sockaddr*)&a, sizeof(struct sockaddr_in));
  CHECK(rc == 0 || (rc == -1 && errno == EINPROGRESS));
  struct pollfd p = {.fd = c, .events = POLLOUT};
  CHECK(rpoll(&p, 1, 5000) == 1 && (p.revents & POLLOUT));
  int err = -1;
  socklen_t len = sizeof err;
  CHECK(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
  char b = 0;
  errno = 0;
  CHECK(rrecv(c, &b, 1, 0) == -1 && errno == EAGAIN); /* nothing yet: it does not block */
  int s = raccept(l, NULL, NULL);
  CHECK(s >= 0);
  CHECK(rsend(c, "z", 1, 0) == 1);
  CHECK(rrecv(s, &b, 1, 0) == 1 && b == 'z');
  rclose(s);
  rclose(c);
  rclose(l);
}

static void test_riomap_riowrite(void) {
  int l, c, s;
  CHECK(open_pair(1, &l, &c, &s) == 0);
  enum { kLen = 100000 };
  volatile unsigned char* target = calloc(1, kLen);
  unsigned char* src = malloc(kLen);
  for (int i = 0; i < kLen; ++i) src[i] = (unsigned char)(i * 7 + 1);
  CHECK(riomap(s, (void*)target, kLen, PROT_WRITE, 0, 4096) == 4096);
  /* The iomap entry goes to the peer with s's next send. */
  CHECK(send_all(s, "m", 1) == 0);
  char b;
  CHECK(rrecv(c, &b, 1, 0) == 1);
  size_t off = 0;
  while (off < kLen) {
    size_t r = riowrite(c, src + off, kLen - off, 4096 + (off_t)off, 0);
    if (r == (size_t)-1 || r == 0) break;
    off += r;
  }
  CHECK(off == kLen);
  errno = 0;
  CHECK(riowrite(c, src, 1, 4096 + kLen, 0) == (size_t)-1 && errno == EINVAL); /* unmapped */
  /* The receiver calls nothing: the last byte arrives through the Writes alone. */
  const double until = now_ms() + 5000;
  while (target[kLen - 1] != src[kLen - 1] && now_ms() < until) usleep(100);
  CHECK(memcmp((const void*)target, src, kLen) == 0);
  CHECK(riounmap(s, (void*)target, kLen) == 0);
  rclose(c);
  rclose(s);
  rclose(l);
  free((void*)target);
  free(src);
}

/* The raw peer: an rdma_cm connection that sends rsocket connection data and then a message
 * announcing `announce` bytes it never wrote. */
static void test_peer_breaks_protocol(uint32_t announce) {
  uint16_t port = 0;
  int l = make_listener(&port, 0);
  CHECK(l >= 0);
  struct rdma_event_channel* ch = rdma_create_event_channel();
  struct rdma_cm_id* id = NULL;
  CHECK(ch != NULL && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
  struct sockaddr_storage a;
  make_addr("127.0.0.1", port, &a);
  CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&a, 2000) == 0);
  struct rdma_cm_event* e = EXPECT_EVENT(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  if (e) rdma_ack_cm_event(e);
  CHECK(rdma_resolve_route(id, 2000) == 0);
  e = EXPECT_EVENT(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  if (e) rdma_ack_cm_event(e);
  struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 8,
                                        .max_recv_wr = 8,
                                        .max_send_sge = 1,
                                        .max_recv_sge = 1,
                                        .max_inline_data = 64},
                                .sq_sig_all = 1};
  CHECK(rdma_create_qp(id, NULL, &qa) == 0);
  static uint8_t mem[8192];
  struct ibv_mr* mr =
      ibv_reg_mr(id->pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(mr != NULL);
  for (int i = 0; i < 4; ++i) {
    struct ibv_sge sge = {(uintptr_t)(mem + 4096 + 4 * i), 4, mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
    CHECK(ibv_post_recv(id->qp, &wr, &bad) == 0);
  }
  /* rdma-core's struct rs_conn_data, big-endian fields. */
  uint8_t conn[40] = {1, 2, 0, 4};
  uint64_t addr = (uintptr_t)mem;
  for (int i = 0; i < 8; ++i) conn[8 + i] = conn[24 + i] = (uint8_t)(addr >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) conn[16 + i] = conn[32 + i] = (uint8_t)(mr->rkey >> (24 - 8 * i));
  conn[23] = 2;    /* target_sgl: 2 entries */
  conn[37] = 0x08; /* data_buf: 2048 bytes */
  struct rdma_conn_param param = {.private_data = conn,
                                  .private_data_len = sizeof conn,
                                  .initiator_depth = 1,
                                  .responder_resources = 1};
  CHECK(rdma_connect(id, &param) == 0);
  e = EXPECT_EVENT(ch, RDMA_CM_EVENT_ESTABLISHED);
  if (e) rdma_ack_cm_event(e);
  int s = raccept(l, NULL, NULL);
  CHECK(s >= 0);
  /* message(kData, announce), little-endian, with nothing written before it. */
  uint8_t msg[4] = {(uint8_t)announce, (uint8_t)(announce >> 8), (uint8_t)(announce >> 16),
                    (uint8_t)(announce >> 24)};
  struct ibv_sge sge = {(uintptr_t)msg, 4, 0};
  struct ibv_send_wr wr = {.sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_INLINE},
                     *bad;
  CHECK(ibv_post_send(id->qp, &wr, &bad) == 0);
  static char buf[1 << 20];
  errno = 0;
  const ssize_t r = rrecv(s, buf, sizeof buf, 0);
  CHECK(r == -1 && errno == EPROTO);
  rclose(s);
  rdma_disconnect(id);
  rdma_destroy_qp(id);
  ibv_dereg_mr(mr);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  rclose(l);
}

int main(void) {
  test_connect_before_accept();
  test_half_close_peek_waitall();
  test_rpoll_end_after_data();
  test_nonblocking_connect();
  test_riomap_riowrite();
  test_peer_breaks_protocol(1u << 20); /* beyond the 64 KiB half offered */
  test_peer_breaks_protocol(65537);    /* one byte beyond it */
  printf("rsocket_test: %d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
