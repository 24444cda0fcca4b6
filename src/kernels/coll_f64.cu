/* coll_f64.cu - the collective kernel for datatype f64 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE f64
#include "kernels/kernel.cuh"
