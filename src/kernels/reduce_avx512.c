/*
 * reduce_avx512.c - reduce.h's loops compiled for AVX-512 (F, BW, DQ, VL: reduce_isa.h), the
 * same source under a target pragma, 512-bit vectors preferred. No FMA contraction (reduce.h's
 * strict region) and no AVX-512 FP16: half types stay in fp.h's integer code, so nothing may
 * differ from the baseline loops but the vector width.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512")
#endif

#include "kernels/reduce.h"
#include "kernels/reduce_isa.h"

void braid_reduce_copy_avx512(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                              const void* src1, int pre1, int post, size_t n) {
  braid_reduce_copy(op, dst0, dst1, src0, pre0, src1, pre1, post, n);
}
