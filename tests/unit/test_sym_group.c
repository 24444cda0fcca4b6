/*
 * test_sym_group.c - one-sided calls and window registrations inside ncclGroupStart/End run at
 * the group's end (src/core/sym/group_ops.c): a group that posts its wait before its put and
 * signal completes; registrations in a group give valid windows; one thread holding every rank
 * (ncclCommInitAll) registers, puts and waits on all of them in single groups; bad arguments
 * fail the call itself; a communicator with queued calls cannot be destroyed; ncclDevCommCreate
 * in a group still makes its resource window at the call.
 * Ranks as threads, processes and fake nodes (the remote path).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "harness.h"
#include "nccl.h"
#include "nccl_device.h"

#define RANK_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 300
#define NRANKS 3
#define BYTES 256

enum { G_THREADS = 0, G_PROCS, G_FAKE_NODES, G_NMODES };
static const char* const g_mode_names[] = {"threads", "procs", "fake-nodes"};
static const enum harness_mode g_harness[] = {HARNESS_THREADS, HARNESS_PROCS, HARNESS_PROCS};

static unsigned char pattern(int origin, int round, size_t i) {
  return (unsigned char)(origin * 37 + round * 11 + i);
}

/* Inside one group: wait for the previous rank's put, then put to the next rank. Executed at
 * the call this blocks forever (every rank waits before anyone puts). */
static int ring_round(struct harness_rank* r, ncclComm_t comm, ncclWindow_t win, const unsigned char* wbuf,
                      unsigned char* src, int round) {
  int next = (r->rank + 1) % r->nranks, prev = (r->rank + r->nranks - 1) % r->nranks;
  for (size_t i = 0; i < BYTES; i++) src[i] = pattern(r->rank, round, i);
  ncclWaitSignalDesc_t d = {1, prev, 0, 0};
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
  d.peer = -1; /* the group keeps its own copy of the descriptors */
  RCHECK(r, ncclPutSignal(src, BYTES, ncclUint8, next, win, 0, 0, 0, 0, comm, NULL));
  REXPECT(r, ncclCommWindowDeregister(comm, win) == ncclInvalidUsage, "deregistered with a put queued on it");
  RCHECK(r, ncclGroupEnd());
  for (size_t i = 0; i < BYTES; i++)
    REXPECT(r, wbuf[i] == pattern(prev, round, i), "round %d: byte %zu is %u, expected %u", round, i, wbuf[i],
            pattern(prev, round, i));
  RCHECK(r, ncclAllReduce(src, src, 1, ncclUint8, ncclSum, comm, NULL)); /* all checked before the next round */
  return 0;
}

static int body_group(struct harness_rank* r) {
  const int* mode = r->arg;
  ncclComm_t comm;
  if (*mode == G_FAKE_NODES) {
    char id[48];
    snprintf(id, sizeof(id), "braid-symg-node-%d", r->rank);
    setenv("NCCL_HOSTID", id, 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    braid_param_reload();
  }
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  unsigned char *wbuf, *wbuf2, *src;
  RCHECK(r, ncclMemAlloc((void**)&wbuf, BYTES));
  RCHECK(r, ncclMemAlloc((void**)&wbuf2, BYTES));
  RCHECK(r, ncclMemAlloc((void**)&src, BYTES));
  ncclWindow_t win = NULL, win2 = NULL;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclCommWindowRegister(comm, wbuf, BYTES, &win, NCCL_WIN_COLL_SYMMETRIC));
  RCHECK(r, ncclCommWindowRegister(comm, wbuf2, BYTES, &win2, 0));
  REXPECT(r, win == NULL && win2 == NULL, "a registration in a group ran before ncclGroupEnd");
  /* A bad argument fails the call itself, not the group. */
  REXPECT(r, ncclSignal(r->nranks, 0, 0, 0, comm, NULL) == ncclInvalidArgument, "bad peer queued");
  REXPECT(r, ncclCommDestroy(comm) == ncclInvalidUsage, "destroyed with registrations queued");
  RCHECK(r, ncclGroupEnd());
  REXPECT(r, win != NULL && win2 != NULL, "no windows after ncclGroupEnd");
  void* user = NULL;
  RCHECK(r, ncclWinGetUserPtr(comm, win2, &user));
  REXPECT(r, user == wbuf2, "second window's user pointer %p, registered %p", user, (void*)wbuf2);
  for (int round = 0; round < 2; round++)
    if (ring_round(r, comm, win, wbuf, src, round)) return 1;
  /* Signals without data, waited for in the same group. */
  ncclWaitSignalDesc_t d = {2, (r->rank + r->nranks - 1) % r->nranks, 1, 0};
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclWaitSignal(1, &d, comm, NULL));
  RCHECK(r, ncclSignal((r->rank + 1) % r->nranks, 1, 0, 0, comm, NULL));
  RCHECK(r, ncclSignal((r->rank + 1) % r->nranks, 1, 0, 0, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  /* ncclDevCommCreate in a group registers its resource window at the call. */
  ncclDevCommRequirements_t q = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm_t dc;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclDevCommCreate(comm, &q, &dc));
  RCHECK(r, ncclGroupEnd());
  REXPECT(r, dc.resourceWindow != NULL, "ncclDevCommCreate in a group left no resource window");
  RCHECK(r, ncclDevCommDestroy(comm, &dc));
  RCHECK(r, ncclCommWindowDeregister(comm, win2));
  RCHECK(r, ncclCommWindowDeregister(comm, win));
  RCHECK(r, ncclAllReduce(src, src, 1, ncclUint8, ncclSum, comm, NULL)); /* nobody frees under a peer */
  RCHECK(r, ncclMemFree(src));
  RCHECK(r, ncclMemFree(wbuf2));
  RCHECK(r, ncclMemFree(wbuf));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_group_ops) {
  int mode = _i;
  unsetenv("NCCL_HOSTID");
  braid_param_reload();
  ck_assert_msg(harness_run(NRANKS, g_harness[mode], body_group, &mode, RANK_TIMEOUT_S) == 0, "mode %s",
                g_mode_names[mode]);
}
END_TEST

/* One thread, every rank (ncclCommInitAll): registrations of several communicators in one
 * group (their allgathers must progress together), then every rank's wait and put in one. */
START_TEST(test_group_one_thread) {
  ncclComm_t comms[NRANKS];
  unsigned char *wbuf[NRANKS], *src[NRANKS];
  ncclWindow_t win[NRANKS];
  ck_assert_int_eq(ncclCommInitAll(comms, NRANKS, NULL), ncclSuccess);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < NRANKS; i++) {
    ck_assert_int_eq(ncclMemAlloc((void**)&wbuf[i], BYTES), ncclSuccess);
    ck_assert_int_eq(ncclMemAlloc((void**)&src[i], BYTES), ncclSuccess);
    ck_assert_int_eq(ncclCommWindowRegister(comms[i], wbuf[i], BYTES, &win[i], NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < NRANKS; i++) {
    ncclWaitSignalDesc_t d = {1, (i + NRANKS - 1) % NRANKS, 0, 0};
    ck_assert_int_eq(ncclWaitSignal(1, &d, comms[i], NULL), ncclSuccess);
  }
  for (int i = 0; i < NRANKS; i++) {
    for (size_t k = 0; k < BYTES; k++) src[i][k] = pattern(i, 5, k);
    ck_assert_int_eq(ncclPutSignal(src[i], BYTES, ncclUint8, (i + 1) % NRANKS, win[i], 0, 0, 0, 0, comms[i], NULL),
                     ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < NRANKS; i++)
    for (size_t k = 0; k < BYTES; k++)
      ck_assert_msg(wbuf[i][k] == pattern((i + NRANKS - 1) % NRANKS, 5, k), "rank %d byte %zu is %u", i, k, wbuf[i][k]);
  for (int i = 0; i < NRANKS; i++) {
    ck_assert_int_eq(ncclCommWindowDeregister(comms[i], win[i]), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
    ck_assert_int_eq(ncclMemFree(src[i]), ncclSuccess);
    ck_assert_int_eq(ncclMemFree(wbuf[i]), ncclSuccess);
  }
}
END_TEST

Suite* sym_group_suite(void) {
  Suite* s = suite_create("sym_group");
  TCase* tc = tcase_create("sym_group");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_group_ops, 0, G_NMODES);
  tcase_add_test(tc, test_group_one_thread);
  suite_add_tcase(s, tc);
  return s;
}
