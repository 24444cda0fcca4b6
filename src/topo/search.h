/*
 * search.h - NCCL's channel search on the system of one node (search.c), internal to the topo
 * folder: the rings and trees ncclTopoCompute finds, with the same order of tries, step budgets
 * and bandwidth bookkeeping, so that braid's channels, speeds and orders equal NCCL's on the
 * same machine (tests/topo/real holds dumps whose NCCL result is known).
 *
 * A search graph is NCCL's ncclTopoGraph: per channel the ranks of the node in order (intra;
 * a rank is a GPU's position in the subset, i.e. its local rank) and, on several nodes, the
 * NIC a channel enters by and the one it leaves by (inter; indices into sys->nics).
 */
#ifndef BRAID_TOPO_SEARCH_H
#define BRAID_TOPO_SEARCH_H

#include "topo/topo.h"

#define BRAID_SEARCH_MAX_CHANNELS 64 /* NCCL's MAXCHANNELS */

/* NCCL's graph patterns. */
enum {
  BRAID_PATTERN_BALANCED_TREE = 1, /* NIC -> GPU a -> ..., both NIC links on the first two GPUs */
  BRAID_PATTERN_SPLIT_TREE = 2,    /* NIC -> GPU a -> GPU b ..., back to the NIC from GPU b */
  BRAID_PATTERN_TREE = 3,          /* NIC -> GPU a -> ... -> GPU x, back to the NIC from GPU a */
  BRAID_PATTERN_RING = 4,          /* NIC -> GPU a -> ... -> GPU x -> NIC (one node: back to a) */
  BRAID_PATTERN_NVLS = 5,
  BRAID_PATTERN_COLLNET_DIRECT = 6
};

struct braid_search_graph {
  int id;      /* 0 ring, 1 tree (NCCL's graph ids) */
  int pattern; /* BRAID_PATTERN_* */
  int cross_nic, same_channels;
  int nchannels, min_channels, max_channels;
  float bw_intra, bw_inter, latency_inter;
  int type_intra, type_inter;
  int nhops;
  int ngpus;
  int intra[BRAID_SEARCH_MAX_CHANNELS * 256]; /* [c * ngpus + i]: rank */
  int inter[BRAID_SEARCH_MAX_CHANNELS * 2];   /* [c * 2 + 0/1]: NIC in, NIC out (sys->nics index) */
};

/* The NCCL version whose search tables to use (per-generation speed lists changed between
 * releases); 0: the newest braid knows (2.30). e.g. 22703 for 2.27.3. */
struct braid_search_opts {
  int nccl_version;
};

/* ncclTopoCompute on `sys`, the system of one node (braid_topo_subset: only the node's GPUs,
 * their rank attribute their local rank; or host mode's pseudo-GPUs). inter: the
 * communicator spans several nodes. g->id, pattern, min/max_channels set by the caller. */
ncclResult_t braid_search_compute(struct braid_topo_system* sys, int inter, const struct braid_search_opts* opts,
                                  struct braid_search_graph* g);

#endif /* BRAID_TOPO_SEARCH_H */
