/*
 * test_launch.c - the launch rules of src/device/launch.c on the fake GPU, against the CUDA
 * behaviours the fake models on request (device.h test hooks):
 *   lazy      a first Send/Recv connects its peers, and the kernel starts at once on a
 *             non-blocking stream while cudaMemcpy on the legacy stream is lagging (its DMA has
 *             not landed: the legacy stream is held): the kernel must see the new connections.
 *   onedev    two communicators of one device in one group: on the legacy stream or on one
 *             stream they are refused (ncclInvalidUsage, no hang); on two blocking streams they
 *             run, although a legacy-stream call between the launches would wait for the first
 *             kernel, which waits for the second.
 *   capture   ncclCommGetAsyncError from another thread while a stream is being captured in
 *             global mode leaves the capture valid; a group mixing a captured stream with one
 *             that is not is refused; a captured launch whose kernel fails is reported by
 *             ncclCommGetAsyncError (replays write their statuses).
 * Every case runs in its own forked child (Check); ranks are ncclCommInitAll communicators.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "core/comm.h"
#include "device/device.h"
#include "nccl.h"

#define N 50000 /* floats per rank */
#define S(x) ((cudaStream_t)(uintptr_t)(x))

static const struct braid_device_ops* fake(int ndev) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%d", ndev);
  setenv("BRAID_FAKE_GPU", buf, 1);
  unsetenv("BRAID_HOST_MODE");
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  ck_assert_ptr_eq(d, braid_device_fake);
  return d;
}

struct ranks {
  const struct braid_device_ops* d;
  ncclComm_t comm[2];
  int dev[2];
  float *buf[2], *out[2];
  float host[N];
};

/* Two communicators (ncclCommInitAll on devs), a buffer pair each with rank r's values. */
static void open_ranks(struct ranks* k, const struct braid_device_ops* d, int dev0, int dev1) {
  k->d = d;
  k->dev[0] = dev0;
  k->dev[1] = dev1;
  ck_assert_int_eq(ncclCommInitAll(k->comm, 2, k->dev), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    ck_assert_int_eq(d->set_current(k->dev[r]), ncclSuccess);
    ck_assert_int_eq(d->alloc((void**)&k->buf[r], N * sizeof(float)), ncclSuccess);
    ck_assert_int_eq(d->alloc((void**)&k->out[r], N * sizeof(float)), ncclSuccess);
    for (int i = 0; i < N; i++) k->host[i] = (float)(r * 1000 + i % 977);
    ck_assert_int_eq(d->setup_copy(k->buf[r], k->host, N * sizeof(float)), ncclSuccess);
  }
}

static void close_ranks(struct ranks* k, int abort) {
  for (int r = 0; r < 2; r++) ck_assert_int_eq(abort ? ncclCommAbort(k->comm[r]) : ncclCommDestroy(k->comm[r]), 0);
  for (int r = 0; r < 2; r++) {
    k->d->set_current(k->dev[r]);
    k->d->free(k->buf[r]);
    k->d->free(k->out[r]);
  }
}

/* Rank r received rank 1 - r's values. */
static void check_exchange(struct ranks* k, const char* what) {
  for (int r = 0; r < 2; r++) {
    k->d->set_current(k->dev[r]);
    ck_assert_int_eq(k->d->setup_copy(k->host, k->out[r], N * sizeof(float)), ncclSuccess);
    for (int i = 0; i < N; i += 997)
      ck_assert_msg(k->host[i] == (float)((1 - r) * 1000 + i % 977), "%s: rank %d [%d] = %g", what, r, i,
                    (double)k->host[i]);
    ncclResult_t st = ncclInProgress;
    ck_assert_int_eq(ncclCommGetAsyncError(k->comm[r], &st), ncclSuccess);
    ck_assert_msg(st == ncclSuccess, "%s: rank %d: async error %s", what, r, ncclGetErrorString(st));
  }
}

/* A Send/Recv exchange between the two ranks on streams s0 and s1, in one group. */
static ncclResult_t exchange(struct ranks* k, cudaStream_t s0, cudaStream_t s1) {
  cudaStream_t s[2] = {s0, s1};
  ncclGroupStart();
  for (int r = 0; r < 2; r++) {
    k->d->set_current(k->dev[r]);
    ncclSend(k->buf[r], N, ncclFloat32, 1 - r, k->comm[r], s[r]);
    ncclRecv(k->out[r], N, ncclFloat32, 1 - r, k->comm[r], s[r]);
  }
  return ncclGroupEnd();
}

static void sync_streams(struct ranks* k, cudaStream_t s0, cudaStream_t s1) {
  cudaStream_t s[2] = {s0, s1};
  for (int r = 0; r < 2; r++) {
    k->d->set_current(k->dev[r]);
    ck_assert_int_eq(k->d->stream_sync(s[r]), ncclSuccess);
  }
}

/* ---- setup copies -------------------------------------------------------------------------- */

START_TEST(test_lazy_connect) {
  static struct ranks k;
  open_ranks(&k, fake(2), 0, 1);
  braid_device_fake_legacy_copies(1);
  for (int r = 0; r < 2; r++) { /* the legacy stream's copies have not landed yet */
    k.d->set_current(r);
    braid_device_fake_hold(NULL, 1);
  }
  ck_assert_int_eq(exchange(&k, S(201), S(202)), ncclSuccess);
  sync_streams(&k, S(201), S(202));
  check_exchange(&k, "first Send/Recv after a lazy connect");
  for (int r = 0; r < 2; r++) {
    k.d->set_current(r);
    braid_device_fake_hold(NULL, 0);
  }
  braid_device_fake_legacy_copies(0);
  close_ranks(&k, 0);
}
END_TEST

/* ---- two communicators of one device --------------------------------------------------------- */

START_TEST(test_one_device) {
  static struct ranks k;
  setenv("BRAID_GPU_SHARING", "1", 1);
  open_ranks(&k, fake(1), 0, 0);
  static const struct {
    uintptr_t s0, s1;
    const char* msg;
  } refused[] = {{0, 0, "the legacy default stream"}, {0, 31, "the legacy default stream"}, {7, 7, "the same stream"}};
  for (int c = 0; c < 3; c++) {
    ncclGroupStart();
    for (int r = 0; r < 2; r++)
      ncclAllReduce(k.buf[r], k.out[r], N, ncclFloat32, ncclSum, k.comm[r], S(r ? refused[c].s1 : refused[c].s0));
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
    ck_assert_msg(strstr(braid_debug_last_error(), refused[c].msg) != NULL, "case %d: %s", c, braid_debug_last_error());
  }
  /* Two blocking streams and cudaMemcpy's legacy-stream behaviour: fine as long as nothing
   * between the launches touches the legacy stream (the Send/Recv connect lazily). */
  braid_device_fake_blocking(S(8), 1);
  braid_device_fake_blocking(S(9), 1);
  braid_device_fake_legacy_copies(1);
  ck_assert_int_eq(exchange(&k, S(8), S(9)), ncclSuccess);
  sync_streams(&k, S(8), S(9));
  braid_device_fake_legacy_copies(0);
  check_exchange(&k, "two ranks of one device on blocking streams");
  close_ranks(&k, 0);
}
END_TEST

/* ---- capture ------------------------------------------------------------------------------------ */

static void* poll_async(void* arg) {
  ncclResult_t st = ncclInProgress;
  ncclCommGetAsyncError(*(ncclComm_t*)arg, &st);
  return NULL;
}

START_TEST(test_capture_poll) {
  static struct ranks k;
  pthread_t t;
  open_ranks(&k, fake(2), 0, 1);
  ck_assert_int_eq(exchange(&k, S(301), S(302)), ncclSuccess); /* its launch buffers stay to be polled */
  sync_streams(&k, S(301), S(302));
  k.d->set_current(0);
  ck_assert_int_eq(braid_device_fake_capture(S(303), 1), ncclSuccess);
  ck_assert_int_eq(pthread_create(&t, NULL, poll_async, &k.comm[0]), 0); /* a watchdog thread */
  pthread_join(t, NULL);
  ck_assert_msg(braid_device_fake_capture(S(303), 0) == ncclSuccess,
                "ncclCommGetAsyncError invalidated a capture in progress: %s", braid_debug_last_error());
  check_exchange(&k, "exchange before the capture");
  close_ranks(&k, 0);
}
END_TEST

START_TEST(test_capture_mixed) {
  static struct ranks k;
  open_ranks(&k, fake(2), 0, 1);
  k.d->set_current(0);
  braid_device_fake_capture(S(401), 1);
  /* two communicators, one stream captured */
  ncclGroupStart();
  for (int r = 0; r < 2; r++) ncclAllReduce(k.buf[r], k.out[r], N, ncclFloat32, ncclSum, k.comm[r], S(r ? 402 : 401));
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "captured"));
  /* one communicator, two streams, one captured */
  ncclGroupStart();
  ncclAllReduce(k.buf[0], k.out[0], N, ncclFloat32, ncclSum, k.comm[0], S(401));
  ncclAllReduce(k.buf[0], k.out[0], N, ncclFloat32, ncclSum, k.comm[0], S(403));
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  braid_device_fake_capture(S(401), 0);
  ck_assert_int_eq(exchange(&k, S(404), S(405)), ncclSuccess); /* nothing was left half-launched */
  sync_streams(&k, S(404), S(405));
  check_exchange(&k, "exchange after the refused groups");
  close_ranks(&k, 0);
}
END_TEST

START_TEST(test_capture_status) {
  static struct ranks k;
  open_ranks(&k, fake(2), 0, 1);
  k.d->set_current(0);
  braid_device_fake_capture(S(501), 1);
  /* rank 0 alone: its (captured) kernel waits for rank 1 until the communicator fails */
  ck_assert_int_eq(ncclAllReduce(k.buf[0], k.out[0], N, ncclFloat32, ncclSum, k.comm[0], S(501)), ncclSuccess);
  struct braid_comm* c = braid_comm_of(k.comm[0]);
  snprintf(c->abort_reason, sizeof(c->abort_reason), "rank 0: test: rank 1 failed");
  __atomic_store_n(&c->abort_flag, BRAID_EXEC_PEER_FAILED, __ATOMIC_RELEASE);
  ck_assert_int_eq(k.d->stream_sync(S(501)), ncclSuccess);
  braid_device_fake_capture(S(501), 0);
  ncclResult_t st = ncclSuccess;
  ck_assert_int_eq(ncclCommGetAsyncError(k.comm[0], &st), ncclSuccess);
  ck_assert_msg(st != ncclSuccess && st != ncclInProgress, "a failed captured kernel reported %s",
                ncclGetErrorString(st));
  close_ranks(&k, 1);
}
END_TEST

Suite* launch_suite(void) {
  Suite* s = suite_create("launch");
  TCase* tc = tcase_create("setup");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_lazy_connect);
  tcase_add_test(tc, test_one_device);
  suite_add_tcase(s, tc);
  tc = tcase_create("capture");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_capture_poll);
  tcase_add_test(tc, test_capture_mixed);
  tcase_add_test(tc, test_capture_status);
  suite_add_tcase(s, tc);
  return s;
}
