/* coll_f32.cu - the collective kernel for datatype f32 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE f32
#include "kernels/kernel.cuh"
