/*
 * nccl_stubs.c - the NCCL entry points that bench/<coll>_perf.c reference from their `run`
 * function. The MPI peer (mpi_coll_perf.c) links those files for their buffer sizes,
 * expected results and bandwidth formulas, but never calls their `run`; these definitions
 * only satisfy the linker, so the peer needs no libnccl. Reaching one is a bug: it aborts.
 */
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"

static ncclResult_t unreachable(const char* name) {
  fprintf(stderr, "mpi_coll_perf: %s called; the MPI peer must not call NCCL\n", name);
  abort();
}

#define STUB(name, ...)            \
  ncclResult_t name(__VA_ARGS__) { \
    return unreachable(#name);     \
  }

STUB(ncclAllReduce, const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c, cudaStream_t st)
STUB(ncclAllGather, const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st)
STUB(ncclReduceScatter, const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c,
     cudaStream_t st)
STUB(ncclBroadcast, const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st)
STUB(ncclReduce, const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t o, int root, ncclComm_t c,
     cudaStream_t st)
STUB(ncclAlltoAll, const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st)
STUB(ncclGather, const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st)
STUB(ncclScatter, const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st)
STUB(ncclSend, const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st)
STUB(ncclRecv, void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st)
STUB(ncclCommUserRank, const ncclComm_t c, int* rank)
STUB(ncclCommCount, const ncclComm_t c, int* count)
STUB(ncclGroupStart, void)
STUB(ncclGroupEnd, void)
