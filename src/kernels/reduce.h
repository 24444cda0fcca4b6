/*
 * reduce.h - the reduction operators of the data path: every datatype of BRAID_DTYPES x every
 * kind of BRAID_REDKINDS (axes.h), written once in the shared C / CUDA C subset. nvcc compiles
 * it into the kernels, gcc into the host executor; both produce the same bits.
 *
 * The primitives call braid_reduce_copy (or the per-datatype braid_reduce_copy_<short>) on
 * whole chunks, with every thread of the worker passing the same arguments, and
 * braid_reduce_pack64 on 8-byte words a thread holds in registers (LL/LL128 lines).
 *
 * Semantics (NCCL's):
 * - Integers: SUM, PROD and PREMULSUM wrap (computed in the unsigned type of the same width);
 *   MIN/MAX compare signed or unsigned as the type says; SUMPOSTDIV divides, truncating
 *   toward zero. PREMULSUM multiplies in the integer type.
 * - float/double: computed in the type, each operation rounded once (products are never fused
 *   with the following add, see fp.h). half/bf16/fp8: widened to float, one operation in
 *   float, rounded once to the storage type (fp.h: RNE, fp8 saturating). Because float carries
 *   more than 2p+2 bits of these formats, SUM/PROD/MAX/MIN give the correctly rounded result;
 *   PREMULSUM and SUMPOSTDIV round after each float operation, then to the storage type.
 * - MAX/MIN on floating types ignore a NaN operand like fmax/fmin (NaN only when both are NaN;
 *   which NaN payload is unspecified) and order -0 below +0, so both are commutative.
 * - SUMPOSTDIV on floating types divides by the divisor converted to the compute type.
 * - A plain copy (no pre/post operation applies) copies the stored bits unchanged.
 * - A `kind` or `dtype` outside the lists writes nothing; the host never builds one.
 */
#ifndef BRAID_REDUCE_H
#define BRAID_REDUCE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/axes.h"
#include "kernels/fp.h"
#include "kernels/simt.h"

BRAID_FP_STRICT_BEGIN

/* What the data path computes, decided on the host per call. */
struct braid_redop {
  uint8_t kind;       /* enum braid_redkind */
  uint8_t dtype;      /* ncclDataType_t value */
  uint8_t scalar_dev; /* PREMULSUM with a ncclScalarDevice scalar: `scalar` is its device address,
                         read by the executor when the work item starts (coll.h); reduce.h only
                         ever sees the value */
  uint64_t scalar;    /* PREMULSUM: the multiplier's bits in the dtype's own format (zero-extended);
                         SUMPOSTDIV: the divisor (nranks) as an integer (0 is taken as 1); else 0 */
};

/* ---- element helpers, one set per datatype family ----
 * C is the compute type, D the divisor type. ld/st convert between storage and compute. */

/* MAX/MIN of floating values: NaN-ignoring, +0 > -0. Equal values have equal bits except for
 * the two zeros, so AND (max) / OR (min) of the bits picks +0 / -0 and is the value otherwise. */
HD float braid_red_fmax_f32(float x, float y) {
  float r = x > y ? x : y;
  if (x == y) r = braid_fp_f32_from_bits(braid_fp_f32_bits(x) & braid_fp_f32_bits(y));
  return y != y ? x : r;
}
HD float braid_red_fmin_f32(float x, float y) {
  float r = x < y ? x : y;
  if (x == y) r = braid_fp_f32_from_bits(braid_fp_f32_bits(x) | braid_fp_f32_bits(y));
  return y != y ? x : r;
}
HD double braid_red_fmax_f64(double x, double y) {
  double r = x > y ? x : y;
  if (x == y) r = braid_fp_f64_from_bits(braid_fp_f64_bits(x) & braid_fp_f64_bits(y));
  return y != y ? x : r;
}
HD double braid_red_fmin_f64(double x, double y) {
  double r = x < y ? x : y;
  if (x == y) r = braid_fp_f64_from_bits(braid_fp_f64_bits(x) | braid_fp_f64_bits(y));
  return y != y ? x : r;
}

/* Integers: T storage = compute, UT the unsigned type of the width, W the division type. */
#define BRAID_RED_INT(sh, T, UT, W, WMAX)                                    \
  HD T braid_red_ld_##sh(T v) {                                              \
    return v;                                                                \
  }                                                                          \
  HD T braid_red_st_##sh(T v) {                                              \
    return v;                                                                \
  }                                                                          \
  HD T braid_red_add_##sh(T x, T y) {                                        \
    return (T)(UT)((UT)x + (UT)y);                                           \
  }                                                                          \
  HD T braid_red_mul_##sh(T x, T y) {                                        \
    return (T)(UT)((UT)x * (UT)y);                                           \
  }                                                                          \
  HD T braid_red_max_##sh(T x, T y) {                                        \
    return x > y ? x : y;                                                    \
  }                                                                          \
  HD T braid_red_min_##sh(T x, T y) {                                        \
    return x < y ? x : y;                                                    \
  }                                                                          \
  HD T braid_red_scalar_##sh(uint64_t bits) {                                \
    return (T)(UT)bits;                                                      \
  }                                                                          \
  HD W braid_red_divisor_##sh(uint64_t bits) {                               \
    return bits == 0 ? (W)1 : bits > (uint64_t)(WMAX) ? (W)(WMAX) : (W)bits; \
  }                                                                          \
  HD T braid_red_div_##sh(T x, W d) {                                        \
    return (T)((W)x / d);                                                    \
  }

/* float / double: computed in the type itself. */
#define BRAID_RED_FLT(sh, T, UB)                \
  HD T braid_red_ld_##sh(T v) {                 \
    return v;                                   \
  }                                             \
  HD T braid_red_st_##sh(T v) {                 \
    return v;                                   \
  }                                             \
  HD T braid_red_add_##sh(T x, T y) {           \
    return x + y;                               \
  }                                             \
  HD T braid_red_mul_##sh(T x, T y) {           \
    return braid_fp_mul_##sh(x, y);             \
  }                                             \
  HD T braid_red_max_##sh(T x, T y) {           \
    return braid_red_fmax_##sh(x, y);           \
  }                                             \
  HD T braid_red_min_##sh(T x, T y) {           \
    return braid_red_fmin_##sh(x, y);           \
  }                                             \
  HD T braid_red_scalar_##sh(uint64_t bits) {   \
    return braid_fp_##sh##_from_bits((UB)bits); \
  }                                             \
  HD T braid_red_divisor_##sh(uint64_t bits) {  \
    return bits == 0 ? (T)1 : (T)bits;          \
  }                                             \
  HD T braid_red_div_##sh(T x, T d) {           \
    return braid_fp_div_##sh(x, d);             \
  }

/* half / bf16 / fp8: stored narrow, computed in float. */
#define BRAID_RED_NARROW(sh, T)                    \
  HD float braid_red_ld_##sh(T v) {                \
    return braid_fp_##sh##_to_f32(v);              \
  }                                                \
  HD T braid_red_st_##sh(float v) {                \
    return braid_fp_f32_to_##sh(v);                \
  }                                                \
  HD float braid_red_add_##sh(float x, float y) {  \
    return x + y;                                  \
  }                                                \
  HD float braid_red_mul_##sh(float x, float y) {  \
    return braid_fp_mul_f32(x, y);                 \
  }                                                \
  HD float braid_red_max_##sh(float x, float y) {  \
    return braid_red_fmax_f32(x, y);               \
  }                                                \
  HD float braid_red_min_##sh(float x, float y) {  \
    return braid_red_fmin_f32(x, y);               \
  }                                                \
  HD float braid_red_scalar_##sh(uint64_t bits) {  \
    return braid_fp_##sh##_to_f32((T)bits);        \
  }                                                \
  HD float braid_red_divisor_##sh(uint64_t bits) { \
    return bits == 0 ? 1.0f : (float)bits;         \
  }                                                \
  HD float braid_red_div_##sh(float x, float d) {  \
    return braid_fp_div_f32(x, d);                 \
  }

/* ---- element expressions (x, y compute values; s0, s1, dv locals of the caller) ---- */
#define BRAID_RE_ADD(sh, x, y) braid_red_add_##sh(x, y)
#define BRAID_RE_MUL(sh, x, y) braid_red_mul_##sh(x, y)
#define BRAID_RE_MAX(sh, x, y) braid_red_max_##sh(x, y)
#define BRAID_RE_MIN(sh, x, y) braid_red_min_##sh(x, y)
#define BRAID_RE_PMS(sh, x, y) braid_red_add_##sh(braid_red_mul_##sh(x, s0), braid_red_mul_##sh(y, s1))
#define BRAID_RE_ADDDIV(sh, x, y) braid_red_div_##sh(braid_red_add_##sh(x, y), dv)
/* one source, storage value in and out; RAW copies the stored bits (an e5m2 inf stays inf) */
#define BRAID_RE_MUL1(sh, v) braid_red_st_##sh(braid_red_mul_##sh(braid_red_ld_##sh(v), s0))
#define BRAID_RE_DIV1(sh, v) braid_red_st_##sh(braid_red_div_##sh(braid_red_ld_##sh(v), dv))
#define BRAID_RE_RAW(sh, v) (v)

/*
 * The element loops. Thread t0 of nt handles i = t0 + k*nt, k < cnt. Each kernel comes in
 * three pointer layouts, picked per call from pointer equality (partial overlap is excluded
 * by contract):
 *   _d  all pointers distinct: the destinations are restrict, which tells both compilers that
 *       no store feeds a later load. On the host (nt == 1) the first cnt & ~15 iterations run
 *       as blocks of 16, a loop gcc vectorizes even at -O2 (its "very cheap" cost model refuses
 *       loops that need alias checks or a scalar epilogue); nvcc may batch the loads of
 *       several iterations. Sources are never restrict: nvcc may read a const restrict
 *       pointer through the non-coherent cache, and a source can be a FIFO slot a peer
 *       rewrites while the kernel runs.
 *   _ip dst0 == src0 (in place), the rest distinct: the same, dst0 is read and written.
 *   _g  anything else: no restrict; each element is read completely before it is written, so
 *       every exact aliasing is right.
 * The `if (d1 == NULL)` sits outside the loops, so the common one-destination case has a plain
 * loop body.
 */
#define BRAID_RED_STRIDED(BODY)                                                             \
  do {                                                                                      \
    const size_t cnt_ = n > t0 ? (n - t0 + nt - 1) / nt : 0;                                \
    size_t k_ = 0;                                                                          \
    if (!BRAID_DEVICE_COMPILE && nt == 1) { /* host: unit stride, whether inlined or not */ \
      for (; k_ + 16 <= cnt_; k_ += 16) {                                                   \
        for (size_t u_ = 0; u_ < 16; u_++) {                                                \
          const size_t i = t0 + k_ + u_;                                                    \
          BODY;                                                                             \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
    for (; k_ < cnt_; k_++) {                                                               \
      const size_t i = t0 + k_ * nt;                                                        \
      BODY;                                                                                 \
    }                                                                                       \
  } while (0)

/* One element: two sources (A is a or d0) or one source, with ld/st conversions. */
#define BRAID_RB2(sh, OP, A) braid_red_st_##sh(BRAID_RE_##OP(sh, braid_red_ld_##sh(A[i]), braid_red_ld_##sh(b[i])))
#define BRAID_RB1(sh, OP, A) BRAID_RE_##OP(sh, A[i])
#define BRAID_RED_ONE_OR_TWO(T, VAL)                               \
  do {                                                             \
    if (d1 == NULL) {                                              \
      BRAID_RED_STRIDED(d0[i] = VAL);                              \
    } else {                                                       \
      BRAID_RED_STRIDED(const T r_ = VAL; d0[i] = r_; d1[i] = r_); \
    }                                                              \
  } while (0)

#define BRAID_RED_ARGS(C, D) size_t n, size_t t0, size_t nt, C s0, C s1, D dv
#define BRAID_RED_USE3 ((void)s0, (void)s1, (void)dv) /* each kernel uses some of them */
#define BRAID_RED_KERNEL2(sh, T, C, D, OP)                                                                         \
  HD void braid_red_d_##OP##_##sh(T* BRAID_RESTRICT d0, T* BRAID_RESTRICT d1, const T* a, const T* b,              \
                                  BRAID_RED_ARGS(C, D)) {                                                          \
    BRAID_RED_USE3;                                                                                                \
    BRAID_RED_ONE_OR_TWO(T, BRAID_RB2(sh, OP, a));                                                                 \
  }                                                                                                                \
  HD void braid_red_ip_##OP##_##sh(T* BRAID_RESTRICT d0, T* BRAID_RESTRICT d1, const T* b, BRAID_RED_ARGS(C, D)) { \
    BRAID_RED_USE3;                                                                                                \
    BRAID_RED_ONE_OR_TWO(T, BRAID_RB2(sh, OP, d0));                                                                \
  }                                                                                                                \
  HD void braid_red_g_##OP##_##sh(T* d0, T* d1, const T* a, const T* b, BRAID_RED_ARGS(C, D)) {                    \
    BRAID_RED_USE3;                                                                                                \
    BRAID_RED_STRIDED(const T r_ = BRAID_RB2(sh, OP, a); d0[i] = r_; if (d1) d1[i] = r_);                          \
  }
#define BRAID_RED_KERNEL1(sh, T, C, D, OP)                                                                        \
  HD void braid_red_d_##OP##_##sh(T* BRAID_RESTRICT d0, T* BRAID_RESTRICT d1, const T* a, BRAID_RED_ARGS(C, D)) { \
    BRAID_RED_USE3;                                                                                               \
    BRAID_RED_ONE_OR_TWO(T, BRAID_RB1(sh, OP, a));                                                                \
  }                                                                                                               \
  HD void braid_red_g_##OP##_##sh(T* d0, T* d1, const T* a, BRAID_RED_ARGS(C, D)) {                               \
    BRAID_RED_USE3;                                                                                               \
    BRAID_RED_STRIDED(const T r_ = BRAID_RB1(sh, OP, a); d0[i] = r_; if (d1) d1[i] = r_);                         \
  }
/*
 * Packs: the loops of a multi-thread worker (a GPU block; nt > 1). The elements go in 16-byte
 * packs, one 128-bit load per source and one 128-bit store per destination; thread t0 of nt
 * takes packs t0, t0 + nt, ..., BRAID_RED_PACKS_IN_FLIGHT(T) of them per iteration, whose
 * loads are all issued before the first store: several loads in flight per thread, and exact
 * aliasing (a destination equal to a source) stays right since each pack is read whole before
 * it is written. Every pointer is 16-byte aligned here; BRAID_RED_SPLIT runs the elements
 * before the first and after the last pack through the element loops (_g).
 * Fewer packs in flight for the narrow types, whose 8 or 16 elements a pack each convert to
 * float and back: more would not fit the 128 registers of a 512-thread block. Plain copies of
 * any type move 4 packs at a time (braid_red_copy_packs).
 */
/* Whether copying one operand (no second one) changes it: PreMulSum's pre-op on an input
 * (`pre`), or Avg's division where the value becomes final (`post`). */
HD int braid_red_copy_changes(const struct braid_redop* op, int pre, int post) {
  return (pre && op->kind == BRAID_RED_PREMULSUM) || (post && op->kind == BRAID_RED_SUMPOSTDIV);
}

HD void braid_red_copy_packs(void* dst0, void* dst1, const void* src, size_t np, size_t t0, size_t nt) {
  char* d0 = (char*)dst0;
  char* d1 = (char*)dst1;
  const char* a = (const char*)src;
  size_t k = t0;
  for (; k + 3 * nt < np; k += 4 * nt) {
    uint64_t w[4][2];
    BRAID_UNROLL for (int u = 0; u < 4; u++) simt_ld_v16(a + (k + u * nt) * 16, w[u]);
    BRAID_UNROLL for (int u = 0; u < 4; u++) {
      simt_st_v16(d0 + (k + u * nt) * 16, w[u]);
      if (d1 != NULL) simt_st_v16(d1 + (k + u * nt) * 16, w[u]);
    }
  }
  for (; k < np; k += nt) {
    uint64_t w[2];
    simt_ld_v16(a + k * 16, w);
    simt_st_v16(d0 + k * 16, w);
    if (d1 != NULL) simt_st_v16(d1 + k * 16, w);
  }
}
#define BRAID_RED_PACK_ELEMS(T) (16 / (int)sizeof(T))
#define BRAID_RED_PACKS_IN_FLIGHT(T) (sizeof(T) == 1 ? 1 : sizeof(T) == 2 ? 2 : 4)
/* One pack of packs w (2 words each): x[e] = VAL over its elements, VAL reading xa[e] (and xb[e]). */
#define BRAID_RED_PACK_APPLY(T, wa, wb, VAL)                                    \
  do {                                                                          \
    T xa[BRAID_RED_PACK_ELEMS(T)], xb[BRAID_RED_PACK_ELEMS(T)];                 \
    memcpy(xa, wa, 16);                                                         \
    memcpy(xb, wb, 16);                                                         \
    (void)xb;                                                                   \
    BRAID_UNROLL for (int e = 0; e < BRAID_RED_PACK_ELEMS(T); e++) xa[e] = VAL; \
    memcpy(wa, xa, 16);                                                         \
  } while (0)
#define BRAID_RED_PACK_LOOP(T, NSRC, VAL)                                     \
  do {                                                                        \
    enum { P_ = BRAID_RED_PACK_ELEMS(T), U_ = BRAID_RED_PACKS_IN_FLIGHT(T) }; \
    size_t k_ = t0;                                                           \
    for (; k_ + (U_ - 1) * nt < np; k_ += U_ * nt) {                          \
      uint64_t wa_[U_][2], wb_[U_][2];                                        \
      BRAID_UNROLL for (int u_ = 0; u_ < U_; u_++) {                          \
        simt_ld_v16(a + (k_ + u_ * nt) * P_, wa_[u_]);                        \
        if (NSRC == 2) simt_ld_v16(b + (k_ + u_ * nt) * P_, wb_[u_]);         \
      }                                                                       \
      BRAID_UNROLL for (int u_ = 0; u_ < U_; u_++) {                          \
        BRAID_RED_PACK_APPLY(T, wa_[u_], NSRC == 2 ? wb_[u_] : wa_[u_], VAL); \
        simt_st_v16(d0 + (k_ + u_ * nt) * P_, wa_[u_]);                       \
        if (d1 != NULL) simt_st_v16(d1 + (k_ + u_ * nt) * P_, wa_[u_]);       \
      }                                                                       \
    }                                                                         \
    for (; k_ < np; k_ += nt) {                                               \
      uint64_t wa_[2], wb_[2];                                                \
      simt_ld_v16(a + k_ * P_, wa_);                                          \
      if (NSRC == 2) simt_ld_v16(b + k_ * P_, wb_);                           \
      BRAID_RED_PACK_APPLY(T, wa_, NSRC == 2 ? wb_ : wa_, VAL);               \
      simt_st_v16(d0 + k_ * P_, wa_);                                         \
      if (d1 != NULL) simt_st_v16(d1 + k_ * P_, wa_);                         \
    }                                                                         \
  } while (0)
#define BRAID_RED_VEC2(sh, T, C, D, OP)                                                                              \
  HD void braid_red_v_##OP##_##sh(T* d0, T* d1, const T* a, const T* b, size_t np, size_t t0, size_t nt, C s0, C s1, \
                                  D dv) {                                                                            \
    BRAID_RED_USE3;                                                                                                  \
    BRAID_RED_PACK_LOOP(T, 2,                                                                                        \
                        braid_red_st_##sh(BRAID_RE_##OP(sh, braid_red_ld_##sh(xa[e]), braid_red_ld_##sh(xb[e]))));   \
  }
#define BRAID_RED_VEC1(sh, T, C, D, OP)                                                                          \
  HD void braid_red_v_##OP##_##sh(T* d0, T* d1, const T* a, size_t np, size_t t0, size_t nt, C s0, C s1, D dv) { \
    const T* b = a;                                                                                              \
    (void)b;                                                                                                     \
    BRAID_RED_USE3;                                                                                              \
    if (BRAID_IS_RAW_##OP)                                                                                       \
      braid_red_copy_packs(d0, d1, a, np, t0, nt);                                                               \
    else                                                                                                         \
      BRAID_RED_PACK_LOOP(T, 1, BRAID_RE_##OP(sh, xa[e]));                                                       \
  }
#define BRAID_IS_RAW_RAW 1
#define BRAID_IS_RAW_MUL1 0
#define BRAID_IS_RAW_DIV1 0

#define BRAID_RED_KERNELS(sh, T, C, D)   \
  BRAID_RED_KERNEL2(sh, T, C, D, ADD)    \
  BRAID_RED_KERNEL2(sh, T, C, D, MUL)    \
  BRAID_RED_KERNEL2(sh, T, C, D, MAX)    \
  BRAID_RED_KERNEL2(sh, T, C, D, MIN)    \
  BRAID_RED_KERNEL2(sh, T, C, D, PMS)    \
  BRAID_RED_KERNEL2(sh, T, C, D, ADDDIV) \
  BRAID_RED_KERNEL1(sh, T, C, D, MUL1)   \
  BRAID_RED_KERNEL1(sh, T, C, D, DIV1)   \
  BRAID_RED_KERNEL1(sh, T, C, D, RAW)    \
  BRAID_RED_VEC2(sh, T, C, D, ADD)       \
  BRAID_RED_VEC2(sh, T, C, D, MUL)       \
  BRAID_RED_VEC2(sh, T, C, D, MAX)       \
  BRAID_RED_VEC2(sh, T, C, D, MIN)       \
  BRAID_RED_VEC2(sh, T, C, D, PMS)       \
  BRAID_RED_VEC2(sh, T, C, D, ADDDIV)    \
  BRAID_RED_VEC1(sh, T, C, D, MUL1)      \
  BRAID_RED_VEC1(sh, T, C, D, DIV1)      \
  BRAID_RED_VEC1(sh, T, C, D, RAW)

/* A multi-thread worker (always on the device): packs where every pointer has the same
 * offset within 16 bytes (the common case: chunks are 16-byte multiples), the element loop
 * for the head before the first whole pack, for the tail, and for everything when the offsets
 * differ. h_: head elements, np_: packs, o_: where the tail starts. */
#define BRAID_RED_SPLIT(T, B)                                                                            \
  const uintptr_t m_ = (uintptr_t)d0 & 15;                                                               \
  size_t h_ = 0, np_ = 0;                                                                                \
  if (((uintptr_t)a & 15) == m_ && ((uintptr_t)(B)&15) == m_ && ((uintptr_t)d1 & 15) == (d1 ? m_ : 0) && \
      m_ % sizeof(T) == 0) {                                                                             \
    h_ = m_ ? (16 - m_) / sizeof(T) : 0;                                                                 \
    if (h_ > n) h_ = n;                                                                                  \
    np_ = (n - h_) / BRAID_RED_PACK_ELEMS(T);                                                            \
  }                                                                                                      \
  const size_t o_ = h_ + np_ * BRAID_RED_PACK_ELEMS(T)
#define BRAID_RED_AT(p, off) ((p) != NULL ? (p) + (off) : NULL)

/* Run kernel OP in the layout the pointers allow. */
#define BRAID_RED_RUN2(sh, T, OP)                                                                         \
  do {                                                                                                    \
    if (BRAID_DEVICE_COMPILE || nt > 1) {                                                                 \
      BRAID_RED_SPLIT(T, b);                                                                              \
      braid_red_g_##OP##_##sh(d0, d1, a, b, h_, t0, nt, s0, s1, dv);                                      \
      braid_red_v_##OP##_##sh(d0 + h_, BRAID_RED_AT(d1, h_), a + h_, b + h_, np_, t0, nt, s0, s1, dv);    \
      braid_red_g_##OP##_##sh(d0 + o_, BRAID_RED_AT(d1, o_), a + o_, b + o_, n - o_, t0, nt, s0, s1, dv); \
    } else if (d0 != a && d0 != b && d1ok)                                                                \
      braid_red_d_##OP##_##sh(d0, d1, a, b, n, t0, nt, s0, s1, dv);                                       \
    else if (d0 == a && d0 != b && d1ok)                                                                  \
      braid_red_ip_##OP##_##sh(d0, d1, b, n, t0, nt, s0, s1, dv);                                         \
    else                                                                                                  \
      braid_red_g_##OP##_##sh(d0, d1, a, b, n, t0, nt, s0, s1, dv);                                       \
  } while (0)
#define BRAID_RED_RUN1(sh, T, OP)                                                                 \
  do {                                                                                            \
    if (BRAID_DEVICE_COMPILE || nt > 1) {                                                         \
      BRAID_RED_SPLIT(T, a);                                                                      \
      braid_red_g_##OP##_##sh(d0, d1, a, h_, t0, nt, s0, s1, dv);                                 \
      braid_red_v_##OP##_##sh(d0 + h_, BRAID_RED_AT(d1, h_), a + h_, np_, t0, nt, s0, s1, dv);    \
      braid_red_g_##OP##_##sh(d0 + o_, BRAID_RED_AT(d1, o_), a + o_, n - o_, t0, nt, s0, s1, dv); \
    } else if (d0 != a && d1ok)                                                                   \
      braid_red_d_##OP##_##sh(d0, d1, a, n, t0, nt, s0, s1, dv);                                  \
    else                                                                                          \
      braid_red_g_##OP##_##sh(d0, d1, a, n, t0, nt, s0, s1, dv);                                  \
  } while (0)

/*
 * braid_reduce_copy_<sh>: dst0[i] (and dst1[i] when dst1 != NULL) =
 *   post(op(pre0(src0[i]), pre1(src1[i]))) for i in [0, n); src1 == NULL: post(pre0(src0[i])).
 * preN applies PREMULSUM's multiplier to srcN, post applies SUMPOSTDIV's division; both are
 * identities for the other kinds. Every thread of the worker calls it with the same arguments.
 */
#define BRAID_RED_DEFINE(sh, T, C, D)                                                                             \
  BRAID_RED_KERNELS(sh, T, C, D)                                                                                  \
  HD void braid_reduce_copy_part_##sh(const struct braid_redop* op, void* dst0, void* dst1, const void* src0,     \
                                      int pre0, const void* src1, int pre1, int post, size_t n, size_t t0,        \
                                      size_t nt) {                                                                \
    T* d0 = (T*)dst0;                                                                                             \
    T* d1 = (T*)dst1;                                                                                             \
    const T* a = (const T*)src0;                                                                                  \
    const T* b = (const T*)src1;                                                                                  \
    const int kind = op->kind, pms = kind == BRAID_RED_PREMULSUM;                                                 \
    const C one = braid_red_ld_##sh(braid_red_st_##sh((C)1));                                                     \
    C s0, s1;                                                                                                     \
    const D dv = braid_red_divisor_##sh(op->scalar);                                                              \
    int d1ok;                                                                                                     \
    if (kind < 0 || kind >= BRAID_NUM_REDKINDS) return;                                                           \
    if (b != NULL && d0 == b && d0 != a) { /* in place on src1: swap, every op commutes */                        \
      const T* t_ = a;                                                                                            \
      int p_ = pre0;                                                                                              \
      a = b, b = t_, pre0 = pre1, pre1 = p_;                                                                      \
    }                                                                                                             \
    s0 = pms && pre0 ? braid_red_scalar_##sh(op->scalar) : one;                                                   \
    s1 = pms && pre1 ? braid_red_scalar_##sh(op->scalar) : one;                                                   \
    d1ok = d1 == NULL || (d1 != d0 && d1 != a && d1 != b);                                                        \
    if (b == NULL) {                                                                                              \
      if (pms && pre0)                                                                                            \
        BRAID_RED_RUN1(sh, T, MUL1);                                                                              \
      else if (kind == BRAID_RED_SUMPOSTDIV && post)                                                              \
        BRAID_RED_RUN1(sh, T, DIV1);                                                                              \
      else if (!BRAID_DEVICE_COMPILE && nt == 1 && d1ok) {                                                        \
        /* host: one call per output (gcc makes the loop a call per 16 elements); in place on                     \
         * dst0 (a copy-and-send of data already in the output) copies only to dst1 */                            \
        if (d0 != a) memcpy(d0, a, n * sizeof(T));                                                                \
        if (d1 != NULL) memcpy(d1, a, n * sizeof(T));                                                             \
      } else if (d0 != a || d1 != NULL)                                                                           \
        BRAID_RED_RUN1(sh, T, RAW);                                                                               \
      return;                                                                                                     \
    }                                                                                                             \
    switch (kind) {                                                                                               \
      case BRAID_RED_PROD:                                                                                        \
        BRAID_RED_RUN2(sh, T, MUL);                                                                               \
        break;                                                                                                    \
      case BRAID_RED_MAX:                                                                                         \
        BRAID_RED_RUN2(sh, T, MAX);                                                                               \
        break;                                                                                                    \
      case BRAID_RED_MIN:                                                                                         \
        BRAID_RED_RUN2(sh, T, MIN);                                                                               \
        break;                                                                                                    \
      case BRAID_RED_PREMULSUM:                                                                                   \
        if (pre0 || pre1)                                                                                         \
          BRAID_RED_RUN2(sh, T, PMS);                                                                             \
        else                                                                                                      \
          BRAID_RED_RUN2(sh, T, ADD);                                                                             \
        break;                                                                                                    \
      case BRAID_RED_SUMPOSTDIV:                                                                                  \
        if (post)                                                                                                 \
          BRAID_RED_RUN2(sh, T, ADDDIV);                                                                          \
        else                                                                                                      \
          BRAID_RED_RUN2(sh, T, ADD);                                                                             \
        break;                                                                                                    \
      default:                                                                                                    \
        BRAID_RED_RUN2(sh, T, ADD);                                                                               \
        break;                                                                                                    \
    }                                                                                                             \
  }                                                                                                               \
  /* Every thread of the worker calls it with the same arguments (the part of thread tid). */                     \
  HD_NOFORCE void braid_reduce_copy_##sh(const struct braid_redop* op, void* dst0, void* dst1, const void* src0,  \
                                         int pre0, const void* src1, int pre1, int post, size_t n) {              \
    braid_reduce_copy_part_##sh(op, dst0, dst1, src0, pre0, src1, pre1, post, n, (size_t)simt_tid(),              \
                                (size_t)simt_nthreads());                                                         \
  }                                                                                                               \
                                                                                                                  \
  /* The same operation on the 8 / sizeof(T) elements of one 8-byte word a thread holds                           \
   * (little-endian, like memory); b == NULL means a copy. Runs in the calling thread only. */                    \
  HD_FP uint64_t braid_reduce_pack64_##sh(const struct braid_redop* op, uint64_t a, int pre_a, const uint64_t* b, \
                                          int pre_b, int post) {                                                  \
    T xa[8 / sizeof(T)], xb[8 / sizeof(T)];                                                                       \
    const int kind = op->kind, pms = kind == BRAID_RED_PREMULSUM;                                                 \
    const int div = kind == BRAID_RED_SUMPOSTDIV && post;                                                         \
    const C one = braid_red_ld_##sh(braid_red_st_##sh((C)1));                                                     \
    const C s0 = pms && pre_a ? braid_red_scalar_##sh(op->scalar) : one;                                          \
    const C s1 = pms && pre_b ? braid_red_scalar_##sh(op->scalar) : one;                                          \
    const D dv = braid_red_divisor_##sh(op->scalar);                                                              \
    uint64_t r;                                                                                                   \
    if (kind < 0 || kind >= BRAID_NUM_REDKINDS) return a;                                                         \
    if (b == NULL && !braid_red_copy_changes(op, pre_a, post)) return a;                                          \
    memcpy(xa, &a, 8);                                                                                            \
    memcpy(xb, b != NULL ? b : &a, 8); /* (a: only to initialize xb) */                                           \
    BRAID_UNROLL for (int k = 0; k < (int)(8 / sizeof(T)); k++) {                                                 \
      C x = braid_red_ld_##sh(xa[k]);                                                                             \
      if (b == NULL) {                                                                                            \
        x = braid_red_mul_##sh(x, s0);                                                                            \
      } else {                                                                                                    \
        C y = braid_red_ld_##sh(xb[k]);                                                                           \
        switch (kind) {                                                                                           \
          case BRAID_RED_PROD:                                                                                    \
            x = BRAID_RE_MUL(sh, x, y);                                                                           \
            break;                                                                                                \
          case BRAID_RED_MAX:                                                                                     \
            x = BRAID_RE_MAX(sh, x, y);                                                                           \
            break;                                                                                                \
          case BRAID_RED_MIN:                                                                                     \
            x = BRAID_RE_MIN(sh, x, y);                                                                           \
            break;                                                                                                \
          case BRAID_RED_PREMULSUM:                                                                               \
            x = pre_a || pre_b ? BRAID_RE_PMS(sh, x, y) : BRAID_RE_ADD(sh, x, y);                                 \
            break;                                                                                                \
          default:                                                                                                \
            x = BRAID_RE_ADD(sh, x, y);                                                                           \
            break;                                                                                                \
        }                                                                                                         \
      }                                                                                                           \
      if (div) x = braid_red_div_##sh(x, dv);                                                                     \
      xa[k] = braid_red_st_##sh(x);                                                                               \
    }                                                                                                             \
    memcpy(&r, xa, 8);                                                                                            \
    return r;                                                                                                     \
  }

/* Per-datatype traits, keyed by the short names of BRAID_DTYPES (a new datatype in axes.h
 * fails to compile until it gets a line here). */
#define BRAID_RED_DEF_i8(T) BRAID_RED_INT(i8, T, uint8_t, int32_t, INT32_MAX) BRAID_RED_DEFINE(i8, T, T, int32_t)
#define BRAID_RED_DEF_u8(T) BRAID_RED_INT(u8, T, uint8_t, uint32_t, UINT32_MAX) BRAID_RED_DEFINE(u8, T, T, uint32_t)
#define BRAID_RED_DEF_i32(T) BRAID_RED_INT(i32, T, uint32_t, int64_t, INT64_MAX) BRAID_RED_DEFINE(i32, T, T, int64_t)
#define BRAID_RED_DEF_u32(T) BRAID_RED_INT(u32, T, uint32_t, uint64_t, UINT64_MAX) BRAID_RED_DEFINE(u32, T, T, uint64_t)
#define BRAID_RED_DEF_i64(T) BRAID_RED_INT(i64, T, uint64_t, int64_t, INT64_MAX) BRAID_RED_DEFINE(i64, T, T, int64_t)
#define BRAID_RED_DEF_u64(T) BRAID_RED_INT(u64, T, uint64_t, uint64_t, UINT64_MAX) BRAID_RED_DEFINE(u64, T, T, uint64_t)
#define BRAID_RED_DEF_f16(T) BRAID_RED_NARROW(f16, T) BRAID_RED_DEFINE(f16, T, float, float)
#define BRAID_RED_DEF_f32(T) BRAID_RED_FLT(f32, T, uint32_t) BRAID_RED_DEFINE(f32, T, T, T)
#define BRAID_RED_DEF_f64(T) BRAID_RED_FLT(f64, T, uint64_t) BRAID_RED_DEFINE(f64, T, T, T)
#define BRAID_RED_DEF_bf16(T) BRAID_RED_NARROW(bf16, T) BRAID_RED_DEFINE(bf16, T, float, float)
#define BRAID_RED_DEF_f8e4m3(T) BRAID_RED_NARROW(f8e4m3, T) BRAID_RED_DEFINE(f8e4m3, T, float, float)
#define BRAID_RED_DEF_f8e5m2(T) BRAID_RED_NARROW(f8e5m2, T) BRAID_RED_DEFINE(f8e5m2, T, float, float)

#define BRAID_X(id, sh, T, size, str) BRAID_RED_DEF_##sh(T)
BRAID_DTYPES(BRAID_X)
#undef BRAID_X

/* Dispatch on op->dtype (a per-datatype kernel calls braid_reduce_copy_<short> directly). */
HD_NOFORCE void braid_reduce_copy(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                                  const void* src1, int pre1, int post, size_t n) {
  switch (op->dtype) {
#define BRAID_X(id, sh, T, size, str)                                        \
  case id:                                                                   \
    braid_reduce_copy_##sh(op, dst0, dst1, src0, pre0, src1, pre1, post, n); \
    break;
    BRAID_DTYPES(BRAID_X)
#undef BRAID_X
    default:
      break;
  }
}

HD_FP uint64_t braid_reduce_pack64(const struct braid_redop* op, uint64_t a, int pre_a, const uint64_t* b, int pre_b,
                                   int post) {
  switch (op->dtype) {
#define BRAID_X(id, sh, T, size, str) \
  case id:                            \
    return braid_reduce_pack64_##sh(op, a, pre_a, b, pre_b, post);
    BRAID_DTYPES(BRAID_X)
#undef BRAID_X
    default:
      return a;
  }
}

/* ---- scalars, built on the host per call ---- */

/* v clamped to [lo, hi] and truncated toward zero; NaN gives 0. */
HD int64_t braid_redop_clamp_i64(double v, double lo, double hi, int64_t ilo, int64_t ihi) {
  if (v != v) return 0;
  if (v <= lo) return ilo;
  if (v >= hi) return ihi;
  return (int64_t)v;
}

/* The bits of v in dtype's own format, zero-extended (PREMULSUM's multiplier, e.g. 1/nranks for
 * Avg on floating types). Integers: truncated toward zero and clamped to the type's range.
 * Floating types: rounded to nearest even once (fp8 saturating). Unknown dtype: 0. */
HD uint64_t braid_redop_scalar_from_double(int dtype, double v) {
  switch (dtype) {
    /* ncclDataType_t values, as in BRAID_DTYPES */
    case 0:
      return (uint8_t)(int8_t)braid_redop_clamp_i64(v, -128.0, 127.0, -128, 127);
    case 1:
      return (uint8_t)braid_redop_clamp_i64(v, 0.0, 255.0, 0, 255);
    case 2:
      return (uint32_t)(int32_t)braid_redop_clamp_i64(v, -2147483648.0, 2147483647.0, INT32_MIN, INT32_MAX);
    case 3:
      return (uint32_t)braid_redop_clamp_i64(v, 0.0, 4294967295.0, 0, UINT32_MAX);
    case 4:
      return (uint64_t)braid_redop_clamp_i64(v, -9223372036854775808.0, 9223372036854775808.0, INT64_MIN, INT64_MAX);
    case 5:
      if (v != v || v <= 0.0) return 0;
      if (v >= 18446744073709551616.0) return UINT64_MAX;
      return (uint64_t)v;
    case 6:
      return braid_fp_f64_to_f16(v);
    case 7:
      return braid_fp_f32_bits((float)v);
    case 8:
      return braid_fp_f64_bits(v);
    case 9:
      return braid_fp_f64_to_bf16(v);
    case 10:
      return braid_fp_f64_to_f8e4m3(v);
    case 11:
      return braid_fp_f64_to_f8e5m2(v);
    default:
      return 0;
  }
}

BRAID_FP_STRICT_END

#endif /* BRAID_REDUCE_H */
