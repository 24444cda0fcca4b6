/*
 * test_lsa_win.c - the one-shot / two-shot all-reduce reading inputs in place from registered
 * windows (kernels/lsa.h steps 2 and 6, core/sym/lsa.c's window table, plan.c's choice):
 *   matrix    host mode, ranks as processes and threads (2..8): every datatype x op (PreMulSum
 *             with a per-rank scalar, Avg included), in and out of place, input at an offset
 *             inside a window of ncclMemAlloc memory; one-shot and two-shot forced
 *             (NCCL_ALGO=NVLS) and the tuner's own choice; each result must have the bits of
 *             the same call staged (input in plain memory), and the segment's counters must say
 *             that exactly the calls lsa.h reads in place staged nothing; "mixed" runs put only
 *             the even ranks' inputs in the window;
 *   lifetime  3 ranks, 300 back-to-back calls whose caller poisons its window input as soon as
 *             the call returns: every result exact (fails when step 6's wait is removed);
 *   fake_gpu  device mode on the fake GPU (one process, 2 and 4 GPUs): inputs in windows of
 *             device memory read in place, rank 0 in a window and rank 1 not, results exact.
 * Every case runs in its own forked child (Check).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "core/comm.h"
#include "core/sym/sym.h"
#include "device/device.h"
#include "harness.h"
#include "nccl.h"

#define HARNESS_TIMEOUT_S 90
#define MAXB 12288           /* bytes per call (past the one-line path's 4 KiB) */
#define WIN_BYTES (4 * MAXB) /* the window: input at an offset, output after it */
#define IN_OFF 192           /* the input's offset in the window (not at its start) */
#define OUT_OFF (2 * MAXB)

struct cfg {
  int nranks;
  enum harness_mode mode;
  const char* variant; /* BRAID_LSA_VARIANT; NULL: NCCL_ALGO unset, the tuner's own choice */
  int mixed;           /* odd ranks' inputs in plain memory */
  int full;            /* every dtype x op (else a few) */
};

static const struct cfg cfgs[] = {
    {2, HARNESS_PROCS, "ONESHOT", 0, 1},   {2, HARNESS_PROCS, "TWOSHOT", 0, 1},   {3, HARNESS_THREADS, "ONESHOT", 0, 1},
    {3, HARNESS_THREADS, "TWOSHOT", 0, 1}, {2, HARNESS_THREADS, "ONESHOT", 1, 1}, {3, HARNESS_PROCS, "TWOSHOT", 1, 1},
    {4, HARNESS_PROCS, "ONESHOT", 0, 0},   {8, HARNESS_THREADS, "TWOSHOT", 0, 0}, {8, HARNESS_PROCS, "ONESHOT", 1, 0},
    {2, HARNESS_PROCS, NULL, 0, 0},        {4, HARNESS_THREADS, NULL, 1, 0},
};
#define NCFGS (sizeof(cfgs) / sizeof(cfgs[0]))

/* Bytes in [0x30, 0x6f]: finite values in every floating type, distinct per rank and call. */
static void fill(char* p, size_t bytes, int rank, int salt) {
  for (size_t i = 0; i < bytes; i++) p[i] = (char)(0x30 + (int)((i * 7 + (size_t)rank * 13 + (size_t)salt * 5) % 64));
}

static int dsize(ncclDataType_t t) {
  static const int s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return s[t];
}

/* One all-reduce of `bytes` of dtype t with op `op` (ncclNumOps: PreMulSum by a scalar of this
 * rank); in place or into out. */
static ncclResult_t one(ncclComm_t comm, int rank, const char* in, char* out, size_t bytes, ncclDataType_t t, int op) {
  size_t count = bytes / (size_t)dsize(t);
  if (op < ncclNumOps) return ncclAllReduce(in, out, count, t, (ncclRedOp_t)op, comm, NULL);
  char scalar[8];
  memset(scalar, 0x38 + rank, sizeof(scalar)); /* a finite value in every type */
  ncclRedOp_t pms;
  ncclResult_t res = ncclRedOpCreatePreMulSum(&pms, scalar, t, ncclScalarHostImmediate, comm);
  if (res != ncclSuccess) return res;
  res = ncclAllReduce(in, out, count, t, pms, comm, NULL);
  ncclRedOpDestroy(pms, comm);
  return res;
}

static int body_matrix(struct harness_rank* r) {
  const struct cfg* c = r->arg;
  ncclComm_t comm;
  char* win = NULL;
  ncclWindow_t w;
  char *pin = malloc(MAXB), *pout = malloc(MAXB), *want = malloc(MAXB), *got = malloc(MAXB);
  REXPECT(r, pin != NULL && pout != NULL && want != NULL && got != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclMemAlloc((void**)&win, WIN_BYTES));
  RCHECK(r, ncclCommWindowRegister(comm, win, WIN_BYTES, &w, NCCL_WIN_COLL_SYMMETRIC));
  struct braid_comm* bc = braid_comm_of(comm);
  REXPECT(r, bc->sym->lsa != NULL, "no one-/two-shot scratch");
  const int in_win = !c->mixed || r->rank % 2 == 0;
  const int forced = c->variant != NULL, oneshot = forced && strcmp(c->variant, "ONESHOT") == 0;
  int calls = 0, read_in_place = 0;
  for (int t = 0; t < ncclNumTypes; t++) {
    for (int op = 0; op <= ncclNumOps; op++) {
      if (!c->full && !((t == ncclFloat32 && (op == ncclSum || op == ncclAvg)) || (t == ncclInt8 && op == ncclProd) ||
                        (t == ncclBfloat16 && op == ncclNumOps)))
        continue;
      for (int ip = 0; ip < 2; ip++) {
        const size_t bytes = MAXB - (size_t)(t * 64); /* sizes vary a little; every size a multiple of 8 */
        const int salt = t * 16 + op * 2 + ip;
        /* staged: plain memory */
        fill(pin, bytes, r->rank, salt);
        RCHECK(r, one(comm, r->rank, pin, ip ? pin : pout, bytes, (ncclDataType_t)t, op));
        memcpy(want, ip ? pin : pout, bytes);
        /* the same call with the input in the window (the even ranks' only, when mixed) */
        char* in = in_win ? win + IN_OFF : pin;
        char* out = ip ? in : in_win ? win + OUT_OFF : pout;
        fill(in, bytes, r->rank, salt);
        uint64_t s0, p0, s1, p1;
        RCHECK(r, braid_lsa_counts(bc, &s0, &p0));
        RCHECK(r, one(comm, r->rank, in, out, bytes, (ncclDataType_t)t, op));
        RCHECK(r, braid_lsa_counts(bc, &s1, &p1));
        memcpy(got, out, bytes);
        REXPECT(r, memcmp(got, want, bytes) == 0,
                "dtype %d op %d %s (%s, variant %s): the result differs from the staged call's", t, op,
                ip ? "in place" : "out of place", in_win ? "in the window" : "staged",
                c->variant ? c->variant : "auto");
        /* PreMulSum stages (its owner's scalar), and so does Avg of floats (PreMulSum by 1/n: core/redop.c) */
        const int pms = op == ncclNumOps || (op == ncclAvg && t >= ncclFloat16);
        const int expect = in_win && !pms && !(oneshot && ip);
        if (forced) {
          REXPECT(r, p1 - p0 == (uint64_t)expect && s1 - s0 == (uint64_t)!expect,
                  "dtype %d op %d %s: %llu calls read in place and %llu staged, expected %d and %d", t, op,
                  ip ? "in place" : "out of place", (unsigned long long)(p1 - p0), (unsigned long long)(s1 - s0),
                  expect, !expect);
        } else {
          REXPECT(r, p1 - p0 <= (uint64_t)expect, "dtype %d op %d: read in place where lsa.h must stage", t, op);
        }
        calls++;
        read_in_place += (int)(p1 - p0);
      }
    }
  }
  REXPECT(r, !forced || !in_win || read_in_place > 0, "no call read its input in place (%d calls)", calls);
  RCHECK(r, ncclCommWindowDeregister(comm, w));
  RCHECK(r, ncclCommDestroy(comm));
  ncclMemFree(win);
  free(pin), free(pout), free(want), free(got);
  return 0;
}

START_TEST(test_matrix) {
  const struct cfg* c = &cfgs[_i];
  if (c->variant != NULL) {
    setenv("NCCL_ALGO", "allreduce:NVLS", 1);
    setenv("BRAID_LSA_VARIANT", c->variant, 1);
  } else {
    unsetenv("NCCL_ALGO");
    unsetenv("BRAID_LSA_VARIANT");
  }
  braid_param_reload();
  ck_assert_int_eq(harness_run(c->nranks, c->mode, body_matrix, (void*)c, HARNESS_TIMEOUT_S), 0);
}
END_TEST

#define NLIFE 300
#define LIFE_COUNT 32768 /* floats: 128 KiB per call */

static int body_lifetime(struct harness_rank* r) {
  ncclComm_t comm;
  float* win = NULL;
  ncclWindow_t w;
  float* out = malloc(LIFE_COUNT * sizeof(float));
  REXPECT(r, out != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclMemAlloc((void**)&win, LIFE_COUNT * sizeof(float)));
  RCHECK(r, ncclCommWindowRegister(comm, win, LIFE_COUNT * sizeof(float), &w, NCCL_WIN_COLL_SYMMETRIC));
  const float tri = (float)(r->nranks * (r->nranks + 1) / 2);
  uint64_t s0, p0, s1, p1;
  RCHECK(r, braid_lsa_counts(braid_comm_of(comm), &s0, &p0));
  int bad = 0;
  for (int k = 0; k < NLIFE; k++) {
    for (int i = 0; i < LIFE_COUNT; i++) win[i] = (float)((r->rank + 1) * (k % 50 + 1));
    RCHECK(r, ncclAllReduce(win, out, LIFE_COUNT, ncclFloat, ncclSum, comm, NULL));
    for (int i = 0; i < LIFE_COUNT; i++) win[i] = -1e6f; /* the caller reuses its buffer at once */
    for (int i = 0; i < LIFE_COUNT && !bad; i++)
      if (out[i] != tri * (float)(k % 50 + 1)) {
        harness_fail(r, "call %d: element %d is %g, expected %g (a peer read the input after the call returned)", k, i,
                     out[i], tri * (float)(k % 50 + 1));
        bad = 1;
      }
  }
  RCHECK(r, braid_lsa_counts(braid_comm_of(comm), &s1, &p1));
  REXPECT(r, p1 - p0 == NLIFE && s1 == s0, "%llu of %d calls read in place, %llu staged", (unsigned long long)(p1 - p0),
          NLIFE, (unsigned long long)(s1 - s0));
  RCHECK(r, ncclCommWindowDeregister(comm, w));
  RCHECK(r, ncclCommDestroy(comm));
  ncclMemFree(win);
  free(out);
  return bad;
}

START_TEST(test_lifetime) {
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", _i == 0 ? "ONESHOT" : "TWOSHOT", 1);
  braid_param_reload();
  ck_assert_int_eq(harness_run(3, HARNESS_PROCS, body_lifetime, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- the fake GPU: device mode's code path on the host ------------------------------------ */

#define FN 20000 /* floats per rank */
#define FMAX 4
#define S(x) ((cudaStream_t)(uintptr_t)(x))

START_TEST(test_fake_gpu) {
  const int n = _i < 2 ? 2 : 4, two = _i % 2;
  static float host[FN];
  int devs[FMAX] = {0, 1, 2, 3};
  char nstr[8];
  ncclComm_t comm[FMAX];
  float *win[FMAX], *plain[FMAX], *out[FMAX];
  ncclWindow_t w[FMAX];
  snprintf(nstr, sizeof(nstr), "%d", n);
  setenv("BRAID_FAKE_GPU", nstr, 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  setenv("BRAID_LSA_VARIANT", two ? "TWOSHOT" : "ONESHOT", 1);
  unsetenv("BRAID_HOST_MODE");
  braid_param_reload();
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  ck_assert_ptr_eq(d, braid_device_fake);
  ck_assert_int_eq(ncclCommInitAll(comm, n, devs), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ck_assert_int_eq(d->set_current(r), ncclSuccess);
    ck_assert_int_eq(d->alloc((void**)&win[r], 2 * FN * sizeof(float)), ncclSuccess);
    ck_assert_int_eq(d->alloc((void**)&plain[r], FN * sizeof(float)), ncclSuccess);
    ck_assert_int_eq(d->alloc((void**)&out[r], FN * sizeof(float)), ncclSuccess);
    ck_assert_ptr_nonnull(braid_comm_of(comm[r])->sym->lsa);
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ck_assert_int_eq(ncclCommWindowRegister(comm[r], win[r], 2 * FN * sizeof(float), &w[r], NCCL_WIN_COLL_SYMMETRIC),
                     ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  const float tri = (float)(n * (n + 1) / 2);
  for (int call = 0; call < 6; call++) {
    const int mixed = call % 3 == 2, in_place = two && call % 2; /* a one-shot in place stages */
    uint64_t s0[FMAX], p0[FMAX];
    ncclGroupStart();
    for (int r = 0; r < n; r++) {
      float* in = mixed && r == 1 ? plain[r] : win[r] + 16 * call; /* at an offset */
      for (int i = 0; i < FN; i++) host[i] = (float)((r + 1) * (i % 101 + call));
      d->set_current(r);
      ck_assert_int_eq(d->setup_copy(in, host, FN * sizeof(float)), ncclSuccess);
      ck_assert_int_eq(braid_lsa_counts(braid_comm_of(comm[r]), &s0[r], &p0[r]), ncclSuccess);
      ncclAllReduce(in, in_place ? in : out[r], FN, ncclFloat32, ncclSum, comm[r], S(400 + r));
    }
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < n; r++) {
      float* in = mixed && r == 1 ? plain[r] : win[r] + 16 * call;
      uint64_t s1, p1;
      d->set_current(r);
      ck_assert_int_eq(d->stream_sync(S(400 + r)), ncclSuccess);
      ck_assert_int_eq(d->setup_copy(host, in_place ? in : out[r], FN * sizeof(float)), ncclSuccess);
      for (int i = 0; i < FN; i++)
        ck_assert_msg(host[i] == tri * (float)(i % 101 + call), "call %d rank %d [%d] = %g", call, r, i,
                      (double)host[i]);
      ck_assert_int_eq(braid_lsa_counts(braid_comm_of(comm[r]), &s1, &p1), ncclSuccess);
      const int expect = !(mixed && r == 1);
      ck_assert_msg(p1 - p0[r] == (uint64_t)expect && s1 - s0[r] == (uint64_t)!expect,
                    "call %d rank %d: %llu read in place, %llu staged", call, r, (unsigned long long)(p1 - p0[r]),
                    (unsigned long long)(s1 - s0[r]));
    }
  }
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommWindowDeregister(comm[r], w[r]), ncclSuccess);
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommDestroy(comm[r]), ncclSuccess);
  for (int r = 0; r < n; r++) {
    d->set_current(r);
    d->free(win[r]), d->free(plain[r]), d->free(out[r]);
  }
}
END_TEST

Suite* lsa_win_suite(void);
Suite* lsa_win_suite(void) {
  Suite* s = suite_create("lsa_win");
  TCase* tc = tcase_create("matrix");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_matrix, 0, NCFGS);
  suite_add_tcase(s, tc);
  tc = tcase_create("lifetime");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_lifetime, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("fake_gpu");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_fake_gpu, 0, 4);
  suite_add_tcase(s, tc);
  return s;
}
