/*
 * devcomm.c - the NCCL device API's host side (include/nccl_device.h): LSA teams,
 * ncclCommQueryProperties, team queries, ncclDevCommCreate / ncclDevCommDestroy and barrier
 * requirements.
 *
 * A device communicator is a resource window: one ncclMemAlloc buffer per rank, registered as
 * an NCCL_WIN_COLL_SYMMETRIC window (collective), laid out as the requirements ask (LSA barrier
 * inboxes and epochs, world barriers, user resource buffers), zeroed. Device code reaches the
 * LSA peers' copies through the window's view (window.c). What braid cannot provide is refused
 * before anything collective happens, on every rank alike (the requirements are the same
 * everywhere): multicast (no NVSwitch multicast object on any machine braid runs on), GIN (no
 * GPU-initiated network backend), LL all-to-all buffers, world barriers across LSA teams.
 */
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "core/sym/sym.h"

#define DEVCOMM_MAGIC 0x6272616964646376ULL /* "braiddcv" */
#define DEVCOMM_ALIGN 16

struct braid_devcomm {
  struct braid_devcomm* next;
  ncclWindow_t win; /* the resource window (ncclDevComm.resourceWindow) */
  void* mem;        /* its ncclMemAlloc buffer */
};

/* Load/store reachability between any two ranks, from the allgathered facts (signal.c decides
 * the same for this rank's own pairs). */
static int pair_reachable(const struct braid_comm* comm, int a, int b) {
  const struct braid_peer_info *p = &comm->peers[a], *q = &comm->peers[b];
  if (p->pid_hash == q->pid_hash) return 1;
  return p->host_hash == q->host_hash && p->shm_dev == q->shm_dev && p->host_mode == q->host_mode;
}

static int blocks_reachable(const struct braid_comm* comm, int d) {
  for (int r = 0; r < comm->nranks; r++)
    if (!pair_reachable(comm, r, r - r % d)) return 0;
  return 1;
}

void braid_sym_lsa_team(struct braid_comm* comm) {
  int d = comm->nranks;
  while (d > 1 && (comm->nranks % d != 0 || !blocks_reachable(comm, d))) d--;
  comm->sym->lsa_size = d;
  comm->sym->lsa0 = comm->rank - comm->rank % d;
}

static struct braid_comm* checked_comm(ncclComm_t handle, const char* fn) {
  if (braid_comm_check(handle, fn) != ncclSuccess) return NULL;
  return braid_comm_of(handle);
}

BRAID_API ncclResult_t ncclCommQueryProperties(ncclComm_t handle, ncclCommProperties_t* props) {
  const char* fn = "ncclCommQueryProperties";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (props == NULL || props->magic != NCCL_API_MAGIC || props->size < offsetof(ncclCommProperties_t, nLsaTeams)) {
    BRAID_WARN("%s: props %p is not initialized with NCCL_COMM_PROPERTIES_INITIALIZER", fn, (void*)props);
    return ncclInvalidArgument;
  }
  ncclCommProperties_t p;
  memset(&p, 0, sizeof(p));
  p.size = props->size < sizeof(p) ? props->size : sizeof(p);
  p.magic = props->magic;
  p.version = props->version;
  p.rank = comm->rank;
  p.nRanks = comm->nranks;
  p.cudaDev = comm->cuda_dev;
  p.nvmlDev = comm->cuda_dev;
  p.deviceApiSupport = comm->device != NULL;      /* kernels need a device; host mode has the host half only */
  p.multimemSupport = comm->sym->mc_capable != 0; /* windows of ncclMemAlloc memory get multicast mappings */
  p.ginType = NCCL_GIN_TYPE_NONE;
  p.nLsaTeams = comm->nranks / comm->sym->lsa_size;
  p.hostRmaSupport = comm->sym->nctx > 0;
  p.railedGinType = NCCL_GIN_TYPE_NONE;
  memcpy(props, &p, p.size); /* an older program's smaller struct: its own fields only */
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommQueryProperties)

/* ---- teams -------------------------------------------------------------------------------- */

BRAID_API ncclTeam_t ncclTeamWorld(ncclComm_t handle) {
  struct braid_comm* comm = checked_comm(handle, "ncclTeamWorld");
  ncclTeam_t t = {0, 0, 1};
  if (comm != NULL) t = (ncclTeam_t){comm->nranks, comm->rank, 1};
  return t;
}
BRAID_PROFILE_ALIAS(ncclTeamWorld)

BRAID_API ncclTeam_t ncclTeamLsa(ncclComm_t handle) {
  struct braid_comm* comm = checked_comm(handle, "ncclTeamLsa");
  ncclTeam_t t = {0, 0, 1};
  if (comm != NULL) t = (ncclTeam_t){comm->sym->lsa_size, comm->rank - comm->sym->lsa0, 1};
  return t;
}
BRAID_PROFILE_ALIAS(ncclTeamLsa)

BRAID_API ncclTeam_t ncclTeamRail(ncclComm_t handle) {
  struct braid_comm* comm = checked_comm(handle, "ncclTeamRail");
  ncclTeam_t t = {0, 0, 1};
  if (comm != NULL) {
    int d = comm->sym->lsa_size;
    t = (ncclTeam_t){comm->nranks / d, comm->rank / d, d};
  }
  return t;
}
BRAID_PROFILE_ALIAS(ncclTeamRail)

BRAID_API int ncclTeamRankToWorld(ncclComm_t handle, ncclTeam_t team, int rank) {
  struct braid_comm* comm = checked_comm(handle, "ncclTeamRankToWorld");
  if (comm == NULL) return -1;
  int w = comm->rank + (rank - team.rank) * team.stride;
  return w >= 0 && w < comm->nranks ? w : -1;
}
BRAID_PROFILE_ALIAS(ncclTeamRankToWorld)

BRAID_API int ncclTeamRankToLsa(ncclComm_t handle, ncclTeam_t team, int rank) {
  struct braid_comm* comm = checked_comm(handle, "ncclTeamRankToLsa");
  if (comm == NULL) return -1;
  int l = comm->rank + (rank - team.rank) * team.stride - comm->sym->lsa0;
  return l >= 0 && l < comm->sym->lsa_size ? l : -1;
}
BRAID_PROFILE_ALIAS(ncclTeamRankToLsa)

/* ---- barrier requirements ------------------------------------------------------------------ */

static size_t lsa_barrier_bytes(int nranks, int nbarriers) {
  return (size_t)nbarriers * ((size_t)nranks * 4 + 4); /* inboxes, then epochs */
}

BRAID_API ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                       ncclLsaBarrierHandle_t* outHandle,
                                                       ncclDevResourceRequirements_t* outReq) {
  const char* fn = "ncclLsaBarrierCreateRequirement";
  if (outHandle == NULL || outReq == NULL || nBarriers < 0 || team.nRanks <= 0) {
    BRAID_WARN("%s: invalid argument (outHandle %p, outReq %p, nBarriers %d, team.nRanks %d)", fn, (void*)outHandle,
               (void*)outReq, nBarriers, team.nRanks);
    return ncclInvalidArgument;
  }
  memset(outReq, 0, sizeof(*outReq));
  outReq->bufferSize = lsa_barrier_bytes(team.nRanks, nBarriers);
  outReq->bufferAlign = DEVCOMM_ALIGN;
  outReq->outBufferHandle = &outHandle->bufOffset;
  outHandle->bufOffset = 0;
  outHandle->nBarriers = nBarriers;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclLsaBarrierCreateRequirement)

BRAID_API ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                       ncclGinBarrierHandle_t* outHandle,
                                                       ncclDevResourceRequirements_t* outReq) {
  BRAID_CHECK(braid_comm_check(comm, "ncclGinBarrierCreateRequirement"));
  BRAID_WARN(
      "ncclGinBarrierCreateRequirement: braid has no GIN backend (ncclCommQueryProperties: ginType "
      "NCCL_GIN_TYPE_NONE)");
  return ncclInvalidUsage;
}
BRAID_PROFILE_ALIAS(ncclGinBarrierCreateRequirement)

/* ---- ncclDevCommCreate / Destroy ----------------------------------------------------------- */

/* What braid cannot provide: refused on every rank alike, before anything collective. */
static ncclResult_t reqs_supported(const struct braid_comm* comm, const ncclDevCommRequirements_t* q, const char* fn) {
  const char* gin = NULL;
  if (q->ginForceEnable) gin = "ginForceEnable";
  if (q->ginSignalCount > 0) gin = "ginSignalCount";
  if (q->ginCounterCount > 0) gin = "ginCounterCount";
  if (q->ginConnectionType != NCCL_GIN_CONNECTION_NONE) gin = "ginConnectionType";
  if (q->railGinBarrierCount > 0) gin = "railGinBarrierCount";
  if (q->worldGinBarrierCount > 0) gin = "worldGinBarrierCount";
  for (const ncclDevResourceRequirements_t* r = q->resourceRequirementsList; r != NULL; r = r->next)
    if (r->ginSignalCount > 0 || r->ginCounterCount > 0) gin = "a resource requirement's GIN signals/counters";
  if (gin != NULL) {
    BRAID_WARN("%s: %s asks for GIN, which braid does not have (ginType NCCL_GIN_TYPE_NONE)", fn, gin);
    return ncclInvalidUsage;
  }
  int mm = q->lsaMultimem;
  for (const ncclTeamRequirements_t* t = q->teamRequirementsList; t != NULL; t = t->next) mm |= t->multimem;
  if (mm) {
    BRAID_WARN(
        "%s: multimem (NVLS multicast) requested, but no multicast object can be made here "
        "(ncclCommQueryProperties: multimemSupport 0)",
        fn);
    return ncclInvalidUsage;
  }
  if (q->lsaLLA2ABlockCount > 0 || q->lsaLLA2ASlotCount > 0) {
    BRAID_WARN("%s: LL all-to-all buffers (lsaLLA2ABlockCount %d) are not implemented in braid", fn,
               q->lsaLLA2ABlockCount);
    return ncclInvalidUsage;
  }
  if (q->barrierCount > 0 && comm->sym->lsa_size != comm->nranks) {
    BRAID_WARN(
        "%s: barrierCount %d: world barriers need GIN when the world (%d ranks) is more than one LSA team "
        "(%d ranks)",
        fn, q->barrierCount, comm->nranks, comm->sym->lsa_size);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

static ncclResult_t reqs_check(const ncclDevCommRequirements_t* q, ncclDevComm_t* out, const char* fn) {
  if (q == NULL || out == NULL) {
    BRAID_WARN("%s: %s argument is NULL", fn, q == NULL ? "reqs" : "outDevComm");
    return ncclInvalidArgument;
  }
  if (q->magic != NCCL_API_MAGIC || q->size < sizeof(*q)) {
    BRAID_WARN("%s: reqs (magic 0x%x, size %zu) is not initialized with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER", fn,
               q->magic, q->size);
    return ncclInvalidArgument;
  }
  if (q->lsaBarrierCount < 0 || q->barrierCount < 0) {
    BRAID_WARN("%s: invalid lsaBarrierCount %d / barrierCount %d", fn, q->lsaBarrierCount, q->barrierCount);
    return ncclInvalidArgument;
  }
  for (const ncclDevResourceRequirements_t* r = q->resourceRequirementsList; r != NULL; r = r->next)
    if (r->bufferAlign & (r->bufferAlign - 1)) {
      BRAID_WARN("%s: resource requirement %p: bufferAlign %zu is not a power of two", fn, (const void*)r,
                 r->bufferAlign);
      return ncclInvalidArgument;
    }
  return ncclSuccess;
}

static size_t align_up(size_t x, size_t a) {
  return (x + a - 1) & ~(a - 1);
}

/* The resource window's layout; writes the handles (ours in out, the user's through the lists). */
static size_t devcomm_layout(const struct braid_comm* comm, const ncclDevCommRequirements_t* q, ncclDevComm_t* out) {
  size_t off = 0;
  out->lsaBarrier.bufOffset = 0;
  out->lsaBarrier.nBarriers = q->lsaBarrierCount;
  off = align_up(off + lsa_barrier_bytes(comm->sym->lsa_size, q->lsaBarrierCount), DEVCOMM_ALIGN);
  out->worldBarrier.bufOffset = (uint32_t)off;
  out->worldBarrier.nBarriers = q->barrierCount;
  off = align_up(off + lsa_barrier_bytes(comm->nranks, q->barrierCount), DEVCOMM_ALIGN);
  for (ncclDevResourceRequirements_t* r = q->resourceRequirementsList; r != NULL; r = r->next) {
    off = align_up(off, r->bufferAlign > DEVCOMM_ALIGN ? r->bufferAlign : DEVCOMM_ALIGN);
    if (r->outBufferHandle != NULL) *r->outBufferHandle = (ncclDevResourceHandle_t)off;
    off += r->bufferSize;
  }
  return off > 0 ? off : DEVCOMM_ALIGN;
}

BRAID_API ncclResult_t ncclDevCommCreate(ncclComm_t handle, const ncclDevCommRequirements_t* reqs,
                                         ncclDevComm_t* outDevComm) {
  const char* fn = "ncclDevCommCreate";
  ncclResult_t res = ncclSuccess;
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  BRAID_CHECK(reqs_check(reqs, outDevComm, fn));
  BRAID_CHECK(reqs_supported(comm, reqs, fn));
  ncclDevComm_t dc;
  memset(&dc, 0, sizeof(dc));
  size_t bytes = devcomm_layout(comm, reqs, &dc);
  if (bytes > UINT32_MAX) {
    BRAID_WARN("%s: the requirements need %zu bytes of resources (at most 4 GiB)", fn, bytes);
    return ncclInvalidArgument;
  }
  struct braid_devcomm* d = NULL;
  BRAID_CALLOC_GOTO(d, 1, res, out);
  BRAID_CHECK_GOTO(ncclMemAlloc(&d->mem, bytes), res, err_free);
  /* At the call, in a group too (a queued registration would leave the handle unset). */
  BRAID_CHECK_GOTO(braid_win_register(comm, d->mem, bytes, &d->win, NCCL_WIN_COLL_SYMMETRIC), res, err_mem);
  if (comm->device != NULL && !d->win->pinned)
    BRAID_WARN("%s: rank %d: this device has no unified addressing of pinned memory: kernels cannot read windows", fn,
               comm->rank);
  dc.rank = comm->rank;
  dc.nRanks = comm->nranks;
  dc.lsaRank = comm->rank - comm->sym->lsa0;
  dc.lsaSize = comm->sym->lsa_size;
  dc.worldLsa0 = comm->sym->lsa0;
  dc.resourceWindow = d->win;
  dc.resourceBase = d->mem;
  dc.magic = DEVCOMM_MAGIC;
  pthread_mutex_lock(&comm->sym->lock);
  d->next = comm->sym->devcomms;
  comm->sym->devcomms = d;
  pthread_mutex_unlock(&comm->sym->lock);
  BRAID_INFO(BRAID_LOG_REG, "rank %d: device communicator %p: %zu bytes of resources, %d LSA barriers (LSA %d/%d)",
             comm->rank, (void*)d->win, bytes, reqs->lsaBarrierCount, dc.lsaRank, dc.lsaSize);
  *outDevComm = dc;
  return ncclSuccess;
err_mem:
  ncclMemFree(d->mem);
err_free:
  free(d);
out:
  return res;
}
BRAID_PROFILE_ALIAS(ncclDevCommCreate)

/* Unlinks and returns comm's record of devComm, or NULL. */
static struct braid_devcomm* devcomm_take(struct braid_comm* comm, const ncclDevComm_t* dc) {
  struct braid_devcomm **pp, *d = NULL;
  pthread_mutex_lock(&comm->sym->lock);
  for (pp = &comm->sym->devcomms; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->win == dc->resourceWindow) {
      d = *pp;
      *pp = d->next;
      break;
    }
  pthread_mutex_unlock(&comm->sym->lock);
  return d;
}

BRAID_API ncclResult_t ncclDevCommDestroy(ncclComm_t handle, const ncclDevComm_t* devComm) {
  const char* fn = "ncclDevCommDestroy";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  struct braid_devcomm* d = NULL;
  if (devComm == NULL || devComm->magic != DEVCOMM_MAGIC || (d = devcomm_take(comm, devComm)) == NULL) {
    BRAID_WARN("%s: devComm %p is not a device communicator of comm %p (rank %d)", fn, (const void*)devComm,
               (void*)handle, comm->rank);
    return ncclInvalidArgument;
  }
  ncclResult_t res = ncclCommWindowDeregister(handle, d->win);
  ncclResult_t res2 = ncclMemFree(d->mem);
  free(d);
  return res != ncclSuccess ? res : res2;
}
BRAID_PROFILE_ALIAS(ncclDevCommDestroy)

void braid_devcomm_free_all(struct braid_comm* comm) {
  while (comm->sym->devcomms != NULL) {
    struct braid_devcomm* d = comm->sym->devcomms;
    comm->sym->devcomms = d->next;
    ncclMemFree(d->mem); /* its window goes with the communicator's others (braid_win_free_all) */
    free(d);
  }
}
