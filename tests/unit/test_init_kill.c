/*
 * test_init_kill.c - a rank that dies or hangs inside ncclCommInitRank, after the rendezvous
 * (which test_init_fail.c covers): every survivor fails well within the harness's 30 s (the
 * default BRAID_INIT_TIMEOUT is 300 s), naming the rank, and nothing of the dead rank stays
 * in /dev/shm. The victim is placed by BRAID_FAULT_INJECT (src/base/fault.h):
 *   - net: three fake nodes (NCCL_HOSTID), the victim dies before connecting its sends, so
 *     its successor waits to accept a network connection that never comes;
 *   - shm: one node, the victim dies right after creating its receive segment, before its
 *     peer learns the name;
 *   - stopped: the victim stops (SIGSTOP, sockets open) before init's last barrier, so only
 *     the barrier's deadline (BRAID_INIT_TIMEOUT=3) ends the survivors' wait.
 * Blame: every survivor names the victim first (the first "rank N (host" of its error), even
 * one that fails after another survivor left: a survivor tells the others why it failed before
 * it leaves (core/blame.c), so its departure is not taken for the first death.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"

#define NRANKS 3
#define VICTIM 1
#define HARNESS_TIMEOUT_S 30

struct kill_case {
  const char* name;
  const char* fault; /* BRAID_FAULT_INJECT of the victim */
  int fake_nodes;    /* one NCCL_HOSTID per rank: network connections */
  const char* init_timeout;
};

static const struct kill_case cases[] = {
    {"net, dies before connecting", "bootstrap.recv#1:kill", 1, NULL},
    {"shm, dies after creating its receive segment", "bootstrap.send#2:kill", 0, NULL},
    {"stops before the last barrier", "init.barrier:stop", 0, "3"},
};

/* Shared by the rank processes: the victim's pid, survivors done. */
struct shared {
  volatile int victim_pid;
  volatile int done;
  volatile int named_victim; /* survivors whose error names the victim first */
};
static struct shared* sh;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int body(struct harness_rank* r) {
  const struct kill_case* k = r->arg;
  char host[32];
  setenv("NCCL_MAX_NCHANNELS", "1", 1);
  if (k->fake_nodes) {
    snprintf(host, sizeof(host), "kill-node-%d", r->rank);
    setenv("NCCL_HOSTID", host, 1);
  }
  if (k->init_timeout != NULL) setenv("BRAID_INIT_TIMEOUT", k->init_timeout, 1);
  if (r->rank == VICTIM) {
    sh->victim_pid = (int)getpid();
    setenv("BRAID_FAULT_INJECT", k->fault, 1);
  }
  ncclResetDebugInit();
  ncclComm_t comm = NULL;
  double t0 = now_s();
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  double waited = now_s() - t0;
  /* the last survivor lets a stopped victim go */
  if (__atomic_add_fetch(&sh->done, 1, __ATOMIC_SEQ_CST) == NRANKS - 1 && sh->victim_pid > 0)
    kill(sh->victim_pid, SIGKILL);
  REXPECT(r, r->rank != VICTIM, "the victim returned from init (%d)", res);
  if (res == ncclSuccess) ncclCommDestroy(comm);
  REXPECT(r, res != ncclSuccess, "init succeeded although rank %d died", VICTIM);
  const char* e = ncclGetLastError(NULL);
  printf("%s: rank %d failed after %.2f s: %s\n", k->name, r->rank, waited, e);
  int named = -1;
  const char* first = NULL;
  for (int q = 0; q < r->nranks; q++) {
    char who[32];
    snprintf(who, sizeof(who), "rank %d (host", q);
    const char* at = q != r->rank ? strstr(e, who) : NULL;
    if (at != NULL && (first == NULL || at < first)) {
      first = at;
      named = q;
    }
  }
  REXPECT(r, named >= 0, "rank %d: the last error names no peer: %s", r->rank, e);
  REXPECT(r, named == VICTIM, "rank %d: the last error blames rank %d, not the victim %d: %s", r->rank, named, VICTIM,
          e);
  if (named == VICTIM) __atomic_add_fetch(&sh->named_victim, 1, __ATOMIC_SEQ_CST);
  return 0;
}

/* Entries of /dev/shm made by process `pid` (braid names them braid-<pid>-...). */
static int shm_of(int pid) {
  char prefix[32];
  int n = 0;
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return 0;
  snprintf(prefix, sizeof(prefix), "braid-%d-", pid);
  for (struct dirent* e; (e = readdir(d)) != NULL;) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

START_TEST(test_kill_in_init) {
  const struct kill_case* k = &cases[_i];
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(sh, MAP_FAILED);
  memset(sh, 0, sizeof(*sh));
  /* the victim is killed (or stopped, then killed): it alone may count as failed */
  int failed = harness_run(NRANKS, HARNESS_PROCS, body, (void*)k, HARNESS_TIMEOUT_S);
  int left = shm_of(sh->victim_pid);
  ck_assert_msg(failed == 1, "%s: %d ranks failed (the victim and %d survivors)", k->name, failed, failed - 1);
  ck_assert_msg(left == 0, "%s: the dead rank left %d segments in /dev/shm", k->name, left);
  ck_assert_msg(sh->named_victim == NRANKS - 1, "%s: %d of %d survivors named rank %d first", k->name, sh->named_victim,
                NRANKS - 1, VICTIM);
  munmap(sh, sizeof(*sh));
}
END_TEST

Suite* init_kill_suite(void);
Suite* init_kill_suite(void) {
  Suite* s = suite_create("init_kill");
  TCase* tc = tcase_create("kill");
  tcase_set_timeout(tc, 2 * HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_kill_in_init, 0, sizeof(cases) / sizeof(cases[0]));
  suite_add_tcase(s, tc);
  return s;
}
