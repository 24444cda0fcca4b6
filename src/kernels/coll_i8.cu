/* coll_i8.cu - the collective kernel for datatype i8 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE i8
#include "kernels/kernel.cuh"
