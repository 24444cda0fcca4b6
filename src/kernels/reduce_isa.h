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
#include <stdint.h>

#ifdef __cplusplus /* direct.h's host-only part also reaches nvcc's host pass */
extern "C" {
#endif

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

/* Streaming stores (reduce_stream.c). The executor opens a window over a call's output when
 * it is at least braid_reduce_stream_threshold() bytes (BRAID_STREAM_BYTES; 0: never) and
 * closes it after the call; braid_reduce_copy_host streams into it. Per thread. */
int64_t braid_reduce_stream_threshold(void);
void braid_reduce_stream_reset(void); /* tests: read BRAID_STREAM_BYTES again */
void braid_reduce_stream_open(void* out, size_t bytes, int esize);
void braid_reduce_stream_close(void);
/* 1: this thread's next reductions write through the cache even inside the window (an output
 * the peer reads next); 0: the window applies again. */
void braid_reduce_stream_hold(int on);
/* The element size when dst0 (n elements of op's type) is in this thread's window, else 0. */
int braid_reduce_stream_take(const struct braid_redop* op, const void* dst0, size_t n);
/* fn's result computed block by block in L1 and written to dst0 with non-temporal stores
 * (dst1, if any, gets ordinary stores); bit-identical to fn itself. */
void braid_reduce_copy_streamed(braid_reduce_copy_fn fn, int esize, const struct braid_redop* op, void* dst0,
                                void* dst1, const void* src0, int pre0, const void* src1, int pre1, int post, size_t n);

#ifdef __cplusplus
}
#endif

#endif
