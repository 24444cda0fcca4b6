/*
 * topo_ranks.h - the ranks a tool imagines on a machine described by a topology file: the
 * communicator NCCL would have formed on it (braid-topo, braid-plan).
 */
#ifndef BRAID_TOOL_TOPO_RANKS_H
#define BRAID_TOOL_TOPO_RANKS_H

#include "topo/topo.h"

/* The machine's GPUs (indices into sys->gpus) in NCCL's rank order: by the rank attribute when
 * every GPU has a distinct one (a dump names the rank that used each GPU), else by host and
 * dev. Returns the count written to order (at most max). */
int braid_tool_gpu_order(const struct braid_topo_system* sys, int* order, int max);

/* nodes x ppn ranks: rank i on node i / ppn, local rank i % ppn, on the (i % ppn)-th GPU of
 * braid_tool_gpu_order (its topology id as bus id, so multi-host files work), or in host mode
 * on pseudo-GPUs. malloc'd; ncclInvalidArgument when the machine has fewer GPUs than ppn. */
ncclResult_t braid_tool_ranks(const struct braid_topo_system* sys, int nodes, int ppn, int host,
                              struct braid_topo_rank** ranks_p);

#endif /* BRAID_TOOL_TOPO_RANKS_H */
