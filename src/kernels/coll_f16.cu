/* coll_f16.cu - the collective kernel for datatype f16 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE f16
#include "kernels/kernel.cuh"
