/*
 * graph.h - the channels of a communicator: rings and double binary trees over its ranks,
 * the NIC each rank uses on each channel, and the per-channel bandwidth they sustain, as NCCL
 * plans them.
 *
 * Per node, NCCL's search (search.c) finds a ring graph and a tree graph on the node's own
 * system (only the node's GPUs: braid_topo_subset), or reads them from NCCL_GRAPH_FILE. Across
 * nodes (graph_build.c, NCCL's connect.cc): every node keeps the fewest channels and slowest
 * speeds any node found; rings visit each node's ranks in that node's order for the channel,
 * node after node (nodes at odd positions swap channels 2k and 2k+1 when NCCL_CROSS_NIC=2
 * made their rings change NICs); trees are NCCL's double binary tree over nodes (tree 0 a
 * binary tree, tree 1 its mirror or shift) with a chain through each node's ranks in its tree
 * order, the node's parent and children attached to the chain's first or second rank as the
 * node's tree pattern says. Channels: the search channels twice (the copy carries tree 1),
 * twice again on sm90+ multi-node rings faster than 45 GB/s with fewer than 16, then
 * NCCL_MAX_NCHANNELS and NCCL_MIN_NCHANNELS (copies of the first channels).
 *
 * Files: graph.c (one node: the searches, the graph file), graph_build.c (all nodes),
 * graph_file.c (NCCL's <graphs> XML: NCCL_GRAPH_FILE, NCCL_GRAPH_DUMP_FILE), graph_log.c
 * (NCCL's INFO/GRAPH lines).
 */
#ifndef BRAID_GRAPH_H
#define BRAID_GRAPH_H

#include <stdint.h>

#include "nccl.h"
#include "topo/topo.h"

#define BRAID_MAX_CHANNELS 64
/* Distinct channels a search finds (NCCL: MAXCHANNELS / 2). */
#define BRAID_GRAPH_MAX_RINGS (BRAID_MAX_CHANNELS / 2)
/* NCCL's pattern numbers, shown in GRAPH lines and graph files. */
#define BRAID_GRAPH_PATTERN_RING 4

/* A rank's links in one tree: its parent and up to three children (-1: none). */
struct braid_tree_links {
  int up;
  int down[3];
};

struct braid_channel_graph {
  int nranks, nnodes;
  int nchannels; /* channels in use, 1..BRAID_MAX_CHANNELS */
  int nrings;    /* search channels (NCCL's graph nChannels, the same for rings and trees) */
  /* Per channel c (arrays of nchannels * nranks, entry [c * nranks + i]): */
  int* ring;                     /* i-th rank of the ring; node 0's ranks first, each node contiguous */
  int* ring_prev;                /* indexed by rank: the rank it receives from */
  int* ring_next;                /* indexed by rank: the rank it sends to */
  struct braid_tree_links* tree; /* indexed by rank */
  int* net_dev;                  /* indexed by rank: the NIC (index into the system's NICs) its ring uses on
                                    this channel (receive: the node's first rank, send: its last); -1 none */
  int* net_proxy;                /* indexed by rank: the rank whose GPU relays to that NIC (PXN), -1 direct */
  int* net_send;                 /* indexed by rank: the NIC its ring sends through (its node's last rank), -1 */
  int* net_recv;                 /* indexed by rank: the NIC its ring receives through (node's first rank), -1 */
  int* tree_id;                  /* [nchannels]: which of the two trees channel c uses */
  int* search_channel;           /* [nchannels]: the search channel it copies */
  /* The ring graph's result, the weakest node's. */
  float bw_intra;                          /* GB/s per channel between GPUs of a node */
  float bw_inter;                          /* GB/s per channel over the network (= bw_intra on one node, as NCCL) */
  float latency_inter, tree_latency_inter; /* us: the plugin's latency of the NICs, the slowest node's */
  int type_intra;                          /* worst path type a channel may use inside a node (enum braid_path_type) */
  int type_inter;                          /* worst GPU<->NIC path type (PIX on one node, as NCCL prints it) */
  int cross_nic;                           /* 0 rings keep their NIC, 1 or 2 they may change */
  int same_channels;
  int pattern; /* BRAID_GRAPH_PATTERN_RING */
  /* The tree graph's result. */
  int tree_pattern; /* 1 balanced, 2 split, 3 plain tree (the most any node needed) */
  float tree_bw_intra, tree_bw_inter;
  int tree_type_intra, tree_type_inter, tree_same_channels;
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
/* One search graph of one node (NCCL's ncclTopoGraph, trimmed): plain data. */
struct braid_graph_part {
  int32_t nchannels, pattern, cross_nic, same_channels, type_intra, type_inter;
  float bw_intra, bw_inter, latency_inter;
  int16_t nic_in[BRAID_GRAPH_MAX_RINGS], nic_out[BRAID_GRAPH_MAX_RINGS];     /* -1: single node */
  int16_t relay_in[BRAID_GRAPH_MAX_RINGS], relay_out[BRAID_GRAPH_MAX_RINGS]; /* PXN relay (local rank), -1 */
  uint8_t order[BRAID_GRAPH_MAX_RINGS][BRAID_GRAPH_MAX_LOCAL];               /* local ranks */
};
/* One node's search result: its ring and tree graphs and what the tuner needs to know about
 * the node. Plain data, the same size everywhere. */
struct braid_graph_node_info {
  int32_t ndev; /* ranks on the node */
  int32_t host_mode, min_sm, max_sm, nvls, cpu_vendor, cpu_arch, nnics;
  float nvl_bw;
  struct braid_graph_part ring, tree;
};
/* Search options for the tools: the NCCL version whose tables to use (0: the newest). */
struct braid_graph_opts {
  int nccl_version;
};
ncclResult_t braid_graph_node_search(const struct braid_topo_system* sys, int nranks,
                                     const struct braid_topo_rank* ranks, int node, struct braid_graph_node_info* info);
ncclResult_t braid_graph_node_search_ex(const struct braid_topo_system* sys, int nranks,
                                        const struct braid_topo_rank* ranks, int node,
                                        const struct braid_graph_opts* opts, struct braid_graph_node_info* info);
/* infos[k] for every node k. Checks them (they came over the network). */
ncclResult_t braid_graph_build(int nranks, const struct braid_topo_rank* ranks,
                               const struct braid_graph_node_info* infos, struct braid_channel_graph** graph_p);
/* braid_graph_compute with options. */
ncclResult_t braid_graph_compute_ex(const struct braid_topo_system* sys, int nranks,
                                    const struct braid_topo_rank* ranks, const struct braid_graph_opts* opts,
                                    struct braid_channel_graph** graph_p);

/* NCCL_GRAPH_DUMP_FILE for the rank NCCL_GRAPH_DUMP_FILE_RANK (default 0): this node's search
 * graphs in NCCL's <graphs> format (graph_file.c). Nothing when unset or another rank. */
ncclResult_t braid_graph_dump_env(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                  int rank, const struct braid_graph_node_info* info);
/* The same document as text (malloc'd), for node `node`. */
ncclResult_t braid_graph_dump_string(const struct braid_topo_system* sys, int nranks,
                                     const struct braid_topo_rank* ranks, int node,
                                     const struct braid_graph_node_info* info, char** text_p);

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

/* INFO/GRAPH lines as NCCL prints them: the two searches ("Pattern 4, crossNic 0, nChannels
 * 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1", then Pattern 1), `Channel 00/24 :
 * 0 1 2 3` (rank 0 only), `Ring 00 : 3 -> 0 -> 1`, `Tree 0 : -1 -> 0 -> 1/-1/-1` and
 * `Trees [0] 1/-1/-1->0->-1 ...` for this rank. nchannels: the channels a communicator runs
 * (channel c takes graph channel c mod the graph's count); <= 0: the graph's own count. */
void braid_graph_log(const struct braid_channel_graph* g, int rank, int nchannels);

/* Ranks in ring order starting at `rank`, written to out (nranks entries). */
void braid_graph_ring_from(const struct braid_channel_graph* g, int c, int rank, int* out);

/* ---- internals shared by graph*.c ---- */

/* The rank table checks of braid_graph_compute (before any search). */
ncclResult_t braid_graph_check_ranks(int nranks, const struct braid_topo_rank* ranks);
/* The local rank -> system GPU map of node `node` (node indices of `sys`; -1 unknown GPU). */
ncclResult_t braid_graph_node_gpus(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                   int node, int* gpus, int* n_p);
/* NCCL_GRAPH_FILE: the ring (id 0) or tree (id 1) graph of the file for this node, when the
 * file has one with channels; *found_p 0 otherwise. gpu_dev[i] / gpu_host[i]: NVML dev and
 * host of local rank i; ranks_of[i]: its communicator rank. */
ncclResult_t braid_graph_file_read(const char* path, int id, const struct braid_topo_system* sys, int ndev,
                                   const int* gpu_dev, const int* gpu_host, const int* ranks_of, int multi,
                                   struct braid_graph_part* out, int* found_p);

#endif /* BRAID_GRAPH_H */
