// devapi.cu - kernels written the way nccl-tests and NCCL's device-API examples write them,
// against braid's include/nccl_device.h: compiled for every architecture by tests/cuda/devapi.sh
// (make test), run nowhere yet (a GPU session runs nccl-tests' -D kernels, tests/gpu/run.sh).
#include <cuda_fp16.h>

#include "nccl_device.h"

// nccl-tests' allReduceLsaKernel shape: LSA barrier, loads from every LSA peer, stores to all.
template <typename T>
__global__ void lsaAllReduce(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t count,
                             struct ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm), devComm.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  const int rank = devComm.rank, nRanks = devComm.nRanks;
  const size_t per = count / nRanks, start = rank * per + threadIdx.x + blockIdx.x * blockDim.x;
  for (size_t o = start; o < (rank + 1) * per; o += blockDim.x * gridDim.x) {
    T v = T(0);
    for (int p = 0; p < devComm.lsaSize; p++) v = v + ((T*)ncclGetLsaPointer(sendwin, sendoff, p))[o];
    for (int p = 0; p < devComm.lsaSize; p++) ((T*)ncclGetLsaPointer(recvwin, recvoff, p))[o] = v;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

// Teams, peer pointers, multimem (NULL here), the other coops, timeouts.
__global__ void misc(ncclWindow_t w, struct ncclDevComm devComm, void** out, int* res) {
  ncclTeam world = ncclTeamWorld(devComm), lsa = ncclTeamLsa(devComm), rail = ncclTeamRail(devComm);
  out[0] = ncclGetPeerPointer(w, 0, ncclTeamRankToWorld(devComm, lsa, 0));
  out[1] = ncclGetPeerPointer(w, 0, lsa, 0);
  out[2] = ncclGetLsaMultimemPointer(w, 0, devComm);
  out[3] = ncclGetLocalPointer(w, 16);
  out[4] = ncclGetResourceBufferLocalPointer(devComm, 0);
  res[0] = ncclTeamRankIsMember(lsa, world, devComm.rank) + ncclTeamRankToLsa(devComm, world, devComm.rank) +
           rail.nRanks + ncclTeamInnerFactor(world, 1).nRanks + ncclTeamOuterFactor(world, 1).nRanks;
  ncclLsaBarrierSession<ncclCoopWarp> wb{ncclCoopWarp(), devComm, ncclTeamTagLsa(), threadIdx.x / 32};
  res[1] = (int)wb.sync(ncclCoopWarp(), cuda::memory_order_acq_rel, 1000000);
  ncclCoopTile<8> tile;
  tile.sync();
  res[2] = ncclCoopBcast(ncclCoopCta(), (int)threadIdx.x, 0) + tile.thread_rank() + ncclCoopCoalesced().size();
  ncclBarrierSession<ncclCoopCta> lb{ncclCoopCta(), ncclTeamTagLsa(), devComm, blockIdx.x};
  lb.sync(ncclCoopCta(), cuda::memory_order_acquire);
}

// nccl-tests' GIN kernel shape: compiles; never launched on braid (ginType NONE).
__global__ void ginAllToAll(ncclWindow_t sendwin, ncclWindow_t recvwin, size_t size, struct ncclDevComm devComm) {
  ncclGin gin{devComm, 0};
  uint64_t v = gin.readSignal(blockIdx.x);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  for (int r = threadIdx.x; r < devComm.nRanks; r += blockDim.x)
    gin.put(ncclTeamWorld(devComm), r, recvwin, devComm.rank * size, sendwin, r * size, size,
            ncclGin_SignalInc{blockIdx.x});
  gin.waitSignal(ncclCoopCta(), blockIdx.x, v + devComm.nRanks);
  gin.flush(ncclCoopCta());
  bar.sync(ncclCoopCta(), cuda::memory_order_release, ncclGinFenceLevel::Relaxed);
}

template __global__ void lsaAllReduce<float>(ncclWindow_t, size_t, ncclWindow_t, size_t, size_t, struct ncclDevComm);
template __global__ void lsaAllReduce<half>(ncclWindow_t, size_t, ncclWindow_t, size_t, size_t, struct ncclDevComm);
template __global__ void lsaAllReduce<double>(ncclWindow_t, size_t, ncclWindow_t, size_t, size_t, struct ncclDevComm);

// Host side: the initializers and the host entry points as programs use them.
int devapi_host(ncclComm_t comm, ncclWindow_t win) {
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ncclDevComm devComm;
  reqs.lsaBarrierCount = 4;
  if (ncclCommQueryProperties(comm, &props) != ncclSuccess || !props.deviceApiSupport) return 1;
  if (ncclDevCommCreate(comm, &reqs, &devComm) != ncclSuccess) return 1;
  void* p = nullptr;
  ncclGetLsaDevicePointer(win, 0, 0, &p);
  lsaAllReduce<float><<<4, 512>>>(win, 0, win, 0, 1024, devComm);
  return ncclDevCommDestroy(comm, &devComm) != ncclSuccess || ncclTeamLsa(comm).nRanks < 1;
}
