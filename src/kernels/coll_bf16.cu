/* coll_bf16.cu - the collective kernel for datatype bf16 (see kernel.cuh). */
#define BRAID_KERNEL_DTYPE bf16
#include "kernels/kernel.cuh"
