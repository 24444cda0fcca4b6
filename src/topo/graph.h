/*
 * graph.h - the channels of a communicator: rings and double binary trees over its ranks,
 * the NIC each rank uses on each channel, and the per-channel bandwidth they sustain.
 *
 * braid_graph_compute searches them on the system graph (topo.h) from what every rank knows
 * about every other (struct braid_topo_rank, allgathered by init), so every rank computes
 * the same result when its nodes are alike. Rings visit each node's ranks contiguously
 * (one network crossing per node boundary and channel); trees are NCCL's double binary tree
 * over nodes (src/algo/tree.h; for an odd node count braid's own second tree, so that every
 * node is a leaf in one of the two) with a chain through each node's ranks, in the node's
 * ring order for that channel, its first rank linked to the other nodes. Channels [0, nrings) carry tree 0, [nrings,
 * 2*nrings) the same rings with tree 1, and so on cyclically when NCCL_MIN_NCHANNELS asks for more.
 *
 * Files: graph.c (the search), graph_build.c (rings, trees, NICs over all ranks; channel
 * counts), graph_log.c (NCCL's INFO/GRAPH lines).
 */
#ifndef BRAID_GRAPH_H
#define BRAID_GRAPH_H

#include <stdint.h>

#include "nccl.h"
#include "topo/topo.h"

#define BRAID_MAX_CHANNELS 64
/* Distinct rings the search looks for (channels are then doubled for the second tree). */
#define BRAID_GRAPH_MAX_RINGS (BRAID_MAX_CHANNELS / 2)
/* NCCL's pattern number of a ring graph, shown in GRAPH lines. */
#define BRAID_GRAPH_PATTERN_RING 4

/* A rank's links in one tree: its parent and up to three children (-1: none). down[0] is the
 * next rank of its node's chain; the node-level children follow. */
struct braid_tree_links {
  int up;
  int down[3];
};

struct braid_channel_graph {
  int nranks, nnodes;
  int nchannels; /* channels in use, 1..BRAID_MAX_CHANNELS */
  int nrings;    /* distinct rings found; channel c uses ring c % nrings and tree (c / nrings) % 2 */
  /* Per channel c (arrays of nchannels * nranks, entry [c * nranks + i]): */
  int* ring;                     /* i-th rank of the ring; node 0's ranks first, each node contiguous */
  int* ring_prev;                /* indexed by rank: the rank it receives from */
  int* ring_next;                /* indexed by rank: the rank it sends to */
  struct braid_tree_links* tree; /* indexed by rank */
  int* net_dev;                  /* indexed by rank: the NIC (index into the system's NICs) it uses for this
                                    channel's network connections (ring receive and tree links of a node's
                                    first rank, ring send of its last); -1 none */
  int* net_proxy;                /* indexed by rank: the rank whose GPU relays to that NIC (PXN), -1 direct */
  int* tree_id;                  /* [nchannels]: which of the two trees channel c uses */
  /* The search result, the same for every channel. */
  float bw_intra; /* GB/s per channel between GPUs of a node */
  float bw_inter; /* GB/s per channel over the network (0: single node) */
  int type_intra; /* worst path type of a ring hop inside a node (enum braid_path_type) */
  int type_inter; /* worst GPU<->NIC path type (LOC for a single node) */
  int cross_nic;  /* rings may enter and leave a node through different NICs */
  int pattern;    /* BRAID_GRAPH_PATTERN_RING */
  /* What the tuner needs to know about the machine. */
  int host_mode;            /* pseudo-GPUs: shared memory inside a node, sockets between */
  int ppn;                  /* most ranks on one node */
  int min_sm, max_sm;       /* GPU generations (0 in host mode) */
  int cpu_vendor, cpu_arch; /* of the first CPU (enum braid_cpu_vendor / braid_cpu_arch) */
  int nvls;                 /* NVLink SHARP possible (sm90+, every GPU on the NVSwitch, NCCL_NVLS_ENABLE) */
  float nvl_bw;             /* NVLink GB/s of one GPU, all links (0: none) */
  int nnics;                /* NICs of a node */
};

/* The channels for a communicator. ranks[i] describes rank i (ranks[i].rank == i); node
 * indices run 0..nnodes-1, local ranks 0..n-1 within each node; bus ids are GPUs of `sys`
 * (every rank of a node on its own GPU), or all -1 (host mode). Bad input:
 * ncclInvalidArgument with a WARN naming the rank and field.
 *
 * braid_graph_compute searches every node with the local system graph: right when all nodes
 * are alike (and for the tools and tests). Across machines that may differ, init uses the
 * two halves instead, so that every rank assembles the same channels:
 *   braid_graph_node_search(sys, nranks, ranks, my_node, &info)   on every rank
 *   allgather the infos (fixed size, plain data); infos[k] = the info of any rank of node k
 *   braid_graph_build(nranks, ranks, infos, &graph)               identical on every rank */
ncclResult_t braid_graph_compute(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                 struct braid_channel_graph** graph_p);
void braid_graph_free(struct braid_channel_graph* g);

#define BRAID_GRAPH_MAX_LOCAL 256 /* ranks of one node */
/* One node's search result: per ring its ranks in order (local ranks) and its NICs, plus
 * what the tuner needs to know about the node. Plain data, the same size everywhere. */
struct braid_graph_node_info {
  int32_t ndev; /* ranks on the node */
  int32_t nrings;
  float bw_intra, bw_inter;
  int32_t type_intra, type_inter, cross_nic;
  int32_t host_mode, min_sm, max_sm, nvls, cpu_vendor, cpu_arch, nnics;
  float nvl_bw;
  int16_t nic_in[BRAID_GRAPH_MAX_RINGS], nic_out[BRAID_GRAPH_MAX_RINGS];     /* -1: single node */
  int16_t relay_in[BRAID_GRAPH_MAX_RINGS], relay_out[BRAID_GRAPH_MAX_RINGS]; /* PXN relay (local rank), -1 */
  uint8_t order[BRAID_GRAPH_MAX_RINGS][BRAID_GRAPH_MAX_LOCAL];               /* local ranks */
};
ncclResult_t braid_graph_node_search(const struct braid_topo_system* sys, int nranks,
                                     const struct braid_topo_rank* ranks, int node, struct braid_graph_node_info* info);
/* infos[k] for every node k. Checks them (they came over the network). */
ncclResult_t braid_graph_build(int nranks, const struct braid_topo_rank* ranks,
                               const struct braid_graph_node_info* infos, struct braid_channel_graph** graph_p);

/* Convenience accessors (c: channel, r: rank). */
static inline int braid_graph_ring_next(const struct braid_channel_graph* g, int c, int r) {
  return g->ring_next[c * g->nranks + r];
}
static inline int braid_graph_ring_prev(const struct braid_channel_graph* g, int c, int r) {
  return g->ring_prev[c * g->nranks + r];
}
static inline const struct braid_tree_links* braid_graph_tree(const struct braid_channel_graph* g, int c, int r) {
  return &g->tree[c * g->nranks + r];
}

/* INFO/GRAPH lines as NCCL prints them: the search result, `Channel 00/04 : 0 1 2 3`
 * (rank 0 only), `Ring 00 : 3 -> 0 -> 1`, `Tree 0 : -1 -> 0 -> 1/-1/-1` and
 * `Trees [0] 1/-1/-1->0->-1 ...` for this rank. "Connected all rings/trees" is init's.
 * nchannels: the channels a communicator runs (channel c takes graph channel c mod the
 * graph's count); <= 0: the graph's own count. */
void braid_graph_log(const struct braid_channel_graph* g, int rank, int nchannels);

/* Ranks in ring order starting at `rank`, written to out (nranks entries). */
void braid_graph_ring_from(const struct braid_channel_graph* g, int c, int rank, int* out);

/* ---- internals shared by graph*.c ---- */

/* Search the rings of one node: `dev` are the sys node indices of its ndev devices (local
 * rank order); multi: the rings leave and re-enter the node through NICs. */
ncclResult_t braid_graph_search_node(const struct braid_topo_system* sys, const int* dev, int ndev, int multi,
                                     struct braid_graph_node_info* out);

#endif /* BRAID_GRAPH_H */
