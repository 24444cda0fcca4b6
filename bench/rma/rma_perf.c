/*
 * rma_perf.c - one-sided latency and bandwidth between two fake nodes (bench/rma/README.md).
 *
 * Two processes, each its own node (NCCL_HOSTID), so every ncclPutSignal / ncclSignal takes
 * the remote path. Uses only include/nccl.h: build it against any libnccl.so.2
 * (bench/rma/rma_perf.sh). Per size: rank 0 puts `size` bytes with a signal, rank 1 waits for
 * it and answers with ncclSignal, rank 0 waits for the answer; the time of one such round
 * trip, minus nothing, is reported as the put's latency (us, min and median of the iterations)
 * and size / round trip as bandwidth (GB/s). Size 0 is ncclSignal against ncclSignal.
 *
 *   rma_perf [-b MINBYTES] [-e MAXBYTES] [-n ITERS] [-w]
 * -w: the source is ncclMemAlloc memory registered as a window too (not malloc'd): over IB
 * only puts from a window go without a copy (src/transport/net/net_rma.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define CHECK(call)                                                                              \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                           \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void run(int rank, ncclUniqueId id, size_t minb, size_t maxb, int iters, int src_win) {
  char host[32];
  snprintf(host, sizeof(host), "rma-perf-node-%d", rank);
  setenv("NCCL_HOSTID", host, 1);
  ncclComm_t comm;
  ncclWindow_t win;
  CHECK(ncclCommInitRank(&comm, 2, id, rank));
  void* buf = NULL;
  CHECK(ncclMemAlloc(&buf, maxb));
  memset(buf, 1, maxb);
  void* src = NULL;
  ncclWindow_t swin = NULL;
  if (src_win)
    CHECK(ncclMemAlloc(&src, maxb));
  else
    src = malloc(maxb);
  memset(src, 2, maxb);
  CHECK(ncclCommWindowRegister(comm, buf, maxb, &win, 0));
  if (src_win) CHECK(ncclCommWindowRegister(comm, src, maxb, &swin, 0));
  double* t = malloc(sizeof(double) * (size_t)iters);
  if (rank == 0) printf("%12s %10s %10s %12s\n", "bytes", "min_us", "median_us", "GB/s(median)");
  for (size_t size = minb;; size = size ? size * 4 : 8) {
    if (size > maxb) break;
    int warm = 5;
    for (int i = -warm; i < iters; i++) {
      ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 1 - rank, .sigIdx = 0, .ctx = 0};
      double t0 = now_us();
      if (rank == 0) {
        if (size > 0)
          CHECK(ncclPutSignal(src, size, ncclUint8, 1, win, 0, 0, 0, 0, comm, NULL));
        else
          CHECK(ncclSignal(1, 0, 0, 0, comm, NULL));
        CHECK(ncclWaitSignal(1, &d, comm, NULL));
      } else {
        CHECK(ncclWaitSignal(1, &d, comm, NULL));
        CHECK(ncclSignal(0, 0, 0, 0, comm, NULL));
      }
      if (i >= 0) t[i] = now_us() - t0;
    }
    if (rank == 0) {
      qsort(t, (size_t)iters, sizeof(*t), cmp);
      double med = t[iters / 2];
      printf("%12zu %10.1f %10.1f %12.3f\n", size, t[0], med, size / med / 1e3);
      fflush(stdout);
    }
    if (size == maxb) break;
  }
  if (src_win) CHECK(ncclCommWindowDeregister(comm, swin));
  CHECK(ncclCommWindowDeregister(comm, win));
  CHECK(ncclCommDestroy(comm));
  CHECK(ncclMemFree(buf));
  if (src_win)
    CHECK(ncclMemFree(src));
  else
    free(src);
  free(t);
}

int main(int argc, char** argv) {
  size_t minb = 0, maxb = 16u << 20;
  int iters = 50, c, src_win = 0;
  while ((c = getopt(argc, argv, "b:e:n:w")) != -1) {
    if (c == 'w') src_win = 1;
    if (c == 'b') minb = strtoull(optarg, NULL, 0);
    if (c == 'e') maxb = strtoull(optarg, NULL, 0);
    if (c == 'n') iters = atoi(optarg);
  }
  if (iters < 1 || maxb < 1 || minb > maxb) {
    fprintf(stderr, "usage: rma_perf [-b MINBYTES] [-e MAXBYTES] [-n ITERS] [-w]\n");
    return 2;
  }
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  pid_t pid = fork();
  if (pid == 0) {
    run(1, id, minb, maxb, iters, src_win);
    _exit(0);
  }
  run(0, id, minb, maxb, iters, src_win);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
