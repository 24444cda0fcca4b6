/*
 * dtype.h - the benchmarks' view of NCCL's twelve datatypes: names (as nccl-tests spells
 * them), sizes, and exact conversion between host doubles and the stored bits of every
 * floating type, including half, bfloat16 and the two fp8 formats that C has no type for.
 * Used by the data generator (verify.c), the MPI peer and the test fake; no NCCL calls.
 */
#ifndef BENCH_DTYPE_H
#define BENCH_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_NUM_DTYPES 12

/* nccl-tests' name of datatype `dt` ("int8" ... "f8e5m2"), NULL when out of range. */
const char* bench_dtype_name(int dt);
/* Datatype whose nccl-tests name is `name`, or -1. */
int bench_dtype_from_name(const char* name);
/* Bytes per element (0 for an unknown datatype). */
size_t bench_dtype_size(int dt);
/* 1 for half, float, double, bfloat16 and the fp8 types. */
int bench_dtype_is_float(int dt);
/* 1 for the signed integer types. */
int bench_dtype_is_signed_int(int dt);

/*
 * Largest integer B such that every integer in [-B, B] is exact in `dt` (floating types),
 * and the largest power-of-two exponent E that stays finite. Integer types return 0.
 */
uint64_t bench_dtype_exact_int(int dt);
int bench_dtype_max_exp2(int dt);

/* Floating element <-> double. encode rounds to nearest even (fp8 e4m3 saturates at 448). */
double bench_dtype_decode(int dt, const void* elem);
void bench_dtype_encode(int dt, double v, void* elem);
/* One unit in the last place of `dt` at magnitude |v| (the subnormal step below normals). */
double bench_dtype_ulp(int dt, double v);

/* Raw little-endian bits of an element (any datatype), and the reverse. */
uint64_t bench_dtype_load_bits(int dt, const void* elem);
void bench_dtype_store_bits(int dt, uint64_t bits, void* elem);

#endif /* BENCH_DTYPE_H */
