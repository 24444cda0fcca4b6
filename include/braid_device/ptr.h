/*
 * braid_device/ptr.h - teams of a device communicator and window pointers, device side (nvcc
 * only; included by nccl_device.h). A window handle points at memory the device reads: its
 * first bytes are ncclWindow_vidmem_view_t (src/core/sym/window.c fills it at registration).
 */
#ifndef BRAID_DEVICE_PTR_H_
#define BRAID_DEVICE_PTR_H_

#include "coop.h"

NCCL_DEVICE_INLINE const ncclWindow_vidmem_view_t* braid_win_view(ncclWindow_t w) {
  return (const ncclWindow_vidmem_view_t*)w;
}

NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamWorld(ncclDevComm const& c) {
  return ncclTeam{c.nRanks, c.rank, 1};
}
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamLsa(ncclDevComm const& c) {
  return ncclTeam{c.lsaSize, c.lsaRank, 1};
}
/* The ranks at this rank's LSA position in every LSA team. */
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamRail(ncclDevComm const& c) {
  return ncclTeam{c.nRanks / c.lsaSize, c.rank / c.lsaSize, c.lsaSize};
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const& c, ncclTeam t, int r) {
  return c.rank + (r - t.rank) * t.stride;
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const& c, ncclTeam t, int r) {
  return ncclTeamRankToWorld(c, t, r) - c.worldLsa0;
}

NCCL_DEVICE_INLINE void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) {
  return (char*)braid_win_view(w)->localPtr + offset;
}
/* peer: an LSA rank. */
NCCL_DEVICE_INLINE void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  return (char*)braid_win_view(w)->lsaPtrs[peer] + offset;
}
/* peer: a world rank; NULL when it is not in this rank's LSA team. */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  const ncclWindow_vidmem_view_t* v = braid_win_view(w);
  int l = peer - v->worldLsa0;
  return l >= 0 && l < v->lsaSize ? (char*)v->lsaPtrs[l] + offset : nullptr;
}
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam tm, int peer) {
  const ncclWindow_vidmem_view_t* v = braid_win_view(w);
  int world = v->worldLsa0 + v->lsaRank + (peer - tm.rank) * tm.stride;
  return ncclGetPeerPointer(w, offset, world);
}
/* NULL without a multicast object (every machine braid has run on). */
NCCL_DEVICE_INLINE void* ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset, ncclDevComm const&) {
  void* mc = braid_win_view(w)->multimem;
  return mc != nullptr ? (char*)mc + offset : nullptr;
}
NCCL_DEVICE_INLINE void* ncclGetMultimemPointer(ncclWindow_t w, size_t offset, ncclMultimemHandle mm) {
  void* mc = braid_win_view(w)->multimem;
  return mc != nullptr && mm.mcBase != nullptr ? (char*)mc + offset : nullptr;
}

NCCL_DEVICE_INLINE void* ncclGetResourceBufferLocalPointer(ncclDevComm const& c, ncclDevResourceHandle h) {
  return ncclGetLocalPointer(c.resourceWindow, h);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaPointer(ncclDevComm const& c, ncclDevResourceHandle h, int peer) {
  return ncclGetLsaPointer(c.resourceWindow, h, peer);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferPeerPointer(ncclDevComm const& c, ncclDevResourceHandle h, ncclTeam t,
                                                          int peer) {
  return ncclGetPeerPointer(c.resourceWindow, h, t, peer);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferMultimemPointer(ncclDevComm const& c, ncclDevResourceHandle h,
                                                              ncclMultimemHandle mm) {
  return ncclGetMultimemPointer(c.resourceWindow, h, mm);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const& c, ncclDevResourceHandle h) {
  return ncclGetLsaMultimemPointer(c.resourceWindow, h, c);
}

#endif /* BRAID_DEVICE_PTR_H_ */
