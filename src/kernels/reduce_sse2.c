/*
 * reduce_sse2.c - reduce.h's loops for the baseline ISA (reduce_isa.h).
 */
#include "kernels/reduce.h"
#include "kernels/reduce_isa.h"

void braid_reduce_copy_sse2(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                            const void* src1, int pre1, int post, size_t n) {
  braid_reduce_copy(op, dst0, dst1, src0, pre0, src1, pre1, post, n);
}
