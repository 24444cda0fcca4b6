/*
 * graph_build.c - braid_graph_compute (graph.h): checks what init hands over, maps every
 * rank to a device of the system graph (a GPU by bus id, or in host mode a pseudo-GPU per
 * local rank), searches each kind of node once (graph.c), and lays the per-node rings end to
 * end into the communicator's channels with their trees and NICs.
 *
 * All nodes keep the same number of rings and the same speeds: the smallest found, so that
 * every rank's tuner sees the same numbers. Channel counts follow NCCL: twice the rings
 * (the copy carries the other tree), then NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/tree.h"
#include "check.h"
#include "graph.h"
#include "param.h"

void braid_graph_free(struct braid_channel_graph* g) {
  if (g == NULL) return;
  free(g->ring);
  free(g->ring_prev);
  free(g->ring_next);
  free(g->tree);
  free(g->net_dev);
  free(g->net_proxy);
  free(g->tree_id);
  free(g);
}

void braid_graph_ring_from(const struct braid_channel_graph* g, int c, int rank, int* out) {
  const int* ring = &g->ring[c * g->nranks];
  int start = 0;
  while (start < g->nranks && ring[start] != rank) start++;
  if (start == g->nranks) start = 0;
  for (int i = 0; i < g->nranks; i++) out[i] = ring[(start + i) % g->nranks];
}

/* Check the rank table; fills node sizes and the local rank -> rank map. */
static ncclResult_t check_ranks(int nranks, const struct braid_topo_rank* ranks, int* nnodes_p, int* count,
                                int* local, int* host_p) {
  int nnodes = 0, host = ranks[0].bus_id < 0;
  for (int i = 0; i < nranks; i++) {
    const struct braid_topo_rank* r = &ranks[i];
    if (r->rank != i) {
      BRAID_WARN("braid_graph_compute: ranks[%d].rank is %d", i, r->rank);
      return ncclInvalidArgument;
    }
    if (r->node < 0 || r->node >= nranks) {
      BRAID_WARN("braid_graph_compute: rank %d: node %d is not in [0, %d)", i, r->node, nranks);
      return ncclInvalidArgument;
    }
    if ((r->bus_id < 0) != host) {
      BRAID_WARN("braid_graph_compute: rank %d: bus id %" PRId64 " mixes host mode and GPUs", i, r->bus_id);
      return ncclInvalidArgument;
    }
    if (r->node + 1 > nnodes) nnodes = r->node + 1;
  }
  for (int k = 0; k < nnodes; k++) count[k] = 0;
  for (int i = 0; i < nranks; i++) count[ranks[i].node]++;
  for (int k = 0; k < nnodes; k++) {
    if (count[k] == 0) {
      BRAID_WARN("braid_graph_compute: node %d has no rank (nodes must be numbered 0..%d)", k, nnodes - 1);
      return ncclInvalidArgument;
    }
  }
  for (int i = 0; i < nranks; i++) local[i] = -1;
  /* local[] is laid out node by node: offsets are the prefix sums of count */
  int* off = calloc((size_t)nnodes + 1, sizeof(int));
  if (off == NULL) {
    BRAID_WARN("Failed to allocate %d node offsets", nnodes + 1);
    return ncclSystemError;
  }
  for (int k = 0; k < nnodes; k++) off[k + 1] = off[k] + count[k];
  for (int i = 0; i < nranks; i++) {
    const struct braid_topo_rank* r = &ranks[i];
    int k = r->node;
    if (r->local_rank < 0 || r->local_rank >= count[k] || local[off[k] + r->local_rank] >= 0) {
      BRAID_WARN("braid_graph_compute: rank %d: local rank %d on node %d (%d ranks) is %s", i, r->local_rank, k,
                 count[k], r->local_rank < 0 || r->local_rank >= count[k] ? "out of range" : "taken twice");
      free(off);
      return ncclInvalidArgument;
    }
    local[off[k] + r->local_rank] = i;
  }
  free(off);
  *nnodes_p = nnodes;
  *host_p = host;
  return ncclSuccess;
}

/* Sys node of each rank's device. */
static ncclResult_t map_devices(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                int host, int* dev) {
  for (int i = 0; i < nranks; i++) {
    if (host) {
      dev[i] = -1;
      for (int g = 0; g < sys->ngpus; g++)
        if (sys->nodes[sys->gpus[g]].pseudo == ranks[i].local_rank) dev[i] = sys->gpus[g];
    } else {
      int g = braid_topo_gpu_find(sys, ranks[i].bus_id);
      dev[i] = g < 0 ? -1 : sys->gpus[g];
    }
  }
  for (int i = 0; i < nranks; i++)
    for (int j = i + 1; j < nranks && !host; j++)
      if (dev[i] >= 0 && dev[i] == dev[j] && ranks[i].node == ranks[j].node) {
        BRAID_WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %" PRIx64, i, j, ranks[i].bus_id);
        return ncclInvalidUsage;
      }
  return ncclSuccess;
}

static int clamp_param(enum braid_param id, int def) {
  int64_t v = braid_param_int(id);
  if (v == BRAID_PARAM_UNSET) return def;
  if (v < 1) return 1;
  if (v > BRAID_MAX_CHANNELS) return BRAID_MAX_CHANNELS;
  return (int)v;
}

/* The two node-level trees: NCCL's double binary tree (src/algo/tree.h). For an odd node
 * count NCCL's second tree (the shift) leaves node 0 inner in both; braid's second tree is
 * then a heap-ordered binary tree whose inner places go to tree 0's leaves (at least
 * (N-1)/2: every odd index) and whose leaves are tree 0's inner nodes, so every node is a
 * leaf in at least one tree, as the double binary tree intends. */
struct node_tree {
  int up, down[2];
};

static ncclResult_t node_trees(int nnodes, struct node_tree* t0, struct node_tree* t1) {
  int* heap = NULL;
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < nnodes; k++) {
      struct node_tree* x = t ? &t1[k] : &t0[k];
      if (braid_dbtree(nnodes, k, t, &x->up, &x->down[0], &x->down[1]) != BRAID_SCHED_OK) {
        BRAID_WARN("Graph: no double binary tree over %d nodes", nnodes);
        return ncclInternalError;
      }
    }
  if (nnodes % 2 == 0 || nnodes < 3) return ncclSuccess;
  heap = calloc((size_t)nnodes, sizeof(int));
  if (heap == NULL) {
    BRAID_WARN("Failed to allocate a tree of %d nodes", nnodes);
    return ncclSystemError;
  }
  int n = 0;
  for (int pass = 0; pass < 2; pass++) /* tree 0's leaves first, then its inner nodes */
    for (int k = 0; k < nnodes; k++)
      if ((t0[k].down[0] < 0 && t0[k].down[1] < 0) == (pass == 0)) heap[n++] = k;
  for (int p = 0; p < nnodes; p++) {
    struct node_tree* x = &t1[heap[p]];
    x->up = p == 0 ? -1 : heap[(p - 1) / 2];
    x->down[0] = 2 * p + 1 < nnodes ? heap[2 * p + 1] : -1;
    x->down[1] = 2 * p + 2 < nnodes ? heap[2 * p + 2] : -1;
  }
  free(heap);
  return ncclSuccess;
}

/* Rings, trees and NICs of channel c over all nodes. */
static ncclResult_t lay_channel(struct braid_channel_graph* g, int c, int* const* node_ranks, const int* count,
                                struct braid_graph_node_rings* const* res, struct node_tree* const* trees) {
  int n = g->nranks, r = c % g->nrings, t = (c / g->nrings) % 2, pos = 0;
  int* ring = &g->ring[c * n];
  g->tree_id[c] = t;
  for (int k = 0; k < g->nnodes; k++)
    for (int i = 0; i < count[k]; i++) ring[pos++] = node_ranks[k][res[k]->order[r][i]];
  for (int i = 0; i < n; i++) {
    g->ring_next[c * n + ring[i]] = ring[(i + 1) % n];
    g->ring_prev[c * n + ring[i]] = ring[(i + n - 1) % n];
    g->net_dev[c * n + i] = -1;
    g->net_proxy[c * n + i] = -1;
  }
  for (int k = 0; k < g->nnodes; k++) {
    const int* order = res[k]->order[r];
    int head = node_ranks[k][order[0]], last = node_ranks[k][order[count[k] - 1]];
    int up = trees[t][k].up, d0 = trees[t][k].down[0], d1 = trees[t][k].down[1];
    for (int i = 0; i < count[k]; i++) {
      struct braid_tree_links* tl = &g->tree[c * n + node_ranks[k][order[i]]];
      tl->up = i > 0 ? node_ranks[k][order[i - 1]] : (up >= 0 ? node_ranks[up][res[up]->order[r][0]] : -1);
      tl->down[0] = i + 1 < count[k] ? node_ranks[k][order[i + 1]] : -1;
      tl->down[1] = tl->down[2] = -1;
    }
    struct braid_tree_links* hl = &g->tree[c * n + head];
    int slot = hl->down[0] >= 0 ? 1 : 0;
    if (d0 >= 0) hl->down[slot++] = node_ranks[d0][res[d0]->order[r][0]];
    if (d1 >= 0) hl->down[slot++] = node_ranks[d1][res[d1]->order[r][0]];
    if (g->nnodes > 1) {
      g->net_dev[c * n + head] = res[k]->nic_in[r];
      g->net_dev[c * n + last] = head == last ? res[k]->nic_in[r] : res[k]->nic_out[r];
      if (res[k]->relay_in[r] >= 0) g->net_proxy[c * n + head] = node_ranks[k][res[k]->relay_in[r]];
      if (res[k]->relay_out[r] >= 0 && head != last) g->net_proxy[c * n + last] = node_ranks[k][res[k]->relay_out[r]];
    }
  }
  return ncclSuccess;
}

/* Machine facts for the tuner. */
static void describe(struct braid_channel_graph* g, const struct braid_topo_system* sys, const int* dev, int host) {
  g->host_mode = host;
  g->min_sm = host ? 0 : 1 << 30;
  g->max_sm = 0;
  g->nvl_bw = host ? 0 : 1e30f;
  for (int i = 0; i < g->nranks && !host; i++) {
    const struct braid_topo_node* d = &sys->nodes[dev[i]];
    float nvl = 0;
    if (d->sm < g->min_sm) g->min_sm = d->sm;
    if (d->sm > g->max_sm) g->max_sm = d->sm;
    for (int l = 0; l < d->nlinks; l++)
      if (d->links[l].kind == BRAID_LINK_NVL) nvl += d->links[l].bw;
    if (nvl < g->nvl_bw) g->nvl_bw = nvl;
  }
  if (sys->ncpus > 0) {
    g->cpu_vendor = sys->nodes[sys->cpus[0]].vendor;
    g->cpu_arch = sys->nodes[sys->cpus[0]].arch;
  }
  g->nnics = sys->nnics;
  g->nvls = !host && g->ppn > 1 && braid_topo_nvls_capable(sys) && braid_param_int(BRAID_PARAM_NVLS_ENABLE) != 0;
}

ncclResult_t braid_graph_compute(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                 struct braid_channel_graph** graph_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_system* pseudo = NULL;
  struct braid_channel_graph* g = NULL;
  int *count = NULL, *local = NULL, *dev = NULL, **node_ranks = NULL, *ndev = NULL, nnodes = 0, host = 0;
  struct braid_graph_node_rings **noderes = NULL, *results = NULL;
  struct node_tree *tree0 = NULL, *tree1 = NULL;
  if (sys == NULL || ranks == NULL || graph_p == NULL || nranks < 1) {
    BRAID_WARN("braid_graph_compute: bad argument (sys %p, nranks %d, ranks %p, graph_p %p)", (const void*)sys, nranks,
               (const void*)ranks, (void*)graph_p);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(count, nranks, res, out);
  BRAID_CALLOC_GOTO(local, nranks, res, out);
  BRAID_CALLOC_GOTO(dev, nranks, res, out);
  BRAID_CHECK_GOTO(check_ranks(nranks, ranks, &nnodes, count, local, &host), res, out);
  BRAID_CALLOC_GOTO(g, 1, res, out);
  g->nranks = nranks;
  g->nnodes = nnodes;
  g->pattern = BRAID_GRAPH_PATTERN_RING;
  for (int k = 0; k < nnodes; k++)
    if (count[k] > g->ppn) g->ppn = count[k];
  if (host) {
    BRAID_CHECK_GOTO(braid_topo_add_pseudo_gpus(sys, g->ppn, &pseudo), res, out);
    sys = pseudo;
  }
  BRAID_CHECK_GOTO(map_devices(sys, nranks, ranks, host, dev), res, out);
  if (nnodes > 1 && sys->nnics == 0) { /* no NIC in sysfs (e.g. only loopback): one made-up socket NIC */
    if (pseudo == NULL) BRAID_CHECK_GOTO(braid_topo_add_pseudo_gpus(sys, 1, &pseudo), res, out);
    int cpu = pseudo->cpus[0], nic;
    BRAID_CHECK_GOTO(braid_topo_node_add(pseudo, BRAID_TOPO_NIC, -1, &nic), res, out);
    snprintf(pseudo->nodes[nic].name, sizeof(pseudo->nodes[nic].name), "lo");
    pseudo->nodes[nic].speed = BRAID_TOPO_NET_SPEED_DEFAULT;
    pseudo->nodes[nic].dev = 0;
    BRAID_CHECK_GOTO(braid_topo_link_add(pseudo, nic, cpu, BRAID_LINK_PCI, BRAID_TOPO_NET_SPEED_DEFAULT / 8000.0f), res, out);
    int* nics = realloc(pseudo->nics, sizeof(int));
    if (nics == NULL) {
      BRAID_WARN("Failed to allocate the NIC list");
      res = ncclSystemError;
      goto out;
    }
    pseudo->nics = nics;
    pseudo->nics[0] = nic;
    pseudo->nnics = 1;
    BRAID_CHECK_GOTO(braid_topo_compute_paths(pseudo), res, out);
    sys = pseudo;
    BRAID_CHECK_GOTO(map_devices(sys, nranks, ranks, host, dev), res, out);
  }

  /* node k's ranks by local rank, its devices, and one search per distinct device list */
  BRAID_CALLOC_GOTO(node_ranks, nnodes, res, out);
  BRAID_CALLOC_GOTO(ndev, nranks, res, out);
  BRAID_CALLOC_GOTO(noderes, nnodes, res, out);
  BRAID_CALLOC_GOTO(results, nnodes, res, out);
  for (int k = 0, off = 0; k < nnodes; off += count[k], k++) node_ranks[k] = &local[off];
  for (int k = 0; k < nnodes; k++) {
    int* d = &ndev[node_ranks[k] - local], known = 1;
    for (int i = 0; i < count[k]; i++) {
      d[i] = dev[node_ranks[k][i]];
      known &= d[i] >= 0;
    }
    for (int j = 0; j < k && noderes[k] == NULL; j++)
      if (count[j] == count[k] && memcmp(&ndev[node_ranks[j] - local], d, (size_t)count[k] * sizeof(int)) == 0)
        noderes[k] = noderes[j];
    if (noderes[k] != NULL) continue;
    noderes[k] = &results[k];
    if (!known) { /* a node whose GPUs this system does not have: index order, NCCL's fallback speed */
      BRAID_INFO(BRAID_LOG_GRAPH, "Graph: node %d has GPUs not in the local topology; using rank order", k);
      results[k].nrings = 1;
      results[k].ndev = count[k];
      results[k].bw_intra = results[k].bw_inter = 0.1f;
      results[k].type_intra = results[k].type_inter = BRAID_PATH_SYS;
      for (int i = 0; i < count[k]; i++) results[k].order[0][i] = i;
      results[k].nic_in[0] = results[k].nic_out[0] = 0;
      results[k].relay_in[0] = results[k].relay_out[0] = -1;
      continue;
    }
    BRAID_CHECK_GOTO(braid_graph_search_node(sys, d, count[k], nnodes > 1, &results[k]), res, out);
  }
  g->nrings = BRAID_GRAPH_MAX_RINGS;
  g->bw_intra = g->bw_inter = 1e30f;
  for (int k = 0; k < nnodes; k++) {
    const struct braid_graph_node_rings* r = noderes[k];
    if (r->nrings < g->nrings) g->nrings = r->nrings;
    if (r->bw_intra < g->bw_intra) g->bw_intra = r->bw_intra;
    if (r->bw_inter < g->bw_inter) g->bw_inter = r->bw_inter;
    if (r->type_intra > g->type_intra) g->type_intra = r->type_intra;
    if (r->type_inter > g->type_inter) g->type_inter = r->type_inter;
    g->cross_nic |= r->cross_nic;
  }
  if (nnodes == 1) g->bw_inter = 0;
  g->nchannels = 2 * g->nrings;
  int lo = clamp_param(BRAID_PARAM_MIN_NCHANNELS, 1), hi = clamp_param(BRAID_PARAM_MAX_NCHANNELS, BRAID_MAX_CHANNELS);
  if (g->nchannels < lo) g->nchannels = lo;
  if (g->nchannels > hi) g->nchannels = hi;
  if (g->nrings > g->nchannels) g->nrings = g->nchannels;

  size_t cells = (size_t)g->nchannels * nranks;
  BRAID_CALLOC_GOTO(g->ring, cells, res, out);
  BRAID_CALLOC_GOTO(g->ring_prev, cells, res, out);
  BRAID_CALLOC_GOTO(g->ring_next, cells, res, out);
  BRAID_CALLOC_GOTO(g->tree, cells, res, out);
  BRAID_CALLOC_GOTO(g->net_dev, cells, res, out);
  BRAID_CALLOC_GOTO(g->net_proxy, cells, res, out);
  BRAID_CALLOC_GOTO(g->tree_id, g->nchannels, res, out);
  BRAID_CALLOC_GOTO(tree0, nnodes, res, out);
  BRAID_CALLOC_GOTO(tree1, nnodes, res, out);
  BRAID_CHECK_GOTO(node_trees(nnodes, tree0, tree1), res, out);
  struct node_tree* trees[2] = {tree0, tree1};
  for (int c = 0; c < g->nchannels; c++) BRAID_CHECK_GOTO(lay_channel(g, c, node_ranks, count, noderes, trees), res, out);
  describe(g, sys, dev, host);
  *graph_p = g;
  g = NULL;
out:
  braid_graph_free(g);
  braid_topo_free(pseudo);
  free(count);
  free(local);
  free(dev);
  free(node_ranks);
  free(ndev);
  free(noderes);
  free(results);
  free(tree0);
  free(tree1);
  return res;
}
