/* coll_u64.cu - the collective kernel for datatype u64 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE u64
#include "kernels/kernel.cuh"
