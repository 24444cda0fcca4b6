/*
 * refdata.h - inputs and the independent reference of the collective tests (test_coll.c,
 * test_p2p.c, test_badarg.c).
 *
 * Every input element is a pure function of (datatype, value kind, seed, rank, index), so each
 * rank computes what any other rank sent and checks its own output without another exchange.
 * The reference does not use the library's data path (src/kernels): it has its own half /
 * bfloat16 / fp8 <-> double conversions and computes reductions in double (floating types) or
 * in 64-bit modular arithmetic truncated to the type's width (integers).
 *
 * Semantics checked (NCCL's): integer Sum, Prod and PreMulSum wrap; integer Avg is the wrapped
 * Sum divided by nranks, truncating toward zero; floating Avg is PreMulSum by 1/nranks rounded
 * to the datatype; Max/Min are exact; floating results are compared with a tolerance scaled by
 * nranks and the type's epsilon, relative to the sum of the magnitudes of the terms.
 *
 * Also the plumbing the suites share: guarded buffers, the test tier, environment changes.
 */
#ifndef BRAID_TEST_REFDATA_H
#define BRAID_TEST_REFDATA_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* The operators the tests run. PMS_IMM / PMS_DEV are ncclRedOpCreatePreMulSum operators with
 * a host-immediate scalar / a scalar pointer read at call time (ncclScalarDevice). */
enum ref_op { REF_SUM = 0, REF_PROD, REF_MAX, REF_MIN, REF_AVG, REF_PMS_IMM, REF_PMS_DEV, REF_NUM_OPS };

/* Value distributions: chosen per operator so results are well conditioned. COPY (the data of
 * collectives without reduction) uses the Sum distribution. */
enum ref_kind { REF_KIND_SUM = 0, REF_KIND_PROD, REF_KIND_MINMAX };

#define REF_NUM_DTYPES 12
#define REF_ALL_DTYPES ((1u << REF_NUM_DTYPES) - 1)
#define REF_ALL_OPS ((1u << REF_NUM_OPS) - 1)

size_t ref_dtype_size(int dtype);
const char* ref_dtype_name(int dtype);
const char* ref_op_name(int op);
int ref_dtype_is_float(int dtype);
enum ref_kind ref_kind_of(int op);

/* Own conversions: floating element <-> double (narrow -> double exact; double -> narrow
 * rounds to nearest even; fp8 saturates to the largest finite value). */
double ref_to_double(int dtype, const void* elem);
void ref_from_double(int dtype, double v, void* elem);

/* The scalar a PreMulSum test operator uses, written as one element of dtype into `elem`.
 * `variant` 0: the immediate scalar; 1: the by-pointer scalar. */
void ref_pms_scalar(int dtype, int variant, void* elem);

/* Rank `rank`'s input element `idx` (seed picks the data set). */
void ref_input(int dtype, enum ref_kind kind, uint32_t seed, int rank, size_t idx, void* elem);
/* Fill buf[0..n) with elements first .. first+n-1 of rank `rank`. */
void ref_fill(int dtype, enum ref_kind kind, uint32_t seed, int rank, size_t first, size_t n, void* buf);

/* The reduction being checked. */
struct ref_red {
  int dtype;
  int op;     /* enum ref_op */
  int nranks; /* contributors: ranks 0..nranks-1 */
  uint32_t seed;
};

/*
 * Check got[0..n) against the reduction over ranks of input elements first .. first+n-1.
 * Returns the number of wrong elements; the first one is described in msg.
 */
size_t ref_check_reduce(const struct ref_red* red, size_t first, size_t n, const void* got, char* msg, size_t msglen);

/* Check got[0..n) is bit-identical to rank src_rank's input elements first .. first+n-1. */
size_t ref_check_copy(int dtype, enum ref_kind kind, uint32_t seed, int src_rank, size_t first, size_t n,
                      const void* got, char* msg, size_t msglen);

/* Guard bytes around a region (out-of-bounds writes): fill with a pattern / count changed bytes. */
void ref_guard_fill(void* p, size_t bytes, uint8_t salt);
size_t ref_guard_check(const void* p, size_t bytes, uint8_t salt);

/* Element as text (for messages). */
void ref_format(int dtype, const void* elem, char* buf, size_t len);

/* ---- plumbing shared by the collective suites ---- */

/* A buffer handed to the library, `misalign` bytes past 64-byte alignment, with guard bytes on
 * both sides; its own bytes start with a "never written" pattern. */
struct ref_region {
  char* base;
  char* p;      /* the buffer */
  size_t bytes; /* its size */
  size_t pre;   /* guard bytes before it (64 + misalign) */
  uint8_t salt;
};
int ref_region_alloc(struct ref_region* g, size_t bytes, size_t misalign, uint8_t salt); /* 0 or -1 */
/* Guard bytes that changed (0 for a region never allocated). */
size_t ref_region_guards_bad(const struct ref_region* g);
/* Bytes of the buffer that no longer hold the "never written" pattern. */
size_t ref_region_written(const struct ref_region* g);
void ref_region_free(struct ref_region* g);

/* BRAID_TEST_TIER=full */
int ref_tier_full(void);
/* Set "NAME=value NAME2=value2" in the environment (forked ranks inherit it) and make the
 * library re-read its parameters (braid_param_reload). NULL: nothing. */
void ref_env_apply(const char* env);

#endif /* BRAID_TEST_REFDATA_H */
