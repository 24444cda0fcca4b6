/* coll_f8e5m2.cu - the collective kernel for datatype f8e5m2 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE f8e5m2
#include "kernels/kernel.cuh"
