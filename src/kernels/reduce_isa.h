/*
 * reduce_isa.h - host executor only: reduce.h's loops compiled three times, for the baseline
 * x86-64 ISA (SSE2), for AVX2 and for AVX-512 (F/BW/DQ/VL), and the one the executor calls,
 * chosen once at run time (BRAID_REDUCE_ISA: AUTO picks the widest the CPU has). All are the
 * same C code, element by element the same IEEE operations without contraction (reduce.h's
 * strict region; no FMA, no AVX-512 FP16), so their results are bit-identical
 * (tests/unit/test_reduce.c checks it); only the vector width gcc picks differs. On other
 * architectures every name is the portable loops.
 */
#ifndef BRAID_REDUCE_ISA_H
#define BRAID_REDUCE_ISA_H

#include <stddef.h>

struct braid_redop;

typedef void (*braid_reduce_copy_fn)(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                                     const void* src1, int pre1, int post, size_t n);

void braid_reduce_copy_sse2(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                            const void* src1, int pre1, int post, size_t n);
void braid_reduce_copy_avx2(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                            const void* src1, int pre1, int post, size_t n);
void braid_reduce_copy_avx512(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                              const void* src1, int pre1, int post, size_t n);

/* What the executor calls (kernels/host.c defines BRAID_REDUCE_COPY to it). */
void braid_reduce_copy_host(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                            const void* src1, int pre1, int post, size_t n);

/* The loops for a BRAID_REDUCE_ISA value (0 AUTO, 1 SSE2, 2 AVX2, 3 AVX512) on this CPU; *name_p:
 * "SSE2", "AVX2" or "AVX512"; *downgraded_p: an ISA was asked for that the CPU lacks (the
 * widest it has is used). */
braid_reduce_copy_fn braid_reduce_isa_choose(int mode, const char** name_p, int* downgraded_p);

/* The name of the loops the executor uses ("SSE2", "AVX2", "AVX512"), choosing them if not yet done. */
const char* braid_reduce_isa_name(void);

#endif
