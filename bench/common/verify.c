/*
 * verify.c - deterministic inputs and exact expected results for the benchmarks (see
 * verify.h for why the results are exact). An element's value depends only on (seed, rank,
 * index): splitmix64 of the index keyed by a per-rank key, then mapped into the value class
 * that suits the (datatype, op, nranks) triple.
 */
#include "verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"

/* Value classes. */
enum {
  CLS_BITS,      /* any bit pattern (floats: never inf/NaN); integer sums, data movement */
  CLS_INT_ODD,   /* odd integers in [-7, 7] (unsigned: 1..7); integer prod */
  CLS_INT_AVG,   /* integers in [0, mag]; integer avg */
  CLS_FLT_SUM,   /* integers in [-mag, mag], sparse with q; float sum and mulsum */
  CLS_FLT_PROD,  /* +-1, or +-2 where (index + rank) % q == 0; float prod */
  CLS_FLT_RANGE, /* integers in [-mag, mag]; float max/min */
  CLS_FLT_AVG    /* 2^0..2^mag at <= 2 ranks per index, else 0; float avg */
};

static const char* const op_names[] = {"sum", "prod", "max", "min", "avg", "mulsum", "none"};

const char* bench_op_name(int op) {
  return op >= 0 && op <= BENCH_OP_NONE ? op_names[op] : NULL;
}

int bench_op_from_name(const char* name) {
  for (int op = 0; op <= BENCH_OP_NONE; op++)
    if (strcmp(op_names[op], name) == 0) return op;
  return -1;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t rank_key(const struct bench_gen* g, int rank) {
  return splitmix64(g->seed * 0x2545F4914F6CDD1Dull + (uint64_t)rank);
}

static uint64_t width_mask(size_t elt) {
  return elt >= 8 ? ~0ull : (1ull << (8 * elt)) - 1;
}

void bench_gen_setup(struct bench_gen* g, int dtype, int op, int nranks, uint64_t seed) {
  memset(g, 0, sizeof(*g));
  g->dtype = dtype;
  g->op = op;
  g->nranks = nranks < 1 ? 1 : nranks;
  g->seed = seed;
  g->elt = bench_dtype_size(dtype);
  g->q = 1;
  uint64_t n = (uint64_t)g->nranks;
  if (!bench_dtype_is_float(dtype)) {
    uint64_t maxpos = width_mask(g->elt) >> (bench_dtype_is_signed_int(dtype) ? 1 : 0);
    g->cls = op == BENCH_OP_PROD ? CLS_INT_ODD : op == BENCH_OP_AVG ? CLS_INT_AVG : CLS_BITS;
    g->mag = (int64_t)(maxpos / n < 100 ? maxpos / n : 100);
    return;
  }
  uint64_t exact = bench_dtype_exact_int(dtype);
  switch (op) {
    case BENCH_OP_AVG: {
      /* NCCL's float avg multiplies each input by 1/n rounded to the type, then sums. With
       * powers of two the products are exact, and two terms round once in any order. */
      int mbits = 0;
      while ((2ull << mbits) < exact) mbits++; /* exact = 2^(mantissa bits + 1) */
      g->cls = CLS_FLT_AVG;
      g->q = (n + 1) / 2;
      g->mag = mbits < 3 ? mbits : 3; /* 2^a + 2^b stays exact */
      break;
    }
    case BENCH_OP_SUM:
    case BENCH_OP_MULSUM: {
      uint64_t budget = op == BENCH_OP_MULSUM ? exact / 2 : exact; /* scalars are 1 or 2 */
      g->cls = CLS_FLT_SUM;
      g->q = (n + budget - 1) / budget; /* contributors per index <= budget */
      uint64_t contributors = (n + g->q - 1) / g->q;
      uint64_t m = budget / contributors;
      g->mag = (int64_t)(m > (1u << 20) ? (1u << 20) : m); /* keep the values readable */
      break;
    }
    case BENCH_OP_PROD: {
      uint64_t twos = (uint64_t)bench_dtype_max_exp2(dtype) - 1; /* factors of 2 allowed */
      g->cls = CLS_FLT_PROD;
      g->q = (n + twos - 1) / twos;
      break;
    }
    case BENCH_OP_MAX:
    case BENCH_OP_MIN:
      g->cls = CLS_FLT_RANGE;
      g->mag = (int64_t)(exact < 1000 ? exact : 1000);
      break;
    default:
      g->cls = CLS_BITS;
      break;
  }
}

/* One input element: its bits (integer types, CLS_BITS) or its value (float classes). */
struct elem {
  uint64_t bits;
  double val;
};

static struct elem gen_elem(const struct bench_gen* g, int rank, uint64_t key, size_t index) {
  uint64_t h = splitmix64(key ^ (uint64_t)index * 0xD6E8FEB86659FD93ull);
  int contributes = g->q <= 1 || ((uint64_t)index + (uint64_t)rank) % g->q == 0;
  struct elem e = {0, 0};
  switch (g->cls) {
    case CLS_BITS:
      e.bits = h & width_mask(g->elt);
      if (bench_dtype_is_float(g->dtype)) {
        /* Keep it finite: clearing the top exponent bit works for every float format. */
        if (!isfinite(bench_dtype_decode(g->dtype, &e.bits))) e.bits &= ~(1ull << (8 * g->elt - 2));
      }
      break;
    case CLS_INT_ODD: {
      int64_t v = bench_dtype_is_signed_int(g->dtype) ? 2 * (int64_t)(h % 8) - 7 : 2 * (int64_t)(h % 4) + 1;
      e.bits = (uint64_t)v & width_mask(g->elt);
      break;
    }
    case CLS_INT_AVG:
      e.bits = h % (uint64_t)(g->mag + 1);
      break;
    case CLS_FLT_SUM:
      if (contributes) e.val = (double)((int64_t)(h % (uint64_t)(2 * g->mag + 1)) - g->mag);
      break;
    case CLS_FLT_AVG:
      if (contributes) e.val = ldexp(1, (int)(h % (uint64_t)(g->mag + 1)));
      break;
    case CLS_FLT_PROD:
      e.val = (contributes && (h & 2)) ? 2 : 1;
      if (h & 1) e.val = -e.val;
      break;
    case CLS_FLT_RANGE:
      e.val = (double)((int64_t)(h % (uint64_t)(2 * g->mag + 1)) - g->mag);
      break;
  }
  return e;
}

static int float_cls(const struct bench_gen* g) {
  return g->cls >= CLS_FLT_SUM;
}

void bench_gen_input(const struct bench_gen* g, void* buf, size_t count, size_t offset, int rank) {
  char* p = buf;
  uint64_t key = rank_key(g, rank);
  for (size_t j = 0; j < count; j++, p += g->elt) {
    struct elem e = gen_elem(g, rank, key, offset + j);
    if (float_cls(g))
      bench_dtype_encode(g->dtype, e.val, p);
    else
      bench_dtype_store_bits(g->dtype, e.bits, p);
  }
}

static double scalar_of(int rank) {
  return (double)(1 + (rank & 1));
}

void bench_gen_scalar(const struct bench_gen* g, int rank, void* out) {
  memset(out, 0, 8);
  if (bench_dtype_is_float(g->dtype))
    bench_dtype_encode(g->dtype, scalar_of(rank), out);
  else
    bench_dtype_store_bits(g->dtype, (uint64_t)scalar_of(rank), out);
}

/* Integer element as a signed or unsigned 64-bit value for max/min. */
static int int_less(const struct bench_gen* g, uint64_t a, uint64_t b) {
  if (!bench_dtype_is_signed_int(g->dtype)) return a < b;
  int shift = 64 - 8 * (int)g->elt;
  return (int64_t)(a << shift) >> shift < (int64_t)(b << shift) >> shift;
}

static uint64_t reduce_int(const struct bench_gen* g, const uint64_t* keys, size_t index) {
  uint64_t acc = 0;
  for (int r = 0; r < g->nranks; r++) {
    uint64_t v = gen_elem(g, r, keys[r], index).bits;
    if (r == 0) {
      acc = g->op == BENCH_OP_MULSUM ? v * (uint64_t)scalar_of(r) : v;
      continue;
    }
    switch (g->op) {
      case BENCH_OP_PROD:
        acc *= v;
        break;
      case BENCH_OP_MAX:
        if (int_less(g, acc, v)) acc = v;
        break;
      case BENCH_OP_MIN:
        if (int_less(g, v, acc)) acc = v;
        break;
      case BENCH_OP_MULSUM:
        acc += v * (uint64_t)scalar_of(r);
        break;
      default:
        acc += v;
        break; /* sum, avg */
    }
  }
  if (g->op == BENCH_OP_AVG) acc /= (uint64_t)g->nranks; /* non-negative, no wrap */
  return acc & width_mask(g->elt);
}

/* x rounded to the datatype. */
static double round_to(int dtype, double x) {
  uint64_t bits = 0;
  bench_dtype_encode(dtype, x, &bits);
  return bench_dtype_decode(dtype, &bits);
}

static double reduce_float(const struct bench_gen* g, const uint64_t* keys, size_t index) {
  /* avg: 1/n as NCCL forms it (float, or double for double), rounded to the type. */
  double inv = g->elt == 8 ? 1.0 / g->nranks : round_to(g->dtype, (double)(1.0f / (float)g->nranks));
  double acc = 0;
  for (int r = 0; r < g->nranks; r++) {
    double v = gen_elem(g, r, keys[r], index).val;
    if (g->op == BENCH_OP_MULSUM) v *= scalar_of(r);
    if (g->op == BENCH_OP_AVG) v = round_to(g->dtype, v * inv); /* exact for 2^a */
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (g->op) {
      case BENCH_OP_PROD:
        acc *= v;
        break;
      case BENCH_OP_MAX:
        acc = v > acc ? v : acc;
        break;
      case BENCH_OP_MIN:
        acc = v < acc ? v : acc;
        break;
      default:
        acc += v;
        break; /* sum, avg, mulsum */
    }
  }
  return acc; /* avg: at most two exact terms, rounded once by the caller */
}

/* The last expected block this thread computed: the ranks of one thread (-g) usually need
 * the same one (all_reduce), and computing it costs nranks evaluations per element. */
static __thread struct {
  int on;
  struct bench_gen g;
  size_t offset, count, cap;
  char* buf;
} memo;

void bench_gen_share_expected(int on) {
  memo.on = on;
  if (on) return;
  free(memo.buf);
  memo.buf = NULL;
  memo.cap = 0;
}

static int memo_hit(const struct bench_gen* g, size_t count, size_t offset) {
  return memo.buf && memcmp(&memo.g, g, sizeof(*g)) == 0 && memo.offset == offset && memo.count == count;
}

void bench_gen_expected(const struct bench_gen* g, void* buf, size_t count, size_t offset) {
  size_t bytes = count * g->elt;
  if (memo_hit(g, count, offset)) {
    memcpy(buf, memo.buf, bytes);
    return;
  }
  uint64_t stack_keys[64];
  uint64_t* keys = g->nranks <= 64 ? stack_keys : malloc(sizeof(uint64_t) * (size_t)g->nranks);
  if (!keys) abort(); /* a few bytes per rank; nothing sensible to do without them */
  for (int r = 0; r < g->nranks; r++) keys[r] = rank_key(g, r);
  char* p = buf;
  for (size_t j = 0; j < count; j++, p += g->elt) {
    if (float_cls(g))
      bench_dtype_encode(g->dtype, reduce_float(g, keys, offset + j), p);
    else
      bench_dtype_store_bits(g->dtype, reduce_int(g, keys, offset + j), p);
  }
  if (keys != stack_keys) free(keys);
  if (memo.on) { /* remember it (a failed allocation only loses the shortcut) */
    if (memo.cap < bytes) {
      free(memo.buf);
      memo.buf = malloc(bytes ? bytes : 1);
      memo.cap = memo.buf ? bytes : 0;
    }
    if (memo.buf) {
      memcpy(memo.buf, buf, bytes);
      memcpy(&memo.g, g, sizeof(*g));
      memo.offset = offset;
      memo.count = count;
    }
  }
}

int64_t bench_gen_compare(const struct bench_gen* g, const void* got, const void* expected, size_t count) {
  const char *a = got, *b = expected;
  int64_t wrong = 0;
  for (size_t j = 0; j < count; j++, a += g->elt, b += g->elt) {
    if (!float_cls(g)) {
      wrong += bench_dtype_load_bits(g->dtype, a) != bench_dtype_load_bits(g->dtype, b);
      continue;
    }
    double x = bench_dtype_decode(g->dtype, a), y = bench_dtype_decode(g->dtype, b);
    if (g->op == BENCH_OP_AVG)
      wrong += !(fabs(x - y) <= 2 * bench_dtype_ulp(g->dtype, y)); /* NaN counts as wrong */
    else
      wrong += !(x == y);
  }
  return wrong;
}
