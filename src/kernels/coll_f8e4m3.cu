/* coll_f8e4m3.cu - the collective kernel for datatype f8e4m3 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE f8e4m3
#include "kernels/kernel.cuh"
