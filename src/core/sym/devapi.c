/*
 * devapi.c - the device API's host-side pointer queries (include/nccl_device.h; PyTorch's
 * libtorch_cuda.so imports them): a peer's window as this rank can load and store it, for
 * peers it reaches by load/store (same process or node); NULL for the others, as NCCL answers
 * for peers outside the team. Multicast pointers exist only for windows bound to a multicast
 * object (win_mc.c: cuMem memory on every rank of a node with multicast), view.multimem plus the
 * offset; other windows are refused with ncclInvalidUsage and a WARN saying why not. Device communicators: devcomm.c.
 */
#include <stddef.h>

#include "base/api.h"
#include "base/check.h"
#include "core/sym/sym.h"

static ncclResult_t window_of(ncclWindow_t window, void** outPtr, const char* fn, struct ncclWindow_vidmem** w_p);

static ncclResult_t multimem_pointer(ncclWindow_t window, size_t offset, void** outPtr, const char* fn) {
  struct ncclWindow_vidmem* w;
  BRAID_CHECK(window_of(window, outPtr, fn, &w));
  if (offset >= w->size) {
    BRAID_WARN("%s: offset %zu is outside the window of %zu bytes", fn, offset, w->size);
    return ncclInvalidArgument;
  }
  if (w->view.multimem == NULL) {
    BRAID_WARN("%s: window %p has no multicast mapping: %s", fn, (void*)window,
               w->mc_why[0] ? w->mc_why : "it was not bound to a multicast object");
    return ncclInvalidUsage;
  }
  *outPtr = (char*)w->view.multimem + offset;
  return ncclSuccess;
}

BRAID_API ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  return multimem_pointer(window, offset, outPtr, "ncclGetLsaMultimemDevicePointer");
}
BRAID_PROFILE_ALIAS(ncclGetLsaMultimemDevicePointer)

BRAID_API ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                                    void** outPtr) {
  return multimem_pointer(window, offset, outPtr, "ncclGetMultimemDevicePointer");
}
BRAID_PROFILE_ALIAS(ncclGetMultimemDevicePointer)

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

/* lsaRank: the index in this rank's LSA team (ncclTeamLsa). */
BRAID_API ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  const char* fn = "ncclGetLsaDevicePointer";
  struct ncclWindow_vidmem* w;
  BRAID_CHECK(window_of(window, outPtr, fn, &w));
  if (lsaRank < 0 || lsaRank >= w->view.lsaSize) {
    BRAID_WARN("%s: invalid lsaRank %d (this rank's LSA team has %d ranks)", fn, lsaRank, w->view.lsaSize);
    return ncclInvalidArgument;
  }
  return peer_pointer(w, offset, w->view.worldLsa0 + lsaRank, outPtr, fn);
}
BRAID_PROFILE_ALIAS(ncclGetLsaDevicePointer)
