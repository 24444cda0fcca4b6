/*
 * braid_device/coop.h - cooperative groups of the NCCL device API (nvcc only; included by
 * nccl_device.h). A "coop" is a set of threads that call a device-API function together:
 * thread_rank() in [0, size()), sync() a barrier among exactly those threads.
 */
#ifndef BRAID_DEVICE_COOP_H_
#define BRAID_DEVICE_COOP_H_

#include <cuda/atomic>

namespace braid_dev {
NCCL_DEVICE_INLINE int lane() {
  return threadIdx.x % 32;
}
NCCL_DEVICE_INLINE uint32_t lanemask_lt() {
  return (1u << lane()) - 1u;
}
constexpr bool is_pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}
}  // namespace braid_dev

/* An aligned power-of-two group of lanes within a warp. */
template <int nThreadsPow2>
struct ncclCoopTile {
  static_assert(braid_dev::is_pow2(nThreadsPow2) && nThreadsPow2 <= 32, "tile: a power of two up to 32");
  NCCL_DEVICE_INLINE int thread_rank() const { return braid_dev::lane() % nThreadsPow2; }
  NCCL_DEVICE_INLINE constexpr int size() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE constexpr int num_threads() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE uint32_t laneMask() const {
    return (0xffffffffu >> (32 - nThreadsPow2)) << (braid_dev::lane() & ~(nThreadsPow2 - 1));
  }
  NCCL_DEVICE_INLINE void sync() {
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
  }
};
typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

/* Any set of lanes of one warp. */
struct ncclCoopLanes {
  uint32_t lmask;
  NCCL_DEVICE_INLINE constexpr ncclCoopLanes(uint32_t m = 0xffffffffu) : lmask(m) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return __popc(lmask & braid_dev::lanemask_lt()); }
  NCCL_DEVICE_INLINE int size() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE int num_threads() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE void sync() { __syncwarp(lmask); }
};

/* nWarps consecutive warps starting at warp0; id picks the named hardware barrier (1 + id). */
struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;
  NCCL_DEVICE_INLINE constexpr ncclCoopWarpSpan(int w0, int n, int i) : warp0(w0), nWarps(n), id(i) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return threadIdx.x - 32 * warp0; }
  NCCL_DEVICE_INLINE int size() const { return 32 * nWarps; }
  NCCL_DEVICE_INLINE int num_threads() const { return 32 * nWarps; }
  NCCL_DEVICE_INLINE void sync() { asm volatile("barrier.sync %0, %1;" ::"r"(1 + id), "r"(32 * nWarps) : "memory"); }
};

/* The whole thread block (1-D). */
struct ncclCoopCta {
  NCCL_DEVICE_INLINE int thread_rank() const { return threadIdx.x; }
  NCCL_DEVICE_INLINE int size() const { return blockDim.x; }
  NCCL_DEVICE_INLINE int num_threads() const { return blockDim.x; }
  NCCL_DEVICE_INLINE void sync() { __syncthreads(); }
};

template <int n>
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopTile<n> c) {
  return c.laneMask();
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopLanes c) {
  return c.lmask;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopWarpSpan) {
  return 0xffffffffu;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopCta) {
  return 0xffffffffu;
}
template <int n>
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopTile<n>) {
  return n == 1;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopLanes) {
  return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarpSpan) {
  return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopCta) {
  return false;
}
template <int n>
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopTile<n>) {
  return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopLanes) {
  return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan) {
  return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopCta) {
  return false;
}
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced() {
  return ncclCoopLanes{__activemask()};
}

/* Broadcast a value (up to 16 bytes) from member `root` to the coop. */
template <typename T, typename Coop>
NCCL_DEVICE_INLINE T ncclCoopBcast(Coop coop, T value, int root, bool entrySync = true) {
  static_assert(sizeof(T) <= 16, "ncclCoopBcast: up to 16 bytes");
  __shared__ ulong2 stash;
  if (entrySync) coop.sync();
  if (coop.thread_rank() == root) *(T*)&stash = value;
  coop.sync();
  T v = *(T*)&stash;
  coop.sync();
  return v;
}

#endif /* BRAID_DEVICE_COOP_H_ */
