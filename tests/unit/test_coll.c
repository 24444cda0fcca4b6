/*
 * test_coll.c - correctness of the collectives AllReduce, Reduce, ReduceScatter, AllGather
 * and Broadcast through the public API, on ranks run by harness.h (threads, processes, two
 * ranks per process), checked against refdata's independent reference. (AlltoAll, Gather,
 * Scatter and Send/Recv: test_p2p.c; bad arguments: test_badarg.c.)
 *
 * Every call is checked for: the result (integers exact, floating within refdata's
 * tolerance), guard bytes around every buffer (no out-of-bounds write), the send buffer left
 * as it was (out of place), and the receive buffer of a non-root Reduce left untouched.
 *
 * TCases (default tier; BRAID_TEST_TIER=full adds the entries marked "full"):
 *   matrix  every collective x 12 datatypes x 7 ops (sum prod max min avg, PreMulSum with an
 *           immediate scalar and with a scalar pointer read at call time) x protocol (LL, LL128,
 *           Simple via NCCL_PROTO), 3 ranks as threads, counts 0, 1, 7, 1023, in and out of place;
 *           the same for every collective on 1 rank (counts 0 1 7 1023) and on 4 processes.
 *           full: the same at 2 ranks (threads), 5 (processes), 8 (threads), 4 (pairs) with
 *           counts 0, 1, 7, 1023, 65537.
 *   ranks   1..8 ranks as threads and as processes, and 2, 3, 5, 8 ranks as pairs: every
 *           collective, float sum, counts 0, 1, 7, 1023, 65537, in and out of place.
 *   layout  buffers 1 or 3 elements past 64-byte alignment, in and out of place, 7 datatypes,
 *           sum / max / avg, counts 1, 7, 1023, 65537, 4 ranks.
 *   large   1M+3 elements per collective (4 ranks); full: 64M elements (2 ranks).
 *   env     channels (NCCL_MIN/MAX_NCHANNELS) x small FIFOs (NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE,
 *           NCCL_LL128_BUFFSIZE) x protocol, float and bfloat16, 262147 elements, 3 ranks.
 *   algo    AllReduce with NCCL_ALGO=Ring / Tree x protocol (every datatype and op, 3 ranks);
 *           Tree at 1..8 ranks (threads), 3, 5, 8 processes, 6 as pairs.
 *   nvls    AllReduce with NCCL_ALGO=NVLS (host one-shot / two-shot over the shared scratch):
 *           both variants x threads (3) / processes (4) / pairs (4), every datatype and op; then
 *           2..8 ranks as threads, 2, 3, 5, 8 processes, 6 as pairs, counts up to 65537.
 *   group   several collectives of different types, counts and roots in one group (threads,
 *           processes); one thread driving an ncclCommInitAll clique through groups.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "harness.h"
#include "nccl.h"
#include "refdata.h"

enum coll { C_ALLREDUCE = 0, C_REDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST, C_NUM };
static const char* const coll_names[C_NUM] = {"AllReduce", "Reduce", "ReduceScatter", "AllGather", "Broadcast"};
#define ALL_COLLS ((1u << C_NUM) - 1)
#define BIT(x) (1u << (x))

#define PLACE_OUT 1
#define PLACE_IN 2
#define PLACE_BOTH 3
#define END ((size_t)-1)
#define MAX_MSGS 64        /* failure lines printed per rank */
#define RANK_TIMEOUT_S 240 /* processes are killed after this */
#define TCASE_TIMEOUT_S 300

static const char* const proto_env[3] = {"NCCL_PROTO=LL", "NCCL_PROTO=LL128", "NCCL_PROTO=Simple"};

struct coll_case {
  int nranks;
  enum harness_mode mode;
  const char* env;      /* "NAME=value ..." set before the ranks start, or NULL */
  const char* env2;     /* more of the same */
  uint32_t colls;       /* BIT(enum coll) */
  uint32_t dtypes;      /* BIT(ncclDataType_t) */
  uint32_t ops;         /* BIT(enum ref_op), reducing collectives only */
  const size_t* counts; /* ends with END */
  int places;
  int offset; /* elements between 64-byte alignment and each buffer */
  uint32_t seed;
};

/* ---- one call ---- */

struct call {
  int coll, dtype, op, inplace, root;
  size_t count;
  uint32_t seed;
  int null_ok; /* pass NULL where the API allows it (count 0, non-root buffers) */
};

struct rank_state {
  struct harness_rank* r;
  ncclComm_t comm;
  int nmsgs;
};

static void describe(const struct call* k, int nranks, int offset, char* buf, size_t len) {
  snprintf(buf, len, "%s %s %s count %zu %s root %d offset %d nranks %d", coll_names[k->coll], ref_dtype_name(k->dtype),
           k->coll <= C_REDUCESCATTER ? ref_op_name(k->op) : "-", k->count, k->inplace ? "in-place" : "out-of-place",
           k->root, offset, nranks);
}

static int report(struct rank_state* st, const struct call* k, int offset, const char* what) {
  if (st->nmsgs++ < MAX_MSGS) {
    char d[256];
    describe(k, st->r->nranks, offset, d, sizeof(d));
    harness_fail(st->r, "%s: %s", d, what);
  }
  return 1;
}

/* Create the ncclRedOp_t of a test op (PreMulSum ones get their scalar here). */
static ncclResult_t make_op(const struct call* k, ncclComm_t comm, unsigned char* scalar, ncclRedOp_t* op) {
  switch (k->op) {
    case REF_SUM:
      *op = ncclSum;
      return ncclSuccess;
    case REF_PROD:
      *op = ncclProd;
      return ncclSuccess;
    case REF_MAX:
      *op = ncclMax;
      return ncclSuccess;
    case REF_MIN:
      *op = ncclMin;
      return ncclSuccess;
    case REF_AVG:
      *op = ncclAvg;
      return ncclSuccess;
  }
  /* Immediate: the scalar is read now, then the variable changes (the op must not see it).
   * By pointer: the variable holds something else at creation and the right value at the call. */
  int imm = k->op == REF_PMS_IMM;
  ref_pms_scalar(k->dtype, 0, scalar);
  ncclResult_t res = ncclRedOpCreatePreMulSum(op, scalar, (ncclDataType_t)k->dtype,
                                              imm ? ncclScalarHostImmediate : ncclScalarDevice, comm);
  ref_pms_scalar(k->dtype, 1, scalar); /* immediate: must be ignored; by pointer: the value to use */
  return res;
}

/* Host mode: NULL (a call is complete when it returns). On the fake GPU (tests/run.sh's
 * coll-nvls-fake-gpu parts) a call is asynchronous: each rank gets a stream of its own (ranks
 * as threads share device 0, whose legacy stream would serialise their kernels), waited for
 * before the buffers are read (issue). */
static cudaStream_t rank_stream(int rank) {
  return braid_device() == braid_device_fake ? (cudaStream_t)(uintptr_t)(0x1000 + rank) : NULL;
}

static ncclResult_t issue_async(const struct call* k, ncclComm_t comm, const void* send, void* recv, ncclRedOp_t op,
                                cudaStream_t s) {
  ncclDataType_t dt = (ncclDataType_t)k->dtype;
  switch (k->coll) {
    case C_ALLREDUCE:
      return ncclAllReduce(send, recv, k->count, dt, op, comm, s);
    case C_REDUCE:
      return ncclReduce(send, recv, k->count, dt, op, k->root, comm, s);
    case C_REDUCESCATTER:
      return ncclReduceScatter(send, recv, k->count, dt, op, comm, s);
    case C_ALLGATHER:
      return ncclAllGather(send, recv, k->count, dt, comm, s);
    case C_BROADCAST:
      return ncclBroadcast(send, recv, k->count, dt, k->root, comm, s);
  }
  return ncclInternalError;
}

/* Device mode: the call on stream s finished, and without an asynchronous error. */
static ncclResult_t call_done(ncclComm_t comm, cudaStream_t s) {
  const struct braid_device_ops* d = braid_device();
  ncclResult_t res = d != NULL ? d->stream_sync(s) : ncclSuccess, st = ncclSuccess;
  if (res == ncclSuccess && d != NULL) res = ncclCommGetAsyncError(comm, &st);
  return res != ncclSuccess ? res : st;
}

static ncclResult_t issue(const struct call* k, ncclComm_t comm, int rank, const void* send, void* recv,
                          ncclRedOp_t op) {
  ncclResult_t res = issue_async(k, comm, send, recv, op, rank_stream(rank));
  return res == ncclSuccess ? call_done(comm, rank_stream(rank)) : res;
}

/* Returns 0 (right), 1 (wrong result, the ranks stay in step) or -1 (API error: stop). */
static int run_call(struct rank_state* st, const struct call* k, int offset) {
  int n = st->r->nranks, me = st->r->rank, dt = k->dtype, ret = 0;
  size_t es = ref_dtype_size(dt), cnt = k->count, ob = offset * es;
  int reduces = k->coll <= C_REDUCESCATTER, is_root = me == k->root;
  enum ref_kind kind = reduces ? ref_kind_of(k->op) : REF_KIND_SUM;
  size_t in_elems = k->coll == C_REDUCESCATTER ? n * cnt : cnt;
  size_t out_elems = k->coll == C_ALLGATHER ? n * cnt : cnt;
  struct ref_region sreg = {0}, rreg = {0};
  const char* send;
  char* recv;
  char msg[512];
  const uint8_t ssalt = 0x10, rsalt = 0x20;

  if (k->inplace) {
    size_t elems = in_elems > out_elems ? in_elems : out_elems;
    if (ref_region_alloc(&rreg, elems * es, ob, rsalt) != 0) return report(st, k, offset, "out of memory"), -1;
    if (k->coll == C_ALLGATHER) {
      ref_fill(dt, kind, k->seed, me, 0, cnt, rreg.p + me * cnt * es);
      send = rreg.p + me * cnt * es;
      recv = rreg.p;
    } else if (k->coll == C_REDUCESCATTER) {
      ref_fill(dt, kind, k->seed, me, 0, in_elems, rreg.p);
      send = rreg.p;
      recv = rreg.p + me * cnt * es;
    } else {
      ref_fill(dt, kind, k->seed, me, 0, cnt, rreg.p);
      send = recv = rreg.p;
    }
  } else {
    if (ref_region_alloc(&sreg, in_elems * es, ob, ssalt) != 0 ||
        ref_region_alloc(&rreg, out_elems * es, ob, rsalt) != 0) {
      ref_region_free(&sreg);
      return report(st, k, offset, "out of memory"), -1;
    }
    ref_fill(dt, kind, k->seed, me, 0, in_elems, sreg.p);
    send = sreg.p;
    recv = rreg.p;
    /* Buffers the API does not read or write may be NULL. */
    if (k->null_ok && k->coll == C_BROADCAST && !is_root) send = NULL;
    if (k->null_ok && k->coll == C_REDUCE && !is_root) recv = NULL;
  }
  if (k->null_ok && cnt == 0) send = recv = NULL;

  unsigned char scalar[8];
  ncclRedOp_t op = ncclSum;
  ncclResult_t res = reduces ? make_op(k, st->comm, scalar, &op) : ncclSuccess;
  if (res != ncclSuccess) {
    snprintf(msg, sizeof(msg), "ncclRedOpCreatePreMulSum failed: %s (%s)", ncclGetErrorString(res),
             ncclGetLastError(st->comm));
    ret = -1;
    report(st, k, offset, msg);
    goto out;
  }
  res = issue(k, st->comm, me, send, recv, op);
  if (res != ncclSuccess) {
    snprintf(msg, sizeof(msg), "call failed: %s (%s)", ncclGetErrorString(res), ncclGetLastError(st->comm));
    ret = -1;
    report(st, k, offset, msg);
    goto out_op;
  }

  /* Guards, then the send buffer (out of place: unchanged), then the result. */
  size_t g = ref_region_guards_bad(&sreg) + ref_region_guards_bad(&rreg);
  if (g) {
    snprintf(msg, sizeof(msg), "%zu guard bytes around the buffers were overwritten", g);
    ret = report(st, k, offset, msg);
  }
  if (!k->inplace && send != NULL && ref_check_copy(dt, kind, k->seed, me, 0, in_elems, send, msg, sizeof(msg))) {
    ret = report(st, k, offset, "the send buffer changed");
  }
  if (recv == NULL) goto out_op;
  struct ref_red red = {dt, k->op, n, k->seed};
  size_t bad = 0;
  msg[0] = '\0';
  switch (k->coll) {
    case C_ALLREDUCE:
      bad = ref_check_reduce(&red, 0, cnt, recv, msg, sizeof(msg));
      break;
    case C_REDUCESCATTER:
      bad = ref_check_reduce(&red, me * cnt, cnt, recv, msg, sizeof(msg));
      break;
    case C_REDUCE:
      if (is_root)
        bad = ref_check_reduce(&red, 0, cnt, recv, msg, sizeof(msg));
      else if (k->inplace)
        bad = ref_check_copy(dt, kind, k->seed, me, 0, cnt, recv, msg, sizeof(msg));
      else if ((bad = ref_region_written(&rreg)) != 0)
        snprintf(msg, sizeof(msg), "a non-root rank's receive buffer was written");
      break;
    case C_ALLGATHER:
      for (int q = 0; q < n && bad == 0; q++)
        bad = ref_check_copy(dt, kind, k->seed, q, 0, cnt, recv + q * cnt * es, msg, sizeof(msg));
      break;
    case C_BROADCAST:
      bad = ref_check_copy(dt, kind, k->seed, k->root, 0, cnt, recv, msg, sizeof(msg));
      break;
  }
  if (bad) {
    char line[640];
    snprintf(line, sizeof(line), "%zu wrong elements; first: %s", bad, msg);
    ret = report(st, k, offset, line);
  }
out_op:
  if (op >= ncclNumOps) {
    res = ncclRedOpDestroy(op, st->comm);
    if (res != ncclSuccess) {
      snprintf(msg, sizeof(msg), "ncclRedOpDestroy failed: %s", ncclGetErrorString(res));
      ret = -1;
      report(st, k, offset, msg);
    }
  }
out:
  ref_region_free(&sreg);
  ref_region_free(&rreg);
  return ret;
}

/* ---- one case: every rank runs the same sequence of calls ---- */

static int case_body(struct harness_rank* r) {
  const struct coll_case* c = r->arg;
  struct rank_state st = {r, NULL, 0};
  ncclResult_t res = ncclCommInitRank(&st.comm, r->nranks, r->id, r->rank);
  if (res != ncclSuccess)
    return harness_fail(r, "ncclCommInitRank: %s (%s)", ncclGetErrorString(res), ncclGetLastError(NULL));
  int wrong = 0, stop = 0;
  uint32_t ncall = 0;
  for (int coll = 0; coll < C_NUM && !stop; coll++) {
    if (!(c->colls & BIT(coll))) continue;
    int reduces = coll <= C_REDUCESCATTER;
    for (int dt = 0; dt < REF_NUM_DTYPES && !stop; dt++) {
      if (!(c->dtypes & BIT(dt))) continue;
      for (int op = 0; op < REF_NUM_OPS && !stop; op++) {
        if (reduces ? !(c->ops & BIT(op)) : op > 0) continue;
        for (const size_t* cnt = c->counts; *cnt != END && !stop; cnt++) {
          for (int place = 0; place < 2 && !stop; place++) {
            if (!(c->places & (place ? PLACE_IN : PLACE_OUT))) continue;
            struct call k = {coll,
                             dt,
                             op,
                             place,
                             (int)(ncall % r->nranks),
                             *cnt,
                             c->seed * 7919u + ncall * 2654435761u + 1,
                             (int)(ncall & 1)};
            ncall++;
            int rc = run_call(&st, &k, c->offset);
            if (rc < 0) stop = 1;
            wrong += rc != 0;
          }
        }
      }
    }
  }
  /* After an API error the ranks are out of step: leave without destroying (peers may wait). */
  if (stop) return 1;
  res = ncclCommDestroy(st.comm);
  if (res != ncclSuccess) return harness_fail(r, "ncclCommDestroy: %s", ncclGetErrorString(res));
  return wrong ? 1 : 0;
}

static void run_case(const struct coll_case* c) {
  ref_env_apply(c->env);
  ref_env_apply(c->env2);
  int failed = harness_run(c->nranks, c->mode, case_body, (void*)c, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d of %d ranks (%s) failed; env '%s %s'", failed, c->nranks, harness_mode_name(c->mode),
                c->env ? c->env : "", c->env2 ? c->env2 : "");
}

/* ---- matrix: collective x dtype x op x protocol ---- */

static const size_t matrix_counts[] = {0, 1, 7, 1023, END};
static const size_t matrix_counts_full[] = {0, 1, 7, 1023, 65537, END};

/* Default: [0, 15) collective x protocol at 3 ranks (threads); 15: one rank, every collective
 * (the one-rank path applies PreMulSum and Avg too); 16: every collective at 4 ranks as
 * processes (default protocol choice). Full: the first 15 again per entry of matrix_full_ranks. */
#define MATRIX_BY_PROTO (C_NUM * 3)
#define MATRIX_DEFAULT (MATRIX_BY_PROTO + 2)
struct ranks_mode {
  int nranks;
  enum harness_mode mode;
};
static const struct ranks_mode matrix_full_ranks[] = {
    {2, HARNESS_THREADS}, {5, HARNESS_PROCS}, {8, HARNESS_THREADS}, {4, HARNESS_PAIRS}};
#define MATRIX_FULL (MATRIX_DEFAULT + MATRIX_BY_PROTO * (int)(sizeof(matrix_full_ranks) / sizeof(matrix_full_ranks[0])))
static const size_t matrix_counts_one[] = {0, 1, 7, 1023, END};

START_TEST(test_matrix) {
  struct coll_case c = {3,           HARNESS_THREADS, NULL,       NULL, ALL_COLLS,   REF_ALL_DTYPES,
                        REF_ALL_OPS, matrix_counts,   PLACE_BOTH, 0,    (uint32_t)_i};
  if (_i < MATRIX_BY_PROTO) {
    c.env = proto_env[_i % 3];
    c.colls = BIT(_i / 3);
  } else if (_i == MATRIX_BY_PROTO) {
    c.nranks = 1;
    c.counts = matrix_counts_one;
  } else if (_i == MATRIX_BY_PROTO + 1) {
    c.nranks = 4;
    c.mode = HARNESS_PROCS;
  } else {
    int j = _i - MATRIX_DEFAULT;
    c.env = proto_env[j % 3];
    c.colls = BIT((j % MATRIX_BY_PROTO) / 3);
    c.nranks = matrix_full_ranks[j / MATRIX_BY_PROTO].nranks;
    c.mode = matrix_full_ranks[j / MATRIX_BY_PROTO].mode;
    c.counts = matrix_counts_full;
  }
  run_case(&c);
}
END_TEST

/* ---- ranks: 1..8 as threads, processes, pairs ---- */

static const size_t sweep_counts[] = {0, 1, 7, 1023, 65537, END};
static const int pair_ranks[] = {2, 3, 5, 8};

START_TEST(test_ranks) {
  struct coll_case c = {
      0, HARNESS_THREADS,    NULL, NULL, ALL_COLLS, BIT(ncclFloat32), BIT(REF_SUM), sweep_counts, PLACE_BOTH,
      0, 100u + (uint32_t)_i};
  if (_i < 16) {
    c.nranks = _i / 2 + 1;
    c.mode = _i % 2 ? HARNESS_PROCS : HARNESS_THREADS;
  } else {
    c.nranks = pair_ranks[_i - 16];
    c.mode = HARNESS_PAIRS;
  }
  run_case(&c);
}
END_TEST

/* ---- layout: misaligned buffers, in and out of place ---- */

static const size_t layout_counts[] = {1, 7, 1023, 65537, END};

START_TEST(test_layout) {
  uint32_t dtypes = BIT(ncclInt8) | BIT(ncclUint64) | BIT(ncclFloat16) | BIT(ncclFloat32) | BIT(ncclFloat64) |
                    BIT(ncclBfloat16) | BIT(ncclFloat8e4m3);
  struct coll_case c = {4,
                        HARNESS_THREADS,
                        NULL,
                        NULL,
                        BIT(_i / 2),
                        dtypes,
                        BIT(REF_SUM) | BIT(REF_MAX) | BIT(REF_AVG),
                        layout_counts,
                        PLACE_BOTH,
                        _i % 2 ? 3 : 1,
                        200u + (uint32_t)_i};
  run_case(&c);
}
END_TEST

/* ---- large ---- */

static const size_t large_counts[] = {(1u << 20) + 3, END};
static const size_t huge_counts[] = {(size_t)64 << 20, END};

START_TEST(test_large) {
  struct coll_case c = {
      4, HARNESS_THREADS,    NULL, NULL, BIT(_i % C_NUM), BIT(ncclFloat32), BIT(REF_SUM), large_counts, PLACE_BOTH,
      0, 300u + (uint32_t)_i};
  if (_i >= C_NUM) { /* full: 64M elements */
    c.nranks = 2;
    c.counts = huge_counts;
    c.places = PLACE_OUT;
    c.dtypes = (_i % C_NUM) == C_ALLREDUCE ? BIT(ncclFloat32) : BIT(ncclInt8);
  }
  run_case(&c);
}
END_TEST

/* ---- env: channels and FIFO sizes x protocol ---- */

static const char* const env_variants[] = {
    "NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2",
    "NCCL_MIN_NCHANNELS=3 NCCL_MAX_NCHANNELS=4",
    "NCCL_BUFFSIZE=65536 NCCL_LL_BUFFSIZE=32768 NCCL_LL128_BUFFSIZE=32768",
    "NCCL_MIN_NCHANNELS=4 NCCL_BUFFSIZE=65536 NCCL_LL_BUFFSIZE=32768 NCCL_LL128_BUFFSIZE=32768",
};
#define NENV (int)(sizeof(env_variants) / sizeof(env_variants[0]))
static const size_t env_counts[] = {262147, END}; /* 1 MiB of floats: up to 4 channels */

START_TEST(test_env) {
  struct coll_case c = {3,
                        HARNESS_THREADS,
                        env_variants[_i / 3],
                        proto_env[_i % 3],
                        ALL_COLLS,
                        BIT(ncclFloat32) | BIT(ncclBfloat16),
                        BIT(REF_SUM),
                        env_counts,
                        PLACE_OUT,
                        0,
                        400u + (uint32_t)_i};
  run_case(&c);
}
END_TEST

/* ---- algorithms: AllReduce forced to Ring and to Tree ---- */

static const char* const algo_env[2] = {"NCCL_ALGO=Ring", "NCCL_ALGO=Tree"};
static const size_t algo_counts[] = {0, 1, 7, 1023, 65537, END};
static const struct ranks_mode algo_ranks[] = {{1, HARNESS_THREADS}, {2, HARNESS_THREADS}, {3, HARNESS_THREADS},
                                               {4, HARNESS_THREADS}, {5, HARNESS_THREADS}, {6, HARNESS_THREADS},
                                               {7, HARNESS_THREADS}, {8, HARNESS_THREADS}, {3, HARNESS_PROCS},
                                               {5, HARNESS_PROCS},   {8, HARNESS_PROCS},   {6, HARNESS_PAIRS}};
#define NALGO_RANKS (int)(sizeof(algo_ranks) / sizeof(algo_ranks[0]))

/* [0, 2 x 3): algorithm x protocol at 3 ranks, every datatype and op; then Tree (the shape
 * changes with the rank count) at each entry of algo_ranks, protocols in turn. */
START_TEST(test_algo) {
  struct coll_case c = {3,
                        HARNESS_THREADS,
                        algo_env[(_i / 3) % 2],
                        proto_env[_i % 3],
                        BIT(C_ALLREDUCE),
                        REF_ALL_DTYPES,
                        REF_ALL_OPS,
                        matrix_counts,
                        PLACE_BOTH,
                        0,
                        500u + (uint32_t)_i};
  if (_i >= 6) {
    const struct ranks_mode* rm = &algo_ranks[_i - 6];
    c.env = algo_env[1];
    c.nranks = rm->nranks;
    c.mode = rm->mode;
    c.dtypes = BIT(ncclFloat32) | BIT(ncclInt32) | BIT(ncclFloat16);
    c.ops = BIT(REF_SUM) | BIT(REF_MAX) | BIT(REF_PMS_DEV);
    c.counts = algo_counts;
  }
  run_case(&c);
}
END_TEST

/* ---- NVLS-style one-shot / two-shot all-reduce (host mode, one node: kernels/lsa.h) ---- */

static const char* const nvls_variant_env[2] = {"BRAID_LSA_VARIANT=ONESHOT", "BRAID_LSA_VARIANT=TWOSHOT"};
static const struct ranks_mode nvls_modes[3] = {{3, HARNESS_THREADS}, {4, HARNESS_PROCS}, {4, HARNESS_PAIRS}};
static const struct ranks_mode nvls_ranks[] = {{2, HARNESS_THREADS}, {3, HARNESS_THREADS}, {4, HARNESS_THREADS},
                                               {5, HARNESS_THREADS}, {6, HARNESS_THREADS}, {7, HARNESS_THREADS},
                                               {8, HARNESS_THREADS}, {2, HARNESS_PROCS},   {3, HARNESS_PROCS},
                                               {5, HARNESS_PROCS},   {8, HARNESS_PROCS},   {6, HARNESS_PAIRS}};
#define NNVLS_RANKS (int)(sizeof(nvls_ranks) / sizeof(nvls_ranks[0]))

/* [0, 2 x 3): one-shot and two-shot x threads / processes / pairs, every datatype and op,
 * in and out of place; then both variants at each entry of nvls_ranks (alternating). */
START_TEST(test_nvls) {
  struct coll_case c = {nvls_modes[_i % 3].nranks,
                        nvls_modes[_i % 3].mode,
                        "NCCL_ALGO=NVLS",
                        nvls_variant_env[(_i / 3) % 2],
                        BIT(C_ALLREDUCE),
                        REF_ALL_DTYPES,
                        REF_ALL_OPS,
                        matrix_counts,
                        PLACE_BOTH,
                        0,
                        700u + (uint32_t)_i};
  if (_i >= 6) {
    const struct ranks_mode* rm = &nvls_ranks[_i - 6];
    c.env2 = nvls_variant_env[_i % 2];
    c.nranks = rm->nranks;
    c.mode = rm->mode;
    c.dtypes = BIT(ncclFloat32) | BIT(ncclInt32) | BIT(ncclFloat16) | BIT(ncclBfloat16);
    c.ops = BIT(REF_SUM) | BIT(REF_MAX) | BIT(REF_AVG) | BIT(REF_PMS_DEV);
    c.counts = algo_counts;
  }
  run_case(&c);
}
END_TEST

/* PreMulSum's scalar is each rank's own (refdata's cases give every rank the same one): rank r
 * multiplies by r + 1, so 1.0 everywhere sums to n(n+1)/2. Both variants, threads and processes. */
static int body_premul_per_rank(struct harness_rank* r) {
  ncclComm_t comm;
  ncclRedOp_t op;
  enum { N = 1023 };
  float buf[N], scalar = (float)(r->rank + 1), want = (float)(r->nranks * (r->nranks + 1) / 2);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  for (int i = 0; i < N; i++) buf[i] = 1.0f;
  RCHECK(r, ncclAllReduce(buf, buf, N, ncclFloat32, op, comm, rank_stream(r->rank)));
  RCHECK(r, call_done(comm, rank_stream(r->rank)));
  for (int i = 0; i < N; i++) REXPECT(r, buf[i] == want, "element %d: %g, want %g", i, (double)buf[i], (double)want);
  RCHECK(r, ncclRedOpDestroy(op, comm));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_nvls_premul_per_rank) {
  ref_env_apply("NCCL_ALGO=NVLS");
  ref_env_apply(nvls_variant_env[_i % 2]);
  ck_assert_int_eq(harness_run(3, _i < 2 ? HARNESS_THREADS : HARNESS_PROCS, body_premul_per_rank, NULL, RANK_TIMEOUT_S),
                   0);
}
END_TEST

/* ---- groups ---- */

/* The calls of one group: different collectives, datatypes, ops, roots and sizes (so
 * different protocols and channel counts). */
static const struct call group_calls[] = {
    {C_ALLREDUCE, ncclFloat32, REF_SUM, 0, 0, 1023, 11, 0},
    {C_ALLGATHER, ncclInt32, 0, 0, 0, 777, 12, 0},
    {C_REDUCESCATTER, ncclFloat16, REF_MAX, 0, 0, 4099, 13, 0},
    {C_BROADCAST, ncclFloat64, 0, 0, 1, 70001, 14, 0},
    {C_REDUCE, ncclInt8, REF_PROD, 0, 2, 300007, 15, 0},
    {C_ALLREDUCE, ncclBfloat16, REF_AVG, 1, 0, (1u << 20) + 3, 16, 0},
    {C_ALLREDUCE, ncclUint64, REF_PMS_DEV, 0, 0, 5, 17, 0},
    {C_REDUCESCATTER, ncclInt32, REF_MIN, 1, 0, 0, 18, 0},
};
#define NGROUP (int)(sizeof(group_calls) / sizeof(group_calls[0]))

/* Buffers of one call of a group, prepared before ncclGroupStart and checked after. */
struct prepared {
  struct call k;
  struct ref_region sreg, rreg;
  const char* send;
  char* recv;
  ncclRedOp_t op;
  unsigned char scalar[8];
};

static int prepare(struct prepared* p, const struct call* k, int n, int me, ncclComm_t comm) {
  int dt = k->dtype;
  size_t es = ref_dtype_size(dt), cnt = k->count;
  enum ref_kind kind = k->coll <= C_REDUCESCATTER ? ref_kind_of(k->op) : REF_KIND_SUM;
  size_t in_elems = k->coll == C_REDUCESCATTER ? n * cnt : cnt, out_elems = k->coll == C_ALLGATHER ? n * cnt : cnt;
  memset(p, 0, sizeof(*p));
  p->k = *k;
  p->k.root = k->root % n;
  if (k->inplace) {
    size_t elems = in_elems > out_elems ? in_elems : out_elems;
    if (ref_region_alloc(&p->rreg, elems * es, 0, 0x20) != 0) return -1;
    if (k->coll == C_ALLGATHER) {
      ref_fill(dt, kind, k->seed, me, 0, cnt, p->rreg.p + me * cnt * es);
      p->send = p->rreg.p + me * cnt * es;
      p->recv = p->rreg.p;
    } else if (k->coll == C_REDUCESCATTER) {
      ref_fill(dt, kind, k->seed, me, 0, in_elems, p->rreg.p);
      p->send = p->rreg.p;
      p->recv = p->rreg.p + me * cnt * es;
    } else {
      ref_fill(dt, kind, k->seed, me, 0, cnt, p->rreg.p);
      p->send = p->recv = p->rreg.p;
    }
  } else {
    if (ref_region_alloc(&p->sreg, in_elems * es, 0, 0x10) != 0 ||
        ref_region_alloc(&p->rreg, out_elems * es, 0, 0x20) != 0)
      return -1;
    ref_fill(dt, kind, k->seed, me, 0, in_elems, p->sreg.p);
    p->send = p->sreg.p;
    p->recv = p->rreg.p;
  }
  p->op = ncclSum;
  if (k->coll <= C_REDUCESCATTER && make_op(&p->k, comm, p->scalar, &p->op) != ncclSuccess) return -1;
  return 0;
}

/* Check a prepared call after its group ran; frees it. Returns the number of problems. */
static int verify(struct prepared* p, int n, int me, ncclComm_t comm, struct rank_state* st) {
  const struct call* k = &p->k;
  int dt = k->dtype, wrong = 0;
  size_t es = ref_dtype_size(dt), cnt = k->count, bad = 0;
  char msg[512] = "";
  struct ref_red red = {dt, k->op, n, k->seed};
  size_t g = ref_region_guards_bad(&p->sreg) + ref_region_guards_bad(&p->rreg);
  if (g) wrong += report(st, k, 0, "guard bytes overwritten");
  switch (k->coll) {
    case C_ALLREDUCE:
      bad = ref_check_reduce(&red, 0, cnt, p->recv, msg, sizeof(msg));
      break;
    case C_REDUCESCATTER:
      bad = ref_check_reduce(&red, me * cnt, cnt, p->recv, msg, sizeof(msg));
      break;
    case C_REDUCE:
      if (me == k->root) bad = ref_check_reduce(&red, 0, cnt, p->recv, msg, sizeof(msg));
      break;
    case C_ALLGATHER:
      for (int q = 0; q < n && bad == 0; q++)
        bad = ref_check_copy(dt, REF_KIND_SUM, k->seed, q, 0, cnt, p->recv + q * cnt * es, msg, sizeof(msg));
      break;
    case C_BROADCAST:
      bad = ref_check_copy(dt, REF_KIND_SUM, k->seed, k->root, 0, cnt, p->recv, msg, sizeof(msg));
      break;
  }
  if (bad) wrong += report(st, k, 0, msg);
  if (p->op >= ncclNumOps && ncclRedOpDestroy(p->op, comm) != ncclSuccess)
    wrong += report(st, k, 0, "ncclRedOpDestroy failed");
  ref_region_free(&p->sreg);
  ref_region_free(&p->rreg);
  return wrong;
}

static int group_body(struct harness_rank* r) {
  struct rank_state st = {r, NULL, 0};
  struct prepared* p = calloc(NGROUP, sizeof(*p));
  int n = r->nranks, me = r->rank, wrong = 0;
  ncclResult_t res = ncclCommInitRank(&st.comm, n, r->id, me);
  if (res != ncclSuccess || p == NULL) return harness_fail(r, "ncclCommInitRank: %s", ncclGetErrorString(res));
  for (int rep = 0; rep < 2; rep++) { /* twice: connections and FIFO counters carry over */
    for (int i = 0; i < NGROUP; i++) {
      struct call k = group_calls[i];
      k.seed += rep * 100;
      if (prepare(&p[i], &k, n, me, st.comm) != 0) return harness_fail(r, "prepare call %d failed", i);
    }
    res = ncclGroupStart();
    for (int i = 0; i < NGROUP && res == ncclSuccess; i++)
      res = issue_async(&p[i].k, st.comm, p[i].send, p[i].recv, p[i].op, NULL);
    ncclResult_t end = ncclGroupEnd();
    if (res != ncclSuccess || end != ncclSuccess)
      return harness_fail(r, "group: %s / %s (%s)", ncclGetErrorString(res), ncclGetErrorString(end),
                          ncclGetLastError(st.comm));
    for (int i = 0; i < NGROUP; i++) wrong += verify(&p[i], n, me, st.comm, &st);
  }
  free(p);
  res = ncclCommDestroy(st.comm);
  return wrong || res != ncclSuccess;
}

START_TEST(test_group) {
  static const struct ranks_mode rm[] = {{3, HARNESS_THREADS}, {4, HARNESS_PROCS}, {5, HARNESS_PAIRS}};
  int failed = harness_run(rm[_i].nranks, rm[_i].mode, group_body, NULL, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d ranks failed (%s)", failed, harness_mode_name(rm[_i].mode));
}
END_TEST

/* One thread drives every rank of an ncclCommInitAll clique: each call is a group over the
 * communicators, and one group also carries several collectives per communicator. */
START_TEST(test_initall_one_thread) {
  enum { N = 4 };
  ncclComm_t comms[N];
  static struct rank_state st[N];
  static struct harness_rank hr[N];
  ck_assert_int_eq(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  for (int i = 0; i < N; i++) {
    int rank = -1, count = -1;
    ck_assert_int_eq(ncclCommUserRank(comms[i], &rank), ncclSuccess);
    ck_assert_int_eq(ncclCommCount(comms[i], &count), ncclSuccess);
    ck_assert_int_eq(rank, i);
    ck_assert_int_eq(count, N);
    hr[i] = (struct harness_rank){i, N, {{0}}, NULL};
    st[i] = (struct rank_state){&hr[i], comms[i], 0};
  }
  int wrong = 0;
  /* One collective per group, then all of group_calls in a single group. */
  for (int phase = 0; phase <= NGROUP; phase++) {
    int first = phase < NGROUP ? phase : 0, last = phase < NGROUP ? phase + 1 : NGROUP;
    struct prepared* p = calloc((size_t)N * NGROUP, sizeof(*p));
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < N; i++)
      for (int c = first; c < last; c++) {
        struct call k = group_calls[c];
        k.seed += 1000 + phase;
        ck_assert_int_eq(prepare(&p[i * NGROUP + c], &k, N, i, comms[i]), 0);
      }
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < N; i++)
      for (int c = first; c < last; c++) {
        struct prepared* q = &p[i * NGROUP + c];
        ck_assert_int_eq(issue_async(&q->k, comms[i], q->send, q->recv, q->op, NULL), ncclSuccess);
      }
    ck_assert_msg(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd: %s", ncclGetLastError(NULL));
    for (int i = 0; i < N; i++)
      for (int c = first; c < last; c++) wrong += verify(&p[i * NGROUP + c], N, i, comms[i], &st[i]);
    free(p);
  }
  for (int i = 0; i < N; i++) ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
  ck_assert_int_eq(wrong, 0);
}
END_TEST

Suite* coll_suite(void) {
  Suite* s = suite_create("coll");
  int full = ref_tier_full();
  struct {
    const char* name;
    const TTest* fn;
    int n, n_full;
  } const tcs[] = {
      {"matrix", test_matrix, MATRIX_DEFAULT, MATRIX_FULL},
      {"ranks", test_ranks, 16 + 4, 16 + 4},
      {"layout", test_layout, 2 * C_NUM, 2 * C_NUM},
      {"large", test_large, C_NUM, 2 * C_NUM},
      {"env", test_env, 3 * NENV, 3 * NENV},
      {"algo", test_algo, 6 + NALGO_RANKS, 6 + NALGO_RANKS},
      {"nvls", test_nvls, 6 + NNVLS_RANKS, 6 + NNVLS_RANKS},
      {"group", test_group, 3, 3},
  };
  for (size_t i = 0; i < sizeof(tcs) / sizeof(tcs[0]); i++) {
    TCase* tc = tcase_create(tcs[i].name);
    tcase_set_timeout(tc, TCASE_TIMEOUT_S);
    tcase_add_loop_test(tc, tcs[i].fn, 0, full ? tcs[i].n_full : tcs[i].n);
    suite_add_tcase(s, tc);
  }
  TCase* tc = tcase_create("nvls-premul");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_nvls_premul_per_rank, 0, 4);
  suite_add_tcase(s, tc);
  tc = tcase_create("initall");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_initall_one_thread);
  suite_add_tcase(s, tc);
  return s;
}
