/* LD_PRELOAD shim for the interop matrix: delays every rdma_resolve_addr() after the first by
 * UWARP_CONNECT_DELAY_MS (default 1500) milliseconds, then calls the real one.
 * UWARP_CONNECT_DELAY_SKIP: how many calls go undelayed first (default 1; the ofa programs test
 * delays qperf's only call when it retries qperf's connect race).
 *
 * perftest -R connects twice to the same port: once to exchange parameters, then for the test
 * QP. Its server, in the QEMU guest under TCG, listens again only after setting up the test
 * context, which takes long enough that a client on the host often connects first; the guest
 * refuses, perftest reports CONNECT_ERROR or REJECTED and usually crashes (it does so with
 * Debian's own librdmacm too). The delay lets the unmodified client face a listening server.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include <rdma/rdma_cma.h>

int rdma_resolve_addr(struct rdma_cm_id* id, struct sockaddr* src_addr, struct sockaddr* dst_addr,
                      int timeout_ms) {
  static int calls;
  typedef int (*fn_t)(struct rdma_cm_id*, struct sockaddr*, struct sockaddr*, int);
  fn_t real = (fn_t)dlsym(RTLD_NEXT, "rdma_resolve_addr");
  if (!real) return -1;
  const char* skip = getenv("UWARP_CONNECT_DELAY_SKIP");
  if (__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED) >= (skip ? atoi(skip) : 1)) {
    const char* v = getenv("UWARP_CONNECT_DELAY_MS");
    const long ms = v ? atol(v) : 1500;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return real(id, src_addr, dst_addr, timeout_ms);
}
