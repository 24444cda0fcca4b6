/*
 * test_reduce_split.c - Reduce of two ranks split between them (algo/ring.h
 * braid_ring_reduce_split_step, kernels/coll.h braid_run_reduce_split): each rank reduces
 * half of every loop, the non-root sends its half to the root final (RECV_REDUCE_FINAL_SEND).
 * Chosen by the tuner from BRAID_REDUCE_SPLIT_BYTES (here 256 KiB, so the sizes stay small)
 * and run where both shm connections are direct; elsewhere the chain runs.
 *
 * 2 ranks as threads and as processes, BRAID_SHM_DIRECT=AUTO, ON (every Simple step by
 * pointer), OFF (the FIFO: the chain) and AUTO with cross-memory attach denied by a seccomp
 * filter (deny_cma.h: processes fall back to the FIFO and the chain, threads still load in
 * place and split). Every root, in and out of place, every datatype x op (sum prod max min
 * avg, PreMulSum immediate and by pointer), counts just below the threshold (the chain), at
 * it, and odd above it (a partial last loop and partial last chunk). Checked against
 * refdata's independent reference, guard bytes around every buffer, the send buffer left
 * unchanged out of place, and the non-root's receive buffer is NULL (NCCL's Reduce does not
 * read or write it there).
 *
 * Delivery of the non-root's half (kernels/direct.h): by default it writes its half into the
 * root's output (threads: plain stores; processes: process_vm_writev) and the root copies
 * nothing; with BRAID_REDUCE_STORE=0, and between processes allowed to read but not write each
 * other (seccomp denying process_vm_writev only), it goes through the FIFO slot and the root
 * copies it.
 *
 * Tiers: the two AUTO cases with the store and no filter run every datatype; the others differ
 * only in the connections (split or chain, CMA or FIFO, store or slot), not in the arithmetic,
 * and run one datatype of each element size (int8, float16, float32, float64) unless
 * BRAID_TEST_TIER=full.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deny_cma.h"
#include "harness.h"
#include "nccl.h"
#include "refdata.h"

#define RANK_TIMEOUT_S 280
#define TCASE_TIMEOUT_S 300
#define SPLIT_BYTES (256u << 10) /* BRAID_REDUCE_SPLIT_BYTES of these cases */

struct scase {
  enum harness_mode mode;
  const char* direct; /* BRAID_SHM_DIRECT */
  int deny;           /* seccomp: 1 process_vm_readv/writev fail with EPERM, 2 only writev */
  int store;          /* BRAID_REDUCE_STORE */
  int every_dtype;    /* 1: every datatype in every tier; 0: SIZE_DTYPES unless BRAID_TEST_TIER=full */
};

/* One datatype of each element size: what the connection-only cases run in the default tier. */
#define SIZE_DTYPES ((1u << ncclInt8) | (1u << ncclFloat16) | (1u << ncclFloat32) | (1u << ncclFloat64))

static const struct scase cases[] = {
    {HARNESS_THREADS, "AUTO", 0, 1, 1}, {HARNESS_PROCS, "AUTO", 0, 1, 1},  {HARNESS_THREADS, "ON", 0, 1, 0},
    {HARNESS_PROCS, "ON", 0, 1, 0},     {HARNESS_THREADS, "OFF", 0, 1, 0}, {HARNESS_PROCS, "OFF", 0, 1, 0},
    {HARNESS_THREADS, "AUTO", 1, 1, 0}, {HARNESS_PROCS, "AUTO", 1, 1, 0},  {HARNESS_PROCS, "AUTO", 2, 1, 0},
    {HARNESS_THREADS, "AUTO", 0, 0, 0}, {HARNESS_PROCS, "AUTO", 0, 0, 0},
};

static ncclResult_t make_op(int dt, int op, ncclComm_t comm, unsigned char* scalar, ncclRedOp_t* out) {
  static const ncclRedOp_t builtin[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  if (op < REF_PMS_IMM) {
    *out = builtin[op];
    return ncclSuccess;
  }
  int imm = op == REF_PMS_IMM;
  ref_pms_scalar(dt, 0, scalar);
  ncclResult_t res =
      ncclRedOpCreatePreMulSum(out, scalar, (ncclDataType_t)dt, imm ? ncclScalarHostImmediate : ncclScalarDevice, comm);
  ref_pms_scalar(dt, 1, scalar); /* immediate: ignored; by pointer: the value used */
  return res;
}

/* One call: 0 right, 1 wrong, -1 the call failed (ranks out of step). */
static int one_call(struct harness_rank* r, ncclComm_t comm, int root, size_t cnt, int dt, int op, int inplace,
                    uint32_t seed) {
  int n = r->nranks, me = r->rank, ret = 0, has_out = me == root;
  size_t es = ref_dtype_size(dt);
  enum ref_kind kind = ref_kind_of(op);
  struct ref_region sreg = {0}, rreg = {0};
  char msg[512] = "";
  /* misaligned by a rank-dependent number of elements (and bytes for 1-byte types) */
  size_t soff = (size_t)(me + 1) * es + (es == 1 ? 3 : 0), roff = (size_t)(2 * me + 3) * es;
  int bad_alloc = 0;
  if (inplace || has_out) bad_alloc = ref_region_alloc(&rreg, cnt * es, inplace ? soff : roff, 0x20) != 0;
  if (!bad_alloc && !inplace) bad_alloc = ref_region_alloc(&sreg, cnt * es, soff, 0x10) != 0;
  if (bad_alloc) {
    ref_region_free(&rreg);
    ref_region_free(&sreg);
    return harness_fail(r, "out of memory"), -1;
  }
  char* send = inplace ? rreg.p : sreg.p;
  char* recv = inplace ? rreg.p : has_out ? rreg.p : NULL; /* the non-root passes no output */
  ref_fill(dt, kind, seed, me, 0, cnt, send);
  unsigned char scalar[8];
  ncclRedOp_t rop;
  ncclResult_t res = make_op(dt, op, comm, scalar, &rop);
  if (res == ncclSuccess) res = ncclReduce(send, recv, cnt, (ncclDataType_t)dt, rop, root, comm, NULL);
  if (res != ncclSuccess) {
    ret = -1;
    snprintf(msg, sizeof(msg), "call failed: %s", ncclGetErrorString(res));
  } else {
    struct ref_red red = {dt, op, n, seed};
    size_t bad = 0;
    if (has_out) bad = ref_check_reduce(&red, 0, cnt, recv, msg, sizeof(msg));
    if (!bad && (!inplace || !has_out) && ref_check_copy(dt, kind, seed, me, 0, cnt, send, msg, sizeof(msg)))
      bad = 1, strcat(msg, " (the send buffer changed)");
    if (!bad && (ref_region_guards_bad(&sreg) || ref_region_guards_bad(&rreg)))
      bad = 1, snprintf(msg, sizeof(msg), "guard bytes around the buffers were overwritten");
    ret = bad != 0;
  }
  if (ret)
    harness_fail(r, "Reduce root %d %s %s %s count %zu: %s", root, ref_dtype_name(dt), ref_op_name(op),
                 inplace ? "in place" : "out of place", cnt, msg);
  if (res == ncclSuccess && op >= REF_PMS_IMM && ncclRedOpDestroy(rop, comm) != ncclSuccess) ret = -1;
  ref_region_free(&sreg);
  ref_region_free(&rreg);
  return ret;
}

static int body(struct harness_rank* r) {
  const struct scase* k = r->arg;
  if (k->deny && deny_cma_calls(k->deny == 2) != 0) return harness_fail(r, "cannot install the seccomp filter");
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int wrong = 0;
  uint32_t seed = 7;
  unsigned dtypes = k->every_dtype || ref_tier_full() ? REF_ALL_DTYPES : SIZE_DTYPES;
  for (int dt = 0; dt < REF_NUM_DTYPES; dt++) {
    if (!(dtypes & (1u << dt))) continue;
    size_t es = ref_dtype_size(dt), at = SPLIT_BYTES / es;
    /* below the threshold (the chain), at it, and odd above it */
    const size_t counts[] = {at - 1, at, 2 * at + 2 * 4096 / es + 3};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
      for (int op = 0; op < REF_NUM_OPS; op++)
        for (int root = 0; root < r->nranks; root++)
          for (int inplace = 0; inplace < 2; inplace++) {
            int rc = one_call(r, comm, root, counts[c], dt, op, inplace, seed++);
            if (rc < 0) return 1; /* out of step: leave without destroying */
            wrong += rc;
          }
  }
  RCHECK(r, ncclCommDestroy(comm));
  return wrong != 0;
}

START_TEST(test_split) {
  const struct scase* k = &cases[_i];
  char env[256];
  snprintf(env, sizeof(env), "BRAID_SHM_DIRECT=%s BRAID_REDUCE_SPLIT_BYTES=%u BRAID_REDUCE_STORE=%d BRAID_HOST_MODE=1",
           k->direct, SPLIT_BYTES, k->store);
  ref_env_apply(env);
  int failed = harness_run(2, k->mode, body, (void*)k, RANK_TIMEOUT_S);
  unsetenv("BRAID_REDUCE_SPLIT_BYTES");
  unsetenv("BRAID_REDUCE_STORE");
  ref_env_apply("BRAID_SHM_DIRECT=AUTO");
  ck_assert_msg(failed == 0, "2 ranks (%s, BRAID_SHM_DIRECT=%s%s%s): %d failed", harness_mode_name(k->mode), k->direct,
                k->deny == 1   ? ", CMA denied"
                : k->deny == 2 ? ", process_vm_writev denied"
                               : "",
                k->store ? "" : ", BRAID_REDUCE_STORE=0", failed);
}
END_TEST

Suite* reduce_split_suite(void) {
  Suite* s = suite_create("reduce_split");
  TCase* tc = tcase_create("split");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_split, 0, (int)(sizeof(cases) / sizeof(cases[0])));
  suite_add_tcase(s, tc);
  return s;
}
