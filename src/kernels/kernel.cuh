/*
 * kernel.cuh - the collective kernel every src/kernels/coll_<dtype>.cu instantiates, and the
 * argument block a launch passes to it (src/device/launch.c builds it; the fake GPU of
 * src/device/device_fake.c runs the very same block on host threads).
 *
 * One block per channel with work: block b runs its channel's work items in order through
 * braid_run_work (coll.h), the code the host executor runs. The work items travel inside the
 * kernel arguments (by value: a CUDA graph that captured the launch replays exactly them) up
 * to BRAID_KERNEL_INLINE_WORKS; a bigger launch points `works` at a device-visible buffer
 * that launch.c keeps alive until the kernel is done (or, captured, as long as the
 * communicator). Channel state (struct braid_dev_channel and its connections, with their
 * step counters) lives in device memory and persists across launches.
 *
 * The struct and braid_kernel_works() are plain C (shared subset); only the __global__
 * function below needs nvcc.
 */
#ifndef BRAID_KERNEL_CUH
#define BRAID_KERNEL_CUH

#include "kernels/coll.h"

/* Work items carried inline; the whole argument block stays under CUDA's classic 4 KiB
 * kernel-parameter limit (launch.c checks it at compile time). */
#define BRAID_KERNEL_INLINE_WORKS 32
/* Threads per block: the most a launch asks for. The kernel is compiled for at most
 * BRAID_KERNEL_BOUND_THREADS (__launch_bounds__), which is fewer on sm_100: at 512 threads
 * ptxas caps a thread at 128 registers there and the kernel spilled (issue 21,
 * docs/notes/2026-12-01-nvls-device.md); at 384 it gets up to 168 and spills nothing. The
 * launcher reads the compiled bound (cudaFuncGetAttributes' maxThreadsPerBlock) and launches
 * no more (device_cuda.c). */
#define BRAID_KERNEL_MAX_THREADS 512
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define BRAID_KERNEL_BOUND_THREADS 384
#else
#define BRAID_KERNEL_BOUND_THREADS BRAID_KERNEL_MAX_THREADS
#endif

BRAID_STATIC_ASSERT(sizeof(struct braid_work) % 8 == 0, "work items copy as 8-byte words");
BRAID_STATIC_ASSERT(sizeof(struct braid_dev_channel) % 8 == 0, "channels copy as 8-byte words");

struct braid_kernel_args {
  struct braid_dev_channel* channels;  /* device: the communicator's channels, by channel id */
  const struct braid_work* works;      /* device-visible overflow buffer, or NULL: inline_works */
  const volatile uint32_t* abort_flag; /* host-mapped: ncclCommAbort raises it */
  int* status;                         /* host-mapped [nblocks] out: enum braid_exec_status, or
                                          BRAID_KERNEL_STATUS_* while not done */
  int nblocks;
  int nworks;                                /* total over blocks */
  uint8_t block_channel[BRAID_MAX_CHANNELS]; /* channel id block b runs */
  uint32_t block_first[BRAID_MAX_CHANNELS];  /* block b's items: [first, first + n) */
  uint32_t block_nworks[BRAID_MAX_CHANNELS];
  struct braid_work inline_works[BRAID_KERNEL_INLINE_WORKS]; /* used when works == NULL */
};

/* A block's status word before its final braid_exec_status: written by the launch code
 * (queued) and by the block when it starts (running), so the host watchdog can tell a running
 * kernel from one still queued behind other work on its stream (core/watchdog.c). */
#define BRAID_KERNEL_STATUS_QUEUED (-1)
#define BRAID_KERNEL_STATUS_RUNNING (-2)

/* Block b's first work item. */
HD const struct braid_work* braid_kernel_works(const struct braid_kernel_args* a, int b) {
  return (a->works != 0 ? a->works : a->inline_works) + a->block_first[b];
}

/* p2p ops of one round the kernel keeps in shared memory (a round is the ops of a rank with
 * one send peer and one receive peer: usually two; more only with several calls per peer). */
#define BRAID_KERNEL_SMEM_OPS 32

/* Threads of the block copy `bytes` (a multiple of 8) from global or parameter memory. */
HD void braid_kernel_copy(void* dst, const void* src, size_t bytes) {
  uint64_t* d = (uint64_t*)dst;
  const uint64_t* s = (const uint64_t*)src;
  for (size_t i = simt_tid(); i < bytes / 8; i += simt_nthreads()) d[i] = s[i];
}

#if defined(__CUDACC__)
#define BRAID_CAT_(a, b) a##b
#define BRAID_CAT(a, b) BRAID_CAT_(a, b)

/* __grid_constant__: the arguments are read in place from the parameter space. Each work item
 * (inline in the parameters, or in pinned host memory past BRAID_KERNEL_INLINE_WORKS) and the
 * channel are copied into shared memory first, so the loops read them there and not across
 * PCIe; so are the p2p ops of a round (coll.h braid_p2p_round_ops). */
extern "C" __global__ void __launch_bounds__(BRAID_KERNEL_BOUND_THREADS)
    BRAID_CAT(braid_kernel_, BRAID_KERNEL_DTYPE)(const __grid_constant__ struct braid_kernel_args args) {
  __shared__ struct braid_prims prims;
  __shared__ struct braid_work work;
  __shared__ struct braid_dev_channel chan;
  __shared__ struct braid_p2p_op ops[BRAID_KERNEL_SMEM_OPS];
  int status = 0;
  if (threadIdx.x == 0) {
    prims.ops = ops;
    prims.ops_cap = BRAID_KERNEL_SMEM_OPS;
    prims.variant = 0;
    prims.direct = 0;
    args.status[blockIdx.x] = BRAID_KERNEL_STATUS_RUNNING; /* the watchdog's view */
  }
  braid_kernel_copy(&chan, &args.channels[args.block_channel[blockIdx.x]], sizeof(chan));
  /* (the block's items are found again from the parameters each time: nothing but the loop
   * counter stays live across the item, which keeps the kernel free of spills) */
  for (uint32_t i = 0; i < args.block_nworks[blockIdx.x] && status == 0; i++) {
    braid_kernel_copy(&work, braid_kernel_works(&args, blockIdx.x) + i, sizeof(work));
    __syncthreads();
    status = braid_run_work(&prims, &work, &chan, args.abort_flag);
    __syncthreads(); /* the next item rewrites `work` and prims, which slower threads may still read */
  }
  if (threadIdx.x == 0) args.status[blockIdx.x] = status;
}
#endif

#endif /* BRAID_KERNEL_CUH */
