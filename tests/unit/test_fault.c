/*
 * test_fault.c - BRAID_FAULT_INJECT (src/base/fault.c) and the failure paths it opens:
 *   - the rule syntax: POINT, POINT@FUNCTION, #N, #*, :fail, a named point (braid_fault_hit, the
 *     caller's WARN), entries that do not parse;
 *   - ncclGetUniqueId when the root's socket cannot be made: ncclSystemError naming the call,
 *     and no thread or descriptor left behind;
 *   - every allocation of a one-rank ncclCommInitRank failing in turn (calloc#N, N = 1, 2, ...
 *     until init needs no more): each attempt fails with the allocation named (ncclSystemError,
 *     or ncclRemoteError when it was the bootstrap root's), leaks no descriptor, thread or
 *     shared memory (a root whose own allocation failed is given its BRAID_INIT_TIMEOUT to
 *     leave), and the next init in the same process works;
 *   - a helper thread that cannot start (pthread_create) while a 2-rank communicator connects:
 *     the call fails with the thread named, both ranks return (none hangs);
 *   - the same when the first shared-memory segment cannot be created (shm_open), and no
 *     segment is left in /dev/shm.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/param.h"
#include "harness.h"
#include "nccl.h"
#include "param_fixture.h"

static void set_fault(const char* spec) {
  if (spec)
    setenv("BRAID_FAULT_INJECT", spec, 1);
  else
    unsetenv("BRAID_FAULT_INJECT");
  braid_param_reload();
}

/* A site in this file, as check.h's macros consult the hook. */
static int site(const char* name) {
  return BRAID_FAULT(name);
}
static int other_function(const char* name) {
  return BRAID_FAULT(name);
}

START_TEST(test_rules) {
  set_fault(NULL);
  ck_assert_int_eq(site("calloc"), 0);
  ck_assert_int_eq(braid_fault_armed, 0); /* unset: one load, then no more calls */
  set_fault("calloc#2");
  ck_assert_int_eq(site("calloc"), 0);
  ck_assert_int_eq(site("socket"), 0);
  ck_assert_int_eq(site("calloc"), 1);
  ck_assert_int_eq(site("calloc"), 0);
  set_fault("socket#*,calloc@other_function");
  ck_assert_int_eq(site("calloc"), 0);
  ck_assert_int_eq(other_function("calloc"), 1);
  ck_assert_int_eq(other_function("calloc"), 0);
  for (int i = 0; i < 5; i++) ck_assert_int_eq(site("socket"), 1);
  /* A named point (braid_fault_hit): the hook WARNs, naming it. */
  set_fault("init.barrier#2:fail,calloc");
  ck_assert_int_eq(braid_fault_hit("init.barrier"), 0);
  ck_assert_int_eq(braid_fault_hit("init.barrier"), 1);
  ck_assert_str_eq(ncclGetLastError(NULL),
                   "BRAID_FAULT_INJECT=init.barrier#2:fail,calloc: fault injected at init.barrier");
  ck_assert_int_eq(braid_fault_hit("bootstrap.send"), 0);
  ck_assert_int_eq(site("calloc"), 1);
  /* A reload starts the counts again. */
  set_fault("calloc#2");
  ck_assert_int_eq(site("calloc"), 0);
  ck_assert_int_eq(site("calloc"), 1);
}
END_TEST

START_TEST(test_bad_rules) {
  log_to_file("WARN", NULL);
  set_fault("calloc#0,@f,socket#x,,listen:explode,listen");
  ck_assert_int_eq(site("listen"), 1);
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "is not POINT[@FUNCTION][#N|#*][:fail|:kill|:stop], ignored"), 4);
  ck_assert_ptr_nonnull(strstr(log, "entry 'calloc#0'"));
  ck_assert_ptr_nonnull(strstr(log, "entry 'socket#x'"));
  ck_assert_ptr_nonnull(strstr(log, "entry 'listen:explode'"));
  free(log);
}
END_TEST

START_TEST(test_unique_id_socket) {
  int fds = harness_count_fds(), threads = harness_count_threads();
  ncclUniqueId id;
  set_fault("socket");
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSystemError);
  ck_assert_msg(strstr(ncclGetLastError(NULL), "Call to socket failed") != NULL, "last error: %s",
                ncclGetLastError(NULL));
  ck_assert_int_eq(harness_count_fds(), fds);
  ck_assert_int_eq(harness_count_threads(), threads);
  /* The fault was the first call only: the next one works. */
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
}
END_TEST

static int n_failed; /* allocation failures logged so far */

/* Entries of /dev/shm that process `pid` made (braid-<pid>-..., braid-fakegpu-<pid>-...): other
 * engineers' suites share /dev/shm, so only names with our pids count. */
static int shm_of(int pid) {
  char a[48], b[48];
  snprintf(a, sizeof(a), "braid-%d-", pid);
  snprintf(b, sizeof(b), "braid-fakegpu-%d-", pid);
  DIR* d = opendir("/dev/shm");
  int n = 0;
  for (struct dirent* e; d != NULL && (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, a, strlen(a)) == 0 || strncmp(e->d_name, b, strlen(b)) == 0;
  if (d != NULL) closedir(d);
  return n;
}

/* A port nobody listens on now (the kernel's pick). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  ck_assert_int_eq(bind(fd, (struct sockaddr*)&a, sizeof(a)), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr*)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* One-rank init with the n-th allocation failing; 1 when init needed fewer than n. The root is
 * rank 0's (NCCL_COMM_ID), so everything init makes is init's to undo. */
static int init_with_failing_calloc(int n) {
  char spec[32], comm_id[32];
  snprintf(spec, sizeof(spec), "calloc#%d", n);
  snprintf(comm_id, sizeof(comm_id), "127.0.0.1:%d", free_port());
  setenv("NCCL_COMM_ID", comm_id, 1);
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  set_fault(spec);
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, 1, id, 0);
  set_fault(NULL);
  if (res == ncclSuccess) {
    int x = 1, y = 0;
    ck_assert_int_eq(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL), ncclSuccess);
    ck_assert_int_eq(y, 1);
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
    return 1;
  }
  /* ncclSystemError where init itself failed; ncclRemoteError when the failing allocation was
   * the bootstrap root's (a thread of rank 0) and rank 0 saw the root drop it. */
  ck_assert_msg(res == ncclSystemError || res == ncclRemoteError, "calloc %d: init returned %d", n, res);
  char* log = read_file(param_logpath);
  int said = count_of(log, "NCCL WARN Failed to allocate");
  free(log);
  ck_assert_msg(said == n_failed + 1, "calloc %d: %d allocation failures logged, want %d", n, said, n_failed + 1);
  n_failed = said;
  return 0;
}

/* Waits (at most 10 s) until the process holds `fds` descriptors and `threads` threads again: a
 * bootstrap root whose own allocation failed lives on until its BRAID_INIT_TIMEOUT. */
static void wait_back_to(int fds, int threads) {
  for (int i = 0; i < 200 && (harness_count_fds() != fds || harness_count_threads() != threads); i++) usleep(50000);
}

/* The warm-up's own threads (its bootstrap root) finish after it returns: take the baseline
 * once the counts held still for a second (at most 10 s). */
static void settle(int* fds, int* threads) {
  int still = 0;
  *fds = harness_count_fds(), *threads = harness_count_threads();
  for (int i = 0; i < 200 && still < 20; i++) {
    usleep(50000);
    int f = harness_count_fds(), t = harness_count_threads();
    still = f == *fds && t == *threads ? still + 1 : 0;
    *fds = f, *threads = t;
  }
}

START_TEST(test_init_every_calloc) {
  setenv("BRAID_HOST_MODE", "1", 1);
  setenv("BRAID_INIT_TIMEOUT", "2", 1);
  log_to_file("WARN", NULL);
  n_failed = 0;
  ck_assert_int_eq(init_with_failing_calloc(1000000), 1); /* warm up: lazily made state exists */
  int fds, threads, shm = shm_of(getpid());
  settle(&fds, &threads);
  int n = 1;
  while (!init_with_failing_calloc(n)) {
    wait_back_to(fds, threads);
    ck_assert_msg(harness_count_fds() == fds, "calloc %d: %d descriptors, %d before", n, harness_count_fds(), fds);
    ck_assert_msg(harness_count_threads() == threads, "calloc %d: %d threads, %d before", n, harness_count_threads(),
                  threads);
    ck_assert_msg(shm_of(getpid()) == shm, "calloc %d: /dev/shm entries left", n);
    ck_assert_int_lt(++n, 2000);
  }
  ck_assert_int_gt(n, 1); /* init does allocate */
  printf("test_init_every_calloc: init survived each of its %d allocations failing\n", n - 1);
}
END_TEST

/* Two ranks as threads; the first helper thread of the process cannot start. */
static int thread_rank(struct harness_rank* r) {
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (res == ncclSuccess) {
    int x = 1, y = 0;
    res = ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL);
    if (res != ncclSuccess)
      ncclCommAbort(comm);
    else
      ncclCommDestroy(comm);
  }
  *(ncclResult_t*)((char*)r->arg + r->rank * sizeof(ncclResult_t)) = res;
  return 0;
}

START_TEST(test_thread_start_fails) {
  setenv("BRAID_HOST_MODE", "1", 1);
  setenv("BRAID_INIT_TIMEOUT", "20", 1);
  setenv("BRAID_TIMEOUT", "20", 1);
  log_to_file("WARN", NULL);
  set_fault("pthread_create");
  ncclResult_t res[2] = {ncclSuccess, ncclSuccess};
  ck_assert_int_eq(harness_run(2, HARNESS_THREADS, thread_rank, res, 60), 0);
  ck_assert_msg(res[0] != ncclSuccess || res[1] != ncclSuccess, "no rank saw the failed thread start");
  char* log = read_file(param_logpath);
  ck_assert_msg(count_of(log, "NCCL WARN Call to pthread_create failed: Resource temporarily unavailable") == 1, "%s",
                log);
  printf("test_thread_start_fails: rank 0 %s, rank 1 %s\n", ncclGetErrorString(res[0]), ncclGetErrorString(res[1]));
  free(log);
}
END_TEST

/* A rank process whose first shm_open fails: its init (or first call) must fail, not hang. It
 * leaves its pid in HOME/pids (for the /dev/shm check). */
static int shm_rank(struct harness_rank* r) {
  ncclResult_t res[2] = {ncclSuccess, ncclSuccess};
  char path[128];
  snprintf(path, sizeof(path), "%s/pids", param_tmpdir);
  FILE* f = fopen(path, "a");
  if (f != NULL) fprintf(f, "%d\n", (int)getpid()), fclose(f);
  struct harness_rank me = *r;
  me.arg = res;
  thread_rank(&me);
  if (res[r->rank] == ncclSuccess) return harness_fail(r, "rank %d: succeeded with its shm_open failing", r->rank);
  return 0;
}

/* Two rank processes on one node: each one's first shared-memory segment cannot be made. */
START_TEST(test_shm_open_fails) {
  setenv("BRAID_HOST_MODE", "1", 1);
  setenv("BRAID_INIT_TIMEOUT", "20", 1);
  setenv("BRAID_TIMEOUT", "20", 1);
  log_to_file("WARN", NULL);
  set_fault("shm_open");
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, shm_rank, NULL, 60), 0);
  char* log = read_file(param_logpath);
  ck_assert_msg(count_of(log, "NCCL WARN Call to shm_open failed: Input/output error") >= 1, "%s", log);
  free(log);
  char path[128];
  snprintf(path, sizeof(path), "%s/pids", param_tmpdir);
  FILE* f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  int pid, nranks = 0;
  while (fscanf(f, "%d", &pid) == 1) {
    ck_assert_msg(shm_of(pid) == 0, "rank process %d left %d /dev/shm entries", pid, shm_of(pid));
    nranks++;
  }
  fclose(f);
  ck_assert_int_eq(nranks, 2);
}
END_TEST

Suite* fault_suite(void) {
  Suite* s = suite_create("fault");
  TCase* tc = tcase_create("rules");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_rules);
  tcase_add_test(tc, test_bad_rules);
  suite_add_tcase(s, tc);

  tc = tcase_create("failures");
  tcase_set_timeout(tc, 240);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_unique_id_socket);
  tcase_add_test(tc, test_init_every_calloc);
  tcase_add_test(tc, test_thread_start_fails);
  tcase_add_test(tc, test_shm_open_fails);
  suite_add_tcase(s, tc);
  return s;
}
