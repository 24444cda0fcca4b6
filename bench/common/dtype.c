/*
 * dtype.c - datatype names, sizes and float conversions for the benchmarks (see dtype.h).
 *
 * The narrow floating types are handled by one parameterised codec: sign bit, `ebits` of
 * biased exponent, `mbits` of mantissa. half and bfloat16 and fp8 e5m2 follow IEEE 754
 * (all-ones exponent = inf/NaN); fp8 e4m3 is the "fn" variant NVIDIA uses: no infinities,
 * only S.1111.111 is NaN, largest finite 448.
 */
#include "dtype.h"

#include <math.h>
#include <string.h>

enum kind { K_SINT, K_UINT, K_FLOAT };

struct dtype_info {
  const char* name; /* nccl-tests spelling */
  size_t size;      /* bytes */
  enum kind kind;
  int ebits, mbits; /* exponent and mantissa bits (floating types) */
  int bias;         /* exponent bias */
  int ieee;         /* 1: all-ones exponent is inf/NaN; 0: e4m3fn rules */
  uint64_t exact;   /* largest B with all integers in [-B, B] exact */
  int max_exp2;     /* largest finite power of two */
};

/* Indexed by ncclDataType_t. */
static const struct dtype_info infos[BENCH_NUM_DTYPES] = {
    {"int8", 1, K_SINT, 0, 0, 0, 0, 0, 0},
    {"uint8", 1, K_UINT, 0, 0, 0, 0, 0, 0},
    {"int32", 4, K_SINT, 0, 0, 0, 0, 0, 0},
    {"uint32", 4, K_UINT, 0, 0, 0, 0, 0, 0},
    {"int64", 8, K_SINT, 0, 0, 0, 0, 0, 0},
    {"uint64", 8, K_UINT, 0, 0, 0, 0, 0, 0},
    {"half", 2, K_FLOAT, 5, 10, 15, 1, 2048, 15},
    {"float", 4, K_FLOAT, 8, 23, 127, 1, 1ull << 24, 127},
    {"double", 8, K_FLOAT, 11, 52, 1023, 1, 1ull << 53, 1023},
    {"bfloat16", 2, K_FLOAT, 8, 7, 127, 1, 256, 127},
    {"f8e4m3", 1, K_FLOAT, 4, 3, 7, 0, 16, 8},
    {"f8e5m2", 1, K_FLOAT, 5, 2, 15, 1, 8, 15},
};

static const struct dtype_info* info(int dt) {
  return (dt >= 0 && dt < BENCH_NUM_DTYPES) ? &infos[dt] : NULL;
}

const char* bench_dtype_name(int dt) {
  return info(dt) ? info(dt)->name : NULL;
}

int bench_dtype_from_name(const char* name) {
  for (int dt = 0; dt < BENCH_NUM_DTYPES; dt++)
    if (strcmp(infos[dt].name, name) == 0) return dt;
  return -1;
}

size_t bench_dtype_size(int dt) {
  return info(dt) ? info(dt)->size : 0;
}
int bench_dtype_is_float(int dt) {
  return info(dt) && info(dt)->kind == K_FLOAT;
}
int bench_dtype_is_signed_int(int dt) {
  return info(dt) && info(dt)->kind == K_SINT;
}
uint64_t bench_dtype_exact_int(int dt) {
  return bench_dtype_is_float(dt) ? infos[dt].exact : 0;
}
int bench_dtype_max_exp2(int dt) {
  return bench_dtype_is_float(dt) ? infos[dt].max_exp2 : 0;
}

uint64_t bench_dtype_load_bits(int dt, const void* elem) {
  uint64_t bits = 0;
  memcpy(&bits, elem, bench_dtype_size(dt)); /* little-endian hosts only, as NCCL */
  return bits;
}

void bench_dtype_store_bits(int dt, uint64_t bits, void* elem) {
  memcpy(elem, &bits, bench_dtype_size(dt));
}

/* The narrow formats: bits -> double. */
static double mini_decode(const struct dtype_info* f, uint64_t bits) {
  uint64_t mmask = (1ull << f->mbits) - 1, emax = (1ull << f->ebits) - 1;
  uint64_t mant = bits & mmask, exp = (bits >> f->mbits) & emax;
  int neg = (int)((bits >> (f->mbits + f->ebits)) & 1);
  double v;
  if (f->ieee && exp == emax)
    v = mant ? NAN : INFINITY;
  else if (!f->ieee && exp == emax && mant == mmask)
    v = NAN;
  else if (exp == 0)
    v = ldexp((double)mant, 1 - f->bias - f->mbits);
  else
    v = ldexp((double)(mant | (1ull << f->mbits)), (int)exp - f->bias - f->mbits);
  return neg ? -v : v;
}

/* The narrow formats: double -> bits, round to nearest even. */
static uint64_t mini_encode(const struct dtype_info* f, double v) {
  uint64_t sign = signbit(v) ? 1ull << (f->ebits + f->mbits) : 0;
  uint64_t emax = (1ull << f->ebits) - 1, one = 1ull << f->mbits;
  double a = fabs(v);
  if (isnan(v)) return f->ieee ? (emax << f->mbits) | (one >> 1) : sign | (emax << f->mbits) | (one - 1);
  if (a == 0) return sign;
  int e2;
  frexp(a, &e2);
  int biased = e2 - 1 + f->bias; /* a in [2^(e2-1), 2^e2) */
  uint64_t field;
  if (biased >= 1) {
    double m = rint(ldexp(a, f->mbits - (e2 - 1))); /* in [2^mbits, 2^(mbits+1)] */
    if (m >= (double)(2 * one)) {
      biased++;
      m /= 2;
    }
    field = (uint64_t)m - one;
  } else {
    double m = rint(ldexp(a, f->mbits - (1 - f->bias))); /* in subnormal units */
    biased = m >= (double)one ? 1 : 0;
    field = (uint64_t)m - (biased ? one : 0);
  }
  if (f->ieee && (uint64_t)biased >= emax) return sign | (emax << f->mbits); /* inf */
  if (!f->ieee && ((uint64_t)biased > emax || ((uint64_t)biased == emax && field == one - 1)))
    return sign | (emax << f->mbits) | (one - 2); /* e4m3fn saturates at 448 */
  return sign | ((uint64_t)biased << f->mbits) | field;
}

double bench_dtype_decode(int dt, const void* elem) {
  const struct dtype_info* f = info(dt);
  if (!f || f->kind != K_FLOAT) return 0;
  if (f->size == 4) {
    float x;
    memcpy(&x, elem, 4);
    return x;
  }
  if (f->size == 8) {
    double x;
    memcpy(&x, elem, 8);
    return x;
  }
  return mini_decode(f, bench_dtype_load_bits(dt, elem));
}

void bench_dtype_encode(int dt, double v, void* elem) {
  const struct dtype_info* f = info(dt);
  if (!f || f->kind != K_FLOAT) return;
  if (f->size == 4) {
    float x = (float)v;
    memcpy(elem, &x, 4);
  } else if (f->size == 8) {
    memcpy(elem, &v, 8);
  } else {
    bench_dtype_store_bits(dt, mini_encode(f, v), elem);
  }
}

double bench_dtype_ulp(int dt, double v) {
  const struct dtype_info* f = info(dt);
  if (!f || f->kind != K_FLOAT) return 1;
  double a = fabs(v), min_normal = ldexp(1, 1 - f->bias);
  if (a < min_normal) return ldexp(1, 1 - f->bias - f->mbits);
  int e2;
  frexp(a, &e2);
  return ldexp(1, e2 - 1 - f->mbits);
}
