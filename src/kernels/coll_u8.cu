/* coll_u8.cu - the collective kernel for datatype u8 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE u8
#include "kernels/kernel.cuh"
