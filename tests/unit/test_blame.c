/*
 * test_blame.c - issue 16 item 3: the right rank is blamed. Four ranks on fake nodes
 * (NCCL_HOSTID), a victim killed (SIGKILL) in the middle of a large all-reduce; the survivors
 * leave as soon as their call fails (no ncclCommAbort, no grace period: a survivor that exits
 * after its own error is a dead peer to a slower one). Every survivor must name the victim
 * first ("rank N (host" earliest in ncclGetLastError): the survivors tell each other why they
 * failed (core/blame.c), so a slower survivor follows a departed survivor's notice to the
 * victim instead of blaming the survivor. Rows: one rank per node (sockets only), two per node
 * (shared memory inside nodes, the watchdog sees local deaths), victims at both ends.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "harness.h"
#include "nccl.h"

#define NRANKS 4
#define HARNESS_TIMEOUT_S 90

struct blame_case {
  int victim;
  int per_node; /* ranks per fake node */
  const char* shm_disable;
};

static const struct blame_case cases[] = {
    {1, 1, "1"}, {2, 1, "1"}, {0, 1, "1"}, {1, 2, "0"}, {3, 2, "0"},
};

static void* suicide(void* arg) {
  usleep(30000);
  raise(SIGKILL);
  return NULL;
}

/* The rank other than self whose "rank N (host" comes first in msg, or -1. */
static int first_named(const char* msg, int self, int nranks) {
  const char* first = NULL;
  int named = -1;
  for (int q = 0; q < nranks; q++) {
    char who[32];
    snprintf(who, sizeof(who), "rank %d (host", q);
    const char* at = q != self ? strstr(msg, who) : NULL;
    if (at != NULL && (first == NULL || at < first)) {
      first = at;
      named = q;
    }
  }
  return named;
}

static int body(struct harness_rank* r) {
  const struct blame_case* k = r->arg;
  size_t count = (8u << 20) / sizeof(float) * 4;
  char id[48];
  ncclComm_t comm;
  snprintf(id, sizeof(id), "blame-node-%d", r->rank / k->per_node);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SHM_DISABLE", k->shm_disable, 1);
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  braid_param_reload();
  float* buf = calloc(count, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL)); /* everyone is up */
  if (r->rank == k->victim) {
    pthread_t t;
    pthread_create(&t, NULL, suicide, NULL);
  }
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 1000 && res == ncclSuccess; i++)
    res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  if (r->rank == k->victim) pause();
  const char* msg = ncclGetLastError(comm);
  printf("victim %d, %d per node: rank %d: %s\n", k->victim, k->per_node, r->rank, msg);
  REXPECT(r, res != ncclSuccess, "1000 all-reduces succeeded with rank %d killed", k->victim);
  int named = first_named(msg, r->rank, r->nranks);
  REXPECT(r, named == k->victim, "rank %d blames rank %d, not the killed rank %d: %s", r->rank, named, k->victim, msg);
  fflush(stdout);
  _exit(0); /* at once: a slower survivor must not take this one for the first death */
}

START_TEST(test_blame_kill) {
  const struct blame_case* k = &cases[_i];
  int failed = harness_run(NRANKS, HARNESS_PROCS, body, (void*)k, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 1, "victim %d, %d ranks per node: %d processes failed (only the victim should)", k->victim,
                k->per_node, failed);
}
END_TEST

Suite* blame_suite(void);
Suite* blame_suite(void) {
  Suite* s = suite_create("blame");
  TCase* tc = tcase_create("kill");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 30);
  tcase_add_loop_test(tc, test_blame_kill, 0, sizeof(cases) / sizeof(cases[0]));
  suite_add_tcase(s, tc);
  return s;
}
