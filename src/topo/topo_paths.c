/*
 * topo_paths.c - paths between every pair of nodes of a system graph, and the decisions
 * taken from them: P2P (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE), GPUDirect RDMA
 * (NCCL_NET_GDR_LEVEL), PXN alternatives for GPU->NIC paths.
 *
 * A path is found breadth-first from each node: the fewest links, and among those the widest
 * (bandwidth = narrowest link). Its type is the worst hop: NVLink hops are NVL (NVB when
 * they pass through a GPU, which only NVLink-to-NVLink traffic may do, once), a PCIe hop
 * between two switches PXB, one touching a CPU PHB (P2C right after a GPU's C2C link), a
 * CPU-to-CPU hop SYS, a PCIe hop below one switch PIX. NICs and pseudo-GPUs relay nothing.
 * GPU pairs that may not use P2P are re-routed through the first GPU's CPU (host memory), as
 * NCCL does, so the channel search sees the path their data will really take.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/check.h"
#include "base/param.h"
#include "topo/topo.h"

static const char* const path_names[BRAID_NUM_PATH_TYPES] = {
#define BRAID_X(id, name, doc) [BRAID_PATH_##id] = name,
    BRAID_PATH_TYPES(BRAID_X)
#undef BRAID_X
};

const char* braid_topo_path_name(int type) {
  if (type < 0 || type >= BRAID_NUM_PATH_TYPES) return "???";
  return path_names[type];
}

ncclResult_t braid_topo_path_parse(const char* s, int* type_p) {
  if (s == NULL) return ncclInvalidArgument;
  for (int t = 0; t < BRAID_NUM_PATH_TYPES; t++) {
    if (strcasecmp(s, path_names[t]) == 0) {
      *type_p = t;
      return ncclSuccess;
    }
  }
  return ncclInvalidArgument;
}

const struct braid_topo_path* braid_topo_path(const struct braid_topo_system* sys, int a, int b) {
  return &sys->paths[(size_t)a * sys->nnodes + b];
}

static struct braid_topo_path* path_at(struct braid_topo_system* sys, int a, int b) {
  return &sys->paths[(size_t)a * sys->nnodes + b];
}

int braid_topo_node_cpu(const struct braid_topo_system* sys, int node) {
  int best = -1, hops = 1 << 30;
  for (int i = 0; i < sys->ncpus; i++) {
    const struct braid_topo_path* p = braid_topo_path(sys, node, sys->cpus[i]);
    if (p->type != BRAID_PATH_DIS && p->hops < hops) {
      hops = p->hops;
      best = sys->cpus[i];
    }
  }
  return best;
}

/* ---- breadth-first search ------------------------------------------------------------- */

/* The type of the hop u -> v over link l, for a path whose type so far is `sofar`; -1 when
 * the path may not continue that way. */
static int hop_type(const struct braid_topo_system* sys, int src, int u, const struct braid_topo_link* l,
                    const struct braid_topo_path* pu) {
  const struct braid_topo_node* nu = &sys->nodes[u];
  const struct braid_topo_node* nv = &sys->nodes[l->remote];
  if (u != src) {
    if (nu->kind == BRAID_TOPO_NIC) return -1;
    if (nu->kind == BRAID_TOPO_GPU) { /* NVLink in, NVLink out, a single GPU relay */
      const struct braid_topo_link* in = &sys->nodes[pu->prev].links[pu->plink];
      if (nu->pseudo >= 0 || in->kind != BRAID_LINK_NVL || l->kind != BRAID_LINK_NVL) return -1;
      if (pu->type >= BRAID_PATH_NVB) return -1;
      return BRAID_PATH_NVB;
    }
  }
  switch (l->kind) {
    case BRAID_LINK_NVL:
      return BRAID_PATH_NVL;
    case BRAID_LINK_C2C:
      return BRAID_PATH_C2C;
    case BRAID_LINK_SYS:
      return BRAID_PATH_SYS;
    case BRAID_LINK_SHM:
      return BRAID_PATH_PHB;
    case BRAID_LINK_PCI:
      if (nu->kind == BRAID_TOPO_CPU || nv->kind == BRAID_TOPO_CPU)
        return (u != src && pu->type == BRAID_PATH_C2C && pu->hops == 1) ? BRAID_PATH_P2C : BRAID_PATH_PHB;
      if (nu->kind == BRAID_TOPO_PCI && nv->kind == BRAID_TOPO_PCI) return BRAID_PATH_PXB;
      return BRAID_PATH_PIX;
    default:
      return -1;
  }
}

static ncclResult_t bfs_from(struct braid_topo_system* sys, int src, int* frontier, int* next) {
  int nf = 1;
  frontier[0] = src;
  struct braid_topo_path* ps = path_at(sys, src, src);
  ps->type = ps->direct = BRAID_PATH_LOC;
  ps->bw = BRAID_TOPO_BW_LOC;
  while (nf > 0) {
    int nn = 0;
    for (int f = 0; f < nf; f++) {
      int u = frontier[f];
      const struct braid_topo_path* pu = path_at(sys, src, u);
      for (int li = 0; li < sys->nodes[u].nlinks; li++) {
        const struct braid_topo_link* l = &sys->nodes[u].links[li];
        int v = l->remote;
        if (v == src) continue;
        int t = hop_type(sys, src, u, l, pu);
        if (t < 0) continue;
        int type = u == src ? t : (t > pu->type ? t : pu->type);
        float bw = u == src ? l->bw : (l->bw < pu->bw ? l->bw : pu->bw);
        struct braid_topo_path* pv = path_at(sys, src, v);
        int fresh = pv->type == BRAID_PATH_DIS;
        if (fresh || (pv->hops == pu->hops + 1 && (bw > pv->bw || (bw == pv->bw && type < pv->type)))) {
          pv->type = pv->direct = (uint8_t)type;
          pv->bw = bw;
          pv->hops = (uint8_t)(pu->hops + 1);
          pv->prev = (int16_t)u;
          pv->plink = (int16_t)li;
          if (fresh) next[nn++] = v;
        }
      }
    }
    memcpy(frontier, next, (size_t)nn * sizeof(int));
    nf = nn;
  }
  return ncclSuccess;
}

/* ---- P2P and GDR levels --------------------------------------------------------------- */

static ncclResult_t level_param(enum braid_param id, int def, int* level_p) {
  /* NCCL's legacy numeric levels 0..5 */
  static const int legacy[] = {BRAID_PATH_LOC, BRAID_PATH_PIX, BRAID_PATH_PXB,
                               BRAID_PATH_PHB, BRAID_PATH_SYS, BRAID_PATH_SYS};
  const char* s = braid_param_str(id);
  if (s == NULL || s[0] == '\0') {
    *level_p = def;
    return ncclSuccess;
  }
  if (isdigit((unsigned char)s[0]) && s[1] == '\0' && s[0] - '0' <= 5) {
    *level_p = legacy[s[0] - '0'];
    return ncclSuccess;
  }
  if (braid_topo_path_parse(s, level_p) == ncclSuccess && *level_p <= BRAID_PATH_SYS) return ncclSuccess;
  BRAID_WARN("%s=%s is not a path level (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS, or 0-5)", braid_param_name(id), s);
  return ncclInvalidUsage;
}

ncclResult_t braid_topo_p2p_level(const struct braid_topo_system* sys, int* level_p) {
  int def = BRAID_PATH_PXB, amd = 0;
  if (braid_param_int(BRAID_PARAM_P2P_DISABLE) == 1) {
    *level_p = BRAID_PATH_LOC;
    return ncclSuccess;
  }
  for (int i = 0; sys != NULL && i < sys->ncpus; i++)
    amd |=
        sys->nodes[sys->cpus[i]].vendor == BRAID_CPU_VENDOR_AMD && sys->nodes[sys->cpus[i]].arch == BRAID_CPU_ARCH_X86;
  if (amd && sys->ngpus <= 2) def = BRAID_PATH_SYS;
  return level_param(BRAID_PARAM_P2P_LEVEL, def, level_p);
}

ncclResult_t braid_topo_gdr_level(int* level_p) {
  return level_param(BRAID_PARAM_NET_GDR_LEVEL, BRAID_PATH_PXB, level_p);
}

ncclResult_t braid_topo_p2p_allowed(const struct braid_topo_system* sys, int64_t bus_a, int64_t bus_b, int* allowed_p) {
  int level, a, b;
  if (sys == NULL || allowed_p == NULL) {
    BRAID_WARN("braid_topo_p2p_allowed: %s is NULL", sys == NULL ? "sys" : "allowed_p");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_p2p_level(sys, &level));
  a = braid_topo_gpu_find(sys, bus_a);
  b = braid_topo_gpu_find(sys, bus_b);
  if (a < 0 || b < 0) {
    *allowed_p = 0;
    return ncclSuccess;
  }
  /* the breadth-first path, not the host-memory re-route taken when P2P is not allowed */
  *allowed_p = braid_topo_path(sys, sys->gpus[a], sys->gpus[b])->direct <= level;
  return ncclSuccess;
}

ncclResult_t braid_topo_gdr_allowed(const struct braid_topo_system* sys, int64_t gpu_bus, int nic, int* allowed_p) {
  int level, g;
  if (sys == NULL || allowed_p == NULL || nic < 0 || nic >= (sys ? sys->nnics : 0)) {
    BRAID_WARN("braid_topo_gdr_allowed: bad argument (sys %p, nic %d)", (const void*)sys, nic);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_gdr_level(&level));
  g = braid_topo_gpu_find(sys, gpu_bus);
  *allowed_p = 0;
  if (g < 0) return ncclSuccess;
  const struct braid_topo_node* gn = &sys->nodes[sys->gpus[g]];
  const struct braid_topo_node* nn = &sys->nodes[sys->nics[nic]];
  if (!gn->gdr || !nn->gdr) return ncclSuccess;
  int type = braid_topo_path(sys, sys->gpus[g], sys->nics[nic])->type;
  const struct braid_topo_pxn* x = &sys->pxn[(size_t)g * sys->nnics + nic];
  if (x->relay >= 0 && braid_param_int(BRAID_PARAM_PXN_DISABLE) != 1) /* the relay GPU's distance */
    type = braid_topo_path(sys, x->relay, sys->nics[nic])->type;
  *allowed_p = type <= level || type == BRAID_PATH_P2C;
  return ncclSuccess;
}

/* ---- all paths ------------------------------------------------------------------------ */

ncclResult_t braid_topo_compute_paths(struct braid_topo_system* sys) {
  ncclResult_t res = ncclSuccess;
  size_t n = (size_t)sys->nnodes;
  int *frontier = NULL, *next = NULL, level;
  free(sys->paths);
  free(sys->pxn);
  sys->pxn = NULL;
  sys->paths = malloc((n ? n * n : 1) * sizeof(*sys->paths));
  BRAID_CALLOC_GOTO(frontier, n, res, err);
  BRAID_CALLOC_GOTO(next, n, res, err);
  if (sys->paths == NULL) {
    BRAID_WARN("Failed to allocate %zu topology paths", n * n);
    res = ncclSystemError;
    goto err;
  }
  for (size_t i = 0; i < n * n; i++) {
    struct braid_topo_path* p = &sys->paths[i];
    p->type = p->direct = BRAID_PATH_DIS;
    p->hops = 0;
    p->prev = p->plink = p->relay = -1;
    p->bw = 0;
  }
  for (int s = 0; s < sys->nnodes; s++) BRAID_CHECK_GOTO(bfs_from(sys, s, frontier, next), res, err);

  /* P2C is named from the GPU's side; the way back (NIC -PCIe- CPU -C2C- GPU) is the same */
  for (int a = 0; a < sys->nnodes; a++)
    for (int b = 0; b < sys->nnodes; b++) {
      struct braid_topo_path *ab = path_at(sys, a, b), *ba = path_at(sys, b, a);
      if (ab->direct == BRAID_PATH_P2C && ba->direct == BRAID_PATH_PHB) ba->type = ba->direct = BRAID_PATH_P2C;
    }

  /* PXN: a NIC reached better through an NVLink peer that sits next to it */
  BRAID_CALLOC_GOTO(sys->pxn, (size_t)sys->ngpus * sys->nnics, res, err);
  for (int g = 0; g < sys->ngpus; g++) {
    for (int k = 0; k < sys->nnics; k++) {
      struct braid_topo_pxn* x = &sys->pxn[(size_t)g * sys->nnics + k];
      const struct braid_topo_path* direct = braid_topo_path(sys, sys->gpus[g], sys->nics[k]);
      x->relay = -1;
      if (direct->type <= BRAID_PATH_PXB) continue;
      for (int h = 0; h < sys->ngpus; h++) {
        const struct braid_topo_path* gh = braid_topo_path(sys, sys->gpus[g], sys->gpus[h]);
        const struct braid_topo_path* hn = braid_topo_path(sys, sys->gpus[h], sys->nics[k]);
        if (h == g || gh->type != BRAID_PATH_NVL || hn->type > BRAID_PATH_P2C) continue;
        float bw = gh->bw < hn->bw ? gh->bw : hn->bw;
        if (bw > x->bw) {
          x->relay = sys->gpus[h];
          x->bw = bw;
        }
      }
    }
  }

  /* GPU pairs beyond the P2P level go through host memory (the first GPU's CPU) */
  BRAID_CHECK_GOTO(braid_topo_p2p_level(sys, &level), res, err);
  for (int a = 0; a < sys->ngpus; a++) {
    int cpu = braid_topo_node_cpu(sys, sys->gpus[a]);
    if (cpu < 0 || sys->nodes[sys->gpus[a]].pseudo >= 0) continue;
    for (int b = 0; b < sys->ngpus; b++) {
      struct braid_topo_path* p = path_at(sys, sys->gpus[a], sys->gpus[b]);
      if (a == b || p->type <= level || p->type == BRAID_PATH_DIS) continue;
      const struct braid_topo_path* up = braid_topo_path(sys, sys->gpus[a], cpu);
      const struct braid_topo_path* down = braid_topo_path(sys, cpu, sys->gpus[b]);
      int t = up->type > down->type ? up->type : down->type;
      p->type = (uint8_t)(t > BRAID_PATH_PHB ? t : BRAID_PATH_PHB);
      p->bw = up->bw < down->bw ? up->bw : down->bw;
      p->hops = (uint8_t)(up->hops + down->hops);
      p->relay = (int16_t)cpu;
    }
  }
err:
  free(frontier);
  free(next);
  return res;
}

/* The nodes of the breadth-first tree path a -> b (ignoring re-routes), appended. */
static ncclResult_t walk_tree(const struct braid_topo_system* sys, int a, int b, int max, int* nodes, int* links,
                              int* n_p) {
  int rev[256], rlink[256], k = 0, v = b;
  while (v != a) {
    const struct braid_topo_path* p = braid_topo_path(sys, a, v);
    if (p->prev < 0 || k >= 255) {
      BRAID_WARN("Topology: no path from node %d to node %d", a, b);
      return ncclInternalError;
    }
    rev[k] = p->prev;
    rlink[k] = p->plink;
    k++;
    v = p->prev;
  }
  if (*n_p == 0) { /* first segment: the start node itself */
    if (max < 1) return ncclInternalError;
    nodes[(*n_p)++] = a;
  }
  for (int i = k - 1; i >= 0; i--) {
    if (*n_p >= max) return ncclInternalError;
    links[*n_p - 1] = rlink[i];
    nodes[*n_p] = i == 0 ? b : rev[i - 1];
    (*n_p)++;
  }
  return ncclSuccess;
}

ncclResult_t braid_topo_path_walk(const struct braid_topo_system* sys, int a, int b, int max, int* nodes, int* links,
                                  int* n_p) {
  const struct braid_topo_path* p = braid_topo_path(sys, a, b);
  *n_p = 0;
  if (p->type == BRAID_PATH_DIS) {
    BRAID_WARN("Topology: nodes %d and %d are not connected", a, b);
    return ncclInternalError;
  }
  if (p->relay >= 0) {
    BRAID_CHECK(walk_tree(sys, a, p->relay, max, nodes, links, n_p));
    return walk_tree(sys, p->relay, b, max, nodes, links, n_p);
  }
  return walk_tree(sys, a, b, max, nodes, links, n_p);
}
