/*
 * braid_device/lsa_barrier.h - LSA barrier sessions (nvcc only; included by nccl_device.h).
 *
 * A barrier over a team whose members all lie in this rank's LSA team. Barrier `index` of a
 * handle owns, in the device communicator's resource window, one uint32 inbox per member (the
 * epoch that member last arrived with) and one epoch word this rank keeps for it. A session
 * reads the epoch; arrive writes epoch+1 into every member's inbox slot of this rank; wait
 * spins until every slot of its own inbox reached epoch+1; the destructor stores the epoch.
 * Memory order as NCCL defines it: arrive with release (or stronger) makes the coop's earlier
 * writes visible to members that complete a wait with acquire (or stronger); relaxed only
 * synchronizes. Every store and load is system scope (peers are other GPUs or processes).
 */
#ifndef BRAID_DEVICE_LSA_BARRIER_H_
#define BRAID_DEVICE_LSA_BARRIER_H_

#include "ptr.h"

template <typename Coop>
struct ncclLsaBarrierSession {
  Coop coop_;
  ncclWindow_t win_; /* the resource window */
  ncclTeam team_;
  int lsa0_;         /* LSA rank of team member 0 */
  uint32_t rowOff_;  /* this barrier's inbox row (team_.nRanks slots) */
  uint32_t* epochP_; /* where the epoch is kept between sessions */
  uint32_t epoch_;

  NCCL_DEVICE_INLINE void init(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLsaBarrierHandle h,
                               uint32_t index) {
    coop_ = coop;
    win_ = comm.resourceWindow;
    team_ = team;
    lsa0_ = ncclTeamRankToLsa(comm, team, 0);
    rowOff_ = h.bufOffset + index * (uint32_t)team.nRanks * 4u;
    epochP_ = (uint32_t*)ncclGetLocalPointer(win_, h.bufOffset + (size_t)h.nBarriers * team.nRanks * 4u + index * 4u);
    epoch_ = *(volatile uint32_t*)epochP_;
  }
  /* multimem: braid has no multicast barrier; the unicast one has the same semantics. */
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLsaBarrierHandle h,
                                           uint32_t index, bool multimem = false, ncclMultimemHandle mm = {}) {
    init(coop, comm, team, h, index);
  }
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeamTagLsa, uint32_t index,
                                           bool multimem = false) {
    init(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index);
  }
  NCCL_DEVICE_INLINE ~ncclLsaBarrierSession() {
    if (coop_.thread_rank() == 0) *(volatile uint32_t*)epochP_ = epoch_;
    coop_.sync();
  }
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) {
    coop_.sync();
    bool rel = order != cuda::memory_order_relaxed && order != cuda::memory_order_acquire;
    for (int i = coop_.thread_rank(); i < team_.nRanks; i += coop_.size()) {
      uint32_t* slot = (uint32_t*)ncclGetLsaPointer(win_, rowOff_ + 4u * team_.rank, lsa0_ + i);
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*slot);
      a.store(epoch_ + 1, rel ? cuda::memory_order_release : cuda::memory_order_relaxed);
    }
  }
  NCCL_DEVICE_INLINE ncclResult_t wait(Coop, cuda::memory_order order, uint64_t timeoutCycles) {
    bool acq = order != cuda::memory_order_relaxed && order != cuda::memory_order_release;
    uint32_t want = epoch_ + 1;
    int late = 0;
    long long t0 = clock64();
    for (int i = coop_.thread_rank(); i < team_.nRanks; i += coop_.size()) {
      uint32_t* slot = (uint32_t*)ncclGetLocalPointer(win_, rowOff_ + 4u * i);
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*slot);
      while ((int32_t)(a.load(acq ? cuda::memory_order_acquire : cuda::memory_order_relaxed) - want) < 0) {
        if (timeoutCycles != 0 && (uint64_t)(clock64() - t0) > timeoutCycles) {
          late = 1;
          break;
        }
      }
    }
    epoch_ = want;
    coop_.sync();
    return late ? ncclTimeout : ncclSuccess; /* the threads whose slots timed out */
  }
  NCCL_DEVICE_INLINE void wait(Coop c, cuda::memory_order order) {
    uint32_t want = epoch_ + 1;
    bool acq = order != cuda::memory_order_relaxed && order != cuda::memory_order_release;
    for (int i = coop_.thread_rank(); i < team_.nRanks; i += coop_.size()) {
      uint32_t* slot = (uint32_t*)ncclGetLocalPointer(win_, rowOff_ + 4u * i);
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*slot);
      while ((int32_t)(a.load(acq ? cuda::memory_order_acquire : cuda::memory_order_relaxed) - want) < 0) {
      }
    }
    epoch_ = want;
    coop_.sync();
  }
  NCCL_DEVICE_INLINE void sync(Coop c, cuda::memory_order order) {
    arrive(c, order);
    wait(c, order);
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop c, cuda::memory_order order, uint64_t timeoutCycles) {
    arrive(c, order);
    return wait(c, order, timeoutCycles);
  }
};

#endif /* BRAID_DEVICE_LSA_BARRIER_H_ */
