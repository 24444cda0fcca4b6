/*
 * graph.c - the ring search inside one node (graph.h).
 *
 * A channel is a Hamiltonian cycle through the node's devices (single node), or a path that
 * enters from a NIC, visits every device and leaves through a NIC (several nodes). Each
 * channel reserves a speed s (GB/s) on every link its hops use, so later channels only find
 * what bandwidth is left. For every combination of
 *   cross-NIC (no, then yes when NCCL_CROSS_NIC allows it),
 *   worst intra-node hop type, worst GPU<->NIC type (best first),
 *   speed s from a ladder (fastest first),
 * the search packs as many channels as fit (at most BRAID_GRAPH_MAX_RINGS) and keeps the
 * combination with the most aggregate bandwidth (channels x s); ties keep the earlier one, so
 * closer paths and fewer, faster channels win. Rings change NICs (enter through one, leave
 * through another: traffic between rails) only when NCCL_CROSS_NIC is 1, or when it is 2
 * and no ring keeps its NIC. Hops prefer the closest path,
 * then the next device in index order, so an NVSwitch node yields 0 1 2 ... rotated per
 * channel. A step budget bounds each channel's backtracking.
 */
#include "topo/graph.h"

#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"

/* Per-channel speeds tried (GB/s), NCCL's ladders. */
static const float intra_speeds[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4f, 1.2f, 0.24f, 0.12f};
static const float inter_speeds[] = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4f, 1.2f, 0.24f, 0.12f};
#define SEARCH_BUDGET 20000 /* DFS steps per channel */
#define MAX_HOP_LINKS 64

/* A hop's links (flat indices into the remaining-bandwidth array), type and bandwidth. */
struct hop {
  int type;
  float bw;
  int nlinks;
  int links[MAX_HOP_LINKS];
  int relay; /* PXN relay (local device index), -1 */
};

struct search {
  const struct braid_topo_system* sys;
  int ndev, nnics, multi;
  const int* dev;          /* sys node of each device */
  int* link_off;           /* first flat index of each sys node's links */
  float* cap;              /* link bandwidths, flat */
  float* rem;              /* remaining, flat */
  float *net_in, *net_out; /* NIC network side remaining (GB/s) */
  struct hop* dd;          /* ndev x ndev */
  struct hop* dn;          /* device -> NIC, ndev x nnics */
  struct hop* nd;          /* NIC -> device, nnics x ndev */
  /* current attempt */
  float speed;
  int tmax_intra, tmax_inter, cross;
  int budget;
  int* visited;
  int order[BRAID_GRAPH_MAX_LOCAL];
  int nic_in, nic_out, relay_in, relay_out;
};

static ncclResult_t hop_fill(struct search* s, int a, int b, struct hop* h) {
  int nodes[MAX_HOP_LINKS + 1], links[MAX_HOP_LINKS + 1], n;
  const struct braid_topo_path* p = braid_topo_path(s->sys, a, b);
  h->type = p->type;
  h->bw = p->bw;
  h->relay = -1;
  h->nlinks = 0;
  if (p->type == BRAID_PATH_DIS) return ncclSuccess;
  BRAID_CHECK(braid_topo_path_walk(s->sys, a, b, MAX_HOP_LINKS + 1, nodes, links, &n));
  for (int i = 0; i + 1 < n; i++) h->links[h->nlinks++] = s->link_off[nodes[i]] + links[i];
  return ncclSuccess;
}

/* The device<->NIC hop, through an NVLink peer of the node (PXN) when that is better. */
static ncclResult_t net_hop(struct search* s, int d, int k, int to_nic, struct hop* h) {
  const struct braid_topo_system* sys = s->sys;
  int g = s->dev[d], nic = sys->nics[k];
  BRAID_CHECK(to_nic ? hop_fill(s, g, nic, h) : hop_fill(s, nic, g, h));
  if (braid_param_int(BRAID_PARAM_PXN_DISABLE) == 1 || sys->nodes[g].pseudo >= 0) return ncclSuccess;
  int gi = -1;
  for (int i = 0; i < sys->ngpus; i++)
    if (sys->gpus[i] == g) gi = i;
  const struct braid_topo_pxn* x = &sys->pxn[(size_t)gi * sys->nnics + k];
  int relay = -1;
  for (int i = 0; i < s->ndev; i++)
    if (s->dev[i] == x->relay) relay = i;
  if (x->relay < 0 || relay < 0 || x->bw < h->bw * 0.99f) return ncclSuccess; /* relay must be ours */
  struct hop a, b;
  if (to_nic) {
    BRAID_CHECK(hop_fill(s, g, x->relay, &a));
    BRAID_CHECK(hop_fill(s, x->relay, nic, &b));
  } else {
    BRAID_CHECK(hop_fill(s, nic, x->relay, &a));
    BRAID_CHECK(hop_fill(s, x->relay, g, &b));
  }
  if (a.nlinks + b.nlinks > MAX_HOP_LINKS) return ncclSuccess;
  h->type = BRAID_PATH_PXN;
  h->bw = x->bw;
  h->relay = relay;
  h->nlinks = 0;
  for (int i = 0; i < a.nlinks; i++) h->links[h->nlinks++] = a.links[i];
  for (int i = 0; i < b.nlinks; i++) h->links[h->nlinks++] = b.links[i];
  return ncclSuccess;
}

static int hop_fits(const struct search* s, const struct hop* h, int tmax) {
  if (h->type == BRAID_PATH_DIS || h->type > tmax) return 0;
  for (int i = 0; i < h->nlinks; i++)
    if (s->rem[h->links[i]] < s->speed * 0.999f) return 0;
  return 1;
}

static void hop_take(struct search* s, const struct hop* h, float sign) {
  for (int i = 0; i < h->nlinks; i++) s->rem[h->links[i]] -= sign * s->speed;
}

/* Leave the node from device d: choose the out NIC. */
static int try_exit(struct search* s, int d) {
  for (int j = 0; j < s->nnics; j++) {
    int k = s->cross ? (s->nic_in + j) % s->nnics : s->nic_in;
    if (j > 0 && !s->cross) break;
    const struct hop* h = &s->dn[d * s->nnics + k];
    if (s->net_out[k] < s->speed * 0.999f || !hop_fits(s, h, s->tmax_inter)) continue;
    s->nic_out = k;
    s->relay_out = h->relay;
    return 1;
  }
  return 0;
}

static int dfs(struct search* s, int depth) {
  int cur = s->order[depth - 1];
  if (--s->budget < 0) return 0;
  if (depth == s->ndev) {
    if (s->multi) return try_exit(s, cur);
    if (s->ndev == 1) return 1;
    const struct hop* h = &s->dd[cur * s->ndev + s->order[0]];
    return hop_fits(s, h, s->tmax_intra);
  }
  /* candidates: closest type first, then the next index after cur */
  for (int t = 0; t <= s->tmax_intra; t++) {
    for (int j = 1; j < s->ndev; j++) {
      int nx = (cur + j) % s->ndev;
      const struct hop* h = &s->dd[cur * s->ndev + nx];
      if (s->visited[nx] || h->type != t || !hop_fits(s, h, s->tmax_intra)) continue;
      hop_take(s, h, 1);
      s->visited[nx] = 1;
      s->order[depth] = nx;
      if (dfs(s, depth + 1)) {
        hop_take(s, h, -1); /* the caller reserves the whole channel */
        s->visited[nx] = 0;
        return 1;
      }
      hop_take(s, h, -1);
      s->visited[nx] = 0;
      if (s->budget < 0) return 0;
    }
  }
  return 0;
}

/* Reserve (sign 1) or release (-1) a found channel. */
static void channel_take(struct search* s, const int* order, int nic_in, int nic_out, float sign) {
  for (int i = 0; i + 1 < s->ndev; i++) hop_take(s, &s->dd[order[i] * s->ndev + order[i + 1]], sign);
  if (!s->multi) {
    if (s->ndev > 1) hop_take(s, &s->dd[order[s->ndev - 1] * s->ndev + order[0]], sign);
    return;
  }
  hop_take(s, &s->nd[nic_in * s->ndev + order[0]], sign);
  hop_take(s, &s->dn[order[s->ndev - 1] * s->nnics + nic_out], sign);
  s->net_in[nic_in] -= sign * s->speed;
  s->net_out[nic_out] -= sign * s->speed;
}

/* Find channel number c at the current settings; fills s->order and NICs. */
static int find_channel(struct search* s, int c) {
  memset(s->visited, 0, (size_t)s->ndev * sizeof(int));
  s->budget = SEARCH_BUDGET;
  if (!s->multi) {
    int start = c % s->ndev;
    s->order[0] = start;
    s->visited[start] = 1;
    return dfs(s, 1);
  }
  for (int j = 0; j < s->nnics; j++) {
    int k = (c + j) % s->nnics;
    if (s->net_in[k] < s->speed * 0.999f) continue;
    s->nic_in = k;
    for (int t = 0; t <= s->tmax_inter; t++) {
      for (int i = 0; i < s->ndev; i++) {
        int d = (c + i) % s->ndev;
        const struct hop* h = &s->nd[k * s->ndev + d];
        if (h->type != t || !hop_fits(s, h, s->tmax_inter)) continue;
        hop_take(s, h, 1);
        s->visited[d] = 1;
        s->order[0] = d;
        s->relay_in = h->relay;
        int ok = dfs(s, 1);
        hop_take(s, h, -1);
        s->visited[d] = 0;
        if (ok) return 1;
        if (s->budget < 0) return 0;
      }
    }
  }
  return 0;
}

/* Distinct hop types of a table, sorted; returns how many. */
static int type_set(const struct hop* h, int n, int* out) {
  int seen[BRAID_NUM_PATH_TYPES] = {0}, k = 0;
  for (int i = 0; i < n; i++)
    if (h[i].type != BRAID_PATH_DIS && h[i].type != BRAID_PATH_LOC) seen[h[i].type] = 1;
  for (int t = 0; t < BRAID_NUM_PATH_TYPES; t++)
    if (seen[t]) out[k++] = t;
  return k;
}

static void reset(struct search* s, int nflat) {
  memcpy(s->rem, s->cap, (size_t)nflat * sizeof(float));
  for (int k = 0; k < s->nnics; k++) {
    float bw = (float)s->sys->nodes[s->sys->nics[k]].speed / 8000.0f;
    s->net_in[k] = s->net_out[k] = bw;
  }
}

/* Pack channels at the current settings into `res` (when better than what it holds). */
static void try_settings(struct search* s, int nflat, struct braid_graph_node_info* res, float* best) {
  struct braid_graph_node_info* cand = res; /* written only when better */
  int n = 0, orders[BRAID_GRAPH_MAX_RINGS][BRAID_GRAPH_MAX_LOCAL];
  int nin[BRAID_GRAPH_MAX_RINGS], nout[BRAID_GRAPH_MAX_RINGS], rin[BRAID_GRAPH_MAX_RINGS], rout[BRAID_GRAPH_MAX_RINGS];
  reset(s, nflat);
  while (n < BRAID_GRAPH_MAX_RINGS && find_channel(s, n)) {
    memcpy(orders[n], s->order, (size_t)s->ndev * sizeof(int));
    nin[n] = s->nic_in;
    nout[n] = s->nic_out;
    rin[n] = s->relay_in;
    rout[n] = s->relay_out;
    channel_take(s, s->order, s->nic_in, s->nic_out, 1);
    n++;
    if (s->ndev == 1 && !s->multi) break; /* nothing to share: one channel says it all */
  }
  if (n == 0 || n * s->speed <= *best * 1.0001f) return;
  *best = n * s->speed;
  cand->nrings = n;
  cand->bw_intra = s->speed;
  cand->bw_inter = s->multi ? s->speed : 0;
  cand->cross_nic = s->cross;
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < s->ndev; d++) cand->order[i][d] = (uint8_t)orders[i][d];
    cand->nic_in[i] = (int16_t)(s->multi ? nin[i] : -1);
    cand->nic_out[i] = (int16_t)(s->multi ? nout[i] : -1);
    cand->relay_in[i] = (int16_t)(s->multi ? rin[i] : -1);
    cand->relay_out[i] = (int16_t)(s->multi ? rout[i] : -1);
  }
  /* the worst hop types actually used */
  int ti = BRAID_PATH_LOC, te = BRAID_PATH_LOC, nhops = s->multi ? s->ndev - 1 : (s->ndev > 1 ? s->ndev : 0);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < nhops; j++) {
      int t = s->dd[orders[i][j] * s->ndev + orders[i][(j + 1) % s->ndev]].type;
      if (t > ti) ti = t;
    }
    if (s->multi) {
      int a = s->nd[nin[i] * s->ndev + orders[i][0]].type, b = s->dn[orders[i][s->ndev - 1] * s->nnics + nout[i]].type;
      if (a > te) te = a;
      if (b > te) te = b;
    }
  }
  cand->type_intra = ti;
  cand->type_inter = te;
}

/* With the channels fixed, raise the intra-node speed as far as the links allow. */
static void raise_intra(struct search* s, int nflat, struct braid_graph_node_info* res) {
  for (size_t i = 0; i < sizeof(intra_speeds) / sizeof(intra_speeds[0]); i++) {
    float sp = intra_speeds[i];
    int ok = 1;
    if (sp <= res->bw_intra) break;
    reset(s, nflat);
    for (int c = 0; c < res->nrings && ok; c++) {
      int order[BRAID_GRAPH_MAX_LOCAL];
      for (int d = 0; d < s->ndev; d++) order[d] = res->order[c][d];
      s->speed = res->bw_inter; /* network hops keep the inter speed */
      channel_take(s, order, res->nic_in[c], res->nic_out[c], 1);
      s->speed = sp - res->bw_inter; /* intra hops take the difference on top */
      for (int j = 0; j + 1 < s->ndev; j++) {
        const struct hop* h = &s->dd[res->order[c][j] * s->ndev + res->order[c][j + 1]];
        hop_take(s, h, 1);
      }
    }
    for (int f = 0; f < nflat && ok; f++) ok = s->rem[f] > -0.001f;
    if (ok) {
      res->bw_intra = sp;
      return;
    }
  }
}

ncclResult_t braid_graph_search_node(const struct braid_topo_system* sys, const int* dev, int ndev, int multi,
                                     struct braid_graph_node_info* out) {
  ncclResult_t res = ncclSuccess;
  struct search s = {0};
  int nflat = 0, tintra[BRAID_NUM_PATH_TYPES], tinter[BRAID_NUM_PATH_TYPES], nti, nte;
  float best = 0;
  if (ndev < 1 || ndev > BRAID_GRAPH_MAX_LOCAL || (multi && sys->nnics < 1)) {
    BRAID_WARN("Graph search: %d devices on a node%s", ndev, multi && sys->nnics < 1 ? " and no NIC" : "");
    return ncclInvalidArgument;
  }
  s.sys = sys;
  s.ndev = ndev;
  s.dev = dev;
  s.multi = multi;
  s.nnics = multi ? sys->nnics : 0;
  BRAID_CALLOC_GOTO(s.link_off, sys->nnodes + 1, res, out_free);
  for (int i = 0; i < sys->nnodes; i++) {
    s.link_off[i] = nflat;
    nflat += sys->nodes[i].nlinks;
  }
  BRAID_CALLOC_GOTO(s.cap, nflat, res, out_free);
  BRAID_CALLOC_GOTO(s.rem, nflat, res, out_free);
  for (int i = 0; i < sys->nnodes; i++)
    for (int l = 0; l < sys->nodes[i].nlinks; l++) s.cap[s.link_off[i] + l] = sys->nodes[i].links[l].bw;
  BRAID_CALLOC_GOTO(s.net_in, s.nnics, res, out_free);
  BRAID_CALLOC_GOTO(s.net_out, s.nnics, res, out_free);
  BRAID_CALLOC_GOTO(s.visited, ndev, res, out_free);
  BRAID_CALLOC_GOTO(s.dd, (size_t)ndev * ndev, res, out_free);
  BRAID_CALLOC_GOTO(s.dn, (size_t)ndev * (s.nnics ? s.nnics : 1), res, out_free);
  BRAID_CALLOC_GOTO(s.nd, (size_t)ndev * (s.nnics ? s.nnics : 1), res, out_free);
  for (int a = 0; a < ndev; a++)
    for (int b = 0; b < ndev; b++)
      if (a != b) BRAID_CHECK_GOTO(hop_fill(&s, dev[a], dev[b], &s.dd[a * ndev + b]), res, out_free);
  for (int a = 0; a < ndev; a++)
    for (int k = 0; k < s.nnics; k++) {
      BRAID_CHECK_GOTO(net_hop(&s, a, k, 1, &s.dn[a * s.nnics + k]), res, out_free);
      BRAID_CHECK_GOTO(net_hop(&s, a, k, 0, &s.nd[k * ndev + a]), res, out_free);
    }
  nti = type_set(s.dd, ndev * ndev, tintra);
  if (nti == 0) tintra[nti++] = BRAID_PATH_LOC;
  nte = multi ? type_set(s.dn, ndev * s.nnics, tinter) : 1;
  if (!multi || nte == 0) tinter[0] = BRAID_PATH_LOC, nte = 1;

  int64_t cross_param = braid_param_int(BRAID_PARAM_CROSS_NIC);
  int ncross = multi && s.nnics > 1 && cross_param != 0 ? 2 : 1;
  const float* speeds = multi ? inter_speeds : intra_speeds;
  int nspeeds = multi ? (int)(sizeof(inter_speeds) / sizeof(float)) : (int)(sizeof(intra_speeds) / sizeof(float));
  memset(out, 0, sizeof(*out));
  out->ndev = ndev;
  for (int cross = cross_param == 1 && ncross == 2 ? 1 : 0; cross < ncross; cross++) {
    for (int i = 0; i < nti; i++) {
      for (int e = 0; e < nte; e++) {
        for (int k = 0; k < nspeeds; k++) {
          if (speeds[k] * BRAID_GRAPH_MAX_RINGS <= best) break;
          s.speed = speeds[k];
          s.tmax_intra = tintra[i];
          s.tmax_inter = tinter[e];
          s.cross = cross;
          try_settings(&s, nflat, out, &best);
        }
      }
    }
    if (out->nrings > 0) break; /* NCCL_CROSS_NIC=2: changing NICs only when keeping one fails */
  }
  if (out->nrings == 0) { /* NCCL's fallback: one channel in index order, 0.1 GB/s */
    BRAID_INFO(BRAID_LOG_GRAPH, "Graph search found no ring over %d devices; falling back to index order", ndev);
    out->nrings = 1;
    out->bw_intra = 0.1f;
    out->bw_inter = multi ? 0.1f : 0;
    out->type_intra = BRAID_PATH_SYS;
    out->type_inter = multi ? BRAID_PATH_SYS : BRAID_PATH_LOC;
    for (int d = 0; d < ndev; d++) out->order[0][d] = (uint8_t)d;
    out->nic_in[0] = out->nic_out[0] = multi ? 0 : -1;
    out->relay_in[0] = out->relay_out[0] = -1;
  } else if (multi) {
    raise_intra(&s, nflat, out);
  }
out_free:
  free(s.link_off);
  free(s.cap);
  free(s.rem);
  free(s.net_in);
  free(s.net_out);
  free(s.visited);
  free(s.dd);
  free(s.dn);
  free(s.nd);
  return res;
}
