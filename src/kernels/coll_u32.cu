/* coll_u32.cu - the collective kernel for datatype u32 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE u32
#include "kernels/kernel.cuh"
