/*
 * test_lsa_device.c - the NVLS-style one-shot / two-shot all-reduce in device mode, on the fake
 * GPU (kernels/lsa.h over core/sym/lsa.c's device-memory scratch, mapped to every rank by the
 * window layer): the collective suite's `nvls` cases cover every datatype x op on 2..8 ranks
 * (tests/run.sh runs them with BRAID_FAKE_GPU); here what only device mode has:
 *   scratch   two devices of one process (ncclCommInitAll): the scratch exists, lives in device
 *             memory, its view in pinned memory; one-shot and two-shot results, in and out of
 *             place, with user buffers in device memory; a lone destroy then the other.
 *   fallback  NCCL_P2P_DISABLE=1: no scratch on either rank (the same decision on both); with
 *             NCCL_ALGO=NVLS an all-reduce fails with ncclInvalidUsage, by default it runs on
 *             the ring and is right.
 * Every case runs in its own forked child (Check).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/sym/sym.h"
#include "device/device.h"
#include "nccl.h"

#define N 40000 /* floats per rank: 160 KB, within BRAID_LSA_MAX_BYTES */
#define S(x) ((cudaStream_t)(uintptr_t)(x))

struct two {
  const struct braid_device_ops* d;
  ncclComm_t comm[2];
  float *in[2], *out[2];
  float host[N];
};

static void open_two(struct two* k) {
  int devs[2] = {0, 1};
  setenv("BRAID_FAKE_GPU", "2", 1);
  unsetenv("BRAID_HOST_MODE");
  braid_device_reset();
  k->d = braid_device();
  ck_assert_ptr_eq(k->d, braid_device_fake);
  ck_assert_int_eq(ncclCommInitAll(k->comm, 2, devs), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    ck_assert_int_eq(k->d->set_current(r), ncclSuccess);
    ck_assert_int_eq(k->d->alloc((void**)&k->in[r], N * sizeof(float)), ncclSuccess);
    ck_assert_int_eq(k->d->alloc((void**)&k->out[r], N * sizeof(float)), ncclSuccess);
  }
}

static void fill(struct two* k, int call) {
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < N; i++) k->host[i] = (float)((r + 1) * (i % 101) + call);
    k->d->set_current(r);
    ck_assert_int_eq(k->d->setup_copy(k->in[r], k->host, N * sizeof(float)), ncclSuccess);
  }
}

/* One all-reduce (sum) on both ranks, in one group; its result checked on both. */
static ncclResult_t allreduce(struct two* k, int in_place, int call) {
  fill(k, call);
  ncclGroupStart();
  for (int r = 0; r < 2; r++) {
    k->d->set_current(r);
    ncclAllReduce(k->in[r], in_place ? k->in[r] : k->out[r], N, ncclFloat32, ncclSum, k->comm[r], S(300 + r));
  }
  ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess) return res;
  for (int r = 0; r < 2; r++) {
    k->d->set_current(r);
    ck_assert_int_eq(k->d->stream_sync(S(300 + r)), ncclSuccess);
    ck_assert_int_eq(k->d->setup_copy(k->host, in_place ? k->in[r] : k->out[r], N * sizeof(float)), ncclSuccess);
    for (int i = 0; i < N; i++)
      ck_assert_msg(k->host[i] == (float)(3 * (i % 101) + 2 * call), "call %d (in place %d): rank %d [%d] = %g", call,
                    in_place, r, i, (double)k->host[i]);
    ncclResult_t st = ncclInProgress;
    ck_assert_int_eq(ncclCommGetAsyncError(k->comm[r], &st), ncclSuccess);
    ck_assert_int_eq(st, ncclSuccess);
  }
  return ncclSuccess;
}

static void free_two(struct two* k) {
  for (int r = 0; r < 2; r++) {
    k->d->set_current(r);
    k->d->free(k->in[r]);
    k->d->free(k->out[r]);
  }
}

START_TEST(test_scratch) {
  static struct two k;
  setenv("NCCL_ALGO", "NVLS", 1);
  setenv("BRAID_LSA_VARIANT", _i == 0 ? "ONESHOT" : "TWOSHOT", 1);
  open_two(&k);
  for (int r = 0; r < 2; r++) {
    struct braid_comm* c = braid_comm_of(k.comm[r]);
    ck_assert_ptr_nonnull(c->device);
    ck_assert_msg(c->sym->lsa != NULL, "rank %d: no one-/two-shot scratch on two fake GPUs with P2P", r);
  }
  for (int call = 0; call < 6; call++) ck_assert_int_eq(allreduce(&k, call % 2, call), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(k.comm[0]), ncclSuccess); /* rank 1 still maps its segment */
  ck_assert_int_eq(ncclCommDestroy(k.comm[1]), ncclSuccess);
  free_two(&k);
}
END_TEST

/* _i 0: NCCL_ALGO=NVLS (read at init) leaves no algorithm; 1: the default runs on the ring. */
START_TEST(test_fallback) {
  static struct two k;
  setenv("NCCL_P2P_DISABLE", "1", 1);
  if (_i == 0) setenv("NCCL_ALGO", "NVLS", 1);
  open_two(&k);
  for (int r = 0; r < 2; r++)
    ck_assert_msg(braid_comm_of(k.comm[r])->sym->lsa == NULL, "rank %d: a scratch despite NCCL_P2P_DISABLE=1", r);
  ck_assert_int_eq(allreduce(&k, 0, 1), _i == 0 ? ncclInvalidUsage : ncclSuccess);
  for (int r = 0; r < 2; r++) ck_assert_int_eq(ncclCommDestroy(k.comm[r]), ncclSuccess);
  free_two(&k);
}
END_TEST

Suite* lsa_device_suite(void) {
  Suite* s = suite_create("lsa_device");
  TCase* tc = tcase_create("scratch");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_scratch, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("fallback");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_fallback, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}
