/*
 * net_gdr.h - GPUDirect RDMA for the network transport: whether a connection's FIFO buffer is
 * GPU memory the NIC reads (send) or writes (receive) itself, instead of pinned host memory,
 * and whether a receive must be flushed before the GPU reads it. NCCL's rules
 * (ncclTopoCheckGdr, ncclTopoNeedFlush in src/graph/paths.cc):
 *   - both sides capable: the NIC declares BRAID_NET_PTR_CUDA (peer memory), or
 *     BRAID_NET_PTR_DMABUF and the GPU exports dma-bufs;
 *   - sends (the NIC reads GPU memory): NCCL_NET_GDR_READ=0 never; unset: not before sm_80
 *     unless the GPU has an NVLink peer or is the node's only GPU;
 *   - the GPU-NIC distance within NCCL_NET_GDR_LEVEL (default PXB; NCCL_P2P_LEVEL's names);
 *     a NIC or GPU the topology does not place is attached to the CPU, as NCCL attaches a NIC
 *     without a PCI path: PHB;
 *   - flush: GDR receives before sm_90, or NCCL_NET_FORCE_FLUSH=1; never with
 *     NCCL_GDR_FLUSH_DISABLE=1.
 */
#ifndef BRAID_NET_GDR_H
#define BRAID_NET_GDR_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct braid_transport_ctx;
struct braid_net_props;

/* What the decision reads (all of it, so that tests can tabulate it). */
struct braid_net_gdr_in {
  int nic_ptr;      /* the device's props.ptrSupport (BRAID_NET_PTR_*) */
  int gpu_dmabuf;   /* the GPU exports dma-bufs */
  int sm;           /* the GPU's compute capability x10 */
  int read;         /* 1: send side (the NIC reads GPU memory) */
  int nvlink_peer;  /* the GPU has an NVLink to another GPU, or is the node's only GPU */
  int distance;     /* BRAID_PATH_* from the GPU to the NIC */
  int level;        /* NCCL_NET_GDR_LEVEL as a BRAID_PATH_* (default PXB) */
  int64_t gdr_read; /* NCCL_NET_GDR_READ: 0, 1, or BRAID_PARAM_UNSET */
};

/* 1: GPUDirect RDMA; `why` (may be NULL) says which rule decided, for the logs. */
int braid_net_gdr_decide(const struct braid_net_gdr_in* in, char* why, size_t why_len);
/* 1: a GDR receive is flushed before the GPU reads it. */
int braid_net_gdr_need_flush(int sm, int force_flush, int flush_disable);

/* For one connection end of a device communicator on net device `dev` with `props`: fills
 * *gdr_p and *flush_p (0 in host mode). Logs NCCL's `NET/<name> : GPU Direct RDMA
 * Enabled|Disabled for HCA <dev> '<name>'` once per device and process. */
ncclResult_t braid_net_gdr_choose(const struct braid_transport_ctx* t, const char* net_name, int dev,
                                  const struct braid_net_props* props, int is_send, int* gdr_p, int* flush_p);

#endif /* BRAID_NET_GDR_H */
