/*
 * test_tuner.c - an NCCL tuner plugin for tests/plugins/run.sh, exporting only
 * ncclTunerPlugin_v<TUNER_V> (2..6; written against braid's plugin/tuner_abi.h, NCCL's ABI):
 *   AllReduce  forced to Ring / LL on one channel (v2: named; v3+: that pair's cost set to 0);
 *   Broadcast  asks for NVLS / Simple, which braid cannot run on these machines: braid must say
 *              it ignored that and keep its own choice;
 *   others     left alone;
 *   v6         getChunkSize: AllReduce steps of CHUNK (4000) bytes, not a whole number of
 *              braid's 64-byte units: braid must take 3968.
 * Every getCollInfo call is logged at INFO (TUNING) through the logger init got.
 */
#include <stdio.h>
#include <stdlib.h>

#include "plugin/tuner_abi.h"

#define ALGO_RING 1
#define ALGO_NVLS 4
#define PROTO_LL 0
#define PROTO_SIMPLE 2
#define FUNC_BROADCAST 0
#define FUNC_ALLREDUCE 4
#define NAME "braid-test-tuner"
#define CHUNK 4000

struct ctx {
  nccl_abi_tuner_logger_t log;
  size_t nranks, nnodes, calls;
};

static ncclResult_t make_ctx(size_t nranks, size_t nnodes, nccl_abi_tuner_logger_t log, void** ctx) {
  struct ctx* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->log = log;
  c->nranks = nranks;
  c->nnodes = nnodes;
  log(3, 0x40, __FILE__, __LINE__, NAME ": init, %zu ranks on %zu nodes (v%d)", nranks, nnodes, TUNER_V);
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t destroy(void* ctx) {
  free(ctx);
  return ncclSuccess;
}

static void note(struct ctx* c, int func, size_t bytes) {
  c->calls++;
  c->log(3, 0x40, __FILE__, __LINE__, NAME ": getCollInfo call %zu: function %d, %zu bytes", c->calls, func, bytes);
}

/* v3..v5: the cost table NCCL passes as float** is a float[numAlgo][numProto]. */
static ncclResult_t tune_table(void* ctx, int func, size_t bytes, int ops, float** table, int na, int np, int* nch) {
  float(*cost)[NCCL_ABI_NUM_PROTOCOLS] = (float(*)[NCCL_ABI_NUM_PROTOCOLS])table;
  note(ctx, func, bytes);
  if (na != NCCL_ABI_NUM_ALGORITHMS || np != NCCL_ABI_NUM_PROTOCOLS) return ncclInternalError;
  if (func == FUNC_ALLREDUCE && cost[ALGO_RING][PROTO_LL] != NCCL_ABI_ALGO_PROTO_IGNORE) {
    cost[ALGO_RING][PROTO_LL] = 0.0f;
    *nch = 1;
  }
  if (func == FUNC_BROADCAST) cost[ALGO_NVLS][PROTO_SIMPLE] = 0.0f; /* NCCL's plugins do so blindly, too */
  return ncclSuccess;
}

#if TUNER_V == 2
static ncclResult_t init_v2(size_t nranks, size_t nnodes, nccl_abi_tuner_logger_t log, void** ctx) {
  return make_ctx(nranks, nnodes, log, ctx);
}
static ncclResult_t tune_v2(void* ctx, int func, size_t bytes, int collnet, int nvls, int ops, int* algo, int* proto,
                            int* nch) {
  note(ctx, func, bytes);
  if (func == FUNC_ALLREDUCE) *algo = ALGO_RING, *proto = PROTO_LL, *nch = 1;
  if (func == FUNC_BROADCAST) *algo = ALGO_NVLS, *proto = PROTO_SIMPLE;
  return ncclSuccess;
}
__attribute__((visibility("default")))
const struct nccl_tuner_v2 ncclTunerPlugin_v2 = {NAME, init_v2, tune_v2, destroy};
#elif TUNER_V == 3
static ncclResult_t init_v3(size_t nranks, size_t nnodes, nccl_abi_tuner_logger_t log, void** ctx) {
  return make_ctx(nranks, nnodes, log, ctx);
}
__attribute__((visibility("default")))
const struct nccl_tuner_v3 ncclTunerPlugin_v3 = {NAME, init_v3, tune_table, destroy};
#elif TUNER_V == 4
static ncclResult_t init_v4(size_t nranks, size_t nnodes, nccl_abi_tuner_logger_t log, void** ctx) {
  return make_ctx(nranks, nnodes, log, ctx);
}
static ncclResult_t tune_v4(void* ctx, int func, size_t bytes, int ops, float** table, int na, int np, int reg,
                            int* nch) {
  return tune_table(ctx, func, bytes, ops, table, na, np, nch);
}
__attribute__((visibility("default")))
const struct nccl_tuner_v4 ncclTunerPlugin_v4 = {NAME, init_v4, tune_v4, destroy};
#else /* v5, v6 */
static ncclResult_t init_v5(void** ctx, uint64_t comm_id, size_t nranks, size_t nnodes, nccl_abi_tuner_logger_t log,
                            struct nccl_tuner_nvl_domain_v5* nvl, struct nccl_tuner_constants_v5* k) {
  if (nvl == NULL || k == NULL) return ncclInternalError;
  return make_ctx(nranks, nnodes, log, ctx);
}
static ncclResult_t tune_v5(void* ctx, int func, size_t bytes, int ops, float** table, int na, int np, int reg,
                            int* nch) {
  return tune_table(ctx, func, bytes, ops, table, na, np, nch);
}
#if TUNER_V == 5
__attribute__((visibility("default")))
const struct nccl_tuner_v5 ncclTunerPlugin_v5 = {NAME, init_v5, tune_v5, destroy};
#else
static ncclResult_t chunk_v6(void* ctx, int func, size_t bytes, int algo, int proto, int nch, size_t* chunk) {
  if (chunk == NULL || *chunk == 0) return ncclInternalError; /* the library's own value comes in */
  if (func == FUNC_ALLREDUCE) *chunk = CHUNK;
  return ncclSuccess;
}
__attribute__((visibility("default")))
const struct nccl_tuner_v6 ncclTunerPlugin_v6 = {NAME, init_v5, tune_v5, destroy, chunk_v6};
#endif
#endif
