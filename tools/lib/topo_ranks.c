/*
 * topo_ranks.c - the ranks a tool imagines on a topology (topo_ranks.h).
 */
#include "topo_ranks.h"

#include <stdio.h>
#include <stdlib.h>

static int by_rank(const struct braid_topo_system* sys) {
  for (int i = 0; i < sys->ngpus; i++) {
    int r = sys->nodes[sys->gpus[i]].rank;
    if (r < 0) return 0;
    for (int j = 0; j < i; j++)
      if (sys->nodes[sys->gpus[j]].rank == r) return 0;
  }
  return sys->ngpus > 0;
}

int braid_tool_gpu_order(const struct braid_topo_system* sys, int* order, int max) {
  int n = sys->ngpus < max ? sys->ngpus : max, ranks = by_rank(sys);
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++) /* insertion sort: small lists */
    for (int j = i; j > 0; j--) {
      const struct braid_topo_node *a = &sys->nodes[sys->gpus[order[j - 1]]], *b = &sys->nodes[sys->gpus[order[j]]];
      int gt = ranks ? a->rank > b->rank : (a->host != b->host ? a->host > b->host : a->dev > b->dev);
      if (!gt) break;
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  return n;
}

ncclResult_t braid_tool_ranks(const struct braid_topo_system* sys, int nodes, int ppn, int host,
                              struct braid_topo_rank** ranks_p) {
  int order[1024], n = nodes * ppn;
  int ngpus = braid_tool_gpu_order(sys, order, 1024);
  if (nodes < 1 || ppn < 1 || (!host && ppn > ngpus)) {
    fprintf(stderr, "braid: %d node(s) x %d rank(s) on a machine with %d GPUs\n", nodes, ppn, ngpus);
    return ncclInvalidArgument;
  }
  struct braid_topo_rank* r = calloc((size_t)n, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  for (int i = 0; i < n; i++) {
    const struct braid_topo_node* g = host ? NULL : &sys->nodes[sys->gpus[order[i % ppn]]];
    r[i].rank = i;
    r[i].node = i / ppn;
    r[i].local_rank = i % ppn;
    r[i].host_hash = 0x1000 + (uint64_t)(i / ppn);
    r[i].cuda_dev = g ? g->dev : -1;
    r[i].bus_id = g ? BRAID_TOPO_ID(g->host, g->id) : -1;
  }
  *ranks_p = r;
  return ncclSuccess;
}
