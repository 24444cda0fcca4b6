/*
 * fp.h - portable conversions between float and the narrow floating formats the data path
 * stores: IEEE binary16 (half), bfloat16, fp8 e4m3 (OCP) and fp8 e5m2. Plain integer code in
 * the shared subset, so the host executor and the GPU kernels produce identical bits.
 *
 * Storage types are uint16_t / uint8_t (BRAID_DTYPES in axes.h). Rules:
 * - narrow -> float is exact. NaN payloads are kept where float can hold them (half, bf16,
 *   e5m2); an e4m3 NaN (0x7f / 0xff) becomes a quiet float NaN of the same sign.
 * - float -> narrow rounds to nearest, ties to even, subnormals included.
 *   half and bf16 overflow to +-inf (IEEE). fp8 saturates like CUDA's __nv_fp8_*(float)
 *   constructors (__NV_SATFINITE): every finite or infinite magnitude above the largest finite
 *   value becomes that value (e4m3 448 = 0x7e, e5m2 57344 = 0x7b).
 * - NaN stays NaN with its sign: half/bf16/e5m2 keep the top payload bits (quiet bit set when
 *   truncation would leave an infinity), e4m3 gives 0x7f | sign. So narrow -> float -> narrow
 *   returns the very same bits for every one of the 2^16 / 2^8 patterns.
 * Also here: float/double bit casts and multiply/divide helpers that are never fused into an
 * FMA on the device (host and device must round identically).
 */
#ifndef BRAID_FP_H
#define BRAID_FP_H

#include <stdint.h>
#include <string.h>

#include "kernels/simt.h"

BRAID_FP_STRICT_BEGIN

/* ---- bit casts ---- */

HD uint32_t braid_fp_f32_bits(float f) {
#if BRAID_DEVICE_COMPILE
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

HD float braid_fp_f32_from_bits(uint32_t u) {
#if BRAID_DEVICE_COMPILE
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

HD uint64_t braid_fp_f64_bits(double d) {
#if BRAID_DEVICE_COMPILE
  return (uint64_t)__double_as_longlong(d);
#else
  uint64_t u;
  memcpy(&u, &d, sizeof(u));
  return u;
#endif
}

HD double braid_fp_f64_from_bits(uint64_t u) {
#if BRAID_DEVICE_COMPILE
  return __longlong_as_double((long long)u);
#else
  double d;
  memcpy(&d, &u, sizeof(d));
  return d;
#endif
}

/* ---- arithmetic that is rounded exactly once on both sides ----
 * nvcc contracts a*b+c into an FMA by default; __fmul_rn and friends are never contracted.
 * On the host this file and reduce.h sit in a BRAID_FP_STRICT region (simt.h): gcc compiles
 * them with -ffp-contract=off even on FMA targets (-march=native, aarch64). A caller outside
 * the region that inlines an always_inline helper here and feeds it a product could still get
 * a fused result; reduce.h's entry points are HD_NOFORCE / HD_FP for that reason. */

HD float braid_fp_mul_f32(float a, float b) {
#if BRAID_DEVICE_COMPILE
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

HD double braid_fp_mul_f64(double a, double b) {
#if BRAID_DEVICE_COMPILE
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

HD float braid_fp_div_f32(float a, float b) {
#if BRAID_DEVICE_COMPILE
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

HD double braid_fp_div_f64(double a, double b) {
#if BRAID_DEVICE_COMPILE
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

HD float braid_fp_add_f32(float a, float b) {
#if BRAID_DEVICE_COMPILE
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/* c ? x : y as masks: both sides stay unconditional, so gcc cannot sink the floating-point
 * side into a branch (which -ftrapping-math would then forbid it to if-convert). */
HD uint32_t braid_fp_blend(int c, uint32_t x, uint32_t y) {
  const uint32_t m = 0u - (uint32_t)(c != 0);
  return (x & m) | (y & ~m);
}

/* ---- rounding core ----
 * The float -> narrow path is written without data-dependent branches (selects only), so the
 * host compiler can vectorize the element loops that call it and the GPU does not diverge. */

/* x / 2^s rounded to nearest, ties to even; 1 <= s <= 63. (Scalar path from double.) */
HD uint64_t braid_fp_rne_shr64(uint64_t x, int s) {
  uint64_t q = x >> s, rem = x & ((1ull << s) - 1ull), half = 1ull << (s - 1);
  return q + (uint64_t)(rem > half || (rem == half && (q & 1ull)));
}

/*
 * |f| (float bits without sign, not NaN) rounded into a format with exponent bias `bias` and
 * `mbits` mantissa bits (bias < 127), as an unsigned code exponent:mantissa. The code is not
 * clamped: a value past the format's range gives a code past its largest one, which the
 * caller clamps. Normal results: rebase the exponent and round away the low 23 - mbits bits
 * (ties to even); a carry out of the mantissa correctly bumps the exponent. Results below the
 * format's smallest normal: add a float `magic` whose ulp is the format's subnormal step, so
 * the float adder rounds (to nearest even) at exactly that step; the code is the difference
 * of the bit patterns. Float subnormal inputs lie far below every format's smallest step, so
 * it does not matter whether the hardware flushes them to zero.
 */
HD uint32_t braid_fp_narrow_mag32(uint32_t a, int bias, int mbits) {
  const int sh = 23 - mbits;
  const uint32_t r = a - ((uint32_t)(127 - bias) << 23);
  const uint32_t norm = (r + ((1u << (sh - 1)) - 1u) + ((r >> sh) & 1u)) >> sh;
  const uint32_t magic = (uint32_t)(127 + 24 - bias - mbits) << 23;
  const uint32_t sub =
      braid_fp_f32_bits(braid_fp_add_f32(braid_fp_f32_from_bits(a), braid_fp_f32_from_bits(magic))) - magic;
  return braid_fp_blend(a < ((uint32_t)(127 - bias + 1) << 23), sub, norm);
}

/* The same from a double (|d| bits, not NaN), with plain integer rounding; for scalars
 * computed on the host. Saturates at 0xffffffff. */
HD uint32_t braid_fp_narrow_mag64(uint64_t a, int bias, int mbits) {
  const uint64_t minnorm = (uint64_t)(1023 - bias + 1) << 52;
  uint64_t r;
  if (a >= minnorm) {
    r = braid_fp_rne_shr64(a - ((uint64_t)(1023 - bias) << 52), 52 - mbits);
  } else {
    uint64_t e = a >> 52;
    uint64_t sig = e ? ((a & 0xfffffffffffffull) | (1ull << 52)) : a;
    int s = 1076 - bias - mbits - (int)(e ? e : 1u);
    r = s >= 64 ? 0u : braid_fp_rne_shr64(sig, s);
  }
  return r > 0xffffffffull ? 0xffffffffu : (uint32_t)r;
}

/* m * 2^-k for a subnormal mantissa m (exact: small integer times a power of two). */
HD uint32_t braid_fp_sub_bits(uint32_t m, uint32_t pow2_bits) {
  return braid_fp_f32_bits(braid_fp_mul_f32((float)(int32_t)m, braid_fp_f32_from_bits(pow2_bits)));
}

/* ---- half (1.5.10, bias 15) ---- */

HD float braid_fp_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
  const uint32_t big = (em << 13) + ((em >= 0x7c00u ? 224u : 112u) << 23); /* inf/NaN : normal */
  const uint32_t sub = braid_fp_sub_bits(em, 0x33800000u);
  return braid_fp_f32_from_bits(sign | braid_fp_blend(em < 0x400u, sub, big));
}

HD uint16_t braid_fp_f16_nan(uint32_t sign16, uint32_t fmant) {
  uint32_t m = fmant >> 13;
  return (uint16_t)(sign16 | 0x7c00u | m | (m ? 0u : 0x200u));
}

HD uint16_t braid_fp_f32_to_f16(float f) {
  const uint32_t u = braid_fp_f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
  uint32_t mag = braid_fp_narrow_mag32(a, 15, 10);
  mag = mag > 0x7c00u ? 0x7c00u : mag;
  return (uint16_t)braid_fp_blend(a > 0x7f800000u, braid_fp_f16_nan(sign, a & 0x7fffffu), sign | mag);
}

/* ---- bfloat16 (1.8.7, bias 127: the top half of a float) ---- */

HD float braid_fp_bf16_to_f32(uint16_t b) {
  return braid_fp_f32_from_bits((uint32_t)b << 16);
}

HD uint16_t braid_fp_bf16_nan(uint32_t sign16, uint32_t fmant) {
  uint32_t m = fmant >> 16;
  return (uint16_t)(sign16 | 0x7f80u | m | (m ? 0u : 0x40u));
}

/* Same exponent range as float: drop 16 bits, ties to even; subnormals follow, inf stays inf
 * and the largest finite values round up into inf. */
HD uint16_t braid_fp_f32_to_bf16(float f) {
  const uint32_t u = braid_fp_f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
  const uint32_t mag = (a + 0x7fffu + ((a >> 16) & 1u)) >> 16;
  return (uint16_t)braid_fp_blend(a > 0x7f800000u, braid_fp_bf16_nan(sign, a & 0x7fffffu), sign | mag);
}

/* ---- fp8 e4m3 (1.4.3, bias 7, no inf, NaN = S.1111.111, max 448) ---- */

HD float braid_fp_f8e4m3_to_f32(uint8_t c) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24, em = c & 0x7fu;
  const uint32_t big = em == 0x7fu ? 0x7fc00000u : (em << 20) + (120u << 23);
  const uint32_t sub = braid_fp_sub_bits(em, 0x3b000000u);
  return braid_fp_f32_from_bits(sign | braid_fp_blend(em < 0x8u, sub, big));
}

HD uint8_t braid_fp_f32_to_f8e4m3(float f) {
  const uint32_t u = braid_fp_f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  uint32_t mag = braid_fp_narrow_mag32(a, 7, 3);
  mag = mag > 0x7eu ? 0x7eu : mag;
  return (uint8_t)(sign | braid_fp_blend(a > 0x7f800000u, 0x7fu, mag));
}

/* ---- fp8 e5m2 (1.5.2, bias 15, inf 0x7c, NaN 0x7d..0x7f, max 57344) ---- */

HD float braid_fp_f8e5m2_to_f32(uint8_t c) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24, em = c & 0x7fu;
  const uint32_t big = (em << 21) + ((em >= 0x7cu ? 224u : 112u) << 23);
  const uint32_t sub = braid_fp_sub_bits(em, 0x37800000u);
  return braid_fp_f32_from_bits(sign | braid_fp_blend(em < 0x4u, sub, big));
}

HD uint8_t braid_fp_f8e5m2_nan(uint32_t sign8, uint32_t fmant) {
  uint32_t m = fmant >> 21;
  return (uint8_t)(sign8 | 0x7cu | m | (m ? 0u : 0x2u));
}

HD uint8_t braid_fp_f32_to_f8e5m2(float f) {
  const uint32_t u = braid_fp_f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  uint32_t mag = braid_fp_narrow_mag32(a, 15, 2);
  mag = mag > 0x7bu ? 0x7bu : mag;
  return (uint8_t)braid_fp_blend(a > 0x7f800000u, braid_fp_f8e5m2_nan(sign, a & 0x7fffffu), sign | mag);
}

/* ---- from double, rounded once (no detour through float) ---- */

HD uint16_t braid_fp_f64_to_f16(double d) {
  const uint64_t u = braid_fp_f64_bits(d), a = u & 0x7fffffffffffffffull;
  const uint32_t sign = (uint32_t)(u >> 48) & 0x8000u;
  uint32_t mag;
  if (a > 0x7ff0000000000000ull) return braid_fp_f16_nan(sign, (uint32_t)(a >> 29) & 0x7fffffu);
  mag = braid_fp_narrow_mag64(a, 15, 10);
  return (uint16_t)(sign | (mag > 0x7c00u ? 0x7c00u : mag));
}

HD uint16_t braid_fp_f64_to_bf16(double d) {
  const uint64_t u = braid_fp_f64_bits(d), a = u & 0x7fffffffffffffffull;
  const uint32_t sign = (uint32_t)(u >> 48) & 0x8000u;
  uint32_t mag;
  if (a > 0x7ff0000000000000ull) return braid_fp_bf16_nan(sign, (uint32_t)(a >> 29) & 0x7fffffu);
  mag = braid_fp_narrow_mag64(a, 127, 7);
  return (uint16_t)(sign | (mag > 0x7f80u ? 0x7f80u : mag));
}

HD uint8_t braid_fp_f64_to_f8e4m3(double d) {
  const uint64_t u = braid_fp_f64_bits(d), a = u & 0x7fffffffffffffffull;
  const uint32_t sign = (uint32_t)(u >> 56) & 0x80u;
  uint32_t mag;
  if (a > 0x7ff0000000000000ull) return (uint8_t)(sign | 0x7fu);
  mag = braid_fp_narrow_mag64(a, 7, 3);
  return (uint8_t)(sign | (mag > 0x7eu ? 0x7eu : mag));
}

HD uint8_t braid_fp_f64_to_f8e5m2(double d) {
  const uint64_t u = braid_fp_f64_bits(d), a = u & 0x7fffffffffffffffull;
  const uint32_t sign = (uint32_t)(u >> 56) & 0x80u;
  uint32_t mag;
  if (a > 0x7ff0000000000000ull) return braid_fp_f8e5m2_nan(sign, (uint32_t)(a >> 29) & 0x7fffffu);
  mag = braid_fp_narrow_mag64(a, 15, 2);
  return (uint8_t)(sign | (mag > 0x7bu ? 0x7bu : mag));
}

BRAID_FP_STRICT_END

#endif /* BRAID_FP_H */
