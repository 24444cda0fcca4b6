/*
 * test_gather_store.c - Gather whose senders write into the root's output (kernels/direct.h
 * braid_direct_gather_declare / braid_direct_gather_store): on a direct shm connection the root
 * declares where each step of a receive lands, the sender waits for that declaration, writes
 * its block there (plain stores between threads, process_vm_writev between processes) and the
 * root copies nothing; with no address declared (BRAID_GATHER_STORE=0 on the root, a step below
 * the direct minimum) or a sender that cannot write (process_vm_writev denied, or every
 * cross-memory call denied: the FIFO) the old path runs.
 *
 * 2, 3 and 4 ranks as threads and as processes; every root; in and out of place; a message
 * below the direct minimum, one of a step, and odd ones over several steps; the variable set
 * differently on the root and the senders (each decides alone what it does, so no setting may
 * hang or change the result). Checked: every block at the root, the guard bytes around every
 * buffer, and each sender's buffer unchanged.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "deny_cma.h"
#include "harness.h"
#include "nccl.h"

#define RANK_TIMEOUT_S 120
#define GUARD 64

struct gcase {
  enum harness_mode mode;
  int nranks;
  int deny;       /* seccomp: 0 none, 1 process_vm_writev only, 2 both calls */
  int root_store; /* BRAID_GATHER_STORE on the root of each call */
  int send_store; /* ... and on the other ranks (processes only where they differ) */
};

static const struct gcase cases[] = {
    {HARNESS_THREADS, 2, 0, 1, 1}, {HARNESS_THREADS, 3, 0, 1, 1}, {HARNESS_THREADS, 4, 0, 1, 1},
    {HARNESS_THREADS, 2, 0, 0, 0}, {HARNESS_PROCS, 2, 0, 1, 1},   {HARNESS_PROCS, 3, 0, 1, 1},
    {HARNESS_PROCS, 4, 0, 1, 1},   {HARNESS_PROCS, 2, 0, 0, 0},   {HARNESS_PROCS, 3, 0, 0, 1},
    {HARNESS_PROCS, 3, 0, 1, 0},   {HARNESS_PROCS, 2, 1, 1, 1},   {HARNESS_PROCS, 3, 1, 1, 1},
    {HARNESS_PROCS, 2, 2, 1, 1},
};

static unsigned char pattern(int rank, size_t i, uint32_t seed) {
  return (unsigned char)(rank * 131u + (uint32_t)i * 7u + seed * 13u + (uint32_t)(i >> 8));
}

static void set_store(int on) {
  setenv("BRAID_GATHER_STORE", on ? "1" : "0", 1);
  braid_param_reload();
}

/* One Gather of `bytes` per rank: 0 right, 1 wrong, -1 the call failed. */
static int one_call(struct harness_rank* r, ncclComm_t comm, int root, size_t bytes, int inplace, uint32_t seed) {
  int n = r->nranks, me = r->rank;
  size_t total = bytes * (size_t)n;
  unsigned char* rbuf = NULL; /* the root's output, with guards */
  unsigned char* sbuf = NULL; /* a separate send buffer, with guards */
  if (me == root || inplace) rbuf = malloc(total + 2 * GUARD);
  if (!inplace || me != root) sbuf = malloc(bytes + 2 * GUARD);
  if ((me == root || inplace) && rbuf == NULL) return harness_fail(r, "out of memory"), -1;
  if ((!inplace || me != root) && sbuf == NULL) return free(rbuf), harness_fail(r, "out of memory"), -1;
  if (rbuf) memset(rbuf, 0xa5, total + 2 * GUARD);
  if (sbuf) memset(sbuf, 0x5a, bytes + 2 * GUARD);
  /* in place at the root: its block is already at its place in the output */
  unsigned char* send = inplace && me == root ? rbuf + GUARD + (size_t)me * bytes : sbuf + GUARD;
  for (size_t i = 0; i < bytes; i++) send[i] = pattern(me, i, seed);
  ncclResult_t res = ncclGather(send, me == root ? rbuf + GUARD : NULL, bytes, ncclInt8, root, comm, NULL);
  int ret = 0;
  char msg[256] = "";
  if (res != ncclSuccess) {
    ret = -1;
    snprintf(msg, sizeof(msg), "failed: %s (%s)", ncclGetErrorString(res), ncclGetLastError(comm));
  }
  for (int p = 0; p < n && ret == 0 && me == root; p++)
    for (size_t i = 0; i < bytes; i++)
      if (rbuf[GUARD + (size_t)p * bytes + i] != pattern(p, i, seed)) {
        snprintf(msg, sizeof(msg), "byte %zu of rank %d's block is %u, want %u", i, p,
                 rbuf[GUARD + (size_t)p * bytes + i], pattern(p, i, seed));
        ret = 1;
        break;
      }
  for (int g = 0; g < GUARD && ret == 0; g++)
    if ((rbuf && me == root && (rbuf[g] != 0xa5 || rbuf[GUARD + total + g] != 0xa5)) ||
        (sbuf && (sbuf[g] != 0x5a || sbuf[GUARD + bytes + g] != 0x5a))) {
      snprintf(msg, sizeof(msg), "a guard byte around a buffer was overwritten");
      ret = 1;
    }
  for (size_t i = 0; i < bytes && ret == 0 && me != root; i++)
    if (send[i] != pattern(me, i, seed)) {
      snprintf(msg, sizeof(msg), "the send buffer changed at byte %zu", i);
      ret = 1;
    }
  if (ret) harness_fail(r, "Gather root %d %zu bytes %s: %s", root, bytes, inplace ? "in place" : "out of place", msg);
  free(rbuf);
  free(sbuf);
  return ret;
}

static int body(struct harness_rank* r) {
  const struct gcase* k = r->arg;
  if (k->deny && deny_cma_calls(k->deny == 1) != 0) return harness_fail(r, "cannot install the seccomp filter");
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  /* below the direct minimum (16 KiB), one 64 KiB step, odd sizes over several steps */
  const size_t sizes[] = {4000, 65536, (3u << 20) + 5, (9u << 20) + 4099};
  int wrong = 0;
  uint32_t seed = 3;
  for (int root = 0; root < r->nranks; root++) {
    if (k->mode == HARNESS_PROCS) set_store(r->rank == root ? k->root_store : k->send_store);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
      for (int inplace = 0; inplace < 2; inplace++) {
        int rc = one_call(r, comm, root, sizes[s], inplace, seed++);
        if (rc < 0) return 1; /* out of step: leave without destroying */
        wrong += rc;
      }
  }
  RCHECK(r, ncclCommDestroy(comm));
  return wrong != 0;
}

START_TEST(test_gather) {
  const struct gcase* k = &cases[_i];
  setenv("BRAID_HOST_MODE", "1", 1);
  if (k->mode == HARNESS_THREADS) set_store(k->root_store);
  int failed = harness_run(k->nranks, k->mode, body, (void*)k, RANK_TIMEOUT_S);
  unsetenv("BRAID_GATHER_STORE");
  braid_param_reload();
  ck_assert_msg(failed == 0, "Gather, %d ranks as %s, %s, BRAID_GATHER_STORE root %d others %d: %d ranks failed",
                k->nranks, harness_mode_name(k->mode),
                k->deny == 1   ? "process_vm_writev denied"
                : k->deny == 2 ? "cross-memory attach denied"
                               : "no filter",
                k->root_store, k->send_store, failed);
}
END_TEST

Suite* gather_store_suite(void) {
  Suite* s = suite_create("gather_store");
  TCase* tc = tcase_create("gather");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_gather, 0, (int)(sizeof(cases) / sizeof(cases[0])));
  suite_add_tcase(s, tc);
  return s;
}
