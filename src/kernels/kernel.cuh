/*
 * kernel.cuh - the CUDA kernel every src/kernels/coll_<dtype>.cu instantiates: one block per
 * channel, each block runs its channel's work items in order through braid_run_work (coll.h),
 * the same code the host executor runs. Launching it (streams, graphs, work upload) belongs to
 * the CUDA backend; this file only defines it.
 */
#ifndef BRAID_KERNEL_CUH
#define BRAID_KERNEL_CUH

#include "kernels/coll.h"

/* What a launch passes: everything lives in device-visible memory. */
struct braid_kernel_args {
  struct braid_dev_channel* channels; /* [gridDim.x] */
  struct braid_work* works;           /* channel-major, `stride` items per channel */
  const int* nworks;                  /* [gridDim.x] */
  int stride;
  const volatile uint32_t* abort_flag;
  int* status;                        /* [gridDim.x] out: enum braid_exec_status */
};

#define BRAID_CAT_(a, b) a##b
#define BRAID_CAT(a, b) BRAID_CAT_(a, b)

extern "C" __global__ void BRAID_CAT(braid_kernel_, BRAID_KERNEL_DTYPE)(struct braid_kernel_args args) {
  __shared__ struct braid_prims prims;
  int c = blockIdx.x, status = 0;
  for (int i = 0; i < args.nworks[c] && status == 0; i++)
    status = braid_run_work(&prims, &args.works[c * args.stride + i], &args.channels[c], args.abort_flag);
  if (threadIdx.x == 0) args.status[c] = status;
}

#endif /* BRAID_KERNEL_CUH */
