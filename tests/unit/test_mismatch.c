/*
 * test_mismatch.c - BRAID_CHECK_MISMATCH=1 (core/mismatch.c): every kind of mismatched
 * collective of issue 16 item 6 fails on every rank with ncclInvalidUsage and a WARN naming
 * both calls and the ranks that make each; nothing runs, so the communicator stays usable (a
 * matching all-reduce afterwards gives the right sum). Without the check the same calls run:
 * 1,000 vs 2,000 floats "succeeds" with half the output one rank's data (the finding),
 * which the control case shows is what the check prevents. Three ranks as processes; rank 1
 * is the odd one out. In host mode the fingerprints travel in band (a ring step on channel 0
 * before the group's data): the matrix runs the kinds whose calls would take different
 * algorithms, protocols or connections under every forced protocol (Simple, LL, LL128) and
 * algorithm (ring, tree, the one-shot NVLS-style all-reduce), as processes and as threads,
 * and over the net transport (one fake node per rank).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "harness.h"
#include "nccl.h"

#define NRANKS 3
#define ODD 1
#define HARNESS_TIMEOUT_S 60
#define MAXCOUNT 4096

enum { AR = 0, BC, RD, AG, RS, SELF_P2P };

struct call {
  int what;
  size_t count;
  ncclDataType_t dt;
  ncclRedOp_t op;
  int root;
  int twice; /* two of it in one group */
};

struct mm_case {
  const char* name;
  struct call common, odd;
  const char* want_common; /* in every rank's error: what ranks 0,2 call */
  const char* want_odd;    /* and what rank 1 calls */
};

static const struct mm_case cases[] = {
    {"count",
     {AR, 1000, ncclFloat, ncclSum, 0, 0},
     {AR, 2000, ncclFloat, ncclSum, 0, 0},
     "ranks 0,2 call AllReduce(count 1000, float, sum)",
     "rank 1 calls AllReduce(count 2000, float, sum)"},
    {"function",
     {AR, 1000, ncclFloat, ncclSum, 0, 0},
     {BC, 1000, ncclFloat, ncclSum, 0, 0},
     "ranks 0,2 call AllReduce(count 1000, float, sum)",
     "rank 1 calls Broadcast(count 1000, float, root 0)"},
    {"datatype",
     {AR, 1000, ncclFloat, ncclSum, 0, 0},
     {AR, 1000, ncclInt32, ncclSum, 0, 0},
     "AllReduce(count 1000, float, sum)",
     "rank 1 calls AllReduce(count 1000, int32, sum)"},
    {"op",
     {AR, 1000, ncclFloat, ncclSum, 0, 0},
     {AR, 1000, ncclFloat, ncclMax, 0, 0},
     "AllReduce(count 1000, float, sum)",
     "rank 1 calls AllReduce(count 1000, float, max)"},
    {"broadcast root",
     {BC, 64, ncclInt8, ncclSum, 0, 0},
     {BC, 64, ncclInt8, ncclSum, 2, 0},
     "ranks 0,2 call Broadcast(count 64, int8, root 0)",
     "rank 1 calls Broadcast(count 64, int8, root 2)"},
    {"reduce root",
     {RD, 64, ncclDouble, ncclProd, 0, 0},
     {RD, 64, ncclDouble, ncclProd, 1, 0},
     "Reduce(count 64, double, prod, root 0)",
     "Reduce(count 64, double, prod, root 1)"},
    {"allgather vs reducescatter",
     {AG, 100, ncclFloat, ncclSum, 0, 0},
     {RS, 100, ncclFloat, ncclSum, 0, 0},
     "ranks 0,2 call AllGather(count 100, float)",
     "rank 1 calls ReduceScatter(count 100, float, sum)"},
    {"group of two vs one",
     {AR, 10, ncclFloat, ncclSum, 0, 1},
     {AR, 10, ncclFloat, ncclSum, 0, 0},
     "ranks 0,2 call 2 collectives, #2 AllReduce(count 10, float, sum)",
     "rank 1 calls 1 collective"},
    {"collective vs point-to-point only",
     {AR, 10, ncclFloat, ncclSum, 0, 0},
     {SELF_P2P, 10, ncclFloat, ncclSum, 0, 0},
     "ranks 0,2 call AllReduce(count 10, float, sum)",
     "rank 1 calls no collective"},
};

/* How the ranks run and what the environment forces (set by the parent before the ranks start,
 * so threads share it; fake nodes are set per process). */
struct mm_mode {
  const char* name;
  enum harness_mode mode;
  const char* proto; /* NCCL_PROTO, NULL: the tuner's choice */
  const char* algo;  /* NCCL_ALGO */
  int lsa_oneshot;   /* BRAID_LSA_VARIANT=ONESHOT */
  int fake_nodes;    /* NCCL_HOSTID per rank: every connection over the net transport */
};

static const struct mm_mode modes[] = {
    {"processes, Simple, ring", HARNESS_PROCS, "Simple", "Ring", 0, 0},
    {"processes, LL, ring", HARNESS_PROCS, "LL", "Ring", 0, 0},
    {"processes, LL128, ring", HARNESS_PROCS, "LL128", "Ring", 0, 0},
    {"processes, Simple, tree", HARNESS_PROCS, "Simple", "Ring;allreduce:Tree", 0, 0},
    {"processes, LL, tree", HARNESS_PROCS, "LL", "Ring;allreduce:Tree", 0, 0},
    {"processes, NVLS one-shot", HARNESS_PROCS, "Simple", "Ring;allreduce:NVLS", 1, 0},
    {"threads, LL, ring", HARNESS_THREADS, "LL", "Ring", 0, 0},
    {"threads, LL128, tree", HARNESS_THREADS, "LL128", "Ring;allreduce:Tree", 0, 0},
    {"threads, NVLS one-shot", HARNESS_THREADS, "Simple", "Ring;allreduce:NVLS", 1, 0},
    {"processes, net (fake nodes), LL", HARNESS_PROCS, "LL", "Ring", 0, 1},
    {"processes, net (fake nodes), Simple, tree", HARNESS_PROCS, "Simple", "Ring;allreduce:Tree", 0, 1},
};
/* The kinds the matrix runs under every mode (indices into cases[]). */
static const int matrix_kinds[] = {0 /* count */, 1 /* function */, 7 /* group of two */, 8 /* p2p only */};
#define NKINDS (int)(sizeof(matrix_kinds) / sizeof(matrix_kinds[0]))

struct mm_arg {
  const struct mm_case* k;
  const struct mm_mode* m; /* NULL: the default environment */
};

static ncclResult_t one(const struct call* c, char* sbuf, char* rbuf, ncclComm_t comm, int rank) {
  switch (c->what) {
    case AR:
      return ncclAllReduce(sbuf, rbuf, c->count, c->dt, c->op, comm, NULL);
    case BC:
      return ncclBroadcast(sbuf, rbuf, c->count, c->dt, c->root, comm, NULL);
    case RD:
      return ncclReduce(sbuf, rbuf, c->count, c->dt, c->op, c->root, comm, NULL);
    case AG:
      return ncclAllGather(sbuf, rbuf, c->count, c->dt, comm, NULL);
    case RS:
      return ncclReduceScatter(sbuf, rbuf, c->count, c->dt, c->op, comm, NULL);
    default:
      ncclSend(sbuf, c->count, c->dt, rank, comm, NULL);
      return ncclRecv(rbuf, c->count, c->dt, rank, comm, NULL);
  }
}

static ncclResult_t run(const struct call* c, char* sbuf, char* rbuf, ncclComm_t comm, int rank) {
  ncclResult_t res = ncclGroupStart();
  if (res == ncclSuccess) res = one(c, sbuf, rbuf, comm, rank);
  if (res == ncclSuccess && c->twice) res = one(c, sbuf, rbuf, comm, rank);
  ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

/* A matching all-reduce after the failure: the communicator still works. */
static int still_works(struct harness_rank* r, char* sbuf, char* rbuf, ncclComm_t comm) {
  float* f = (float*)sbuf;
  for (int i = 0; i < 16; i++) f[i] = (float)(r->rank + 1);
  RCHECK(r, ncclAllReduce(sbuf, rbuf, 16, ncclFloat, ncclSum, comm, NULL));
  for (int i = 0; i < 16; i++)
    REXPECT(r, ((float*)rbuf)[i] == 6.0f, "after the mismatch: element %d is %g, expected 6", i, ((float*)rbuf)[i]);
  return 0;
}

static int body(struct harness_rank* r) {
  const struct mm_arg* a = r->arg;
  const struct mm_case* k = a->k;
  const char* mode = a->m != NULL ? a->m->name : "default";
  ncclComm_t comm;
  if (a->m != NULL && a->m->fake_nodes) { /* processes only: the environment is per process */
    char id[48];
    snprintf(id, sizeof(id), "mismatch-node-%d", r->rank);
    setenv("NCCL_HOSTID", id, 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    braid_param_reload();
  }
  char* sbuf = calloc(MAXCOUNT * NRANKS, 8);
  char* rbuf = calloc(MAXCOUNT * NRANKS, 8);
  REXPECT(r, sbuf != NULL && rbuf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  ncclResult_t res = run(r->rank == ODD ? &k->odd : &k->common, sbuf, rbuf, comm, r->rank);
  const char* e = ncclGetLastError(comm);
  REXPECT(r, res == ncclInvalidUsage,
          "%s (%s): rank %d: the mismatched call returned %d (%s), expected ncclInvalidUsage; last error: %s", k->name,
          mode, r->rank, (int)res, ncclGetErrorString(res), e);
  REXPECT(r, strstr(e, "Mismatched collective") != NULL, "%s: rank %d: error is not a mismatch: %s", k->name, r->rank,
          e);
  REXPECT(r, strstr(e, k->want_common) != NULL, "%s: rank %d: error lacks \"%s\": %s", k->name, r->rank, k->want_common,
          e);
  REXPECT(r, strstr(e, k->want_odd) != NULL, "%s: rank %d: error lacks \"%s\": %s", k->name, r->rank, k->want_odd, e);
  if (still_works(r, sbuf, rbuf, comm)) return 1;
  RCHECK(r, ncclCommDestroy(comm));
  free(sbuf);
  free(rbuf);
  return 0;
}

static void env_set(const char* name, const char* value) {
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
}

/* The environment of a mode, for the ranks to inherit (NULL: back to the default). */
static void mode_env(const struct mm_mode* m) {
  env_set("BRAID_CHECK_MISMATCH", m != NULL ? "1" : NULL);
  env_set("NCCL_PROTO", m != NULL ? m->proto : NULL);
  env_set("NCCL_ALGO", m != NULL ? m->algo : NULL);
  env_set("BRAID_LSA_VARIANT", m != NULL && m->lsa_oneshot ? "ONESHOT" : NULL);
  braid_param_reload();
}

START_TEST(test_mismatch_kind) {
  static const struct mm_mode dflt = {"default", HARNESS_PROCS, NULL, NULL, 0, 0};
  struct mm_arg a = {&cases[_i], NULL};
  mode_env(&dflt);
  int failed = harness_run(NRANKS, HARNESS_PROCS, body, &a, HARNESS_TIMEOUT_S);
  mode_env(NULL);
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* Loop index: mode * NKINDS + kind. */
START_TEST(test_mismatch_matrix) {
  struct mm_arg a = {&cases[matrix_kinds[_i % NKINDS]], &modes[_i / NKINDS]};
  mode_env(a.m);
  int failed = harness_run(NRANKS, a.m->mode, body, &a, HARNESS_TIMEOUT_S);
  mode_env(NULL);
  ck_assert_msg(failed == 0, "%s, %s: %d ranks failed", a.m->name, a.k->name, failed);
}
END_TEST

/* Control: with the check off, 1,500 vs 3,000 floats does not fail (the silent wrong result
 * the check exists for); with it on, matching calls pass and compute the right sums. Both sizes
 * are above BRAID_LSA_LINE_BYTES: a one-line call (up to 4 KiB) and a longer one wait for
 * different things, so mismatched calls across that edge hang (until BRAID_TIMEOUT). */
static int body_control(struct harness_rank* r) {
  int on = *(const int*)r->arg;
  ncclComm_t comm;
  setenv("BRAID_CHECK_MISMATCH", on ? "1" : "0", 1);
  braid_param_reload();
  float* s = calloc(3000, sizeof(float));
  float* d = calloc(3000, sizeof(float));
  REXPECT(r, s != NULL && d != NULL, "out of memory");
  for (int i = 0; i < 3000; i++) s[i] = (float)(r->rank + 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  size_t count = on || r->rank != ODD ? 1500 : 3000;
  RCHECK(r, ncclAllReduce(s, d, count, ncclFloat, ncclSum, comm, NULL));
  if (on)
    for (int i = 0; i < 1500; i++) REXPECT(r, d[i] == 6.0f, "element %d is %g, expected 6", i, d[i]);
  RCHECK(r, ncclCommDestroy(comm));
  free(s);
  free(d);
  return 0;
}

START_TEST(test_mismatch_control) {
  int on = _i;
  ck_assert_int_eq(harness_run(NRANKS, HARNESS_PROCS, body_control, &on, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* A job split on the variable is refused at init, on every rank: a rank without the check
 * would take the others' fingerprint step for its data. */
static int body_split(struct harness_rank* r) {
  ncclComm_t comm;
  setenv("BRAID_CHECK_MISMATCH", r->rank == ODD ? "0" : "1", 1);
  braid_param_reload();
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  REXPECT(r, res == ncclInvalidUsage, "init returned %d (%s), expected ncclInvalidUsage", (int)res,
          ncclGetErrorString(res));
  const char* e = ncclGetLastError(NULL);
  REXPECT(r, strstr(e, "BRAID_CHECK_MISMATCH=1 is set on ranks 0,2 but not on rank 1") != NULL, "last error: %s", e);
  return 0;
}

START_TEST(test_mismatch_split) {
  ck_assert_int_eq(harness_run(NRANKS, HARNESS_PROCS, body_split, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* One thread drives a whole clique (ncclCommInitAll, one group over its three communicators):
 * the in-band swap runs every communicator's ring step at once, or it would wait on itself.
 * Rank 1's all-reduce is twice as long: every communicator's call fails, names both calls,
 * and the clique still runs a matching group afterwards. */
START_TEST(test_mismatch_clique) {
  ncclComm_t comms[NRANKS];
  float* buf[NRANKS];
  mode_env(&modes[0]);
  ck_assert_int_eq(ncclCommInitAll(comms, NRANKS, NULL), ncclSuccess);
  for (int r = 0; r < NRANKS; r++) {
    buf[r] = calloc(2000, sizeof(float));
    ck_assert_ptr_nonnull(buf[r]);
  }
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < NRANKS; r++)
    ck_assert_int_eq(ncclAllReduce(buf[r], buf[r], r == ODD ? 2000 : 1000, ncclFloat, ncclSum, comms[r], NULL),
                     ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  for (int r = 0; r < NRANKS; r++) {
    const char* e = ncclGetLastError(comms[r]);
    ck_assert_msg(strstr(e, "ranks 0,2 call AllReduce(count 1000, float, sum)") != NULL &&
                      strstr(e, "rank 1 calls AllReduce(count 2000, float, sum)") != NULL,
                  "comm %d: %s", r, e);
  }
  for (int r = 0; r < NRANKS; r++)
    for (int i = 0; i < 16; i++) buf[r][i] = (float)(r + 1);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < NRANKS; r++)
    ck_assert_int_eq(ncclAllReduce(buf[r], buf[r], 16, ncclFloat, ncclSum, comms[r], NULL), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < NRANKS; r++) {
    for (int i = 0; i < 16; i++) ck_assert_msg(buf[r][i] == 6.0f, "comm %d element %d: %g", r, i, buf[r][i]);
    ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
    free(buf[r]);
  }
  mode_env(NULL);
}
END_TEST

Suite* mismatch_suite(void);
Suite* mismatch_suite(void) {
  Suite* s = suite_create("mismatch");
  TCase* tc = tcase_create("kinds");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_mismatch_kind, 0, sizeof(cases) / sizeof(cases[0]));
  tcase_add_loop_test(tc, test_mismatch_control, 0, 2);
  tcase_add_test(tc, test_mismatch_clique);
  tcase_add_test(tc, test_mismatch_split);
  tcase_add_loop_test(tc, test_mismatch_matrix, 0, (int)(sizeof(modes) / sizeof(modes[0])) * NKINDS);
  suite_add_tcase(s, tc);
  return s;
}
