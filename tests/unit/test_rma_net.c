/*
 * test_rma_net.c - one-sided operations between fake nodes (NCCL_HOSTID per process, loopback)
 * over every net plugin the collectives use (Socket, UCX when built, IB over tests/ibemu):
 * ncclPutSignal / ncclSignal ride the network transport's one-sided channels
 * (transport/net/net_rma.c, core/sym/remote.c).
 *   data:    4 ranks on 2 nodes (every rank has local and remote peers); each rank sends
 *            every other rank puts of 0 B .. 8 MiB + 9 at odd offsets (the direct path's
 *            threshold, bounce fragment and direct chunk boundaries included), then one
 *            signal on another index; the target waits for that signal alone and then finds
 *            every put's data (a put lands before a later signal), then consumes the puts' own
 *            signals; three rounds, two contexts;
 *   kill:    2 and 4 nodes; ranks 0 and 1 signal each other (their connections are made), then
 *            rank 1 is killed while it puts 4 MiB messages to rank 0 in a loop:
 *            rank 0, waiting for signals that never all come, fails naming rank 1 (no hang);
 *            and the other way: rank 0 puts to rank 1 while rank 1 dies; on 4 nodes ranks 2
 *            and 3 (bystanders, connected to rank 0) put to it before the kill;
 *   lazy:    4 nodes: a registration makes no connection and no buffer; a 16 MiB put from
 *            rank 0 to rank 1, which is in no braid call (its progress engine accepts and
 *            receives), lands byte-exact; then only that pair holds connections and buffers;
 *   timeout: BRAID_TIMEOUT=2: a wait for a signal never sent fails naming the origin; a last
 *            signal whose origin destroys its communicator at once still arrives;
 *   before:  ncclSignal to a remote rank before any window registration: ncclInvalidUsage.
 */
#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "core/sym/sym.h"
#include "harness.h"
#include "nccl.h"

#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define HARNESS_TIMEOUT_S 150

struct plugin {
  const char* name;
  int ib;
  const char* kill_full_only; /* non-NULL: kill cases only with BRAID_TEST_TIER=full, and why */
};
static const struct plugin plugins[] = {
    {"Socket", 0, NULL},
#if BRAID_UCX_BUILT
    /* as test_net.c: UCX 1.13.1 sometimes aborts a survivor after a peer's kill -9 */
    {"UCX", 0, "UCX 1.13 may abort a survivor in ucp_rndv_receive after a peer's kill -9"},
#endif
#if BRAID_IB_BUILT
    {"IB", 1, NULL},
#endif
};
#define NPLUGINS NELEMS(plugins)

static void use_plugin(int p) {
  setenv("NCCL_NET", plugins[p].name, 1);
  if (plugins[p].ib) { /* the emulator next to the runner (BUILD/bin/../lib), as test_net.c */
    char lib[PATH_MAX + 64];
    setenv("BRAID_IB_VERBS_LIBRARY", harness_runner_path(lib, sizeof(lib), "../lib/libbraid-ibemu.so"), 1);
    setenv("IBEMU_DEVICES", "mlx5_0:1:ib", 1);
  }
  braid_param_reload();
}

static void fake_node(const struct harness_rank* r, int per_node) {
  char id[48];
  snprintf(id, sizeof(id), "braid-rma-node-%d", r->rank / per_node);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  braid_param_reload();
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- data and ordering --------------------------------------------------------------------- */

/* Put sizes: empty, tiny, around the direct path's threshold (64 KiB), around a bounce fragment
 * (256 KiB frame - 64 B header), around and across direct chunks (4 MiB). */
static const size_t put_sizes[] = {0,      1,      3,      4095,    65535,   65536,  65537,
                                   262080, 262081, 262144, 1048583, 4194317, 8388617};
#define NPUTS NELEMS(put_sizes)
#define REGION (15u << 20) /* per origin in each target window: every put of a round, odd offsets */

static size_t put_offset(int i) {
  size_t off = 1; /* misaligned */
  for (int k = 0; k < i; k++) off += put_sizes[k] + 7;
  return off;
}

static unsigned char pattern(int origin, int target, int round, int i, size_t j) {
  return (unsigned char)(origin * 37 + target * 11 + round * 5 + i * 3 + j % 251);
}

static int body_data(struct harness_rank* r) {
  ncclComm_t comm;
  ncclWindow_t win;
  int n = r->nranks;
  fake_node(r, 2);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.numRmaCtx = 2;
  RCHECK(r, ncclCommInitRankConfig(&comm, n, r->id, r->rank, &cfg));
  size_t wbytes = (size_t)n * REGION;
  unsigned char* wbuf = NULL;
  RCHECK(r, ncclMemAlloc((void**)&wbuf, wbytes));
  memset(wbuf, 0, wbytes);
  unsigned char* src = malloc(REGION);
  REXPECT(r, src != NULL, "out of memory");
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, wbytes, &win, 0));
  for (int round = 0; round < 3; round++) {
    int ctx = round % 2;
    for (int k = 1; k < n; k++) {
      int peer = (r->rank + k) % n;
      for (int i = 0; i < NPUTS; i++) {
        for (size_t j = 0; j < put_sizes[i]; j++) src[j] = pattern(r->rank, peer, round, i, j);
        RCHECK(r, ncclPutSignal(src, put_sizes[i], ncclUint8, peer, win, (size_t)r->rank * REGION + put_offset(i), 0,
                                ctx, 0, comm, NULL));
      }
      RCHECK(r, ncclSignal(peer, 1, ctx, 0, comm, NULL));
    }
    for (int k = 1; k < n; k++) {
      int origin = (r->rank + n - k) % n;
      ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = origin, .sigIdx = 1, .ctx = ctx};
      RCHECK(r, ncclWaitSignal(1, &d, comm, NULL)); /* the later signal only: the puts are in */
      const unsigned char* reg = wbuf + (size_t)origin * REGION;
      for (int i = 0; i < NPUTS; i++)
        for (size_t j = 0; j < put_sizes[i]; j++)
          REXPECT(r, reg[put_offset(i) + j] == pattern(origin, r->rank, round, i, j),
                  "round %d: put %d (%zu B) from rank %d: byte %zu is %u, expected %u", round, i, put_sizes[i], origin,
                  j, reg[put_offset(i) + j], pattern(origin, r->rank, round, i, j));
      d.opCnt = NPUTS;
      d.sigIdx = 0;
      RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
    }
    /* Nobody overwrites a region its target is still checking. */
    RCHECK(r, ncclAllReduce(src, src, 1, ncclUint8, ncclMax, comm, NULL));
  }
  uint64_t susp = 0;
  RCHECK(r, ncclCommMemStats(comm, ncclStatGpuMemSuspend, &susp));
  /* 2 remote peers, each both ways: 2 send slots + 1 (direct-capable plugin) or 4 receive slots */
  REXPECT(r, susp >= 2u * 3u * (256u << 10), "suspendable bytes %llu do not count the one-sided buffers",
          (unsigned long long)susp);
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  RCHECK(r, ncclCommDestroy(comm));
  RCHECK(r, ncclMemFree(wbuf));
  free(src);
  return 0;
}

START_TEST(test_data) {
  use_plugin(_i);
  ck_assert_msg(harness_run(4, HARNESS_PROCS, body_data, NULL, HARNESS_TIMEOUT_S) == 0, "puts over %s",
                plugins[_i].name);
}
END_TEST

/* ---- a peer killed mid-put ------------------------------------------------------------------- */

#define KILL_BYTES (4u << 20)

static void* suicide(void* arg) {
  usleep(200 * 1000);
  raise(SIGKILL);
  return NULL;
}

struct kill_arg {
  int victim_puts; /* the victim puts to the survivor (which waits); else the survivor puts to it */
  int nranks;      /* ranks >= 2 (one per node): bystanders that put to rank 0 once */
};

/* A bystander: one put to rank 0 (before the kill), then wait for rank 0's word that it is
 * done. Nothing it gets after the kill is asserted: rank 1's death may fail its communicator
 * (its collectives' connections notice), which is no part of what this case checks. */
static void kill_bystander(ncclComm_t comm, ncclWindow_t win, void* src) {
  (void)ncclPutSignal(src, 1u << 20, ncclUint8, 0, win, KILL_BYTES - (1u << 20), 2, 0, 0, comm, NULL);
  setenv("BRAID_TIMEOUT", "30", 1); /* rank 0's word may never come: its communicator may have failed */
  braid_param_reload();
  ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 0, .sigIdx = 1, .ctx = 0};
  (void)ncclWaitSignal(1, &d, comm, NULL);
}

static int body_kill(struct harness_rank* r) {
  const struct kill_arg* a = r->arg;
  int victim_puts = a->victim_puts, victim = 1, other = 1 - r->rank;
  ncclComm_t comm;
  ncclWindow_t win;
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  void* wbuf = NULL;
  RCHECK(r, ncclMemAlloc(&wbuf, KILL_BYTES));
  void* src = calloc(1, KILL_BYTES);
  REXPECT(r, src != NULL, "out of memory");
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, KILL_BYTES, &win, 0));
  ncclResult_t res = ncclSuccess;
  if (r->rank < 2) { /* both ways connected first (made on first use): the kill comes mid-put */
    ncclWaitSignalDesc_t hello = {.opCnt = 1, .peer = other, .sigIdx = 3, .ctx = 0};
    RCHECK(r, ncclSignal(other, 3, 0, 0, comm, NULL));
    RCHECK(r, ncclWaitSignal(1, &hello, comm, NULL));
  }
  double t0 = now_s();
  if (r->rank == victim) {
    pthread_t t;
    pthread_create(&t, NULL, suicide, NULL);
    for (;;) {
      if (victim_puts)
        ncclPutSignal(src, KILL_BYTES, ncclUint8, other, win, 0, 0, 0, 0, comm, NULL);
      else
        usleep(1000);
    }
  }
  if (r->rank >= 2) {
    kill_bystander(comm, win, src);
    RCHECK(r, ncclCommAbort(comm));
    free(src);
    return 0;
  }
  if (victim_puts) {
    ncclWaitSignalDesc_t d = {.opCnt = 1 << 30, .peer = victim, .sigIdx = 0, .ctx = 0};
    res = ncclWaitSignal(1, &d, comm, NULL);
  } else {
    for (int i = 0; i < 1000000 && res == ncclSuccess; i++)
      res = ncclPutSignal(src, KILL_BYTES, ncclUint8, victim, win, 0, 0, 0, 0, comm, NULL);
  }
  double took = now_s() - t0;
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, res == ncclRemoteError, "%s with rank 1 killed returned %d (%s), expected ncclRemoteError",
          victim_puts ? "ncclWaitSignal" : "ncclPutSignal", (int)res, ncclGetErrorString(res));
  REXPECT(r, strstr(msg, "rank 1 (host") != NULL, "the error does not name rank 1: %s", msg);
  REXPECT(r, took < 60.0, "it took %.1f s to fail", took);
  for (int b = 2; b < r->nranks; b++) (void)ncclSignal(b, 1, 0, 0, comm, NULL); /* let them go, if it can */
  RCHECK(r, ncclCommAbort(comm));
  free(src);
  return 0;
}

/* The plugins whose kill cases this tier registers (a case not run is not registered). */
static int kill_plugins[NPLUGINS];

/* _i: plugin (kill_plugins) x {victim puts, survivor puts} x {2, 4 nodes} */
START_TEST(test_kill) {
  struct kill_arg a = {.victim_puts = _i % 2 == 0, .nranks = (_i / 2) % 2 ? 4 : 2};
  int p = kill_plugins[_i / 4];
  use_plugin(p);
  int failed = harness_run(a.nranks, HARNESS_PROCS, body_kill, &a, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 1, "kill over %s (%s, %d nodes): %d processes failed, only the victim should",
                plugins[p].name, a.victim_puts ? "victim puts" : "survivor puts", a.nranks, failed);
}
END_TEST

/* ---- connections made on first use --------------------------------------------------------- */

#define LAZY_BYTES (16u << 20) /* more than loopback's socket buffers: the target must receive */

static uint64_t susp_bytes(struct harness_rank* r, ncclComm_t comm) {
  uint64_t b = 0;
  if (ncclCommMemStats(comm, ncclStatGpuMemSuspend, &b) != ncclSuccess) harness_fail(r, "ncclCommMemStats failed");
  return b;
}

/* 4 ranks on 4 nodes: only rank 0 -> rank 1 talks, while rank 1 is in no braid call. */
static int body_lazy(struct harness_rank* r) {
  ncclComm_t comm;
  ncclWindow_t win;
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int x = 0;
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt, ncclSum, comm, NULL)); /* its ring buffers exist from here */
  uint64_t before = susp_bytes(r, comm);
  unsigned char* wbuf = NULL;
  RCHECK(r, ncclMemAlloc((void**)&wbuf, LAZY_BYTES + 64));
  unsigned char* src = malloc(LAZY_BYTES + 64);
  REXPECT(r, src != NULL, "out of memory");
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, LAZY_BYTES + 64, &win, 0));
  struct braid_comm* c = braid_comm_of(comm);
  REXPECT(r, braid_remote_connections(c) == 0, "the registration made %d one-sided connections",
          braid_remote_connections(c));
  REXPECT(r, susp_bytes(r, comm) == before, "the registration set up %llu bytes of one-sided buffers",
          (unsigned long long)(susp_bytes(r, comm) - before));
  if (r->rank == 0) {
    for (size_t j = 0; j < LAZY_BYTES; j++) src[j] = (unsigned char)(j % 253 + 1);
    RCHECK(r, ncclPutSignal(src + 3, LAZY_BYTES - 5, ncclUint8, 1, win, 7, 0, 0, 0, comm, NULL));
  }
  if (r->rank == 1) usleep(300 * 1000); /* no braid call: its progress engine accepts and receives */
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt, ncclSum, comm, NULL));
  if (r->rank == 1) {
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 0, .sigIdx = 0, .ctx = 0};
    RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
    for (size_t j = 0; j < LAZY_BYTES - 5; j++)
      REXPECT(r, wbuf[7 + j] == (unsigned char)((j + 3) % 253 + 1), "byte %zu of the put is %u", j, wbuf[7 + j]);
    REXPECT(r, wbuf[6] == 0 && wbuf[7 + LAZY_BYTES - 5] == 0, "the put wrote outside its range");
  }
  int want = r->rank <= 1 ? 1 : 0; /* rank 0: a send side; rank 1: a receive side */
  REXPECT(r, braid_remote_connections(c) == want, "rank %d has %d one-sided connections, expected %d", r->rank,
          braid_remote_connections(c), want);
  uint64_t grew = susp_bytes(r, comm) - before;
  REXPECT(r, want ? grew > 0 : grew == 0, "rank %d: %llu bytes of one-sided buffers", r->rank,
          (unsigned long long)grew);
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt, ncclSum, comm, NULL));
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  RCHECK(r, ncclCommDestroy(comm));
  RCHECK(r, ncclMemFree(wbuf));
  free(src);
  return 0;
}

START_TEST(test_lazy) {
  use_plugin(_i);
  ck_assert_int_eq(harness_run(4, HARNESS_PROCS, body_lazy, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- timeout, and a signal before any window --------------------------------------------------- */

static int body_timeout(struct harness_rank* r) {
  ncclComm_t comm;
  ncclWindow_t win;
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  ncclResult_t early = ncclSignal(1 - r->rank, 0, 0, 0, comm, NULL);
  REXPECT(r, early == ncclInvalidUsage, "ncclSignal before any window returned %d", (int)early);
  REXPECT(r, strstr(ncclGetLastError(comm), "ncclCommWindowRegister") != NULL, "unclear error: %s",
          ncclGetLastError(comm));
  void* wbuf = NULL;
  RCHECK(r, ncclMemAlloc(&wbuf, 4096));
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, 4096, &win, 0));
  if (r->rank == 0) {
    /* Rank 0 alone, for this wait only: rank 1's all-reduce below waits for rank 0 meanwhile. */
    setenv("BRAID_TIMEOUT", "2", 1);
    braid_param_reload();
    ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 1, .sigIdx = 3, .ctx = 0};
    double t0 = now_s();
    ncclResult_t res = ncclWaitSignal(1, &d, comm, NULL);
    double took = now_s() - t0;
    REXPECT(r, res == ncclSystemError, "a wait for a signal never sent returned %d", (int)res);
    REXPECT(r, strstr(ncclGetLastError(comm), "from rank 1") != NULL, "the error does not name rank 1: %s",
            ncclGetLastError(comm));
    unsetenv("BRAID_TIMEOUT");
    braid_param_reload();
    REXPECT(r, took > 1.5, "the wait failed after %.1f s, before BRAID_TIMEOUT=2", took);
  }
  int x = 0;
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt, ncclSum, comm, NULL)); /* rank 1 waits for rank 0 here */
  /* A last signal, then the origin's communicator goes at once: the signal still counts. */
  ncclWaitSignalDesc_t last = {.opCnt = 1, .peer = 1, .sigIdx = 4, .ctx = 0};
  if (r->rank == 1) RCHECK(r, ncclSignal(0, 4, 0, 0, comm, NULL));
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  if (r->rank == 1) RCHECK(r, ncclCommDestroy(comm));
  if (r->rank == 1) return ncclMemFree(wbuf) == ncclSuccess ? 0 : 1;
  RCHECK(r, ncclWaitSignal(1, &last, comm, NULL));
  RCHECK(r, ncclCommDestroy(comm));
  RCHECK(r, ncclMemFree(wbuf));
  return 0;
}

START_TEST(test_timeout) {
  use_plugin(_i);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_timeout, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

Suite* rma_net_suite(void) {
  Suite* s = suite_create("rma_net");
  TCase* tc = tcase_create("data");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_data, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  tc = tcase_create("kill");
  tcase_set_timeout(tc, 300);
  const char* tier = getenv("BRAID_TEST_TIER");
  int nkill = 0;
  for (int p = 0; p < NPLUGINS; p++) {
    if (plugins[p].kill_full_only == NULL || (tier != NULL && strcmp(tier, "full") == 0))
      kill_plugins[nkill++] = p;
    else
      fprintf(stderr, "rma_net: 4 kill cases over %s not run in this tier (BRAID_TEST_TIER=full runs them): %s\n",
              plugins[p].name, plugins[p].kill_full_only);
  }
  tcase_add_loop_test(tc, test_kill, 0, 4 * nkill);
  suite_add_tcase(s, tc);
  tc = tcase_create("lazy");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_lazy, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  tc = tcase_create("timeout");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_timeout, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  return s;
}
