/*
 * test_profiler.c - NCCL_PROFILER_PLUGIN end to end (src/plugin/profiler_plugin.c,
 * src/core/profile.c): the test profiler of tests/plugins/test_profiler.c, built by the
 * Makefile at every ABI version (build/lib/libnccl-profiler-braidtest-v<N>.so), loaded by
 * host-mode ranks that run a fixed list of calls; after ncclCommDestroy (the plugin's
 * finalize) each rank compares the plugin's counts with the calls it made.
 *
 * The calls per rank: AllReduce x3, Broadcast x2, Reduce, AllGather, ReduceScatter alone
 * (8 groups), a group of two AllReduces, a group of a Send to rank+1 and a Recv from rank-1:
 * 10 Group, 10 Coll (AllReduce 5, Broadcast 2, the others 1), 2 P2p events (1 Send, 1 Recv),
 * and from v5 as many GroupApi, CollApi and P2pApi events.
 *
 * TCases:
 *   versions  v6 .. v1, as threads, processes and pairs: every count, nesting (every task
 *             inside a group that is still open, children stopped before their group), every
 *             start stopped by finalize, descriptors (names or v1's numbers, consecutive
 *             seqNumbers, an algorithm, protocol and channels on every collective)
 *   mask      the mask the plugin sets: Group only (no task event is ever delivered; GroupApi
 *             events are, as NCCL does, and the plugin drops them), Coll only (no P2p or P2pApi;
 *             the Coll events' ancestors are delivered and dropped), 0 (nothing delivered)
 *   refused   a library without ncclProfiler_v*, an init that fails, a path that does not
 *             exist: a WARN that says so, and the calls run (results checked) without it
 *   gpu       device mode on the fake GPU (2 ranks, threads): a collective's Group and Coll
 *             events stay open after its launch while its kernel cannot finish (the peer has
 *             not launched yet), and stop once it has, without a further call (the progress
 *             thread sees the kernel done); then a group of Send+Recv, counts and nesting
 */
#include "../plugins/test_profiler.h"

#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "device/device.h"
#include "harness.h"
#include "nccl.h"
#include "plugin/profiler_abi.h"
#include "plugin/profiler_plugin.h"

#define RANK_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 240
#define COUNT 1000

enum { GROUPS = 10, COLLS = 10, P2PS = 2 };

struct pcase {
  int version; /* the library: 0 none exported, -1 a path that does not exist */
  int mask;    /* BRAID_TEST_PROFILER_MASK; -1: the plugin's default (Group|Coll|P2p, + the API events) */
  int unasked; /* events braid delivers outside the mask (parents of what it asks for, as NCCL) */
  int fail_init;
  char path[PATH_MAX];
};

static void lib_path(int version, char* out, size_t len) {
  char rel[64];
  if (version < 0) {
    snprintf(out, len, "/nonexistent/libnccl-profiler-braidtest.so");
    return;
  }
  snprintf(rel, sizeof(rel), "../lib/libnccl-profiler-braidtest-v%d.so", version);
  harness_runner_path(out, len, rel);
}

/* The calls of the header, each result checked (sum of ranks, root's values). */
static int run_calls(struct harness_rank* r, ncclComm_t comm) {
  int n = r->nranks;
  float* in = malloc(COUNT * n * sizeof(float));
  float* out = malloc(COUNT * n * sizeof(float));
  REXPECT(r, in != NULL && out != NULL, "out of memory");
  for (int i = 0; i < COUNT * n; i++) in[i] = (float)(r->rank + 1);
  for (int k = 0; k < 3; k++) RCHECK(r, ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
  REXPECT(r, out[COUNT - 1] == (float)(n * (n + 1) / 2), "AllReduce gave %g", out[COUNT - 1]);
  for (int k = 0; k < 2; k++) RCHECK(r, ncclBroadcast(in, out, COUNT, ncclFloat32, 0, comm, NULL));
  REXPECT(r, out[0] == 1.0f, "Broadcast gave %g", out[0]);
  RCHECK(r, ncclReduce(in, out, COUNT, ncclFloat32, ncclSum, n - 1, comm, NULL));
  RCHECK(r, ncclAllGather(in, out, COUNT, ncclFloat32, comm, NULL));
  RCHECK(r, ncclReduceScatter(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclAllReduce(in, in, COUNT, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  for (int i = 0; i < COUNT; i++) in[i] = (float)r->rank;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(in, COUNT, ncclFloat32, (r->rank + 1) % n, comm, NULL));
  RCHECK(r, ncclRecv(out, COUNT, ncclFloat32, (r->rank + n - 1) % n, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  REXPECT(r, out[COUNT - 1] == (float)((r->rank + n - 1) % n), "Recv gave %g", out[COUNT - 1]);
  free(in);
  free(out);
  return 0;
}

static int result_of(struct harness_rank* r, const char* path, struct braid_test_profiler_result* res) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REXPECT(r, dl != NULL, "%s is not loaded: %s", path, dlerror());
  braid_test_profiler_result_fn fn = (braid_test_profiler_result_fn)dlsym(dl, "braid_test_profiler_result");
  REXPECT(r, fn != NULL, "no braid_test_profiler_result in %s", path);
  REXPECT(r, fn(r->rank, res) == 0, "the plugin has no finalized result for rank %d", r->rank);
  dlclose(dl);
  return 0;
}

#define EXPECT_EQ(r, got, want, what) \
  REXPECT(r, (got) == (want), "v%d mask 0x%x: %s: %d, expected %d", pc->version, mask, what, (int)(got), (int)(want))

static int body(struct harness_rank* r) {
  const struct pcase* pc = r->arg;
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  REXPECT(r, braid_prof_version() == pc->version, "profiler ABI v%d loaded, expected v%d", braid_prof_version(),
          pc->version);
  if (run_calls(r, comm)) return 1;
  RCHECK(r, ncclCommDestroy(comm));
  struct braid_test_profiler_result res;
  if (result_of(r, pc->path, &res)) return 1;
  int mask = pc->mask >= 0 ? pc->mask : NCCL_PROF_GROUP | NCCL_PROF_COLL | NCCL_PROF_P2P;
  if (pc->mask < 0 && pc->version >= 5) mask |= NCCL_PROF_GROUP_API | NCCL_PROF_COLL_API | NCCL_PROF_P2P_API;
  REXPECT(r, res.errors == 0, "v%d: the plugin found %d errors, the first: %s", pc->version, res.errors,
          res.first_error);
  EXPECT_EQ(r, res.version, pc->version, "the plugin's version");
  EXPECT_EQ(r, res.open, 0, "events never stopped");
  int want[BRAID_TEST_PROFILER_TYPES] = {0};
  want[0] = mask & NCCL_PROF_GROUP ? GROUPS : 0;
  want[1] = mask & NCCL_PROF_COLL ? COLLS : 0;
  want[2] = mask & NCCL_PROF_P2P ? P2PS : 0;
  want[8] = mask & NCCL_PROF_GROUP_API ? GROUPS : 0; /* one per outermost group, lone calls too */
  want[9] = mask & NCCL_PROF_COLL_API ? COLLS : 0;
  want[10] = mask & NCCL_PROF_P2P_API ? P2PS : 0;
  static const char* names[BRAID_TEST_PROFILER_TYPES] = {
      "Group",    "Coll",    "P2p",    "ProxyOp",      "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin",
      "GroupApi", "CollApi", "P2pApi", "KernelLaunch", "CeColl",    "CeSync",    "CeBatch"};
  for (int b = 0; b < BRAID_TEST_PROFILER_TYPES; b++) {
    EXPECT_EQ(r, res.starts[b], want[b], names[b]);
    EXPECT_EQ(r, res.stops[b], want[b], names[b]);
  }
  /* what braid delivered though the mask did not ask for it: only ancestors of what it asks for */
  EXPECT_EQ(r, res.unasked, pc->unasked, "events delivered outside the mask");
  if (mask & NCCL_PROF_COLL) {
    static const int by_func[5] = {2, 1, 1, 1, 5}; /* Broadcast, Reduce, AllGather, ReduceScatter, AllReduce */
    for (int f = 0; f < 5; f++) EXPECT_EQ(r, res.coll_by_func[f], by_func[f], "collectives of one function");
  }
  if (mask & NCCL_PROF_P2P) {
    EXPECT_EQ(r, res.sends, 1, "Send events");
    EXPECT_EQ(r, res.recvs, 1, "Recv events");
  }
  return 0;
}

static void set_env(struct pcase* pc) {
  lib_path(pc->version, pc->path, sizeof(pc->path));
  setenv("NCCL_PROFILER_PLUGIN", pc->path, 1);
  if (pc->mask >= 0) {
    char m[16];
    snprintf(m, sizeof(m), "%d", pc->mask);
    setenv("BRAID_TEST_PROFILER_MASK", m, 1);
  }
  if (pc->fail_init) setenv("BRAID_TEST_PROFILER_FAIL", "1", 1);
  braid_param_reload();
}

START_TEST(test_versions) {
  static const struct {
    int version, nranks;
    enum harness_mode mode;
  } vs[] = {{6, 3, HARNESS_PROCS}, {6, 2, HARNESS_THREADS}, {6, 4, HARNESS_PAIRS}, {5, 2, HARNESS_THREADS},
            {4, 3, HARNESS_PROCS}, {3, 2, HARNESS_THREADS}, {2, 2, HARNESS_PROCS}, {1, 3, HARNESS_THREADS}};
  struct pcase pc = {vs[_i].version, -1, 0, 0, ""};
  set_env(&pc);
  int failed = harness_run(vs[_i].nranks, vs[_i].mode, body, &pc, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "v%d: %d of %d ranks (%s) failed", vs[_i].version, failed, vs[_i].nranks,
                harness_mode_name(vs[_i].mode));
}
END_TEST

START_TEST(test_mask) {
  static const int masks[] = {NCCL_PROF_GROUP, NCCL_PROF_COLL, 0};
  /* Group: GroupApi (10) delivered; Coll: GroupApi, Group and CollApi (10 each); 0: none */
  static const int unasked[] = {GROUPS, GROUPS + GROUPS + COLLS, 0};
  struct pcase pc = {6, masks[_i], unasked[_i], 0, ""};
  set_env(&pc);
  int failed = harness_run(2, _i == 1 ? HARNESS_PROCS : HARNESS_THREADS, body, &pc, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "mask 0x%x: %d ranks failed", masks[_i], failed);
}
END_TEST

/* ---- device mode: stops at kernel completion ------------------------------------------------ */

static int gpu_flag; /* rank 0 checked its open events: rank 1 may launch */

static int live_of(struct harness_rank* r, const char* path, struct braid_test_profiler_result* res) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REXPECT(r, dl != NULL, "%s is not loaded: %s", path, dlerror());
  braid_test_profiler_result_fn fn = (braid_test_profiler_result_fn)dlsym(dl, "braid_test_profiler_live");
  REXPECT(r, fn != NULL, "no braid_test_profiler_live in %s", path);
  REXPECT(r, fn(r->rank, res) == 0, "the plugin has no live context for rank %d", r->rank);
  dlclose(dl);
  return 0;
}

/* Wait (60 s at most) until rank's Group and Coll events have all stopped, with no new call. */
static int wait_stopped(struct harness_rank* r, const char* path, int groups, int colls) {
  struct braid_test_profiler_result res;
  for (int ms = 0; ms < 60000; ms++) {
    if (live_of(r, path, &res)) return 1;
    if (res.stops[0] == groups && res.stops[1] == colls) return 0;
    usleep(1000);
  }
  REXPECT(r, 0, "Group %d/%d, Coll %d/%d stopped after 60 s", res.stops[0], groups, res.stops[1], colls);
  return 1;
}

static int gpu_body(struct harness_rank* r) {
  const struct pcase* pc = r->arg;
  const struct braid_device_ops* d = braid_device();
  REXPECT(r, d != NULL && d == braid_device_fake, "not the fake GPU");
  RCHECK(r, d->set_current(r->rank));
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  float *buf = NULL, host[COUNT];
  RCHECK(r, d->alloc((void**)&buf, COUNT * sizeof(float)));
  for (int i = 0; i < COUNT; i++) host[i] = 1.0f;
  RCHECK(r, d->memcpy_sync(buf, host, sizeof(host)));
  /* A first call on both ranks makes the connections (their setup waits for the peer). */
  RCHECK(r, ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, d->stream_sync(NULL));
  if (wait_stopped(r, pc->path, 1, 1)) return 1;
  if (r->rank == 1)
    for (int ms = 0; ms < 60000 && !__atomic_load_n(&gpu_flag, __ATOMIC_ACQUIRE); ms++) usleep(1000);
  RCHECK(r, ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL));
  if (r->rank == 0) { /* the kernel waits for rank 1's: its events must still be open */
    struct braid_test_profiler_result res;
    int bad = live_of(r, pc->path, &res);
    __atomic_store_n(&gpu_flag, 1, __ATOMIC_RELEASE);
    if (bad) return 1;
    REXPECT(r, res.starts[1] == 2 && res.stops[1] == 1, "Coll events after the launch: %d started, %d stopped",
            res.starts[1], res.stops[1]);
    REXPECT(r, res.starts[0] == 2 && res.stops[0] == 1, "Group events after the launch: %d started, %d stopped",
            res.starts[0], res.stops[0]);
  }
  if (wait_stopped(r, pc->path, 2, 2)) return 1; /* no stream sync: the progress thread stops them */
  RCHECK(r, d->memcpy_sync(host, buf, sizeof(host)));
  REXPECT(r, host[COUNT - 1] == 4.0f, "AllReduce gave %g, expected 4", host[COUNT - 1]);
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(buf, COUNT / 2, ncclFloat32, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclRecv(buf + COUNT / 2, COUNT / 2, ncclFloat32, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  RCHECK(r, d->stream_sync(NULL));
  RCHECK(r, ncclCommDestroy(comm));
  d->free(buf);
  struct braid_test_profiler_result res;
  if (result_of(r, pc->path, &res)) return 1;
  REXPECT(r, res.errors == 0, "the plugin found %d errors, the first: %s", res.errors, res.first_error);
  REXPECT(r, res.open == 0, "%d events never stopped", res.open);
  REXPECT(r, res.starts[0] == 3 && res.starts[1] == 2 && res.starts[2] == 2 && res.sends == 1 && res.recvs == 1,
          "Group %d Coll %d P2p %d (Send %d, Recv %d): expected 3, 2, 2 (1, 1)", res.starts[0], res.starts[1],
          res.starts[2], res.sends, res.recvs);
  return 0;
}

START_TEST(test_gpu) {
  struct pcase pc = {6, NCCL_PROF_GROUP | NCCL_PROF_COLL | NCCL_PROF_P2P, 0, 0, ""};
  set_env(&pc);
  setenv("BRAID_FAKE_GPU", "2", 1);
  unsetenv("BRAID_HOST_MODE");
  braid_param_reload();
  braid_device_reset();
  gpu_flag = 0;
  int failed = harness_run(2, HARNESS_THREADS, gpu_body, &pc, RANK_TIMEOUT_S);
  unsetenv("BRAID_FAKE_GPU");
  braid_param_reload();
  braid_device_reset();
  ck_assert_msg(failed == 0, "device mode: %d of 2 ranks failed", failed);
}
END_TEST

/* ---- refused plugins ------------------------------------------------------------------------ */

static int refused_body(struct harness_rank* r) {
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (run_calls(r, comm)) return 1;
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

static char* slurp(const char* path) {
  FILE* f = fopen(path, "r");
  char* buf = calloc(1, 1 << 20);
  if (f != NULL && buf != NULL) buf[fread(buf, 1, (1 << 20) - 1, f)] = '\0';
  if (f != NULL) fclose(f);
  return buf;
}

START_TEST(test_refused) {
  static const struct {
    int version, fail_init;
    const char* says;
  } cs[] = {
      {0, 0, "is unsupported: it exports no ncclProfiler_v6 .. _v1"},
      {6, 1, "Profiler init failed with error '3' (internal error"},
      {-1, 0, "NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler-braidtest.so could not be loaded"},
  };
  char log[64];
  snprintf(log, sizeof(log), "/tmp/braid-prof-test-%d.log", (int)getpid());
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  ncclResetDebugInit();
  struct pcase pc = {cs[_i].version, -1, 0, cs[_i].fail_init, ""};
  set_env(&pc);
  int failed = harness_run(2, HARNESS_THREADS, refused_body, NULL, RANK_TIMEOUT_S);
  char* text = slurp(log);
  unlink(log);
  ck_assert_msg(failed == 0, "%d ranks failed without the plugin", failed);
  ck_assert_msg(text != NULL && strstr(text, cs[_i].says) != NULL, "no WARN \"%s\" in the log:\n%.2000s", cs[_i].says,
                text ? text : "");
  ck_assert_msg(strstr(text, "WARN") != NULL, "the refusal is not a WARN");
  ck_assert_msg(strstr(text, "Profiler event mask") == NULL, "a refused plugin still set a mask");
  free(text);
}
END_TEST

Suite* profiler_suite(void) {
  Suite* s = suite_create("profiler");
  TCase* tc = tcase_create("versions");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_versions, 0, 8);
  suite_add_tcase(s, tc);
  tc = tcase_create("mask");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_mask, 0, 3);
  suite_add_tcase(s, tc);
  tc = tcase_create("refused");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_refused, 0, 3);
  suite_add_tcase(s, tc);
  tc = tcase_create("gpu");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_gpu);
  suite_add_tcase(s, tc);
  return s;
}
