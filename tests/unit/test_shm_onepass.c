/*
 * test_shm_onepass.c - the one-pass reduction of the shm direct path (kernels/direct.h): a
 * reducing step reduces straight from the sender's buffer (threads: plain loads) or from
 * 64 KiB pieces copied out of it by cross-memory attach (processes), instead of copying the
 * whole step into the FIFO slot first.
 *
 * BRAID_SHM_DIRECT=ON (every Simple step by pointer), NCCL_PROTO=Simple, every datatype x op
 * (sum prod max min avg, PreMulSum immediate and by pointer) x AllReduce / ReduceScatter /
 * Reduce, in and out of place, an odd count spanning several pieces (and partial last ones),
 * send and receive buffers misaligned differently on each rank (so the peer's source and my
 * input never share an alignment). Checked against refdata's independent reference, with the
 * guard bytes around every buffer and the send buffer left unchanged out of place. Cases: 2
 * ranks as threads and as processes, 3 processes (ring steps that forward partial sums), and
 * 3 processes with NCCL_ALGO=Tree (fan-in of two children).
 *
 * The 2-rank ring all-reduce pushes (kernels/direct.h: each rank writes its reduced chunks
 * into the peer's output too, BRAID_SHM_PUSH, on by default): the 2-rank cases above run it;
 * three more run the pull it replaces (BRAID_SHM_PUSH=0, threads and processes) and the
 * fallback where process_vm_writev is denied but the read is not (deny_cma_write: every
 * step falls back to the peer reading it).
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
#define COUNT 100003 /* i8: 2 pieces; f64: 13 and a bit */

enum { OP_ALLREDUCE, OP_REDUCESCATTER, OP_REDUCE, OP_NCOLLS };
static const char* const coll_names[OP_NCOLLS] = {"AllReduce", "ReduceScatter", "Reduce"};

struct ocase {
  int nranks;
  enum harness_mode mode;
  const char* env;
  int ncolls;     /* the first ones of OP_*: Tree is AllReduce's only */
  int deny_write; /* processes: process_vm_writev denied in every rank (deny_cma_write) */
};

static const struct ocase cases[] = {
    {2, HARNESS_THREADS, "NCCL_ALGO=Ring", OP_NCOLLS, 0},
    {2, HARNESS_PROCS, "NCCL_ALGO=Ring", OP_NCOLLS, 0},
    {3, HARNESS_PROCS, "NCCL_ALGO=Ring", OP_NCOLLS, 0},
    {3, HARNESS_PROCS, "NCCL_ALGO=Tree", 1, 0},
    {2, HARNESS_THREADS, "NCCL_ALGO=Ring BRAID_SHM_PUSH=0", 1, 0},
    {2, HARNESS_PROCS, "NCCL_ALGO=Ring BRAID_SHM_PUSH=0", 1, 0},
    {2, HARNESS_PROCS, "NCCL_ALGO=Ring", 1, 1},
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
static int one_call(struct harness_rank* r, ncclComm_t comm, int coll, int dt, int op, int inplace, uint32_t seed) {
  int n = r->nranks, me = r->rank, root = (int)(seed % (uint32_t)n), ret = 0;
  size_t es = ref_dtype_size(dt), cnt = COUNT, in_elems = coll == OP_REDUCESCATTER ? cnt * (size_t)n : cnt;
  enum ref_kind kind = ref_kind_of(op);
  struct ref_region sreg = {0}, rreg = {0};
  char msg[512] = "";
  /* misaligned by a rank-dependent number of elements (and bytes for 1-byte types) */
  size_t soff = (size_t)(me + 1) * es + (es == 1 ? 3 : 0), roff = (size_t)(2 * me + 3) * es;
  if (ref_region_alloc(&rreg, in_elems * es, inplace ? soff : roff, 0x20) != 0 ||
      (!inplace && ref_region_alloc(&sreg, in_elems * es, soff, 0x10) != 0)) {
    ref_region_free(&rreg);
    return harness_fail(r, "out of memory"), -1;
  }
  char* send = inplace ? rreg.p : sreg.p;
  char* recv = inplace && coll == OP_REDUCESCATTER ? rreg.p + (size_t)me * cnt * es : rreg.p;
  ref_fill(dt, kind, seed, me, 0, in_elems, send);
  unsigned char scalar[8];
  ncclRedOp_t rop;
  ncclResult_t res = make_op(dt, op, comm, scalar, &rop);
  if (res == ncclSuccess) {
    if (coll == OP_ALLREDUCE) res = ncclAllReduce(send, recv, cnt, (ncclDataType_t)dt, rop, comm, NULL);
    if (coll == OP_REDUCESCATTER) res = ncclReduceScatter(send, recv, cnt, (ncclDataType_t)dt, rop, comm, NULL);
    if (coll == OP_REDUCE) res = ncclReduce(send, recv, cnt, (ncclDataType_t)dt, rop, root, comm, NULL);
  }
  if (res != ncclSuccess) {
    ret = -1;
    snprintf(msg, sizeof(msg), "call failed: %s", ncclGetErrorString(res));
  } else {
    struct ref_red red = {dt, op, n, seed};
    size_t first = coll == OP_REDUCESCATTER ? (size_t)me * cnt : 0, bad = 0;
    if (coll != OP_REDUCE || me == root) bad = ref_check_reduce(&red, first, cnt, recv, msg, sizeof(msg));
    if (!bad && !inplace && ref_check_copy(dt, kind, seed, me, 0, in_elems, send, msg, sizeof(msg)))
      bad = 1, strcat(msg, " (the send buffer changed)");
    if (!bad && (ref_region_guards_bad(&sreg) || ref_region_guards_bad(&rreg)))
      bad = 1, snprintf(msg, sizeof(msg), "guard bytes around the buffers were overwritten");
    ret = bad != 0;
  }
  if (ret)
    harness_fail(r, "%s %s %s %s count %d: %s", coll_names[coll], ref_dtype_name(dt), ref_op_name(op),
                 inplace ? "in place" : "out of place", COUNT, msg);
  if (res == ncclSuccess && op >= REF_PMS_IMM && ncclRedOpDestroy(rop, comm) != ncclSuccess) ret = -1;
  ref_region_free(&sreg);
  ref_region_free(&rreg);
  return ret;
}

static int body(struct harness_rank* r) {
  const struct ocase* k = r->arg;
  ncclComm_t comm;
  if (k->deny_write && deny_cma_write() != 0) return harness_fail(r, "cannot install the seccomp filter");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int wrong = 0;
  uint32_t seed = 11;
  for (int dt = 0; dt < REF_NUM_DTYPES; dt++)
    for (int op = 0; op < REF_NUM_OPS; op++)
      for (int coll = 0; coll < k->ncolls; coll++)
        for (int inplace = 0; inplace < 2; inplace++) {
          int rc = one_call(r, comm, coll, dt, op, inplace, seed++);
          if (rc < 0) return 1; /* out of step: leave without destroying */
          wrong += rc;
        }
  RCHECK(r, ncclCommDestroy(comm));
  return wrong != 0;
}

START_TEST(test_onepass) {
  const struct ocase* k = &cases[_i];
  char env[256];
  snprintf(env, sizeof(env), "BRAID_SHM_DIRECT=ON NCCL_PROTO=Simple BRAID_HOST_MODE=1 %s", k->env);
  ref_env_apply(env);
  int failed = harness_run(k->nranks, k->mode, body, (void*)k, RANK_TIMEOUT_S);
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_ALGO");
  unsetenv("BRAID_SHM_PUSH");
  ref_env_apply("BRAID_SHM_DIRECT=AUTO");
  ck_assert_msg(failed == 0, "%d ranks (%s, %s): %d failed", k->nranks, harness_mode_name(k->mode), k->env, failed);
}
END_TEST

Suite* shm_onepass_suite(void) {
  Suite* s = suite_create("shm_onepass");
  TCase* tc = tcase_create("onepass");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_onepass, 0, (int)(sizeof(cases) / sizeof(cases[0])));
  suite_add_tcase(s, tc);
  return s;
}
