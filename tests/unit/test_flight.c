/*
 * test_flight.c - the flight recorder (core/flight.c) and the BRAID_TIMEOUT message that
 * names the rank the whole communicator waits for (core/blame.c braid_blame_wait_chain):
 *   timeout  three ranks, rank 0 skips the fourth all-reduce, BRAID_TIMEOUT=2: ranks 1 and 2
 *            dump their record on stderr (three calls done, the fourth running, the
 *            connections' counters) and both errors say the communicator waits for rank 0,
 *            although rank 2 itself waits for rank 1 (its ring predecessor);
 *   sigusr1  SIGUSR1 dumps every communicator of the process into
 *            $TMPDIR/braid-flight-<pid>.txt (what braid-info --dump PID prints);
 *   braid_info  `braid-info --dump PID` (next to this runner) on a rank's own process prints
 *            that dump: its calls, done;
 *   timeout_lone  the same for the lone one-line all-reduce (core/sym/lsa.c, no plan): rank 1
 *            skips the fourth 8-byte call; rank 0's dump shows three calls done with 0 steps
 *            and the fourth running with 0 steps so far ("0+": it moves none on connections,
 *            and its entry says so without reading their counters).
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/param.h"
#include "harness.h"
#include "nccl.h"

#define HARNESS_TIMEOUT_S 60

static char* slurp(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return NULL;
  char* buf = calloc(1, 1 << 20);
  if (buf != NULL) (void)!fread(buf, 1, (1 << 20) - 1, f);
  fclose(f);
  return buf;
}

static int count_of(const char* text, const char* what) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
  return n;
}

/* Rows of the dump's call table in `state` whose steps column (host mode: the steps its group
 * moved; running: so far, with a '+') is at least `min`. */
static int rows_with_steps(const char* dump, const char* state, long long min) {
  int rows = 0;
  for (const char* line = dump; line != NULL && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char fn[32], type[32], op[32], root[32], st[32], steps[32];
    unsigned long long id;
    size_t count;
    int nch;
    if (sscanf(line, " %llu %31s %zu %31s %31s %31s %d %31s %31s", &id, fn, &count, type, op, root, &nch, st, steps) !=
        9)
      continue;
    if (strcmp(st, state) == 0 && steps[0] != '-' && atoll(steps) >= min) rows++;
  }
  return rows;
}

static volatile int* others_done; /* shared: ranks 1 and 2 finished the failing call */

static int body_timeout(struct harness_rank* r) {
  ncclComm_t comm;
  char path[64];
  float* buf = calloc(1024, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  setenv("BRAID_TIMEOUT", "2", 1);
  setenv("NCCL_MAX_NCHANNELS", "1", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 3; i++) RCHECK(r, ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL));
  if (r->rank == 0) { /* never joins the fourth */
    for (int i = 0; i < 6000 && __atomic_load_n(others_done, __ATOMIC_ACQUIRE) < 2; i++) usleep(10000);
    ncclCommAbort(comm);
    return 0;
  }
  snprintf(path, sizeof(path), "/tmp/braid-test-flight-%d.err", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REXPECT(r, fd >= 0, "cannot open %s", path);
  int saved = dup(2);
  dup2(fd, 2);
  ncclResult_t res = ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL);
  dup2(saved, 2);
  close(fd);
  const char* e = ncclGetLastError(comm);
  __atomic_add_fetch(others_done, 1, __ATOMIC_ACQ_REL);
  char* dump = slurp(path);
  unlink(path);
  REXPECT(r, res != ncclSuccess, "rank %d: the all-reduce without rank 0 succeeded", r->rank);
  REXPECT(r, dump != NULL, "rank %d: no stderr captured", r->rank);
  fprintf(stderr, "rank %d error: %s\nrank %d dump:\n%s", r->rank, e, r->rank, dump);
  REXPECT(r, strstr(e, "the communicator waits for rank 0 (host") != NULL,
          "rank %d: the timeout does not say the communicator waits for rank 0: %s", r->rank, e);
  REXPECT(r, strstr(dump, "braid flight recorder") != NULL && strstr(dump, "end of braid flight recorder") != NULL,
          "rank %d: no flight recorder block on stderr", r->rank);
  REXPECT(r, count_of(dump, "AllReduce") >= 4, "rank %d: the dump lists %d all-reduces, expected 4", r->rank,
          count_of(dump, "AllReduce"));
  REXPECT(r, count_of(dump, " done ") >= 3 && strstr(dump, " running ") != NULL,
          "rank %d: the dump does not show 3 calls done and one running", r->rank);
  REXPECT(r, strstr(dump, "steps sent") != NULL, "rank %d: the dump shows no connection counters", r->rank);
  REXPECT(r, rows_with_steps(dump, "done", 0) >= 3 && rows_with_steps(dump, "running", 0) == 1,
          "rank %d: the dump does not give the steps of each call:\n%s", r->rank, dump);
  free(dump);
  ncclCommAbort(comm);
  free(buf);
  return 0;
}

/* Rows of the dump in `state` whose steps column reads exactly `steps`. */
static int rows_with_steps_text(const char* dump, const char* state, const char* want) {
  int rows = 0;
  for (const char* line = dump; line != NULL && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char fn[32], type[32], op[32], root[32], st[32], steps[32];
    unsigned long long id;
    size_t count;
    int nch;
    if (sscanf(line, " %llu %31s %zu %31s %31s %31s %d %31s %31s", &id, fn, &count, type, op, root, &nch, st, steps) !=
        9)
      continue;
    rows += strcmp(st, state) == 0 && strcmp(steps, want) == 0;
  }
  return rows;
}

static int body_timeout_lone(struct harness_rank* r) {
  ncclComm_t comm;
  char path[64];
  float x[2] = {1, 1};
  setenv("BRAID_TIMEOUT", "2", 1);
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 3; i++) RCHECK(r, ncclAllReduce(x, x, 2, ncclFloat, ncclSum, comm, NULL));
  if (r->rank == 1) { /* never joins the fourth */
    for (int i = 0; i < 6000 && __atomic_load_n(others_done, __ATOMIC_ACQUIRE) < 1; i++) usleep(10000);
    ncclCommAbort(comm);
    return 0;
  }
  snprintf(path, sizeof(path), "/tmp/braid-test-flight-lone-%d.err", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REXPECT(r, fd >= 0, "cannot open %s", path);
  int saved = dup(2);
  dup2(fd, 2);
  ncclResult_t res = ncclAllReduce(x, x, 2, ncclFloat, ncclSum, comm, NULL);
  dup2(saved, 2);
  close(fd);
  __atomic_add_fetch(others_done, 1, __ATOMIC_ACQ_REL);
  char* dump = slurp(path);
  unlink(path);
  REXPECT(r, res != ncclSuccess, "the all-reduce without rank 1 succeeded");
  REXPECT(r, dump != NULL && strstr(dump, "braid flight recorder") != NULL, "no flight recorder block on stderr");
  fprintf(stderr, "rank %d dump:\n%s", r->rank, dump);
  REXPECT(r, rows_with_steps_text(dump, "done", "0") == 3 && rows_with_steps_text(dump, "running", "0+") == 1,
          "the dump does not show 3 lone calls done with 0 steps and one running with 0 so far:\n%s", dump);
  free(dump);
  ncclCommAbort(comm);
  return 0;
}

START_TEST(test_flight_timeout_lone) {
  others_done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne((void*)others_done, MAP_FAILED);
  *others_done = 0;
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_timeout_lone, NULL, HARNESS_TIMEOUT_S), 0);
  munmap((void*)others_done, sizeof(int));
}
END_TEST

START_TEST(test_flight_timeout) {
  others_done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne((void*)others_done, MAP_FAILED);
  *others_done = 0;
  ck_assert_int_eq(harness_run(3, HARNESS_PROCS, body_timeout, NULL, HARNESS_TIMEOUT_S), 0);
  munmap((void*)others_done, sizeof(int));
}
END_TEST

static int body_sigusr1(struct harness_rank* r) {
  ncclComm_t comm;
  char path[64];
  float* buf = calloc(256, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 2; i++) RCHECK(r, ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, ncclBroadcast(buf, buf, 77, ncclInt8, 1, comm, NULL));
  if (r->rank == 0) {
    snprintf(path, sizeof(path), "/tmp/braid-flight-%d.txt", (int)getpid());
    unlink(path);
    raise(SIGUSR1);
    char* dump = NULL;
    for (int i = 0; i < 500 && (dump = slurp(path)) == NULL; i++) usleep(10000);
    REXPECT(r, dump != NULL, "SIGUSR1 wrote no %s", path);
    unlink(path);
    REXPECT(r, strstr(dump, "SIGUSR1") != NULL && strstr(dump, "rank 0 of 2") != NULL,
            "the dump does not name its trigger and rank:\n%s", dump);
    REXPECT(r, count_of(dump, "AllReduce") == 2 && strstr(dump, "Broadcast") != NULL && count_of(dump, " done ") == 3,
            "the dump does not show 2 all-reduces and a broadcast done:\n%s", dump);
    REXPECT(r, strstr(dump, "    77 ") != NULL, "the broadcast's count is not in the dump:\n%s", dump);
    free(dump);
  }
  RCHECK(r, ncclCommDestroy(comm));
  free(buf);
  return 0;
}

START_TEST(test_flight_sigusr1) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_sigusr1, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* The steps column follows connections made after the first calls (point-to-point peers on
 * first use) and connections freed and made again (ncclCommSuspend / ncclCommResume): the
 * recorder keeps the list of counters it reads per call and must see both changes. Rank 0
 * dumps with SIGUSR1: 2 all-reduces, 1 send, 1 receive, 1 all-reduce after the resume, each
 * done with at least one step. */
static int body_new_conns(struct harness_rank* r) {
  ncclComm_t comm;
  char path[64];
  float* buf = calloc(4096, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  setenv("NCCL_ALGO", "Ring", 1); /* through the FIFOs, so every call moves steps */
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 2; i++) RCHECK(r, ncclAllReduce(buf, buf, 4096, ncclFloat, ncclSum, comm, NULL));
  int peer = 1 - r->rank;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(buf, 2048, ncclFloat, peer, comm, NULL));
  RCHECK(r, ncclRecv(buf + 2048, 2048, ncclFloat, peer, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  RCHECK(r, ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  RCHECK(r, ncclCommResume(comm));
  RCHECK(r, ncclAllReduce(buf, buf, 4096, ncclFloat, ncclSum, comm, NULL));
  if (r->rank == 0) {
    snprintf(path, sizeof(path), "/tmp/braid-flight-%d.txt", (int)getpid());
    unlink(path);
    raise(SIGUSR1);
    char* dump = NULL;
    for (int i = 0; i < 500 && (dump = slurp(path)) == NULL; i++) usleep(10000);
    REXPECT(r, dump != NULL, "SIGUSR1 wrote no %s", path);
    unlink(path);
    REXPECT(r, count_of(dump, " done ") == 5, "the dump does not show 5 calls done:\n%s", dump);
    REXPECT(r, rows_with_steps(dump, "done", 1) == 5, "a call's steps are missing or 0:\n%s", dump);
    free(dump);
  }
  RCHECK(r, ncclCommDestroy(comm));
  free(buf);
  return 0;
}

START_TEST(test_flight_new_conns) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_new_conns, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* build/bin/braid-info next to this runner (build/bin/braid-tests). */
static const char* braid_info_path(void) {
  static char path[PATH_MAX];
  return harness_runner_path(path, sizeof(path), "braid-info");
}

/* Rank 0 runs braid-info --dump on its own pid (its flight thread answers the signal while
 * this thread reads the tool's output) and checks what it prints. */
static int body_braid_info(struct harness_rank* r) {
  ncclComm_t comm;
  float* buf = calloc(256, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  setenv("NCCL_ALGO", "Ring", 1); /* through the FIFOs, so every call moves steps */
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 3; i++) RCHECK(r, ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, ncclReduce(buf, buf, 33, ncclInt32, ncclMax, 1, comm, NULL));
  if (r->rank == 0) {
    char cmd[PATH_MAX + 64];
    const char* tool = braid_info_path();
    REXPECT(r, access(tool, X_OK) == 0, "no %s (it is built with the library)", tool);
    snprintf(cmd, sizeof(cmd), "'%s' --dump %d 2>&1", tool, (int)getpid());
    FILE* p = popen(cmd, "r");
    REXPECT(r, p != NULL, "popen %s failed", cmd);
    char* out = calloc(1, 1 << 20);
    REXPECT(r, out != NULL, "out of memory");
    size_t len = 0, n;
    while (len < (1 << 20) - 1 && (n = fread(out + len, 1, (1 << 20) - 1 - len, p)) > 0) len += n;
    int st = pclose(p);
    REXPECT(r, st == 0, "%s exited with status %d:\n%s", cmd, st, out);
    REXPECT(r, strstr(out, "SIGUSR1") != NULL && strstr(out, "rank 0 of 2") != NULL,
            "braid-info --dump does not name the trigger and rank:\n%s", out);
    REXPECT(r, count_of(out, "AllReduce") == 3 && count_of(out, "Reduce") == 4 && count_of(out, " done ") == 4,
            "braid-info --dump does not show 3 all-reduces and a reduce done:\n%s", out);
    REXPECT(r, strstr(out, "    33 ") != NULL, "the reduce's count is not in braid-info's dump:\n%s", out);
    REXPECT(r, rows_with_steps(out, "done", 1) == 4, "braid-info --dump does not give each call's steps:\n%s", out);
    free(out);
  }
  RCHECK(r, ncclCommDestroy(comm));
  free(buf);
  return 0;
}

START_TEST(test_flight_braid_info) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_braid_info, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

Suite* flight_suite(void);
Suite* flight_suite(void) {
  Suite* s = suite_create("flight");
  TCase* tc = tcase_create("dump");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_test(tc, test_flight_timeout);
  tcase_add_test(tc, test_flight_timeout_lone);
  tcase_add_test(tc, test_flight_sigusr1);
  tcase_add_test(tc, test_flight_braid_info);
  tcase_add_test(tc, test_flight_new_conns);
  suite_add_tcase(s, tc);
  return s;
}
