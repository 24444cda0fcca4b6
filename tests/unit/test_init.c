/*
 * test_init.c - the communicator lifecycle through the public API (src/core/init.c, init_api.c,
 * split.c, comm.c, group.c, bootstrap*.c), the cases that should work:
 *   - 1..16 ranks as threads, as processes and as processes of two threads: ncclCommInitRank,
 *     the queries agree, an allreduce of one int is right, finalize and destroy succeed;
 *   - ncclCommInitAll (1, 2, 4, 8 ranks) driven by one thread inside a group;
 *   - ncclCommInitRank of several ranks inside one group from one thread (nccl-tests -g);
 *   - 100 init/destroy cycles with no leaked descriptors, threads or /dev/shm segments, for
 *     ranks as threads and as processes;
 *   - ncclCommSplit (colors, key order, NCCL_SPLIT_NOCOLOR, config NULL inherits);
 *   - ncclCommShrink (parent order kept; also with a dead excluded rank and NCCL_SHRINK_ABORT);
 *   - non-blocking init (config.blocking = 0) polled through ncclCommGetAsyncError;
 *   - misuse of communicators that exist: calls after destroy (braid keeps a registry of live
 *     communicators, so a dangling handle is refused), finalize twice, destroy/abort NULL, NULL
 *     outputs, bad split and shrink arguments.
 * Failures of init itself (abort, strangers, timeouts, bad init input) are in test_init_fail.c.
 *
 * Rank bodies never call ck_assert (they may be threads or forked processes): they report
 * with harness_fail and return non-zero; the test function asserts on harness_run's result.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"

#define HARNESS_TIMEOUT_S 60 /* processes killed by the harness after this */
#define TCASE_TIMEOUT_S 120  /* a hang fails the test instead of stalling the run */

/* ---- helpers for rank bodies ---------------------------------------------------------------- */

/* Poll a non-blocking communicator until it leaves ncclInProgress; returns where it ended. */
static ncclResult_t wait_async(ncclComm_t comm) {
  for (;;) {
    ncclResult_t state;
    ncclResult_t res = ncclCommGetAsyncError(comm, &state);
    if (res != ncclSuccess) return res;
    if (state != ncclInProgress) return state;
    usleep(1000);
  }
}

/* A call on a non-blocking communicator may answer ncclInProgress: then poll. */
static ncclResult_t settle_call(ncclComm_t comm, ncclResult_t res) {
  return res == ncclInProgress ? wait_async(comm) : res;
}

/* Count, user rank and device agree with what the rank asked for. */
static int check_queries(struct harness_rank* r, ncclComm_t comm, int rank, int nranks) {
  int count = -1, user_rank = -1, dev = -2, dev2 = -3;
  RCHECK(r, ncclCommCount(comm, &count));
  RCHECK(r, ncclCommUserRank(comm, &user_rank));
  RCHECK(r, ncclCommCuDevice(comm, &dev));
  RCHECK(r, ncclCommCuDevice(comm, &dev2));
  REXPECT(r, count == nranks, "ncclCommCount gave %d, expected %d", count, nranks);
  REXPECT(r, user_rank == rank, "ncclCommUserRank gave %d, expected %d", user_rank, rank);
  /* Host mode has no device (-1); with a GPU it is a device ordinal. */
  REXPECT(r, dev >= -1 && dev == dev2, "ncclCommCuDevice gave %d then %d", dev, dev2);
  return 0;
}

/* Allreduce (sum) of one int: this rank gives `mine`, everyone must get `expected`. */
static int check_allreduce(struct harness_rank* r, ncclComm_t comm, int mine, int expected) {
  int send = mine, recv = -12345;
  RCHECK(r, settle_call(comm, ncclAllReduce(&send, &recv, 1, ncclInt32, ncclSum, comm, NULL)));
  REXPECT(r, recv == expected, "allreduce gave %d, expected %d (sent %d)", recv, expected, send);
  REXPECT(r, send == mine, "allreduce changed its send buffer to %d", send);
  return 0;
}

/* Allgather of one int: out[i] = what rank i gave. */
static int check_allgather(struct harness_rank* r, ncclComm_t comm, int mine, const int* expected, int n) {
  int got[64];
  for (int i = 0; i < n; i++) got[i] = -12345;
  RCHECK(r, settle_call(comm, ncclAllGather(&mine, got, 1, ncclInt32, comm, NULL)));
  for (int i = 0; i < n; i++)
    REXPECT(r, got[i] == expected[i], "allgather slot %d holds %d, expected %d", i, got[i], expected[i]);
  return 0;
}

static int sum_below(int n) {
  return n * (n - 1) / 2;
}

/* Wait (bounded) until this process's descriptors, threads and braid /dev/shm entries are back
 * to at most the baseline: detached threads (a bootstrap root) finish shortly after the last
 * communicator is gone. Returns 1 when all are back. */
static int settle_counts(int fds0, int threads0, int shm0, int* fds_p, int* threads_p, int* shm_p) {
  for (int i = 0; i < 1000; i++) {
    *fds_p = harness_count_fds();
    *threads_p = harness_count_threads();
    *shm_p = shm0 >= 0 ? harness_count_shm() : -1;
    if (*fds_p <= fds0 && *threads_p <= threads0 && *shm_p <= shm0) return 1;
    usleep(10000);
  }
  return 0;
}

/* ---- 1..16 ranks as threads, processes and pairs ------------------------------------------- */

#define MAX_RANKS 16
static const enum harness_mode modes[] = {HARNESS_THREADS, HARNESS_PROCS, HARNESS_PAIRS};
#define NMODES ((int)(sizeof(modes) / sizeof(modes[0])))

static int body_lifecycle(struct harness_rank* r) {
  ncclComm_t comm = NULL;
  ncclResult_t async = ncclInProgress;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  REXPECT(r, comm != NULL, "ncclCommInitRank succeeded but left the handle NULL");
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  REXPECT(r, async == ncclSuccess, "a blocking init finished with async error %d", (int)async);
  if (check_queries(r, comm, r->rank, r->nranks)) return 1;
  if (check_allreduce(r, comm, r->rank, sum_below(r->nranks))) return 1;
  RCHECK(r, ncclCommFinalize(comm));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_ranks) {
  enum harness_mode mode = modes[_i / MAX_RANKS];
  int nranks = _i % MAX_RANKS + 1;
  int failed = harness_run(nranks, mode, body_lifecycle, NULL, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d of %d ranks (%s) failed", failed, nranks, harness_mode_name(mode));
}
END_TEST

/* ---- ncclCommInitAll, one thread drives all ranks ------------------------------------------- */

static const int initall_sizes[] = {1, 2, 4, 8};

START_TEST(test_init_all) {
  int n = initall_sizes[_i];
  ncclComm_t comms[8];
  int send[8], recv[8];
  memset(comms, 0, sizeof(comms));
  ck_assert_int_eq(ncclCommInitAll(comms, n, NULL), ncclSuccess);
  for (int i = 0; i < n; i++) {
    int count = -1, rank = -1;
    ck_assert_ptr_nonnull(comms[i]);
    ck_assert_int_eq(ncclCommCount(comms[i], &count), ncclSuccess);
    ck_assert_int_eq(ncclCommUserRank(comms[i], &rank), ncclSuccess);
    ck_assert_int_eq(count, n);
    ck_assert_int_eq(rank, i);
    send[i] = 10 * i + 1;
    recv[i] = -1;
  }
  /* One thread, n ranks: only a group lets all of them progress together. */
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(ncclAllReduce(&send[i], &recv[i], 1, ncclInt32, ncclSum, comms[i], NULL), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++) ck_assert_int_eq(recv[i], 10 * sum_below(n) + n);
  for (int i = 0; i < n; i++) ck_assert_int_eq(ncclCommFinalize(comms[i]), ncclSuccess);
  for (int i = 0; i < n; i++) ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
}
END_TEST

/* ---- several ncclCommInitRank in one group from one thread (nccl-tests -g) ------------------ */

static const int group_sizes[] = {1, 2, 3, 4};

START_TEST(test_init_in_group) {
  int n = group_sizes[_i];
  ncclUniqueId id;
  ncclComm_t comms[4];
  int send[4], recv[4];
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) ck_assert_int_eq(ncclCommInitRank(&comms[i], n, id, i), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    int count = -1, rank = -1;
    ncclResult_t async = ncclInProgress;
    ck_assert_int_eq(ncclCommGetAsyncError(comms[i], &async), ncclSuccess);
    ck_assert_int_eq(async, ncclSuccess);
    ck_assert_int_eq(ncclCommCount(comms[i], &count), ncclSuccess);
    ck_assert_int_eq(ncclCommUserRank(comms[i], &rank), ncclSuccess);
    ck_assert_int_eq(count, n);
    ck_assert_int_eq(rank, i);
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    send[i] = i; /* buffers are read at ncclGroupEnd: each rank needs its own */
    recv[i] = -1;
    ck_assert_int_eq(ncclAllReduce(&send[i], &recv[i], 1, ncclInt32, ncclSum, comms[i], NULL), ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++) ck_assert_int_eq(recv[i], sum_below(n));
  for (int i = 0; i < n; i++) ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
}
END_TEST

/* ---- leaks over many cycles ----------------------------------------------------------------- */

#define LEAK_CYCLES_THREADS 100
#define LEAK_CYCLES_PROCS 100

static int body_one_cycle(struct harness_rank* r) {
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (check_allreduce(r, comm, r->rank + 1, sum_below(r->nranks) + r->nranks)) return 1;
  RCHECK(r, ncclCommFinalize(comm));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_leaks_threads) {
  int fds, threads, shm;
  /* One cycle first: what a process sets up once (the bootstrap interface, parameters, the
   * logger) is not a per-communicator leak. */
  ck_assert_int_eq(harness_run(2, HARNESS_THREADS, body_one_cycle, NULL, HARNESS_TIMEOUT_S), 0);
  /* With no communicator left, only this thread should remain (the first root exits soon). */
  settle_counts(1 << 30, 1, -1, &fds, &threads, &shm);
  int fds0 = harness_count_fds(), threads0 = harness_count_threads(), shm0 = harness_count_shm();
  for (int k = 0; k < LEAK_CYCLES_THREADS; k++)
    ck_assert_msg(harness_run(2, HARNESS_THREADS, body_one_cycle, NULL, HARNESS_TIMEOUT_S) == 0, "cycle %d failed", k);
  int ok = settle_counts(fds0, threads0, shm0, &fds, &threads, &shm);
  ck_assert_msg(ok, "after %d cycles: %d fds (was %d), %d threads (was %d), %d /dev/shm/braid-* (was %d)",
                LEAK_CYCLES_THREADS, fds, fds0, threads, threads0, shm, shm0);
}
END_TEST

/* Processes: each keeps making communicators; rank 0 makes the next id and broadcasts it over
 * the current communicator. Counted inside each process, before the first init and after the
 * last destroy. */
static int body_proc_cycles(struct harness_rank* r) {
  int fds0 = harness_count_fds(), threads0 = harness_count_threads(), fds, threads, shm;
  ncclUniqueId id = r->id;
  for (int k = 0; k < LEAK_CYCLES_PROCS; k++) {
    ncclComm_t comm;
    RCHECK(r, ncclCommInitRank(&comm, r->nranks, id, r->rank));
    if (check_allreduce(r, comm, k, k * r->nranks)) return 1;
    if (k + 1 < LEAK_CYCLES_PROCS) {
      if (r->rank == 0) RCHECK(r, ncclGetUniqueId(&id));
      RCHECK(r, ncclBroadcast(&id, &id, sizeof(id), ncclChar, 0, comm, NULL));
    }
    RCHECK(r, ncclCommFinalize(comm));
    RCHECK(r, ncclCommDestroy(comm));
  }
  int ok = settle_counts(fds0, threads0, -1, &fds, &threads, &shm);
  REXPECT(r, ok, "after %d cycles: %d fds (was %d), %d threads (was %d)", LEAK_CYCLES_PROCS, fds, fds0, threads,
          threads0);
  return 0;
}

START_TEST(test_leaks_procs) {
  int fds, threads, shm, shm0 = harness_count_shm();
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_proc_cycles, NULL, HARNESS_TIMEOUT_S), 0);
  int ok = settle_counts(1 << 30, 1 << 30, shm0, &fds, &threads, &shm);
  ck_assert_msg(ok, "%d /dev/shm/braid-* entries after the processes exited (was %d)", shm, shm0);
}
END_TEST

/* ---- ncclCommSplit -------------------------------------------------------------------------- */

#define SPLIT_RANKS 8
#define SPLIT_COLORS 3

/* Colors rank % 3, key -rank: each child orders its members by decreasing parent rank. Then
 * NCCL_SPLIT_NOCOLOR for ranks 1 and 5 (NULL child), the others keep parent order. */
static int body_split(struct harness_rank* r) {
  ncclComm_t parent, child;
  int n = r->nranks, color = r->rank % SPLIT_COLORS;
  RCHECK(r, ncclCommInitRank(&parent, n, r->id, r->rank));

  int members[SPLIT_RANKS], m = 0, myrank = -1, sum = 0;
  for (int q = n - 1; q >= 0; q--) {
    if (q % SPLIT_COLORS != color) continue;
    if (q == r->rank) myrank = m;
    members[m++] = q;
    sum += q;
  }
  child = NULL;
  RCHECK(r, ncclCommSplit(parent, color, -r->rank, &child, NULL));
  REXPECT(r, child != NULL, "ncclCommSplit with color %d gave NULL", color);
  if (check_queries(r, child, myrank, m)) return 1;
  if (check_allreduce(r, child, r->rank, sum)) return 1;
  if (check_allgather(r, child, r->rank, members, m)) return 1;
  RCHECK(r, ncclCommDestroy(child));

  int out = r->rank == 1 || r->rank == 5;
  m = 0, myrank = -1, sum = 0;
  for (int q = 0; q < n; q++) {
    if (q == 1 || q == 5) continue;
    if (q == r->rank) myrank = m;
    members[m++] = q;
    sum += q;
  }
  child = (ncclComm_t)(uintptr_t)0x1;
  RCHECK(r, ncclCommSplit(parent, out ? NCCL_SPLIT_NOCOLOR : 7, r->rank, &child, NULL));
  if (out) {
    REXPECT(r, child == NULL, "ncclCommSplit with NCCL_SPLIT_NOCOLOR gave %p, expected NULL", (void*)child);
  } else {
    REXPECT(r, child != NULL && child != (ncclComm_t)(uintptr_t)0x1, "ncclCommSplit gave no communicator");
    if (check_queries(r, child, myrank, m)) return 1;
    if (check_allgather(r, child, r->rank, members, m)) return 1;
    if (check_allreduce(r, child, r->rank, sum)) return 1;
    RCHECK(r, ncclCommDestroy(child));
  }
  /* The parent still works after its children are gone. */
  if (check_allreduce(r, parent, 1, n)) return 1;
  RCHECK(r, ncclCommDestroy(parent));
  return 0;
}

static const enum harness_mode split_modes[] = {HARNESS_THREADS, HARNESS_PROCS};

START_TEST(test_split) {
  enum harness_mode mode = split_modes[_i];
  int failed = harness_run(SPLIT_RANKS, mode, body_split, NULL, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d ranks (%s) failed", failed, harness_mode_name(mode));
}
END_TEST

/* config NULL inherits the parent's: from a non-blocking parent the child is non-blocking
 * (ncclCommSplit answers ncclInProgress; the only place this is observable through the API),
 * from a blocking parent it is blocking (ncclSuccess, usable at once). An explicit config wins. */
static int body_split_inherit(struct harness_rank* r) {
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER, bl = NCCL_CONFIG_INITIALIZER;
  ncclComm_t parent, child, child2;
  nb.blocking = 0;
  bl.blocking = 1;
  ncclResult_t res = ncclCommInitRankConfig(&parent, r->nranks, r->id, r->rank, &nb);
  REXPECT(r, res == ncclInProgress || res == ncclSuccess, "non-blocking init returned %d", (int)res);
  RCHECK(r, wait_async(parent));

  res = ncclCommSplit(parent, 0, r->rank, &child, NULL);
  REXPECT(r, res == ncclInProgress,
          "split of a non-blocking parent with config NULL returned %d, expected "
          "ncclInProgress (the child must inherit blocking = 0)",
          (int)res);
  RCHECK(r, wait_async(child));
  if (check_allreduce(r, child, r->rank, sum_below(r->nranks))) return 1;

  res = ncclCommSplit(child, 0, r->rank, &child2, &bl);
  REXPECT(r, res == ncclSuccess, "split with an explicit blocking config returned %d", (int)res);
  if (check_allreduce(r, child2, 2, 2 * r->nranks)) return 1;
  RCHECK(r, ncclCommDestroy(child2));

  /* A blocking parent (made with an explicit config) passes blocking = 1 on to a NULL config. */
  ncclComm_t bparent, bchild;
  RCHECK(r, ncclCommSplit(child, 0, r->rank, &bparent, &bl));
  res = ncclCommSplit(bparent, 0, -r->rank, &bchild, NULL);
  REXPECT(r, res == ncclSuccess, "split of a blocking parent with config NULL returned %d", (int)res);
  if (check_queries(r, bchild, r->nranks - 1 - r->rank, r->nranks)) return 1;
  if (check_allreduce(r, bchild, 3, 3 * r->nranks)) return 1;
  RCHECK(r, ncclCommDestroy(bchild));
  RCHECK(r, ncclCommDestroy(bparent));
  res = ncclCommFinalize(child);
  REXPECT(r, res == ncclSuccess || res == ncclInProgress, "finalize of a non-blocking child returned %d", (int)res);
  RCHECK(r, settle_call(child, res));
  RCHECK(r, ncclCommDestroy(child));
  RCHECK(r, ncclCommDestroy(parent));
  return 0;
}

START_TEST(test_split_inherit) {
  ck_assert_int_eq(harness_run(4, HARNESS_THREADS, body_split_inherit, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- ncclCommShrink ------------------------------------------------------------------------- */

#define SHRINK_RANKS 6
static const int shrink_excluded[] = {1, 4};
#define SHRINK_NEXCL ((int)(sizeof(shrink_excluded) / sizeof(shrink_excluded[0])))

static int is_excluded(int rank) {
  for (int i = 0; i < SHRINK_NEXCL; i++)
    if (shrink_excluded[i] == rank) return 1;
  return 0;
}

/* Ranks 1 and 4 are left out; they stay alive (and join a last allreduce on the parent) while
 * the others build and use the child, which keeps parent order. */
static int body_shrink(struct harness_rank* r) {
  ncclComm_t parent, child = NULL;
  int n = r->nranks, members[SHRINK_RANKS], m = 0, myrank = -1, sum = 0;
  RCHECK(r, ncclCommInitRank(&parent, n, r->id, r->rank));
  for (int q = 0; q < n; q++) {
    if (is_excluded(q)) continue;
    if (q == r->rank) myrank = m;
    members[m++] = q;
    sum += q;
  }
  if (!is_excluded(r->rank)) {
    int excl[SHRINK_NEXCL];
    memcpy(excl, shrink_excluded, sizeof(excl));
    RCHECK(r, ncclCommShrink(parent, excl, SHRINK_NEXCL, &child, NULL, NCCL_SHRINK_DEFAULT));
    REXPECT(r, child != NULL, "ncclCommShrink gave NULL");
    if (check_queries(r, child, myrank, m)) return 1;
    if (check_allgather(r, child, r->rank, members, m)) return 1;
    if (check_allreduce(r, child, r->rank, sum)) return 1;
  }
  if (check_allreduce(r, parent, 1, n)) return 1;
  if (child != NULL) RCHECK(r, ncclCommDestroy(child));
  RCHECK(r, ncclCommDestroy(parent));
  return 0;
}

START_TEST(test_shrink) {
  enum harness_mode mode = split_modes[_i];
  int failed = harness_run(SHRINK_RANKS, mode, body_shrink, NULL, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d ranks (%s) failed", failed, harness_mode_name(mode));
}
END_TEST

/* The last rank dies (its process exits without a word) after init; the survivors shrink it
 * away with NCCL_SHRINK_ABORT, use the child, and abort the parent. */
static int body_shrink_dead(struct harness_rank* r) {
  ncclComm_t parent, child = NULL;
  int n = r->nranks, dead = n - 1;
  RCHECK(r, ncclCommInitRank(&parent, n, r->id, r->rank));
  if (check_allreduce(r, parent, r->rank, sum_below(n))) return 1;
  if (r->rank == dead) _exit(0);
  RCHECK(r, ncclCommShrink(parent, &dead, 1, &child, NULL, NCCL_SHRINK_ABORT));
  REXPECT(r, child != NULL, "ncclCommShrink gave NULL");
  if (check_queries(r, child, r->rank, n - 1)) return 1;
  if (check_allreduce(r, child, r->rank, sum_below(n - 1))) return 1;
  RCHECK(r, ncclCommAbort(parent));
  if (check_allreduce(r, child, 1, n - 1)) return 1;
  RCHECK(r, ncclCommDestroy(child));
  return 0;
}

START_TEST(test_shrink_dead_rank) {
  ck_assert_int_eq(harness_run(4, HARNESS_PROCS, body_shrink_dead, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- non-blocking init ---------------------------------------------------------------------- */

static int body_nonblocking(struct harness_rank* r) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = NULL;
  config.blocking = 0;
  ncclResult_t res = ncclCommInitRankConfig(&comm, r->nranks, r->id, r->rank, &config);
  REXPECT(r, res == ncclInProgress || res == ncclSuccess, "non-blocking init returned %d (%s)", (int)res,
          ncclGetLastError(NULL));
  REXPECT(r, comm != NULL, "non-blocking init left the handle NULL");
  res = wait_async(comm);
  REXPECT(r, res == ncclSuccess, "non-blocking init ended in %d (%s)", (int)res, ncclGetLastError(NULL));
  if (check_queries(r, comm, r->rank, r->nranks)) return 1;
  if (check_allreduce(r, comm, r->rank, sum_below(r->nranks))) return 1;
  res = ncclCommFinalize(comm);
  REXPECT(r, res == ncclSuccess || res == ncclInProgress, "finalize returned %d", (int)res);
  RCHECK(r, settle_call(comm, res));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

static const struct {
  enum harness_mode mode;
  int nranks;
} nb_cases[] = {{HARNESS_THREADS, 1}, {HARNESS_THREADS, 4}, {HARNESS_PROCS, 3}, {HARNESS_PAIRS, 4}};

START_TEST(test_nonblocking) {
  int failed = harness_run(nb_cases[_i].nranks, nb_cases[_i].mode, body_nonblocking, NULL, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d of %d ranks (%s) failed", failed, nb_cases[_i].nranks,
                harness_mode_name(nb_cases[_i].mode));
}
END_TEST

/* ---- misuse of communicators that exist ------------------------------------------------------ */

/* The last error mentions `word` (the library must name the problem). */
#define ASSERT_LAST_ERROR_HAS(word)                                                                      \
  do {                                                                                                   \
    const char* e_ = ncclGetLastError(NULL);                                                             \
    ck_assert_msg(e_ != NULL && strstr(e_, (word)) != NULL, "last error \"%s\" does not mention \"%s\"", \
                  e_ ? e_ : "(null)", (word));                                                           \
  } while (0)

#define SENTINEL ((ncclComm_t)(uintptr_t)0xbad)

static int allreduce_ok(ncclComm_t comm, int mine, int expected) {
  int recv = -12345;
  return ncclAllReduce(&mine, &recv, 1, ncclInt32, ncclSum, comm, NULL) == ncclSuccess && recv == expected;
}

static ncclComm_t one_rank_comm(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ck_assert_int_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  ck_assert_ptr_nonnull(comm);
  return comm;
}

START_TEST(test_destroyed_comm) {
  ncclComm_t comm = one_rank_comm(), child = NULL;
  int v = -1, x = 1, y = 0;
  ncclResult_t state;
  ck_assert(allreduce_ok(comm, 5, 5));
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  /* The handle dangles; braid keeps a registry of live communicators, so this is defined. */
  ck_assert_int_eq(ncclCommCount(comm, &v), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("destroyed");
  ck_assert_int_eq(v, -1);
  ck_assert_int_eq(ncclCommUserRank(comm, &v), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommCuDevice(comm, &v), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommGetAsyncError(comm, &state), ncclInvalidArgument);
  ck_assert_int_eq(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommSplit(comm, 0, 0, &child, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommFinalize(comm), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommAbort(comm), ncclInvalidArgument);
  ck_assert_int_eq(y, 0);
}
END_TEST

START_TEST(test_finalize_twice) {
  ncclComm_t comm = one_rank_comm();
  ck_assert_int_eq(ncclCommFinalize(comm), ncclSuccess);
  ncclResult_t res = ncclCommFinalize(comm);
  ck_assert_msg(res != ncclSuccess && res != ncclInProgress, "second finalize returned %d", (int)res);
  ASSERT_LAST_ERROR_HAS("finalized");
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(NULL), ncclSuccess);
  ck_assert_int_eq(ncclCommAbort(NULL), ncclSuccess);
}
END_TEST

START_TEST(test_bad_query_args) {
  ncclComm_t comm = one_rank_comm();
  int v;
  ncclResult_t state;
  ck_assert_int_eq(ncclCommCount(NULL, &v), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("comm");
  ck_assert_int_eq(ncclCommCount(comm, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("count");
  ck_assert_int_eq(ncclCommUserRank(comm, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("rank");
  ck_assert_int_eq(ncclCommCuDevice(comm, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("device");
  ck_assert_int_eq(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommGetAsyncError(NULL, &state), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommFinalize(NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* Split and shrink arguments are checked before any rank waits for another. */
START_TEST(test_bad_split_args) {
  ncclComm_t comms[2], child = SENTINEL;
  ck_assert_int_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  ck_assert_int_eq(ncclCommSplit(comms[0], -5, 0, &child, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("color");
  ck_assert_int_eq(ncclCommSplit(comms[0], 0, 0, NULL, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("newcomm");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  int excl_range = 5, excl_self = 0, excl_peer = 1;
  ck_assert_int_eq(ncclCommShrink(comms[0], &excl_range, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("excludeRanksList");
  ck_assert_int_eq(ncclCommShrink(comms[0], &excl_self, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidUsage);
  ASSERT_LAST_ERROR_HAS("rank 0");
  ck_assert_int_eq(ncclCommShrink(comms[0], &excl_peer, 1, &child, NULL, 7), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("shrinkFlags");
  ck_assert_int_eq(ncclCommShrink(comms[0], NULL, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommShrink(comms[0], &excl_peer, 1, NULL, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  ck_assert_ptr_eq(child, SENTINEL);
  /* A child of one rank (rank 1 excluded), with a config that was never initialised. */
  ck_assert_int_eq(ncclCommShrink(comms[0], &excl_peer, 1, &child, &config, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("magic");
  ck_assert_int_eq(ncclCommShrink(comms[0], &excl_peer, 1, &child, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
  ck_assert(allreduce_ok(child, 4, 4));
  ck_assert_int_eq(ncclCommDestroy(child), ncclSuccess);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------------ */

#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static TCase* tcase(Suite* s, const char* name, int timeout_s) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  suite_add_tcase(s, tc);
  return tc;
}

Suite* init_suite(void) {
  Suite* s = suite_create("init");
  TCase* tc = tcase(s, "ranks", TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_ranks, 0, NMODES * MAX_RANKS);
  tc = tcase(s, "init_all", TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_init_all, 0, NELEMS(initall_sizes));
  tcase_add_loop_test(tc, test_init_in_group, 0, NELEMS(group_sizes));
  tc = tcase(s, "leaks", 300);
  tcase_add_test(tc, test_leaks_threads);
  tcase_add_test(tc, test_leaks_procs);
  tc = tcase(s, "split", TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_split, 0, NELEMS(split_modes));
  tcase_add_test(tc, test_split_inherit);
  tcase_add_loop_test(tc, test_shrink, 0, NELEMS(split_modes));
  tcase_add_test(tc, test_shrink_dead_rank);
  tc = tcase(s, "nonblocking", TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_nonblocking, 0, NELEMS(nb_cases));
  tc = tcase(s, "misuse", 60);
  tcase_add_test(tc, test_destroyed_comm);
  tcase_add_test(tc, test_finalize_twice);
  tcase_add_test(tc, test_bad_query_args);
  tcase_add_test(tc, test_bad_split_args);
  return s;
}
