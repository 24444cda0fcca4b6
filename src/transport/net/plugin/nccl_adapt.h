/*
 * nccl_adapt.h - NCCL's external net plugins (ncclNetPlugin_v6 .. _v12) as braid net tables.
 *
 * One NCCL-ABI library is adapted at a time (the process's external network, as in NCCL,
 * which disables the other external plugins once one is in use): braid_net_nccl_adapt finds
 * the newest version the library exports, up to `max_version`, and returns a struct
 * braid_net_v1 whose slots call the library's, converting sizes (int <-> size_t), properties,
 * per-communicator contexts (v11/v12 init / finalize, v10 connect's config) and requests (test
 * reports int sizes per grouped receive). A library that also exports braidNetExt_v1
 * (nccl_net_abi.h: libnccl-net-braid.so does) gets braid's optional slots (waitFds,
 * finishSend, abortSend, getStatus, recvInline) and may declare BRAID_NET_PTR_HOST_ANY;
 * otherwise ptrSupport keeps NCCL's bits only. Device memory (regMr type BRAID_NET_PTR_CUDA)
 * of a plugin that declared NCCL_PTR_DMABUF goes through its regMrDmaBuf with a dma-buf of the
 * pages (the device layer's dmabuf_get), as NCCL registers it; else through regMr.
 * Not adapted: device offload (a device whose netDeviceType is not NCCL_NET_DEVICE_HOST is
 * refused), virtual devices (makeVDevice is never called: one braid device per plugin
 * device), setNetAttr, the collNet tables
 * (reported, never used: braid has no collNet algorithm). v12 (2.30) is v11's table with a
 * longer vProps and railId / planeId in its properties (not used: braid's topology does not
 * take rail or plane hints from a plugin).
 */
#ifndef BRAID_NCCL_ADAPT_H
#define BRAID_NCCL_ADAPT_H

#include "transport/net/net.h"

#define BRAID_NCCL_NET_MIN_VERSION 6
#define BRAID_NCCL_NET_MAX_VERSION 12

/* The adapted table of the newest ncclNetPlugin_vN (N <= max_version) in `dl`, or NULL with
 * INFO saying why (lib: for the message). Replaces the previous adaptation: call before the
 * table is in use only. *version_p (may be NULL): N. */
const struct braid_net_v1* braid_net_nccl_adapt(void* dl, const char* lib, int max_version, int* version_p);
/* The NCCL ABI version of the table in use (0: none). */
int braid_net_nccl_version(void);

#endif /* BRAID_NCCL_ADAPT_H */
