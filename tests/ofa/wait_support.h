/* What the C tests of uwarp's libibverbs and librdmacm share for their bounded waits: a
 * monotonic clock in milliseconds, whether an fd becomes readable within a time, and a QP's
 * state. */
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <time.h>

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int readable(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/* IBV_QPS_UNKNOWN if the query fails. */
static inline enum ibv_qp_state query_state(struct ibv_qp* qp) {
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) return IBV_QPS_UNKNOWN;
  return a.qp_state;
}
