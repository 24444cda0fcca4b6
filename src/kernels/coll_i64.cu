/* coll_i64.cu - the collective kernel for datatype i64 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE i64
#include "kernels/kernel.cuh"
