// nccl_lib.cpp - opening braid's library and resolving the NCCL functions the backend uses.
#include "nccl_lib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include <c10/util/Exception.h>

namespace braid_torch {

namespace {

template <typename F>
void resolve(void* h, const char* name, F*& slot, const std::string& path) {
  slot = reinterpret_cast<F*>(dlsym(h, name));
  TORCH_CHECK(slot != nullptr, "braid: ", path, " has no ", name, " (not braid's libnccl.so.2?)");
}

NcclLib open_lib() {
  NcclLib l{};
  const char* env = std::getenv("BRAID_LIBRARY");
  l.path = env != nullptr && env[0] != '\0' ? env : BRAID_DEFAULT_LIBRARY;
  void* h = dlopen(l.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  TORCH_CHECK(h != nullptr, "braid: cannot open ", l.path, ": ", dlerror(),
              " (set BRAID_LIBRARY to braid's build/lib/libnccl.so.2)");
#define R(field, name) resolve(h, name, l.field, l.path)
  R(GetVersion, "ncclGetVersion");
  R(GetUniqueId, "ncclGetUniqueId");
  R(CommInitRank, "ncclCommInitRank");
  R(CommDestroy, "ncclCommDestroy");
  R(CommAbort, "ncclCommAbort");
  R(CommGetAsyncError, "ncclCommGetAsyncError");
  R(GetErrorString, "ncclGetErrorString");
  R(GetLastError, "ncclGetLastError");
  R(AllReduce, "ncclAllReduce");
  R(Broadcast, "ncclBroadcast");
  R(Reduce, "ncclReduce");
  R(AllGather, "ncclAllGather");
  R(ReduceScatter, "ncclReduceScatter");
  R(AlltoAll, "ncclAlltoAll");
  R(Gather, "ncclGather");
  R(Scatter, "ncclScatter");
  R(Send, "ncclSend");
  R(Recv, "ncclRecv");
  R(GroupStart, "ncclGroupStart");
  R(GroupEnd, "ncclGroupEnd");
  R(RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum");
  R(RedOpDestroy, "ncclRedOpDestroy");
#undef R
  // braid answers BRAID_VERSION_STRING through braid-info; here the NCCL API version suffices.
  int v = 0;
  TORCH_CHECK(l.GetVersion(&v) == ncclSuccess && v >= 22800, "braid: ", l.path, " reports NCCL version ", v);
  return l;
}

}  // namespace

const NcclLib& nccl() {
  static NcclLib lib;
  static std::once_flag once;
  std::call_once(once, [] { lib = open_lib(); });
  return lib;
}

void check(ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return;
  const NcclLib& l = nccl();
  TORCH_CHECK(false, "braid: ", what, " failed: ", l.GetErrorString(res), " (", static_cast<int>(res),
              "); last error: ", l.GetLastError(nullptr));
}

}  // namespace braid_torch
