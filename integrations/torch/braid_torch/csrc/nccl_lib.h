// nccl_lib.h - braid's NCCL API, reached through a private dlopen of braid's libnccl.so.2.
//
// PyTorch's libtorch_cuda.so may already have loaded NVIDIA's libnccl.so.2 (same soname) by
// the time this extension loads, so linking against "libnccl.so.2" could bind us to NVIDIA's
// library. Instead the extension opens braid's library by path (RTLD_LOCAL | RTLD_DEEPBIND:
// braid's own calls resolve inside braid) and calls it through this table. When braid is the
// preloaded libnccl.so.2 (the LD_PRELOAD recipe), dlopen returns that same instance.
#pragma once

#include <string>

#include "nccl.h"

namespace braid_torch {

struct NcclLib {
  std::string path;  // the library file that was opened
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AlltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Gather)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Scatter)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t);
};

// The table, opened once: $BRAID_LIBRARY, else the library this extension was built next to
// (BRAID_DEFAULT_LIBRARY). Throws c10::Error naming the path and dlerror() on failure.
const NcclLib& nccl();

// Throws c10::Error with NCCL's text and braid's last error when res is not ncclSuccess.
void check(ncclResult_t res, const char* what);

}  // namespace braid_torch
