/*
 * braid_device/gin.h - the GIN (GPU-initiated networking) names of the device API, and world
 * barriers (nvcc only; included by nccl_device.h).
 *
 * braid has no GIN backend: ncclCommQueryProperties reports NCCL_GIN_TYPE_NONE and
 * ncclDevCommCreate refuses every GIN requirement (signals, counters, GIN barriers, forced
 * enable) with ncclInvalidUsage, so no device communicator braid makes has GIN resources. The
 * types exist so that programs with GIN kernels (nccl-tests' alltoall, NCCL's examples) build
 * and choose their LSA kernels at run time; a GIN operation reached anyway traps.
 * ncclBarrierSession over the world team is an LSA barrier when the world is one LSA team
 * (ncclDevCommCreate checks that for reqs.barrierCount), the only case without a network.
 */
#ifndef BRAID_DEVICE_GIN_H_
#define BRAID_DEVICE_GIN_H_

#include "lsa_barrier.h"

enum ncclGinFenceLevel : uint32_t {
  None = 0,
  Put = 1u << 0,
  Get = 1u << 1,
  Relaxed = None,
};
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}

struct ncclGin_None {};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_StrongSignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_WeakSignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_StrongSignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_WeakSignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};
struct ncclGin_WeakCounterInc {
  ncclGinCounter_t counter;
};

NCCL_DEVICE_INLINE void braid_gin_unavailable() {
  printf("braid: GIN operation reached on a device communicator without GIN (ginType NCCL_GIN_TYPE_NONE)\n");
  __trap();
}

struct ncclGin {
  ncclDevComm const* comm;
  int contextIndex;
  NCCL_DEVICE_INLINE ncclGin(ncclDevComm const& c, int ctx) : comm(&c), contextIndex(ctx) {}
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename... Rest>
  NCCL_DEVICE_INLINE void put(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                              RemoteAction = ncclGin_None{}, LocalAction = ncclGin_None{}, Coop = Coop{},
                              Rest...) const {
    braid_gin_unavailable();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread, typename... Rest>
  NCCL_DEVICE_INLINE void putValue(ncclTeam, int, ncclWindow_t, size_t, T, RemoteAction = ncclGin_None{}, Coop = Coop{},
                                   Rest...) const {
    braid_gin_unavailable();
  }
  template <typename RemoteAction, typename Coop = ncclCoopThread, typename... Rest>
  NCCL_DEVICE_INLINE void signal(ncclTeam, int, RemoteAction, Coop = Coop{}, Rest...) const {
    braid_gin_unavailable();
  }
  template <typename Coop, typename... Rest>
  NCCL_DEVICE_INLINE void flush(Coop, cuda::memory_order = cuda::memory_order_acquire, Rest...) const {
    braid_gin_unavailable();
  }
  NCCL_DEVICE_INLINE uint64_t readSignal(ncclGinSignal_t, int = 64,
                                         cuda::memory_order = cuda::memory_order_acquire) const {
    braid_gin_unavailable();
    return 0;
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop, ncclGinSignal_t, uint64_t, int = 64,
                                     cuda::memory_order = cuda::memory_order_acquire) const {
    braid_gin_unavailable();
  }
  NCCL_DEVICE_INLINE uint64_t readCounter(ncclGinCounter_t, int = 56,
                                          cuda::memory_order = cuda::memory_order_acquire) const {
    braid_gin_unavailable();
    return 0;
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitCounter(Coop, ncclGinCounter_t, uint64_t, int = 56,
                                      cuda::memory_order = cuda::memory_order_acquire) const {
    braid_gin_unavailable();
  }
  NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t) const { braid_gin_unavailable(); }
  NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t) const { braid_gin_unavailable(); }
};

/* A GIN barrier (between LSA teams): never available in braid. */
template <typename Coop>
struct ncclGinBarrierSession {
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop, ncclGin, ncclTeam, ncclGinBarrierHandle, uint32_t) {
    braid_gin_unavailable();
  }
  template <typename... Rest>
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop, ncclGin, ncclTeamTagRail, uint32_t, Rest...) {
    braid_gin_unavailable();
  }
  template <typename... Rest>
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop, ncclGin, ncclTeamTagWorld, uint32_t, Rest...) {
    braid_gin_unavailable();
  }
  ncclGinBarrierSession(ncclGinBarrierSession const&) = delete;
  template <typename... Rest>
  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order, Rest...) {}
};

/* World or LSA barrier: the LSA barrier session underneath (world == LSA team, see above). */
template <typename Coop>
struct ncclBarrierSession {
  ncclLsaBarrierSession<Coop> lsa_;
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index, bool multimem = false)
      : lsa_(coop, *gin.comm, ncclTeamWorld(*gin.comm), gin.comm->worldBarrier, index) {
    if (gin.comm->lsaSize != gin.comm->nRanks || gin.comm->worldBarrier.nBarriers == 0) braid_gin_unavailable();
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa, ncclDevComm const& comm, uint32_t index,
                                        bool multimem = false)
      : lsa_(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index) {}
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeam inner, ncclTeam outer, ncclGin gin,
                                        ncclLsaBarrierHandle innerHandle, ncclGinBarrierHandle outerHandle,
                                        uint32_t index, bool multimem = false, ncclMultimemHandle mm = {})
      : lsa_(coop, *gin.comm, inner, innerHandle, index) {
    if (outer.nRanks > 1) braid_gin_unavailable();
  }
  ncclBarrierSession(ncclBarrierSession const&) = delete;
  NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop>& lsaBarrier() { return lsa_; }
  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order, ncclGinFenceLevel = ncclGinFenceLevel::Put) {
    lsa_.sync(coop, order);
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop coop, cuda::memory_order order, ncclGinFenceLevel, uint64_t timeoutCycles) {
    return lsa_.sync(coop, order, timeoutCycles);
  }
};

#endif /* BRAID_DEVICE_GIN_H_ */
