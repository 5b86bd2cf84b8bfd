/* An MPI check of uwarp (tests/apps/mpi.sh): point-to-point and collectives, every result
 * checked.
 *
 *   mpi_check [--hosts N] [--large]
 *
 * Each rank names its host by its host name and its network namespace (/proc/self/ns/net), so
 * that ranks in two namespaces of one machine count as two hosts. With --hosts N, fewer or more
 * hosts than N is a failure.
 *
 *   1. Ping-pong between rank 0 and the first rank on another host (rank 1 when all share one
 *      host): 8 B, 64 KiB and 4 MiB. Every message of every iteration carries its own pattern
 *      (its size, iteration and sender) and every received byte is checked against it. The
 *      checks and the filling of the next message are kept off the timed path (each side
 *      receives into two buffers, the next receive posted before the checks). Figures: one-way
 *      latency (half a round trip, us) and bandwidth (bytes moved both ways over the time, MB/s,
 *      10^6 B/s).
 *   2. MPI_Allreduce (MPI_SUM) over every rank, of 8 and of 8192 64-bit integers (64 KiB), each
 *      element of the result compared with its expected sum; --large adds 1048576 of them
 *      (8 MiB).
 *   3. MPI_Alltoall over every rank, 16 KiB per pair of ranks, each received block checked
 *      against the pattern of its sender and receiver.
 *
 * Rank 0 prints one line per figure and a last line "mpi_check: passed" or "mpi_check: FAILED
 * (N errors)". Exit status: 0 when every check of every rank passed, 1 otherwise, 2 for a usage
 * error. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kTagPing = 1, kTagPong = 2, kHostLen = 256 };

static int rank, nranks;
static long errors; /* this rank's failed checks */

/* Byte i of the message a sender sends in iteration iter of the test of size size. */
static inline uint8_t pattern(size_t size, int iter, int sender, size_t i) {
  return (uint8_t)(i + (i >> 8) * 7 + (size_t)iter * 31 + (size_t)sender * 101 + size * 3);
}

static void fill(uint8_t* buf, size_t size, int iter, int sender) {
  for (size_t i = 0; i < size; ++i) buf[i] = pattern(size, iter, sender, i);
}

/* Counts one error per message that differs, printing its first differing byte. */
static void check(const uint8_t* buf, size_t size, int iter, int sender, const char* what) {
  for (size_t i = 0; i < size; ++i) {
    uint8_t want = pattern(size, iter, sender, i);
    if (buf[i] != want) {
      fprintf(stderr,
              "mpi_check: rank %d: %s of %zu B, iteration %d from rank %d: byte %zu is 0x%02x, "
              "expected 0x%02x\n",
              rank, what, size, iter, sender, i, buf[i], want);
      ++errors;
      return;
    }
  }
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "mpi_check: rank %d: out of memory (%zu B)\n", rank, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* This rank's host: "HOSTNAME net:[INODE]". */
static void host_id(char* out) {
  char name[kHostLen / 2] = "?", ns[64] = "";
  gethostname(name, sizeof name - 1);
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  ns[n > 0 ? n : 0] = '\0';
  snprintf(out, kHostLen, "%s %s", name, ns);
}

/* Ping-pong of `iters` timed round trips (after `warmup` untimed ones) between ranks a and b.
 * Both check every message they receive. Rank a prints the figures. */
static void pingpong(int a, int b, size_t size, int warmup, int iters) {
  if (rank != a && rank != b) return;
  int peer = rank == a ? b : a;
  uint8_t* out = xmalloc(size);
  uint8_t* in[2] = {xmalloc(size), xmalloc(size)};
  MPI_Request req;
  double timed = 0;
  int total = warmup + iters;
  /* Rank b's reply of iteration 0 and rank a's first message are ready before the loop; each
   * side's first receive is posted before the barrier, the next before each check. */
  fill(out, size, 0, rank);
  MPI_Irecv(in[0], (int)size, MPI_BYTE, peer, rank == a ? kTagPong : kTagPing, MPI_COMM_WORLD,
            &req);
  int pair[2] = {a, b};
  MPI_Group world, two;
  MPI_Comm comm;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, 2, pair, &two);
  MPI_Comm_create_group(MPI_COMM_WORLD, two, 0, &comm);
  MPI_Barrier(comm);
  for (int it = 0; it < total; ++it) {
    uint8_t* got = in[it % 2];
    if (rank == a) {
      double t0 = MPI_Wtime();
      MPI_Send(out, (int)size, MPI_BYTE, peer, kTagPing, MPI_COMM_WORLD);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      if (it >= warmup) timed += MPI_Wtime() - t0;
      if (it + 1 < total)
        MPI_Irecv(in[(it + 1) % 2], (int)size, MPI_BYTE, peer, kTagPong, MPI_COMM_WORLD, &req);
      check(got, size, it, peer, "reply");
    } else {
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      if (it + 1 < total)
        MPI_Irecv(in[(it + 1) % 2], (int)size, MPI_BYTE, peer, kTagPing, MPI_COMM_WORLD, &req);
      MPI_Send(out, (int)size, MPI_BYTE, peer, kTagPong, MPI_COMM_WORLD);
      check(got, size, it, peer, "message");
    }
    if (it + 1 < total) fill(out, size, it + 1, rank);
  }
  if (rank == a) {
    double one_way_us = timed / iters / 2 * 1e6;
    double mbps = 2.0 * (double)size * iters / timed / 1e6;
    printf("ping-pong %d <-> %d, %8zu B: latency %9.2f us, bandwidth %8.1f MB/s (%d round trips, "
           "every byte checked)\n",
           a, b, size, one_way_us, mbps, iters);
    fflush(stdout);
  }
  MPI_Comm_free(&comm);
  MPI_Group_free(&two);
  MPI_Group_free(&world);
  free(out);
  free(in[0]);
  free(in[1]);
}

/* MPI_Allreduce (MPI_SUM) of n int64 values; element i of rank r is r * 1000003 + i. */
static void allreduce(size_t n, int iters) {
  int64_t* mine = xmalloc(n * sizeof *mine);
  int64_t* sum = xmalloc(n * sizeof *sum);
  int64_t ranks_sum = (int64_t)nranks * (nranks - 1) / 2;
  double timed = 0;
  for (int it = 0; it < iters; ++it) {
    for (size_t i = 0; i < n; ++i) mine[i] = (int64_t)rank * 1000003 + (int64_t)i + it;
    memset(sum, 0, n * sizeof *sum);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(mine, sum, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    timed += MPI_Wtime() - t0;
    for (size_t i = 0; i < n; ++i) {
      int64_t want = ranks_sum * 1000003 + (int64_t)nranks * ((int64_t)i + it);
      if (sum[i] != want) {
        fprintf(stderr,
                "mpi_check: rank %d: MPI_Allreduce of %zu int64, iteration %d: element %zu is "
                "%lld, expected %lld\n",
                rank, n, it, i, (long long)sum[i], (long long)want);
        ++errors;
        break;
      }
    }
  }
  if (rank == 0) {
    printf("MPI_Allreduce, %d ranks, %7zu int64 (%zu B): %9.2f us each (%d calls, every element "
           "checked)\n",
           nranks, n, n * sizeof(int64_t), timed / iters * 1e6, iters);
    fflush(stdout);
  }
  free(mine);
  free(sum);
}

/* MPI_Alltoall of `block` bytes per pair: the block rank s sends rank d carries pattern
 * (block, iteration, s * nranks + d). */
static void alltoall(size_t block, int iters) {
  uint8_t* out = xmalloc(block * nranks);
  uint8_t* in = xmalloc(block * nranks);
  double timed = 0;
  for (int it = 0; it < iters; ++it) {
    for (int d = 0; d < nranks; ++d) fill(out + d * block, block, it, rank * nranks + d);
    memset(in, 0, block * nranks);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Alltoall(out, (int)block, MPI_BYTE, in, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    timed += MPI_Wtime() - t0;
    for (int s = 0; s < nranks; ++s)
      check(in + s * block, block, it, s * nranks + rank, "MPI_Alltoall block");
  }
  if (rank == 0) {
    printf("MPI_Alltoall, %d ranks, %zu B per pair: %9.2f us each (%d calls, every byte "
           "checked)\n",
           nranks, block, timed / iters * 1e6, iters);
    fflush(stdout);
  }
  free(out);
  free(in);
}

int main(int argc, char** argv) {
  int want_hosts = 0, large = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--hosts") == 0 && i + 1 < argc) {
      want_hosts = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--large") == 0) {
      large = 1;
    } else {
      if (rank == 0) fprintf(stderr, "usage: mpi_check [--hosts N] [--large]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (nranks < 2) {
    if (rank == 0) fprintf(stderr, "mpi_check: needs at least 2 ranks\n");
    MPI_Finalize();
    return 1;
  }

  /* Which host each rank is on; the ping-pong's peer is the first rank on another host. */
  char me[kHostLen];
  char* ids = xmalloc((size_t)kHostLen * nranks);
  host_id(me);
  MPI_Allgather(me, kHostLen, MPI_CHAR, ids, kHostLen, MPI_CHAR, MPI_COMM_WORLD);
  int* host_of = xmalloc(sizeof(int) * nranks);
  int hosts = 0, peer = 0;
  for (int r = 0; r < nranks; ++r) {
    host_of[r] = -1;
    for (int q = 0; q < r && host_of[r] < 0; ++q)
      if (strcmp(ids + (size_t)q * kHostLen, ids + (size_t)r * kHostLen) == 0)
        host_of[r] = host_of[q];
    if (host_of[r] < 0) host_of[r] = hosts++;
    if (peer == 0 && host_of[r] != host_of[0]) peer = r;
  }
  if (peer == 0) peer = 1;
  if (rank == 0) {
    printf("mpi_check: %d ranks on %d host%s\n", nranks, hosts, hosts == 1 ? "" : "s");
    for (int r = 0; r < nranks; ++r)
      printf("  rank %d: host %d (%s)\n", r, host_of[r], ids + (size_t)r * kHostLen);
    if (want_hosts && hosts != want_hosts) {
      fprintf(stderr, "mpi_check: the ranks are on %d hosts, expected %d\n", hosts, want_hosts);
      ++errors;
    }
    fflush(stdout);
  }

  pingpong(0, peer, 8, 100, 1000);
  pingpong(0, peer, 64 * 1024, 10, 200);
  pingpong(0, peer, 4 * 1024 * 1024, 2, 20);
  MPI_Barrier(MPI_COMM_WORLD);
  allreduce(8, 200);
  allreduce(8192, 50);
  if (large) allreduce(1024 * 1024, 5);
  alltoall(16 * 1024, 50);

  long total = 0;
  MPI_Reduce(&errors, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (total == 0)
      printf("mpi_check: passed\n");
    else
      printf("mpi_check: FAILED (%ld errors)\n", total);
    fflush(stdout);
  }
  /* Every rank's status is the job's. */
  MPI_Bcast(&total, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  free(ids);
  free(host_of);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
