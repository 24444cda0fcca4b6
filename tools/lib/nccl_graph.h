/*
 * nccl_graph.h - NCCL's graph dump (NCCL_GRAPH_DUMP_FILE: <graphs><graph id="0" ...>) read
 * back and compared with braid's search of the same node (braid-topo --nccl-graph): the
 * pattern, channel count, speeds, path types and every channel's GPU order.
 */
#ifndef BRAID_TOOL_NCCL_GRAPH_H
#define BRAID_TOOL_NCCL_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "topo/graph.h"

struct nccl_graph_search {
  int valid, pattern, cross_nic, nchannels, same_channels, ngpus;
  float bw_intra, bw_inter;
  int type_intra, type_inter;
  int64_t dev[BRAID_GRAPH_MAX_RINGS][BRAID_GRAPH_MAX_LOCAL]; /* GPU topology ids, channel by channel */
};

struct nccl_graph {
  struct nccl_graph_search ring, tree;
};

/* 0, or -1 with a message on stderr. */
int braid_nccl_graph_read(const char* path, struct nccl_graph* g);

/* Differences printed to out, their count returned. devs[i]: the topology id
 * ((host << 56) + NVML dev) of local rank i. */
int braid_nccl_graph_compare(const struct nccl_graph* ng, const struct braid_graph_node_info* info, const int64_t* devs,
                             FILE* out);

/* Node 0's searches on sys (ranks: the communicator, node 0 on this machine) against the dump
 * at path: the number of differences (printed to out), -1 when the dump cannot be read or
 * the search fails. */
int braid_nccl_graph_check(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                           const struct braid_graph_opts* opts, const char* path, FILE* out);

#endif /* BRAID_TOOL_NCCL_GRAPH_H */
