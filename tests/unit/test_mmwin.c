/*
 * test_mmwin.c - ncclMemAlloc through the VMM calls (device.h's vmm_*) and windows bound to a
 * multicast object (core/sym/win_mc.c), on the fake GPU with BRAID_FAKE_GPU_MULTICAST=1
 * (device/fake_mc.c: the "multicast address" is a struct braid_mc_emul listing every bound
 * member's memory as this process maps it). NCCL_ALGO=NVLS throughout.
 *   bound      2 and 4 ranks (fake GPUs of one process): ncclMemAlloc is VMM memory rounded to
 *              the multicast granularity; multimemSupport 1; a window of it on every rank gets
 *              a multimem pointer (ncclGetLsaMultimemDevicePointer) whose members alias every
 *              rank's window at the asked offset; all-reduces in place and out of place on the
 *              window's memory are right and go through the NVLS multicast object;
 *              deregistration releases the window's object, and nothing is left at the end;
 *   direct     the multicast all-reduce straight from and to such windows (kernels/multimem.h):
 *              symmetric calls go direct, one-shot and two-shot; asymmetric ones stage, right;
 *   processes  2 and 4 ranks as processes: the same, the VMM handles crossing processes;
 *   refusals   a window of cudaMalloc-style memory (device->alloc) on one rank or all, a window
 *              off a granule boundary, multicast off, NCCL_CUMEM_ENABLE=0: no multimem pointer
 *              on any rank, ncclInvalidUsage and a WARN saying why, multimemSupport 0 where the
 *              communicator has no multicast; all-reduces still right.
 * Every case runs in its own forked child (Check).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "core/sym/sym.h"
#include "device/device.h"
#include "kernels/multimem.h"
#include "nccl.h"
#include "nccl_device.h"
#include "transport/nvls/nvls.h"

#define MAXR 4
#define WIN_BYTES (1u << 20)
#define COUNT 20011 /* floats: the first half of the window in, the second out */
#define GRAN (2u << 20)
#define MARK_OFF (WIN_BYTES - 64) /* past what the all-reduces write: a peer may start them first */
#define S(x) ((cudaStream_t)(uintptr_t)(x))

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

static void env(int n, const char* mc) {
  char nstr[16];
  snprintf(nstr, sizeof(nstr), "%d", n);
  setenv("BRAID_FAKE_GPU", nstr, 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  unsetenv("BRAID_HOST_MODE");
  if (mc != NULL)
    setenv("BRAID_FAKE_GPU_MULTICAST", mc, 1);
  else
    unsetenv("BRAID_FAKE_GPU_MULTICAST");
  braid_device_reset();
}

static float val(int r, size_t i, int call) {
  return (float)((r + 1) * (int)(i % 13) + call);
}

/* Fill rank r's input (the window's first floats), nothing else. 0: done. */
static int fill(const struct braid_device_ops* d, float* buf, int r, int call) {
  static float host[COUNT];
  for (size_t i = 0; i < COUNT; i++) host[i] = val(r, i, call);
  return d->setup_copy(buf, host, sizeof(host)) != ncclSuccess;
}
/* Rank r's result at out is the sum over n ranks. 0: right. */
static int check(const struct braid_device_ops* d, const float* out, int n, int call) {
  static float host[COUNT];
  if (d->setup_copy(host, out, sizeof(host)) != ncclSuccess) return 1;
  for (size_t i = 0; i < COUNT; i++) {
    float want = 0;
    for (int q = 0; q < n; q++) want += val(q, i, call);
    if (host[i] != want) {
      fprintf(stderr, "[%zu] = %g, not %g\n", i, host[i], want);
      return 2;
    }
  }
  return 0;
}

/* Every rank's all-reduce of COUNT floats from in[r] to out[r], in one group, each on its own
 * fake GPU and stream; returns once all of them ran. */
static void allreduce_all(const struct braid_device_ops* d, ncclComm_t* comm, int n, float* const* in,
                          float* const* out) {
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    d->set_current(r);
    ck_assert_int_eq(ncclAllReduce(in[r], out[r], COUNT, ncclFloat32, ncclSum, comm[r], S(300 + r)), ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    d->set_current(r);
    ck_assert_int_eq(d->stream_sync(S(300 + r)), ncclSuccess);
  }
}

/* Calls rank `comm` ran through the NVLS all-reduce's multicast object. */
static uint64_t mc_calls(ncclComm_t comm) {
  const struct braid_nvls* nv = braid_lsa_nvls(braid_comm_of(comm));
  return nv == NULL ? 0 : *(volatile uint64_t*)((char*)nv->local + BRAID_MC_CALLS_OFF);
}

/* Of them, calls straight from and to the windows' own objects (kernels/multimem.h, direct). */
static uint64_t mc_direct(ncclComm_t comm) {
  const struct braid_nvls* nv = braid_lsa_nvls(braid_comm_of(comm));
  return nv == NULL ? 0 : *(volatile uint64_t*)((char*)nv->local + BRAID_MC_DIRECT_OFF);
}

static int multimem_support(ncclComm_t comm) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER; /* as a program writes it */
#pragma GCC diagnostic pop
  ck_assert_int_eq(ncclCommQueryProperties(comm, &p), ncclSuccess);
  return p.multimemSupport;
}

/* The window's multimem pointer at `off` lists n members, each aliasing another rank's window
 * at off (rank q wrote q + 1 there: the caller did). 0: right. */
static int check_multimem(ncclWindow_t win, int n, size_t off) {
  void* p = NULL;
  if (ncclGetLsaMultimemDevicePointer(win, off, &p) != ncclSuccess) return 1;
  if (p != (char*)win->view.multimem + off || win->view.multimem == NULL) return 2;
  const struct braid_mc_emul* e = win->view.multimem; /* the fake GPU's multicast address */
  if (e->magic != BRAID_MC_EMUL_MAGIC || e->n != n) return 3;
  unsigned seen = 0; /* members are in the object's order (who joined first), not rank order */
  for (int q = 0; q < n; q++) {
    uint32_t mark = *(volatile uint32_t*)(e->member[q] + off);
    if (mark < 1 || mark > (uint32_t)n || (seen & (1u << mark))) return 4;
    seen |= 1u << mark;
  }
  return 0;
}

/* _i: 2 or 4 ranks of one process. */
START_TEST(test_bound) {
  static ncclComm_t comm[MAXR];
  static ncclWindow_t win[MAXR];
  static float* buf[MAXR];
  int n = _i == 0 ? 2 : 4, devs[MAXR] = {0, 1, 2, 3};
  env(n, "1");
  const struct braid_device_ops* d = braid_device();
  ck_assert_ptr_eq(d, braid_device_fake);
  ck_assert_int_eq(ncclCommInitAll(comm, n, devs), ncclSuccess);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 1); /* the NVLS all-reduce's own */
  for (int r = 0; r < n; r++) {
    ck_assert_int_eq(multimem_support(comm[r]), 1);
    d->set_current(r);
    ck_assert_int_eq(ncclMemAlloc((void**)&buf[r], WIN_BYTES), ncclSuccess);
    struct braid_share sh;
    ck_assert_int_eq(braid_mem_share(buf[r], WIN_BYTES, 1, &sh), ncclSuccess);
    ck_assert_int_eq(sh.kind, BRAID_SHARE_VMM);
    ck_assert_uint_eq(sh.seg_bytes, GRAN); /* rounded to the multicast granularity */
    uint32_t mark = (uint32_t)r + 1;
    ck_assert_int_eq(d->setup_copy((char*)buf[r] + MARK_OFF, &mark, sizeof(mark)), ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ck_assert_int_eq(ncclCommWindowRegister(comm[r], buf[r], WIN_BYTES, &win[r], NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 2); /* and the window's */
  for (int r = 0; r < n; r++) {
    int bad = check_multimem(win[r], n, MARK_OFF);
    ck_assert_msg(bad == 0, "rank %d's multimem pointer: check %d", r, bad);
  }
  void* p = NULL;
  ck_assert_int_eq(ncclGetLsaMultimemDevicePointer(win[0], WIN_BYTES, &p), ncclInvalidArgument);
  uint64_t calls0 = mc_calls(comm[0]);
  for (int call = 0; call < 2; call++) {
    for (int r = 0; r < n; r++) ck_assert_int_eq(fill(d, buf[r], r, call), 0);
    float* out[MAXR];
    for (int r = 0; r < n; r++) out[r] = call == 0 ? buf[r] : buf[r] + WIN_BYTES / 8; /* in place, then out of place */
    allreduce_all(d, comm, n, buf, out);
    for (int r = 0; r < n; r++) ck_assert_msg(check(d, out[r], n, call) == 0, "rank %d call %d", r, call);
  }
  ck_assert_uint_eq(mc_calls(comm[0]), calls0 + 2); /* through the NVLS multicast path */
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommWindowDeregister(comm[r], win[r]), ncclSuccess);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 1); /* the window's object went with it */
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclMemFree(buf[r]), ncclSuccess);
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommDestroy(comm[r]), ncclSuccess);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 0);
  ck_assert_int_eq(shm_count("braid-fakegpu-"), 0);
}
END_TEST

/* The direct multicast all-reduce, one-shot and two-shot (_i: bit 0 two-shot, bit 1 4 ranks),
 * ranks of one process: symmetric windows go direct (nothing staged), everything else stages
 * and is right: an in-place one-shot, inputs at other offsets on each rank, one rank's input
 * outside any window, offsets off a 16-byte boundary. Every call leaves the inputs it did not
 * overwrite and the windows' marks past the outputs as they were. */
static const struct {
  const char* what;
  int in_place;
  size_t in_at;  /* floats: where rank r's input starts in its window (times r when `skew`) */
  int skew;      /* the offset differs per rank */
  int outside;   /* rank 0's input is not in a window */
  int direct[2]; /* goes direct: one-shot, two-shot */
} direct_calls[] = {
    {"out of place", 0, 0, 0, 0, {1, 1}},
    {"in place", 1, 0, 0, 0, {0, 1}},
    {"other offsets per rank", 0, 16, 1, 0, {0, 0}},
    {"rank 0 outside a window", 0, 0, 0, 1, {0, 0}},
    {"off a 16-byte boundary", 0, 1, 0, 0, {0, 0}},
    {"out of place again", 0, 0, 0, 0, {1, 1}},
};
START_TEST(test_direct) {
  static ncclComm_t comm[MAXR];
  static ncclWindow_t win[MAXR];
  static float *buf[MAXR], *plain[MAXR];
  int n = _i & 2 ? 4 : 2, two = _i & 1, devs[MAXR] = {0, 1, 2, 3};
  env(n, "1");
  setenv("BRAID_LSA_VARIANT", two ? "TWOSHOT" : "ONESHOT", 1);
  braid_param_reload();
  const struct braid_device_ops* d = braid_device();
  ck_assert_int_eq(ncclCommInitAll(comm, n, devs), ncclSuccess);
  for (int r = 0; r < n; r++) {
    d->set_current(r);
    ck_assert_int_eq(ncclMemAlloc((void**)&buf[r], WIN_BYTES), ncclSuccess);
    ck_assert_int_eq(d->alloc((void**)&plain[r], COUNT * sizeof(float)), ncclSuccess);
    uint32_t mark = (uint32_t)r + 1;
    ck_assert_int_eq(d->setup_copy((char*)buf[r] + MARK_OFF, &mark, sizeof(mark)), ncclSuccess);
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ck_assert_int_eq(ncclCommWindowRegister(comm[r], buf[r], WIN_BYTES, &win[r], NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int c = 0; c < (int)(sizeof(direct_calls) / sizeof(direct_calls[0])); c++) {
    uint64_t direct0[MAXR], calls0 = mc_calls(comm[0]);
    float *in[MAXR], *out[MAXR];
    for (int r = 0; r < n; r++) {
      direct0[r] = mc_direct(comm[r]);
      in[r] = direct_calls[c].outside && r == 0
                  ? plain[r]
                  : buf[r] + direct_calls[c].in_at * (direct_calls[c].skew ? (size_t)r : 1);
      out[r] = direct_calls[c].in_place ? in[r] : buf[r] + WIN_BYTES / 8;
      ck_assert_int_eq(fill(d, in[r], r, c), 0);
    }
    allreduce_all(d, comm, n, in, out);
    for (int r = 0; r < n; r++) {
      const char* what = direct_calls[c].what;
      ck_assert_msg(check(d, out[r], n, c) == 0, "%s: rank %d's result", what, r);
      if (!direct_calls[c].in_place) {
        static float host[COUNT];
        ck_assert_int_eq(d->setup_copy(host, in[r], sizeof(host)), ncclSuccess);
        for (size_t i = 0; i < COUNT; i++)
          ck_assert_msg(host[i] == val(r, i, c), "%s: rank %d's input [%zu] = %g, not %g", what, r, i, host[i],
                        val(r, i, c));
      }
      uint32_t mark = 0;
      ck_assert_int_eq(d->setup_copy(&mark, (char*)buf[r] + MARK_OFF, sizeof(mark)), ncclSuccess);
      ck_assert_msg(mark == (uint32_t)r + 1, "%s: rank %d's mark past the output is %u", what, r, mark);
      ck_assert_msg(mc_direct(comm[r]) == direct0[r] + (uint64_t)direct_calls[c].direct[two],
                    "%s, %s: rank %d ran %llu calls direct, want %d", two ? "two-shot" : "one-shot", what, r,
                    (unsigned long long)(mc_direct(comm[r]) - direct0[r]), direct_calls[c].direct[two]);
    }
    ck_assert_uint_eq(mc_calls(comm[0]), calls0 + 1); /* through the multicast path either way */
  }
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommWindowDeregister(comm[r], win[r]), ncclSuccess);
  for (int r = 0; r < n; r++) {
    d->set_current(r);
    d->free(plain[r]);
    ck_assert_int_eq(ncclMemFree(buf[r]), ncclSuccess);
  }
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommDestroy(comm[r]), ncclSuccess);
  unsetenv("BRAID_LSA_VARIANT");
  braid_param_reload();
  ck_assert_int_eq(shm_count("braid-fakemc-"), 0);
}
END_TEST

/* Rank r of n as a process of its own. Exit status 0: right. */
static int process_rank(ncclUniqueId id, int n, int r) {
  ncclComm_t comm;
  ncclWindow_t win;
  float* buf = NULL;
  env(n, "1");
  setenv("BRAID_LSA_VARIANT", "TWOSHOT", 1); /* both calls direct: the objects' members cross processes */
  braid_param_reload();
  const struct braid_device_ops* d = braid_device();
  if (d != braid_device_fake || d->set_current(r) != ncclSuccess) return 2;
  if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) return 3;
  if (multimem_support(comm) != 1) return 4;
  if (ncclMemAlloc((void**)&buf, WIN_BYTES) != ncclSuccess) return 5;
  uint32_t mark = (uint32_t)r + 1;
  if (d->setup_copy((char*)buf + MARK_OFF, &mark, sizeof(mark)) != ncclSuccess) return 6;
  if (ncclCommWindowRegister(comm, buf, WIN_BYTES, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) return 7;
  /* every rank wrote its mark before registering, which is collective */
  int bad = check_multimem(win, n, MARK_OFF);
  if (bad != 0) return 80 + bad;
  for (int call = 0; call < 2; call++) {
    float* out = call == 0 ? buf : buf + WIN_BYTES / 8;
    if (fill(d, buf, r, call) != 0) return 9;
    if (ncclAllReduce(buf, out, COUNT, ncclFloat32, ncclSum, comm, S(300)) != ncclSuccess) return 10;
    if (d->stream_sync(S(300)) != ncclSuccess) return 11;
    if ((bad = check(d, out, n, call)) != 0) return 120 + 10 * call + bad;
  }
  if (mc_calls(comm) != 2 || mc_direct(comm) != 2) return 13;
  if (ncclCommWindowDeregister(comm, win) != ncclSuccess) return 14;
  if (ncclMemFree(buf) != ncclSuccess) return 15;
  if (ncclCommDestroy(comm) != ncclSuccess) return 16;
  return 0;
}

/* _i: 2 or 4 processes. */
START_TEST(test_processes) {
  int n = _i == 0 ? 2 : 4;
  pid_t pids[MAXR];
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    ck_assert_int_ge(pids[r], 0);
    if (pids[r] == 0) _exit(process_rank(id, n, r));
  }
  for (int r = 0; r < n; r++) {
    int st = 0;
    ck_assert_int_eq(waitpid(pids[r], &st, 0), pids[r]);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d of %d processes: status 0x%x", r, n, st);
  }
}
END_TEST

/* How each refusal case allocates and registers, and the WARN it expects. */
static const struct {
  const char* mc;    /* BRAID_FAKE_GPU_MULTICAST */
  const char* cumem; /* NCCL_CUMEM_ENABLE */
  int plain;         /* ranks whose buffer is device->alloc memory (cudaMalloc's stand-in): bit mask */
  size_t shift;      /* window start inside the allocation */
  int support;       /* multimemSupport */
  const char* why;   /* in the WARN */
} refusals[] = {
    {"1", NULL, 0x3, 0, 1, "is not cuMem memory from ncclMemAlloc"},
    {"1", NULL, 0x2, 0, 1, "rank 1's buffer"},
    {"1", NULL, 0x0, 4096, 1, "could not bind memory to the multicast object"},
    {NULL, NULL, 0x0, 0, 0, "the communicator has no multicast object"},
    {"1", "0", 0x0, 0, 1, "is not cuMem memory from ncclMemAlloc"},
};

START_TEST(test_refusals) {
  static ncclComm_t comm[2];
  static ncclWindow_t win[2];
  static char *mem[2], *buf[2];
  int n = 2, devs[2] = {0, 1};
  env(n, refusals[_i].mc);
  if (refusals[_i].cumem != NULL) setenv("NCCL_CUMEM_ENABLE", refusals[_i].cumem, 1);
  const struct braid_device_ops* d = braid_device();
  ck_assert_int_eq(ncclCommInitAll(comm, n, devs), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ck_assert_int_eq(multimem_support(comm[r]), refusals[_i].support);
    d->set_current(r);
    if (refusals[_i].plain & (1 << r))
      ck_assert_int_eq(d->alloc((void**)&mem[r], 2 * GRAN), ncclSuccess);
    else
      ck_assert_int_eq(ncclMemAlloc((void**)&mem[r], 2 * GRAN), ncclSuccess);
    buf[r] = mem[r] + refusals[_i].shift;
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ck_assert_int_eq(ncclCommWindowRegister(comm[r], buf[r], WIN_BYTES, &win[r], 0), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    void* p = (void*)1;
    ck_assert_int_eq(ncclGetLsaMultimemDevicePointer(win[r], 0, &p), ncclInvalidUsage);
    const char* last = ncclGetLastError(comm[r]);
    ck_assert_msg(strstr(last, "has no multicast mapping") != NULL && strstr(last, refusals[_i].why) != NULL,
                  "rank %d: WARN \"%s\" does not say \"%s\"", r, last, refusals[_i].why);
    ck_assert_ptr_null(win[r]->view.multimem);
  }
  /* the all-reduce on the windows' memory is still right (unicast or the NVLS scratch) */
  for (int r = 0; r < n; r++) ck_assert_int_eq(fill(d, (float*)buf[r], r, 5), 0);
  float* fbuf[2] = {(float*)buf[0], (float*)buf[1]};
  allreduce_all(d, comm, n, fbuf, fbuf);
  for (int r = 0; r < n; r++) ck_assert_msg(check(d, fbuf[r], n, 5) == 0, "rank %d", r);
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommWindowDeregister(comm[r], win[r]), ncclSuccess);
  for (int r = 0; r < n; r++) {
    d->set_current(r);
    if (refusals[_i].plain & (1 << r))
      d->free(mem[r]);
    else
      ck_assert_int_eq(ncclMemFree(mem[r]), ncclSuccess);
  }
  for (int r = 0; r < n; r++) ck_assert_int_eq(ncclCommDestroy(comm[r]), ncclSuccess);
  ck_assert_int_eq(shm_count("braid-fakemc-"), 0);
  ck_assert_int_eq(shm_count("braid-fakegpu-"), 0);
}
END_TEST

Suite* mmwin_suite(void) {
  Suite* s = suite_create("mmwin");
  TCase* tc = tcase_create("bound");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_bound, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("direct");
  tcase_set_timeout(tc, 90);
  tcase_add_loop_test(tc, test_direct, 0, 4);
  suite_add_tcase(s, tc);
  tc = tcase_create("processes");
  tcase_set_timeout(tc, 90);
  tcase_add_loop_test(tc, test_processes, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("refusals");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_refusals, 0, sizeof(refusals) / sizeof(refusals[0]));
  suite_add_tcase(s, tc);
  return s;
}
