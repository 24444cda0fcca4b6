/*
 * graph_log.c - the lines NCCL prints about its channels (reference section 10), from a
 * braid_channel_graph: the two search results (GRAPH: the ring graph, then the tree graph),
 * `Channel 00/04 : 0 1 2 3` (INIT, rank 0),
 * `Ring 00 : 3 -> 0 -> 1` and `Tree 0 : -1 -> 0 -> 1/-1/-1` (GRAPH), `Trees [0] ...` (INIT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "topo/graph.h"

#define LOG_LINE_MAX 1024

static int digits(int n) {
  int d = 1;
  while (n >= 10) {
    n /= 10;
    d++;
  }
  return d;
}

void braid_graph_log(const struct braid_channel_graph* g, int rank, int nchannels) {
  char line[LOG_LINE_MAX];
  if (g == NULL || rank < 0 || rank >= g->nranks || g->nchannels < 1) return;
  int nch = nchannels > 0 ? nchannels : g->nchannels;
  int n = g->nranks;
  BRAID_INFO(BRAID_LOG_GRAPH, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d",
             g->pattern, g->cross_nic, g->nrings, g->bw_intra, g->bw_inter, braid_topo_path_name(g->type_intra),
             braid_topo_path_name(g->type_inter), g->same_channels);
  BRAID_INFO(BRAID_LOG_GRAPH, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d",
             g->tree_pattern, g->cross_nic, g->nrings, g->tree_bw_intra, g->tree_bw_inter,
             braid_topo_path_name(g->tree_type_intra), braid_topo_path_name(g->tree_type_inter), g->tree_same_channels);
  if (rank == 0 && BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_LOG_INIT)) {
    int* order = malloc((size_t)n * sizeof(int));
    if (order == NULL) return;
    int width = digits(n - 1);
    for (int c = 0; c < nch; c++) {
      int len = snprintf(line, sizeof(line), "Channel %02d/%02d :", c, nch);
      braid_graph_ring_from(g, c % g->nchannels, 0, order);
      for (int i = 0; i < n && len < LOG_LINE_MAX - 16; i++)
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %*d", width, order[i]);
      if (len >= LOG_LINE_MAX - 16) snprintf(line + LOG_LINE_MAX - 16, 16, " ...");
      BRAID_INFO(BRAID_LOG_INIT, "%s", line);
    }
    free(order);
  }
  if (BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_LOG_GRAPH)) {
    for (int c = 0; c < nch; c++)
      BRAID_INFO(BRAID_LOG_GRAPH, "Ring %02d : %d -> %d -> %d", c, braid_graph_ring_prev(g, c % g->nchannels, rank),
                 rank, braid_graph_ring_next(g, c % g->nchannels, rank));
    for (int c = 0; c < nch; c++) {
      const struct braid_tree_links* t = braid_graph_tree(g, c % g->nchannels, rank);
      BRAID_INFO(BRAID_LOG_GRAPH, "Tree %d : %d -> %d -> %d/%d/%d", c, t->up, rank, t->down[0], t->down[1], t->down[2]);
    }
  }
  if (BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_LOG_INIT)) {
    int len = snprintf(line, sizeof(line), "Trees");
    for (int c = 0; c < nch && len < LOG_LINE_MAX - 64; c++) {
      const struct braid_tree_links* t = braid_graph_tree(g, c % g->nchannels, rank);
      len += snprintf(line + len, sizeof(line) - (size_t)len, " [%d] %d/%d/%d->%d->%d", c, t->down[0], t->down[1],
                      t->down[2], rank, t->up);
    }
    BRAID_INFO(BRAID_LOG_INIT, "%s", line);
  }
}
