/*
 * init_api.c - the public communicator lifecycle entry points: argument checks (a WARN that
 * names the bad argument, nothing created), then init.c does the work.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/group.h"
#include "core/init_internal.h"
#include "device/device.h"
#include "device/launch.h"
#include "topo/graph.h"

BRAID_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  braid_debug_banner();
  if (uniqueId == NULL) {
    BRAID_WARN("ncclGetUniqueId: uniqueId argument is NULL");
    return ncclInvalidArgument;
  }
  return braid_bootstrap_get_unique_id(uniqueId);
}
BRAID_PROFILE_ALIAS(ncclGetUniqueId)

static ncclResult_t check_rank_args(const char* fn, ncclComm_t* newcomm, int nranks, int rank) {
  if (newcomm == NULL) {
    BRAID_WARN("%s: comm argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (nranks < 1) {
    BRAID_WARN("%s: invalid nranks %d (must be >= 1)", fn, nranks);
    return ncclInvalidArgument;
  }
  if (rank < 0 || rank >= nranks) {
    BRAID_WARN("%s: invalid rank %d (nranks %d)", fn, rank, nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* Common path of every root-based init. `ids` is copied. */
static ncclResult_t init_from_ids(const char* fn, ncclComm_t* newcomm, int nranks, int rank, int nids,
                                  const ncclUniqueId* ids, ncclConfig_t* user_config) {
  ncclConfig_t config;
  struct braid_comm* comm;
  braid_debug_banner();
  BRAID_CHECK(check_rank_args(fn, newcomm, nranks, rank));
  BRAID_CHECK(braid_config_resolve(user_config, &config, fn));
  struct init_args* a = calloc(1, sizeof(*a));
  if (a == NULL || (a->ids = malloc(nids * sizeof(*ids))) == NULL) {
    free(a);
    BRAID_WARN("%s: out of memory", fn);
    return ncclSystemError;
  }
  memcpy(a->ids, ids, nids * sizeof(*ids));
  a->nids = nids;
  a->fn = fn;
  ncclResult_t res = braid_comm_alloc(rank, nranks, &config, &comm);
  if (res != ncclSuccess) {
    braid_init_args_free(a);
    return res;
  }
  comm->comm_hash = braid_hash(ids, sizeof(*ids), 0);
  a->comm = comm;
  /* NCCL hands the handle out before init completes, so another thread can abort a blocking
   * init that waits for a missing rank. */
  *newcomm = braid_comm_handle(comm);
  res = braid_init_start(a);
  /* A failed blocking init leaves nothing behind (init.c freed it, or the thread that
   * aborted it frees it). */
  if (res != ncclSuccess && res != ncclInProgress && config.blocking && braid_group_depth() == 0) *newcomm = NULL;
  return res;
}

BRAID_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                              ncclConfig_t* config) {
  return init_from_ids("ncclCommInitRankConfig", comm, nranks, rank, 1, &commId, config);
}
BRAID_PROFILE_ALIAS(ncclCommInitRankConfig)

BRAID_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_from_ids("ncclCommInitRank", comm, nranks, rank, 1, &commId, NULL);
}
BRAID_PROFILE_ALIAS(ncclCommInitRank)

BRAID_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                ncclUniqueId* commIds, ncclConfig_t* config) {
  if (commIds == NULL) {
    BRAID_WARN("ncclCommInitRankScalable: commIds argument is NULL");
    return ncclInvalidArgument;
  }
  if (nId < 1 || nId > nranks) {
    BRAID_WARN("ncclCommInitRankScalable: invalid nId %d (must be between 1 and nranks %d)", nId, nranks);
    return ncclInvalidArgument;
  }
  return init_from_ids("ncclCommInitRankScalable", newcomm, nranks, myrank, nId, commIds, config);
}
BRAID_PROFILE_ALIAS(ncclCommInitRankScalable)

BRAID_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == NULL) {
    BRAID_WARN("ncclCommInitAll: comms argument is NULL");
    return ncclInvalidArgument;
  }
  if (ndev < 1) {
    BRAID_WARN("ncclCommInitAll: invalid ndev %d (must be >= 1)", ndev);
    return ncclInvalidArgument;
  }
  /* One process is one node, and a node holds at most BRAID_GRAPH_MAX_LOCAL ranks: say so now
   * rather than after starting thousands of ranks. */
  if (ndev > BRAID_GRAPH_MAX_LOCAL) {
    BRAID_WARN("ncclCommInitAll: invalid ndev %d: the ranks of one process (one node) are at most %d", ndev,
               BRAID_GRAPH_MAX_LOCAL);
    return ncclInvalidArgument;
  }
  for (int i = 0; devlist != NULL && i < ndev; i++) {
    for (int j = 0; j < i; j++) {
      if (devlist[i] == devlist[j] && braid_param_int(BRAID_PARAM_GPU_SHARING) != 1) {
        BRAID_WARN("ncclCommInitAll: duplicate device %d in devlist (positions %d and %d)", devlist[i], j, i);
        return ncclInvalidUsage;
      }
    }
  }
  /* On devices, rank i binds to devlist[i] (or device i), as NCCL does. */
  const struct braid_device_ops* dev = braid_device();
  int ndevices = 0, saved = -1;
  if (dev != NULL) {
    BRAID_CHECK(dev->count(&ndevices));
    BRAID_CHECK(dev->get_current(&saved));
  }
  for (int i = 0; i < ndev; i++) {
    int d = devlist != NULL ? devlist[i] : i;
    /* host mode has no devices: a devlist can only number the ranks, 0 .. ndev-1 */
    int limit = dev != NULL ? ndevices : ndev;
    if (d < 0 || (d >= limit && (devlist != NULL || braid_param_int(BRAID_PARAM_GPU_SHARING) != 1))) {
      BRAID_WARN("ncclCommInitAll: invalid device %d for rank %d (%d %s)", d, i, limit,
                 dev != NULL ? "devices" : "ranks: host mode takes devlist entries 0 to ndev-1");
      return ncclInvalidArgument;
    }
  }
  ncclUniqueId id;
  BRAID_CHECK(ncclGetUniqueId(&id));
  ncclResult_t res = ncclGroupStart(), res2;
  for (int i = 0; i < ndev && res == ncclSuccess; i++) {
    /* BRAID_GPU_SHARING=1 without a devlist: more ranks than devices share them in turn. */
    if (dev != NULL) res = dev->set_current(devlist != NULL ? devlist[i] : i % ndevices);
    if (res == ncclSuccess) res = ncclCommInitRank(&comms[i], ndev, id, i);
  }
  res2 = ncclGroupEnd();
  if (dev != NULL) dev->set_current(saved);
  return res != ncclSuccess ? res : res2;
}
BRAID_PROFILE_ALIAS(ncclCommInitAll)

/* Checks that accept a communicator in any state (init may have failed). */
static ncclResult_t check_alive(ncclComm_t handle, const char* fn, struct braid_comm** comm_p) {
  ncclResult_t res = braid_comm_check(handle, fn);
  /* Destroy and abort also take failed or aborted communicators: only garbage is refused. */
  if (res == ncclInvalidArgument) return res;
  *comm_p = braid_comm_of(handle);
  return ncclSuccess;
}

BRAID_API ncclResult_t ncclCommFinalize(ncclComm_t handle) {
  struct braid_comm* comm;
  BRAID_CHECK(check_alive(handle, "ncclCommFinalize", &comm));
  braid_init_join_thread(comm);
  if (comm->state == BRAID_COMM_FINALIZED) {
    BRAID_WARN("ncclCommFinalize: rank %d: communicator %p is already finalized", comm->rank, (void*)comm);
    return ncclInvalidArgument;
  }
  /* Host-mode collectives complete before their call returns; kernels may still run. */
  ncclResult_t res = braid_launch_wait(comm);
  if (comm->state == BRAID_COMM_READY) comm->state = BRAID_COMM_FINALIZED;
  return res;
}
BRAID_PROFILE_ALIAS(ncclCommFinalize)

BRAID_API ncclResult_t ncclCommDestroy(ncclComm_t handle) {
  struct braid_comm* comm;
  if (handle == NULL) return ncclSuccess; /* as NCCL: destroying NULL is a no-op */
  BRAID_CHECK(check_alive(handle, "ncclCommDestroy", &comm));
  int queued = braid_group_holds(comm);
  if (queued > 0) {
    BRAID_WARN(
        "ncclCommDestroy: rank %d: comm %p has %d call%s queued in this thread's open group; call ncclGroupEnd "
        "before destroying it",
        comm->rank, (void*)handle, queued, queued == 1 ? "" : "s");
    return ncclInvalidUsage;
  }
  braid_init_join_thread(comm);
  BRAID_INFO(BRAID_LOG_INIT, "comm %p rank %d nranks %d cudaDev %d busId %lx - Destroy COMPLETE", (void*)comm,
             comm->rank, comm->nranks, comm->cuda_dev, (long)(comm->bus_id < 0 ? 0 : comm->bus_id));
  braid_comm_free(comm);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommDestroy)

BRAID_API ncclResult_t ncclCommAbort(ncclComm_t handle) {
  struct braid_comm* comm;
  if (handle == NULL) return ncclSuccess;
  BRAID_CHECK(check_alive(handle, "ncclCommAbort", &comm));
  if (!braid_comm_registry_claim(comm)) {
    BRAID_WARN(
        "ncclCommAbort: comm %p is being freed by another thread (its init failed, or it is already "
        "aborting)",
        (void*)comm);
    return ncclInvalidArgument;
  }
  if (comm->bootstrap != NULL) braid_bootstrap_abort(comm->bootstrap);
  braid_init_join_thread(comm); /* an init waiting for a missing rank sees the flag and returns */
  /* Collectives running on other threads see the flag within a few polls; let them leave. */
  while (__atomic_load_n(&comm->inflight, __ATOMIC_ACQUIRE) > 0) sched_yield();
  BRAID_INFO(BRAID_LOG_INIT, "comm %p rank %d nranks %d cudaDev %d busId %lx - Abort COMPLETE", (void*)comm, comm->rank,
             comm->nranks, comm->cuda_dev, (long)(comm->bus_id < 0 ? 0 : comm->bus_id));
  braid_comm_free(comm);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommAbort)

BRAID_API ncclResult_t ncclCommRevoke(ncclComm_t handle, int revokeFlags) {
  struct braid_comm* comm;
  BRAID_CHECK(check_alive(handle, "ncclCommRevoke", &comm));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    BRAID_WARN("ncclCommRevoke: invalid revokeFlags %d (must be NCCL_REVOKE_DEFAULT)", revokeFlags);
    return ncclInvalidArgument;
  }
  __atomic_store_n(&comm->abort_flag, BRAID_EXEC_ABORTED, __ATOMIC_RELEASE);
  comm->async_error = ncclSuccess;
  BRAID_INFO(BRAID_LOG_INIT, "comm %p rank %d: revoked", (void*)comm, comm->rank);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommRevoke)
