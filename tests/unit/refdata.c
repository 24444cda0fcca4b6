/*
 * refdata.c - inputs and the independent reference of the collective tests (refdata.h).
 *
 * Written without src/kernels: the narrow floating formats are decoded and encoded here from
 * their definitions (sign, exponent bits, mantissa bits, bias; e4m3 has no infinity and one NaN
 * pattern per sign), and reductions run in double or in uint64_t modular arithmetic.
 * Floating inputs take few distinct values, so each rank's element is a hash of (seed, rank,
 * index) mapped to an index into a small table of exactly representable values.
 */
#include "refdata.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- datatypes ---- */

static const char* const dtype_names[REF_NUM_DTYPES] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                                        "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
static const size_t dtype_sizes[REF_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char* const op_names[REF_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "premulsum", "premulsum-ptr"};

size_t ref_dtype_size(int dtype) {
  return dtype >= 0 && dtype < REF_NUM_DTYPES ? dtype_sizes[dtype] : 0;
}
const char* ref_dtype_name(int dtype) {
  return dtype >= 0 && dtype < REF_NUM_DTYPES ? dtype_names[dtype] : "?";
}
const char* ref_op_name(int op) {
  return op >= 0 && op < REF_NUM_OPS ? op_names[op] : "?";
}
int ref_dtype_is_float(int dtype) {
  return dtype >= ncclFloat16 && dtype < REF_NUM_DTYPES;
}
static int dtype_is_signed(int dtype) {
  return dtype == ncclInt8 || dtype == ncclInt32 || dtype == ncclInt64;
}

enum ref_kind ref_kind_of(int op) {
  if (op == REF_PROD) return REF_KIND_PROD;
  if (op == REF_MAX || op == REF_MIN) return REF_KIND_MINMAX;
  return REF_KIND_SUM;
}

/* ---- narrow floating formats ---- */

struct fmt {
  int ebits, mbits, bias;
  int ieee; /* has infinities (all-ones exponent = inf/NaN); else e4m3 style: only S.1111.111 is NaN */
  int saturate;
};
static const struct fmt fmt_f16 = {5, 10, 15, 1, 0};
static const struct fmt fmt_bf16 = {8, 7, 127, 1, 0};
static const struct fmt fmt_e4m3 = {4, 3, 7, 0, 1};
static const struct fmt fmt_e5m2 = {5, 2, 15, 1, 1};

static const struct fmt* fmt_of(int dtype) {
  switch (dtype) {
    case ncclFloat16:
      return &fmt_f16;
    case ncclBfloat16:
      return &fmt_bf16;
    case ncclFloat8e4m3:
      return &fmt_e4m3;
    case ncclFloat8e5m2:
      return &fmt_e5m2;
  }
  return NULL;
}

static double fmt_decode(const struct fmt* f, uint32_t bits) {
  uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  int sign = (bits >> (f->ebits + f->mbits)) & 1;
  uint32_t e = (bits >> f->mbits) & emax, m = bits & mmask;
  double v;
  if (f->ieee && e == emax)
    v = m ? NAN : INFINITY;
  else if (!f->ieee && e == emax && m == mmask)
    v = NAN;
  else if (e == 0)
    v = ldexp((double)m, 1 - f->bias - f->mbits);
  else
    v = ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
  return sign ? -v : v;
}

/* Largest finite magnitude's bit pattern (no sign). */
static uint32_t fmt_max_finite(const struct fmt* f) {
  uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  return f->ieee ? ((emax - 1) << f->mbits) | mmask : (emax << f->mbits) | (mmask - 1);
}

static uint32_t fmt_encode(const struct fmt* f, double v) {
  uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
  uint32_t emax = (1u << f->ebits) - 1, one = 1u << f->mbits;
  if (isnan(v)) return sign | (f->ieee ? (emax << f->mbits) | (one >> 1) : (emax << f->mbits) | (one - 1));
  double a = fabs(v);
  uint32_t maxf = fmt_max_finite(f), bits;
  if (a == 0) return sign;
  if (isinf(a)) {
    bits = f->saturate ? maxf : emax << f->mbits;
    return sign | bits;
  }
  int e2;
  frexp(a, &e2);
  int e = e2 - 1, emin = 1 - f->bias;
  if (e < emin) {
    double q = rint(ldexp(a, f->mbits - emin)); /* units of the smallest subnormal; ties to even */
    bits = (uint32_t)q;                         /* q == one encodes the smallest normal */
  } else {
    double q = rint(ldexp(a, f->mbits - e)); /* in [one, 2 * one] */
    if (q >= 2.0 * one) {
      q /= 2;
      e++;
    }
    uint64_t biased = (uint64_t)(e + f->bias);
    bits = biased > emax ? maxf + 1 : (uint32_t)((biased << f->mbits) | ((uint32_t)q - one)); /* maxf + 1: overflow */
  }
  if (bits > maxf) bits = f->saturate ? maxf : emax << f->mbits;
  return sign | bits;
}

double ref_to_double(int dtype, const void* elem) {
  switch (dtype) {
    case ncclFloat32: {
      float x;
      memcpy(&x, elem, sizeof(x));
      return x;
    }
    case ncclFloat64: {
      double x;
      memcpy(&x, elem, sizeof(x));
      return x;
    }
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t b;
      memcpy(&b, elem, sizeof(b));
      return fmt_decode(fmt_of(dtype), b);
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return fmt_decode(fmt_of(dtype), *(const uint8_t*)elem);
  }
  return NAN;
}

void ref_from_double(int dtype, double v, void* elem) {
  switch (dtype) {
    case ncclFloat32: {
      float x = (float)v;
      memcpy(elem, &x, sizeof(x));
      return;
    }
    case ncclFloat64:
      memcpy(elem, &v, sizeof(v));
      return;
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t b = (uint16_t)fmt_encode(fmt_of(dtype), v);
      memcpy(elem, &b, sizeof(b));
      return;
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      *(uint8_t*)elem = (uint8_t)fmt_encode(fmt_of(dtype), v);
      return;
  }
}

/* Machine epsilon (2^-mantissa bits) and the smallest subnormal of a floating type. */
static double type_eps(int dtype) {
  switch (dtype) {
    case ncclFloat16:
      return ldexp(1, -10);
    case ncclFloat32:
      return ldexp(1, -23);
    case ncclFloat64:
      return ldexp(1, -52);
    case ncclBfloat16:
      return ldexp(1, -7);
    case ncclFloat8e4m3:
      return ldexp(1, -3);
    case ncclFloat8e5m2:
      return ldexp(1, -2);
  }
  return 0;
}
static double type_tiny(int dtype) {
  const struct fmt* f = fmt_of(dtype);
  if (f != NULL) return ldexp(1, 1 - f->bias - f->mbits);
  return dtype == ncclFloat32 ? ldexp(1, -149) : ldexp(1, -1074);
}

/* ---- integers as raw bits ---- */

static uint64_t width_mask(int dtype) {
  size_t s = ref_dtype_size(dtype);
  return s == 8 ? ~0ull : (1ull << (8 * s)) - 1;
}
static uint64_t int_load(int dtype, const void* elem) {
  uint64_t v = 0;
  memcpy(&v, elem, ref_dtype_size(dtype)); /* little-endian */
  return v;
}
static int64_t int_signed(int dtype, uint64_t v) {
  int bits = 8 * (int)ref_dtype_size(dtype);
  if (bits == 64) return (int64_t)v;
  uint64_t m = 1ull << (bits - 1);
  return (int64_t)((v ^ m) - m);
}
static void int_store(int dtype, uint64_t v, void* elem) {
  memcpy(elem, &v, ref_dtype_size(dtype));
}

/* ---- inputs ---- */

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static const double prod_values[8] = {1, 2, -1, 0.5, -2, -0.5, 1, -1};

static uint64_t input_hash(int dtype, enum ref_kind kind, uint32_t seed, int rank, size_t idx) {
  return mix64(((uint64_t)seed << 40) ^ ((uint64_t)(unsigned)rank << 32) ^ (uint64_t)kind << 60 ^
               mix64(idx ^ ((uint64_t)dtype << 56)));
}

/* Floating inputs take few distinct values: an index into a small set (exact in the type). */
#define NVALUES 129
static int value_index(int dtype, enum ref_kind kind, uint64_t h) {
  if (kind == REF_KIND_PROD) return (int)(h % 8);
  return dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2 ? (int)(h % 17) : (int)(h % NVALUES);
}
static double value_of(int dtype, enum ref_kind kind, int vi) {
  if (kind == REF_KIND_PROD) return prod_values[vi];
  if (dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2) return (double)(vi - 8) / 2; /* -4 .. 4 step 0.5 */
  return (double)(vi - 64) / 4;                                                        /* -16 .. 16 step 0.25 */
}

/* Encoded bits of every value of the narrow types, computed once: [dtype][prod?][index]. */
static uint16_t narrow_bits[REF_NUM_DTYPES][2][NVALUES];
static pthread_once_t narrow_once = PTHREAD_ONCE_INIT;
static void narrow_init(void) {
  static const int narrow[] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (int k = 0; k < 4; k++) {
    int dt = narrow[k];
    for (int p = 0; p < 2; p++) {
      enum ref_kind kind = p ? REF_KIND_PROD : REF_KIND_SUM;
      int nv = p ? 8 : NVALUES;
      for (int vi = 0; vi < nv; vi++) narrow_bits[dt][p][vi] = (uint16_t)fmt_encode(fmt_of(dt), value_of(dt, kind, vi));
    }
  }
}

/* Rank `rank`'s input element as a double (floating types only). */
static double input_value(int dtype, enum ref_kind kind, uint32_t seed, int rank, size_t idx) {
  return value_of(dtype, kind, value_index(dtype, kind, input_hash(dtype, kind, seed, rank, idx)));
}

void ref_input(int dtype, enum ref_kind kind, uint32_t seed, int rank, size_t idx, void* elem) {
  uint64_t h = input_hash(dtype, kind, seed, rank, idx);
  if (!ref_dtype_is_float(dtype)) {
    if (kind == REF_KIND_PROD && (h >> 62) != 0) h |= 1; /* mostly odd: products do not collapse to 0 */
    int_store(dtype, h, elem);
    return;
  }
  int vi = value_index(dtype, kind, h);
  if (dtype == ncclFloat32 || dtype == ncclFloat64) {
    ref_from_double(dtype, value_of(dtype, kind, vi), elem);
    return;
  }
  pthread_once(&narrow_once, narrow_init);
  uint16_t b = narrow_bits[dtype][kind == REF_KIND_PROD][vi];
  if (ref_dtype_size(dtype) == 2)
    memcpy(elem, &b, 2);
  else
    *(uint8_t*)elem = (uint8_t)b;
}

void ref_fill(int dtype, enum ref_kind kind, uint32_t seed, int rank, size_t first, size_t n, void* buf) {
  size_t es = ref_dtype_size(dtype);
  for (size_t i = 0; i < n; i++) ref_input(dtype, kind, seed, rank, first + i, (char*)buf + i * es);
}

void ref_pms_scalar(int dtype, int variant, void* elem) {
  if (ref_dtype_is_float(dtype))
    ref_from_double(dtype, variant == 0 ? 1.5 : -0.5, elem);
  else
    int_store(dtype, (uint64_t)(int64_t)(variant == 0 ? 3 : -2), elem);
}

/* ---- messages ---- */

void ref_format(int dtype, const void* elem, char* buf, size_t len) {
  if (ref_dtype_is_float(dtype)) {
    uint64_t raw = 0;
    memcpy(&raw, elem, ref_dtype_size(dtype));
    snprintf(buf, len, "%.9g (0x%llx)", ref_to_double(dtype, elem), (unsigned long long)raw);
  } else if (dtype_is_signed(dtype)) {
    snprintf(buf, len, "%lld", (long long)int_signed(dtype, int_load(dtype, elem)));
  } else {
    snprintf(buf, len, "%llu", (unsigned long long)int_load(dtype, elem));
  }
}

/* ---- the reference ---- */

/* The expected element (raw bits for integers, value for floating types) and its tolerance. */
struct expect {
  uint64_t bits;
  double value, tol;
};

static void expect_int(const struct ref_red* red, enum ref_kind kind, size_t idx, struct expect* out) {
  int dt = red->dtype, sgn = dtype_is_signed(dt);
  uint64_t acc = 0, x, s = 0;
  unsigned char tmp[8];
  if (red->op == REF_PMS_IMM || red->op == REF_PMS_DEV) {
    ref_pms_scalar(dt, red->op == REF_PMS_DEV, tmp);
    s = (uint64_t)int_signed(dt, int_load(dt, tmp));
  }
  for (int r = 0; r < red->nranks; r++) {
    ref_input(dt, kind, red->seed, r, idx, tmp);
    x = int_load(dt, tmp);
    switch (red->op) {
      case REF_SUM:
      case REF_AVG:
        acc = r ? acc + x : x;
        break;
      case REF_PROD:
        acc = r ? acc * x : x;
        break;
      case REF_MAX:
        if (r == 0 || (sgn ? int_signed(dt, x) > int_signed(dt, acc) : x > acc)) acc = x;
        break;
      case REF_MIN:
        if (r == 0 || (sgn ? int_signed(dt, x) < int_signed(dt, acc) : x < acc)) acc = x;
        break;
      default:
        acc += x * s;
        break;
    }
  }
  acc &= width_mask(dt);
  if (red->op == REF_AVG) {
    if (sgn)
      acc = (uint64_t)(int_signed(dt, acc) / (int64_t)red->nranks);
    else
      acc = acc / (uint64_t)red->nranks;
    acc &= width_mask(dt);
  }
  out->bits = acc;
}

static void expect_float(const struct ref_red* red, enum ref_kind kind, size_t idx, struct expect* out) {
  int dt = red->dtype, n = red->nranks;
  unsigned char tmp[8];
  double s = 1, acc = 0, mag = 0;
  if (red->op == REF_AVG) {
    ref_from_double(dt, 1.0 / n, tmp); /* NCCL: PreMulSum by 1/nranks rounded to the type */
    s = ref_to_double(dt, tmp);
  } else if (red->op == REF_PMS_IMM || red->op == REF_PMS_DEV) {
    ref_pms_scalar(dt, red->op == REF_PMS_DEV, tmp);
    s = ref_to_double(dt, tmp);
  }
  for (int r = 0; r < n; r++) {
    double x = input_value(dt, kind, red->seed, r, idx);
    switch (red->op) {
      case REF_PROD:
        acc = r ? acc * x : x;
        break;
      case REF_MAX:
        acc = r == 0 || x > acc ? x : acc;
        break;
      case REF_MIN:
        acc = r == 0 || x < acc ? x : acc;
        break;
      default:
        acc += x * s;
        mag += fabs(x * s);
        break;
    }
  }
  out->value = acc;
  if (red->op == REF_MAX || red->op == REF_MIN)
    out->tol = 0;
  else if (red->op == REF_PROD)
    out->tol = (n + 1) * type_eps(dt) * fabs(acc);
  else
    out->tol = (n + 1) * type_eps(dt) * mag + n * type_tiny(dt);
}

size_t ref_check_reduce(const struct ref_red* red, size_t first, size_t n, const void* got, char* msg, size_t msglen) {
  int dt = red->dtype;
  size_t es = ref_dtype_size(dt), bad = 0;
  enum ref_kind kind = ref_kind_of(red->op);
  for (size_t i = 0; i < n; i++) {
    const void* g = (const char*)got + i * es;
    struct expect e;
    int wrong;
    if (ref_dtype_is_float(dt)) {
      expect_float(red, kind, first + i, &e);
      double gv = ref_to_double(dt, g);
      wrong = !(fabs(gv - e.value) <= e.tol);
    } else {
      expect_int(red, kind, first + i, &e);
      wrong = int_load(dt, g) != e.bits;
    }
    if (!wrong) continue;
    if (bad++ == 0 && msg != NULL) {
      char gs[64], es_[64];
      unsigned char tmp[8];
      ref_format(dt, g, gs, sizeof(gs));
      if (ref_dtype_is_float(dt)) {
        snprintf(es_, sizeof(es_), "%.9g +- %.3g", e.value, e.tol);
      } else {
        int_store(dt, e.bits, tmp);
        ref_format(dt, tmp, es_, sizeof(es_));
      }
      snprintf(msg, msglen, "%s %s over %d ranks: element %zu (input index %zu): got %s, expected %s",
               ref_dtype_name(dt), ref_op_name(red->op), red->nranks, i, first + i, gs, es_);
    }
  }
  return bad;
}

size_t ref_check_copy(int dtype, enum ref_kind kind, uint32_t seed, int src_rank, size_t first, size_t n,
                      const void* got, char* msg, size_t msglen) {
  size_t es = ref_dtype_size(dtype), bad = 0;
  unsigned char want[8];
  for (size_t i = 0; i < n; i++) {
    const void* g = (const char*)got + i * es;
    ref_input(dtype, kind, seed, src_rank, first + i, want);
    if (memcmp(g, want, es) == 0) continue;
    if (bad++ == 0 && msg != NULL) {
      char gs[64], ws[64];
      ref_format(dtype, g, gs, sizeof(gs));
      ref_format(dtype, want, ws, sizeof(ws));
      snprintf(msg, msglen, "%s: element %zu: got %s, expected %s (rank %d's element %zu)", ref_dtype_name(dtype), i,
               gs, ws, src_rank, first + i);
    }
  }
  return bad;
}

/* ---- guards ---- */

static uint8_t guard_byte(size_t i, uint8_t salt) {
  return (uint8_t)(0x5a ^ salt ^ (i * 37));
}

void ref_guard_fill(void* p, size_t bytes, uint8_t salt) {
  for (size_t i = 0; i < bytes; i++) ((uint8_t*)p)[i] = guard_byte(i, salt);
}

size_t ref_guard_check(const void* p, size_t bytes, uint8_t salt) {
  size_t bad = 0;
  for (size_t i = 0; i < bytes; i++) bad += ((const uint8_t*)p)[i] != guard_byte(i, salt);
  return bad;
}

/* ---- regions, tier, environment ---- */

#define REGION_GUARD 64

int ref_region_alloc(struct ref_region* g, size_t bytes, size_t misalign, uint8_t salt) {
  g->pre = REGION_GUARD + misalign;
  g->bytes = bytes;
  g->salt = salt;
  size_t total = (g->pre + bytes + REGION_GUARD + 63) / 64 * 64;
  g->base = aligned_alloc(64, total);
  if (g->base == NULL) return -1;
  g->p = g->base + g->pre;
  ref_guard_fill(g->base, g->pre, salt);
  ref_guard_fill(g->p + bytes, REGION_GUARD, (uint8_t)(salt + 1));
  ref_guard_fill(g->p, bytes, (uint8_t)(salt + 2));
  return 0;
}

size_t ref_region_guards_bad(const struct ref_region* g) {
  if (g->base == NULL) return 0;
  return ref_guard_check(g->base, g->pre, g->salt) +
         ref_guard_check(g->p + g->bytes, REGION_GUARD, (uint8_t)(g->salt + 1));
}

size_t ref_region_written(const struct ref_region* g) {
  return g->base == NULL ? 0 : ref_guard_check(g->p, g->bytes, (uint8_t)(g->salt + 2));
}

void ref_region_free(struct ref_region* g) {
  free(g->base);
  g->base = NULL;
}

int ref_tier_full(void) {
  const char* t = getenv("BRAID_TEST_TIER");
  return t != NULL && strcmp(t, "full") == 0;
}

void braid_param_reload(void); /* src/base/param.c: re-read the environment (test hook) */

void ref_env_apply(const char* env) {
  if (env == NULL) return;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", env);
  char* save = NULL;
  for (char* tok = strtok_r(buf, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
    char* eq = strchr(tok, '=');
    if (eq == NULL) continue;
    *eq = '\0';
    setenv(tok, eq + 1, 1);
  }
  braid_param_reload();
}
