/*
 * test_param_use.c - when parameters are read (src/base/param.c), as NCCL reads them:
 *   - PER_USE rows (NCCL_HOSTID, NCCL_COMM_ID, NCCL_ALGO, ...) follow the environment at each
 *     read, LIVE rows only after a reload; NCCL_NO_CACHE makes any row (or ALL) per use; the
 *     `set by` line of a changed value is printed, the other messages are not repeated;
 *   - a forked child reads its own settings: a launcher that calls ncclGetUniqueId, then forks
 *     ranks that each set NCCL_HOSTID (and a LIVE row) before ncclCommInitRank gets the nodes
 *     and values each rank asked for (before this, every rank landed on the parent's node);
 *   - a reload while other threads read leaves every read consistent;
 *   - braid_param_int_memo, the read made on every call (BRAID_CHECK_MISMATCH on the lone
 *     all-reduce's path), answers what braid_param_int does: a reload, a forked child and a
 *     NCCL_NO_CACHE row each show through its memo.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "core/mismatch.h"
#include "harness.h"
#include "nccl.h"
#include "param_fixture.h"

START_TEST(test_per_use_follows_env) {
  braid_param_reload();
  ck_assert_ptr_null(braid_param_str(BRAID_PARAM_HOSTID));
  setenv("NCCL_HOSTID", "node-a", 1);
  setenv("NCCL_BUFFSIZE", "65536", 1);
  /* No reload: the PER_USE row sees the new value, the LIVE row keeps its load's. */
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_HOSTID), "node-a");
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_HOSTID), "environment");
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
  setenv("NCCL_HOSTID", "node-b", 1);
  const char* b = braid_param_str(BRAID_PARAM_HOSTID);
  ck_assert_str_eq(b, "node-b");
  unsetenv("NCCL_HOSTID");
  ck_assert_ptr_null(braid_param_str(BRAID_PARAM_HOSTID));
  ck_assert_str_eq(b, "node-b"); /* strings handed out stay valid */
  /* A conf file's value of a PER_USE row holds while the environment says nothing. */
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_HOSTID=from-file\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  braid_param_reload();
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_HOSTID), "from-file");
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_HOSTID), "from-file");
  setenv("NCCL_HOSTID", "node-c", 1);
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_HOSTID), "node-c");
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 65536); /* that load read the LIVE row too */
}
END_TEST

START_TEST(test_no_cache) {
  setenv("NCCL_NO_CACHE", "NCCL_BUFFSIZE, NCCL_BOGUS", 1);
  log_to_file("WARN", NULL);
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
  setenv("NCCL_BUFFSIZE", "1M", 1);
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 1048576);
  setenv("BRAID_SPIN_COUNT", "5", 1);
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_SPIN_COUNT), 32); /* not named: cached */
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "NCCL_NO_CACHE names NCCL_BOGUS, which is not a parameter; ignored"), 1);
  free(log);
  setenv("NCCL_NO_CACHE", "ALL", 1);
  braid_param_reload();
  setenv("BRAID_SPIN_COUNT", "6", 1);
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_SPIN_COUNT), 6);
}
END_TEST

/* A changed PER_USE value logs its own `set by` line; what was said before is not said again. */
START_TEST(test_refresh_says_only_what_is_new) {
  setenv("NCCL_BUFSIZE", "1", 1);
  setenv("NCCL_HOSTID", "first", 1);
  log_to_file("INFO", "ENV");
  braid_param_str(BRAID_PARAM_HOSTID);
  setenv("NCCL_HOSTID", "second", 1);
  braid_param_str(BRAID_PARAM_HOSTID);
  braid_param_str(BRAID_PARAM_HOSTID);
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "NCCL_HOSTID set by environment to first."), 1);
  ck_assert_int_eq(count_of(log, "NCCL_HOSTID set by environment to second."), 1);
  ck_assert_int_eq(count_of(log, "Unknown environment variable NCCL_BUFSIZE"), 1);
  free(log);
}
END_TEST

/* A child forked after the parent read the table reads its own LIVE settings. */
START_TEST(test_fork_child_rereads) {
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304); /* the parent has loaded */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("NCCL_BUFFSIZE", "2M", 1);
    setenv("BRAID_TIMEOUT", "7", 1);
    int ok = braid_param_int(BRAID_PARAM_BUFFSIZE) == 2097152 && braid_param_int(BRAID_PARAM_TIMEOUT) == 7;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child read its parent's values");
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
}
END_TEST

/* The launcher of issue 15: ncclGetUniqueId (harness_run), then fork; each child names its
 * node and its buffer size before ncclCommInitRank, as a rank script would. */
static int fork_rank(struct harness_rank* r) {
  char node[32];
  snprintf(node, sizeof(node), "braid-fork-node-%d", r->rank / 2);
  setenv("NCCL_HOSTID", node, 1);
  setenv("NCCL_BUFFSIZE", r->rank % 2 ? "1M" : "2M", 1);
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  struct braid_comm* c = braid_comm_of(comm);
  int64_t want = r->rank % 2 ? 1048576 : 2097152;
  REXPECT(r, c->nnodes == 2, "rank %d: %d node(s), asked for 2 (NCCL_HOSTID=%s)", r->rank, c->nnodes, node);
  REXPECT(r, c->local_nranks == 2, "rank %d: %d local ranks, want 2", r->rank, c->local_nranks);
  REXPECT(r, braid_param_int(BRAID_PARAM_BUFFSIZE) == want, "rank %d: NCCL_BUFFSIZE %lld, set %lld", r->rank,
          (long long)braid_param_int(BRAID_PARAM_BUFFSIZE), (long long)want);
  int mine = r->rank + 1, sum = 0;
  RCHECK(r, ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, comm, NULL));
  REXPECT(r, sum == 10, "rank %d: all-reduce gave %d, want 10", r->rank, sum);
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_fork_launcher_hostid) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_INIT_TIMEOUT", "60", 1);
  braid_param_reload();
  ck_assert_ptr_null(braid_param_str(BRAID_PARAM_HOSTID)); /* the launcher itself names no node */
  ck_assert_int_eq(harness_run(4, HARNESS_PROCS, fork_rank, NULL, 90), 0);
}
END_TEST

/* ---- reload while other threads read ---- */

static volatile int readers_stop;

static void* reader(void* arg) {
  long bad = 0;
  while (!__atomic_load_n(&readers_stop, __ATOMIC_ACQUIRE)) {
    if (braid_param_int(BRAID_PARAM_BUFFSIZE) != 1048576) bad++;
    const char* net = braid_param_str(BRAID_PARAM_NET);
    if (net == NULL || strcmp(net, "Socket") != 0) bad++;
    if (strcmp(braid_param_source(BRAID_PARAM_NET), "environment") != 0) bad++;
  }
  *(long*)arg = bad;
  return NULL;
}

START_TEST(test_reload_under_readers) {
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  setenv("NCCL_NET", "Socket", 1);
  braid_param_reload();
  const char* before = braid_param_str(BRAID_PARAM_NET);
  pthread_t threads[4];
  long bad[4];
  readers_stop = 0;
  for (int t = 0; t < 4; t++) ck_assert_int_eq(pthread_create(&threads[t], NULL, reader, &bad[t]), 0);
  for (int r = 0; r < 200; r++) braid_param_reload();
  __atomic_store_n(&readers_stop, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < 4; t++) {
    pthread_join(threads[t], NULL);
    ck_assert_int_eq(bad[t], 0);
  }
  /* Strings handed out before a reload stay valid. */
  ck_assert_str_eq(before, "Socket");
}
END_TEST

/* The memo of a LIVE row: kept until the table changes, never past it. */
START_TEST(test_memo_follows_table) {
  struct braid_param_memo memo = {0};
  const enum braid_param id = BRAID_PARAM_CHECK_MISMATCH;
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 0);
  ck_assert_int_eq(braid_mismatch_enabled(), 0);
  setenv("BRAID_CHECK_MISMATCH", "1", 1);
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 0); /* LIVE: the load's value until a reload */
  ck_assert_int_eq(braid_mismatch_enabled(), 0);
  braid_param_reload();
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 1);
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 1);
  ck_assert_int_eq(braid_mismatch_enabled(), 1);
  /* A forked child reads its own settings, through memos filled in the parent. */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("BRAID_CHECK_MISMATCH", "0", 1);
    _exit(braid_param_int_memo(id, &memo) == 0 && braid_mismatch_enabled() == 0 ? 0 : 1);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's memo kept its parent's value");
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 1);
  /* Named by NCCL_NO_CACHE: looked up at every read, memo or not. */
  setenv("NCCL_NO_CACHE", "BRAID_CHECK_MISMATCH", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 1);
  setenv("BRAID_CHECK_MISMATCH", "0", 1);
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 0);
  ck_assert_int_eq(braid_mismatch_enabled(), 0);
  setenv("BRAID_CHECK_MISMATCH", "1", 1);
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 1);
  ck_assert_int_eq(braid_mismatch_enabled(), 1);
  unsetenv("NCCL_NO_CACHE");
  unsetenv("BRAID_CHECK_MISMATCH");
  braid_param_reload();
  ck_assert_int_eq(braid_param_int_memo(id, &memo), 0);
  ck_assert_int_eq(braid_mismatch_enabled(), 0);
}
END_TEST

Suite* param_use_suite(void) {
  Suite* s = suite_create("param_use");
  TCase* tc = tcase_create("per_use");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_per_use_follows_env);
  tcase_add_test(tc, test_no_cache);
  tcase_add_test(tc, test_refresh_says_only_what_is_new);
  suite_add_tcase(s, tc);

  tc = tcase_create("fork");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_fork_child_rereads);
  tcase_add_test(tc, test_fork_launcher_hostid);
  tcase_add_test(tc, test_memo_follows_table);
  suite_add_tcase(s, tc);

  tc = tcase_create("reload");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_reload_under_readers);
  suite_add_tcase(s, tc);
  return s;
}
