/*
 * nccl_device.h - braid's NCCL device API (NCCL 2.28+ nccl_device.h), written from NCCL's
 * documented semantics: device communicators (ncclDevComm, created from requirements by the
 * collective ncclDevCommCreate), teams (world, LSA = the ranks this rank reaches by
 * load/store, rail), window pointers (local, LSA peer, multicast), cooperative groups and LSA
 * barrier sessions. The device-side half (include/braid_device/) compiles under nvcc only; the
 * types and host entry points below are plain C as well, so C programs and braid's own tests
 * use them.
 *
 * What braid provides (see src/core/sym/README.md): LSA teams are contiguous blocks of world
 * ranks that are mutually load/store reachable (same process or same node); window pointers are
 * braid's window mappings (cuMem descriptors or CUDA IPC on a GPU, shared memory in host mode);
 * LSA barriers live in a per-device-communicator resource window. Multicast (NVLS) memory
 * exists where the device layer can create it (NVSwitch): windows of ncclMemAlloc (cuMem)
 * memory are then bound to a multicast object (view.multimem, ncclGetLsaMultimemPointer) and
 * ncclCommProperties.multimemSupport is true; elsewhere the multimem queries are refused with
 * ncclInvalidUsage, and so are lsaMultimem requirements of ncclDevCommCreate. GIN (GPU-
 * initiated networking) has no backend in braid: ginType is NCCL_GIN_TYPE_NONE, GIN
 * requirements are refused, and ncclGin's device methods trap if ever reached.
 */
#ifndef NCCL_DEVICE_H_
#define NCCL_DEVICE_H_

#include "nccl.h"

#ifndef __cplusplus
#include <stdbool.h>
#endif

#if defined(__CUDACC__)
#define NCCL_CHECK_CUDACC 1
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#define NCCL_DEVICE_INLINE __device__ __forceinline__
#else
#define NCCL_CHECK_CUDACC 0
#define NCCL_HOST_DEVICE_INLINE static inline
#define NCCL_DEVICE_INLINE static inline
#ifndef __host__
#define __host__
#endif
#endif
#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif
#define NCCL_IR_EXTERN_C

/* ---- handles and teams ------------------------------------------------------------------- */

typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* A team: nRanks ranks, this rank's index in it, and the world-rank distance between members. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

/* The window as device code sees it: every braid window handle (ncclWindow_t) starts with this
 * and lives in memory the device can read (pinned and mapped on a GPU). */
typedef struct ncclWindow_vidmem_view {
  void* localPtr; /* this rank's buffer */
  void** lsaPtrs; /* [lsaSize]: the LSA team's buffers as this rank's device reaches them */
  void* multimem; /* the LSA multicast mapping of the buffer, or NULL (no multicast here) */
  size_t size;    /* bytes of this rank's buffer */
  int lsaSize;    /* entries of lsaPtrs */
  int lsaRank;    /* this rank's index in it */
  int worldLsa0;  /* world rank of LSA rank 0 */
  int reserved;
} ncclWindow_vidmem_view_t;
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;

typedef struct ncclMultimemHandle {
  void* mcBase; /* multicast base of the resource window, NULL without multicast */
} ncclMultimemHandle_t;

/* An LSA barrier: nBarriers independent barriers (one per CTA, typically) whose inboxes start
 * at bufOffset of the device communicator's resource window. */
typedef struct ncclLsaBarrierHandle {
  uint32_t bufOffset; /* [nBarriers][lsaSize] uint32 inboxes, then [nBarriers] uint32 epochs */
  int nBarriers;
} ncclLsaBarrierHandle_t;

typedef struct ncclGinBarrierHandle {
  uint32_t bufOffset;
  int nBarriers; /* always 0 in braid (no GIN) */
} ncclGinBarrierHandle_t;

typedef struct {
  uint64_t opaque[2];
} ncclGinRequest_t;

typedef struct ncclLLA2AHandle {
  uint32_t bufOffset;
  int nBlocks, nSlots;
} ncclLLA2AHandle_t;

/* The device communicator (passed to kernels by value). Its layout is braid's. */
typedef struct ncclDevComm {
  int rank, nRanks;     /* world */
  int lsaRank, lsaSize; /* LSA team: world ranks worldLsa0 .. worldLsa0 + lsaSize - 1 */
  int worldLsa0;        /* = rank - lsaRank */
  int ginContextCount;  /* 0: no GIN */
  int ginSignalCount, ginCounterCount;
  ncclWindow_t resourceWindow;         /* braid's window holding barriers and requested buffers */
  void* resourceBase;                  /* its local pointer (device-visible) */
  ncclLsaBarrierHandle_t lsaBarrier;   /* reqs.lsaBarrierCount barriers over the LSA team */
  ncclLsaBarrierHandle_t worldBarrier; /* reqs.barrierCount: over the world (world == LSA only) */
  ncclGinBarrierHandle_t railGinBarrier;
  ncclMultimemHandle_t lsaMultimem;
  uint64_t magic; /* set by ncclDevCommCreate, cleared by ncclDevCommDestroy */
} ncclDevComm_t;

#if defined(__cplusplus)
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};
#endif

/* ---- requirements and properties (NCCL's field order, so NCCL's initializers fit) -------- */

typedef enum {
  NCCL_GIN_CONNECTION_NONE,
  NCCL_GIN_CONNECTION_FULL,
  NCCL_GIN_CONNECTION_RAIL,
} ncclGinConnectionType_t;

typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

typedef struct ncclDevCommRequirements {
  size_t size; /* filled by NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER: never touch */
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList; /* extra buffers in the resource window */
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem; /* a multicast mapping over the LSA team (refused: no multicast) */
  int barrierCount; /* world barriers */
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount; /* a hint */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
} ncclDevCommRequirements_t;

/* clang-format off */
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER {                                         \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE,               \
    NULL, NULL,                 /* resourceRequirementsList, teamRequirementsList */      \
    false, 0, 0, 0,             /* lsaMultimem, barrierCount, lsaBarrierCount, railGin */ \
    0, 0,                       /* lsaLLA2ABlockCount, lsaLLA2ASlotCount */               \
    false, 4, 0, 0,             /* ginForceEnable, ginContextCount, signals, counters */  \
    NCCL_GIN_CONNECTION_NONE, false, 0, NCCL_CONFIG_UNDEF_INT, /* type .. trafficClass */ \
    0, true, true,              /* worldGinBarrierCount, strong / VA signals */           \
}

struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle; /* set by ncclDevCommCreate: the buffer's offset */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

#define NCCL_COMM_PROPERTIES_INITIALIZER \
  { sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE }

typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
} ncclGinType_t;

typedef struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev; /* -1 in host mode */
  int nvmlDev;
  bool deviceApiSupport; /* ncclDevCommCreate works (LSA pointers and barriers) */
  bool multimemSupport;  /* false: no multicast object can be made */
  ncclGinType_t ginType; /* NCCL_GIN_TYPE_NONE */
  int nLsaTeams;
  bool hostRmaSupport; /* ncclPutSignal / ncclSignal / ncclWaitSignal */
  ncclGinType_t railedGinType;
} ncclCommProperties_t;

/* ---- host entry points (libnccl.so.2) ---------------------------------------------------- */

NCCL_EXTERN_C ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
NCCL_EXTERN_C ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                             ncclDevComm_t* outDevComm);
NCCL_EXTERN_C ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
NCCL_EXTERN_C ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                        ncclMultimemHandle_t multimem, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
NCCL_EXTERN_C ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                           ncclLsaBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                           ncclGinBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamRail(ncclComm_t comm);
NCCL_EXTERN_C int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* ---- team arithmetic (host and device) ---------------------------------------------------- */

/* Is world-relative member bPeer of team b also a member of team a? (Teams of one world.) */
NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  int delta = (bPeer - b.rank) * b.stride; /* world distance from this rank */
  if (delta % a.stride != 0) return false;
  int r = a.rank + delta / a.stride;
  return r >= 0 && r < a.nRanks;
}
/* bPeer of team b as a rank of team a (-1 if not a member). */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  int delta = (bPeer - b.rank) * b.stride;
  if (delta % a.stride != 0) return -1;
  int r = a.rank + delta / a.stride;
  return r >= 0 && r < a.nRanks ? r : -1;
}
/* The team of `innerSize` consecutive members of parent that holds this rank, and the team of
 * the members at the same inner position (parent = inner x outer). */
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  ncclTeam_t t;
  t.nRanks = innerSize;
  t.rank = parent.rank % innerSize;
  t.stride = parent.stride;
  return t;
}
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  ncclTeam_t t;
  t.nRanks = parent.nRanks / innerSize;
  t.rank = parent.rank / innerSize;
  t.stride = parent.stride * innerSize;
  return t;
}
/* The index'th member (in parent's order) of parent minus subset (subset within parent). */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankInDifference(ncclTeam_t parent, ncclTeam_t subset, int index) {
  for (int r = 0; r < parent.nRanks; r++) {
    if (ncclTeamRankIsMember(subset, parent, r)) continue;
    if (index-- == 0) return r;
  }
  return -1;
}
NCCL_HOST_DEVICE_INLINE size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) {
  return h;
}

#if NCCL_CHECK_CUDACC
#include "braid_device/gin.h" /* and what it builds on: lsa_barrier.h, ptr.h, coop.h */
#endif

#endif /* NCCL_DEVICE_H_ */
