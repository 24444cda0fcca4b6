/*
 * test_shm_direct.c - the shm transport's direct path (transport/shm.c, kernels/direct.h):
 * receivers copy large steps straight out of the sender's buffer (process_vm_readv between
 * processes, plain pointers between threads) instead of through the FIFO.
 *
 * Every case runs all-reduce (out of place and in place), all-gather, reduce-scatter,
 * broadcast, reduce, all-to-all and send/recv on 2 and 3 ranks (in-place all-reduce with ON is
 * where two ranks' next writes overlap what they sent each other: kernels/direct.h fetches first),
 * sizes from below to well above one FIFO slot with odd counts, exact float data, under
 * BRAID_SHM_DIRECT=AUTO, ON (every Simple step by pointer) and OFF, and with cross-memory
 * attach denied by a seccomp filter (deny_cma.h). Besides the results, the INFO log must show
 * which path each connection took ("via SHM/shared memory/CMA", "direct pointer/read") and,
 * when denied, the fallback said exactly once per process.
 */
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deny_cma.h"
#include "harness.h"
#include "nccl.h"
#include "refdata.h"

#define RANK_TIMEOUT_S 240
#define TCASE_TIMEOUT_S 300

struct dcase {
  const char* mode; /* BRAID_SHM_DIRECT */
  int deny;         /* seccomp: process_vm_readv fails with EPERM */
  int nranks;
  enum harness_mode hmode;
  const char* env; /* more of it, or NULL */
};

static const size_t counts[] = {1000, 65537, 1048579};

static float val(int rank, size_t i) {
  return (float)((rank + 1) * (int)(i % 97 + 1));
}

/* 0 when buf[0..n) == the value of `rank` shifted by `off` (data of that rank at index off+i),
 * or, with sum_of > 0, the sum of all `sum_of` ranks' values. */
static int check(const struct harness_rank* r, const char* what, const float* buf, size_t n, int rank, size_t off,
                 int sum_of) {
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    if (sum_of > 0)
      for (int k = 0; k < sum_of; k++) want += val(k, off + i);
    else
      want = val(rank, off + i);
    if (buf[i] != want) return harness_fail(r, "%s: element %zu is %g, want %g", what, i, buf[i], want);
  }
  return 0;
}

static void fill(float* buf, size_t n, int rank, size_t off) {
  for (size_t i = 0; i < n; i++) buf[i] = val(rank, off + i);
}

static int run_count(struct harness_rank* r, ncclComm_t comm, size_t c) {
  int me = r->rank, n = r->nranks, next = (me + 1) % n, prev = (me + n - 1) % n;
  float* a = malloc(sizeof(float) * c * (size_t)n);
  float* b = malloc(sizeof(float) * c * (size_t)n);
  REXPECT(r, a && b, "out of memory");
  int bad = 0;
  fill(a, c, me, 0);
  RCHECK(r, ncclAllReduce(a, b, c, ncclFloat, ncclSum, comm, NULL));
  bad |= check(r, "all-reduce", b, c, 0, 0, n);
  RCHECK(r, ncclAllReduce(a, a, c, ncclFloat, ncclSum, comm, NULL));
  bad |= check(r, "all-reduce in place", a, c, 0, 0, n);
  fill(a, c, me, 0);
  RCHECK(r, ncclAllGather(a, b, c, ncclFloat, comm, NULL));
  for (int k = 0; k < n && !bad; k++) bad |= check(r, "all-gather", b + (size_t)k * c, c, k, 0, 0);
  fill(b, c * (size_t)n, me, 0);
  RCHECK(r, ncclReduceScatter(b, a, c, ncclFloat, ncclSum, comm, NULL));
  bad |= check(r, "reduce-scatter", a, c, 0, (size_t)me * c, n);
  fill(a, c, me, 0);
  RCHECK(r, ncclBroadcast(a, b, c, ncclFloat, n - 1, comm, NULL));
  bad |= check(r, "broadcast", b, c, n - 1, 0, 0);
  RCHECK(r, ncclReduce(a, b, c, ncclFloat, ncclSum, 0, comm, NULL));
  if (me == 0) bad |= check(r, "reduce", b, c, 0, 0, n);
  for (int k = 0; k < n; k++) fill(a + (size_t)k * c, c, me, (size_t)k * c);
  RCHECK(r, ncclAlltoAll(a, b, c, ncclFloat, comm, NULL));
  for (int k = 0; k < n && !bad; k++) bad |= check(r, "all-to-all", b + (size_t)k * c, c, k, (size_t)me * c, 0);
  fill(a, c, me, 0);
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(a, c, ncclFloat, next, comm, NULL));
  RCHECK(r, ncclRecv(b, c, ncclFloat, prev, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  bad |= check(r, "send/recv", b, c, prev, 0, 0);
  free(a);
  free(b);
  return bad;
}

static int body(struct harness_rank* r) {
  const struct dcase* k = r->arg;
  if (k->deny && deny_cma() != 0) return harness_fail(r, "cannot install the seccomp filter");
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int bad = 0;
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]) && !bad; i++) bad = run_count(r, comm, counts[i]);
  RCHECK(r, ncclCommDestroy(comm));
  return bad;
}

static char tmpdir[64];

/* Log lines (every rank's, in files under tmpdir) containing `needle`: their number, how many
 * processes wrote them (the pid in "host:pid:tid"), and the most any one process wrote. */
static int count_logs(const char* needle, int* procs, int* most) {
  int total = 0, pids[64], per[64], np = 0;
  char cmd[160], line[1024];
  snprintf(cmd, sizeof(cmd), "cat %s/log.* 2>/dev/null", tmpdir);
  FILE* f = popen(cmd, "r");
  while (f != NULL && fgets(line, sizeof(line), f)) {
    if (strstr(line, needle) == NULL) continue;
    total++;
    const char* c = strchr(line, ':');
    int pid = c ? atoi(c + 1) : 0, j = 0;
    while (j < np && pids[j] != pid) j++;
    if (j == np && np < 64) pids[np] = pid, per[np++] = 0;
    if (j < np) per[j]++;
  }
  if (f != NULL) pclose(f);
  *procs = np;
  *most = 0;
  for (int j = 0; j < np; j++)
    if (per[j] > *most) *most = per[j];
  return total;
}

static const struct dcase cases[] = {
    {"AUTO", 0, 2, HARNESS_PROCS, NULL},
    {"ON", 0, 2, HARNESS_PROCS, NULL},
    {"OFF", 0, 2, HARNESS_PROCS, NULL},
    {"AUTO", 1, 2, HARNESS_PROCS, NULL},
    {"ON", 1, 3, HARNESS_PROCS, NULL},
    {"AUTO", 0, 3, HARNESS_PROCS, NULL},
    {"ON", 0, 3, HARNESS_PROCS, NULL},
    {"AUTO", 0, 2, HARNESS_THREADS, NULL},
    {"ON", 0, 3, HARNESS_THREADS, NULL},
    {"OFF", 0, 2, HARNESS_THREADS, NULL},
    /* a chunk size the user set: send/recv steps keep it (no whole-slot steps) */
    {"AUTO", 0, 2, HARNESS_PROCS, "NCCL_P2P_PCI_CHUNKSIZE=131072"},
};

START_TEST(test_direct) {
  const struct dcase* k = &cases[_i];
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/braid-shmdirect-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  char env[512];
  snprintf(env, sizeof(env),
           "BRAID_SHM_DIRECT=%s NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,SHM NCCL_DEBUG_FILE=%s/log.%%p "
           "BRAID_HOST_MODE=1",
           k->mode, tmpdir);
  ref_env_apply(env);
  if (k->env) ref_env_apply(k->env);
  ncclResetDebugInit();
  int failed = harness_run(k->nranks, k->hmode, body, (void*)k, RANK_TIMEOUT_S);
  int procs, most;
  int cma = count_logs("via SHM/shared memory/CMA", &procs, &most);
  int pointer = count_logs("via SHM/direct pointer/read", &procs, &most);
  int whole = count_logs("send/recv steps sent by pointer take whole slots", &procs, &most), whole_procs = procs;
  int told = count_logs("cross-memory attach to", &procs, &most);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_P2P_PCI_CHUNKSIZE");
  ref_env_apply("BRAID_SHM_DIRECT=AUTO");
  ncclResetDebugInit();
  ck_assert_msg(failed == 0, "%s%s, %d ranks (%s): %d rank(s) failed", k->mode, k->deny ? " denied" : "", k->nranks,
                harness_mode_name(k->hmode), failed);
  int on = strcmp(k->mode, "OFF") != 0;
  /* Whole-slot send/recv steps: on every connection that copies by pointer (said once per
   * process), unless the user set the chunk size. */
  int want_whole = on && !k->deny && k->env == NULL;
  ck_assert_msg(
      want_whole ? whole_procs == (k->hmode == HARNESS_THREADS ? 1 : k->nranks) && whole == whole_procs : whole == 0,
      "%s%s%s: whole-slot send/recv steps said %d times by %d processes", k->mode, k->deny ? " denied" : "",
      k->env ? " (chunk size set)" : "", whole, whole_procs);
  if (k->hmode == HARNESS_THREADS) {
    ck_assert_msg(on ? pointer > 0 : pointer == 0, "%s: %d direct-pointer connections", k->mode, pointer);
    ck_assert_int_eq(cma, 0);
  } else if (k->deny) {
    ck_assert_msg(cma == 0, "CMA denied, yet %d connections took it", cma);
    ck_assert_msg(procs == k->nranks && most == 1,
                  "the fallback must be said once per process: %d lines from %d processes", told, procs);
  } else {
    ck_assert_msg(on ? cma > 0 : cma == 0, "%s: %d CMA connections", k->mode, cma);
    ck_assert_int_eq(told, 0);
  }
}
END_TEST

Suite* shm_direct_suite(void) {
  Suite* s = suite_create("shm_direct");
  TCase* tc = tcase_create("paths");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_direct, 0, (int)(sizeof(cases) / sizeof(cases[0])));
  suite_add_tcase(s, tc);
  return s;
}
