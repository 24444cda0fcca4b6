/*
 * test_reduce.c - the reduction layer of the data path: src/kernels/simt.h (host side),
 * fp.h (narrow float conversions) and reduce.h (every datatype x reduction kind).
 *
 * Everything is checked against references written here independently of the code under
 * test: narrow formats are decoded with ldexp from their fields and encoded by searching the
 * sorted table of their finite values (ties to the even code, overflow by the format's rule);
 * each float operation is modelled as the exact double (or __float128 for double) result
 * rounded once, which equals the IEEE result because the wider format has more than 2p+2 bits;
 * integers use 64-bit arithmetic reduced modulo 2^width.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "kernels/reduce.h"
#include "kernels/reduce_isa.h"

/* ck_assert records every passing check (a file write); the element loops below make millions
 * of checks, so they call into Check only on failure. */
#define EXPECT(cond, ...)                   \
  do {                                      \
    if (!(cond)) ck_abort_msg(__VA_ARGS__); \
  } while (0)

/* ---------------------------------------------------------------- narrow float reference */

struct fmt {
  const char* name;
  int bits, ebits, mbits, bias;
  int has_inf; /* all-ones exponent: inf (mantissa 0) or NaN; else only S.1..1.1..1 is NaN */
  int sat;     /* overflow saturates to the largest finite value (fp8) instead of inf */
  double* val; /* val[code] for every positive finite code, ascending */
  int maxcode;
};

enum { F16, BF16, E4M3, E5M2, NFMT };
static struct fmt fmts[NFMT] = {
    {"half", 16, 5, 10, 15, 1, 0, NULL, 0},
    {"bf16", 16, 8, 7, 127, 1, 0, NULL, 0},
    {"e4m3", 8, 4, 3, 7, 0, 1, NULL, 0},
    {"e5m2", 8, 5, 2, 15, 1, 1, NULL, 0},
};

static double ref_decode(const struct fmt* f, uint32_t code) {
  const uint32_t emax = (1u << f->ebits) - 1, mmax = (1u << f->mbits) - 1;
  const int neg = (code >> (f->bits - 1)) & 1;
  const uint32_t e = (code >> f->mbits) & emax, m = code & mmax;
  double v;
  if (f->has_inf && e == emax)
    v = m == 0 ? INFINITY : NAN;
  else if (!f->has_inf && e == emax && m == mmax)
    v = NAN;
  else if (e == 0)
    v = ldexp((double)m, 1 - f->bias - f->mbits);
  else
    v = ldexp((double)(m + mmax + 1), (int)e - f->bias - f->mbits);
  return neg ? -v : v;
}

static void ref_tables(void) {
  for (int k = 0; k < NFMT; k++) {
    struct fmt* f = &fmts[k];
    if (f->val != NULL) continue;
    f->val = malloc(sizeof(double) << (f->bits - 1));
    for (uint32_t c = 0; c < (1u << (f->bits - 1)); c++) {
      double v = ref_decode(f, c);
      if (!isfinite(v)) break;
      f->val[c] = v;
      f->maxcode = (int)c;
    }
  }
}

/* Round x into the format; returns the code, or -1 for NaN. */
static int32_t ref_encode(const struct fmt* f, double x) {
  const uint32_t sign = signbit(x) ? 1u << (f->bits - 1) : 0;
  const double ax = fabs(x), max = f->val[f->maxcode];
  uint32_t c;
  if (isnan(x)) return -1;
  if (ax > max) {
    double next = ldexp(1.0, (1 << f->ebits) - 2 - f->bias + 1); /* one ulp past max */
    if (!f->sat && ax >= (max + next) / 2) return (int32_t)(sign | ((uint32_t)f->maxcode + 1));
    return (int32_t)(sign | (uint32_t)f->maxcode);
  }
  uint32_t lo = 0, hi = (uint32_t)f->maxcode; /* largest code with val <= ax */
  while (lo < hi) {
    uint32_t mid = (lo + hi + 1) / 2;
    if (f->val[mid] <= ax)
      lo = mid;
    else
      hi = mid - 1;
  }
  c = lo;
  if (f->val[lo] != ax) {
    double mid = (f->val[lo] + f->val[lo + 1]) / 2;
    if (ax > mid || (ax == mid && (lo & 1))) c = lo + 1;
  }
  return (int32_t)(sign | c);
}

/* The code under test, by format. */
static float ut_to_f32(int k, uint32_t c) {
  switch (k) {
    case F16:
      return braid_fp_f16_to_f32((uint16_t)c);
    case BF16:
      return braid_fp_bf16_to_f32((uint16_t)c);
    case E4M3:
      return braid_fp_f8e4m3_to_f32((uint8_t)c);
    default:
      return braid_fp_f8e5m2_to_f32((uint8_t)c);
  }
}
static uint32_t ut_from_f32(int k, float x) {
  switch (k) {
    case F16:
      return braid_fp_f32_to_f16(x);
    case BF16:
      return braid_fp_f32_to_bf16(x);
    case E4M3:
      return braid_fp_f32_to_f8e4m3(x);
    default:
      return braid_fp_f32_to_f8e5m2(x);
  }
}
static uint32_t ut_from_f64(int k, double x) {
  switch (k) {
    case F16:
      return braid_fp_f64_to_f16(x);
    case BF16:
      return braid_fp_f64_to_bf16(x);
    case E4M3:
      return braid_fp_f64_to_f8e4m3(x);
    default:
      return braid_fp_f64_to_f8e5m2(x);
  }
}

static int is_nan_code(int k, uint32_t c) {
  return isnan(ref_decode(&fmts[k], c));
}

/* Encoding x must give the reference code; a NaN must stay a NaN of the same sign. */
static void check_encode(int k, double x, uint32_t got, const char* path) {
  const struct fmt* f = &fmts[k];
  int32_t want = ref_encode(f, x);
  if (want < 0) {
    EXPECT(is_nan_code(k, got) && ((got >> (f->bits - 1)) & 1) == (uint32_t) !!signbit(x),
           "%s %s(NaN) = 0x%x, not a NaN of that sign", f->name, path, got);
    return;
  }
  EXPECT(got == (uint32_t)want, "%s %s(%.17g) = 0x%x, want 0x%x", f->name, path, x, got, (uint32_t)want);
}

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

START_TEST(test_fp_decode_roundtrip) {
  /* every bit pattern: exact value, and narrow -> float -> narrow gives the same bits */
  ref_tables();
  for (int k = 0; k < NFMT; k++) {
    const struct fmt* f = &fmts[k];
    for (uint32_t c = 0; c < (1u << f->bits); c++) {
      float x = ut_to_f32(k, c);
      double want = ref_decode(f, c);
      if (isnan(want))
        EXPECT(isnan(x) && !!signbit(x) == !!signbit(want), "%s 0x%x: not NaN", f->name, c);
      else
        EXPECT((double)x == want && !!signbit(x) == !!signbit(want), "%s 0x%x -> %.9g, want %.9g", f->name, c, x, want);
      uint32_t back = ut_from_f32(k, x);
      int sat_inf = f->sat && isinf(want); /* e5m2 inf saturates by design */
      if (!sat_inf) EXPECT(back == c, "%s 0x%x round trip gives 0x%x", f->name, c, back);
    }
  }
}
END_TEST

START_TEST(test_fp_encode_structured) {
  /* every value, every midpoint between neighbours (ties), and one float/double ulp either
   * side of each midpoint, in both signs, through the float and the double paths */
  ref_tables();
  for (int k = 0; k < NFMT; k++) {
    const struct fmt* f = &fmts[k];
    for (int c = 0; c <= f->maxcode; c++) {
      double v = f->val[c];
      double nxt = c < f->maxcode ? f->val[c + 1] : v + (v - f->val[c - 1]); /* overflow tie */
      double mid = (v + nxt) / 2;
      double xs[] = {v,
                     mid,
                     nextafter(mid, 0),
                     nextafter(mid, INFINITY),
                     (double)nextafterf((float)mid, 0),
                     (double)nextafterf((float)mid, INFINITY)};
      for (int s = 0; s < 2; s++) {
        for (size_t j = 0; j < sizeof(xs) / sizeof(xs[0]); j++) {
          double x = s ? -xs[j] : xs[j];
          if ((double)(float)x == x) check_encode(k, x, ut_from_f32(k, (float)x), "from_f32");
          check_encode(k, x, ut_from_f64(k, x), "from_f64");
        }
      }
    }
  }
}
END_TEST

START_TEST(test_fp_encode_random) {
  /* random float bit patterns (all classes) and random doubles */
  ref_tables();
  rng_state = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < NFMT; k++) {
    for (int it = 0; it < 200000; it++) {
      uint32_t u = (uint32_t)rng();
      float x;
      memcpy(&x, &u, sizeof(x));
      check_encode(k, x, ut_from_f32(k, x), "from_f32");
      uint64_t w = rng();
      double d;
      w = (w & 0x800fffffffffffffull) | ((uint64_t)(1023 - 160 + (int)(w >> 52 & 0x1ff) % 330) << 52);
      memcpy(&d, &w, sizeof(d));
      check_encode(k, d, ut_from_f64(k, d), "from_f64");
    }
  }
}
END_TEST

START_TEST(test_fp_special_cases) {
  /* hand-derived codes: RNE ties, saturation, overflow, NaN, zeros, subnormals */
  ck_assert_uint_eq(braid_fp_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);     /* tie -> even (down) */
  ck_assert_uint_eq(braid_fp_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie -> even (up) */
  ck_assert_uint_eq(braid_fp_f32_to_f16(65504.0f), 0x7bff);
  ck_assert_uint_eq(braid_fp_f32_to_f16(65519.0f), 0x7bff);
  ck_assert_uint_eq(braid_fp_f32_to_f16(65520.0f), 0x7c00); /* tie past max -> inf */
  ck_assert_uint_eq(braid_fp_f32_to_f16(-1e10f), 0xfc00);
  ck_assert_uint_eq(braid_fp_f32_to_f16(0x1p-24f), 0x0001);
  ck_assert_uint_eq(braid_fp_f32_to_f16(0x1p-25f), 0x0000); /* tie -> even zero */
  ck_assert_uint_eq(braid_fp_f32_to_f16(0x1.8p-25f), 0x0001);
  ck_assert_uint_eq(braid_fp_f32_to_f16(-0.0f), 0x8000);
  ck_assert_uint_eq(braid_fp_f32_to_f16(0x1.ffcp-15f), 0x0400); /* rounds up to min normal */
  ck_assert_uint_eq(braid_fp_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  ck_assert_uint_eq(braid_fp_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  ck_assert_uint_eq(braid_fp_f32_to_bf16(3.4028235e38f), 0x7f80); /* max float rounds to inf */
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(448.0f), 0x7e);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(464.0f), 0x7e);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(1e9f), 0x7e);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(INFINITY), 0x7e);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(-INFINITY), 0xfe);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(NAN), 0x7f);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(-NAN), 0xff);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(0x1p-9f), 0x01);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(0x1p-10f), 0x00);
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(0x1.8p-9f), 0x02); /* 1.5 steps -> 2 (even) */
  ck_assert_uint_eq(braid_fp_f32_to_f8e4m3(17.0f), 0x58);     /* 17 ties 16/18 -> 16 */
  ck_assert_uint_eq(braid_fp_f32_to_f8e5m2(57344.0f), 0x7b);
  ck_assert_uint_eq(braid_fp_f32_to_f8e5m2(61440.0f), 0x7b);
  ck_assert_uint_eq(braid_fp_f32_to_f8e5m2(INFINITY), 0x7b);
  ck_assert_uint_eq(braid_fp_f32_to_f8e5m2(-INFINITY), 0xfb);
  ck_assert(is_nan_code(E5M2, braid_fp_f32_to_f8e5m2(NAN)));
  ck_assert_uint_eq(braid_fp_f32_to_f8e5m2(0x1p-16f), 0x01);
  ck_assert_uint_eq(braid_fp_f32_to_f8e5m2(1.125f), 0x3c); /* tie -> even 1.0 */
  ck_assert(isinf(braid_fp_f8e5m2_to_f32(0x7c)) && braid_fp_f8e5m2_to_f32(0xfc) < 0);
  ck_assert(braid_fp_f8e4m3_to_f32(0x7e) == 448.0f && isnan(braid_fp_f8e4m3_to_f32(0xff)));
  /* double path: a hair above a tie rounds up (a detour through float would round to even) */
  ck_assert_uint_eq(braid_fp_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  ck_assert_uint_eq(braid_fp_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
  ck_assert_uint_eq(braid_fp_f64_to_f8e4m3(1.0 + 0x1p-4 + 0x1p-40), 0x39);
  ck_assert_uint_eq(braid_fp_f64_to_f8e5m2(1e300), 0x7b);
  ck_assert_uint_eq(braid_fp_f64_to_f16(1e-300), 0x0000);
  ck_assert_uint_eq(braid_fp_f64_to_f16(-INFINITY), 0xfc00);
  ck_assert_uint_eq(braid_fp_f64_to_bf16(INFINITY), 0x7f80);
  ck_assert_uint_eq(braid_fp_f64_to_f8e4m3(INFINITY), 0x7e);
  ck_assert(is_nan_code(F16, braid_fp_f64_to_f16(NAN)) && is_nan_code(BF16, braid_fp_f64_to_bf16(-NAN)));
  ck_assert(braid_fp_f64_to_f8e4m3(-NAN) == 0xff && is_nan_code(E5M2, braid_fp_f64_to_f8e5m2(NAN)));
}
END_TEST

/* --------------------------------------------------------------------- reduction reference */

enum { CL_INT, CL_UINT, CL_F32, CL_F64, CL_NARROW };
struct dt {
  int id, size, cls, fmt;
  const char* name;
};
static const struct dt dts[] = {
    {0, 1, CL_INT, 0, "i8"},         {1, 1, CL_UINT, 0, "u8"},           {2, 4, CL_INT, 0, "i32"},
    {3, 4, CL_UINT, 0, "u32"},       {4, 8, CL_INT, 0, "i64"},           {5, 8, CL_UINT, 0, "u64"},
    {6, 2, CL_NARROW, F16, "f16"},   {7, 4, CL_F32, 0, "f32"},           {8, 8, CL_F64, 0, "f64"},
    {9, 2, CL_NARROW, BF16, "bf16"}, {10, 1, CL_NARROW, E4M3, "f8e4m3"}, {11, 1, CL_NARROW, E5M2, "f8e5m2"},
};
#define NDT ((int)(sizeof(dts) / sizeof(dts[0])))
static const char* kind_names[] = {"SUM", "PROD", "MAX", "MIN", "PREMULSUM", "SUMPOSTDIV"};

#ifdef __SIZEOF_FLOAT128__
typedef __float128 wide_t; /* 113 bits >= 2*53+2: one rounding of an exact-enough double op */
#else
typedef long double wide_t;
#endif

/* one float/double operation, rounded once */
static double fop(int cls, char op, double x, double y) {
  if (cls == CL_F64) {
    wide_t a = x, b = y;
    return (double)(op == '+' ? a + b : op == '*' ? a * b : a / b);
  }
  return (double)(float)(op == '+' ? x + y : op == '*' ? x * y : x / y);
}
static double fmaxmin(double x, double y, int is_max) {
  if (isnan(y)) return x;
  if (isnan(x)) return y;
  if (x == y && x == 0) return (is_max ? (signbit(x) && signbit(y)) : (signbit(x) || signbit(y))) ? -0.0 : 0.0;
  return is_max ? (x > y ? x : y) : (x < y ? x : y);
}

static uint64_t load(const void* p, int size, size_t i) {
  uint64_t v = 0;
  memcpy(&v, (const char*)p + i * size, size); /* little-endian host */
  return v;
}
static double fdecode(const struct dt* t, uint64_t bits) {
  if (t->cls == CL_F32) {
    float f;
    uint32_t u = (uint32_t)bits;
    memcpy(&f, &u, 4);
    return f;
  }
  if (t->cls == CL_F64) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  return ref_decode(&fmts[t->fmt], (uint32_t)bits);
}
/* the bits of v in t's format; *nan set (and all-ones bits returned) for NaN */
static uint64_t fencode(const struct dt* t, double v, int* nan) {
  *nan = isnan(v);
  if (*nan) return ~0ull; /* all ones is a NaN in every floating format here */
  if (t->cls == CL_F32) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
  }
  if (t->cls == CL_F64) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
  return (uint64_t)ref_encode(&fmts[t->fmt], v);
}

/* The expected element bits. has_y == 0: a copy. *any_nan: any NaN is right. */
static uint64_t ref_elem(const struct dt* t, int kind, uint64_t xb, int pre0, int has_y, uint64_t yb, int pre1,
                         int post, uint64_t scalar, int* any_nan) {
  const int pms = kind == BRAID_RED_PREMULSUM, div = kind == BRAID_RED_SUMPOSTDIV && post;
  *any_nan = 0;
  if (!has_y && !(pms && pre0) && !div) return xb; /* plain copy: the bits */
  if (t->cls == CL_INT || t->cls == CL_UINT) {
    const int w = 8 * t->size;
    const uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    uint64_t s = scalar & mask, x = xb & mask, y = yb & mask, r;
    int64_t sx = w == 64 ? (int64_t)x : (int64_t)(x << (64 - w)) >> (64 - w);
    int64_t sy = w == 64 ? (int64_t)y : (int64_t)(y << (64 - w)) >> (64 - w);
    if (pms && pre0) x *= s;
    if (pms && pre1) y *= s;
    if (!has_y)
      r = x;
    else if (kind == BRAID_RED_PROD)
      r = x * y;
    else if (kind == BRAID_RED_MAX)
      r = t->cls == CL_INT ? (sx > sy ? x : y) : (x > y ? x : y);
    else if (kind == BRAID_RED_MIN)
      r = t->cls == CL_INT ? (sx < sy ? x : y) : (x < y ? x : y);
    else
      r = x + y;
    r &= mask;
    if (div) {
      uint64_t d = scalar ? scalar : 1;
      if (t->cls == CL_UINT) {
        r = r / d;
      } else {
        int64_t sr = w == 64 ? (int64_t)r : (int64_t)(r << (64 - w)) >> (64 - w);
        int64_t sd = d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
        r = (uint64_t)(sr / sd);
      }
    }
    return r & mask;
  }
  const int cls = t->cls == CL_NARROW ? CL_F32 : t->cls; /* narrow types compute in float */
  double x = fdecode(t, xb), y = has_y ? fdecode(t, yb) : 0, s = fdecode(t, scalar), r;
  if (pms && pre0) x = fop(cls, '*', x, s);
  if (pms && pre1) y = fop(cls, '*', y, s);
  if (!has_y)
    r = x;
  else if (kind == BRAID_RED_PROD)
    r = fop(cls, '*', x, y);
  else if (kind == BRAID_RED_MAX)
    r = fmaxmin(x, y, 1);
  else if (kind == BRAID_RED_MIN)
    r = fmaxmin(x, y, 0);
  else
    r = fop(cls, '+', x, y);
  if (div) r = fop(cls, '/', r, cls == CL_F32 ? (double)(float)(scalar ? scalar : 1) : (double)(scalar ? scalar : 1));
  return fencode(t, r, any_nan);
}

/* varied inputs: random bits, small values, and each class's special values */
static uint64_t gen(const struct dt* t, size_t i) {
  static const double fspecial[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 1e-40, 3.0e38, 0.5};
  uint64_t r = rng(), mask = t->size == 8 ? ~0ull : (1ull << (8 * t->size)) - 1;
  int nan;
  switch (i % 7) {
    case 0:
      return r & mask; /* any bit pattern */
    case 1:
      return (uint64_t)((int64_t)(r % 21) - 10) & mask;
    case 2:
      if (t->cls == CL_INT || t->cls == CL_UINT)
        return (r & 1 ? (mask >> 1) + (r >> 1 & 1) : mask - (r >> 2 & 1)) & mask;
      return fencode(t, fspecial[r % 10], &nan) & mask;
    default:
      if (t->cls == CL_INT || t->cls == CL_UINT) return r & mask;
      return fencode(t, ldexp((double)((int64_t)(r % 2001) - 1000), (int)(r >> 40 & 15) - 12), &nan) & mask;
  }
}

#define MAXN 1023
#define PAD 8
/* pointer layouts: separate outputs; in place on src0 / src1; dst1 equal to a source or to
 * dst0; src0 == src1 == dst0 */
enum { LAY_OUT, LAY_OUT_D1, LAY_IN0, LAY_IN1_D1, LAY_D1_IS_SRC, LAY_D1_IS_D0, LAY_ALL_SAME, NLAY };

static void check_run(const struct dt* t, int kind, size_t n, int has_b, int pre0, int pre1, int post, int lay,
                      uint64_t scalar, const uint8_t* a0, const uint8_t* b0) {
  static uint8_t a[(MAXN + PAD) * 8], b[(MAXN + PAD) * 8], x[(MAXN + PAD) * 8], y[(MAXN + PAD) * 8];
  static uint8_t xfill[(MAXN + PAD) * 8], yfill[(MAXN + PAD) * 8];
  const size_t bytes = (MAXN + PAD) * (size_t)t->size;
  memset(xfill, 0xa5, bytes);
  memset(yfill, 0x5a, bytes);
  memcpy(a, a0, bytes);
  memcpy(b, b0, bytes);
  memset(x, 0xa5, bytes);
  memset(y, 0x5a, bytes);
  void *d0 = x, *d1 = NULL;
  switch (lay) {
    case LAY_OUT_D1:
      d1 = y;
      break;
    case LAY_IN0:
      d0 = a;
      break;
    case LAY_IN1_D1:
      d0 = has_b ? (void*)b : (void*)a, d1 = y;
      break;
    case LAY_D1_IS_SRC:
      d1 = a;
      break;
    case LAY_D1_IS_D0:
      d1 = x;
      break;
    case LAY_ALL_SAME:
      d0 = a;
      break;
  }
  const void* src1 = lay == LAY_ALL_SAME ? (const void*)a : (const void*)b;
  const uint8_t* b_in = lay == LAY_ALL_SAME ? a0 : b0; /* what src1 held */
  struct braid_redop op = {.kind = (uint8_t)kind, .dtype = (uint8_t)t->id, .scalar = scalar};
  braid_reduce_copy(&op, d0, d1, a, pre0, has_b ? src1 : NULL, pre1, post, n);
  void* outs[2] = {d0, d1};
  for (int o = 0; o < 2; o++) {
    if (outs[o] == NULL) continue;
    /* what the buffer held before the call, for the elements past n */
    const uint8_t* before = outs[o] == a ? a0 : outs[o] == b ? b0 : outs[o] == x ? xfill : yfill;
    for (size_t i = 0; i < n + PAD; i++) {
      int any_nan = 0;
      uint64_t got = load(outs[o], t->size, i), want;
      if (i >= n) {
        want = load(before, t->size, i);
      } else {
        want =
            ref_elem(t, kind, load(a0, t->size, i), pre0, has_b, load(b_in, t->size, i), pre1, post, scalar, &any_nan);
      }
      int ok = any_nan ? isnan(fdecode(t, got)) : got == want;
      EXPECT(ok,
             "%s %s n=%zu b=%d pre=%d/%d post=%d lay=%d s=0x%llx out%d[%zu]: x=0x%llx "
             "y=0x%llx -> 0x%llx, want 0x%llx%s",
             t->name, kind_names[kind], n, has_b, pre0, pre1, post, lay, (unsigned long long)scalar, o, i,
             (unsigned long long)load(a0, t->size, i), (unsigned long long)load(b_in, t->size, i),
             (unsigned long long)got, (unsigned long long)want, any_nan ? " (any NaN)" : "");
    }
  }
}

static uint64_t pick_scalar(const struct dt* t, int kind, int variant) {
  static const double mul[] = {0.75, -3.0, 0.25, 5.0};
  static const uint64_t divs[] = {3, 1, 0, 200, 0x8000000000000005ull}; /* 0 means 1 */
  if (kind == BRAID_RED_SUMPOSTDIV) return divs[variant % 5];
  if (kind == BRAID_RED_PREMULSUM) return braid_redop_scalar_from_double(t->id, mul[variant % 4]);
  return 0;
}

START_TEST(test_reduce_kind) {
  /* _i enumerates datatype x kind */
  const struct dt* t = &dts[_i / BRAID_NUM_REDKINDS];
  const int kind = _i % BRAID_NUM_REDKINDS;
  static uint8_t a0[(MAXN + PAD) * 8], b0[(MAXN + PAD) * 8];
  static const size_t ns[] = {0, 1, 7, MAXN};
  ref_tables();
  rng_state = 0x1234567887654321ull + (uint64_t)_i;
  for (size_t i = 0; i < MAXN + PAD; i++) {
    uint64_t va = gen(t, i), vb = gen(t, i + 3);
    memcpy(a0 + i * t->size, &va, t->size);
    memcpy(b0 + i * t->size, &vb, t->size);
  }
  int variant = 0;
  for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
    for (int has_b = 0; has_b < 2; has_b++)
      for (int flags = 0; flags < 8; flags++)
        for (int lay = 0; lay < NLAY; lay++) {
          if ((lay == LAY_IN1_D1 || lay == LAY_ALL_SAME) && !has_b) continue;
          check_run(t, kind, ns[k], has_b, flags & 1, flags >> 1 & 1, flags >> 2 & 1, lay,
                    pick_scalar(t, kind, variant++), a0, b0);
        }
}
END_TEST

/* The AVX2 and AVX-512 builds of the loops (reduce_isa.h) against the SSE2 one: bit for bit, every datatype
 * x kind, lengths around the vector widths and blocks, misaligned pointers, in place, two
 * destinations, every pre/post combination, values from gen() (NaN, inf, subnormals, -0).
 * One exception, and only it: where both operands are NaN the result is NaN in both, but
 * which operand's payload it carries may differ. */
START_TEST(test_reduce_isa_identical) {
  const struct dt* t = &dts[_i / BRAID_NUM_REDKINDS];
  const int kind = _i % BRAID_NUM_REDKINDS;
  const char* name;
  int downgraded;
  static const braid_reduce_copy_fn fns[3] = {braid_reduce_copy_sse2, braid_reduce_copy_avx2, braid_reduce_copy_avx512};
  static const char* const isa_names[3] = {"SSE2", "AVX2", "AVX512"};
  if (braid_reduce_isa_choose(2, &name, &downgraded) != braid_reduce_copy_avx2) {
    if (_i == 0) fprintf(stderr, "reduce isa_identical: NOT RUN: this CPU has no AVX2\n");
    return;
  }
  int nisa = braid_reduce_isa_choose(3, &name, &downgraded) == braid_reduce_copy_avx512 ? 3 : 2;
  if (nisa < 3 && _i == 0) fprintf(stderr, "reduce isa_identical: AVX512 NOT RUN: this CPU has no AVX-512\n");
  enum { N = 4099, OFF = 3 };
  static uint8_t a[(N + OFF) * 8], b[(N + OFF) * 8], d0[3][(N + OFF) * 8], d1[3][(N + OFF) * 8];
  static const size_t ns[] = {1, 15, 16, 17, 31, 33, 255, 1023, N};
  ref_tables();
  rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
  for (size_t i = 0; i < N + OFF; i++) {
    uint64_t va = gen(t, i), vb = gen(t, i + 5);
    memcpy(a + i * t->size, &va, t->size);
    memcpy(b + i * t->size, &vb, t->size);
  }
  int variant = 0;
  for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
    for (int off = 0; off < 2; off++)
      for (int flags = 0; flags < 16; flags++) {
        int pre0 = flags & 1, pre1 = flags >> 1 & 1, post = flags >> 2 & 1, inplace = flags >> 3 & 1;
        size_t n = ns[k], o = (size_t)off * t->size, bytes = (N + OFF) * (size_t)t->size;
        struct braid_redop op = {
            .kind = (uint8_t)kind, .dtype = (uint8_t)t->id, .scalar = pick_scalar(t, kind, variant++)};
        for (int isa = 0; isa < nisa; isa++) {
          braid_reduce_copy_fn fn = fns[isa];
          memset(d0[isa], 0x5a, bytes);
          memset(d1[isa], 0xa5, bytes);
          if (inplace) {
            memcpy(d0[isa], a, bytes);
            fn(&op, d0[isa] + o, d1[isa] + o, d0[isa] + o, pre0, b + o, pre1, post, n);
          } else {
            fn(&op, d0[isa] + o, k % 2 ? d1[isa] + o : NULL, a + o, pre0, b + o, pre1, post, n);
          }
        }
        for (int isa = 1; isa < nisa; isa++)
          for (size_t e = 0; e < N + OFF; e++)
            for (int w = 0; w < 2; w++) {
              uint64_t x = load(w ? d1[0] : d0[0], t->size, e), y = load(w ? d1[isa] : d0[isa], t->size, e);
              if (x == y) continue;
              /* A NaN from two NaN operands: which payload wins is the operand order the vectorizer
               * picked (x86 returns the first NaN), unspecified by IEEE 754 and by reduce.h. */
              int fl = t->cls != CL_INT && t->cls != CL_UINT;
              int nans = fl && isnan(fdecode(t, x)) && isnan(fdecode(t, y)) && isnan(fdecode(t, load(a, t->size, e))) &&
                         isnan(fdecode(t, load(b, t->size, e)));
              ck_assert_msg(nans,
                            "%s %s n=%zu off=%d pre=%d/%d post=%d in place=%d: %s differs from SSE2 at element %zu of "
                            "dst%d: %#llx vs %#llx (inputs %#llx, %#llx)",
                            t->name, kind_names[kind], n, off, pre0, pre1, post, inplace, isa_names[isa], e, w,
                            (unsigned long long)x, (unsigned long long)y, (unsigned long long)load(a, t->size, e),
                            (unsigned long long)load(b, t->size, e));
            }
      }
}
END_TEST

/* BRAID_REDUCE_ISA's choice: SSE2 always gives SSE2; AUTO the widest the CPU has; AVX2 or
 * AVX512 on a CPU without it falls back to the widest it has and says so. */
START_TEST(test_reduce_isa_choose) {
  const char* name;
  int downgraded;
  ck_assert_ptr_eq(braid_reduce_isa_choose(1, &name, &downgraded), braid_reduce_copy_sse2);
  ck_assert_str_eq(name, "SSE2");
  ck_assert_int_eq(downgraded, 0);
  braid_reduce_copy_fn a = braid_reduce_isa_choose(0, &name, &downgraded);
  ck_assert_int_eq(downgraded, 0);
  braid_reduce_copy_fn c = braid_reduce_isa_choose(3, &name, &downgraded);
  ck_assert_ptr_eq(a, c); /* AUTO: the widest */
  ck_assert_int_eq(downgraded, c != braid_reduce_copy_avx512);
  ck_assert_str_eq(name, c == braid_reduce_copy_avx512 ? "AVX512" : c == braid_reduce_copy_avx2 ? "AVX2" : "SSE2");
  braid_reduce_copy_fn b = braid_reduce_isa_choose(2, &name, &downgraded);
  ck_assert_int_eq(downgraded, b == braid_reduce_copy_sse2);
  ck_assert_str_eq(name, b == braid_reduce_copy_avx2 ? "AVX2" : "SSE2");
  if (c == braid_reduce_copy_avx512) ck_assert_ptr_eq(b, braid_reduce_copy_avx2);
}
END_TEST

/* Streaming stores (reduce_stream.c): the blocked, non-temporal version of each ISA's loops
 * against the loops themselves, bit for bit, every datatype x kind, lengths around the block
 * (8 KiB) and the 16-byte store width, misaligned outputs, in place, two destinations, every
 * pre/post flag; bytes around the output untouched. The two-NaN payload exception of
 * isa_identical only (the block's alignment may move an element between scalar and vector code). */
START_TEST(test_reduce_stream_identical) {
  const struct dt* t = &dts[_i / BRAID_NUM_REDKINDS];
  const int kind = _i % BRAID_NUM_REDKINDS;
  const char* name;
  int downgraded;
  braid_reduce_copy_fn fn = braid_reduce_isa_choose(_i % 4, &name, &downgraded); /* AUTO SSE2 AVX2 AVX512 */
  enum { N = 8192 + 77, OFF = 17 };
  static uint8_t a[(N + OFF) * 8], b[(N + OFF) * 8], d0[2][(N + OFF) * 8], d1[2][(N + OFF) * 8];
  const size_t ns[] = {1, 3, 64 / t->size + 1, 4096 / t->size, 8192 / t->size - 1, 8192 / t->size + 5, N};
  ref_tables();
  rng_state = 0x51ed27a9u + (uint64_t)_i;
  for (size_t i = 0; i < N + OFF; i++) {
    uint64_t va = gen(t, i), vb = gen(t, i + 7);
    memcpy(a + i * t->size, &va, t->size);
    memcpy(b + i * t->size, &vb, t->size);
  }
  int variant = 0;
  for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
    for (int off = 0; off < 3; off++)
      for (int flags = 0; flags < 16; flags++) {
        int pre0 = flags & 1, pre1 = flags >> 1 & 1, post = flags >> 2 & 1, inplace = flags >> 3 & 1;
        size_t n = ns[k], o = (size_t)(off == 2 ? 5 : off) * t->size + (off == 2), bytes = (N + OFF) * (size_t)t->size;
        struct braid_redop op = {
            .kind = (uint8_t)kind, .dtype = (uint8_t)t->id, .scalar = pick_scalar(t, kind, variant++)};
        for (int v = 0; v < 2; v++) {
          memset(d0[v], 0x5a, bytes);
          memset(d1[v], 0xa5, bytes);
          void* second = k % 2 ? d1[v] + o : NULL;
          const void* s0 = a + o;
          if (inplace) memcpy(d0[v], a, bytes), s0 = d0[v] + o;
          if (v == 0)
            fn(&op, d0[v] + o, second, s0, pre0, b + o, pre1, post, n);
          else
            braid_reduce_copy_streamed(fn, t->size, &op, d0[v] + o, second, s0, pre0, b + o, pre1, post, n);
        }
        for (size_t e = 0; e < bytes; e++)
          for (int w = 0; w < 2; w++) {
            const uint8_t *x = w ? d1[0] : d0[0], *y = w ? d1[1] : d0[1];
            if (x[e] == y[e]) continue;
            size_t el = (e - o % t->size) / t->size; /* the element holding byte e */
            int fl = t->cls != CL_INT && t->cls != CL_UINT;
            int nans = fl && e >= o && isnan(fdecode(t, load(x + o, t->size, (e - o) / t->size))) &&
                       isnan(fdecode(t, load(y + o, t->size, (e - o) / t->size))) &&
                       isnan(fdecode(t, load(a + o, t->size, (e - o) / t->size))) &&
                       isnan(fdecode(t, load(b + o, t->size, (e - o) / t->size)));
            ck_assert_msg(nans,
                          "%s %s %s n=%zu off=%zu pre=%d/%d post=%d in place=%d: streamed differs at byte %zu (element "
                          "~%zu) of dst%d: %#x vs %#x",
                          name, t->name, kind_names[kind], n, o, pre0, pre1, post, inplace, e, el, w, x[e], y[e]);
          }
      }
}
END_TEST

/* The window: a destination inside a call's output of at least the threshold streams; one
 * outside it, a piece under 4 KiB, another element size, or a closed window does not;
 * BRAID_STREAM_BYTES=0 never streams. */
START_TEST(test_reduce_stream_window) {
  static char out[1 << 16], other[1 << 16];
  struct braid_redop f32 = {.kind = BRAID_RED_SUM, .dtype = 7}, f64 = {.kind = BRAID_RED_SUM, .dtype = 8};
  setenv("BRAID_STREAM_BYTES", "32768", 1);
  braid_param_reload();
  braid_reduce_stream_reset();
  ck_assert_int_eq(braid_reduce_stream_threshold(), 32768);
  braid_reduce_stream_open(out, 16384, 4); /* under the threshold */
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 4096), 0);
  braid_reduce_stream_open(out, sizeof(out), 4);
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 4096), 4);
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out + 8192, 1024), 4);
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 1023), 0);   /* under 4 KiB */
  ck_assert_int_eq(braid_reduce_stream_take(&f64, out, 4096), 0);   /* not the call's element */
  ck_assert_int_eq(braid_reduce_stream_take(&f32, other, 4096), 0); /* a slot, not the output */
  braid_reduce_stream_hold(1);                                      /* an output the peer reads next */
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 4096), 0);
  braid_reduce_stream_hold(0);
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 4096), 4);
  braid_reduce_stream_close();
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 4096), 0);
  setenv("BRAID_STREAM_BYTES", "0", 1);
  braid_param_reload();
  braid_reduce_stream_reset();
  ck_assert_int_eq(braid_reduce_stream_threshold(), 0);
  braid_reduce_stream_open(out, sizeof(out), 4);
  ck_assert_int_eq(braid_reduce_stream_take(&f32, out, 4096), 0);
  unsetenv("BRAID_STREAM_BYTES");
  braid_param_reload();
  braid_reduce_stream_reset();
  ck_assert_int_ge(braid_reduce_stream_threshold(), 0);
}
END_TEST

START_TEST(test_reduce_pack64) {
  /* the register form against the same reference, all datatypes x kinds x flags */
  ref_tables();
  rng_state = 0xabcdef0123456789ull;
  for (int d = 0; d < NDT; d++) {
    const struct dt* t = &dts[d];
    const int per = 8 / t->size;
    for (int kind = 0; kind < BRAID_NUM_REDKINDS; kind++)
      for (int flags = 0; flags < 16; flags++)
        for (int it = 0; it < 40; it++) {
          int pre0 = flags & 1, pre1 = flags >> 1 & 1, post = flags >> 2 & 1, has_b = flags >> 3 & 1;
          uint64_t a = 0, b = 0, sc = pick_scalar(t, kind, it);
          for (int e = 0; e < per; e++) {
            a |= gen(t, (size_t)(it * per + e)) << (8 * t->size * e);
            b |= gen(t, (size_t)(it * per + e + 5)) << (8 * t->size * e);
          }
          struct braid_redop op = {.kind = (uint8_t)kind, .dtype = (uint8_t)t->id, .scalar = sc};
          uint64_t r = braid_reduce_pack64(&op, a, pre0, has_b ? &b : NULL, pre1, post);
          for (int e = 0; e < per; e++) {
            int any_nan;
            uint64_t want =
                ref_elem(t, kind, load(&a, t->size, e), pre0, has_b, load(&b, t->size, e), pre1, post, sc, &any_nan);
            uint64_t got = load(&r, t->size, e);
            EXPECT(any_nan ? isnan(fdecode(t, got)) : got == want, "pack64 %s %s flags=%d: elt %d 0x%llx want 0x%llx",
                   t->name, kind_names[kind], flags, e, (unsigned long long)got, (unsigned long long)want);
          }
        }
  }
}
END_TEST

START_TEST(test_reduce_threads) {
  /* The element loops as a GPU block runs them: thread t of nt takes i = t, t + nt, ...
   * Simulated by calling the per-layout loops once per thread: the union must equal the
   * single-thread result (checked against the reference above), nothing past n written. */
  static const size_t nts[] = {2, 3, 5, 32, 256}, ns[] = {0, 1, 7, 1023};
  ref_tables();
  static float a[1031], b[1031], d[1031], want[1031];
  static uint16_t ha[1031], hb[1031], hd[1031], hwant[1031];
  const uint16_t s16 = braid_fp_f32_to_f16(0.75f);
  rng_state = 42;
  for (int i = 0; i < 1031; i++) {
    a[i] = (float)(int)(rng() % 2001) / 7.0f, b[i] = (float)(int)(rng() % 3001) / 3.0f;
    ha[i] = (uint16_t)rng(), hb[i] = (uint16_t)rng();
  }
  for (size_t k = 0; k < 4; k++) {
    const size_t n = ns[k];
    struct braid_redop sum = {.kind = BRAID_RED_SUM, .dtype = 7},
                       pms = {.kind = BRAID_RED_PREMULSUM, .dtype = 6, .scalar = s16};
    for (int i = 0; i < 1031; i++) want[i] = -1.0f, hwant[i] = 0x7777;
    braid_reduce_copy(&sum, want, NULL, a, 0, b, 0, 0, n);
    braid_reduce_copy(&pms, hwant, NULL, ha, 1, hb, 0, 0, n);
    for (size_t j = 0; j < sizeof(nts) / sizeof(nts[0]); j++) {
      const size_t nt = nts[j];
      for (int layout = 0; layout < 3; layout++) {
        for (int i = 0; i < 1031; i++) d[i] = layout == 1 ? a[i] : -1.0f, hd[i] = 0x7777;
        for (size_t t = 0; t < nt; t++) {
          if (layout == 0) braid_red_d_ADD_f32(d, NULL, a, b, n, t, nt, 1.0f, 1.0f, 1.0f);
          if (layout == 1) braid_red_ip_ADD_f32(d, NULL, b, n, t, nt, 1.0f, 1.0f, 1.0f);
          if (layout == 2) braid_red_g_ADD_f32(d, NULL, a, b, n, t, nt, 1.0f, 1.0f, 1.0f);
          braid_red_d_PMS_f16(hd, NULL, ha, hb, n, t, nt, 0.75f, 1.0f, 1.0f);
        }
        for (size_t i = 0; i < n + 8; i++) {
          float w = i < n ? want[i] : layout == 1 ? a[i] : -1.0f;
          EXPECT(memcmp(&d[i], &w, 4) == 0, "nt=%zu n=%zu layout %d: d[%zu]=%g want %g", nt, n, layout, i, d[i], w);
          EXPECT(hd[i] == hwant[i] || (is_nan_code(F16, hd[i]) && is_nan_code(F16, hwant[i])),
                 "nt=%zu n=%zu: half d[%zu]=0x%x want 0x%x", nt, n, i, hd[i], hwant[i]); /* NaN: any */
        }
      }
    }
  }
}
END_TEST

START_TEST(test_reduce_bad_op_and_scalars) {
  uint32_t src[4] = {1, 2, 3, 4}, dst[4] = {9, 9, 9, 9};
  struct braid_redop bad_kind = {.kind = BRAID_NUM_REDKINDS, .dtype = 7}, bad_type = {.kind = 0, .dtype = 12};
  ref_tables();
  braid_reduce_copy(&bad_kind, dst, NULL, src, 0, src, 0, 0, 4);
  braid_reduce_copy(&bad_type, dst, NULL, src, 0, src, 0, 0, 4);
  ck_assert_uint_eq(dst[0], 9); /* nothing written */
  ck_assert_uint_eq(braid_reduce_pack64(&bad_type, 42, 0, NULL, 0, 0), 42);
  /* integers: truncation toward zero, clamping, NaN -> 0, zero-extended bits */
  ck_assert_uint_eq(braid_redop_scalar_from_double(0, -3.7), 0xfd);
  ck_assert_uint_eq(braid_redop_scalar_from_double(0, 1e9), 0x7f);
  ck_assert_uint_eq(braid_redop_scalar_from_double(1, -5), 0);
  ck_assert_uint_eq(braid_redop_scalar_from_double(2, -2.5), 0xfffffffeull);
  ck_assert_uint_eq(braid_redop_scalar_from_double(3, 1e20), 0xffffffffull);
  ck_assert_uint_eq(braid_redop_scalar_from_double(4, -1e30), 0x8000000000000000ull);
  ck_assert_uint_eq(braid_redop_scalar_from_double(5, 1e30), UINT64_MAX);
  ck_assert_uint_eq(braid_redop_scalar_from_double(4, NAN), 0);
  ck_assert_uint_eq(braid_redop_scalar_from_double(7, 0.125), 0x3e000000u);
  ck_assert_uint_eq(braid_redop_scalar_from_double(8, 0.125), 0x3fc0000000000000ull);
  ck_assert_uint_eq(braid_redop_scalar_from_double(6, 1.0 / 3), 0x3555);
  ck_assert_uint_eq(braid_redop_scalar_from_double(9, 1.0 / 3), 0x3eab);
  ck_assert_uint_eq(braid_redop_scalar_from_double(10, 1.0 / 3), 0x2b);
  ck_assert_uint_eq(braid_redop_scalar_from_double(11, 1.0 / 3), 0x35);
  ck_assert_uint_eq(braid_redop_scalar_from_double(12, 1.0), 0);
  for (int k = 0; k < NFMT; k++) /* float scalars round once from the double */
    for (int it = 0; it < 1000; it++) {
      double v = ldexp((double)(rng() >> 11), -(int)(rng() % 80));
      int ids[NFMT] = {6, 9, 10, 11};
      check_encode(k, v, (uint32_t)braid_redop_scalar_from_double(ids[k], v), "scalar_from_double");
    }
}
END_TEST

START_TEST(test_simt_host) {
  volatile uint64_t cell[2] __attribute__((aligned(16))) = {0, 0};
  uint64_t lo, hi;
  uint32_t spins = 0;
  ck_assert_int_eq(simt_tid(), 0);
  ck_assert_int_eq(simt_nthreads(), 1);
  simt_bar_sync();
  simt_fence_release();
  simt_fence_acquire();
  simt_st_release_u64(&cell[0], 7);
  ck_assert_uint_eq(simt_ld_acquire_u64(&cell[0]), 7);
  simt_st_volatile_u64(&cell[1], 9);
  ck_assert_uint_eq(simt_ld_volatile_u64(&cell[1]), 9);
  simt_st_volatile_u64x2(cell, 0x1111, 0x2222);
  simt_ld_volatile_u64x2(cell, &lo, &hi);
  ck_assert(lo == 0x1111 && hi == 0x2222 && cell[0] == 0x1111 && cell[1] == 0x2222);
  for (int i = 0; i < BRAID_SPIN_BEFORE_YIELD + 10; i++) simt_spin_pause(&spins); /* pause, then yield */
  ck_assert_uint_eq(spins, BRAID_SPIN_BEFORE_YIELD + 10);
  spins = UINT32_MAX - 1;
  simt_spin_pause(&spins);
  simt_spin_pause(&spins);
  ck_assert_uint_eq(spins, BRAID_SPIN_WRAP); /* past every threshold, low byte 0: checks go on */
  ck_assert_int_eq(simt_bar_or(0), 0);
  ck_assert_int_eq(simt_bar_or(5), 1);
  ck_assert_int_eq(simt_warp_any(0), 0);
  ck_assert_int_eq(simt_warp_any(1), 1);
  uint64_t w[2] = {1, 2}, r[2] = {0, 0};
  char buf[48] __attribute__((aligned(16)));
  simt_st_v16(buf + 16, w);
  simt_ld_v16(buf + 16, r);
  ck_assert(r[0] == 1 && r[1] == 2);
}
END_TEST

/* The loops of a multi-thread worker (16-byte packs with element head and tail), as the GPU
 * runs them: thread t of nt calls the same function; the union of their parts must equal the
 * single-thread result, whatever the pointers' offsets within 16 bytes (equal offsets take
 * packs, different ones the element loop), in place too, nothing past n written. */
START_TEST(test_reduce_packs) {
  static const size_t nts[] = {2, 32, 64}, ns[] = {0, 1, 5, 33, 1000};
#define A16 __attribute__((aligned(16)))
  static float a[1100] A16, b[1100] A16, want[1100] A16, d[1100] A16;
  static uint16_t ha[1100] A16, hb[1100] A16, hwant[1100] A16, hd[1100] A16;
  static uint8_t qa[1100] A16, qb[1100] A16, qd[1100] A16, qwant[1100] A16;
  const uint16_t s16 = braid_fp_f32_to_f16(0.75f);
  struct braid_redop sum = {.kind = BRAID_RED_SUM, .dtype = 7},
                     pms = {.kind = BRAID_RED_PREMULSUM, .dtype = 6, .scalar = s16};
  struct braid_redop mx = {.kind = BRAID_RED_MAX, .dtype = 10};
  rng_state = 7;
  for (int i = 0; i < 1100; i++) {
    a[i] = (float)(int)(rng() % 2001) / 7.0f, b[i] = (float)(int)(rng() % 3001) / 3.0f;
    ha[i] = (uint16_t)(rng() & 0x7bff), hb[i] = (uint16_t)(rng() & 0x7bff), qa[i] = (uint8_t)(rng() & 0x77),
    qb[i] = (uint8_t)(rng() & 0x77);
  }
  for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
    for (int off = 0; off < 3; off++) { /* off 0: all aligned; 1: all at +4 bytes; 2: output at +4 only */
      const size_t n = ns[k], oi = off == 1 ? 1 : 0, oo = off >= 1 ? 1 : 0;
      braid_reduce_copy(&sum, want, NULL, a + oi, 0, b + oi, 0, 0, n);
      braid_reduce_copy(&pms, hwant, NULL, ha + 2 * oi, 1, hb + 2 * oi, 0, 0, n);
      braid_reduce_copy(&mx, qwant, NULL, qa + 4 * oi, 0, qb + 4 * oi, 0, 0, n);
      for (size_t j = 0; j < sizeof(nts) / sizeof(nts[0]); j++) {
        const size_t nt = nts[j];
        for (int i = 0; i < 1100; i++) d[i] = -1.0f, hd[i] = 0x7777, qd[i] = 0x55;
        for (size_t t = 0; t < nt; t++) {
          braid_reduce_copy_part_f32(&sum, d + oo, NULL, a + oi, 0, b + oi, 0, 0, n, t, nt);
          braid_reduce_copy_part_f16(&pms, hd + 2 * oo, NULL, ha + 2 * oi, 1, hb + 2 * oi, 0, 0, n, t, nt);
          braid_reduce_copy_part_f8e4m3(&mx, qd + 4 * oo, NULL, qa + 4 * oi, 0, qb + 4 * oi, 0, 0, n, t, nt);
        }
        for (size_t i = 0; i < n + 8; i++) {
          float w = i < n ? want[i] : -1.0f;
          EXPECT(memcmp(&d[i + oo], &w, 4) == 0, "nt=%zu n=%zu off %d: d[%zu]=%g want %g", nt, n, off, i, d[i + oo], w);
          EXPECT(hd[i + 2 * oo] == (i < n ? hwant[i] : 0x7777), "nt=%zu n=%zu off %d: half d[%zu]=0x%x want 0x%x", nt,
                 n, off, i, hd[i + 2 * oo], hwant[i]);
          EXPECT(qd[i + 4 * oo] == (i < n ? qwant[i] : 0x55), "nt=%zu n=%zu off %d: fp8 d[%zu]=0x%x want 0x%x", nt, n,
                 off, i, qd[i + 4 * oo], qwant[i]);
        }
        /* in place: d = d + b */
        for (size_t i = 0; i < n && i < 1000; i++) d[i + oi] = a[i + oi];
        for (size_t t = 0; t < nt; t++)
          braid_reduce_copy_part_f32(&sum, d + oi, NULL, d + oi, 0, b + oi, 0, 0, n, t, nt);
        for (size_t i = 0; i < n; i++)
          EXPECT(memcmp(&d[i + oi], &want[i], 4) == 0, "in place nt=%zu n=%zu: d[%zu]=%g want %g", nt, n, i, d[i + oi],
                 want[i]);
      }
    }
}
END_TEST

/* Copies (no second source) with every aliasing the primitives make: to one or two outputs,
 * and in place on the first output (a copy-and-send of data already in the output: only the
 * second output is written), through the generic loop and the host's chosen ISA. */
START_TEST(test_reduce_copy_aliases) {
  enum { N = 5000 };
  static uint32_t src[N], d0[N], d1[N];
  struct braid_redop cp = {.kind = BRAID_RED_SUM, .dtype = 3}; /* uint32 */
  for (int path = 0; path < 2; path++)
    for (int form = 0; form < 4; form++) {
      for (uint32_t i = 0; i < N; i++) src[i] = i * 2654435761u, d0[i] = 0xd0d0d0d0u, d1[i] = 0xd1d1d1d1u;
      uint32_t* dst0 = form >= 2 ? src : d0; /* 2, 3: in place on dst0 */
      uint32_t* dst1 = form % 2 ? d1 : NULL;
      if (path == 0)
        braid_reduce_copy(&cp, dst0, dst1, src, 0, NULL, 0, 0, N);
      else
        braid_reduce_copy_host(&cp, dst0, dst1, src, 0, NULL, 0, 0, N);
      for (uint32_t i = 0; i < N; i++) {
        uint32_t want = i * 2654435761u;
        EXPECT(src[i] == want, "path %d form %d: src[%u] = 0x%x, want 0x%x", path, form, i, src[i], want);
        EXPECT(d0[i] == (form < 2 ? want : 0xd0d0d0d0u), "path %d form %d: dst0[%u] = 0x%x", path, form, i, d0[i]);
        EXPECT(d1[i] == (form % 2 ? want : 0xd1d1d1d1u), "path %d form %d: dst1[%u] = 0x%x", path, form, i, d1[i]);
      }
    }
}
END_TEST

Suite* reduce_suite(void) {
  Suite* s = suite_create("reduce");
  TCase* tc = tcase_create("fp");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fp_decode_roundtrip);
  tcase_add_test(tc, test_fp_encode_structured);
  tcase_add_test(tc, test_fp_encode_random);
  tcase_add_test(tc, test_fp_special_cases);
  suite_add_tcase(s, tc);
  tc = tcase_create("kinds");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_reduce_kind, 0, NDT * BRAID_NUM_REDKINDS);
  suite_add_tcase(s, tc);
  tc = tcase_create("isa");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_reduce_isa_identical, 0, NDT * BRAID_NUM_REDKINDS);
  tcase_add_test(tc, test_reduce_isa_choose);
  tcase_add_loop_test(tc, test_reduce_stream_identical, 0, NDT * BRAID_NUM_REDKINDS);
  tcase_add_test(tc, test_reduce_stream_window);
  suite_add_tcase(s, tc);
  tc = tcase_create("misc");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_reduce_pack64);
  tcase_add_test(tc, test_reduce_threads);
  tcase_add_test(tc, test_reduce_packs);
  tcase_add_test(tc, test_reduce_copy_aliases);
  tcase_add_test(tc, test_reduce_bad_op_and_scalars);
  tcase_add_test(tc, test_simt_host);
  suite_add_tcase(s, tc);
  return s;
}
