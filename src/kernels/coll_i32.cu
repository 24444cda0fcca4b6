/* coll_i32.cu - the collective kernel for datatype i32 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE i32
#include "kernels/kernel.cuh"
