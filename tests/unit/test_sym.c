/*
 * test_sym.c - NCCL 2.30's memory API (src/core/sym/): windows on ncclMemAlloc memory,
 * one-sided ncclPutSignal / ncclSignal / ncclWaitSignal, ncclCommSuspend / ncclCommResume /
 * ncclCommMemStats, ncclCommGetUniqueId / ncclCommGrow, the device-API peer pointers
 * (device communicators: test_devcomm.c).
 *
 * Every case runs across ranks as threads, processes, pairs of threads per process and fake
 * nodes (NCCL_HOSTID per process: the remote path of remote.c), and the window cases also on
 * the fake GPU (BRAID_FAKE_GPU: device memory, IPC handles, streams).
 */
#include <check.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/param.h"
#include "device/device.h"
#include "harness.h"
#include "nccl.h"
#include "sym_helpers.h"

#define RANK_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 300
#define CHUNK 4096 /* bytes each origin puts into each target's window */

struct sym_arg {
  int mode;
};

static void rank_env(const struct harness_rank* r, int mode) {
  sym_rank_env(r, mode, "braid-sym-node");
}

/* Device mode: collectives return once launched; wait before touching their buffers. */
static void sync_dev(void) {
  if (braid_device() != NULL) braid_device()->stream_sync(NULL);
}

static unsigned char pattern(int origin, int target, int round, size_t i) {
  return (unsigned char)(origin * 31 + target * 7 + round * 13 + i);
}

/* Memory the rank reads and writes directly (the fake GPU's device memory is host memory). */
static void fill(unsigned char* p, int origin, int target, int round) {
  for (size_t i = 0; i < CHUNK; i++) p[i] = pattern(origin, target, round, i);
}

/* Every rank puts CHUNK bytes into every peer's window at offset origin * CHUNK and signals;
 * then waits for one signal of each peer and checks what landed. Two rounds, so the signal
 * counters accumulate. */
static int put_round(struct harness_rank* r, ncclComm_t comm, ncclWindow_t win, unsigned char* wbuf, unsigned char* src,
                     int round) {
  int n = r->nranks;
  for (int p = 0; p < n; p++) {
    fill(src, r->rank, p, round);
    RCHECK(r, ncclPutSignal(src, CHUNK, ncclUint8, p, win, (size_t)r->rank * CHUNK, 0, 0, 0, comm, NULL));
  }
  ncclWaitSignalDesc_t descs[64];
  for (int p = 0; p < n; p++) descs[p] = (ncclWaitSignalDesc_t){1, p, 0, 0};
  RCHECK(r, ncclWaitSignal(n, descs, comm, NULL));
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < CHUNK; i++)
      REXPECT(r, wbuf[(size_t)p * CHUNK + i] == pattern(p, r->rank, round, i),
              "round %d: byte %zu from rank %d is %u, expected %u", round, i, p, wbuf[(size_t)p * CHUNK + i],
              pattern(p, r->rank, round, i));
  /* Nobody starts the next round's puts before every rank checked this one. */
  RCHECK(r, ncclAllReduce(src, src, 1, ncclUint8, ncclSum, comm, NULL));
  sync_dev();
  return 0;
}

static int body_windows(struct harness_rank* r) {
  const struct sym_arg* a = r->arg;
  ncclComm_t comm;
  rank_env(r, a->mode);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  size_t bytes = (size_t)r->nranks * CHUNK;
  unsigned char *wbuf, *src;
  RCHECK(r, ncclMemAlloc((void**)&wbuf, bytes));
  RCHECK(r, ncclMemAlloc((void**)&src, CHUNK));
  ncclWindow_t win;
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
  void* user = NULL;
  RCHECK(r, ncclWinGetUserPtr(comm, win, &user));
  REXPECT(r, user == wbuf, "ncclWinGetUserPtr gave %p, registered %p", user, (void*)wbuf);
  for (int round = 0; round < 2; round++)
    if (put_round(r, comm, win, wbuf, src, round)) return 1;
  /* Signals without data, several per wait. */
  int peer = (r->rank + 1) % r->nranks, from = (r->rank + r->nranks - 1) % r->nranks;
  for (int k = 0; k < 3; k++) RCHECK(r, ncclSignal(peer, 0, 0, 0, comm, NULL));
  ncclWaitSignalDesc_t d = {3, from, 0, 0};
  RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
  /* Peer pointers (issue 19's LSA pointers): local peers have one, remote ones NULL. */
  extern ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**);
  void* pp = NULL;
  RCHECK(r, ncclGetPeerDevicePointer(win, 0, r->rank, &pp));
  REXPECT(r, pp == wbuf, "own peer pointer %p, window %p", pp, (void*)wbuf);
  RCHECK(r, ncclGetPeerDevicePointer(win, 16, peer, &pp));
  REXPECT(r, (pp == NULL) == (a->mode == SYM_FAKE_NODES), "rank %d's pointer %p in mode %s", peer, pp,
          sym_mode_names[a->mode]);
  /* A window inside an allocation (peers map the allocation and add the offset). */
  ncclWindow_t inner;
  RCHECK(r, ncclCommWindowRegister(comm, wbuf + CHUNK, CHUNK, &inner, 0));
  fill(src, r->rank, peer, 9);
  RCHECK(r, ncclPutSignal(src, 64, ncclUint8, peer, inner, 128, 1, 0, 0, comm, NULL));
  d = (ncclWaitSignalDesc_t){1, from, 1, 0};
  RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
  for (size_t i = 0; i < 64; i++)
    REXPECT(r, wbuf[CHUNK + 128 + i] == pattern(from, r->rank, 9, i), "inner window byte %zu is %u", i,
            wbuf[CHUNK + 128 + i]);
  RCHECK(r, ncclCommWindowDeregister(comm, inner));
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  RCHECK(r, ncclAllReduce(src, src, 1, ncclUint8, ncclSum, comm, NULL)); /* nobody frees under a peer */
  sync_dev();
  RCHECK(r, ncclMemFree(src));
  RCHECK(r, ncclMemFree(wbuf));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_windows) {
  struct sym_arg a = {_i};
  int nranks = _i == SYM_PAIRS ? 4 : 3;
  sym_use_mode(_i, nranks);
  ck_assert_msg(harness_run(nranks, sym_harness_modes[_i], body_windows, &a, RANK_TIMEOUT_S) == 0, "mode %s",
                sym_mode_names[_i]);
  sym_use_mode(SYM_THREADS, 0);
}
END_TEST

/* ---- bad arguments -------------------------------------------------------------------------- */

static int body_badargs(struct harness_rank* r) {
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  char* buf;
  RCHECK(r, ncclMemAlloc((void**)&buf, 8192));
  ncclWindow_t win;
  REXPECT(r, ncclCommWindowRegister(comm, buf, 8192, NULL, 0) == ncclInvalidArgument, "NULL win accepted");
  REXPECT(r, ncclCommWindowRegister(comm, buf, 8192, &win, 0x10) == ncclInvalidArgument, "flags 0x10 accepted");
  RCHECK(r, ncclCommWindowRegister(comm, buf, 8192, &win, NCCL_WIN_DEFAULT));
  int peer = 1 - r->rank;
  struct {
    ncclResult_t got;
    const char* what;
  } cases[] = {
      {ncclPutSignal(buf, 1, ncclUint8, 2, win, 0, 0, 0, 0, comm, NULL), "peer 2"},
      {ncclPutSignal(buf, 1, ncclUint8, peer, win, 0, 8 /* braid's signal indices: 0..7 */, 0, 0, comm, NULL),
       "sigIdx"},
      {ncclPutSignal(buf, 1, ncclUint8, peer, win, 0, 0, 1, 0, comm, NULL), "ctx 1 (numRmaCtx 1)"},
      {ncclPutSignal(buf, 1, ncclUint8, peer, win, 0, 0, 0, 1, comm, NULL), "flags 1"},
      {ncclPutSignal(buf, 2, ncclUint8, peer, win, 8191, 0, 0, 0, comm, NULL), "past the window's end"},
      {ncclPutSignal(buf, 1, ncclUint8, peer, NULL, 0, 0, 0, 0, comm, NULL), "NULL window"},
      {ncclPutSignal(buf, 1, (ncclDataType_t)12, peer, win, 0, 0, 0, 0, comm, NULL), "datatype 12"},
      {ncclSignal(-1, 0, 0, 0, comm, NULL), "signal peer -1"},
      {ncclWaitSignal(0, NULL, comm, NULL), "no descriptors"},
      {ncclCommMemStats(comm, (ncclCommMemStat_t)4, NULL), "NULL value"},
      {ncclCommSuspend(comm, 2), "suspend flags 2"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    REXPECT(r, cases[i].got == ncclInvalidArgument, "%s: got %d, expected ncclInvalidArgument", cases[i].what,
            (int)cases[i].got);
  ncclWaitSignalDesc_t d = {0, peer, 0, 0};
  REXPECT(r, ncclWaitSignal(1, &d, comm, NULL) == ncclInvalidArgument, "opCnt 0 accepted");
  /* The last error is the process's: only a rank alone in its process can read its own. */
  if (*(int*)r->arg)
    REXPECT(r, strstr(ncclGetLastError(NULL), "opCnt") != NULL, "last error: %s", ncclGetLastError(NULL));
  void* p;
  REXPECT(r, ncclWinGetUserPtr(comm, (ncclWindow_t)buf, &p) == ncclInvalidArgument, "garbage window accepted");
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  REXPECT(r, ncclCommWindowDeregister(comm, win) == ncclInvalidArgument, "deregistered twice");
  /* Plain malloc memory cannot be mapped by another process: every rank refuses. */
  char* plain = malloc(8192);
  ncclResult_t res = ncclCommWindowRegister(comm, plain, 8192, &win, 0);
  int procs = *(int*)r->arg;
  if (procs) {
    REXPECT(r, res == ncclInvalidArgument, "a malloc window between processes gave %d", (int)res);
  } else {
    REXPECT(r, res == ncclSuccess, "a malloc window between threads gave %d", (int)res);
    RCHECK(r, ncclCommWindowDeregister(comm, win));
  }
  free(plain);
  RCHECK(r, ncclMemFree(buf));
  REXPECT(r, ncclMemFree(buf) == ncclInvalidArgument, "freed twice");
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_badargs) {
  int procs = _i;
  sym_use_mode(SYM_THREADS, 0);
  ck_assert_int_eq(harness_run(2, procs ? HARNESS_PROCS : HARNESS_THREADS, body_badargs, &procs, RANK_TIMEOUT_S), 0);
}
END_TEST

/* ---- suspend / resume / memory statistics ---------------------------------------------------- */

static int stat_of(ncclComm_t comm, ncclCommMemStat_t s, uint64_t* v) {
  return ncclCommMemStats(comm, s, v) != ncclSuccess;
}

static int body_suspend(struct harness_rank* r) {
  const struct sym_arg* a = r->arg;
  ncclComm_t comm;
  rank_env(r, a->mode);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  size_t bytes = (size_t)r->nranks * CHUNK;
  unsigned char *wbuf, *src;
  RCHECK(r, ncclMemAlloc((void**)&wbuf, bytes));
  RCHECK(r, ncclMemAlloc((void**)&src, CHUNK));
  ncclWindow_t win;
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
  float* x = (float*)src;
  x[0] = (float)r->rank;
  RCHECK(r, ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm, NULL));
  sync_dev();
  uint64_t susp, pers, total, flag;
  REXPECT(r,
          !stat_of(comm, ncclStatGpuMemSuspend, &susp) && !stat_of(comm, ncclStatGpuMemPersist, &pers) &&
              !stat_of(comm, ncclStatGpuMemTotal, &total) && !stat_of(comm, ncclStatGpuMemSuspended, &flag),
          "ncclCommMemStats failed: %s", ncclGetLastError(NULL));
  REXPECT(r, susp > 0 && pers > 0 && total == susp + pers && flag == 0, "before: suspend %llu persist %llu total %llu",
          (unsigned long long)susp, (unsigned long long)pers, (unsigned long long)total);
  RCHECK(r, ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  uint64_t susp2, pers2;
  REXPECT(r,
          !stat_of(comm, ncclStatGpuMemSuspend, &susp2) && !stat_of(comm, ncclStatGpuMemPersist, &pers2) &&
              !stat_of(comm, ncclStatGpuMemSuspended, &flag),
          "ncclCommMemStats while suspended failed");
  REXPECT(r, susp2 == 0 && pers2 == pers && flag == 1, "suspended: suspend %llu persist %llu flag %llu",
          (unsigned long long)susp2, (unsigned long long)pers2, (unsigned long long)flag);
  ncclResult_t res = ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm, NULL);
  REXPECT(r, res == ncclInvalidUsage, "an all-reduce on a suspended communicator gave %d", (int)res);
  if (sym_harness_modes[a->mode] == HARNESS_PROCS) /* the last error is the process's (threads share it) */
    REXPECT(r, strstr(ncclGetLastError(NULL), "suspended") != NULL, "last error: %s", ncclGetLastError(NULL));
  REXPECT(r, ncclSignal(0, 0, 0, 0, comm, NULL) == ncclInvalidUsage, "a signal on a suspended communicator");
  RCHECK(r, ncclCommResume(comm));
  REXPECT(r, !stat_of(comm, ncclStatGpuMemSuspended, &flag) && flag == 0, "still suspended after resume");
  x[0] = (float)r->rank;
  RCHECK(r, ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm, NULL));
  sync_dev();
  REXPECT(r, x[0] == (float)(r->nranks * (r->nranks - 1) / 2), "all-reduce after resume: %g", (double)x[0]);
  if (put_round(r, comm, win, wbuf, src, 5)) return 1; /* windows mapped again */
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  RCHECK(r, ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm, NULL));
  sync_dev();
  RCHECK(r, ncclMemFree(src));
  RCHECK(r, ncclMemFree(wbuf));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_suspend) {
  struct sym_arg a = {_i};
  int nranks = _i == SYM_PAIRS ? 4 : 2;
  sym_use_mode(_i, nranks);
  ck_assert_msg(harness_run(nranks, sym_harness_modes[_i], body_suspend, &a, RANK_TIMEOUT_S) == 0, "mode %s",
                sym_mode_names[_i]);
  sym_use_mode(SYM_THREADS, 0);
}
END_TEST

/* ---- grow ---------------------------------------------------------------------------------- */

/* Shared by every rank (MAP_SHARED survives fork): the grow id, once rank 0 made it. */
struct grow_box {
  int mode, old_n;
  volatile int ready;
  ncclUniqueId id;
};

static int body_grow(struct harness_rank* r) {
  struct grow_box* b = r->arg;
  rank_env(r, b->mode);
  ncclComm_t old = NULL, grown = NULL;
  int n = r->nranks;
  if (r->rank < b->old_n) {
    /* The old communicator: the harness's id, first b->old_n ranks. */
    RCHECK(r, ncclCommInitRank(&old, b->old_n, r->id, r->rank));
    ncclUniqueId id, again;
    if (r->rank == 0) {
      RCHECK(r, ncclCommGetUniqueId(old, &id));
      REXPECT(r, ncclCommGetUniqueId(old, &again) == ncclInvalidUsage, "a second id while one is pending");
      b->id = id;
      __atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
    }
    REXPECT(r, ncclCommGrow(old, b->old_n, NULL, -1, &grown, NULL) == ncclInvalidArgument, "nRanks not larger");
    RCHECK(r, ncclCommGrow(old, n, r->rank == 0 ? &id : NULL, -1, &grown, NULL));
  } else {
    while (!__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE)) usleep(1000);
    ncclUniqueId id = b->id;
    REXPECT(r, ncclCommGrow(NULL, n, &id, 0, &grown, NULL) == ncclInvalidArgument, "a new rank claimed rank 0");
    RCHECK(r, ncclCommGrow(NULL, n, &id, r->rank, &grown, NULL));
  }
  int count = 0, me = -1;
  RCHECK(r, ncclCommCount(grown, &count));
  RCHECK(r, ncclCommUserRank(grown, &me));
  REXPECT(r, count == n && me == r->rank, "grown communicator: rank %d of %d", me, count);
  int* v; /* ncclMemAlloc: device memory on the fake GPU */
  RCHECK(r, ncclMemAlloc((void**)&v, sizeof(int)));
  *v = r->rank + 1;
  RCHECK(r, ncclAllReduce(v, v, 1, ncclInt32, ncclSum, grown, NULL));
  sync_dev();
  REXPECT(r, *v == n * (n + 1) / 2, "all-reduce on the grown communicator: %d", *v);
  if (old != NULL) {
    *v = 1; /* the old communicator still works */
    RCHECK(r, ncclAllReduce(v, v, 1, ncclInt32, ncclSum, old, NULL));
    sync_dev();
    REXPECT(r, *v == b->old_n, "all-reduce on the old communicator: %d", *v);
    RCHECK(r, ncclCommDestroy(old));
  }
  RCHECK(r, ncclCommDestroy(grown));
  RCHECK(r, ncclMemFree(v));
  return 0;
}

START_TEST(test_grow) {
  struct grow_box* b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert(b != MAP_FAILED);
  memset(b, 0, sizeof(*b));
  b->mode = _i;
  b->old_n = 2;
  int nranks = _i == SYM_PAIRS ? 6 : 4;
  if (_i == SYM_PAIRS) b->old_n = 2;
  sym_use_mode(_i, nranks);
  int failed = harness_run(nranks, sym_harness_modes[_i], body_grow, b, RANK_TIMEOUT_S);
  munmap(b, sizeof(*b));
  sym_use_mode(SYM_THREADS, 0);
  ck_assert_msg(failed == 0, "mode %s", sym_mode_names[_i]);
}
END_TEST

/* A signal that never comes: BRAID_TIMEOUT ends the wait with ncclSystemError naming the peer.
 * Rank 1 waits outside braid meanwhile (a collective would meet BRAID_TIMEOUT itself). */
static int body_timeout(struct harness_rank* r) {
  volatile int* waited = r->arg;
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 0) {
    ncclWaitSignalDesc_t d = {2, 1, 0, 0};
    ncclResult_t res = ncclWaitSignal(1, &d, comm, NULL);
    REXPECT(r, res == ncclSystemError, "a wait for signals that never come gave %d", (int)res);
    REXPECT(r, strstr(ncclGetLastError(NULL), "BRAID_TIMEOUT=1 s: 1 of 2 signals from rank 1") != NULL,
            "last error: %s", ncclGetLastError(NULL));
    __atomic_store_n(waited, 1, __ATOMIC_RELEASE);
  } else {
    RCHECK(r, ncclSignal(0, 0, 0, 0, comm, NULL)); /* one of the two */
    while (!__atomic_load_n(waited, __ATOMIC_ACQUIRE)) usleep(1000);
  }
  int one = 1;
  RCHECK(r, ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_wait_timeout) {
  sym_use_mode(SYM_THREADS, 0);
  setenv("BRAID_TIMEOUT", "1", 1);
  braid_param_reload();
  int waited = 0;
  int failed = harness_run(2, HARNESS_THREADS, body_timeout, (void*)&waited, RANK_TIMEOUT_S);
  unsetenv("BRAID_TIMEOUT");
  braid_param_reload();
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ncclMemAlloc memory has no name: a process that exits without ncclMemFree leaves nothing
 * in /dev/shm (glob for its pid: other engineers' runs add entries of their own). */
START_TEST(test_memalloc_exit) {
  sym_use_mode(SYM_THREADS, 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    char* p = NULL;
    if (ncclMemAlloc((void**)&p, 1 << 20) != ncclSuccess) _exit(2);
    memset(p, 1, 1 << 20);
    _exit(0);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char pattern[64];
  glob_t g;
  snprintf(pattern, sizeof(pattern), "/dev/shm/*-%d-*", (int)pid);
  int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  if (n > 0) fprintf(stderr, "left behind: %s\n", g.gl_pathv[0]);
  globfree(&g);
  ck_assert_int_eq(n, 0);
}
END_TEST

/* ---- a rank that never resumes ------------------------------------------------------------- */

#define RESUME_TIMEOUT_S "3" /* BRAID_INIT_TIMEOUT: how long the others wait for it */
#define RESUME_GIVE_UP_S 60  /* rank 2 stops waiting for the others' failure (a missing deadline) */

struct resume_arg {
  int mode;
  int* done; /* shared (MAP_SHARED): ranks 0 and 1 returned from ncclCommResume */
};

/* Every rank suspends; rank 2 never resumes and keeps its communicator open until the others
 * returned (so only a deadline can end their wait, not a closed connection). Their resume
 * fails with ncclRemoteError; a rank alone in its process checks that the error names rank 2. */
static int body_resume_absent(struct harness_rank* r) {
  struct resume_arg* a = r->arg;
  ncclComm_t comm;
  ncclWindow_t win;
  rank_env(r, a->mode);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  void* buf = NULL;
  RCHECK(r, ncclMemAlloc(&buf, 4096));
  RCHECK(r, ncclCommWindowRegister(comm, buf, 4096, &win, 0)); /* fake nodes: one-sided connections too */
  RCHECK(r, ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  if (r->rank == 2) {
    for (int i = 0; i < RESUME_GIVE_UP_S * 100 && __atomic_load_n(a->done, __ATOMIC_ACQUIRE) < 2; i++) usleep(10000);
    int done = __atomic_load_n(a->done, __ATOMIC_ACQUIRE);
    RCHECK(r, ncclCommDestroy(comm));
    RCHECK(r, ncclMemFree(buf));
    REXPECT(r, done == 2, "after %d s, %d of ranks 0 and 1 had returned from ncclCommResume (no deadline?)",
            RESUME_GIVE_UP_S, done);
    return 0;
  }
  ncclResult_t res = ncclCommResume(comm);
  const char* last = ncclGetLastError(NULL);
  __atomic_fetch_add(a->done, 1, __ATOMIC_RELEASE);
  REXPECT(r, res == ncclRemoteError, "ncclCommResume without rank 2 returned %d (%s)", (int)res,
          ncclGetErrorString(res));
  if (sym_harness_modes[a->mode] == HARNESS_PROCS)
    REXPECT(r, strstr(last, "ncclCommResume") != NULL && strstr(last, "rank 2") != NULL,
            "the error does not name the call and rank 2: %s", last);
  RCHECK(r, ncclCommDestroy(comm));
  RCHECK(r, ncclMemFree(buf));
  return 0;
}

START_TEST(test_resume_absent) {
  /* As threads too: a failed resume there once freed a same-process shm FIFO its peer thread
   * still mapped (transport/shm.c shm_recv_free took "not connected" for "never taken"). */
  static const int modes[] = {SYM_PROCS, SYM_FAKE_NODES, SYM_THREADS};
  int mode = modes[_i];
  int* done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert(done != MAP_FAILED);
  *done = 0;
  struct resume_arg a = {mode, done};
  sym_use_mode(mode, 3);
  setenv("BRAID_INIT_TIMEOUT", RESUME_TIMEOUT_S, 1);
  braid_param_reload();
  int failed = harness_run(3, sym_harness_modes[mode], body_resume_absent, &a, RANK_TIMEOUT_S);
  unsetenv("BRAID_INIT_TIMEOUT");
  sym_use_mode(SYM_THREADS, 0);
  munmap(done, sizeof(int));
  ck_assert_msg(failed == 0, "mode %s", sym_mode_names[mode]);
}
END_TEST

Suite* sym_suite(void) {
  Suite* s = suite_create("sym");
  TCase* tc = tcase_create("windows");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_windows, 0, SYM_NMODES);
  tcase_add_loop_test(tc, test_badargs, 0, 2);
  tcase_add_test(tc, test_wait_timeout);
  tcase_add_test(tc, test_memalloc_exit);
  suite_add_tcase(s, tc);
  tc = tcase_create("suspend");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_suspend, 0, SYM_NMODES);
  tcase_add_loop_test(tc, test_resume_absent, 0, 3);
  suite_add_tcase(s, tc);
  tc = tcase_create("grow");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_grow, 0, SYM_NMODES);
  suite_add_tcase(s, tc);
  return s;
}
