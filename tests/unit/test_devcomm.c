/*
 * test_devcomm.c - the NCCL device API's host side (include/nccl_device.h, src/core/sym/
 * devcomm.c, devapi.c): properties, teams, ncclDevCommCreate / Destroy with LSA barriers and
 * resource buffers, the window's device view, and what braid refuses (multicast, GIN, world
 * barriers across LSA teams) - as threads, processes, pairs, fake nodes and the fake GPU.
 * The device-side half compiles under nvcc (tests/cuda/devapi.cu) and runs on a GPU only.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "device/device.h"
#include "harness.h"
#include "nccl.h"
#include "nccl_device.h"
#include "sym_helpers.h"

#define RANK_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 300
#define RES_BYTES 100

struct dc_arg {
  int mode;
};

static void rank_env(const struct harness_rank* r, int mode) {
  sym_rank_env(r, mode, "braid-dc-node");
}

/* Properties and teams: every rank of one node is one LSA team; fake nodes are one rank each. */
static int check_props(struct harness_rank* r, ncclComm_t comm, int mode) {
  int lsa = mode == SYM_FAKE_NODES ? 1 : r->nranks;
/* NCCL's initializer names the first three fields, as users write it; -Wextra would flag it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
#pragma GCC diagnostic pop
  RCHECK(r, ncclCommQueryProperties(comm, &p));
  REXPECT(r, p.rank == r->rank && p.nRanks == r->nranks, "properties rank %d/%d", p.rank, p.nRanks);
  REXPECT(r, !p.multimemSupport && p.ginType == NCCL_GIN_TYPE_NONE, "multimem %d gin %d", p.multimemSupport,
          (int)p.ginType);
  REXPECT(r, p.nLsaTeams == r->nranks / lsa, "nLsaTeams %d (mode %s)", p.nLsaTeams, sym_mode_names[mode]);
  REXPECT(r, p.deviceApiSupport == (mode == SYM_FAKE_GPU), "deviceApiSupport %d", p.deviceApiSupport);
  ncclTeam_t t = ncclTeamLsa(comm), w = ncclTeamWorld(comm), rail = ncclTeamRail(comm);
  REXPECT(r, t.nRanks == lsa && t.rank == r->rank % lsa && t.stride == 1, "LSA team %d/%d/%d", t.nRanks, t.rank,
          t.stride);
  REXPECT(r, w.nRanks == r->nranks && w.rank == r->rank, "world team %d/%d", w.nRanks, w.rank);
  REXPECT(r, rail.nRanks == r->nranks / lsa && rail.stride == lsa, "rail team %d/%d", rail.nRanks, rail.stride);
  REXPECT(r, ncclTeamRankToWorld(comm, t, 0) == r->rank - r->rank % lsa, "LSA rank 0 in the world");
  REXPECT(r, ncclTeamRankToLsa(comm, w, r->rank) == t.rank, "this rank's LSA rank");
  REXPECT(r, ncclTeamRankIsMember(t, w, r->rank) && ncclTeamRankToTeam(t, w, r->rank) == t.rank, "team arithmetic");
  ncclCommProperties_t bad;
  memset(&bad, 0, sizeof(bad));
  REXPECT(r, ncclCommQueryProperties(comm, &bad) == ncclInvalidArgument, "uninitialized properties accepted");
  return 0;
}

/* What braid refuses: before anything collective, on every rank alike. */
static int check_refusals(struct harness_rank* r, ncclComm_t comm, int mode) {
  ncclDevComm_t dc;
  ncclDevCommRequirements_t q = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  q.lsaMultimem = true;
  REXPECT(r, ncclDevCommCreate(comm, &q, &dc) == ncclInvalidUsage, "lsaMultimem accepted");
  /* The last error is the process's (as NCCL's): with several ranks in one process another
   * rank's WARN may replace it before this one reads it, so only a rank alone checks it. */
  if (sym_harness_modes[mode] == HARNESS_PROCS)
    REXPECT(r, strstr(ncclGetLastError(NULL), "multimem") != NULL, "WARN: %s", ncclGetLastError(NULL));
  q = (ncclDevCommRequirements_t)NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  q.ginSignalCount = 4;
  REXPECT(r, ncclDevCommCreate(comm, &q, &dc) == ncclInvalidUsage, "GIN signals accepted");
  q = (ncclDevCommRequirements_t)NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  q.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
  REXPECT(r, ncclDevCommCreate(comm, &q, &dc) == ncclInvalidUsage, "GIN connection accepted");
  if (mode == SYM_FAKE_NODES) {
    q = (ncclDevCommRequirements_t)NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    q.barrierCount = 1;
    REXPECT(r, ncclDevCommCreate(comm, &q, &dc) == ncclInvalidUsage, "world barrier across LSA teams accepted");
  }
  ncclDevCommRequirements_t zero;
  memset(&zero, 0, sizeof(zero));
  REXPECT(r, ncclDevCommCreate(comm, &zero, &dc) == ncclInvalidArgument, "uninitialized requirements accepted");
  REXPECT(r, ncclDevCommCreate(comm, NULL, &dc) == ncclInvalidArgument, "NULL requirements accepted");
  q = (ncclDevCommRequirements_t)NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  REXPECT(r, ncclDevCommCreate(comm, &q, NULL) == ncclInvalidArgument, "NULL outDevComm accepted");
  memset(&dc, 0, sizeof(dc));
  REXPECT(r, ncclDevCommDestroy(comm, &dc) == ncclInvalidArgument, "destroy of a device comm never made");
  ncclGinBarrierHandle_t gh;
  ncclDevResourceRequirements_t gr;
  REXPECT(r, ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 1, &gh, &gr) == ncclInvalidUsage, "GIN bar");
  return 0;
}

/* A device communicator with LSA barriers, a world barrier (one node) and two resource
 * buffers; every LSA peer's copy is reachable through the resource window and was zeroed. */
static int check_devcomm(struct harness_rank* r, ncclComm_t comm, int mode) {
  int lsa = mode == SYM_FAKE_NODES ? 1 : r->nranks;
  ncclDevCommRequirements_t q = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevResourceRequirements_t res = {0}, bar = {0};
  ncclDevResourceHandle_t h = 12345;
  ncclLsaBarrierHandle_t lb;
  res.bufferSize = RES_BYTES;
  res.bufferAlign = 256;
  res.outBufferHandle = &h;
  RCHECK(r, ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), 3, &lb, &bar));
  bar.next = &res;
  q.resourceRequirementsList = &bar;
  q.lsaBarrierCount = 8;
  q.barrierCount = mode == SYM_FAKE_NODES ? 0 : 2;
  ncclDevComm_t dc;
  RCHECK(r, ncclDevCommCreate(comm, &q, &dc));
  REXPECT(r, dc.rank == r->rank && dc.nRanks == r->nranks && dc.lsaSize == lsa && dc.lsaRank == r->rank % lsa,
          "devcomm rank %d/%d lsa %d/%d", dc.rank, dc.nRanks, dc.lsaRank, dc.lsaSize);
  REXPECT(r, dc.lsaBarrier.nBarriers == 8 && dc.worldBarrier.nBarriers == q.barrierCount, "barrier counts");
  REXPECT(r, h % 256 == 0 && h >= (size_t)8 * (4 * lsa + 4), "resource buffer at %u", h);
  REXPECT(r, lb.nBarriers == 3 && lb.bufOffset % 16 == 0 && lb.bufOffset != h, "barrier buffer at %u", lb.bufOffset);
  const ncclWindow_vidmem_view_t* v = (const ncclWindow_vidmem_view_t*)dc.resourceWindow;
  REXPECT(r, v->localPtr == dc.resourceBase && v->lsaSize == lsa && v->lsaRank == dc.lsaRank, "window view");
  unsigned char* mine = (unsigned char*)dc.resourceBase;
  for (size_t i = 0; i < h + RES_BYTES; i++) REXPECT(r, mine[i] == 0, "resource byte %zu is %d", i, mine[i]);
  memset(mine + h, 0x40 + r->rank, RES_BYTES);
  int one = 1;
  RCHECK(r, ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL)); /* everyone wrote */
  if (mode == SYM_FAKE_GPU) RCHECK(r, braid_device()->stream_sync(NULL));  /* device mode: the call is asynchronous */
  for (int i = 0; i < lsa; i++) {
    void* p = NULL;
    RCHECK(r, ncclGetLsaDevicePointer(dc.resourceWindow, h, i, &p));
    REXPECT(r, p == (char*)v->lsaPtrs[i] + h, "LSA pointer %d: %p, view %p", i, p, v->lsaPtrs[i]);
    int world = r->rank - dc.lsaRank + i;
    REXPECT(r, ((unsigned char*)p)[RES_BYTES - 1] == 0x40 + world, "LSA peer %d's buffer holds %d", i,
            ((unsigned char*)p)[RES_BYTES - 1]);
  }
  void* mm = NULL;
  REXPECT(r, ncclGetLsaMultimemDevicePointer(dc.resourceWindow, 0, &mm) == ncclInvalidUsage, "multimem pointer");
  RCHECK(r, ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL)); /* everyone read */
  if (mode == SYM_FAKE_GPU) RCHECK(r, braid_device()->stream_sync(NULL));
  RCHECK(r, ncclDevCommDestroy(comm, &dc));
  REXPECT(r, ncclDevCommDestroy(comm, &dc) == ncclInvalidArgument, "second destroy accepted");
  q = (ncclDevCommRequirements_t)NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  RCHECK(r, ncclDevCommCreate(comm, &q, &dc)); /* left for ncclCommDestroy to free */
  return 0;
}

static int body_devcomm(struct harness_rank* r) {
  const struct dc_arg* a = r->arg;
  ncclComm_t comm;
  rank_env(r, a->mode);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (check_props(r, comm, a->mode) || check_refusals(r, comm, a->mode) || check_devcomm(r, comm, a->mode)) return 1;
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

/* A rank that fails returns early; the others' collective calls then fail after this
 * (BRAID_INIT_TIMEOUT), naming it, well within the case's timeout. */
#define DC_PEER_TIMEOUT_S "60"

START_TEST(test_devcomm) {
  struct dc_arg a = {_i};
  int nranks = _i == SYM_PAIRS ? 4 : 3;
  sym_use_mode(_i, nranks);
  setenv("BRAID_INIT_TIMEOUT", DC_PEER_TIMEOUT_S, 1);
  braid_param_reload();
  int failed = harness_run(nranks, sym_harness_modes[_i], body_devcomm, &a, RANK_TIMEOUT_S);
  unsetenv("BRAID_INIT_TIMEOUT");
  sym_use_mode(SYM_THREADS, 0);
  ck_assert_msg(failed == 0, "mode %s", sym_mode_names[_i]);
}
END_TEST

/* ---- a rank that does not come ------------------------------------------------------------ */

#define ABSENT_TIMEOUT_S "2" /* BRAID_INIT_TIMEOUT: how long the others wait for it */

struct absent_arg {
  int mode;
  int done; /* threads: ranks 0 and 1 finished their failed call */
};

/* Rank 2 never calls ncclDevCommCreate. Its peers' calls fail with ncclRemoteError, not hang:
 * as threads (rank 2's communicator stays open: the deadline) and as processes (rank 2
 * destroys its communicator at once: its connections close). A rank alone in its process
 * checks that the WARN names rank 2. */
static int body_absent(struct harness_rank* r) {
  struct absent_arg* a = r->arg;
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 2) {
    while (a->mode == SYM_THREADS && __atomic_load_n(&a->done, __ATOMIC_ACQUIRE) < 2) usleep(1000);
    RCHECK(r, ncclCommDestroy(comm));
    return 0;
  }
  ncclDevCommRequirements_t q = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm_t dc;
  ncclResult_t res = ncclDevCommCreate(comm, &q, &dc);
  const char* last = ncclGetLastError(NULL);
  if (a->mode == SYM_THREADS) __atomic_fetch_add(&a->done, 1, __ATOMIC_RELEASE);
  REXPECT(r, res == ncclRemoteError, "ncclDevCommCreate without rank 2 returned %d (%s)", (int)res,
          ncclGetErrorString(res));
  if (a->mode == SYM_PROCS)
    REXPECT(r, strstr(last, "ncclCommWindowRegister") != NULL && strstr(last, "rank(s) 2") != NULL,
            "the WARN does not name the call and rank 2: %s", last);
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_devcomm_absent) {
  int mode = _i == 0 ? SYM_THREADS : SYM_PROCS;
  struct absent_arg a = {mode, 0};
  sym_use_mode(mode, 3);
  setenv("BRAID_INIT_TIMEOUT", ABSENT_TIMEOUT_S, 1);
  braid_param_reload();
  int failed = harness_run(3, sym_harness_modes[mode], body_absent, &a, RANK_TIMEOUT_S);
  unsetenv("BRAID_INIT_TIMEOUT");
  sym_use_mode(SYM_THREADS, 0);
  ck_assert_msg(failed == 0, "mode %s", sym_mode_names[mode]);
}
END_TEST

Suite* devcomm_suite(void) {
  Suite* s = suite_create("devcomm");
  TCase* tc = tcase_create("devcomm");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_devcomm, 0, SYM_NMODES);
  tcase_add_loop_test(tc, test_devcomm_absent, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}
