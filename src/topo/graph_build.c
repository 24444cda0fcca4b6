/*
 * graph_build.c - braid_graph_build (graph.h): the nodes' search graphs, allgathered, laid
 * out into the communicator's channels as NCCL's ncclTopoPostset / connectRings /
 * connectTrees do. Every rank computes the same result from the same infos.
 *
 *   search channels: the fewest any node found for rings and trees (NCCL takes the minimum
 *   over ranks of both and uses the smaller); speeds the slowest, path types the worst;
 *   rings: node after node, each node's order for the channel; on NCCL_CROSS_NIC=2 rings
 *   nodes at odd positions swap channels 2k and 2k+1 so rails alternate;
 *   trees: per channel the chain of the node's tree order; between nodes NCCL's double
 *   binary tree (src/algo/tree.h), the parent node reached from the chain's first rank, the
 *   node children hung on the first (child 1) and second (child 0) rank for a balanced
 *   tree, both on the first for a plain tree, first and second for a split tree;
 *   channels: the search channels, then their copy carrying tree 1; twice again for sm90+
 *   multi-node rings over 45 GB/s with fewer than 16; NCCL_MAX_NCHANNELS, then
 *   NCCL_MIN_NCHANNELS by copying the first channels; ranks sharing a GPU (which NCCL
 *   refuses) at least 32 / (ranks per GPU) channels the same way (shared_gpu_floor).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/tree.h"
#include "base/check.h"
#include "base/param.h"
#include "topo/graph.h"
#include "topo/search.h"

void braid_graph_free(struct braid_channel_graph* g) {
  if (g == NULL) return;
  free(g->ring);
  free(g->ring_prev);
  free(g->ring_next);
  free(g->tree);
  free(g->net_dev);
  free(g->net_proxy);
  free(g->net_send);
  free(g->net_recv);
  free(g->tree_id);
  free(g->search_channel);
  free(g);
}

void braid_graph_ring_from(const struct braid_channel_graph* g, int c, int rank, int* out) {
  const int* ring = &g->ring[c * g->nranks];
  int start = 0;
  while (start < g->nranks && ring[start] != rank) start++;
  if (start == g->nranks) start = 0;
  for (int i = 0; i < g->nranks; i++) out[i] = ring[(start + i) % g->nranks];
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

static ncclResult_t check_rank(const struct braid_topo_rank* r, int i, int nranks, int host) {
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
  return ncclSuccess;
}

static ncclResult_t layout_make(int nranks, const struct braid_topo_rank* ranks, struct layout* l) {
  ncclResult_t res = ncclSuccess;
  memset(l, 0, sizeof(*l));
  if (nranks < 1 || ranks == NULL) {
    BRAID_WARN("braid_graph: %d ranks (table %p)", nranks, (const void*)ranks);
    return ncclInvalidArgument;
  }
  l->host = ranks[0].bus_id < 0;
  for (int i = 0; i < nranks; i++) {
    BRAID_CHECK(check_rank(&ranks[i], i, nranks, l->host));
    if (ranks[i].node + 1 > l->nnodes) l->nnodes = ranks[i].node + 1;
  }
  BRAID_CALLOC_GOTO(l->count, l->nnodes, res, err);
  BRAID_CALLOC_GOTO(l->local, nranks, res, err);
  BRAID_CALLOC_GOTO(l->node_ranks, l->nnodes, res, err);
  for (int i = 0; i < nranks; i++) l->count[ranks[i].node]++;
  for (int k = 0, off = 0; k < l->nnodes; off += l->count[k], k++) {
    l->node_ranks[k] = &l->local[off];
    if (l->count[k] == 0) {
      BRAID_WARN("braid_graph_compute: node %d has no rank (nodes must be numbered 0..%d)", k, l->nnodes - 1);
      res = ncclInvalidArgument;
      goto err;
    }
    if (l->count[k] > BRAID_GRAPH_MAX_LOCAL) {
      BRAID_WARN("braid_graph: node %d has %d ranks, more than %d", k, l->count[k], BRAID_GRAPH_MAX_LOCAL);
      res = ncclInvalidArgument;
      goto err;
    }
    for (int j = 0; j < l->count[k]; j++) l->node_ranks[k][j] = -1;
  }
  for (int i = 0; i < nranks; i++) {
    const struct braid_topo_rank* r = &ranks[i];
    int k = r->node;
    if (r->local_rank < 0 || r->local_rank >= l->count[k] || l->node_ranks[k][r->local_rank] >= 0) {
      BRAID_WARN("braid_graph_compute: rank %d: local rank %d on node %d (%d ranks) is %s", i, r->local_rank, k,
                 l->count[k], r->local_rank < 0 || r->local_rank >= l->count[k] ? "out of range" : "taken twice");
      res = ncclInvalidArgument;
      goto err;
    }
    l->node_ranks[k][r->local_rank] = i;
  }
  /* Two ranks of one node on one GPU: refused as NCCL does, unless BRAID_GPU_SHARING=1 */
  for (int i = 0; i < nranks && !l->host; i++)
    for (int j = i + 1; j < nranks; j++)
      if (ranks[i].bus_id == ranks[j].bus_id && ranks[i].node == ranks[j].node &&
          braid_param_int(BRAID_PARAM_GPU_SHARING) != 1) {
        BRAID_WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %" PRIx64, i, j, ranks[i].bus_id);
        res = ncclInvalidUsage;
        goto err;
      }
  return ncclSuccess;
err:
  layout_free(l);
  return res;
}

ncclResult_t braid_graph_check_ranks(int nranks, const struct braid_topo_rank* ranks) {
  struct layout l;
  BRAID_CHECK(layout_make(nranks, ranks, &l));
  layout_free(&l);
  return ncclSuccess;
}

/* A part that came over the network: does it fit a node of `count` ranks? */
static const char* check_part(const struct braid_graph_part* p, int count, int nnics) {
  if (p->nchannels < 1 || p->nchannels > BRAID_GRAPH_MAX_RINGS) return "nchannels";
  if (!(p->bw_intra > 0) || p->bw_inter < 0) return "bandwidth";
  if (!(p->latency_inter >= 0 && p->latency_inter < 1e7f)) return "latency";
  for (int r = 0; r < p->nchannels; r++) {
    uint8_t seen[BRAID_GRAPH_MAX_LOCAL] = {0};
    for (int i = 0; i < count; i++)
      if (p->order[r][i] >= count || seen[p->order[r][i]]++) return "order";
    if (p->relay_in[r] < -1 || p->relay_in[r] >= count || p->relay_out[r] < -1 || p->relay_out[r] >= count)
      return "relay";
    if (p->nic_in[r] < -1 || p->nic_in[r] >= nnics || p->nic_out[r] < -1 || p->nic_out[r] >= nnics) return "nic";
  }
  return NULL;
}

static ncclResult_t check_info(const struct braid_graph_node_info* info, int k, int count) {
  const char* bad = info->ndev != count ? "ndev" : check_part(&info->ring, count, info->nnics);
  if (bad == NULL) bad = check_part(&info->tree, count, info->nnics);
  if (bad) {
    BRAID_WARN("braid_graph_build: the info of node %d (%d ranks) has a bad %s", k, count, bad);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static int clamp_param(enum braid_param id, int def) {
  int64_t v = braid_param_int(id);
  if (v == BRAID_PARAM_UNSET) return def;
  if (v < 0) return 0;
  if (v > BRAID_MAX_CHANNELS) return BRAID_MAX_CHANNELS;
  return (int)v;
}

/* Node k's parent and children in tree t, and which child of its parent it is. */
struct node_tree {
  int up, down[2], child_type;
};

static ncclResult_t node_trees(int nnodes, struct node_tree* t0, struct node_tree* t1) {
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < nnodes; k++) {
      struct node_tree* x = t ? &t1[k] : &t0[k];
      int up, d0, d1, tr = t == 0 ? k : nnodes % 2 ? (k - 1 + nnodes) % nnodes : nnodes - 1 - k;
      if (braid_dbtree(nnodes, k, t, &x->up, &x->down[0], &x->down[1]) != BRAID_SCHED_OK ||
          braid_btree(nnodes, tr, &up, &d0, &d1) != BRAID_SCHED_OK) {
        BRAID_WARN("Graph: no double binary tree over %d nodes", nnodes);
        return ncclInternalError;
      }
      x->child_type = tr < up ? 0 : 1; /* NCCL's parentChildType, in the tree's own numbering */
    }
  return ncclSuccess;
}

/* Ranks per GPU where every node's ranks share one GPU (BRAID_GPU_SHARING=1; NCCL refuses it):
 * 1 when any node has several GPUs or a GPU of its own per rank, and in host mode. */
static int gpu_sharing(int nranks, const struct braid_topo_rank* ranks, int host) {
  int most = 1;
  for (int i = 0; i < nranks && !host; i++) {
    int n = 0;
    for (int j = 0; j < nranks; j++) {
      if (ranks[j].node != ranks[i].node) continue;
      if (ranks[j].bus_id != ranks[i].bus_id) return 1;
      n++;
    }
    if (n > most) most = n;
  }
  return most;
}

/* Channels of ranks sharing a GPU. The search knows no such GPU and gives NCCL's fallback, one
 * channel (two with the tree copy), while their rings never leave the GPU's memory: a rank's
 * kernel of two blocks moves a small fraction of what the GPU can. Ranks sharing a GPU share
 * its SMs too, so the GPU's SHARED_GPU_CHANNELS blocks are split between them (16 each for 2
 * ranks, 8 for 4), never under the fallback's 2; NCCL_MAX_NCHANNELS still caps them. */
#define SHARED_GPU_CHANNELS 32
/* What the tuner prices one such channel at (GB/s): the fallback's 0.1 GB/s over SYS made it
 * pick Simple from 4 KiB and 256 threads. The ring never leaves the GPU (LOC, priced as
 * NVLink); one block of a Hopper copy loop moves some tens of GB/s: an estimate until
 * tests/gpu/run.sh measures it. */
#define SHARED_GPU_CHANNEL_BW 20.0f
static int shared_gpu_floor(int sharing) {
  if (sharing < 2) return 0;
  int n = SHARED_GPU_CHANNELS / sharing;
  return n < 2 ? 2 : n;
}

/* The channels' search channel and tree, NCCL's duplications and copies; `floor`: the fewest
 * channels (copies of the first, as NCCL_MIN_NCHANNELS makes), under NCCL_MAX_NCHANNELS. */
static int channel_plan(int n, int sm90_multi, int floor, int* search, int* tree) {
  int nch = 2 * n < BRAID_MAX_CHANNELS ? 2 * n : BRAID_MAX_CHANNELS;
  for (int c = 0; c < nch; c++) {
    search[c] = c % n;
    tree[c] = c / n;
  }
  if (sm90_multi && nch < 16) { /* 4 compute channels per search channel */
    for (int c = nch; c < 2 * nch; c++) search[c] = search[c - nch], tree[c] = tree[c - nch];
    nch *= 2;
  }
  int hi = clamp_param(BRAID_PARAM_MAX_NCHANNELS, BRAID_MAX_CHANNELS), lo = clamp_param(BRAID_PARAM_MIN_NCHANNELS, 0);
  if (hi < 1) hi = 1;
  if (nch > hi) nch = hi;
  if (lo < (floor < hi ? floor : hi)) lo = floor < hi ? floor : hi;
  int start = nch;
  for (int c = nch; c < lo; c++) search[c] = search[c - start], tree[c] = tree[c - start];
  if (lo > nch) nch = lo;
  return nch;
}

/* The order of node k on channel c (search channel s): odd nodes swap pairs on crossNic 2. */
static int node_channel(const struct braid_graph_node_info* info, int k, int s, int n) {
  if (info->ring.cross_nic == 2 && n % 2 == 0 && k % 2 == 1) return s ^ 1;
  return s;
}

static void lay_ring(struct braid_channel_graph* g, int c, const struct layout* l,
                     const struct braid_graph_node_info* infos, int s) {
  int n = g->nranks, pos = 0;
  int* ring = &g->ring[c * n];
  for (int i = 0; i < n; i++) g->net_dev[c * n + i] = g->net_proxy[c * n + i] = -1;
  for (int i = 0; i < n; i++) g->net_send[c * n + i] = g->net_recv[c * n + i] = -1;
  for (int k = 0; k < l->nnodes; k++) {
    const struct braid_graph_part* p = &infos[k].ring;
    int sk = node_channel(&infos[k], k, s, g->nrings), cnt = l->count[k];
    for (int i = 0; i < cnt; i++) ring[pos++] = l->node_ranks[k][p->order[sk][i]];
    if (l->nnodes < 2) continue;
    int head = l->node_ranks[k][p->order[sk][0]], last = l->node_ranks[k][p->order[sk][cnt - 1]];
    g->net_dev[c * n + head] = g->net_recv[c * n + head] = p->nic_in[sk];
    g->net_send[c * n + last] = p->nic_out[sk];
    if (p->relay_in[sk] >= 0) g->net_proxy[c * n + head] = l->node_ranks[k][p->relay_in[sk]];
    if (head != last) {
      g->net_dev[c * n + last] = p->nic_out[sk];
      if (p->relay_out[sk] >= 0) g->net_proxy[c * n + last] = l->node_ranks[k][p->relay_out[sk]];
    }
  }
  for (int i = 0; i < n; i++) {
    g->ring_next[c * n + ring[i]] = ring[(i + 1) % n];
    g->ring_prev[c * n + ring[i]] = ring[(i + n - 1) % n];
  }
}

static void tree_down(struct braid_tree_links* t, int r) {
  for (int x = 0; x < 3; x++)
    if (t->down[x] < 0) {
      t->down[x] = r;
      return;
    }
}

/* The rank of node k that faces its parent (0), its child 0 (1) or child 1 (2) in tree
 * search channel s: the chain's first or second rank, as the node's pattern says. */
static int tree_face(const struct layout* l, const struct braid_graph_node_info* infos, int k, int s, int which) {
  const struct braid_graph_part* p = &infos[k].tree;
  int idx = 0;
  if (which == 1 && p->pattern != BRAID_PATTERN_TREE && l->count[k] > 1) idx = 1;
  if (which == 2 && p->pattern == BRAID_PATTERN_SPLIT_TREE && l->count[k] > 1) idx = 1;
  return l->node_ranks[k][p->order[s][idx]];
}

static void lay_tree(struct braid_channel_graph* g, int c, const struct layout* l,
                     const struct braid_graph_node_info* infos, int s, const struct node_tree* nt) {
  int n = g->nranks;
  for (int k = 0; k < l->nnodes; k++) { /* the chain inside each node */
    const struct braid_graph_part* p = &infos[k].tree;
    for (int i = 0; i < l->count[k]; i++) {
      struct braid_tree_links* t = &g->tree[c * n + l->node_ranks[k][p->order[s][i]]];
      t->up = i > 0 ? l->node_ranks[k][p->order[s][i - 1]] : -1;
      t->down[0] = i + 1 < l->count[k] ? l->node_ranks[k][p->order[s][i + 1]] : -1;
      t->down[1] = t->down[2] = -1;
    }
  }
  for (int k = 0; k < l->nnodes; k++) { /* between nodes */
    const struct node_tree* x = &nt[k];
    struct braid_tree_links* tp = &g->tree[c * n + tree_face(l, infos, k, s, 0)];
    if (x->up >= 0) tp->up = tree_face(l, infos, x->up, s, x->child_type == 0 ? 1 : 2);
    if (x->down[0] >= 0)
      tree_down(&g->tree[c * n + tree_face(l, infos, k, s, 1)], tree_face(l, infos, x->down[0], s, 0));
    if (x->down[1] >= 0)
      tree_down(&g->tree[c * n + tree_face(l, infos, k, s, 2)], tree_face(l, infos, x->down[1], s, 0));
  }
}

/* The weakest node's numbers, as NCCL's allgather of graph infos takes them. */
static void merge_nodes(struct braid_channel_graph* g, const struct layout* l,
                        const struct braid_graph_node_info* infos) {
  g->bw_intra = g->bw_inter = g->tree_bw_intra = g->tree_bw_inter = g->nvl_bw = 1e30f;
  g->nrings = BRAID_GRAPH_MAX_RINGS;
  g->same_channels = g->tree_same_channels = 1;
  g->min_sm = 1 << 30;
  g->nvls = 1;
  g->nnics = 1 << 30;
  g->cpu_vendor = infos[0].cpu_vendor;
  g->cpu_arch = infos[0].cpu_arch;
  for (int k = 0; k < l->nnodes; k++) {
    const struct braid_graph_node_info* r = &infos[k];
    const struct braid_graph_part *ri = &r->ring, *ti = &r->tree;
    int nch = ri->nchannels < ti->nchannels ? ri->nchannels : ti->nchannels;
    if (l->count[k] > g->ppn) g->ppn = l->count[k];
    if (nch < g->nrings) g->nrings = nch;
    if (ri->bw_intra < g->bw_intra) g->bw_intra = ri->bw_intra;
    if (ri->bw_inter < g->bw_inter) g->bw_inter = ri->bw_inter;
    if (ri->latency_inter > g->latency_inter) g->latency_inter = ri->latency_inter;
    if (ti->latency_inter > g->tree_latency_inter) g->tree_latency_inter = ti->latency_inter;
    if (ti->bw_intra < g->tree_bw_intra) g->tree_bw_intra = ti->bw_intra;
    if (ti->bw_inter < g->tree_bw_inter) g->tree_bw_inter = ti->bw_inter;
    if (ri->type_intra > g->type_intra) g->type_intra = ri->type_intra;
    if (ri->type_inter > g->type_inter) g->type_inter = ri->type_inter;
    if (ti->type_intra > g->tree_type_intra) g->tree_type_intra = ti->type_intra;
    if (ti->type_inter > g->tree_type_inter) g->tree_type_inter = ti->type_inter;
    if (ri->cross_nic > g->cross_nic) g->cross_nic = ri->cross_nic;
    if (ri->same_channels < g->same_channels) g->same_channels = ri->same_channels;
    if (ti->same_channels < g->tree_same_channels) g->tree_same_channels = ti->same_channels;
    if (ti->pattern > g->tree_pattern) g->tree_pattern = ti->pattern;
    if (r->min_sm < g->min_sm) g->min_sm = r->min_sm;
    if (r->max_sm > g->max_sm) g->max_sm = r->max_sm;
    if (r->nvl_bw < g->nvl_bw) g->nvl_bw = r->nvl_bw;
    if (r->nnics < g->nnics) g->nnics = r->nnics;
    if (r->cpu_vendor == BRAID_CPU_VENDOR_AMD) g->cpu_vendor = r->cpu_vendor;
    g->nvls &= r->nvls != 0;
  }
}

ncclResult_t braid_graph_build(int nranks, const struct braid_topo_rank* ranks,
                               const struct braid_graph_node_info* infos, struct braid_channel_graph** graph_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_channel_graph* g = NULL;
  struct node_tree *tree0 = NULL, *tree1 = NULL;
  int search[BRAID_MAX_CHANNELS], tree[BRAID_MAX_CHANNELS];
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
  merge_nodes(g, &l, infos);
  int sm90_multi = !l.host && g->min_sm >= 90 && l.nnodes > 1 && g->bw_intra > 45.0f;
  int sharing = gpu_sharing(nranks, ranks, l.host);
  g->nchannels = channel_plan(g->nrings, sm90_multi, shared_gpu_floor(sharing), search, tree);
  if (sharing > 1 && g->nrings == 1 && g->type_intra == BRAID_PATH_SYS) {
    /* the model's bandwidth is search channels x speed: the one search channel carries them all */
    g->type_intra = g->tree_type_intra = BRAID_PATH_LOC;
    g->bw_intra = g->tree_bw_intra = SHARED_GPU_CHANNEL_BW * (float)g->nchannels;
  }

  size_t cells = (size_t)g->nchannels * nranks;
  BRAID_CALLOC_GOTO(g->ring, cells, res, out);
  BRAID_CALLOC_GOTO(g->ring_prev, cells, res, out);
  BRAID_CALLOC_GOTO(g->ring_next, cells, res, out);
  BRAID_CALLOC_GOTO(g->tree, cells, res, out);
  BRAID_CALLOC_GOTO(g->net_dev, cells, res, out);
  BRAID_CALLOC_GOTO(g->net_proxy, cells, res, out);
  BRAID_CALLOC_GOTO(g->net_send, cells, res, out);
  BRAID_CALLOC_GOTO(g->net_recv, cells, res, out);
  BRAID_CALLOC_GOTO(g->tree_id, g->nchannels, res, out);
  BRAID_CALLOC_GOTO(g->search_channel, g->nchannels, res, out);
  BRAID_CALLOC_GOTO(tree0, l.nnodes, res, out);
  BRAID_CALLOC_GOTO(tree1, l.nnodes, res, out);
  BRAID_CHECK_GOTO(node_trees(l.nnodes, tree0, tree1), res, out);
  for (int c = 0; c < g->nchannels; c++) {
    g->tree_id[c] = tree[c];
    g->search_channel[c] = search[c];
    lay_ring(g, c, &l, infos, search[c]);
    lay_tree(g, c, &l, infos, search[c], tree[c] ? tree1 : tree0);
  }
  *graph_p = g;
  g = NULL;
out:
  braid_graph_free(g);
  free(tree0);
  free(tree1);
  layout_free(&l);
  return res;
}
