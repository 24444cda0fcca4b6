/*
 * devapi.c - the host entry points of NCCL's device API (nccl_device/core.h) that programs
 * bind at load time (PyTorch's libtorch_cuda.so imports four of them). The device API itself
 * is another change's (issue 19): until it lands, ncclDevCommCreate / ncclDevCommDestroy and
 * the multicast pointer query refuse with ncclInvalidUsage and a WARN naming the function.
 * The peer pointer queries are answered now from the windows (window.c): a peer's window as
 * this rank can load and store it, for peers in its LSA team (same process or node); NULL for
 * the others, as NCCL answers for peers outside the team.
 */
#include <stddef.h>

#include "base/api.h"
#include "base/check.h"
#include "core/sym/sym.h"

/* nccl_device/core.h's types; only pointers to them cross here. */
struct ncclDevCommRequirements;
struct ncclDevComm;

#define DEVAPI_NOT_YET(fn)                                                                              \
  do {                                                                                                  \
    BRAID_WARN(                                                                                         \
        "%s: the NCCL device API is not implemented in braid yet (device communicators, LSA barriers, " \
        "GIN); use the host API",                                                                       \
        fn);                                                                                            \
    return ncclInvalidUsage;                                                                            \
  } while (0)

BRAID_API ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                         struct ncclDevComm* outDevComm) {
  BRAID_CHECK(braid_comm_check(comm, "ncclDevCommCreate"));
  DEVAPI_NOT_YET("ncclDevCommCreate");
}
BRAID_PROFILE_ALIAS(ncclDevCommCreate)

BRAID_API ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm) {
  BRAID_CHECK(braid_comm_check(comm, "ncclDevCommDestroy"));
  DEVAPI_NOT_YET("ncclDevCommDestroy");
}
BRAID_PROFILE_ALIAS(ncclDevCommDestroy)

BRAID_API ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  BRAID_WARN("ncclGetLsaMultimemDevicePointer: no multicast memory in braid yet (NVLS is another change's)");
  return ncclInvalidUsage;
}
BRAID_PROFILE_ALIAS(ncclGetLsaMultimemDevicePointer)

/* The window behind a handle, found through its communicator. */
static ncclResult_t window_of(ncclWindow_t window, void** outPtr, const char* fn, struct ncclWindow_vidmem** w_p) {
  if (outPtr == NULL) {
    BRAID_WARN("%s: outPtr argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (window == NULL || window->magic != BRAID_WIN_MAGIC) {
    BRAID_WARN("%s: window %p is not a registered window", fn, (void*)window);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_comm_check(braid_comm_handle(window->comm), fn));
  if (braid_win_lookup(window->comm, window, fn) == NULL) return ncclInvalidArgument;
  *w_p = window;
  return ncclSuccess;
}

static ncclResult_t peer_pointer(struct ncclWindow_vidmem* w, size_t offset, int peer, void** outPtr, const char* fn) {
  if (peer < 0 || peer >= w->comm->nranks) {
    BRAID_WARN("%s: invalid peer %d (nranks %d)", fn, peer, w->comm->nranks);
    return ncclInvalidArgument;
  }
  if (offset >= w->infos[peer].size) {
    BRAID_WARN("%s: offset %zu is outside rank %d's window of %zu bytes", fn, offset, peer, w->infos[peer].size);
    return ncclInvalidArgument;
  }
  *outPtr = w->peer_ptr[peer] != NULL ? (char*)w->peer_ptr[peer] + offset : NULL;
  return ncclSuccess;
}

BRAID_API ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  struct ncclWindow_vidmem* w;
  BRAID_CHECK(window_of(window, outPtr, "ncclGetPeerDevicePointer", &w));
  return peer_pointer(w, offset, peer, outPtr, "ncclGetPeerDevicePointer");
}
BRAID_PROFILE_ALIAS(ncclGetPeerDevicePointer)

/* lsaRank: the index among the ranks this rank reaches by load/store, in rank order. */
BRAID_API ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  const char* fn = "ncclGetLsaDevicePointer";
  struct ncclWindow_vidmem* w;
  BRAID_CHECK(window_of(window, outPtr, fn, &w));
  int idx = 0;
  for (int r = 0; r < w->comm->nranks; r++) {
    if (!w->comm->sym->peer_local[r]) continue;
    if (idx++ == lsaRank) return peer_pointer(w, offset, r, outPtr, fn);
  }
  BRAID_WARN("%s: invalid lsaRank %d (this rank's LSA team has %d ranks)", fn, lsaRank, idx);
  return ncclInvalidArgument;
}
BRAID_PROFILE_ALIAS(ncclGetLsaDevicePointer)
