/*
 * test_lsa_line.c - host mode's one-line one-shot all-reduce (kernels/lsa.h, core/sym/lsa.c):
 *   mixed    calls that alternate between line-sized (<= 4 KiB) and larger one-shots, in and
 *            out of place, and with rank 0 putting every other call in a group of its own (the
 *            plan's path) while the others call alone (the lone path): every result exact,
 *            as threads, processes and pairs, for 2 and 3 ranks;
 *   timeout  BRAID_TIMEOUT=2 and a rank that skips an 8-byte call: the waiting rank's call
 *            fails within a few seconds and says BRAID_TIMEOUT;
 *   sizes    two ranks call with different line-sized counts (mismatch checker off, no
 *            BRAID_TIMEOUT): both calls fail with ncclInvalidUsage saying so, not a hang;
 *   slow     3000 calls of up to 8 bytes (one word and one store: lsa.h), in several datatypes,
 *            with a line-sized call now and then and rank 0 grouping some, while one rank
 *            or another sleeps before a call: both slots of every rank are reused ~1500 times
 *            with a peer that is late, early, or still reading; every result exact;
 *   fastpath what the lone path keeps between calls (core/sym/lsa.c: the tuner's last yes,
 *            the BRAID_CHECK_MISMATCH memo) never hides a feature: with TUNING logged, rank 0
 *            prints the tuner's line for every call, of sizes in turn and in runs; the mismatch check
 *            turned on by a reload between calls of a live communicator catches the next
 *            mismatched call (float against int32: the same size, so the line cannot);
 *   flat     the flat calls (lsa.h: one call number per call, from BRAID_LSA_FLAT_BYTES, here
 *            57): every size from 57 bytes to 4 KiB around the line and 16-byte boundaries, in
 *            float sum, int8 max and int32 PreMulSum (a scalar per rank: the staged own operand),
 *            in and out of place (rank >= 2 in place: staged too), each rank's non-temporal
 *            stores on or off on its own (processes: rank 1 off) or measured (threads and
 *            pairs: BRAID_LSA_FLAT_NT=2, both kinds in the trials), flat calls between one-word
 *            and line calls: every result exact, for 2, 3 and 4 ranks; and a rank whose
 *            BRAID_LSA_FLAT_BYTES puts a call in the other layout: both fail with
 *            ncclInvalidUsage, not a hang or garbage.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "harness.h"
#include "nccl.h"

#define HARNESS_TIMEOUT_S 60

static const size_t mixed_counts[] = {2, 1025, 1, 14, 15, 1024, 5000, 2, 3000, 1, 13, 1024};
#define NMIXED (sizeof(mixed_counts) / sizeof(mixed_counts[0]))
#define MAXCOUNT 5000

static int body_mixed(struct harness_rank* r) {
  ncclComm_t comm;
  float* in = malloc(MAXCOUNT * sizeof(float));
  float* out = malloc(MAXCOUNT * sizeof(float));
  REXPECT(r, in != NULL && out != NULL, "out of memory");
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  const float tri = (float)(r->nranks * (r->nranks + 1) / 2);
  for (int round = 0; round < 3; round++) {
    for (size_t k = 0; k < NMIXED; k++) {
      size_t n = mixed_counts[k];
      int in_place = (k + round) % 2, grouped = r->rank == 0 && k % 2 == 1;
      for (size_t i = 0; i < n; i++) in[i] = (float)((r->rank + 1) * (int)(i % 7 + 1 + round));
      float* dst = in_place ? in : out;
      if (grouped) RCHECK(r, ncclGroupStart());
      RCHECK(r, ncclAllReduce(in, dst, n, ncclFloat, ncclSum, comm, NULL));
      if (grouped) RCHECK(r, ncclGroupEnd());
      for (size_t i = 0; i < n; i++) {
        float want = tri * (float)(i % 7 + 1 + round);
        REXPECT(r, dst[i] == want, "round %d call %zu (count %zu, %s, %s): element %zu is %g, expected %g", round, k, n,
                in_place ? "in place" : "out of place", grouped ? "grouped" : "alone", i, dst[i], want);
      }
    }
  }
  RCHECK(r, ncclCommDestroy(comm));
  free(in);
  free(out);
  return 0;
}

static const struct {
  int nranks;
  enum harness_mode mode;
} mixed_runs[] = {
    {2, HARNESS_PROCS}, {2, HARNESS_THREADS}, {3, HARNESS_PROCS}, {3, HARNESS_THREADS}, {4, HARNESS_PAIRS},
};

START_TEST(test_mixed) {
  ck_assert_int_eq(harness_run(mixed_runs[_i].nranks, mixed_runs[_i].mode, body_mixed, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

#define NSLOW 3000

/* Call k's input of rank `rank` (small integers: every sum is exact in every type). */
static int slow_value(int rank, int k, int i) {
  return (rank + 1) * ((k + 3 * i) % 29 + 1);
}

static int body_slow(struct harness_rank* r) {
  ncclComm_t comm;
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  const int tri = r->nranks * (r->nranks + 1) / 2;
  for (int k = 0; k < NSLOW; k++) {
    /* who is slow: the last rank every 61st call, rank 0 every 47th, everyone else never */
    if ((r->rank == r->nranks - 1 && k % 61 == 5) || (r->rank == 0 && k % 47 == 3)) usleep(300);
    int grouped = r->rank == 0 && k % 7 == 1, kind = k % 5;
    if (grouped) RCHECK(r, ncclGroupStart());
    if (kind == 0 || kind == 1) { /* 1 or 2 floats: 4 or 8 bytes */
      float in[14], out[14];
      int n = k % 100 == 50 ? 14 : kind + 1; /* now and then a line-sized call between */
      for (int i = 0; i < n; i++) in[i] = (float)slow_value(r->rank, k, i);
      RCHECK(r, ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, NULL));
      if (grouped) RCHECK(r, ncclGroupEnd());
      for (int i = 0; i < n; i++)
        REXPECT(r, out[i] == (float)(tri * slow_value(0, k, i)), "call %d (%d floats): element %d is %g, expected %d",
                k, n, i, out[i], tri * slow_value(0, k, i));
    } else if (kind == 2) { /* one double, in place */
      double x = slow_value(r->rank, k, 0);
      RCHECK(r, ncclAllReduce(&x, &x, 1, ncclDouble, ncclSum, comm, NULL));
      if (grouped) RCHECK(r, ncclGroupEnd());
      REXPECT(r, x == tri * slow_value(0, k, 0), "call %d (double): %g, expected %d", k, x, tri * slow_value(0, k, 0));
    } else { /* 3 or 5 int8 (not a whole word), max */
      int8_t in[5], out[5];
      int n = kind == 3 ? 3 : 5;
      for (int i = 0; i < n; i++) in[i] = (int8_t)slow_value(r->rank, k, i);
      RCHECK(r, ncclAllReduce(in, out, n, ncclInt8, ncclMax, comm, NULL));
      if (grouped) RCHECK(r, ncclGroupEnd());
      for (int i = 0; i < n; i++)
        REXPECT(r, out[i] == slow_value(r->nranks - 1, k, i), "call %d (%d int8): element %d is %d, expected %d", k, n,
                i, out[i], slow_value(r->nranks - 1, k, i));
    }
  }
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_slow) {
  ck_assert_int_eq(harness_run(mixed_runs[_i].nranks, mixed_runs[_i].mode, body_slow, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

static volatile int* waiter_done; /* shared: rank 0 finished its failing call */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int body_timeout(struct harness_rank* r) {
  ncclComm_t comm;
  double x[1] = {1};
  setenv("BRAID_TIMEOUT", "2", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 3; i++) RCHECK(r, ncclAllReduce(x, x, 1, ncclDouble, ncclSum, comm, NULL));
  REXPECT(r, x[0] == 8, "three all-reduces of 1 over 2 ranks gave %g, expected 8", x[0]);
  if (r->rank == 1) { /* never joins the fourth */
    for (int i = 0; i < 6000 && !__atomic_load_n(waiter_done, __ATOMIC_ACQUIRE); i++) usleep(10000);
    ncclCommAbort(comm);
    return 0;
  }
  double t0 = now_s();
  ncclResult_t res = ncclAllReduce(x, x, 1, ncclDouble, ncclSum, comm, NULL);
  double took = now_s() - t0;
  const char* e = ncclGetLastError(comm);
  __atomic_store_n(waiter_done, 1, __ATOMIC_RELEASE);
  REXPECT(r, res != ncclSuccess, "the all-reduce without rank 1 succeeded");
  REXPECT(r, took >= 1.5 && took < 15.0, "the all-reduce stopped after %.1f s with BRAID_TIMEOUT=2", took);
  REXPECT(r, e != NULL && strstr(e, "BRAID_TIMEOUT") != NULL, "the error does not name BRAID_TIMEOUT: %s",
          e ? e : "(none)");
  ncclCommAbort(comm);
  return 0;
}

START_TEST(test_timeout) {
  waiter_done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne((void*)waiter_done, MAP_FAILED);
  *waiter_done = 0;
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_timeout, NULL, HARNESS_TIMEOUT_S), 0);
  munmap((void*)waiter_done, sizeof(int));
}
END_TEST

/* Rank 0's and rank 1's counts of floats: one line against several, several against more,
 * one word against another, one word against a line. */
static const size_t size_pairs[][2] = {{10, 100}, {100, 200}, {1000, 14}, {1, 2}, {2, 3}};

static int body_sizes(struct harness_rank* r) {
  ncclComm_t comm;
  const size_t* pair = r->arg;
  float buf[1000];
  for (int i = 0; i < 1000; i++) buf[i] = 1.0f;
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, NULL)); /* agreed: works */
  REXPECT(r, buf[0] == 2.0f, "a 4-float all-reduce gave %g, expected 2", buf[0]);
  ncclResult_t res = ncclAllReduce(buf, buf, pair[r->rank], ncclFloat, ncclSum, comm, NULL);
  const char* e = ncclGetLastError(comm);
  REXPECT(r, res == ncclInvalidUsage, "an all-reduce of %zu floats against %zu returned %d", pair[r->rank],
          pair[1 - r->rank], res);
  REXPECT(r, e != NULL && strstr(e, "different size") != NULL, "the error does not say why: %s", e ? e : "(none)");
  ncclCommAbort(comm);
  return 0;
}

START_TEST(test_sizes) {
  unsetenv("BRAID_TIMEOUT");
  unsetenv("BRAID_CHECK_MISMATCH");
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_sizes, (void*)size_pairs[_i], HARNESS_TIMEOUT_S), 0);
}
END_TEST

static int count_in(const char* text, const char* what) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
  return n;
}

#define NTUNED 20

static int body_tuning_logged(struct harness_rank* r) {
  ncclComm_t comm;
  char path[96];
  float x[4] = {1, 1, 1, 1};
  snprintf(path, sizeof(path), "/tmp/braid-test-lone-tuning-%d.log", (int)getpid());
  unlink(path);
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  ncclResetDebugInit(); /* the parameters again, and the logger reopened on them */
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 2 * NTUNED; i++) { /* 8 and 16 bytes (one word, one line) in turn, then in runs */
    size_t count = i < NTUNED ? (i % 2 ? 4 : 2) : i < 3 * NTUNED / 2 ? 2 : 4;
    RCHECK(r, ncclAllReduce(x, x, count, ncclFloat, ncclSum, comm, NULL));
    REXPECT(r, x[0] == 2.0f, "call %d gave %g, expected 2", i, x[0]);
    for (int k = 0; k < 4; k++) x[k] = 1;
  }
  RCHECK(r, ncclCommDestroy(comm));
  FILE* f = fopen(path, "r");
  static char log[1 << 20];
  size_t n = f != NULL ? fread(log, 1, sizeof(log) - 1, f) : 0;
  log[n] = '\0';
  if (f != NULL) fclose(f);
  unlink(path);
  if (r->rank != 0) return 0; /* only rank 0 prints TUNING lines */
  int n8 = count_in(log, "AllReduce: 8 Bytes -> Algo NVLS"), n16 = count_in(log, "AllReduce: 16 Bytes -> Algo NVLS");
  REXPECT(r, n8 == NTUNED && n16 == NTUNED, "%d calls of 8 and of 16 bytes logged %d and %d TUNING lines", NTUNED, n8,
          n16);
  return 0;
}

START_TEST(test_tuning_logged) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_tuning_logged, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

static int body_mismatch_reload(struct harness_rank* r) {
  ncclComm_t comm;
  union {
    float f;
    int32_t i;
  } v;
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  unsetenv("BRAID_CHECK_MISMATCH");
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  for (int i = 0; i < 10; i++) { /* the lone path, the check off */
    v.f = 1.0f;
    RCHECK(r, ncclAllReduce(&v, &v, 1, ncclFloat, ncclSum, comm, NULL));
    REXPECT(r, v.f == 2.0f, "call %d gave %g, expected 2", i, v.f);
  }
  setenv("BRAID_CHECK_MISMATCH", "1", 1); /* every rank, between the same two calls */
  braid_param_reload();
  v.f = 1.0f;
  RCHECK(r, ncclAllReduce(&v, &v, 1, ncclFloat, ncclSum, comm, NULL)); /* agreed: checked and run */
  REXPECT(r, v.f == 2.0f, "the checked call gave %g, expected 2", v.f);
  v.i = 1;
  ncclResult_t res = ncclAllReduce(&v, &v, 1, r->rank == 0 ? ncclFloat : ncclInt32, ncclSum, comm, NULL);
  const char* e = ncclGetLastError(comm);
  REXPECT(r, res == ncclInvalidUsage, "float against int32 returned %d (%s)", (int)res, ncclGetErrorString(res));
  REXPECT(r, e != NULL && strstr(e, "Mismatched collective") != NULL, "the error is not a mismatch: %s",
          e ? e : "(none)");
  ncclCommAbort(comm);
  return 0;
}

START_TEST(test_mismatch_reload) {
  unsetenv("BRAID_TIMEOUT");
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_mismatch_reload, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- flat ---- */
static const size_t flat_bytes[] = {57,  60,   63,   64,   65,   112,  120,  128,  200, 500, 511,
                                    512, 1000, 2040, 2048, 2056, 4000, 4092, 4096, 8,   40};
#define NFLAT (sizeof(flat_bytes) / sizeof(flat_bytes[0]))

static int flat_value(int rank, int k, size_t i) {
  return (rank + 1) * (int)((k + 5 * i) % 23 + 1) - 11;
}

static int body_flat(struct harness_rank* r) {
  ncclComm_t comm;
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  setenv("BRAID_LSA_FLAT_BYTES", "57", 1);
  setenv("BRAID_LSA_FLAT_NT", r->arg == NULL ? "2" : r->rank == 1 ? "0" : "1", 1); /* measured, or set per rank */
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int32_t scalar = r->rank + 2;
  ncclRedOp_t pms;
  RCHECK(r, ncclRedOpCreatePreMulSum(&pms, &scalar, ncclInt32, ncclScalarHostImmediate, comm));
  char *in = malloc(4096 + 64), *out = malloc(4096 + 64);
  REXPECT(r, in != NULL && out != NULL, "out of memory");
  for (int round = 0; round < 2; round++)
    for (size_t k = 0; k < NFLAT; k++)
      for (int kind = 0; kind < 3; kind++) {
        const int in_place = (int)(k + round + kind) % 2, call = (int)(k * 3 + kind) + round * 100;
        size_t bytes = flat_bytes[k], n;
        char* dst = in_place ? in : out;
        memset(out, 0x5a, 4096 + 64);
        if (kind == 0) { /* float sum */
          n = bytes / 4;
          float* x = (float*)(void*)in;
          for (size_t i = 0; i < n; i++) x[i] = (float)flat_value(r->rank, call, i);
          RCHECK(r, ncclAllReduce(in, dst, n, ncclFloat, ncclSum, comm, NULL));
          const float* y = (const float*)(void*)dst;
          for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int q = 0; q < r->nranks; q++) want += (float)flat_value(q, call, i);
            REXPECT(r, y[i] == want, "call %d (%zu floats, %s): element %zu is %g, expected %g", call, n,
                    in_place ? "in place" : "out of place", i, y[i], want);
          }
        } else if (kind == 1) { /* int8 max: every byte count */
          n = bytes;
          for (size_t i = 0; i < n; i++) in[i] = (char)flat_value(r->rank, call, i);
          RCHECK(r, ncclAllReduce(in, dst, n, ncclInt8, ncclMax, comm, NULL));
          for (size_t i = 0; i < n; i++) {
            int want = -128;
            for (int q = 0; q < r->nranks; q++)
              if ((int8_t)flat_value(q, call, i) > want) want = (int8_t)flat_value(q, call, i);
            REXPECT(r, (int8_t)dst[i] == want, "call %d (%zu int8, %s): element %zu is %d, expected %d", call, n,
                    in_place ? "in place" : "out of place", i, (int8_t)dst[i], want);
          }
        } else { /* int32 PreMulSum, this rank's own scalar */
          n = bytes / 4;
          int32_t* x = (int32_t*)(void*)in;
          for (size_t i = 0; i < n; i++) x[i] = flat_value(r->rank, call, i);
          RCHECK(r, ncclAllReduce(in, dst, n, ncclInt32, pms, comm, NULL));
          const int32_t* y = (const int32_t*)(void*)dst;
          for (size_t i = 0; i < n; i++) {
            int32_t want = 0;
            for (int q = 0; q < r->nranks; q++) want += (q + 2) * flat_value(q, call, i);
            REXPECT(r, y[i] == want, "call %d (%zu int32 premulsum, %s): element %zu is %d, expected %d", call, n,
                    in_place ? "in place" : "out of place", i, y[i], want);
          }
        }
        REXPECT(r, in_place || (unsigned char)out[n * (kind == 1 ? 1 : 4)] == 0x5a, "call %d wrote past its output",
                call);
      }
  RCHECK(r, ncclRedOpDestroy(pms, comm));
  RCHECK(r, ncclCommDestroy(comm));
  free(in);
  free(out);
  return 0;
}

static const struct {
  int nranks;
  enum harness_mode mode;
  int nt_mixed; /* rank 1 without non-temporal stores (processes: each its own environment) */
} flat_runs[] = {
    {2, HARNESS_PROCS, 1},   {2, HARNESS_THREADS, 0}, {3, HARNESS_PROCS, 1},
    {3, HARNESS_THREADS, 0}, {4, HARNESS_PAIRS, 0},
};

START_TEST(test_flat) {
  unsetenv("BRAID_TIMEOUT");
  ck_assert_int_eq(harness_run(flat_runs[_i].nranks, flat_runs[_i].mode, body_flat,
                               flat_runs[_i].nt_mixed ? (void*)"mixed" : NULL, HARNESS_TIMEOUT_S),
                   0);
}
END_TEST

/* Rank 0 sends 1 KiB calls flat (BRAID_LSA_FLAT_BYTES 512), rank 1 as lines (0: never flat). */
static int body_flat_layout(struct harness_rank* r) {
  ncclComm_t comm;
  float buf[256];
  for (int i = 0; i < 256; i++) buf[i] = 1.0f;
  setenv("NCCL_ALGO", "allreduce:NVLS", 1);
  setenv("BRAID_LSA_VARIANT", "ONESHOT", 1);
  setenv("BRAID_LSA_FLAT_BYTES", r->rank == 0 ? "512" : "0", 1);
  braid_param_reload();
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, comm, NULL)); /* 256 bytes: lines on both */
  REXPECT(r, buf[0] == 2.0f, "a 64-float all-reduce gave %g, expected 2", buf[0]);
  ncclResult_t res = ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, NULL);
  const char* e = ncclGetLastError(comm);
  REXPECT(r, res == ncclInvalidUsage, "a 1 KiB all-reduce in two layouts returned %d", res);
  REXPECT(r, e != NULL && strstr(e, "BRAID_LSA_FLAT_BYTES") != NULL, "the error does not say why: %s",
          e ? e : "(none)");
  ncclCommAbort(comm);
  return 0;
}

START_TEST(test_flat_layout) {
  unsetenv("BRAID_TIMEOUT");
  unsetenv("BRAID_CHECK_MISMATCH");
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_flat_layout, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

Suite* lsa_line_suite(void);
Suite* lsa_line_suite(void) {
  Suite* s = suite_create("lsa_line");
  TCase* tc = tcase_create("mixed");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_mixed, 0, sizeof(mixed_runs) / sizeof(mixed_runs[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("slow");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_slow, 0, sizeof(mixed_runs) / sizeof(mixed_runs[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("timeout");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_test(tc, test_timeout);
  suite_add_tcase(s, tc);
  tc = tcase_create("sizes");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_sizes, 0, sizeof(size_pairs) / sizeof(size_pairs[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("fastpath");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_test(tc, test_tuning_logged);
  tcase_add_test(tc, test_mismatch_reload);
  suite_add_tcase(s, tc);
  tc = tcase_create("flat");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_flat, 0, sizeof(flat_runs) / sizeof(flat_runs[0]));
  tcase_add_test(tc, test_flat_layout);
  suite_add_tcase(s, tc);
  return s;
}
