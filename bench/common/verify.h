/*
 * verify.h - inputs generated from (seed, rank, index) and exact expected results, so the
 * benchmarks can count wrong elements the way nccl-tests does (#wrong). Host-only and free
 * of NCCL calls: the MPI peer (bench/peers/) and the tests use it too.
 *
 * How results stay exact: integer types wrap identically on every path, so any values work
 * except for prod (odd factors, the product never collapses to 0) and avg (small
 * non-negative values whose sum cannot wrap). Floating inputs are small integers chosen so
 * that every partial sum or product in any order is exactly representable: |value| <= M with
 * n*M within the type's exact-integer range (a rank contributes to only every q-th index when
 * even M = 1 would not fit, e.g. fp8 with many ranks), and products of +-1 and +-2 with
 * few enough 2s to stay finite. Float avg is NCCL's PreMulSum by 1/n (formed in float, or
 * double for double, then rounded to the type): inputs are powers of two at no more than two
 * ranks per index (zero elsewhere), so each product is exact and the sum rounds once in any
 * order. It is still compared within 2 ulp, as nccl-tests does, which also admits a
 * sum-then-divide implementation for few ranks.
 */
#ifndef BENCH_VERIFY_H
#define BENCH_VERIFY_H

#include <stddef.h>
#include <stdint.h>

/* Reduction operators in nccl-tests' order; NONE marks data-movement collectives. */
enum bench_op {
  BENCH_OP_SUM = 0,
  BENCH_OP_PROD = 1,
  BENCH_OP_MAX = 2,
  BENCH_OP_MIN = 3,
  BENCH_OP_AVG = 4,
  BENCH_OP_MULSUM = 5, /* ncclRedOpCreatePreMulSum with a per-rank scalar */
  BENCH_NUM_OPS = 6,
  BENCH_OP_NONE = 6
};

/* How inputs are drawn for one (datatype, op, nranks, seed); see bench_gen_setup. */
struct bench_gen {
  int dtype, op, nranks;
  uint64_t seed;
  size_t elt;  /* bytes per element */
  int cls;     /* value class (verify.c) */
  int64_t mag; /* values are integers in [-mag, mag], or [0, mag] for avg */
  uint64_t q;  /* a rank contributes a non-neutral value only where (index + rank) % q == 0 */
};

/* nccl-tests' name of op ("sum" ... "mulsum", "none"). */
const char* bench_op_name(int op);
/* Op whose name is `name`, or -1. */
int bench_op_from_name(const char* name);

void bench_gen_setup(struct bench_gen* g, int dtype, int op, int nranks, uint64_t seed);
/* buf[j] = input of `rank` at index offset + j, for j < count. */
void bench_gen_input(const struct bench_gen* g, void* buf, size_t count, size_t offset, int rank);
/* buf[j] = reduction over all ranks of their inputs at index offset + j (not for NONE). */
void bench_gen_expected(const struct bench_gen* g, void* buf, size_t count, size_t offset);
/* on = 1: this thread keeps a copy of its last expected block and hands it out again when
 * asked for the same one (a thread driving several ranks of an all_reduce). */
void bench_gen_share_expected(int on);
/* Number of elements of `got` that differ from `expected` (bitwise, numerically for float
 * reductions, within 2 ulp for float avg). */
int64_t bench_gen_compare(const struct bench_gen* g, const void* got, const void* expected, size_t count);
/* The PreMulSum scalar of `rank` (1 or 2) in the datatype's representation, in out[8]. */
void bench_gen_scalar(const struct bench_gen* g, int rank, void* out);

#endif /* BENCH_VERIFY_H */
