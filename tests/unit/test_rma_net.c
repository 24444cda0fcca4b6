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
 *   onecopy: 2 nodes: over IB a put >= 64 KiB from a window goes without a copy (counters: the
 *            source and target windows registered once, then reused); after the source window
 *            is deregistered and its pages unmapped and mapped again at the same address, a put
 *            from there is copied and, in a new window there, registered anew (no stale one);
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
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "core/sym/sym.h"
#include "harness.h"
#include "nccl.h"
#include "transport/rma.h"

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
    /* UCX 1.13's survivor abort after a kill -9 came with rendezvous: braid sends eager only
     * (ucx_lib.c config_rndv, 2026-12-02-ucxkill.md), so its kill cases run in every tier */
    {"UCX", 0, NULL},
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
  int victim_puts;      /* the victim puts to the survivor (which waits); else the survivor puts to it */
  int nranks;           /* ranks >= 2 (one per node): bystanders that put to rank 0 once */
  volatile int* r0done; /* a page shared by the forked ranks: rank 0 has checked its error */
};

/* A bystander: one put to rank 0 (before the kill, or after it), then it stays until rank 0 is
 * done. Nothing it gets after the kill is asserted: rank 1's death may fail its communicator
 * (its own connections notice), which is no part of what this case checks. It must not abort
 * before rank 0 has seen rank 1's death: its abort is a failure rank 0 may see first and rightly
 * name (rank 3 "aborted its communicator"). So it waits on a shared page, not on a signal from
 * rank 0, which its failed communicator could not receive. */
static void kill_bystander(ncclComm_t comm, ncclWindow_t win, void* src, volatile int* r0done) {
  (void)ncclPutSignal(src, 1u << 20, ncclUint8, 0, win, KILL_BYTES - (1u << 20), 2, 0, 0, comm, NULL);
  for (int ms = 0; ms < 120 * 1000 && !__atomic_load_n(r0done, __ATOMIC_ACQUIRE); ms += 10) usleep(10 * 1000);
}

static int body_kill_rank(struct harness_rank* r) {
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
    kill_bystander(comm, win, src, a->r0done);
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
  RCHECK(r, ncclCommAbort(comm));
  free(src);
  return 0;
}

/* Rank 0 lets the bystanders go however it ended. */
static int body_kill(struct harness_rank* r) {
  int failed = body_kill_rank(r);
  if (r->rank == 0) __atomic_store_n(((const struct kill_arg*)r->arg)->r0done, 1, __ATOMIC_RELEASE);
  return failed;
}

/* The plugins whose kill cases this tier registers (a case not run is not registered). */
static int kill_plugins[NPLUGINS];

/* _i: plugin (kill_plugins) x {victim puts, survivor puts} x {2, 4 nodes} */
START_TEST(test_kill) {
  int* r0done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_msg(r0done != MAP_FAILED, "mmap of the shared page failed");
  *r0done = 0;
  struct kill_arg a = {.victim_puts = _i % 2 == 0, .nranks = (_i / 2) % 2 ? 4 : 2, .r0done = r0done};
  int p = kill_plugins[_i / 4];
  use_plugin(p);
  int failed = harness_run(a.nranks, HARNESS_PROCS, body_kill, &a, HARNESS_TIMEOUT_S);
  munmap(r0done, sizeof(int));
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

/* ---- one copy over IB: window registrations, and none outlives its memory ------------------- */

#define OC_BYTES (1u << 20) /* >= the direct threshold (64 KiB) */
#define OC_SRC (4u << 20)   /* the source window: a mapping of this many bytes */

static int oc_expect(struct harness_rank* r, ncclComm_t comm, const char* when, uint64_t sent, uint64_t regs,
                     uint64_t hits, uint64_t recv, uint64_t dregs) {
  struct braid_rma_stats st;
  braid_remote_rma_stats(braid_comm_of(comm), &st);
  if (r->rank == 0)
    REXPECT(r, st.direct_sent == sent && st.src_regs == regs && st.src_hits == hits,
            "%s: rank 0 sent %llu puts direct (expected %llu), registered its source %llu times (%llu), reused the "
            "registration %llu times (%llu)",
            when, (unsigned long long)st.direct_sent, (unsigned long long)sent, (unsigned long long)st.src_regs,
            (unsigned long long)regs, (unsigned long long)st.src_hits, (unsigned long long)hits);
  else
    REXPECT(r, st.direct_recv == recv && st.dst_regs == dregs,
            "%s: rank 1 received %llu puts direct (expected %llu), registered its window %llu times (%llu)", when,
            (unsigned long long)st.direct_recv, (unsigned long long)recv, (unsigned long long)st.dst_regs,
            (unsigned long long)dregs);
  return 0;
}

/* Rank 0 puts OC_BYTES from src (tag: its pattern) into rank 1's window at offset 5; rank 1
 * checks every byte and the counters (e: sent, regs, hits, recv, dregs as oc_expect), then
 * tells rank 0, which checks its counters and may then overwrite src or go on. */
static int oc_put(struct harness_rank* r, ncclComm_t comm, ncclWindow_t win, unsigned char* dst, unsigned char* src,
                  int tag, const char* when, const uint64_t e[5]) {
  ncclWaitSignalDesc_t d = {.opCnt = 1, .peer = 1 - r->rank, .sigIdx = r->rank == 0 ? 1 : 0, .ctx = 0};
  if (r->rank == 0) {
    for (size_t j = 0; j < OC_BYTES; j++) src[j] = (unsigned char)(tag * 29 + j % 247);
    RCHECK(r, ncclPutSignal(src, OC_BYTES, ncclUint8, 1, win, 5, 0, 0, 0, comm, NULL));
    RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
    return oc_expect(r, comm, when, e[0], e[1], e[2], e[3], e[4]);
  }
  RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
  for (size_t j = 0; j < OC_BYTES; j++)
    REXPECT(r, dst[5 + j] == (unsigned char)(tag * 29 + j % 247), "put %d: byte %zu is %u, expected %u", tag, j,
            dst[5 + j], (unsigned char)(tag * 29 + j % 247));
  if (oc_expect(r, comm, when, e[0], e[1], e[2], e[3], e[4])) return 1; /* before rank 0 goes on */
  RCHECK(r, ncclSignal(0, 1, 0, 0, comm, NULL));
  return 0;
}

/* 2 ranks on 2 nodes. Rank 0 puts from a window S over a mapping of its own to rank 1's window T:
 * over IB the first put registers S (and rank 1 T), the second reuses both. Then S is
 * deregistered, its mapping unmapped and mapped again at the same address (other pages, as
 * after free + malloc): a put from there (in no window) is copied, and once a new window S2
 * covers it, a put registers it anew: a registration kept from S would have sent S's pages
 * (the emulator reads through virtual addresses, so the counters say it, not the data).
 * Socket and UCX (HOST_ANY) send every put direct and register nothing. */
static int body_onecopy(struct harness_rank* r) {
  int ib = plugins[*(const int*)r->arg].ib;
  ncclComm_t comm;
  ncclWindow_t t, sw;
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  unsigned char* dst = NULL;
  RCHECK(r, ncclMemAlloc((void**)&dst, OC_BYTES + 64));
  memset(dst, 0, OC_BYTES + 64);
  unsigned char* src = mmap(NULL, OC_SRC, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REXPECT(r, src != MAP_FAILED, "mmap failed");
  RCHECK(r, ncclCommWindowRegister(comm, dst, OC_BYTES + 64, &t, 0));
  RCHECK(r, ncclCommWindowRegister(comm, src, OC_SRC, &sw, 0));
  unsigned char* from = src + 4096 + 3; /* inside S, misaligned */
  const uint64_t u = (uint64_t)ib, e1[5] = {1, u, 0, 1, u}, e2[5] = {2, u, u, 2, u};
  if (oc_put(r, comm, t, dst, from, 1, "first put", e1) || oc_put(r, comm, t, dst, from, 2, "second put", e2)) return 1;
  RCHECK(r, ncclCommWindowDeregister(comm, sw));
  REXPECT(r, munmap(src, OC_SRC) == 0, "munmap failed");
  unsigned char* again =
      mmap(src, OC_SRC, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  REXPECT(r, again == src, "the mapping did not come back at %p (%p)", (void*)src, (void*)again);
  /* no window holds it: over IB a copy (its memory's lifetime is unknown) */
  const uint64_t e3[5] = {3 - u, u, u, 3 - u, u};
  if (oc_put(r, comm, t, dst, from, 3, "put from the new pages", e3)) return 1;
  RCHECK(r, ncclCommWindowRegister(comm, src, OC_SRC, &sw, 0)); /* S2: same address and size as S */
  const uint64_t e4[5] = {4 - u, 2 * u, u, 4 - u, u};
  if (oc_put(r, comm, t, dst, from, 4, "put from a new window at the same address", e4)) return 1;
  RCHECK(r, ncclCommWindowDeregister(comm, sw));
  RCHECK(r, ncclCommWindowDeregister(comm, t));
  RCHECK(r, ncclCommDestroy(comm));
  RCHECK(r, ncclMemFree(dst));
  munmap(src, OC_SRC);
  return 0;
}

START_TEST(test_onecopy) {
  use_plugin(_i);
  int p = _i;
  ck_assert_msg(harness_run(2, HARNESS_PROCS, body_onecopy, &p, HARNESS_TIMEOUT_S) == 0, "one-copy puts over %s",
                plugins[_i].name);
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
  const char* only = getenv("NET_ONLY"); /* NET_ONLY=<plugin>: only its kill cases (debugging) */
  for (int p = 0; p < NPLUGINS; p++) {
    if (only != NULL && only[0] != '\0' && strcmp(only, plugins[p].name) != 0) continue;
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
  tc = tcase_create("onecopy");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_onecopy, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  tc = tcase_create("timeout");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_timeout, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  return s;
}
