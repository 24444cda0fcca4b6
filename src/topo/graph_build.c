/*
 * graph_build.c - braid_graph_node_search, braid_graph_build and braid_graph_compute
 * (graph.h): checks what init hands over, maps every rank to a device of the system graph (a
 * GPU by bus id, or in host mode a pseudo-GPU per local rank), searches a node (graph.c), and
 * lays the per-node rings end to end into the communicator's channels with their trees and
 * NICs.
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
#include "base/check.h"
#include "base/param.h"
#include "topo/graph.h"

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
static ncclResult_t check_ranks(int nranks, const struct braid_topo_rank* ranks, int* nnodes_p, int* count, int* local,
                                int* host_p) {
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
  /* Two ranks of one node on one GPU: refused as NCCL does, unless BRAID_GPU_SHARING=1. The
   * bus ids decide, so GPUs the topology does not list (the fake GPU) are checked too. A
   * shared GPU appears once in the search: its second rank is "not in the topology", which
   * lays that node out in rank order. */
  int sharing = braid_param_int(BRAID_PARAM_GPU_SHARING) == 1;
  for (int i = 0; i < nranks; i++)
    for (int j = i + 1; j < nranks && !host; j++)
      if (ranks[i].bus_id == ranks[j].bus_id && ranks[i].node == ranks[j].node) {
        if (!sharing) {
          BRAID_WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %" PRIx64, i, j,
                     ranks[i].bus_id);
          return ncclInvalidUsage;
        }
        dev[j] = -1;
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
                                const struct braid_graph_node_info* infos, struct node_tree* const* trees) {
  int n = g->nranks, r = c % g->nrings, t = (c / g->nrings) % 2, pos = 0;
  int* ring = &g->ring[c * n];
  g->tree_id[c] = t;
  for (int k = 0; k < g->nnodes; k++)
    for (int i = 0; i < count[k]; i++) ring[pos++] = node_ranks[k][infos[k].order[r][i]];
  for (int i = 0; i < n; i++) {
    g->ring_next[c * n + ring[i]] = ring[(i + 1) % n];
    g->ring_prev[c * n + ring[i]] = ring[(i + n - 1) % n];
    g->net_dev[c * n + i] = -1;
    g->net_proxy[c * n + i] = -1;
  }
  for (int k = 0; k < g->nnodes; k++) {
    const struct braid_graph_node_info* info = &infos[k];
    const uint8_t* order = info->order[r];
    int head = node_ranks[k][order[0]], last = node_ranks[k][order[count[k] - 1]];
    int up = trees[t][k].up, d0 = trees[t][k].down[0], d1 = trees[t][k].down[1];
    for (int i = 0; i < count[k]; i++) {
      struct braid_tree_links* tl = &g->tree[c * n + node_ranks[k][order[i]]];
      tl->up = i > 0 ? node_ranks[k][order[i - 1]] : (up >= 0 ? node_ranks[up][infos[up].order[r][0]] : -1);
      tl->down[0] = i + 1 < count[k] ? node_ranks[k][order[i + 1]] : -1;
      tl->down[1] = tl->down[2] = -1;
    }
    struct braid_tree_links* hl = &g->tree[c * n + head];
    int slot = hl->down[0] >= 0 ? 1 : 0;
    if (d0 >= 0) hl->down[slot++] = node_ranks[d0][infos[d0].order[r][0]];
    if (d1 >= 0) hl->down[slot++] = node_ranks[d1][infos[d1].order[r][0]];
    if (g->nnodes > 1) {
      g->net_dev[c * n + head] = info->nic_in[r];
      g->net_dev[c * n + last] = head == last ? info->nic_in[r] : info->nic_out[r];
      if (info->relay_in[r] >= 0) g->net_proxy[c * n + head] = node_ranks[k][info->relay_in[r]];
      if (info->relay_out[r] >= 0 && head != last) g->net_proxy[c * n + last] = node_ranks[k][info->relay_out[r]];
    }
  }
  return ncclSuccess;
}

/* The ranks of a communicator, node by node. */
struct layout {
  int nnodes, host;
  int* count;       /* ranks per node */
  int* local;       /* node-major: the ranks of node 0 by local rank, then node 1, ... */
  int** node_ranks; /* node k's ranks: &local[offset of k] */
};

static void layout_free(struct layout* l) {
  free(l->count);
  free(l->local);
  free(l->node_ranks);
}

static ncclResult_t layout_make(int nranks, const struct braid_topo_rank* ranks, struct layout* l) {
  ncclResult_t res = ncclSuccess;
  memset(l, 0, sizeof(*l));
  if (nranks < 1 || ranks == NULL) {
    BRAID_WARN("braid_graph: %d ranks (table %p)", nranks, (const void*)ranks);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(l->count, nranks, res, err);
  BRAID_CALLOC_GOTO(l->local, nranks, res, err);
  BRAID_CHECK_GOTO(check_ranks(nranks, ranks, &l->nnodes, l->count, l->local, &l->host), res, err);
  BRAID_CALLOC_GOTO(l->node_ranks, l->nnodes, res, err);
  for (int k = 0, off = 0; k < l->nnodes; off += l->count[k], k++) {
    l->node_ranks[k] = &l->local[off];
    if (l->count[k] > BRAID_GRAPH_MAX_LOCAL) {
      BRAID_WARN("braid_graph: node %d has %d ranks, more than %d", k, l->count[k], BRAID_GRAPH_MAX_LOCAL);
      res = ncclInvalidArgument;
      goto err;
    }
  }
  return ncclSuccess;
err:
  layout_free(l);
  return res;
}

/* The system the search runs on: host mode adds one pseudo-GPU per local rank; several nodes
 * without any NIC in sysfs (loopback only) get one made-up socket NIC. *own_p: to free. */
static ncclResult_t prepare_sys(const struct braid_topo_system* sys, const struct layout* l,
                                const struct braid_topo_system** use_p, struct braid_topo_system** own_p) {
  struct braid_topo_system* c = NULL;
  int ppn = 0;
  for (int k = 0; k < l->nnodes; k++)
    if (l->count[k] > ppn) ppn = l->count[k];
  *own_p = NULL;
  *use_p = sys;
  if (!l->host && (l->nnodes == 1 || sys->nnics > 0)) return ncclSuccess;
  BRAID_CHECK(braid_topo_add_pseudo_gpus(sys, l->host ? ppn : 1, &c));
  if (l->nnodes > 1 && c->nnics == 0) {
    int nic;
    ncclResult_t res = braid_topo_node_add(c, BRAID_TOPO_NIC, -1, &nic);
    if (res == ncclSuccess) {
      snprintf(c->nodes[nic].name, sizeof(c->nodes[nic].name), "lo");
      c->nodes[nic].speed = BRAID_TOPO_NET_SPEED_DEFAULT;
      c->nodes[nic].dev = 0;
      c->nodes[nic].parent = c->cpus[0];
      res = braid_topo_link_add(c, nic, c->cpus[0], BRAID_LINK_PCI, BRAID_TOPO_NET_SPEED_DEFAULT / 8000.0f);
    }
    int* nics = res == ncclSuccess ? realloc(c->nics, sizeof(int)) : NULL;
    if (res == ncclSuccess && nics == NULL) {
      BRAID_WARN("Failed to allocate the NIC list");
      res = ncclSystemError;
    }
    if (res == ncclSuccess) {
      c->nics = nics;
      c->nics[0] = nic;
      c->nnics = 1;
      res = braid_topo_compute_paths(c);
    }
    if (res != ncclSuccess) {
      braid_topo_free(c);
      return res;
    }
  }
  *own_p = c;
  *use_p = c;
  return ncclSuccess;
}

/* Search node k of the layout on `sys` (already prepared). */
static ncclResult_t search_one(const struct braid_topo_system* sys, const struct layout* l, const int* dev, int k,
                               struct braid_graph_node_info* info) {
  int ndev = l->count[k], known = 1, d[BRAID_GRAPH_MAX_LOCAL];
  for (int i = 0; i < ndev; i++) {
    d[i] = dev[l->node_ranks[k][i]];
    known &= d[i] >= 0;
  }
  if (known) {
    BRAID_CHECK(braid_graph_search_node(sys, d, ndev, l->nnodes > 1, info));
  } else { /* GPUs this system does not have: rank order at NCCL's fallback speed */
    BRAID_INFO(BRAID_LOG_GRAPH, "Graph: node %d has GPUs not in the local topology; using rank order", k);
    memset(info, 0, sizeof(*info));
    info->ndev = ndev;
    info->nrings = 1;
    info->bw_intra = 0.1f;
    info->bw_inter = l->nnodes > 1 ? 0.1f : 0;
    info->type_intra = BRAID_PATH_SYS;
    info->type_inter = l->nnodes > 1 ? BRAID_PATH_SYS : BRAID_PATH_LOC;
    for (int i = 0; i < ndev; i++) info->order[0][i] = (uint8_t)i;
    info->nic_in[0] = info->nic_out[0] = (int16_t)(l->nnodes > 1 ? 0 : -1);
    info->relay_in[0] = info->relay_out[0] = -1;
  }
  /* what the tuner needs to know about this node */
  info->host_mode = l->host;
  info->min_sm = l->host || !known ? 0 : 1 << 30;
  info->max_sm = 0;
  info->nvl_bw = l->host || !known ? 0 : 1e30f;
  for (int i = 0; i < ndev && known && !l->host; i++) {
    const struct braid_topo_node* g = &sys->nodes[d[i]];
    float nvl = 0;
    if (g->sm < info->min_sm) info->min_sm = g->sm;
    if (g->sm > info->max_sm) info->max_sm = g->sm;
    for (int j = 0; j < g->nlinks; j++)
      if (g->links[j].kind == BRAID_LINK_NVL) nvl += g->links[j].bw;
    if (nvl < info->nvl_bw) info->nvl_bw = nvl;
  }
  info->cpu_vendor = sys->ncpus > 0 ? sys->nodes[sys->cpus[0]].vendor : BRAID_CPU_VENDOR_OTHER;
  info->cpu_arch = sys->ncpus > 0 ? sys->nodes[sys->cpus[0]].arch : BRAID_CPU_ARCH_X86;
  info->nnics = sys->nnics;
  info->nvls =
      !l->host && known && ndev > 1 && braid_topo_nvls_capable(sys) && braid_param_int(BRAID_PARAM_NVLS_ENABLE) != 0;
  return ncclSuccess;
}

ncclResult_t braid_graph_node_search(const struct braid_topo_system* sys, int nranks,
                                     const struct braid_topo_rank* ranks, int node,
                                     struct braid_graph_node_info* info) {
  ncclResult_t res = ncclSuccess;
  struct layout l;
  struct braid_topo_system* own = NULL;
  const struct braid_topo_system* use = NULL;
  int* dev = NULL;
  if (sys == NULL || info == NULL) {
    BRAID_WARN("braid_graph_node_search: %s is NULL", sys == NULL ? "sys" : "info");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(layout_make(nranks, ranks, &l));
  if (node < 0 || node >= l.nnodes) {
    BRAID_WARN("braid_graph_node_search: node %d is not in [0, %d)", node, l.nnodes);
    res = ncclInvalidArgument;
    goto out;
  }
  BRAID_CHECK_GOTO(prepare_sys(sys, &l, &use, &own), res, out);
  BRAID_CALLOC_GOTO(dev, nranks, res, out);
  BRAID_CHECK_GOTO(map_devices(use, nranks, ranks, l.host, dev), res, out);
  BRAID_CHECK_GOTO(search_one(use, &l, dev, node, info), res, out);
out:
  free(dev);
  braid_topo_free(own);
  layout_free(&l);
  return res;
}

/* An info that came over the network: does it fit node k? */
static ncclResult_t check_info(const struct braid_graph_node_info* info, int k, int count) {
  const char* bad = NULL;
  if (info->ndev != count)
    bad = "ndev";
  else if (info->nrings < 1 || info->nrings > BRAID_GRAPH_MAX_RINGS)
    bad = "nrings";
  else if (!(info->bw_intra > 0) || info->bw_inter < 0)
    bad = "bandwidth";
  for (int r = 0; r < info->nrings && !bad; r++) {
    uint8_t seen[BRAID_GRAPH_MAX_LOCAL] = {0};
    for (int i = 0; i < count && !bad; i++) {
      if (info->order[r][i] >= count || seen[info->order[r][i]]++) bad = "order";
    }
    if (info->relay_in[r] < -1 || info->relay_in[r] >= count || info->relay_out[r] < -1 || info->relay_out[r] >= count)
      bad = "relay";
    if (info->nic_in[r] < -1 || info->nic_in[r] >= info->nnics || info->nic_out[r] < -1 ||
        info->nic_out[r] >= info->nnics)
      bad = "nic";
  }
  if (bad) {
    BRAID_WARN("braid_graph_build: the info of node %d (%d ranks) has a bad %s", k, count, bad);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t braid_graph_build(int nranks, const struct braid_topo_rank* ranks,
                               const struct braid_graph_node_info* infos, struct braid_channel_graph** graph_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_channel_graph* g = NULL;
  struct node_tree *tree0 = NULL, *tree1 = NULL;
  struct layout l;
  if (infos == NULL || graph_p == NULL) {
    BRAID_WARN("braid_graph_build: %s is NULL", infos == NULL ? "infos" : "graph_p");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(layout_make(nranks, ranks, &l));
  for (int k = 0; k < l.nnodes; k++) BRAID_CHECK_GOTO(check_info(&infos[k], k, l.count[k]), res, out);
  BRAID_CALLOC_GOTO(g, 1, res, out);
  g->nranks = nranks;
  g->nnodes = l.nnodes;
  g->pattern = BRAID_GRAPH_PATTERN_RING;
  g->host_mode = l.host;
  g->nrings = BRAID_GRAPH_MAX_RINGS;
  g->bw_intra = g->bw_inter = g->nvl_bw = 1e30f;
  g->min_sm = 1 << 30;
  g->nvls = 1;
  g->nnics = 1 << 30;
  g->cpu_vendor = infos[0].cpu_vendor;
  g->cpu_arch = infos[0].cpu_arch;
  for (int k = 0; k < l.nnodes; k++) { /* the weakest node sets the pace */
    const struct braid_graph_node_info* r = &infos[k];
    if (l.count[k] > g->ppn) g->ppn = l.count[k];
    if (r->nrings < g->nrings) g->nrings = r->nrings;
    if (r->bw_intra < g->bw_intra) g->bw_intra = r->bw_intra;
    if (r->bw_inter < g->bw_inter) g->bw_inter = r->bw_inter;
    if (r->type_intra > g->type_intra) g->type_intra = r->type_intra;
    if (r->type_inter > g->type_inter) g->type_inter = r->type_inter;
    if (r->min_sm < g->min_sm) g->min_sm = r->min_sm;
    if (r->max_sm > g->max_sm) g->max_sm = r->max_sm;
    if (r->nvl_bw < g->nvl_bw) g->nvl_bw = r->nvl_bw;
    if (r->nnics < g->nnics) g->nnics = r->nnics;
    if (r->cpu_vendor == BRAID_CPU_VENDOR_AMD) g->cpu_vendor = r->cpu_vendor;
    g->cross_nic |= r->cross_nic;
    g->nvls &= r->nvls != 0;
  }
  if (l.nnodes == 1) g->bw_inter = 0;
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
  BRAID_CALLOC_GOTO(tree0, l.nnodes, res, out);
  BRAID_CALLOC_GOTO(tree1, l.nnodes, res, out);
  BRAID_CHECK_GOTO(node_trees(l.nnodes, tree0, tree1), res, out);
  struct node_tree* trees[2] = {tree0, tree1};
  for (int c = 0; c < g->nchannels; c++)
    BRAID_CHECK_GOTO(lay_channel(g, c, l.node_ranks, l.count, infos, trees), res, out);
  *graph_p = g;
  g = NULL;
out:
  braid_graph_free(g);
  free(tree0);
  free(tree1);
  layout_free(&l);
  return res;
}

ncclResult_t braid_graph_compute(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                 struct braid_channel_graph** graph_p) {
  ncclResult_t res = ncclSuccess;
  struct layout l;
  struct braid_topo_system* own = NULL;
  const struct braid_topo_system* use = NULL;
  struct braid_graph_node_info* infos = NULL;
  int* dev = NULL;
  if (sys == NULL || ranks == NULL || graph_p == NULL || nranks < 1) {
    BRAID_WARN("braid_graph_compute: bad argument (sys %p, nranks %d, ranks %p, graph_p %p)", (const void*)sys, nranks,
               (const void*)ranks, (void*)graph_p);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(layout_make(nranks, ranks, &l));
  BRAID_CHECK_GOTO(prepare_sys(sys, &l, &use, &own), res, out);
  BRAID_CALLOC_GOTO(dev, nranks, res, out);
  BRAID_CALLOC_GOTO(infos, l.nnodes, res, out);
  BRAID_CHECK_GOTO(map_devices(use, nranks, ranks, l.host, dev), res, out);
  for (int k = 0; k < l.nnodes; k++) {
    int same = -1; /* a node with the same devices as an earlier one has the same rings */
    for (int j = 0; j < k && same < 0; j++) {
      int eq = l.count[j] == l.count[k];
      for (int i = 0; i < l.count[k] && eq; i++) eq = dev[l.node_ranks[j][i]] == dev[l.node_ranks[k][i]];
      if (eq) same = j;
    }
    if (same >= 0)
      memcpy(&infos[k], &infos[same], sizeof(infos[k]));
    else
      BRAID_CHECK_GOTO(search_one(use, &l, dev, k, &infos[k]), res, out);
  }
  BRAID_CHECK_GOTO(braid_graph_build(nranks, ranks, infos, graph_p), res, out);
out:
  free(infos);
  free(dev);
  braid_topo_free(own);
  layout_free(&l);
  return res;
}
