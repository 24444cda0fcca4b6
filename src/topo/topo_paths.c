/*
 * topo_paths.c - paths between the nodes of a system graph and their re-routes, by NCCL's
 * rules (src/graph/paths.cc), and the decisions taken from them: P2P (NCCL_P2P_LEVEL,
 * NCCL_P2P_DISABLE), GPUDirect RDMA (NCCL_NET_GDR_LEVEL, gdr="0"), PXN (NCCL_PXN_DISABLE).
 *
 * Paths lead to every GPU, CPU, NIC port and NVSwitch, found breadth-first from that node:
 * the fewest links, and among those the widest (the first found on a tie, links in NCCL's
 * order). The type is the worst hop: NVLink NVL (NVB through one GPU, the only relay a GPU
 * may be and only between NVLinks, one hop from the destination), C2C, a PCIe hop between two
 * switches PXB, one touching a CPU PHB, other PCIe hops PIX, CPU-to-CPU SYS, a NIC's port
 * LOC. Then, in NCCL's order:
 *   1. GPU pairs beyond the P2P level go through the destination GPU's CPU;
 *   2. GPU <-> NIC through the GPU's C2C link and the CPU's PCIe is P2C;
 *   3. per NIC and GPU: PXN, the GPU -> NIC path through the NIC's own GPU when that GPU is
 *      an NVLink peer on the same machine with a P2C-or-better path and a wider one (or the
 *      direct path is worse than PXN); then, for paths better than PHB, GPUDirect RDMA: when
 *      not allowed (either side gdr="0", or beyond NCCL_NET_GDR_LEVEL) both directions go
 *      through the GPU's CPU.
 * A re-routed path is the path to its relay (a CPU, or the PXN GPU) and the relay's path.
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
  int best = -1, hops = 0;
  for (int i = 0; i < sys->nnodes; i++) { /* NCCL: the first CPU with the fewest hops */
    if (sys->nodes[i].kind != BRAID_TOPO_CPU) continue;
    const struct braid_topo_path* p = braid_topo_path(sys, node, i);
    if (i == node) return i;
    if (p->hops > 0 && (hops == 0 || p->hops < hops)) {
      hops = p->hops;
      best = i;
    }
  }
  return best;
}

/* ---- breadth-first search ------------------------------------------------------------- */

static int is_base(int kind) {
  return kind == BRAID_TOPO_GPU || kind == BRAID_TOPO_CPU || kind == BRAID_TOPO_NIC || kind == BRAID_TOPO_NVS;
}

/* The type of one hop over link l from node u to node v (NCCL's link type, refined). */
static int hop_type(const struct braid_topo_system* sys, int u, const struct braid_topo_link* l) {
  int ku = sys->nodes[u].kind, kv = sys->nodes[l->remote].kind;
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
      if (ku == BRAID_TOPO_CPU || kv == BRAID_TOPO_CPU) return BRAID_PATH_PHB;
      if (ku == BRAID_TOPO_PCI && kv == BRAID_TOPO_PCI) return BRAID_PATH_PXB;
      return BRAID_PATH_PIX;
    default: /* NET, LOC */
      return BRAID_PATH_LOC;
  }
}

/* The link of node v that leads back to u with this kind, -1 if none. */
static int reverse_link(const struct braid_topo_system* sys, int v, int u, int kind) {
  for (int i = 0; i < sys->nodes[v].nlinks; i++)
    if (sys->nodes[v].links[i].remote == u && sys->nodes[v].links[i].kind == kind) return i;
  return -1;
}

/* Paths from every node to `base`. */
static void bfs_to(struct braid_topo_system* sys, int base, int* list, int* next, int nvb_disable) {
  int nl = 1;
  list[0] = base;
  struct braid_topo_path* pb = path_at(sys, base, base);
  pb->type = pb->direct = BRAID_PATH_LOC;
  pb->bw = BRAID_TOPO_BW_LOC;
  pb->hops = 0;
  while (nl > 0) {
    int nn = 0;
    for (int f = 0; f < nl; f++) {
      int u = list[f];
      const struct braid_topo_path* pu = path_at(sys, u, base);
      const struct braid_topo_node* nu = &sys->nodes[u];
      for (int li = 0; li < nu->nlinks; li++) {
        const struct braid_topo_link* l = &nu->links[li];
        int v = l->remote;
        struct braid_topo_path* pv = path_at(sys, v, base);
        float bw = l->bw < pu->bw ? l->bw : pu->bw;
        if (u != base && nu->kind == BRAID_TOPO_GPU &&
            (nvb_disable || nu->pseudo >= 0 || l->kind != BRAID_LINK_NVL || sys->nodes[v].kind != BRAID_TOPO_GPU ||
             pu->hops > 1))
          continue; /* a GPU relays only NVLink to NVLink, next to the destination */
        if (!((pv->bw == 0 || pv->hops > pu->hops) && pv->bw < bw)) continue;
        int rev = reverse_link(sys, v, u, l->kind);
        if (rev < 0) continue; /* a one-way link (NCCL refuses the file): not a path */
        int t = hop_type(sys, u, l);
        if (nu->kind == BRAID_TOPO_GPU && pu->type == BRAID_PATH_NVL && t == BRAID_PATH_NVL && pu->hops + 1 > 1)
          t = BRAID_PATH_NVB;
        pv->next = (int16_t)rev;
        pv->hops = (uint16_t)(pu->hops + 1);
        pv->bw = bw;
        pv->type = pv->direct = (uint8_t)(t > pu->type ? t : pu->type);
        pv->relay = -1;
        int seen = 0;
        for (int i = 0; i < nn && !seen; i++) seen = next[i] == v;
        if (!seen) next[nn++] = v;
      }
    }
    memcpy(list, next, (size_t)nn * sizeof(int));
    nl = nn;
  }
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
  int def = BRAID_PATH_PXB;
  if (braid_param_int(BRAID_PARAM_P2P_DISABLE) == 1) {
    *level_p = BRAID_PATH_LOC;
    return ncclSuccess;
  }
  /* NCCL: the first CPU decides; AMD x86 allows P2P between at most two GPUs across SYS */
  if (sys != NULL && sys->ncpus > 0) {
    const struct braid_topo_node* c = NULL;
    for (int i = 0; i < sys->nnodes && c == NULL; i++)
      if (sys->nodes[i].kind == BRAID_TOPO_CPU) c = &sys->nodes[i];
    if (c && c->vendor == BRAID_CPU_VENDOR_AMD && c->arch == BRAID_CPU_ARCH_X86 && sys->ngpus <= 2)
      def = BRAID_PATH_SYS;
  }
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

/* GDR between GPU node g and NIC node n with the current paths (NCCL's ncclTopoCheckGdr,
 * receive side). */
static ncclResult_t gdr_check(const struct braid_topo_system* sys, int g, int n, int level, int* ok_p) {
  *ok_p = 0;
  if (!sys->nodes[g].gdr || !sys->nodes[n].gdr) return ncclSuccess;
  const struct braid_topo_path* p = braid_topo_path(sys, g, n);
  int distance = p->type;
  if (distance == BRAID_PATH_PXN && p->relay >= 0) distance = braid_topo_path(sys, p->relay, n)->type;
  if (distance == BRAID_PATH_P2C) distance = BRAID_PATH_C2C; /* NCCL_NET_GDR_C2C: NICs on a C2C CPU */
  *ok_p = distance <= level;
  return ncclSuccess;
}

int braid_topo_gdr_distance(const struct braid_topo_system* sys, int64_t gpu_bus, int nic) {
  if (sys == NULL || nic < 0 || nic >= sys->nnics) return -1;
  int g = braid_topo_gpu_find(sys, gpu_bus);
  if (g < 0) return -1;
  /* the breadth-first distance (the relay GPU's for PXN unless NCCL_PXN_DISABLE=1 now), so
   * that levels set after the paths were computed count */
  int gn = sys->gpus[g], nn = sys->nics[nic];
  const struct braid_topo_path* p = braid_topo_path(sys, gn, nn);
  int distance = p->direct;
  if (p->type == BRAID_PATH_PXN && p->relay >= 0 && braid_param_int(BRAID_PARAM_PXN_DISABLE) != 1)
    distance = braid_topo_path(sys, p->relay, nn)->direct;
  if (distance == BRAID_PATH_P2C || (distance == BRAID_PATH_PHB && p->type == BRAID_PATH_P2C))
    distance = BRAID_PATH_C2C;
  return distance;
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
  if (!sys->nodes[sys->gpus[g]].gdr || !sys->nodes[sys->nics[nic]].gdr) return ncclSuccess;
  *allowed_p = braid_topo_gdr_distance(sys, gpu_bus, nic) <= level;
  return ncclSuccess;
}

/* ---- re-routes ------------------------------------------------------------------------ */

/* NCCL's mergePathType: PHB after (or before) C2C is P2C. */
static int merge_type(int a, int b) {
  int hi = a > b ? a : b, lo = a < b ? a : b;
  return hi == BRAID_PATH_PHB && lo == BRAID_PATH_C2C ? BRAID_PATH_P2C : hi;
}

/* path(a -> b) := path(a -> r) + path(r -> b). */
static void reroute(struct braid_topo_system* sys, int a, int r, int b, int force_type) {
  struct braid_topo_path* p = path_at(sys, a, b);
  const struct braid_topo_path *x = braid_topo_path(sys, a, r), *y = braid_topo_path(sys, r, b);
  p->type = (uint8_t)(force_type >= 0 ? force_type : merge_type(x->type, y->type));
  p->bw = x->bw < y->bw ? x->bw : y->bw;
  p->hops = (uint16_t)(x->hops + y->hops);
  p->relay = (int16_t)r;
}

static ncclResult_t reroute_p2p(struct braid_topo_system* sys) {
  int level;
  BRAID_CHECK(braid_topo_p2p_level(sys, &level));
  for (int g = 0; g < sys->nnodes; g++) {
    if (sys->nodes[g].kind != BRAID_TOPO_GPU || sys->nodes[g].pseudo >= 0) continue;
    int cpu = braid_topo_node_cpu(sys, g);
    for (int p = 0; p < sys->nnodes && cpu >= 0; p++) {
      if (sys->nodes[p].kind != BRAID_TOPO_GPU || p == g) continue;
      const struct braid_topo_path* pp = braid_topo_path(sys, p, g);
      if (pp->type <= level || pp->type == BRAID_PATH_DIS) continue;
      reroute(sys, p, cpu, g, -1); /* divert through the destination's CPU */
    }
  }
  return ncclSuccess;
}

static void p2c_fix(struct braid_topo_system* sys) {
  for (int n = 0; n < sys->nnodes; n++) {
    if (sys->nodes[n].kind != BRAID_TOPO_NIC) continue;
    for (int g = 0; g < sys->nnodes; g++) {
      if (sys->nodes[g].kind != BRAID_TOPO_GPU) continue;
      int c = braid_topo_node_cpu(sys, g);
      if (c < 0) continue;
      if (merge_type(braid_topo_path(sys, g, c)->type, braid_topo_path(sys, n, c)->type) != BRAID_PATH_P2C) continue;
      struct braid_topo_path *gn = path_at(sys, g, n), *ng = path_at(sys, n, g);
      if (gn->type > BRAID_PATH_P2C) gn->type = BRAID_PATH_P2C;
      if (ng->type > BRAID_PATH_P2C) ng->type = BRAID_PATH_P2C;
    }
  }
}

static ncclResult_t reroute_nets(struct braid_topo_system* sys) {
  int gdr_level, pxn = braid_param_int(BRAID_PARAM_PXN_DISABLE) != 1;
  BRAID_CHECK(braid_topo_gdr_level(&gdr_level));
  for (int k = 0; k < sys->nnics; k++) {
    int n = -1, seen = 0; /* NICs in node order, as NCCL's nodes[NET] */
    for (int i = 0; i < sys->nnodes && n < 0; i++)
      if (sys->nodes[i].kind == BRAID_TOPO_NIC && seen++ == k) n = i;
    int nic = -1;
    for (int i = 0; i < sys->nnics; i++)
      if (sys->nics[i] == n) nic = i;
    for (int g = 0; g < sys->nnodes; g++) {
      if (sys->nodes[g].kind != BRAID_TOPO_GPU || sys->nodes[g].pseudo >= 0) continue;
      if (pxn) {
        int lg = braid_topo_local_gpu(sys, nic), peer = lg < 0 ? -1 : sys->gpus[lg];
        if (peer >= 0 && peer != g) {
          const struct braid_topo_path *pn = braid_topo_path(sys, peer, n), *gn = braid_topo_path(sys, g, n);
          if (pn->type <= BRAID_PATH_P2C && braid_topo_path(sys, peer, g)->type <= BRAID_PATH_NVL &&
              sys->nodes[peer].host == sys->nodes[g].host && (pn->bw > gn->bw || gn->type > BRAID_PATH_PXN))
            reroute(sys, g, peer, n, BRAID_PATH_PXN);
        }
      }
      if (braid_topo_path(sys, g, n)->type < BRAID_PATH_PHB) {
        int ok, cpu = braid_topo_node_cpu(sys, g);
        BRAID_CHECK(gdr_check(sys, g, n, gdr_level, &ok));
        if (!ok && cpu >= 0) { /* no GPUDirect RDMA: the data goes through host memory */
          reroute(sys, n, cpu, g, -1);
          reroute(sys, g, cpu, n, -1);
        }
      }
    }
  }
  return ncclSuccess;
}

/* ---- all paths ------------------------------------------------------------------------ */

ncclResult_t braid_topo_compute_paths(struct braid_topo_system* sys) {
  ncclResult_t res = ncclSuccess;
  size_t n = (size_t)sys->nnodes;
  int *list = NULL, *next = NULL;
  int nvb_disable = braid_param_int(BRAID_PARAM_NVB_DISABLE) == 1;
  free(sys->paths);
  free(sys->pxn);
  sys->pxn = NULL;
  sys->paths = malloc((n ? n * n : 1) * sizeof(*sys->paths));
  BRAID_CALLOC_GOTO(list, n + 1, res, err);
  BRAID_CALLOC_GOTO(next, n + 1, res, err);
  if (sys->paths == NULL) {
    BRAID_WARN("Failed to allocate %zu topology paths", n * n);
    res = ncclSystemError;
    goto err;
  }
  for (size_t i = 0; i < n * n; i++) {
    struct braid_topo_path* p = &sys->paths[i];
    p->type = p->direct = BRAID_PATH_DIS;
    p->hops = 0;
    p->next = p->relay = -1;
    p->bw = 0;
  }
  for (int s = 0; s < sys->nnodes; s++) /* NCCL's order: CPUs, GPUs, NICs, NVSwitch */
    if (sys->nodes[s].kind == BRAID_TOPO_CPU) bfs_to(sys, s, list, next, nvb_disable);
  for (int k = 0; k < BRAID_TOPO_NUM_KINDS; k++)
    for (int s = 0; s < sys->nnodes; s++)
      if (sys->nodes[s].kind == k && k != BRAID_TOPO_CPU && is_base(k)) bfs_to(sys, s, list, next, nvb_disable);
  BRAID_CHECK_GOTO(reroute_p2p(sys), res, err);
  p2c_fix(sys);
  BRAID_CHECK_GOTO(reroute_nets(sys), res, err);
  /* the PXN relays, for tools and tests */
  BRAID_CALLOC_GOTO(sys->pxn, (size_t)(sys->ngpus ? sys->ngpus : 1) * (sys->nnics ? sys->nnics : 1), res, err);
  for (int g = 0; g < sys->ngpus; g++)
    for (int k = 0; k < sys->nnics; k++) {
      const struct braid_topo_path* p = braid_topo_path(sys, sys->gpus[g], sys->nics[k]);
      struct braid_topo_pxn* x = &sys->pxn[(size_t)g * sys->nnics + k];
      x->relay = p->type == BRAID_PATH_PXN ? p->relay : -1;
      x->bw = x->relay >= 0 ? p->bw : 0;
    }
err:
  free(list);
  free(next);
  return res;
}

/* The nodes of the breadth-first path a -> b, appended after what *n_p holds. */
static ncclResult_t walk_bfs(const struct braid_topo_system* sys, int a, int b, int max, int* nodes, int* links,
                             int* n_p) {
  if (*n_p == 0) {
    if (max < 1) return ncclInternalError;
    nodes[(*n_p)++] = a;
  }
  for (int v = a, steps = 0; v != b; steps++) {
    const struct braid_topo_path* p = braid_topo_path(sys, v, b);
    if (p->next < 0 || *n_p >= max || steps > sys->nnodes) {
      BRAID_WARN("Topology: no path from node %d to node %d", a, b);
      return ncclInternalError;
    }
    links[*n_p - 1] = p->next;
    v = sys->nodes[v].links[p->next].remote;
    nodes[(*n_p)++] = v;
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
    BRAID_CHECK(walk_bfs(sys, a, p->relay, max, nodes, links, n_p));
    return walk_bfs(sys, p->relay, b, max, nodes, links, n_p);
  }
  return walk_bfs(sys, a, b, max, nodes, links, n_p);
}
