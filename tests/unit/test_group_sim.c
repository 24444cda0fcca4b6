/*
 * test_group_sim.c - ncclGroupSimulateEnd (src/core/group.c): the estimate is the tuner's prediction
 * for a lone all-reduce (braid_tuner_predict of the algorithm and protocol it chooses), grows
 * with size, sums over a group of two calls; nothing runs (buffers untouched); a nested call
 * only closes its level; bad simInfo (NULL, size, magic, version) and a call outside a group
 * are refused with a WARN naming the problem; a normal group works afterwards. Ranks run as
 * threads and as processes (harness.h), each simulating on its own.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "harness.h"
#include "nccl.h"
#include "topo/tuner.h"

#define SIM_RANKS 2
#define SIM_TIMEOUT_S 60
#define SIM_SENTINEL -7.0f

/* The tuner's predicted time for what it would choose: the value a lone call must get. */
static float tuner_time(ncclComm_t comm, int func, size_t bytes) {
  struct braid_comm* c = braid_comm_of(comm);
  struct braid_tuner_choice ch;
  if (braid_tuner_choose(c->tuner, func, bytes, &ch) != ncclSuccess) return -1.0f;
  return braid_tuner_predict(c->tuner, func, ch.algo, ch.proto, bytes);
}

/* Simulate one all-reduce of `count` floats; -1 on failure. */
static float sim_allreduce(ncclComm_t comm, float* buf, size_t count) {
  ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
  if (ncclGroupStart() != ncclSuccess) return -1.0f;
  if (ncclAllReduce(buf, buf + count, count, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) return -1.0f;
  if (ncclGroupSimulateEnd(&si) != ncclSuccess) return -1.0f;
  return si.estimatedTime;
}

static int untouched(const float* buf, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != SIM_SENTINEL) return 0;
  return 1;
}

/* Queue one all-reduce in a group and end it with `si` (may be NULL); expect ncclInvalidArgument
 * and, when the ranks are processes (the last error is process-wide, so threads would race), a
 * last error naming `words`. */
static int refused(struct harness_rank* r, ncclComm_t comm, float* buf, ncclSimInfo_t* si, const char* words) {
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(buf, buf + 16, 16, ncclFloat, ncclSum, comm, NULL));
  ncclResult_t res = ncclGroupSimulateEnd(si);
  REXPECT(r, res == ncclInvalidArgument, "bad simInfo (%s): got %d, want ncclInvalidArgument", words, (int)res);
  const char* last = ncclGetLastError(NULL);
  int threads = *(const enum harness_mode*)r->arg == HARNESS_THREADS;
  REXPECT(r, threads || (last != NULL && strstr(last, words) != NULL), "last error '%s' does not name '%s'",
          last ? last : "(null)", words);
  REXPECT(r, si == NULL || si->estimatedTime == NCCL_UNDEF_FLOAT, "estimatedTime written on failure (%g)",
          si ? (double)si->estimatedTime : 0.0);
  return 0;
}

static int sim_body(struct harness_rank* r) {
  ncclComm_t comm = NULL;
  const size_t big = 1 << 20; /* floats: 4 MiB per buffer */
  float* buf = malloc(2 * big * sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  for (size_t i = 0; i < 2 * big; i++) buf[i] = SIM_SENTINEL;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));

  /* a lone all-reduce: exactly the tuner's prediction for its choice */
  float est = sim_allreduce(comm, buf, 1024);
  float want = tuner_time(comm, BRAID_FUNC_AllReduce, 1024 * sizeof(float));
  REXPECT(r, est > 0 && est == want, "lone all-reduce of 4 KiB: estimate %g, tuner %g", (double)est, (double)want);

  /* grows with size */
  float prev = 0;
  for (size_t n = 2; n <= big; n *= 4) {
    float e = sim_allreduce(comm, buf, n);
    REXPECT(r, e > 0 && e >= prev, "%zu floats: estimate %g after %g", n, (double)e, (double)prev);
    REXPECT(r, e == tuner_time(comm, BRAID_FUNC_AllReduce, n * sizeof(float)),
            "%zu floats: estimate %g is not the tuner's", n, (double)e);
    prev = e;
  }
  REXPECT(r, prev > sim_allreduce(comm, buf, 2), "the largest all-reduce is not estimated above the smallest");

  /* a group of two calls: the sum */
  ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(buf, buf + big, big, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, ncclAllGather(buf, buf + big, 4096, ncclFloat, comm, NULL));
  RCHECK(r, ncclGroupSimulateEnd(&si));
  double sum = (double)tuner_time(comm, BRAID_FUNC_AllReduce, big * sizeof(float)) +
               (double)tuner_time(comm, BRAID_FUNC_AllGather, 4096 * sizeof(float) * (size_t)r->nranks);
  REXPECT(r, fabs(si.estimatedTime - sum) <= 1e-4 * sum, "group of two: estimate %g, sum of the two %g",
          (double)si.estimatedTime, sum);

  /* nested: the inner end closes its level only; the outer one estimates */
  ncclSimInfo_t inner = NCCL_SIM_INFO_INITIALIZER, outer = NCCL_SIM_INFO_INITIALIZER;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(buf, buf + 256, 256, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupSimulateEnd(&inner));
  REXPECT(r, inner.estimatedTime == NCCL_UNDEF_FLOAT, "nested end wrote an estimate (%g)", (double)inner.estimatedTime);
  RCHECK(r, ncclGroupSimulateEnd(&outer));
  REXPECT(r, outer.estimatedTime == tuner_time(comm, BRAID_FUNC_AllReduce, 256 * sizeof(float)),
          "nested group: outer estimate %g", (double)outer.estimatedTime);

  /* an empty group estimates 0; a zero-count call costs nothing */
  ncclSimInfo_t empty = NCCL_SIM_INFO_INITIALIZER;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(buf, buf + 16, 0, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupSimulateEnd(&empty));
  REXPECT(r, empty.estimatedTime == 0.0f, "empty group: estimate %g", (double)empty.estimatedTime);

  /* nothing ran: every byte of both halves is still the sentinel */
  REXPECT(r, untouched(buf, 2 * big), "a simulated group wrote a buffer");

  /* bad arguments */
  if (refused(r, comm, buf, NULL, "NULL")) return 1;
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0x12345678;
  if (refused(r, comm, buf, &bad, "magic")) return 1;
  bad = (ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER;
  bad.size = sizeof(bad) - 4;
  if (refused(r, comm, buf, &bad, "size")) return 1;
  bad = (ncclSimInfo_t)NCCL_SIM_INFO_INITIALIZER;
  bad.version = NCCL_VERSION(2, 21, 5);
  if (refused(r, comm, buf, &bad, "version")) return 1;
  ncclResult_t res = ncclGroupSimulateEnd(&si); /* outside any group */
  REXPECT(r, res == ncclInvalidUsage, "outside a group: got %d, want ncclInvalidUsage", (int)res);
  REXPECT(r, untouched(buf, 2 * big), "a refused group wrote a buffer");

  /* a normal group works afterwards: the sum of ranks + 1 */
  for (size_t i = 0; i < 1024; i++) buf[i] = (float)(r->rank + 1);
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(buf, buf + big, 1024, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  float expect = (float)(r->nranks * (r->nranks + 1) / 2);
  for (size_t i = 0; i < 1024; i++)
    REXPECT(r, buf[big + i] == expect, "after simulating: element %zu is %g, want %g", i, (double)buf[big + i],
            (double)expect);
  RCHECK(r, ncclCommDestroy(comm));
  free(buf);
  return 0;
}

static const enum harness_mode sim_modes[] = {HARNESS_THREADS, HARNESS_PROCS};

START_TEST(test_simulate) {
  ck_assert_int_eq(harness_run(SIM_RANKS, sim_modes[_i], sim_body, (void*)&sim_modes[_i], SIM_TIMEOUT_S), 0);
}
END_TEST

/* No communicator needed: outside a group and a NULL simInfo are refused before anything. */
START_TEST(test_simulate_no_group) {
  ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
  ck_assert_int_eq(ncclGroupSimulateEnd(&si), ncclInvalidUsage);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  ck_assert_int_eq(ncclGroupSimulateEnd(&si), ncclSuccess); /* an empty group */
  ck_assert(si.estimatedTime == 0.0f);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  ck_assert_int_eq(ncclGroupSimulateEnd(NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage); /* the refused call closed the group */
}
END_TEST

Suite* group_sim_suite(void) {
  Suite* s = suite_create("group_sim");
  TCase* tc = tcase_create("simulate");
  tcase_set_timeout(tc, 2 * SIM_TIMEOUT_S);
  tcase_add_loop_test(tc, test_simulate, 0, (int)(sizeof(sim_modes) / sizeof(sim_modes[0])));
  tcase_add_test(tc, test_simulate_no_group);
  suite_add_tcase(s, tc);
  return s;
}
