/*
 * simt.h - the one header of the data path that differs between nvcc and gcc (docs/ARCHITECTURE.md 1).
 *
 * Everything above it (fp.h, reduce.h, prims.h, the src/algo headers) is written once in the
 * shared C / CUDA C subset and reaches threads, barriers, fences and FIFO loads/stores only
 * through the names defined here. Under nvcc a "channel worker" is a thread block
 * (tid = threadIdx.x, nthreads = blockDim.x); under gcc (host mode) it is one OS thread
 * (tid 0, nthreads 1).
 *
 * Qualifiers:
 *   HD          small helpers: `__host__ __device__ __forceinline__` under nvcc, so a .cu file can
 *               also call them from host code (scalars, conversions); `static inline` with
 *               always_inline under gcc: in a large translation unit gcc's inliner otherwise gives
 *               up on helpers such as the fp.h conversions, and an element loop that calls a
 *               function is no longer vectorized (measured: half MAX 3x slower).
 *   HD_NOFORCE  large functions (the per-datatype reduction loops, called once per chunk):
 *               `static __host__ __device__ __noinline__` under nvcc. Inlining them into every
 *               primitive that reduces multiplied a kernel's code and compile time by ~3.5
 *               (coll_f16.cu for sm_90: 53 s -> 15 s, 1.7 MB -> 0.6 MB of object) for the price of
 *               one call per chunk. `static inline` under gcc, whose inliner decides.
 *   HD_FP       small entry points that do floating-point arithmetic for callers outside the
 *               BRAID_FP_STRICT region (below): forced inline under nvcc; plain `static inline`
 *               under gcc, which does not inline across differing -ffp-contract modes, so the
 *               function keeps its unfused rounding (always_inline would fuse it in the caller).
 *   HD_STEP     a protocol's step function (prims.h): a call of its own on the device, so that
 *               each protocol gets its own register allocation instead of the kernel's one
 *               function carrying the largest of them (the cost: a call per step); like HD on
 *               the host, where the executor's Simple steps stay inlined.
 * BRAID_DEVICE_COMPILE is 1 while compiling device code (__CUDA_ARCH__), else 0. Function
 * bodies branch on it, never on __CUDACC__, because nvcc compiles HD functions twice.

 */
#ifndef BRAID_SIMT_H
#define BRAID_SIMT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define HD __host__ __device__ __forceinline__
#define HD_NOFORCE static __host__ __device__ __noinline__ __attribute__((unused))
#define HD_FP __host__ __device__ __forceinline__
#define HD_STEP static __host__ __device__ __noinline__ __attribute__((unused))
#elif defined(__GNUC__)
#define HD static inline __attribute__((always_inline))
#define HD_NOFORCE static inline
#define HD_FP static inline
#define HD_STEP static inline __attribute__((always_inline))
#else
#define HD static inline
#define HD_NOFORCE static inline
#define HD_FP static inline
#define HD_STEP static inline
#endif

#if defined(__CUDA_ARCH__)
#define BRAID_DEVICE_COMPILE 1
#else
#define BRAID_DEVICE_COMPILE 0
#include <sched.h>
#include <time.h>
#endif

/* Host: polls that only `pause` before each poll calls sched_yield() (ranks may be more
 * threads than cores). Device (sm_70+): polls before the wait starts sleeping BRAID_SPIN_SLEEP_NS
 * per poll, which keeps a long wait (a peer not started yet) from hammering the memory system
 * while leaving the latency of ordinary short waits untouched. */
#ifndef BRAID_SPIN_BEFORE_YIELD
#define BRAID_SPIN_BEFORE_YIELD 32
#endif
#ifndef BRAID_SPIN_BEFORE_SLEEP
#define BRAID_SPIN_BEFORE_SLEEP 10000
#endif
#ifndef BRAID_SPIN_SLEEP_NS
#define BRAID_SPIN_SLEEP_NS 100
#endif
/* Host: yielding polls before a wait without progress starts sleeping (BRAID_SPIN_SLEEP_AFTER:
 * ~0.1 s of sched_yield on an idle core), then the sleep per poll: it doubles from
 * BRAID_HOST_SLEEP_MIN_NS up to BRAID_HOST_SLEEP_MAX_NS every BRAID_HOST_SLEEP_STEP polls, so
 * a rank stuck on a peer that never comes costs almost no CPU, and an ordinary wait (well
 * under the threshold) none of the latency. */
#ifndef BRAID_SPIN_BEFORE_HOST_SLEEP
#define BRAID_SPIN_BEFORE_HOST_SLEEP 200000
#endif
#define BRAID_HOST_SLEEP_MIN_NS 10000
#define BRAID_HOST_SLEEP_MAX_NS 1000000
#define BRAID_HOST_SLEEP_STEP 64

/* Floating-point code between BRAID_FP_STRICT_BEGIN and _END is never contracted into FMAs
 * by gcc (GNU C dialects default to -ffp-contract=fast, which fuses a*b+c wherever the target
 * has FMA: -march=native, aarch64), so the host rounds exactly like the device code, where
 * fp.h uses __fmul_rn and friends. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define BRAID_FP_STRICT_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define BRAID_FP_STRICT_END _Pragma("GCC pop_options")
#else
#define BRAID_FP_STRICT_BEGIN
#define BRAID_FP_STRICT_END
#endif

/* A compile-time check in either language. */
#if defined(__cplusplus)
#define BRAID_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define BRAID_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* restrict for the shared subset (C99 keyword; a compiler extension in CUDA C++). */
#if defined(__CUDACC__) || defined(__cplusplus)
#define BRAID_RESTRICT __restrict__
#else
#define BRAID_RESTRICT restrict
#endif

/* Loop unrolling hint for a loop with a small constant trip count (the data path's per-thread
 * blocks). Both compilers unroll such loops at -O2 anyway; the hint makes it certain. */
#if defined(BRAID_UNROLL)
/* given by the build */
#elif defined(__CUDA_ARCH__)
#define BRAID_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__) /* host pass of a .cu: the host compiler would not know the pragma */
#define BRAID_UNROLL
#elif defined(__GNUC__) && !defined(__clang__)
#define BRAID_UNROLL _Pragma("GCC unroll 32")
#elif defined(__clang__)
#define BRAID_UNROLL _Pragma("unroll")
#else
#define BRAID_UNROLL
#endif

/* ---- threads of a channel worker ---- */

HD int simt_tid(void) {
#if BRAID_DEVICE_COMPILE
  return (int)threadIdx.x;
#else
  return 0;
#endif
}

HD int simt_nthreads(void) {
#if BRAID_DEVICE_COMPILE
  return (int)blockDim.x;
#else
  return 1;
#endif
}

/* Barrier among the threads of one worker; nothing to do for a single host thread. */
HD void simt_bar_sync(void) {
#if BRAID_DEVICE_COMPILE
  __syncthreads();
#endif
}

/* Barrier that also tells every thread whether any thread passed a non-zero `pred`. This is how
 * the threads of a block agree on a decision (a failed wait, a ready connection) without a
 * shared variable that a thread could still be reading when another rewrites it. */
HD int simt_bar_or(int pred) {
#if BRAID_DEVICE_COMPILE
  return __syncthreads_or(pred);
#else
  return pred != 0;
#endif
}

/* The same within one warp (every lane of the warp calls it): LL128's lanes of one line. */
HD int simt_warp_any(int pred) {
#if BRAID_DEVICE_COMPILE
  return __any_sync(0xffffffffu, pred);
#else
  return pred != 0;
#endif
}

/* Orders the memory accesses of the lanes of a warp (and reconverges them). */
HD void simt_warp_sync(void) {
#if BRAID_DEVICE_COMPILE
  __syncwarp();
#endif
}

/* ---- fences: order this worker's data stores before a flag store (release) and a flag load
 * before the data loads that follow it (acquire), as seen by other GPUs, the host and NICs. */

/* Device: fence.acq_rel.sys, the lightest fence that orders earlier stores before later ones
 * for every observer (__threadfence_system is the stronger fence.sc.sys). */
HD void simt_fence_release(void) {
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __threadfence_system();
#endif
#else
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

HD void simt_fence_acquire(void) {
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __threadfence_system();
#endif
#else
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

/* ---- FIFO counters and flags (8-byte aligned, in global or host-mapped memory) ---- */

HD uint64_t simt_ld_acquire_u64(const volatile uint64_t* p) {
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 700
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  uint64_t v = *p;
  __threadfence_system();
  return v;
#endif
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

HD void simt_st_release_u64(volatile uint64_t* p, uint64_t v) {
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 700
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __threadfence_system();
  *p = v;
#endif
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* Relaxed: atomic for 8 bytes, no ordering of other accesses. */
HD uint64_t simt_ld_volatile_u64(const volatile uint64_t* p) {
#if BRAID_DEVICE_COMPILE
  return *p;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

HD void simt_st_volatile_u64(volatile uint64_t* p, uint64_t v) {
#if BRAID_DEVICE_COMPILE
  *p = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/* 16-byte LL line (16-byte aligned). Device: one v2.u64 access. Host: two relaxed 8-byte
 * accesses, which is all LL needs since each 8-byte half carries its own flag. */
HD void simt_ld_volatile_u64x2(const volatile uint64_t* p, uint64_t* lo, uint64_t* hi) {
#if BRAID_DEVICE_COMPILE
  uint64_t a, b;
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
  *lo = a;
  *hi = b;
#else
  *lo = __atomic_load_n(p, __ATOMIC_RELAXED);
  *hi = __atomic_load_n(p + 1, __ATOMIC_RELAXED);
#endif
}

HD void simt_st_volatile_u64x2(volatile uint64_t* p, uint64_t lo, uint64_t hi) {
#if BRAID_DEVICE_COMPILE
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
#else
  __atomic_store_n(p, lo, __ATOMIC_RELAXED);
  __atomic_store_n(p + 1, hi, __ATOMIC_RELAXED);
#endif
}

/* Weak 16-byte accesses of ordinary global memory (16-byte aligned): user buffers, and FIFO
 * slots read after an acquire of their counter or written before a release. One 128-bit access
 * on the device; on the host the compiler picks (memcpy of 16 bytes). */
HD void simt_ld_v16(const void* p, uint64_t* w) {
#if BRAID_DEVICE_COMPILE
  const ulonglong2 v = *(const ulonglong2*)p;
  w[0] = v.x;
  w[1] = v.y;
#else
  __builtin_memcpy(w, p, 16);
#endif
}

HD void simt_st_v16(void* p, const uint64_t* w) {
#if BRAID_DEVICE_COMPILE
  ulonglong2 v;
  v.x = w[0];
  v.y = w[1];
  *(ulonglong2*)p = v;
#else
  __builtin_memcpy(p, w, 16);
#endif
}

/* ---- waiting ---- */

#if !BRAID_DEVICE_COMPILE
/* Host: polls that only `pause` before a wait starts yielding (BRAID_SPIN_COUNT, set by the
 * host executor; BRAID_SPIN_BEFORE_YIELD until then). Few: a rank waits for a peer that may
 * share its core, and every pause is ~40 ns. */
extern int braid_spin_before_yield;
/* Host: polls after which a wait sleeps between polls (BRAID_SPIN_SLEEP_AFTER; 0: never). */
extern int braid_spin_before_sleep;
#endif

/* Call once per iteration of every wait loop, with a counter the loop set to 0 when it started
 * waiting; the caller spaces out its abort checks with it (braid_spin_check in prims.h: every
 * 256 polls). The counter never wraps to 0, where the waits would start over without sleeping
 * or yielding, nor sticks at UINT32_MAX, whose low byte 255 would end the abort checks after
 * 2^32 polls (about an hour of a wait): it goes from UINT32_MAX back to BRAID_SPIN_WRAP, past
 * every threshold and with a low byte of 0. */
#define BRAID_SPIN_WRAP 0x80000000u
HD void simt_spin_pause(uint32_t* spins) {
  uint32_t n = *spins;
  *spins = n == UINT32_MAX ? BRAID_SPIN_WRAP : n + 1;
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 700
  if (n >= BRAID_SPIN_BEFORE_SLEEP) __nanosleep(BRAID_SPIN_SLEEP_NS);
#endif
#else
  if (n < (uint32_t)braid_spin_before_yield) {
#if defined(__x86_64__) || defined(__i386__)
#if defined(__CUDACC__)
    __asm__ __volatile__("pause");
#else
    __builtin_ia32_pause();
#endif
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
  } else if (braid_spin_before_sleep <= 0 ||
             n < (uint32_t)braid_spin_before_yield + (uint32_t)braid_spin_before_sleep) {
    sched_yield();
  } else { /* no progress for a long while: back off to sleeping waits */
    uint32_t k = (n - (uint32_t)braid_spin_before_yield - (uint32_t)braid_spin_before_sleep) / BRAID_HOST_SLEEP_STEP;
    long ns = BRAID_HOST_SLEEP_MIN_NS << (k < 7 ? k : 7);
    struct timespec ts = {0, ns < BRAID_HOST_SLEEP_MAX_NS ? ns : BRAID_HOST_SLEEP_MAX_NS};
    nanosleep(&ts, NULL);
  }
#endif
}

#endif /* BRAID_SIMT_H */
