/*
 * reduce_avx2.c - reduce.h's loops compiled for AVX2 (reduce_isa.h): the same source under a
 * target pragma, so every function of reduce.h in this file is an AVX2 function. "avx2" only:
 * with "fma" too gcc could not contract anyway (reduce.h's strict region), but nothing here
 * should differ from the baseline loops but the vector width.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2")
#endif

#include "kernels/reduce.h"
#include "kernels/reduce_isa.h"

void braid_reduce_copy_avx2(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                            const void* src1, int pre1, int post, size_t n) {
  braid_reduce_copy(op, dst0, dst1, src0, pre0, src1, pre1, post, n);
}
