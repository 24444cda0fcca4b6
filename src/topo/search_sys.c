/*
 * search_sys.c - the parts of NCCL's channel search (search.c) that do not recurse: the speed
 * lists of each NCCL version, the search's copy of the node's system (GPUs and NIC ports in
 * NCCL's order, every GPU-GPU / GPU-NIC path as its list of links, each link's reverse),
 * ncclTopoSearchInit, followPath's bandwidth bookkeeping and the choice of NICs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "topo/search_int.h"

/* ---- speed lists per NCCL version ----------------------------------------------------- */

#define SPEEDS(since, ...)                                          \
  {                                                                 \
    since, (int)(sizeof((float[]){__VA_ARGS__}) / sizeof(float)), { \
      __VA_ARGS__                                                   \
    }                                                               \
  }

/* Newest first; the first entry whose `since` is <= the version applies. */
static const struct speeds intra_default[] = {
    SPEEDS(21800, 40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
    SPEEDS(0, 44, 30, 22, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
};
static const struct speeds inter_default[] = {
    SPEEDS(21800, 48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(21600, 48, 30, 28, 24, 22, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(0, 48, 30, 24, 22, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4f, 1.2f, 0.24f, 0.12f),
};
static const struct speeds intra_sm90[] = {
    SPEEDS(22100, 60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3),
    SPEEDS(21900, 60, 50, 40, 30, 24, 20, 15, 12, 6, 3),
    SPEEDS(21800, 60, 40, 30, 24, 20, 15, 12, 6, 3),
    SPEEDS(0, 66, 33, 24, 20, 15, 12, 6, 3),
};
static const struct speeds inter_sm90[] = {
    SPEEDS(21803, 48, 45, 42, 40, 30, 24, 22, 20, 17.5f, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(21800, 48, 45, 42, 40, 30, 24, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(0, 48, 45, 30, 24, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
};
static const struct speeds intra_sm100[] = {
    SPEEDS(22900, 90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18),
    SPEEDS(22703, 90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18),
    SPEEDS(0, 90, 80, 70, 60, 50, 40, 30, 24, 20, 19),
};
static const struct speeds inter_sm100[] = {
    SPEEDS(23000, 96, 86, 80, 48, 45.1f, 42, 40, 30, 24, 22, 20, 17.5f, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(22900, 96, 80, 48, 45.1f, 42, 40, 30, 24, 22, 20, 17.5f, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(22707, 96, 48, 45.1f, 42, 40, 30, 24, 22, 20, 17.5f, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(22703, 47.9f, 45, 42, 40, 30, 24, 22, 20, 17.5f, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
    SPEEDS(0, 48, 45, 42, 40, 30, 24, 22, 20, 17.5f, 15, 12, 6, 3, 2.4f, 1.2f, 0.24f, 0.12f),
};

static const struct speeds* pick(const struct speeds* list, int version) {
  while (list->since > version) list++;
  return list;
}

const struct speeds* braid_search_speeds(int version, int cc, int inter) {
  if (cc >= 100 && version >= 22500) return pick(inter ? inter_sm100 : intra_sm100, version);
  if (cc >= 90 && version >= 21600) return pick(inter ? inter_sm90 : intra_sm90, version);
  return pick(inter ? inter_default : intra_default, version);
}

/* ---- the search system ---------------------------------------------------------------- */

static ncclResult_t spath_make(struct ssys* s, int a, int b, struct spath* p) {
  const struct braid_topo_path* tp = braid_topo_path(s->sys, a, b);
  int nodes[MAX_HOPS + 1], links[MAX_HOPS + 1], n = 0;
  p->type = tp->type;
  p->bw = tp->bw;
  p->count = 0;
  if (tp->type == BRAID_PATH_DIS || a == b) return ncclSuccess;
  BRAID_CHECK(braid_topo_path_walk(s->sys, a, b, MAX_HOPS + 1, nodes, links, &n));
  p->count = n - 1;
  p->list = calloc((size_t)n, sizeof(*p->list));
  p->rev = calloc((size_t)n, sizeof(*p->rev));
  p->from = calloc((size_t)n, sizeof(*p->from));
  if (p->list == NULL || p->rev == NULL || p->from == NULL) {
    BRAID_WARN("Failed to allocate a search path of %d links", n);
    return ncclSystemError;
  }
  for (int i = 0; i + 1 < n; i++) {
    struct braid_topo_node* u = &s->sys->nodes[nodes[i]];
    struct braid_topo_node* v = &s->sys->nodes[nodes[i + 1]];
    p->list[i] = &u->links[links[i]];
    p->from[i] = nodes[i];
    for (int k = 0; k < v->nlinks; k++)
      if (v->links[k].remote == nodes[i] && v->links[k].kind == p->list[i]->kind) p->rev[i] = &v->links[k];
  }
  return ncclSuccess;
}

static void spaths_free(struct spath* p, int n) {
  for (int i = 0; p != NULL && i < n; i++) {
    free(p[i].list);
    free(p[i].rev);
    free(p[i].from);
  }
  free(p);
}

void braid_search_sys_free(struct ssys* s) {
  spaths_free(s->gg, s->ngpus * s->ngpus);
  spaths_free(s->gn, s->ngpus * s->nnets);
  spaths_free(s->ng, s->nnets * s->ngpus);
  free(s->gpu);
  free(s->rank);
  free(s->used);
  free(s->net);
  free(s->net_index);
  free(s->net_bw);
  free(s->local_gpu);
  free(s->local_net);
}

/* NCCL's ncclTopoSearchInit: the fastest single path and the widest GPU. */
static void search_init(struct ssys* s) {
  s->max_bw = s->total_bw = 0;
  if (!s->inter && s->ngpus == 1) {
    s->max_bw = s->total_bw = BRAID_TOPO_BW_LOC;
    return;
  }
  for (int g = 0; g < s->ngpus; g++) {
    const struct braid_topo_node* n = &s->sys->nodes[s->gpu[g]];
    int to = s->inter ? s->nnets : s->ngpus;
    for (int i = 0; i < to; i++) {
      const struct spath* p = s->inter ? &s->gn[g * s->nnets + i] : &s->gg[g * s->ngpus + i];
      if (p->count > 0 && p->bw > s->max_bw) s->max_bw = p->bw;
    }
    float nvl = 0, pci = 0;
    for (int l = 0; l < n->nlinks; l++) {
      if (n->links[l].kind == BRAID_LINK_NVL) nvl += n->links[l].bw;
      if (n->links[l].kind == BRAID_LINK_PCI || n->links[l].kind == BRAID_LINK_SHM) pci = n->links[l].bw;
    }
    float total = nvl > pci ? nvl : pci;
    if (total > s->total_bw) s->total_bw = total;
  }
}

ncclResult_t braid_search_sys_make(struct braid_topo_system* sys, int inter, int version, struct ssys* s) {
  ncclResult_t res = ncclSuccess;
  memset(s, 0, sizeof(*s));
  s->sys = sys;
  s->inter = inter;
  s->version = version;
  s->nvs = sys->nvs >= 0;
  s->nhosts = sys->nhosts > 0 ? sys->nhosts : 1;
  for (int i = 0; i < sys->nnodes; i++) {
    s->ngpus += sys->nodes[i].kind == BRAID_TOPO_GPU;
    s->nnets += sys->nodes[i].kind == BRAID_TOPO_NIC;
  }
  if (s->ngpus > 256 || s->nnets > 256) {
    BRAID_WARN("Graph search: %d GPUs and %d NICs on one node, more than 256", s->ngpus, s->nnets);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(s->gpu, s->ngpus + 1, res, out);
  BRAID_CALLOC_GOTO(s->rank, s->ngpus + 1, res, out);
  BRAID_CALLOC_GOTO(s->used, s->ngpus + 1, res, out);
  BRAID_CALLOC_GOTO(s->net, s->nnets + 1, res, out);
  BRAID_CALLOC_GOTO(s->net_index, s->nnets + 1, res, out);
  BRAID_CALLOC_GOTO(s->net_bw, s->nnets + 1, res, out);
  BRAID_CALLOC_GOTO(s->local_gpu, s->nnets + 1, res, out);
  for (int i = 0, g = 0, n = 0; i < sys->nnodes; i++) {
    if (sys->nodes[i].kind == BRAID_TOPO_GPU) {
      s->gpu[g] = i;
      s->rank[g++] = sys->nodes[i].rank;
    }
    if (sys->nodes[i].kind == BRAID_TOPO_NIC) {
      s->net[n] = i;
      s->net_bw[n] = (float)sys->nodes[i].speed / 8000.0f;
      for (int k = 0; k < sys->nnics; k++)
        if (sys->nics[k] == i) s->net_index[n] = k;
      n++;
    }
  }
  BRAID_CALLOC_GOTO(s->local_net, (size_t)s->ngpus * BRAID_SEARCH_MAX_CHANNELS + 1, res, out);
  for (int g = 0; g < s->ngpus; g++)
    for (int c = 0; c < BRAID_SEARCH_MAX_CHANNELS; c++) {
      int k = -1, nic = -1;
      for (int i = 0; i < sys->ngpus; i++)
        if (sys->gpus[i] == s->gpu[g]) k = i;
      nic = k < 0 ? -1 : braid_topo_local_nic(sys, k, c);
      s->local_net[g * BRAID_SEARCH_MAX_CHANNELS + c] = -1;
      for (int n = 0; n < s->nnets && nic >= 0; n++)
        if (s->net_index[n] == nic) s->local_net[g * BRAID_SEARCH_MAX_CHANNELS + c] = n;
    }
  for (int n = 0; n < s->nnets; n++) {
    int g = braid_topo_local_gpu(sys, s->net_index[n]);
    s->local_gpu[n] = -1;
    for (int k = 0; k < s->ngpus && g >= 0; k++)
      if (s->gpu[k] == sys->gpus[g]) s->local_gpu[n] = k;
  }
  for (int i = 0; i < sys->nnodes; i++)
    if (sys->nodes[i].kind == BRAID_TOPO_CPU) {
      s->cpu_arch = sys->nodes[i].arch;
      s->cpu_vendor = sys->nodes[i].vendor;
      break;
    }
  BRAID_CALLOC_GOTO(s->gg, (size_t)s->ngpus * s->ngpus + 1, res, out);
  BRAID_CALLOC_GOTO(s->gn, (size_t)s->ngpus * s->nnets + 1, res, out);
  BRAID_CALLOC_GOTO(s->ng, (size_t)s->nnets * s->ngpus + 1, res, out);
  for (int a = 0; a < s->ngpus; a++) {
    for (int b = 0; b < s->ngpus; b++)
      BRAID_CHECK_GOTO(spath_make(s, s->gpu[a], s->gpu[b], &s->gg[a * s->ngpus + b]), res, out);
    for (int n = 0; n < s->nnets; n++) {
      BRAID_CHECK_GOTO(spath_make(s, s->gpu[a], s->net[n], &s->gn[a * s->nnets + n]), res, out);
      BRAID_CHECK_GOTO(spath_make(s, s->net[n], s->gpu[a], &s->ng[n * s->ngpus + a]), res, out);
    }
  }
  search_init(s);
out:
  return res;
}

/* ---- following a path ----------------------------------------------------------------- */

static float sub_round(float a, float b) {
  return roundf((a - b) * 1000) / 1000;
}

/* Reserve bw on the first `max` links of p from `start` (bw < 0 releases); *steps: the links
 * reserved (< max when one lacked bandwidth). NCCL's followPath. */
static void follow(const struct ssys* s, const struct spath* p, int start, int max, float bw, int* steps) {
  float pci_bw = bw;
  const struct braid_topo_node* st = &s->sys->nodes[start];
  for (int i = 0; i < p->count; i++) {
    const struct braid_topo_node* v = &s->sys->nodes[p->list[i]->remote];
    if (v->kind == BRAID_TOPO_CPU && p->type == BRAID_PATH_PHB && st->kind == BRAID_TOPO_GPU &&
        v->arch == BRAID_CPU_ARCH_X86 && v->vendor == BRAID_CPU_VENDOR_INTEL)
      pci_bw = bw * 6 / 5; /* Intel root complexes turn GPU P2P into 64-byte TLPs */
  }
  for (int i = 0; i < max; i++) {
    struct braid_topo_link* l = p->list[i];
    struct braid_topo_link* r = p->rev[i];
    const struct braid_topo_node* v = &s->sys->nodes[l->remote];
    float fw = l->kind == BRAID_LINK_PCI ? pci_bw : bw, rev = 0;
    if (v->kind == BRAID_TOPO_GPU && v->sm < 80 && st->kind != BRAID_TOPO_GPU) rev += fw / 8;
    if (v->kind == BRAID_TOPO_CPU && v->arch == BRAID_CPU_ARCH_POWER && l->kind == BRAID_LINK_NVL) rev += fw;
    if (rev != 0 && r == NULL) rev = 0;
    if (l->bw < fw || (rev != 0 && r->bw < rev)) {
      *steps = i;
      return;
    }
    l->bw = sub_round(l->bw, fw);
    if (rev != 0) r->bw = sub_round(r->bw, rev);
  }
  *steps = max;
}

int braid_search_is_tree(int pattern) {
  return pattern == BRAID_PATTERN_BALANCED_TREE || pattern == BRAID_PATTERN_TREE || pattern == BRAID_PATTERN_SPLIT_TREE;
}

const struct spath* braid_search_path(const struct ssys* s, int t1, int i1, int t2, int i2) {
  if (t1 == T_GPU && t2 == T_GPU) return &s->gg[i1 * s->ngpus + i2];
  if (t1 == T_GPU) return &s->gn[i1 * s->nnets + i2];
  return &s->ng[i1 * s->ngpus + i2];
}

/* NCCL's ncclTopoFollowPath: 1 when t2/i2 is reached (bandwidth reserved with mult 1,
 * released with -1), 0 when the path is too far or too narrow. */
int braid_search_follow(const struct ssys* s, struct braid_search_graph* g, int t1, int i1, int t2, int i2,
                        float mult) {
  if (t1 == T_NONE) return 1;
  const struct spath* p = braid_search_path(s, t1, i1, t2, i2);
  const struct spath* rp = braid_search_path(s, t2, i2, t1, i1);
  int intra = t1 == T_GPU && t2 == T_GPU;
  float bw = intra ? g->bw_intra : g->bw_inter;
  int type = intra ? g->type_intra : g->type_inter;
  if (p->type >= BRAID_PATH_DIS) return 0;
  if (mult == 1 && p->type > type) return 0;
  if (mult == 1 && braid_search_is_tree(g->pattern) && rp->type > type) return 0;
  bw *= mult;
  int start = t1 == T_GPU ? s->gpu[i1] : s->net[i1], step;
  follow(s, p, start, p->count, bw, &step);
  if (step < p->count) {
    follow(s, p, start, step, -bw, &step);
    return 0;
  }
  g->nhops += (int)mult * p->count;
  return 1;
}

/* ---- NIC choice ----------------------------------------------------------------------- */

static void add_unique(int* list, int* n, int v) {
  for (int i = 0; i < *n; i++)
    if (list[i] == v) return;
  list[(*n)++] = v;
}

/* NCCL's ncclTopoSelectNets: the NICs to try, the GPUs' own first. */
int braid_search_select_nets(const struct ssys* s, int type_inter, int gpu, int* nets) {
  int count = 0;
  if (s->nhosts > 1) { /* MNNVL: GPU first, then channel */
    int done[256] = {0}, first[256], left = gpu < 0 ? s->ngpus : 1;
    for (int c = 0; c < BRAID_SEARCH_MAX_CHANNELS && left > 0; c++)
      for (int k = 0; k < (gpu < 0 ? s->ngpus : 1); k++) {
        int g = gpu < 0 ? k : gpu;
        if (done[k]) continue;
        int n = s->local_net[g * BRAID_SEARCH_MAX_CHANNELS + c];
        if (n < 0) continue;
        if (c == 0) first[k] = n;
        if (c > 0 && first[k] == n) {
          done[k] = 1;
          left--;
          continue;
        }
        add_unique(nets, &count, n);
      }
  } else {
    for (int g = 0; g < s->ngpus; g++) {
      int local[BRAID_SEARCH_MAX_CHANNELS], nl = 0;
      if (gpu >= 0 && gpu != g) continue;
      for (int c = 0; c < BRAID_SEARCH_MAX_CHANNELS; c++) {
        int n = s->local_net[g * BRAID_SEARCH_MAX_CHANNELS + c];
        if (n < 0) break;
        if (nl > 0 && n == local[0]) break;
        local[nl++] = n;
      }
      for (int i = 0; i < nl; i++) add_unique(nets, &count, local[i]);
    }
  }
  for (int t = 0; t <= type_inter; t++) /* then every other NIC within reach, closest first */
    for (int g = 0; g < s->ngpus; g++) {
      if (gpu >= 0 && gpu != g) continue;
      for (int n = 0; n < s->nnets && n < BRAID_SEARCH_MAX_CHANNELS; n++)
        if (s->gn[g * s->nnets + n].type == t) add_unique(nets, &count, n);
    }
  return count;
}

int braid_search_check_net(const struct ssys* s, const struct braid_search_graph* g, int start, int n, int step) {
  const struct braid_topo_node *net = &s->sys->nodes[s->net[n]], *st = &s->sys->nodes[s->net[start]];
  if (g->pattern == BRAID_PATTERN_TREE && n != start) return 0; /* trees are symmetric */
  if (g->pattern == BRAID_PATTERN_RING && g->cross_nic == 2) {
    if ((g->nchannels & 1) && n != g->inter[(g->nchannels - 1) * 2]) return 0;
  } else if (g->cross_nic == 0) {
    if (net->guid != st->guid || net->port != st->port) return 0; /* the same rail */
  }
  if (g->pattern == BRAID_PATTERN_BALANCED_TREE && step != 0 && n != g->inter[g->nchannels * 2 + 1]) return 0;
  return 1;
}
