/*
 * test_nvls.c - the NVLS all-reduce through a multicast object (transport/nvls, kernels/
 * multimem.h) on the fake GPU, whose objects BRAID_FAKE_GPU_MULTICAST turns on (device/
 * fake_mc.c: ld_reduce reads every bound member's copy and reduces, st writes each). Ranks are
 * fake GPUs of one process (ncclCommInitAll), NCCL_ALGO=NVLS:
 *   resource  the object on every rank, its size rounded to the granularity (the default and
 *             gran:8M), the multicast address in the view; its segments gone after destroy;
 *   allreduce 2..8 ranks x one-shot / two-shot: every datatype x op multimem reduces (sums of 32/64-bit integers and
 *             floats, min/max of integers; signed and unsigned orders told apart) and some it
 *             does not (prod, int8, avg: the unicast path), one-shot and two-shot, in and out
 *             of place, several sizes; exact results, and the object's call count says that
 *             exactly the supported calls went through it;
 *   processes 3 and 4 ranks as processes (the handle crosses them), every case above;
 *   fallback  no multicast (the default), or a failure at each set-up step on one rank
 *             (joinfail, bindfail, mapfail, gran:0, gran:3): no object on any rank, results
 *             right through the unicast path, nothing left in /dev/shm; two ranks sharing
 *             one GPU: no object either.
 * Every case runs in its own forked child (Check).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/sym/sym.h"
#include "device/device.h"
#include "kernels/fp.h"
#include "kernels/multimem.h"
#include "nccl.h"
#include "transport/nvls/nvls.h"

#define MAXR 8
#define MAXN 20011
#define S(x) ((cudaStream_t)(uintptr_t)(x))

struct node {
  const struct braid_device_ops* d;
  int n;
  ncclComm_t comm[MAXR];
  char *in[MAXR], *out[MAXR];
  char host[MAXN * 8];
};

static void open_node(struct node* k, int n) {
  int devs[MAXR];
  char nstr[16];
  snprintf(nstr, sizeof(nstr), "%d", n);
  setenv("BRAID_FAKE_GPU", nstr, 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  unsetenv("BRAID_HOST_MODE");
  braid_device_reset();
  k->d = braid_device();
  ck_assert_ptr_eq(k->d, braid_device_fake);
  k->n = n;
  for (int r = 0; r < n; r++) devs[r] = r;
  ck_assert_int_eq(ncclCommInitAll(k->comm, n, devs), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ck_assert_int_eq(k->d->set_current(r), ncclSuccess);
    ck_assert_int_eq(k->d->alloc((void**)&k->in[r], MAXN * 8), ncclSuccess);
    ck_assert_int_eq(k->d->alloc((void**)&k->out[r], MAXN * 8), ncclSuccess);
  }
}

static void close_node(struct node* k) {
  for (int r = 0; r < k->n; r++) ck_assert_int_eq(ncclCommDestroy(k->comm[r]), ncclSuccess);
  for (int r = 0; r < k->n; r++) {
    k->d->set_current(r);
    k->d->free(k->in[r]);
    k->d->free(k->out[r]);
  }
}

/* Segments of this process in /dev/shm whose name starts with `prefix`. */
static int shm_count(const char* prefix) {
  char pre[64];
  int c = 0;
  snprintf(pre, sizeof(pre), "%s%d-", prefix, (int)getpid());
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) c += strncmp(e->d_name, pre, strlen(pre)) == 0;
  closedir(d);
  return c;
}

/* Rank r's element i of call `call`: small integers (exact in every type, bf16 included),
 * negative ones for min/max so that signed and unsigned orders differ. */
static long long value(int r, size_t i, int call, int minmax) {
  long long v = (long long)((r + 1) * (int)(i % 7)) + call % 3;
  return minmax && (i + r) % 3 == 0 ? -v - 1 : v;
}
static void put(int dt, char* p, size_t i, long long v) {
  switch (dt) {
    case ncclInt8:
      ((int8_t*)p)[i] = (int8_t)v;
      break;
    case ncclInt32:
      ((int32_t*)p)[i] = (int32_t)v;
      break;
    case ncclUint32:
      ((uint32_t*)p)[i] = (uint32_t)v;
      break;
    case ncclInt64:
      ((int64_t*)p)[i] = v;
      break;
    case ncclUint64:
      ((uint64_t*)p)[i] = (uint64_t)v;
      break;
    case ncclFloat16:
      ((uint16_t*)p)[i] = braid_fp_f32_to_f16((float)v);
      break;
    case ncclBfloat16:
      ((uint16_t*)p)[i] = braid_fp_f32_to_bf16((float)v);
      break;
    case ncclFloat32:
      ((float*)p)[i] = (float)v;
      break;
    case ncclFloat64:
      ((double*)p)[i] = (double)v;
      break;
  }
}
/* The expected result of op over every rank's element, in the type's own arithmetic. */
static int matches(int dt, int op, const char* p, size_t i, int n, int call) {
  int mm = op == ncclMax || op == ncclMin;
  const unsigned long long mask = dt == ncclUint32 ? 0xffffffffull : ~0ull;
  long long s = value(0, i, call, mm);
  unsigned long long u = (unsigned long long)s & mask;
  for (int r = 1; r < n; r++) {
    long long sv = value(r, i, call, mm);
    unsigned long long uv = (unsigned long long)sv & mask;
    if (op == ncclSum || op == ncclAvg) s += sv, u += uv;
    if (op == ncclProd) s *= sv;
    if (op == ncclMax) s = sv > s ? sv : s, u = uv > u ? uv : u;
    if (op == ncclMin) s = sv < s ? sv : s, u = uv < u ? uv : u;
  }
  if (op == ncclAvg) s /= n;
  switch (dt) {
    case ncclInt8:
      return ((const int8_t*)p)[i] == (int8_t)s;
    case ncclInt32:
      return ((const int32_t*)p)[i] == (int32_t)s;
    case ncclUint32:
      return ((const uint32_t*)p)[i] == (uint32_t)(mm ? u : (unsigned long long)s);
    case ncclInt64:
      return ((const int64_t*)p)[i] == s;
    case ncclUint64:
      return ((const uint64_t*)p)[i] == (mm ? u : (unsigned long long)s);
    case ncclFloat16:
      return braid_fp_f16_to_f32(((const uint16_t*)p)[i]) == (float)s;
    case ncclBfloat16:
      return braid_fp_bf16_to_f32(((const uint16_t*)p)[i]) == (float)s;
    case ncclFloat32:
      return ((const float*)p)[i] == (float)s;
    case ncclFloat64:
      return ((const double*)p)[i] == (double)s;
  }
  return 0;
}

/* One all-reduce on every rank (one group); every rank's result checked. */
static void allreduce(struct node* k, int dt, int op, size_t count, int in_place, int call) {
  int es = braid_dtype_size(dt), mm = op == ncclMax || op == ncclMin;
  for (int r = 0; r < k->n; r++) {
    for (size_t i = 0; i < count; i++) put(dt, k->host, i, value(r, i, call, mm));
    k->d->set_current(r);
    ck_assert_int_eq(k->d->setup_copy(k->in[r], k->host, count * es), ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < k->n; r++) {
    k->d->set_current(r);
    ck_assert_int_eq(ncclAllReduce(k->in[r], in_place ? k->in[r] : k->out[r], count, dt, op, k->comm[r], S(300 + r)),
                     ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < k->n; r++) {
    k->d->set_current(r);
    ck_assert_int_eq(k->d->stream_sync(S(300 + r)), ncclSuccess);
    ck_assert_int_eq(k->d->setup_copy(k->host, in_place ? k->in[r] : k->out[r], count * es), ncclSuccess);
    for (size_t i = 0; i < count; i++)
      ck_assert_msg(matches(dt, op, k->host, i, k->n, call),
                    "%d ranks, dtype %d op %d count %zu call %d: rank %d [%zu]", k->n, dt, op, count, call, r, i);
    ncclResult_t st = ncclInProgress;
    ck_assert_int_eq(ncclCommGetAsyncError(k->comm[r], &st), ncclSuccess);
    ck_assert_int_eq(st, ncclSuccess);
  }
}

/* Calls rank r ran through the object (its count in its own bound memory). */
static uint64_t mc_calls(struct node* k, int r) {
  const struct braid_nvls* nv = braid_lsa_nvls(braid_comm_of(k->comm[r]));
  ck_assert_ptr_nonnull(nv);
  return *(volatile uint64_t*)((char*)nv->local + BRAID_MC_CALLS_OFF); /* the fake's memory is host memory */
}

START_TEST(test_resource) {
  static struct node k;
  setenv("BRAID_FAKE_GPU_MULTICAST", _i == 0 ? "1" : "1,gran:8388608", 1);
  open_node(&k, 4);
  size_t gran = _i == 0 ? 2u << 20 : 8u << 20;
  ck_assert_int_eq(shm_count("braid-fakemc-"), 1);
  for (int r = 0; r < 4; r++) {
    const struct braid_nvls* nv = braid_lsa_nvls(braid_comm_of(k.comm[r]));
    ck_assert_msg(nv != NULL, "rank %d: no multicast object", r);
    ck_assert_uint_eq(nv->gran, gran);
    ck_assert_uint_eq(nv->bytes % gran, 0);
    ck_assert_uint_ge(nv->bytes, BRAID_MC_BYTES(524288));
    ck_assert_uint_lt(nv->bytes, BRAID_MC_BYTES(524288) + gran);
    const struct braid_mc_emul* e = nv->mcptr;
    ck_assert_uint_eq(e->magic, BRAID_MC_EMUL_MAGIC);
    ck_assert_int_eq(e->n, 4);
    int own = 0;
    for (int i = 0; i < 4; i++) own += e->member[i] == nv->local;
    ck_assert_int_eq(own, 1);
  }
  allreduce(&k, ncclFloat32, ncclSum, 1000, 0, 1);
  for (int r = 0; r < 4; r++) ck_assert_uint_eq(mc_calls(&k, r), 1);
  close_node(&k);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 0);
  ck_assert_int_eq(shm_count("braid-fakegpu-"), 0);
}
END_TEST

static const struct {
  int dt, op, mc; /* mc: multimem reduces it */
} cases[] = {
    {ncclInt32, ncclSum, 1},   {ncclUint32, ncclSum, 1},   {ncclInt64, ncclSum, 1},   {ncclUint64, ncclSum, 1},
    {ncclFloat16, ncclSum, 1}, {ncclBfloat16, ncclSum, 1}, {ncclFloat32, ncclSum, 1}, {ncclFloat64, ncclSum, 1},
    {ncclInt32, ncclMax, 1},   {ncclInt32, ncclMin, 1},    {ncclUint32, ncclMax, 1},  {ncclUint32, ncclMin, 1},
    {ncclInt64, ncclMax, 1},   {ncclInt64, ncclMin, 1},    {ncclUint64, ncclMax, 1},  {ncclUint64, ncclMin, 1},
    {ncclInt32, ncclProd, 0},  {ncclInt8, ncclSum, 0},     {ncclInt32, ncclAvg, 0},   {ncclFloat32, ncclMax, 0},
};

/* _i: ranks 2 + _i / 2, one-shot (even) or two-shot (odd). */
START_TEST(test_allreduce) {
  static struct node k;
  static const size_t counts[] = {1, 7, 1031, MAXN};
  setenv("BRAID_FAKE_GPU_MULTICAST", "1", 1);
  setenv("BRAID_LSA_VARIANT", _i % 2 == 0 ? "ONESHOT" : "TWOSHOT", 1);
  open_node(&k, 2 + _i / 2);
  uint64_t want = 0;
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    allreduce(&k, cases[c].dt, cases[c].op, counts[c % 4], (int)(c / 4 % 2), (int)c);
    want += cases[c].mc;
  }
  for (int r = 0; r < k.n; r++) ck_assert_uint_eq(mc_calls(&k, r), want);
  close_node(&k);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 0);
}
END_TEST

/* A rank as a process of its own on fake GPU `r` of n: the object's handle crosses processes
 * (fake_mc.c's segment name, as a CUDA one carries a descriptor). Exit status 0: right. */
static int process_rank(ncclUniqueId id, int n, int r, int twoshot) {
  static struct node k;
  char nstr[16];
  snprintf(nstr, sizeof(nstr), "%d", n);
  setenv("BRAID_FAKE_GPU", nstr, 1);
  setenv("BRAID_FAKE_GPU_MULTICAST", "1", 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  setenv("BRAID_LSA_VARIANT", twoshot ? "TWOSHOT" : "ONESHOT", 1);
  braid_device_reset();
  k.d = braid_device();
  if (k.d != braid_device_fake || k.d->set_current(r) != ncclSuccess) return 2;
  if (ncclCommInitRank(&k.comm[0], n, id, r) != ncclSuccess) return 3;
  if (braid_lsa_nvls(braid_comm_of(k.comm[0])) == NULL) return 4;
  if (k.d->alloc((void**)&k.in[0], MAXN * 8) != ncclSuccess || k.d->alloc((void**)&k.out[0], MAXN * 8) != ncclSuccess)
    return 5;
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    int dt = cases[c].dt, op = cases[c].op, es = braid_dtype_size(dt), mm = op == ncclMax || op == ncclMin;
    size_t count = c % 2 ? 1031 : MAXN;
    for (size_t i = 0; i < count; i++) put(dt, k.host, i, value(r, i, (int)c, mm));
    if (k.d->setup_copy(k.in[0], k.host, count * es) != ncclSuccess) return 6;
    if (ncclAllReduce(k.in[0], k.out[0], count, dt, op, k.comm[0], S(300)) != ncclSuccess) return 7;
    if (k.d->stream_sync(S(300)) != ncclSuccess) return 8;
    if (k.d->setup_copy(k.host, k.out[0], count * es) != ncclSuccess) return 9;
    for (size_t i = 0; i < count; i++)
      if (!matches(dt, op, k.host, i, n, (int)c)) return 10;
  }
  k.n = 1;
  if (mc_calls(&k, 0) != 16) return 11; /* the 16 supported cases */
  if (ncclCommDestroy(k.comm[0]) != ncclSuccess) return 12;
  k.d->free(k.in[0]);
  k.d->free(k.out[0]);
  return 0;
}

/* _i: 3 processes one-shot, 4 two-shot. */
START_TEST(test_processes) {
  int n = 3 + _i;
  pid_t pids[MAXR];
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    ck_assert_int_ge(pids[r], 0);
    if (pids[r] == 0) _exit(process_rank(id, n, r, _i));
  }
  for (int r = 0; r < n; r++) {
    int st = 0;
    ck_assert_int_eq(waitpid(pids[r], &st, 0), pids[r]);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d of %d processes: status 0x%x", r, n, st);
  }
}
END_TEST

static const char* const faults[] = {NULL, "1,joinfail:1", "1,bindfail:2", "1,mapfail:0", "1,gran:0", "1,gran:3"};

START_TEST(test_fallback) {
  static struct node k;
  if (faults[_i] != NULL)
    setenv("BRAID_FAKE_GPU_MULTICAST", faults[_i], 1);
  else
    unsetenv("BRAID_FAKE_GPU_MULTICAST");
  open_node(&k, 3);
  for (int r = 0; r < 3; r++) {
    struct braid_comm* c = braid_comm_of(k.comm[r]);
    ck_assert_msg(c->sym->lsa != NULL, "rank %d: no one-/two-shot scratch", r);
    ck_assert_msg(braid_lsa_nvls(c) == NULL, "rank %d: a multicast object despite %s", r,
                  faults[_i] ? faults[_i] : "no multicast");
  }
  ck_assert_int_eq(shm_count("braid-fakemc-"), 0); /* released at set-up */
  allreduce(&k, ncclFloat32, ncclSum, 1031, 0, 1);
  allreduce(&k, ncclInt64, ncclMax, 7, 1, 2);
  close_node(&k);
  ck_assert_int_eq(shm_count("braid-fakegpu-"), 0);
}
END_TEST

/* Two ranks on one fake GPU (BRAID_GPU_SHARING=1): an object takes each device once, so no
 * object, and the unicast path runs. */
START_TEST(test_shared_gpu) {
  static struct node k;
  int devs[2] = {0, 0};
  setenv("BRAID_FAKE_GPU", "1", 1);
  setenv("BRAID_GPU_SHARING", "1", 1);
  setenv("BRAID_FAKE_GPU_MULTICAST", "1", 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  braid_device_reset();
  k.d = braid_device();
  k.n = 2;
  ck_assert_int_eq(ncclCommInitAll(k.comm, 2, devs), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    ck_assert_ptr_nonnull(braid_comm_of(k.comm[r])->sym->lsa);
    ck_assert_ptr_null(braid_lsa_nvls(braid_comm_of(k.comm[r])));
    ck_assert_int_eq(k.d->alloc((void**)&k.in[r], MAXN * 8), ncclSuccess);
    ck_assert_int_eq(k.d->alloc((void**)&k.out[r], MAXN * 8), ncclSuccess);
  }
  allreduce(&k, ncclFloat32, ncclSum, 1031, 0, 1);
  close_node(&k);
}
END_TEST

Suite* nvls_suite(void) {
  Suite* s = suite_create("nvls");
  TCase* tc = tcase_create("resource");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_resource, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("allreduce");
  tcase_set_timeout(tc, 240);
  tcase_add_loop_test(tc, test_allreduce, 0, 14);
  suite_add_tcase(s, tc);
  tc = tcase_create("processes");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_processes, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("fallback");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_fallback, 0, sizeof(faults) / sizeof(faults[0]));
  tcase_add_test(tc, test_shared_gpu);
  suite_add_tcase(s, tc);
  return s;
}
