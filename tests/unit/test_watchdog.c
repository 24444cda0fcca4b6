/*
 * test_watchdog.c - the communicator watchdog (src/core/watchdog.c) on device communicators,
 * run on the fake GPU (BRAID_FAKE_GPU: kernels run on host threads, device memory is host
 * memory in shared segments). Host-mode cases of the same promises are in test_net.c (kill,
 * timeout).
 *
 * TCases:
 *   kill     kill -9 of one rank while device-mode all-reduces run (3 ranks, one node, a fake
 *            GPU each; P2P between the GPUs, and shared memory with NCCL_P2P_DISABLE=1): every
 *            survivor's kernels stop within 30 s, ncclCommGetAsyncError reports a remote or
 *            system error, the last error names the dead rank, and the next call fails naming
 *            it too.
 *   timeout  BRAID_TIMEOUT=5 with a rank that never calls (2 ranks, P2P and shared memory):
 *            the other rank's kernel stops after about 5 s and its error names the rank,
 *            channel and step it waited for.
 * Before the watchdog served device communicators both hang (the survivors' kernels spin until
 * the harness kills them): docs/notes/2026-12-01-transport-boundary.md.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "harness.h"
#include "nccl.h"

void braid_param_reload(void); /* src/base/param.c: re-read the environment (test hook) */

#define HARNESS_TIMEOUT_S 60
#define TCASE_TIMEOUT_S 120
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Fake GPUs for every rank of the run, one node, P2P on or off. In the test process, before
 * harness_run: the ranks inherit it. */
static void env_devices(int nranks, int p2p_disable) {
  char n[16];
  snprintf(n, sizeof(n), "%d", nranks);
  setenv("BRAID_FAKE_GPU", n, 1);
  unsetenv("BRAID_HOST_MODE");
  unsetenv("NCCL_HOSTID");
  unsetenv("NCCL_SHM_DISABLE");
  if (p2p_disable)
    setenv("NCCL_P2P_DISABLE", "1", 1);
  else
    unsetenv("NCCL_P2P_DISABLE");
  setenv("NCCL_ALGO", "Ring", 1); /* no tree connections at first use: the waits are the kernels' */
  braid_device_reset();
}

static void env_clear(void) {
  unsetenv("BRAID_FAKE_GPU");
  unsetenv("NCCL_P2P_DISABLE");
  unsetenv("NCCL_ALGO");
  unsetenv("BRAID_TIMEOUT");
  braid_device_reset();
}

/* A device communicator on fake GPU `rank`; 1 (after harness_fail) when it cannot be had. */
static int dev_comm(struct harness_rank* r, ncclComm_t* comm_p) {
  const struct braid_device_ops* d = braid_device();
  int dev = -1;
  if (d == NULL) return harness_fail(r, "BRAID_FAKE_GPU is set but there is no device layer");
  RCHECK(r, d->set_current(r->rank));
  RCHECK(r, ncclCommInitRank(comm_p, r->nranks, r->id, r->rank));
  RCHECK(r, ncclCommCuDevice(*comm_p, &dev));
  REXPECT(r, dev == r->rank, "the communicator is on device %d, expected %d", dev, r->rank);
  return 0;
}

/* ---- kill -9 during device-mode all-reduces -------------------------------------------------- */

struct kill_case {
  int victim;
  int p2p_disable;
  const char* name;
};

static const struct kill_case kill_cases[] = {
    {1, 0, "P2P, the middle rank dies"},
    {0, 0, "P2P, rank 0 dies"},
    {2, 1, "shared memory, the last rank dies"},
};

#define KILL_RANKS 3
#define KILL_COUNT (1 << 18) /* floats: 1 MiB per call */
#define KILL_CALLS 64

static char pid_file[256];

static int body_kill(struct harness_rank* r) {
  const struct kill_case* k = r->arg;
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm;
  float* buf = NULL;
  char name[32];
  if (dev_comm(r, &comm)) return 1;
  RCHECK(r, ncclMemAlloc((void**)&buf, KILL_COUNT * sizeof(float)));
  /* Everyone is up and half the calls are done before the victim goes. */
  for (int i = 0; i < KILL_CALLS / 2; i++)
    RCHECK(r, ncclAllReduce(buf, buf, KILL_COUNT, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, d->stream_sync(NULL));
  if (r->rank == k->victim) {
    FILE* f = fopen(pid_file, "w"); /* its fake device memory outlives it: the test removes it */
    if (f != NULL) fprintf(f, "%d\n", (int)getpid()), fclose(f);
    for (int i = KILL_CALLS / 2; i < KILL_CALLS; i++)
      ncclAllReduce(buf, buf, KILL_COUNT, ncclFloat, ncclSum, comm, NULL);
    usleep(2000); /* its kernels are under way */
    raise(SIGKILL);
  }
  double t0 = now_s();
  ncclResult_t launched = ncclSuccess;
  for (int i = KILL_CALLS / 2; i < KILL_CALLS && launched == ncclSuccess; i++)
    launched = ncclAllReduce(buf, buf, KILL_COUNT, ncclFloat, ncclSum, comm, NULL); /* fails once failed */
  RCHECK(r, d->stream_sync(NULL));
  double took = now_s() - t0;
  ncclResult_t async = ncclSuccess;
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  const char* msg = ncclGetLastError(comm);
  snprintf(name, sizeof(name), "rank %d (host", k->victim);
  REXPECT(r, async == ncclRemoteError || async == ncclSystemError,
          "with rank %d killed ncclCommGetAsyncError gave %d (%s), expected a remote or system error", k->victim,
          (int)async, ncclGetErrorString(async));
  REXPECT(r, took < 30.0, "the kernels took %.1f s to stop", took);
  REXPECT(r, strstr(msg, name) != NULL, "the error does not name the dead %s ...): %s", name, msg);
  ncclResult_t next = ncclAllReduce(buf, buf, KILL_COUNT, ncclFloat, ncclSum, comm, NULL);
  msg = ncclGetLastError(comm);
  REXPECT(r, next != ncclSuccess, "a call after the failure succeeded");
  REXPECT(r, strstr(msg, name) != NULL, "the next call's error does not name the dead %s ...): %s", name, msg);
  RCHECK(r, ncclCommAbort(comm));
  ncclMemFree(buf);
  /* Stay a while: a survivor that exits at once is a dead peer to a slower one, which must
   * still blame the victim (the first death is the cause). */
  sleep(3);
  return 0;
}

/* The victim's fake device memory (braid-fakegpu-<pid>-*) stays in /dev/shm; a real GPU
 * frees it with the process. */
static void victim_segments_remove(void) {
  FILE* f = fopen(pid_file, "r");
  int pid = 0;
  if (f == NULL) return;
  if (fscanf(f, "%d", &pid) != 1) pid = 0;
  fclose(f);
  unlink(pid_file);
  if (pid <= 0) return;
  char prefix[64], path[512];
  snprintf(prefix, sizeof(prefix), "braid-fakegpu-%d-", pid);
  DIR* dir = opendir("/dev/shm");
  if (dir == NULL) return;
  for (struct dirent* e; (e = readdir(dir)) != NULL;) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
    unlink(path);
  }
  closedir(dir);
}

START_TEST(test_kill) {
  const struct kill_case* k = &kill_cases[_i];
  snprintf(pid_file, sizeof(pid_file), "/tmp/braid-watchdog-victim-%d", (int)getpid());
  env_devices(KILL_RANKS, k->p2p_disable);
  int failed = harness_run(KILL_RANKS, HARNESS_PROCS, body_kill, (void*)k, HARNESS_TIMEOUT_S);
  victim_segments_remove();
  env_clear();
  ck_assert_msg(failed == 1, "kill of rank %d (%s): %d processes failed (only the victim should)", k->victim, k->name,
                failed);
}
END_TEST

/* ---- BRAID_TIMEOUT with a rank that never calls --------------------------------------------- */

static int body_timeout(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm;
  float* buf = NULL;
  if (dev_comm(r, &comm)) return 1;
  RCHECK(r, ncclMemAlloc((void**)&buf, 1024 * sizeof(float)));
  if (r->rank == 1) {
    sleep(12); /* never calls */
    RCHECK(r, ncclCommAbort(comm));
    ncclMemFree(buf);
    return 0;
  }
  double t0 = now_s();
  RCHECK(r, ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL)); /* launched */
  RCHECK(r, d->stream_sync(NULL));
  double took = now_s() - t0;
  ncclResult_t async = ncclSuccess;
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, async == ncclSystemError, "ncclCommGetAsyncError gave %d (%s), expected ncclSystemError", (int)async,
          ncclGetErrorString(async));
  REXPECT(r, took >= 4.5 && took < 15.0, "the kernel stopped after %.1f s with BRAID_TIMEOUT=5", took);
  REXPECT(r,
          strstr(msg, "rank 0: BRAID_TIMEOUT=5") != NULL &&
              strstr(msg, "channel 0 waits for step 0 from rank 1 (host") != NULL,
          "the error does not name rank, channel and step: %s", msg);
  RCHECK(r, ncclCommAbort(comm));
  ncclMemFree(buf);
  return 0;
}

START_TEST(test_timeout) {
  env_devices(2, _i);
  setenv("BRAID_TIMEOUT", "5", 1);
  braid_param_reload();
  int failed = harness_run(2, HARNESS_PROCS, body_timeout, NULL, HARNESS_TIMEOUT_S);
  env_clear();
  ck_assert_msg(failed == 0, "BRAID_TIMEOUT on a device communicator (%s): %d rank(s) failed",
                _i ? "shared memory" : "P2P", failed);
}
END_TEST

Suite* watchdog_suite(void) {
  Suite* s = suite_create("watchdog");
  TCase* tc = tcase_create("kill");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_kill, 0, NELEMS(kill_cases));
  suite_add_tcase(s, tc);
  tc = tcase_create("timeout");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_timeout, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}
