/*
 * test_locality.c - near or far per pair of local ranks (core/locality.c) and what follows
 * from it (the one-pass CMA piece size; the FIFO keeps NCCL_BUFFSIZE: 16 MiB for far pairs was
 * measured slower, docs/notes/2026-12-02-lead.md).
 *
 * - caches: the topology's answer from a fake sysfs cpu tree (shared L3, different L3s, a
 *   CPU set spanning two caches, a hypervisor, no L3 but one L2, no sysfs at all).
 * - pingpong: two threads bounce the line: the leader gets a positive round trip and both
 *   return; a leader without follower gives up (negative) instead of hanging.
 * - comm: 2 ranks (processes and threads) under BRAID_SHM_LOCALITY=NEAR, FAR, AUTO, a rank-1
 *   setting that disagrees (the lower rank decides: both see its value) and NCCL_BUFFSIZE
 *   set (kept whatever the locality): the locality each rank records for its peer, the
 *   communicator-wide flag, the Simple buffer size, and a correct all-reduce. AUTO must pick
 *   near or far (not unknown) on a machine with /dev/shm; no timing is asserted.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "core/locality.h"
#include "harness.h"
#include "refdata.h"

/* ---- caches --------------------------------------------------------------------------------- */

static void put(const char* dir, const char* file, const char* text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  FILE* f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* cpuN/cache/index{0,1,2,3}: L1d, L1i, L2 (id l2), L3 (id l3; l3 < 0: no L3). */
static void fake_cpu(const char* root, int cpu, int l2, int l3) {
  char dir[512], id[16];
  const char* types[] = {"Data", "Instruction", "Unified", "Unified"};
  int levels[] = {1, 1, 2, 3}, ids[] = {cpu, cpu, l2, l3};
  for (int i = 0; i < (l3 < 0 ? 3 : 4); i++) {
    snprintf(dir, sizeof(dir), "%s/cpu%d", root, cpu);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/cpu%d/cache", root, cpu);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/cpu%d/cache/index%d", root, cpu, i);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(id, sizeof(id), "%d\n", levels[i]);
    put(dir, "level", id);
    put(dir, "type", types[i]);
    snprintf(id, sizeof(id), "%d\n", ids[i]);
    put(dir, "id", id);
  }
}

static void set_of(uint64_t* cpus, const int* list, int n) {
  memset(cpus, 0, sizeof(uint64_t) * BRAID_CPU_WORDS);
  for (int i = 0; i < n; i++) cpus[list[i] / 64] |= 1ull << (list[i] % 64);
}

static void rm_tree(const char* dir) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

START_TEST(test_caches) {
  char root[] = "/tmp/braid-loc-sysfs-XXXXXX", noL3[600];
  ck_assert_ptr_nonnull(mkdtemp(root));
  /* cpus 0,1 share L3 0; cpus 2,3 share L3 1; cpu 3 shares cpu 2's L2 (SMT) */
  fake_cpu(root, 0, 0, 0);
  fake_cpu(root, 1, 1, 0);
  fake_cpu(root, 2, 2, 1);
  fake_cpu(root, 3, 2, 1);
  uint64_t a[BRAID_CPU_WORDS], b[BRAID_CPU_WORDS];
  set_of(a, (int[]){0}, 1);
  set_of(b, (int[]){1}, 1);
  ck_assert_int_eq(braid_locality_from_caches(a, b, root, 0), BRAID_LOCALITY_NEAR);
  ck_assert_int_eq(braid_locality_from_caches(a, b, root, 1), BRAID_LOCALITY_UNKNOWN); /* vCPUs float */
  set_of(b, (int[]){2}, 1);
  ck_assert_int_eq(braid_locality_from_caches(a, b, root, 0), BRAID_LOCALITY_FAR);
  set_of(a, (int[]){0, 1}, 2);
  set_of(b, (int[]){2, 3}, 2);
  ck_assert_int_eq(braid_locality_from_caches(a, b, root, 0), BRAID_LOCALITY_FAR);
  set_of(a, (int[]){0, 2}, 2); /* spans both L3s: the scheduler decides */
  set_of(b, (int[]){1}, 1);
  ck_assert_int_eq(braid_locality_from_caches(a, b, root, 0), BRAID_LOCALITY_UNKNOWN);
  set_of(a, (int[]){5}, 1); /* a CPU sysfs does not describe */
  ck_assert_int_eq(braid_locality_from_caches(a, b, root, 0), BRAID_LOCALITY_UNKNOWN);
  ck_assert_int_eq(braid_locality_from_caches(a, b, "/nonexistent/braid", 0), BRAID_LOCALITY_UNKNOWN);
  /* no L3: one L2 (SMT siblings) is near, different L2s cannot be told */
  snprintf(noL3, sizeof(noL3), "%s/nol3", root);
  ck_assert_int_eq(mkdir(noL3, 0700), 0);
  fake_cpu(noL3, 0, 7, -1);
  fake_cpu(noL3, 1, 7, -1);
  fake_cpu(noL3, 2, 8, -1);
  set_of(a, (int[]){0}, 1);
  set_of(b, (int[]){1}, 1);
  ck_assert_int_eq(braid_locality_from_caches(a, b, noL3, 0), BRAID_LOCALITY_NEAR);
  set_of(b, (int[]){2}, 1);
  ck_assert_int_eq(braid_locality_from_caches(a, b, noL3, 0), BRAID_LOCALITY_UNKNOWN);
  rm_tree(root);
}
END_TEST

/* ---- pingpong --------------------------------------------------------------------------------- */

static _Alignas(64) volatile uint64_t line;

static void* follower(void* arg) {
  (void)arg;
  braid_locality_pingpong(&line, 0, 0);
  return NULL;
}

START_TEST(test_pingpong) {
  pthread_t t;
  line = 0;
  ck_assert_int_eq(pthread_create(&t, NULL, follower, NULL), 0);
  double rtt = braid_locality_pingpong(&line, 1, 1.5);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_msg(rtt > 0, "round trip %g", rtt);
  line = 0; /* nobody answers: the leader stops by itself */
  ck_assert_msg(braid_locality_pingpong(&line, 1, 1.5) < 0, "a leader without follower measured something");
}
END_TEST

/* ---- communicators ------------------------------------------------------------------------------ */

struct lcase {
  const char* mode;  /* BRAID_SHM_LOCALITY of rank 0 */
  const char* mode1; /* of rank 1 (NULL: the same) */
  const char* buffsize;
  enum harness_mode hmode;
};

static int body(struct harness_rank* r) {
  const struct lcase* k = r->arg;
  const char* mode = r->rank == 1 && k->mode1 ? k->mode1 : k->mode;
  if (r->rank == 1 && k->mode1 && setenv("BRAID_SHM_LOCALITY", mode, 1) == 0) braid_param_reload();
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  const struct braid_comm* c = braid_comm_of(comm);
  int loc = c->locality[1 - r->rank], bad = 0;
  size_t simple = c->buff_bytes[BRAID_PROTO_SIMPLE];
  if (strcmp(k->mode, "AUTO") == 0) {
    if (loc != BRAID_LOCALITY_NEAR && loc != BRAID_LOCALITY_FAR)
      bad = harness_fail(r, "AUTO chose %s", braid_locality_name(loc));
  } else {
    int want = strcmp(k->mode, "NEAR") == 0 ? BRAID_LOCALITY_NEAR : BRAID_LOCALITY_FAR; /* rank 0's */
    if (loc != want) bad = harness_fail(r, "locality %s, want %s", braid_locality_name(loc), k->mode);
  }
  size_t want_bytes = k->buffsize ? (size_t)1 << 20 : (size_t)4 << 20; /* locality does not size the FIFO */
  if (simple != want_bytes) bad |= harness_fail(r, "Simple buffer %zu bytes, want %zu", simple, want_bytes);
  size_t n = (3u << 20) + 5; /* several slots of either size */
  float* a = malloc(n * sizeof(float));
  float* b = malloc(n * sizeof(float));
  REXPECT(r, a && b, "out of memory");
  for (size_t i = 0; i < n; i++) a[i] = (float)((r->rank + 1) * (int)(i % 89));
  RCHECK(r, ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, NULL));
  for (size_t i = 0; i < n && !bad; i++)
    if (b[i] != (float)(3 * (int)(i % 89))) bad = harness_fail(r, "all-reduce: element %zu is %g", i, b[i]);
  /* both ends of a direct connection between processes know a far pair (kernels/direct.h) */
  const struct braid_channel* ch = &c->channels[0];
  int want_far = loc == BRAID_LOCALITY_FAR && k->hmode == HARNESS_PROCS && ch->ring_recv.conn.host_fetch != NULL;
  if (ch->ring_send.conn.far != want_far || ch->ring_recv.conn.far != want_far)
    bad |= harness_fail(r, "ring send far %d, receive far %d, want %d", ch->ring_send.conn.far, ch->ring_recv.conn.far,
                        want_far);
  free(a);
  free(b);
  RCHECK(r, ncclCommDestroy(comm));
  return bad;
}

static const struct lcase lcases[] = {
    {"NEAR", NULL, NULL, HARNESS_PROCS},  {"FAR", NULL, NULL, HARNESS_PROCS}, {"AUTO", NULL, NULL, HARNESS_PROCS},
    {"FAR", "NEAR", NULL, HARNESS_PROCS}, {"FAR", NULL, "1M", HARNESS_PROCS}, {"AUTO", NULL, NULL, HARNESS_THREADS},
    {"FAR", NULL, NULL, HARNESS_THREADS},
};

START_TEST(test_comm) {
  const struct lcase* k = &lcases[_i];
  char env[256];
  snprintf(env, sizeof(env), "BRAID_HOST_MODE=1 BRAID_SHM_LOCALITY=%s", k->mode);
  ref_env_apply(env);
  if (k->buffsize) ref_env_apply(k->buffsize[0] == '1' ? "NCCL_BUFFSIZE=1M" : "");
  int failed = harness_run(2, k->hmode, body, (void*)k, 120);
  unsetenv("BRAID_SHM_LOCALITY");
  unsetenv("NCCL_BUFFSIZE");
  braid_param_reload();
  ck_assert_msg(failed == 0, "%s/%s buffsize %s (%s): %d rank(s) failed", k->mode, k->mode1 ? k->mode1 : "-",
                k->buffsize ? k->buffsize : "unset", harness_mode_name(k->hmode), failed);
}
END_TEST

Suite* locality_suite(void) {
  Suite* s = suite_create("locality");
  TCase* tc = tcase_create("pieces");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_caches);
  tcase_add_test(tc, test_pingpong);
  suite_add_tcase(s, tc);
  tc = tcase_create("comm");
  tcase_set_timeout(tc, 180);
  tcase_add_loop_test(tc, test_comm, 0, (int)(sizeof(lcases) / sizeof(lcases[0])));
  suite_add_tcase(s, tc);
  return s;
}
