/*
 * test_device.c - braid on a device, through the fake GPU (BRAID_FAKE_GPU, src/device/device_fake.c):
 * device selection, fake device memory and IPC handles, stream and event ordering, and
 * communicators whose collectives run as kernel launches (src/device/launch.c) on streams: every
 * collective for a few datatypes, ops and protocols with 2 and 4 processes, 2 ranks of one
 * process (ncclCommInitAll), the overflow path for work items, asynchronous return (a held
 * stream runs nothing until released), two streams in one group, non-blocking communicators,
 * abort of a kernel that waits for an absent peer, buffers of captured launches (a stream the
 * fake reports as capturing), the duplicate-GPU rule, and one rank (copies without a kernel,
 * computing operators over many blocks).
 *
 * Each case sets the environment first and calls braid_device_reset(): Check runs every test
 * in a forked child, and harness.h forks the ranks from there.
 */
#include <check.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "core/group.h"
#include "core/redop.h"
#include "device/device.h"
#include "device/launch.h"
#include "harness.h"
#include "nccl.h"

#define RANK_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 300

static const struct braid_device_ops* use_fake(int ndev) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%d", ndev);
  setenv("BRAID_FAKE_GPU", buf, 1);
  braid_device_reset();
  return braid_device();
}

/* ---- selection, memory, streams ------------------------------------------------------------ */

START_TEST(test_select) {
  unsetenv("BRAID_FAKE_GPU");
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  ck_assert(d == NULL || d == braid_device_cuda); /* no driver here: NULL */
  const struct braid_device_ops* f = use_fake(3);
  ck_assert_ptr_eq(f, braid_device_fake);
  int n = 0, cur = -1;
  ck_assert_int_eq(f->count(&n), ncclSuccess);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(f->set_current(2), ncclSuccess);
  ck_assert_int_eq(f->get_current(&cur), ncclSuccess);
  ck_assert_int_eq(cur, 2);
  ck_assert_int_eq(f->set_current(3), ncclInvalidArgument);
  int64_t b0, b1;
  char s0[32];
  ck_assert_int_eq(f->bus_id(0, &b0, s0, sizeof(s0)), ncclSuccess);
  ck_assert_int_eq(f->bus_id(1, &b1, NULL, 0), ncclSuccess);
  ck_assert_str_eq(s0, "0000:1b:00.0");
  ck_assert(b0 != b1 && b0 > 0);
  setenv("BRAID_HOST_MODE", "1", 1);
  braid_device_reset();
  ck_assert_ptr_null(braid_device());
  unsetenv("BRAID_HOST_MODE");
}
END_TEST

/* Fake device allocations of this process still in /dev/shm. */
static int count_my_segments(void) {
  char pattern[64];
  glob_t g;
  snprintf(pattern, sizeof(pattern), "/dev/shm/braid-fakegpu-%d-*", (int)getpid());
  int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  globfree(&g);
  return n;
}

START_TEST(test_fake_memory) {
  const struct braid_device_ops* d = use_fake(2);
  int* p = NULL;
  int kind = -1, dev = -2;
  ck_assert_int_eq(d->alloc((void**)&p, 4096), ncclSuccess);
  ck_assert_int_eq(p[1000], 0); /* zeroed */
  ck_assert_int_eq(d->pointer_kind(p + 10, &kind, &dev), ncclSuccess);
  ck_assert_int_eq(kind, BRAID_MEM_DEVICE);
  ck_assert_int_eq(dev, 0);
  int local = 0;
  ck_assert_int_eq(d->pointer_kind(&local, &kind, &dev), ncclSuccess);
  ck_assert_int_eq(kind, BRAID_MEM_HOST);
  /* Another process maps the allocation through the handle and writes into it. */
  struct braid_ipc_handle h;
  ck_assert_int_eq(d->ipc_export(p + 16, &h), ncclSuccess);
  pid_t pid = fork();
  if (pid == 0) {
    int* q = NULL;
    if (d->ipc_import(&h, (void**)&q) != ncclSuccess) _exit(1);
    q[0] = 1234;
    d->ipc_close(q);
    _exit(0);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ck_assert_int_eq(p[16], 1234);
  d->free(p);
  ck_assert_int_eq(count_my_segments(), 0);
}
END_TEST

START_TEST(test_fake_streams) {
  const struct braid_device_ops* d = use_fake(1);
  cudaStream_t s1 = (cudaStream_t)1, s2 = (cudaStream_t)2;
  int src = 7, mid = 0, dst = 0, done = -1;
  braid_event_t ev;
  ck_assert_int_eq(d->event_create(&ev), ncclSuccess);
  /* s1 held: its copy waits; s2 waits for s1's event, so its copy must see the first one. */
  ck_assert_int_eq(braid_device_fake_hold(s1, 1), ncclSuccess);
  ck_assert_int_eq(d->memcpy_async(&mid, &src, sizeof(int), s1), ncclSuccess);
  ck_assert_int_eq(d->event_record(ev, s1), ncclSuccess);
  ck_assert_int_eq(d->stream_wait_event(s2, ev), ncclSuccess);
  ck_assert_int_eq(d->memcpy_async(&dst, &mid, sizeof(int), s2), ncclSuccess);
  ck_assert_int_eq(d->event_query(ev, &done), ncclSuccess);
  ck_assert_int_eq(done, 0);
  ck_assert_int_eq(mid, 0);
  ck_assert_int_eq(braid_device_fake_hold(s1, 0), ncclSuccess);
  ck_assert_int_eq(d->stream_sync(s2), ncclSuccess);
  ck_assert_int_eq(dst, 7);
  ck_assert_int_eq(d->event_query(ev, &done), ncclSuccess);
  ck_assert_int_eq(done, 1);
  d->event_destroy(ev);
}
END_TEST

/* ---- collectives through launches ---------------------------------------------------------- */

struct coll_case {
  const char* name;
  int nranks, mode, ndev;
  const char* proto; /* NCCL_PROTO, NULL: tuner's choice */
  size_t count;
  int inline_works; /* 0: BRAID_WORK_INLINE=0 (overflow buffer) */
  int group_calls;  /* > 1: that many AllReduces in one group (overflow by count) */
};

static double in_val(int rank, size_t i) {
  return (double)((rank + 1) * (int)(i % 5 + 1));
}

static void fill(void* buf, int dtype, size_t n, int rank, size_t base) {
  for (size_t i = 0; i < n; i++) {
    double v = in_val(rank, base + i);
    switch (dtype) {
      case ncclFloat32:
        ((float*)buf)[i] = (float)v;
        break;
      case ncclFloat64:
        ((double*)buf)[i] = v;
        break;
      case ncclInt32:
        ((int32_t*)buf)[i] = (int32_t)v;
        break;
      default:
        ((uint8_t*)buf)[i] = (uint8_t)v;
        break;
    }
  }
}
static double get(const void* buf, int dtype, size_t i) {
  switch (dtype) {
    case ncclFloat32:
      return ((const float*)buf)[i];
    case ncclFloat64:
      return ((const double*)buf)[i];
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    default:
      return ((const uint8_t*)buf)[i];
  }
}
static double reduce_all(int op, int nranks, size_t i) {
  double acc = in_val(0, i);
  for (int r = 1; r < nranks; r++) {
    double v = in_val(r, i);
    acc = op == ncclSum ? acc + v : op == ncclMax ? (v > acc ? v : acc) : (v < acc ? v : acc);
  }
  return acc;
}

/* One collective on device buffers; the call returns before the kernel runs (held stream). */
static int run_one(struct harness_rank* r, const struct braid_device_ops* d, ncclComm_t comm, int func, int dtype,
                   int op, size_t count) {
  int n = r->nranks, me = r->rank, root = n - 1, bad = 0;
  size_t es = dtype == ncclFloat64 ? 8 : dtype == ncclUint8 ? 1 : 4;
  size_t in_n = func == 3 ? count * n : count, out_n = func == 2 ? count * n : count;
  char *in = NULL, *out = NULL, *host = malloc((in_n + out_n) * es + 8);
  cudaStream_t s = (cudaStream_t)(uintptr_t)(100 + me);
  if (d->alloc((void**)&in, in_n * es) != ncclSuccess || d->alloc((void**)&out, out_n * es) != ncclSuccess)
    return harness_fail(r, "device alloc");
  fill(host, dtype, in_n, me, 0);
  d->memcpy_sync(in, host, in_n * es);
  memset(host, 0xee, out_n * es);
  d->memcpy_sync(out, host, out_n * es);
  /* The kernels run on the caller's stream; the NULL stream is held too, so a launch that
   * landed there by mistake could not complete before the check below either. */
  braid_device_fake_hold(s, 1);
  braid_device_fake_hold(NULL, 1);
  ncclResult_t res;
  switch (func) {
    case 0:
      res = ncclAllReduce(in, out, count, dtype, op, comm, s);
      break;
    case 1:
      res = ncclBroadcast(in, out, count, dtype, root, comm, s);
      break;
    case 2:
      res = ncclAllGather(in, out, count, dtype, comm, s);
      break;
    case 3:
      res = ncclReduceScatter(in, out, count, dtype, op, comm, s);
      break;
    default:
      res = ncclReduce(in, out, count, dtype, op, 0, comm, s);
      break;
  }
  if (res != ncclSuccess) return harness_fail(r, "func %d: %s", func, ncclGetErrorString(res));
  /* Nothing ran yet: the call returned after the launch. */
  d->memcpy_sync(host, out, es);
  if (count > 0 && (unsigned char)host[0] != 0xee)
    bad = harness_fail(r, "func %d: output written before the kernel ran", func);
  braid_device_fake_hold(s, 0);
  braid_device_fake_hold(NULL, 0);
  d->stream_sync(s);
  d->stream_sync(NULL);
  d->memcpy_sync(host, out, out_n * es);
  for (size_t i = 0; i < out_n && !bad; i++) {
    double want;
    if (func == 0)
      want = reduce_all(op, n, i);
    else if (func == 1)
      want = in_val(root, i);
    else if (func == 2)
      want = in_val((int)(i / count), i % count);
    else if (func == 3)
      want = reduce_all(op, n, me * count + i);
    else if (me == 0)
      want = reduce_all(op, n, i);
    else
      break;
    if (get(host, dtype, i) != want)
      bad = harness_fail(r, "func %d dtype %d op %d count %zu: [%zu] = %g, want %g", func, dtype, op, count, i,
                         get(host, dtype, i), want);
  }
  d->free(in);
  d->free(out);
  free(host);
  return bad;
}

static ncclComm_t init_on_device(struct harness_rank* r, const struct braid_device_ops* d, int ndev) {
  ncclComm_t comm = NULL;
  if (d->set_current(r->rank % ndev) != ncclSuccess) return NULL;
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (res != ncclSuccess) {
    harness_fail(r, "init: %s", ncclGetErrorString(res));
    return NULL;
  }
  return comm;
}

static int coll_body(struct harness_rank* r) {
  const struct coll_case* c = r->arg;
  const struct braid_device_ops* d = braid_device();
  if (d == NULL) return harness_fail(r, "no fake device");
  ncclComm_t comm = init_on_device(r, d, c->ndev);
  int dev = -1, bad = 0;
  if (comm == NULL) return 1;
  if (ncclCommCuDevice(comm, &dev) != ncclSuccess || dev != r->rank % c->ndev)
    bad = harness_fail(r, "ncclCommCuDevice says %d", dev);
  static const int dtypes[] = {ncclFloat32, ncclInt32, ncclFloat64, ncclUint8};
  static const int ops[] = {ncclSum, ncclMax, ncclMin};
  for (int f = 0; f < 5 && !bad; f++)
    for (int t = 0; t < 4 && !bad; t++) bad = run_one(r, d, comm, f, dtypes[t], ops[(f + t) % 3], c->count);
  if (ncclCommDestroy(comm) != ncclSuccess) bad = harness_fail(r, "destroy");
  return bad;
}

/* Many collectives in one group: more items than fit in the kernel arguments. */
static int group_body(struct harness_rank* r) {
  const struct coll_case* c = r->arg;
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm = init_on_device(r, d, c->ndev);
  int k = c->group_calls, bad = 0;
  size_t n = c->count, m = 1000;
  size_t host_n = n * k > m * r->nranks ? n * k : m * r->nranks;
  float *buf = NULL, *host = malloc(host_n * sizeof(float));
  if (comm == NULL) return 1;
  d->alloc((void**)&buf, n * k * sizeof(float));
  fill(host, ncclFloat32, n * k, r->rank, 0);
  d->memcpy_sync(buf, host, n * k * sizeof(float));
  ncclGroupStart();
  for (int i = 0; i < k; i++) ncclAllReduce(buf + i * n, buf + i * n, n, ncclFloat32, ncclSum, comm, NULL);
  if (ncclGroupEnd() != ncclSuccess) bad = harness_fail(r, "group");
  d->stream_sync(NULL);
  d->memcpy_sync(host, buf, n * k * sizeof(float));
  for (size_t i = 0; i < n * k && !bad; i++)
    if (host[i] != (float)reduce_all(ncclSum, r->nranks, i)) bad = harness_fail(r, "[%zu] = %g", i, host[i]);
  /* AlltoAll: sends and receives, their ops in device memory. */
  float *a = NULL, *b = NULL;
  d->alloc((void**)&a, m * r->nranks * sizeof(float));
  d->alloc((void**)&b, m * r->nranks * sizeof(float));
  fill(host, ncclFloat32, m * r->nranks, r->rank, 0);
  d->memcpy_sync(a, host, m * r->nranks * sizeof(float));
  ncclResult_t res = ncclAlltoAll(a, b, m, ncclFloat32, comm, NULL);
  if (res != ncclSuccess) bad = harness_fail(r, "alltoall: %s (%s)", ncclGetErrorString(res), ncclGetLastError(comm));
  d->stream_sync(NULL);
  d->memcpy_sync(host, b, m * r->nranks * sizeof(float));
  for (int p = 0; p < r->nranks && !bad; p++)
    for (size_t i = 0; i < m && !bad; i++)
      if (host[p * m + i] != (float)in_val(p, r->rank * m + i)) bad = harness_fail(r, "a2a from %d [%zu]", p, i);
  d->free(a);
  d->free(b);
  d->free(buf);
  free(host);
  ncclCommDestroy(comm);
  return bad;
}

static const struct coll_case coll_cases[] = {
    {"2 procs", 2, HARNESS_PROCS, 2, NULL, 1031, 1, 1},
    {"4 procs Simple", 4, HARNESS_PROCS, 4, "Simple", 70001, 1, 1},
    {"3 procs LL", 3, HARNESS_PROCS, 3, "LL", 513, 1, 1},
    {"2 procs LL128 overflow", 2, HARNESS_PROCS, 2, "LL128", 4099, 0, 1},
    {"2 procs large", 2, HARNESS_PROCS, 2, "Simple", (1 << 20) + 3, 1, 1},
    {"2 procs group of 40", 2, HARNESS_PROCS, 2, NULL, 257, 1, 40},
    {"4 procs group of 40 overflow", 4, HARNESS_PROCS, 4, NULL, 33, 0, 40},
};

START_TEST(test_coll) {
  const struct coll_case* c = &coll_cases[_i];
  if (c->proto) setenv("NCCL_PROTO", c->proto, 1);
  if (!c->inline_works) setenv("BRAID_WORK_INLINE", "0", 1);
  use_fake(c->ndev);
  int failed = harness_run(c->nranks, c->mode, c->group_calls > 1 ? group_body : coll_body, (void*)c, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "case %s: %d ranks failed", c->name, failed);
}
END_TEST

/* ---- one process, several devices ---------------------------------------------------------- */

START_TEST(test_initall) {
  const struct braid_device_ops* d = use_fake(2);
  ncclComm_t comms[2];
  ck_assert_int_eq(ncclCommInitAll(comms, 2, NULL), ncclSuccess);
  float* buf[2];
  size_t n = 100003;
  float* host = malloc(n * sizeof(float));
  for (int r = 0; r < 2; r++) {
    int dev = -1;
    ck_assert_int_eq(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    ck_assert_int_eq(dev, r);
    d->set_current(r);
    ck_assert_int_eq(d->alloc((void**)&buf[r], n * sizeof(float)), ncclSuccess);
    fill(host, ncclFloat32, n, r, 0);
    d->memcpy_sync(buf[r], host, n * sizeof(float));
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    ck_assert_int_eq(ncclAllReduce(buf[r], buf[r], n, ncclFloat32, ncclSum, comms[r], NULL), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    d->set_current(r);
    ck_assert_int_eq(d->stream_sync(NULL), ncclSuccess);
    d->memcpy_sync(host, buf[r], n * sizeof(float));
    for (size_t i = 0; i < n; i++) ck_assert_float_eq(host[i], (float)reduce_all(ncclSum, 2, i));
  }
  for (int r = 0; r < 2; r++) ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
  for (int r = 0; r < 2; r++) { /* fake device memory is a named segment: left in /dev/shm otherwise */
    d->set_current(r);
    d->free(buf[r]);
  }
  free(host);
}
END_TEST

/* Two calls on two streams in one group (tasks built directly: the public calls record their
 * stream once coll_api.c passes it). The kernel runs on the first task's stream after what
 * the second stream had queued; later work on the second stream waits for the kernel. */
static int streams_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t h = init_on_device(r, d, 2);
  struct braid_comm* comm = braid_comm_of(h);
  cudaStream_t sa = (cudaStream_t)11, sb = (cudaStream_t)12;
  size_t n = 4096;
  float *x = NULL, *y = NULL, *z = NULL, *host = malloc(2 * n * sizeof(float));
  int bad = 0;
  if (h == NULL) return 1;
  d->alloc((void**)&x, 2 * n * sizeof(float));
  d->alloc((void**)&y, 2 * n * sizeof(float));
  d->alloc((void**)&z, 2 * n * sizeof(float));
  fill(host, ncclFloat32, 2 * n, r->rank, 0);
  braid_device_fake_hold(sb, 1);
  d->memcpy_async(x, host, 2 * n * sizeof(float), sb); /* prior work on sb: the inputs */
  struct braid_task* t[2];
  for (int i = 0; i < 2; i++) {
    t[i] = calloc(1, sizeof(*t[i]));
    t[i]->comm = comm;
    t[i]->kind = BRAID_TASK_COLL;
    t[i]->func = BRAID_FUNC_AllReduce;
    t[i]->sendbuff = x + i * n;
    t[i]->recvbuff = y + i * n;
    t[i]->count = n;
    t[i]->dtype = ncclFloat32;
    t[i]->op = ncclSum;
    t[i]->stream = i == 0 ? sa : sb;
    braid_redop_resolve(comm, "test", ncclSum, ncclFloat32, &t[i]->redop);
  }
  ncclGroupStart();
  braid_group_add(t[0]);
  braid_group_add(t[1]);
  if (ncclGroupEnd() != ncclSuccess) bad = harness_fail(r, "group");
  d->memcpy_async(z, y, 2 * n * sizeof(float), sb); /* later work on sb: after the kernel */
  braid_device_fake_hold(sb, 0);
  d->stream_sync(sb);
  d->memcpy_sync(host, z, 2 * n * sizeof(float));
  for (size_t i = 0; i < 2 * n && !bad; i++)
    if (host[i] != (float)reduce_all(ncclSum, r->nranks, i)) bad = harness_fail(r, "[%zu] = %g", i, host[i]);
  d->free(x);
  d->free(y);
  d->free(z);
  free(host);
  ncclCommDestroy(h);
  return bad;
}

START_TEST(test_streams) {
  use_fake(2);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, streams_body, NULL, RANK_TIMEOUT_S), 0);
}
END_TEST

static int nonblocking_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  d->set_current(r->rank);
  ncclResult_t res = ncclCommInitRankConfig(&comm, r->nranks, r->id, r->rank, &config), st = ncclInProgress;
  if (res != ncclSuccess && res != ncclInProgress) return harness_fail(r, "init: %s", ncclGetErrorString(res));
  while (st == ncclInProgress)
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return harness_fail(r, "get async error");
  if (st != ncclSuccess) return harness_fail(r, "init finished with %s", ncclGetErrorString(st));
  int bad = run_one(r, d, comm, 0, ncclFloat32, ncclSum, 10007);
  if (ncclCommGetAsyncError(comm, &st) != ncclSuccess || st != ncclSuccess) bad = harness_fail(r, "async error");
  if (ncclCommFinalize(comm) != ncclSuccess) bad = harness_fail(r, "finalize");
  ncclCommDestroy(comm);
  return bad;
}

START_TEST(test_nonblocking) {
  use_fake(2);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, nonblocking_body, NULL, RANK_TIMEOUT_S), 0);
}
END_TEST

/* Rank 0 runs a collective rank 1 never joins: the kernel waits. Revoke raises the flag the
 * kernel polls, the status comes back as an error naming the rank; abort then frees. */
static int abort_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm = init_on_device(r, d, 2);
  if (comm == NULL) return 1;
  if (r->rank == 1) return ncclCommAbort(comm) == ncclSuccess ? 0 : harness_fail(r, "abort");
  float* buf = NULL;
  ncclResult_t st = ncclSuccess;
  d->alloc((void**)&buf, 1 << 20);
  if (ncclAllReduce(buf, buf, 1 << 18, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
    return harness_fail(r, "launch");
  if (ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) != ncclSuccess) return harness_fail(r, "revoke");
  d->stream_sync(NULL);
  ncclCommGetAsyncError(comm, &st);
  if (st == ncclSuccess) return harness_fail(r, "the aborted kernel's status was not reported");
  if (strstr(braid_debug_last_error(), "rank 0") == NULL)
    return harness_fail(r, "error does not name the rank: %s", braid_debug_last_error());
  if (ncclCommAbort(comm) != ncclSuccess) return harness_fail(r, "abort");
  d->free(buf);
  return 0;
}

/* The same without revoke: ncclCommAbort itself ends the stuck kernel. */
static int abort_direct_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm = init_on_device(r, d, 2);
  if (comm == NULL) return 1;
  if (r->rank == 1) return ncclCommAbort(comm) == ncclSuccess ? 0 : harness_fail(r, "abort");
  float* buf = NULL;
  d->alloc((void**)&buf, 1 << 20);
  if (ncclAllReduce(buf, buf, 1 << 18, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
    return harness_fail(r, "launch");
  if (ncclCommAbort(comm) != ncclSuccess) return harness_fail(r, "abort");
  d->stream_sync(NULL);
  d->free(buf);
  return 0;
}

START_TEST(test_abort) {
  use_fake(2);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, _i ? abort_direct_body : abort_body, NULL, RANK_TIMEOUT_S), 0);
}
END_TEST

/* Launches into a capturing stream each get a buffer the graph keeps (a replay must read
 * what the capture wrote); ordinary launches then reuse one buffer of their own. The fake
 * still runs captured work at once, so results are checked too. */
static int capture_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm = init_on_device(r, d, 2);
  int graph = 0, other = 0, bad = 0;
  cudaStream_t s = (cudaStream_t)(uintptr_t)(100 + r->rank); /* run_one's stream */
  if (comm == NULL) return 1;
  braid_device_fake_capture(s, 1);
  for (int i = 0; i < 3 && !bad; i++) bad = run_one(r, d, comm, 0, ncclFloat32, ncclSum, 999);
  braid_launch_count_buffers(braid_comm_of(comm), &graph, &other);
  if (graph != 3 || other != 0)
    bad = harness_fail(r, "captured: %d graph buffers, %d others (want 3, 0)", graph, other);
  braid_device_fake_capture(s, 0);
  for (int i = 0; i < 3 && !bad; i++) bad = run_one(r, d, comm, 0, ncclFloat32, ncclSum, 999);
  braid_launch_count_buffers(braid_comm_of(comm), &graph, &other);
  if (graph != 3 || other != 1) bad = harness_fail(r, "after: %d graph buffers, %d others (want 3, 1)", graph, other);
  ncclCommDestroy(comm);
  return bad;
}

START_TEST(test_capture) {
  use_fake(2);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, capture_body, NULL, RANK_TIMEOUT_S), 0);
}
END_TEST

/* ---- one rank (launch.c): copies by memcpy_async, computing operators by a kernel of many blocks */

/* One-rank collectives of count floats: the copy operators run no kernel (one queued copy
 * per out-of-place call, none in place); PreMulSum and AVG run a kernel of
 * min(64, bytes / 64 KiB) blocks of 512 threads; a group with a computing call keeps its
 * copies in the kernel, in call order. */
static int one_rank_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm = init_on_device(r, d, 1);
  cudaStream_t s = (cudaStream_t)(uintptr_t)21;
  size_t n = (1 << 20) + 3, small = 1000;
  float *in = NULL, *out = NULL, *host = malloc(n * sizeof(float)), two = 2.0f;
  int bad = 0, l0, c0, l1, c1, blocks = 0, threads = 0;
  ncclRedOp_t pms;
  if (comm == NULL) return 1;
  d->alloc((void**)&in, n * sizeof(float));
  d->alloc((void**)&out, n * sizeof(float));
  fill(host, ncclFloat32, n, 0, 0);
  d->memcpy_sync(in, host, n * sizeof(float));
  /* copies: out of place, then in place, then a group of two */
  braid_device_fake_counts(&l0, &c0, NULL, NULL);
  braid_device_fake_hold(s, 1);
  if (ncclAllReduce(in, out, n, ncclFloat32, ncclMax, comm, s) != ncclSuccess) bad = harness_fail(r, "allreduce");
  d->memcpy_sync(host, out, sizeof(float));
  if (host[0] == (float)in_val(0, 0)) bad = harness_fail(r, "the copy ran before the stream did");
  braid_device_fake_hold(s, 0);
  if (ncclAllReduce(out, out, n, ncclFloat32, ncclSum, comm, s) != ncclSuccess) bad = harness_fail(r, "in place");
  ncclGroupStart();
  ncclBroadcast(in, out, small, ncclFloat32, 0, comm, s);
  ncclReduce(in, out + small, small, ncclFloat32, ncclMin, 0, comm, s);
  if (ncclGroupEnd() != ncclSuccess) bad = harness_fail(r, "group of copies");
  d->stream_sync(s);
  braid_device_fake_counts(&l1, &c1, NULL, NULL);
  if (l1 != l0 || c1 != c0 + 3) bad = harness_fail(r, "copies: %d launches, %d copies (want 0, 3)", l1 - l0, c1 - c0);
  /* into a capturing stream: the copy is legal there (a memcpy node) and no graph buffer */
  braid_device_fake_capture(s, 1);
  if (ncclAllReduce(in, out, n, ncclFloat32, ncclMin, comm, s) != ncclSuccess) bad = harness_fail(r, "captured");
  if (braid_device_fake_capture(s, 0) != ncclSuccess) bad = harness_fail(r, "the capture was invalidated");
  d->stream_sync(s);
  int g = -1, o = -1;
  braid_launch_count_buffers(braid_comm_of(comm), &g, &o);
  if (g + o != 0) bad = harness_fail(r, "copies took %d launch buffers (%d of a graph)", g + o, g);
  d->memcpy_sync(host, out, n * sizeof(float));
  for (size_t i = 0; i < n && !bad; i++)
    if (host[i] != (float)in_val(0, i)) bad = harness_fail(r, "copy [%zu] = %g", i, host[i]);
  /* PreMulSum by 2: one kernel over 64 blocks; a small one: one block */
  ncclRedOpCreatePreMulSum(&pms, &two, ncclFloat32, ncclScalarHostImmediate, comm);
  if (ncclAllReduce(in, out, n, ncclFloat32, pms, comm, s) != ncclSuccess) bad = harness_fail(r, "premulsum");
  d->stream_sync(s);
  braid_device_fake_counts(&l0, NULL, &blocks, &threads);
  if (l0 != l1 + 1 || blocks != BRAID_MAX_CHANNELS || threads != 512)
    bad = harness_fail(r, "premulsum: %d launches of %d x %d (want 1 of %d x 512)", l0 - l1, blocks, threads,
                       BRAID_MAX_CHANNELS);
  d->memcpy_sync(host, out, n * sizeof(float));
  for (size_t i = 0; i < n && !bad; i++)
    if (host[i] != 2.0f * (float)in_val(0, i)) bad = harness_fail(r, "premulsum [%zu] = %g", i, host[i]);
  if (ncclAllReduce(in, out, small, ncclFloat32, pms, comm, s) != ncclSuccess) bad = harness_fail(r, "small");
  d->stream_sync(s);
  braid_device_fake_counts(NULL, NULL, &blocks, NULL);
  if (blocks != 1) bad = harness_fail(r, "small premulsum: %d blocks (want 1)", blocks);
  /* a group: a copy, then AVG of its output in place (int32: SumPostDiv by 1), in order */
  int32_t* iv = (int32_t*)in;
  fill(host, ncclInt32, n, 0, 0);
  d->memcpy_sync(iv, host, n * sizeof(int32_t));
  braid_device_fake_counts(&l0, &c0, NULL, NULL);
  ncclGroupStart();
  ncclAllReduce(iv, out, n, ncclInt32, ncclSum, comm, s);
  ncclAllReduce(out, out, n, ncclInt32, ncclAvg, comm, s);
  if (ncclGroupEnd() != ncclSuccess) bad = harness_fail(r, "group with AVG");
  d->stream_sync(s);
  braid_device_fake_counts(&l1, &c1, &blocks, NULL);
  if (l1 != l0 + 1 || c1 != c0 || blocks != BRAID_MAX_CHANNELS)
    bad = harness_fail(r, "group with AVG: %d launches of %d blocks, %d copies (want 1 of %d, 0)", l1 - l0, blocks,
                       c1 - c0, BRAID_MAX_CHANNELS);
  d->memcpy_sync(host, out, n * sizeof(int32_t));
  for (size_t i = 0; i < n && !bad; i++)
    if (((int32_t*)host)[i] != (int32_t)in_val(0, i)) bad = harness_fail(r, "avg [%zu] = %d", i, ((int32_t*)host)[i]);
  /* one byte elements (pieces of 64 bytes): AVG of one uint8 input is the input, 17 blocks */
  char* want = malloc(n);
  d->memcpy_sync(want, in, n);
  if (ncclAllReduce(in, out, n, ncclUint8, ncclAvg, comm, s) != ncclSuccess) bad = harness_fail(r, "u8 avg");
  d->stream_sync(s);
  braid_device_fake_counts(NULL, NULL, &blocks, NULL);
  if (blocks != (int)((n + (64 << 10) - 1) / (64 << 10))) bad = harness_fail(r, "u8 avg: %d blocks", blocks);
  d->memcpy_sync(host, out, n);
  if (memcmp(host, want, n) != 0) bad = harness_fail(r, "u8 avg: output differs from the input");
  free(want);
  ncclRedOpDestroy(pms, comm);
  d->free(in);
  d->free(out);
  free(host);
  ncclCommDestroy(comm);
  return bad;
}

START_TEST(test_one_rank) {
  use_fake(1);
  ck_assert_int_eq(harness_run(1, HARNESS_PROCS, one_rank_body, NULL, RANK_TIMEOUT_S), 0);
}
END_TEST

/* ---- several ranks on one GPU --------------------------------------------------------------- */

static int dup_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm = NULL;
  int sharing = *(int*)r->arg;
  d->set_current(0);
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (!sharing) {
    if (res != ncclInvalidUsage)
      return harness_fail(r, "init returned %s, want ncclInvalidUsage", ncclGetErrorString(res));
    if (strstr(braid_debug_last_error(), "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device") == NULL)
      return harness_fail(r, "message: %s", braid_debug_last_error());
    return 0;
  }
  if (res != ncclSuccess) return harness_fail(r, "init with BRAID_GPU_SHARING=1: %s", ncclGetErrorString(res));
  int bad = run_one(r, d, comm, 0, ncclInt32, ncclMax, 5000);
  ncclCommDestroy(comm);
  return bad;
}

START_TEST(test_duplicate_gpu) {
  int sharing = _i;
  if (sharing) setenv("BRAID_GPU_SHARING", "1", 1);
  use_fake(1);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, dup_body, &sharing, RANK_TIMEOUT_S), 0);
}
END_TEST

Suite* device_suite(void) {
  Suite* s = suite_create("device");
  TCase* tc = tcase_create("fake");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_select);
  tcase_add_test(tc, test_fake_memory);
  tcase_add_test(tc, test_fake_streams);
  suite_add_tcase(s, tc);
  tc = tcase_create("coll");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_coll, 0, (int)(sizeof(coll_cases) / sizeof(coll_cases[0])));
  suite_add_tcase(s, tc);
  tc = tcase_create("launch");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_initall);
  tcase_add_test(tc, test_streams);
  tcase_add_test(tc, test_nonblocking);
  tcase_add_test(tc, test_capture);
  tcase_add_loop_test(tc, test_abort, 0, 2);
  tcase_add_loop_test(tc, test_duplicate_gpu, 0, 2);
  tcase_add_test(tc, test_one_rank);
  suite_add_tcase(s, tc);
  return s;
}
