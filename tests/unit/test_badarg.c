/*
 * test_badarg.c - bad arguments to every collective and point-to-point call, through the
 * public API: the call returns ncclInvalidArgument or ncclInvalidUsage, ncclGetLastError names
 * the argument, nothing runs (the receive buffer keeps its pattern), the same call inside a
 * group fails the same way and leaves the group usable, and a good call afterwards works.
 *
 * Bad arguments: count x element size overflowing (and count x nranks x size for the
 * collectives whose buffers hold nranks blocks), datatype -1 / 12 / 100, op -1 / 5 (never
 * created) / 1000 / a destroyed PreMulSum op / a PreMulSum op of another datatype, NULL buffers
 * with a non-zero count, root and peer out of range, a NULL / destroyed / aborted / finalized
 * communicator. Allowed: NULL buffers with count 0, Reduce's recvbuff NULL on a non-root rank,
 * Broadcast's sendbuff NULL on a non-root rank. Send to self without a matching receive (and
 * the reverse, and mismatched sizes): ncclGroupEnd fails, no hang.
 *
 * Communicators: a 2-rank ncclCommInitAll clique driven by this thread (a bad call returns
 * before anything is enqueued, so nothing waits for the other rank).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "refdata.h"

#define TCASE_TIMEOUT_S 120
#define NR 2
#define BUF_BYTES 4096
#define SMALL 16

enum fn {
  F_ALLREDUCE = 0,
  F_REDUCE,
  F_REDUCESCATTER,
  F_ALLGATHER,
  F_BROADCAST,
  F_BCAST,
  F_SEND,
  F_RECV,
  F_ALLTOALL,
  F_GATHER,
  F_SCATTER,
  F_NUM
};
static const char* const fn_names[F_NUM] = {"ncclAllReduce", "ncclReduce", "ncclReduceScatter", "ncclAllGather",
                                            "ncclBroadcast", "ncclBcast",  "ncclSend",          "ncclRecv",
                                            "ncclAlltoAll",  "ncclGather", "ncclScatter"};
#define FN(x) (1u << (x))
#define ALL_FNS ((1u << F_NUM) - 1)
#define REDUCING (FN(F_ALLREDUCE) | FN(F_REDUCE) | FN(F_REDUCESCATTER))
#define ROOTED (FN(F_REDUCE) | FN(F_BROADCAST) | FN(F_BCAST) | FN(F_GATHER) | FN(F_SCATTER))
#define SCALED (FN(F_REDUCESCATTER) | FN(F_ALLGATHER) | FN(F_ALLTOALL) | FN(F_GATHER) | FN(F_SCATTER))
#define HAS_SEND (ALL_FNS & ~(FN(F_RECV) | FN(F_BCAST)))
#define HAS_RECV (ALL_FNS & ~FN(F_SEND))

/* One API call with all the knobs. */
struct args {
  int fn;
  const void* send;
  void* recv;
  size_t count;
  int dtype;
  int op;
  int root; /* root, or peer for send/recv */
};

static ncclResult_t call(const struct args* a, ncclComm_t comm) {
  ncclDataType_t dt = (ncclDataType_t)a->dtype;
  ncclRedOp_t op = (ncclRedOp_t)a->op;
  switch (a->fn) {
    case F_ALLREDUCE:
      return ncclAllReduce(a->send, a->recv, a->count, dt, op, comm, NULL);
    case F_REDUCE:
      return ncclReduce(a->send, a->recv, a->count, dt, op, a->root, comm, NULL);
    case F_REDUCESCATTER:
      return ncclReduceScatter(a->send, a->recv, a->count, dt, op, comm, NULL);
    case F_ALLGATHER:
      return ncclAllGather(a->send, a->recv, a->count, dt, comm, NULL);
    case F_BROADCAST:
      return ncclBroadcast(a->send, a->recv, a->count, dt, a->root, comm, NULL);
    case F_BCAST:
      return ncclBcast(a->recv, a->count, dt, a->root, comm, NULL);
    case F_SEND:
      return ncclSend(a->send, a->count, dt, a->root, comm, NULL);
    case F_RECV:
      return ncclRecv(a->recv, a->count, dt, a->root, comm, NULL);
    case F_ALLTOALL:
      return ncclAlltoAll(a->send, a->recv, a->count, dt, comm, NULL);
    case F_GATHER:
      return ncclGather(a->send, a->recv, a->count, dt, a->root, comm, NULL);
    case F_SCATTER:
      return ncclScatter(a->send, a->recv, a->count, dt, a->root, comm, NULL);
  }
  return ncclInternalError;
}

/* ---- the bad cases ---- */

enum kind {
  K_COUNT = 0,    /* count x element size overflows */
  K_COUNT_SCALED, /* count x element size fits, x nranks overflows */
  K_DTYPE_M1,
  K_DTYPE_12,
  K_DTYPE_100,
  K_OP_M1,
  K_OP_5,
  K_OP_1000,
  K_OP_DESTROYED,
  K_OP_OTHER_DTYPE,
  K_NULL_SEND,
  K_NULL_RECV,
  K_ROOT_M1,
  K_ROOT_N,
  K_ROOT_BIG,
  K_PEER_M1,
  K_PEER_N,
  K_COMM_NULL,
  K_COMM_DESTROYED,
  K_COMM_ABORTED,
  K_COMM_FINALIZED,
  K_NUM
};

static const struct {
  const char* name;
  unsigned fns;     /* calls it applies to */
  const char* word; /* ncclGetLastError must contain it */
} kinds[K_NUM] = {
    [K_COUNT] = {"count overflow", ALL_FNS, "count"},
    [K_COUNT_SCALED] = {"count x nranks overflow", SCALED, "count"},
    [K_DTYPE_M1] = {"datatype -1", ALL_FNS, "datatype"},
    [K_DTYPE_12] = {"datatype 12", ALL_FNS, "datatype"},
    [K_DTYPE_100] = {"datatype 100", ALL_FNS, "datatype"},
    [K_OP_M1] = {"op -1", REDUCING, " op "},
    [K_OP_5] = {"op 5 never created", REDUCING, " op "},
    [K_OP_1000] = {"op 1000", REDUCING, " op "},
    [K_OP_DESTROYED] = {"destroyed PreMulSum op", REDUCING, " op "},
    [K_OP_OTHER_DTYPE] = {"PreMulSum op of another datatype", REDUCING, "datatype"},
    [K_NULL_SEND] = {"NULL sendbuff", HAS_SEND, "sendbuff"},
    [K_NULL_RECV] = {"NULL recvbuff", HAS_RECV, "buff"},
    [K_ROOT_M1] = {"root -1", ROOTED, "root"},
    [K_ROOT_N] = {"root nranks", ROOTED, "root"},
    [K_ROOT_BIG] = {"root 1000", ROOTED, "root"},
    [K_PEER_M1] = {"peer -1", FN(F_SEND) | FN(F_RECV), "peer"},
    [K_PEER_N] = {"peer nranks", FN(F_SEND) | FN(F_RECV), "peer"},
    [K_COMM_NULL] = {"NULL comm", ALL_FNS, "comm"},
    [K_COMM_DESTROYED] = {"destroyed comm", ALL_FNS, "comm"},
    [K_COMM_ABORTED] = {"aborted comm", ALL_FNS, "comm"},
    [K_COMM_FINALIZED] = {"finalized comm", ALL_FNS, "comm"},
};

/* The loop index -> (kind, fn): every applicable pair, in order. */
static int nth_case(int i, int* kind_p, int* fn_p) {
  for (int k = 0; k < K_NUM; k++)
    for (int f = 0; f < F_NUM; f++)
      if ((kinds[k].fns & FN(f)) && i-- == 0) {
        *kind_p = k;
        *fn_p = f;
        return 1;
      }
  return 0;
}

static int ncases(void) {
  int n = 0, k, f;
  while (nth_case(n, &k, &f)) n++;
  return n;
}

/* A good AllReduce over both ranks of the clique (one group), checked. */
static void good_allreduce(ncclComm_t* comms, uint32_t seed) {
  const size_t cnt = 1000;
  float in[NR][1000], out[NR][1000];
  char msg[256];
  for (int r = 0; r < NR; r++) ref_fill(ncclFloat32, REF_KIND_SUM, seed, r, 0, cnt, in[r]);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < NR; r++)
    ck_assert_int_eq(ncclAllReduce(in[r], out[r], cnt, ncclFloat32, ncclSum, comms[r], NULL), ncclSuccess);
  ck_assert_msg(ncclGroupEnd() == ncclSuccess, "a good AllReduce after the bad call failed: %s",
                ncclGetLastError(NULL));
  struct ref_red red = {ncclFloat32, REF_SUM, NR, seed};
  for (int r = 0; r < NR; r++) ck_assert_msg(ref_check_reduce(&red, 0, cnt, out[r], msg, sizeof(msg)) == 0, "%s", msg);
}

START_TEST(test_bad) {
  int kind, f;
  ck_assert(nth_case(_i, &kind, &f));
  ncclComm_t comms[NR], spare[NR] = {NULL, NULL};
  ck_assert_int_eq(ncclCommInitAll(comms, NR, NULL), ncclSuccess);
  ncclComm_t target = comms[0];
  static char sendb[BUF_BYTES], recvb[BUF_BYTES];
  ref_guard_fill(sendb, BUF_BYTES, 1);
  ref_guard_fill(recvb, BUF_BYTES, 2);
  /* A valid call on rank 0 of the clique, which the case then breaks in one place. Root 0
   * (the caller), so every buffer is in use. */
  struct args a = {f, sendb, recvb, SMALL, ncclFloat32, ncclSum, f == F_SEND || f == F_RECV ? 1 : 0};
  ncclRedOp_t pms = ncclSum;
  float scalar = 2.0f;
  switch (kind) {
    case K_COUNT:
      a.count = SIZE_MAX / 2, a.dtype = ncclInt64;
      break;
    case K_COUNT_SCALED:
      a.count = SIZE_MAX / 16 + 1, a.dtype = ncclInt64;
      break;
    case K_DTYPE_M1:
      a.dtype = -1;
      break;
    case K_DTYPE_12:
      a.dtype = 12;
      break;
    case K_DTYPE_100:
      a.dtype = 100;
      break;
    case K_OP_M1:
      a.op = -1;
      break;
    case K_OP_5:
      a.op = 5;
      break;
    case K_OP_1000:
      a.op = 1000;
      break;
    case K_OP_DESTROYED:
    case K_OP_OTHER_DTYPE:
      ck_assert_int_eq(ncclRedOpCreatePreMulSum(&pms, &scalar, ncclFloat32, ncclScalarHostImmediate, target),
                       ncclSuccess);
      a.op = pms;
      if (kind == K_OP_DESTROYED) {
        ck_assert_int_eq(ncclRedOpDestroy(pms, target), ncclSuccess);
        ncclResult_t again = ncclRedOpDestroy(pms, target);
        ck_assert_msg(again == ncclInvalidArgument || again == ncclInvalidUsage, "second ncclRedOpDestroy returned %d",
                      again);
      } else {
        a.dtype = ncclFloat64;
      }
      break;
    case K_NULL_SEND:
      a.send = NULL;
      break;
    case K_NULL_RECV:
      a.recv = NULL;
      break;
    case K_ROOT_M1:
      a.root = -1;
      break;
    case K_ROOT_N:
      a.root = NR;
      break;
    case K_ROOT_BIG:
      a.root = 1000;
      break;
    case K_PEER_M1:
      a.root = -1;
      break;
    case K_PEER_N:
      a.root = NR;
      break;
    case K_COMM_NULL:
      target = NULL;
      break;
    case K_COMM_DESTROYED:
    case K_COMM_ABORTED:
    case K_COMM_FINALIZED:
      /* Keep a working clique for the good call afterwards; break the first one. */
      ck_assert_int_eq(ncclCommInitAll(spare, NR, NULL), ncclSuccess);
      if (kind == K_COMM_FINALIZED) {
        ck_assert_int_eq(ncclCommFinalize(comms[0]), ncclSuccess);
      } else {
        for (int r = 0; r < NR; r++)
          ck_assert_int_eq(kind == K_COMM_ABORTED ? ncclCommAbort(comms[r]) : ncclCommDestroy(comms[r]), ncclSuccess);
      }
      break;
  }

  for (int grouped = 0; grouped < 2; grouped++) {
    if (grouped) ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ncclResult_t res = call(&a, target);
    const char* err = ncclGetLastError(kind >= K_COMM_NULL ? NULL : target); /* no dangling handles */
    ncclResult_t end = grouped ? ncclGroupEnd() : ncclSuccess;
    ck_assert_msg(res == ncclInvalidArgument || res == ncclInvalidUsage,
                  "%s with %s%s returned %d (%s), want ncclInvalidArgument or ncclInvalidUsage", fn_names[f],
                  kinds[kind].name, grouped ? " in a group" : "", res, ncclGetErrorString(res));
    ck_assert_msg(err != NULL && strstr(err, kinds[kind].word) != NULL,
                  "%s with %s: ncclGetLastError \"%s\" does not name the argument (\"%s\")", fn_names[f],
                  kinds[kind].name, err ? err : "(null)", kinds[kind].word);
    (void)end; /* NCCL reports the group's error again at ncclGroupEnd; either is fine here */
    ck_assert_msg(ref_guard_check(recvb, BUF_BYTES, 2) == 0, "%s with %s wrote the receive buffer", fn_names[f],
                  kinds[kind].name);
    ck_assert_msg(ref_guard_check(sendb, BUF_BYTES, 1) == 0, "%s with %s wrote the send buffer", fn_names[f],
                  kinds[kind].name);
  }

  /* Nothing is left behind: a good collective works on a live clique. */
  ncclComm_t* live = spare[0] != NULL ? spare : comms;
  good_allreduce(live, 77);
  if (kind == K_OP_OTHER_DTYPE) ck_assert_int_eq(ncclRedOpDestroy(pms, target), ncclSuccess);
  for (int r = 0; r < NR; r++) {
    if (spare[r] != NULL) ck_assert_int_eq(ncclCommDestroy(spare[r]), ncclSuccess);
    if (kind == K_COMM_FINALIZED || spare[0] == NULL) ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}
END_TEST

/* ---- allowed NULLs: count 0 anywhere, Reduce recvbuff / Broadcast sendbuff off the root ---- */

START_TEST(test_null_ok) {
  int f = _i; /* F_* */
  ncclComm_t comms[NR];
  ck_assert_int_eq(ncclCommInitAll(comms, NR, NULL), ncclSuccess);
  /* count 0 with NULL buffers on both ranks (send/recv: to each other) */
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < NR; r++) {
    struct args a = {f, NULL, NULL, 0, ncclFloat32, ncclSum, f == F_SEND || f == F_RECV ? 1 - r : 0};
    ck_assert_msg(call(&a, comms[r]) == ncclSuccess, "%s count 0 NULL buffers: %s", fn_names[f],
                  ncclGetLastError(NULL));
    if (f == F_SEND || f == F_RECV) { /* the matching half */
      a.fn = f == F_SEND ? F_RECV : F_SEND;
      ck_assert_int_eq(call(&a, comms[r]), ncclSuccess);
    }
  }
  ck_assert_msg(ncclGroupEnd() == ncclSuccess, "%s count 0: %s", fn_names[f], ncclGetLastError(NULL));
  good_allreduce(comms, 5);
  for (int r = 0; r < NR; r++) ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
}
END_TEST

/* Reduce with a NULL recvbuff and Broadcast with a NULL sendbuff on the non-root rank. */
START_TEST(test_null_nonroot) {
  ncclComm_t comms[NR];
  const size_t cnt = 777;
  float in[NR][777], out[NR][777];
  char msg[256];
  ck_assert_int_eq(ncclCommInitAll(comms, NR, NULL), ncclSuccess);
  for (int root = 0; root < NR; root++) {
    uint32_t seed = 300 + root;
    for (int r = 0; r < NR; r++) ref_fill(ncclFloat32, REF_KIND_SUM, seed, r, 0, cnt, in[r]);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < NR; r++)
      ck_assert_int_eq(ncclReduce(in[r], r == root ? out[r] : NULL, cnt, ncclFloat32, ncclSum, root, comms[r], NULL),
                       ncclSuccess);
    ck_assert_msg(ncclGroupEnd() == ncclSuccess, "Reduce, NULL recvbuff off the root: %s", ncclGetLastError(NULL));
    struct ref_red red = {ncclFloat32, REF_SUM, NR, seed};
    ck_assert_msg(ref_check_reduce(&red, 0, cnt, out[root], msg, sizeof(msg)) == 0, "Reduce: %s", msg);

    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < NR; r++)
      ck_assert_int_eq(ncclBroadcast(r == root ? in[r] : NULL, out[r], cnt, ncclFloat32, root, comms[r], NULL),
                       ncclSuccess);
    ck_assert_msg(ncclGroupEnd() == ncclSuccess, "Broadcast, NULL sendbuff off the root: %s", ncclGetLastError(NULL));
    for (int r = 0; r < NR; r++)
      ck_assert_msg(ref_check_copy(ncclFloat32, REF_KIND_SUM, seed, root, 0, cnt, out[r], msg, sizeof(msg)) == 0,
                    "Broadcast: %s", msg);
  }
  for (int r = 0; r < NR; r++) ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
}
END_TEST

/* ---- send to self without a matching receive ---- */

START_TEST(test_self_unmatched) {
  ncclComm_t comms[NR];
  static char sendb[BUF_BYTES], recvb[BUF_BYTES];
  ck_assert_int_eq(ncclCommInitAll(comms, NR, NULL), ncclSuccess);
  ref_guard_fill(sendb, BUF_BYTES, 1);
  ref_guard_fill(recvb, BUF_BYTES, 2);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  if (_i == 0) { /* send to self only */
    ck_assert_int_eq(ncclSend(sendb, SMALL, ncclFloat32, 0, comms[0], NULL), ncclSuccess);
  } else if (_i == 1) { /* receive from self only */
    ck_assert_int_eq(ncclRecv(recvb, SMALL, ncclFloat32, 0, comms[0], NULL), ncclSuccess);
  } else { /* sizes differ */
    ck_assert_int_eq(ncclSend(sendb, SMALL, ncclFloat32, 0, comms[0], NULL), ncclSuccess);
    ck_assert_int_eq(ncclRecv(recvb, SMALL + 1, ncclFloat32, 0, comms[0], NULL), ncclSuccess);
  }
  ncclResult_t end = ncclGroupEnd();
  ck_assert_msg(end == ncclInvalidUsage || end == ncclInvalidArgument, "ncclGroupEnd returned %d (%s)", end,
                ncclGetErrorString(end));
  ck_assert_msg(ref_guard_check(recvb, BUF_BYTES, 2) == 0, "the receive buffer was written");
  good_allreduce(comms, 9);
  for (int r = 0; r < NR; r++) ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
}
END_TEST

Suite* badarg_suite(void) {
  Suite* s = suite_create("badarg");
  TCase* tc = tcase_create("bad");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_bad, 0, ncases());
  suite_add_tcase(s, tc);
  tc = tcase_create("null_ok");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_null_ok, 0, F_NUM);
  tcase_add_test(tc, test_null_nonroot);
  suite_add_tcase(s, tc);
  tc = tcase_create("self");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_self_unmatched, 0, 3);
  suite_add_tcase(s, tc);
  return s;
}
