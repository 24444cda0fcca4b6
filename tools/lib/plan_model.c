/*
 * plan_model.c - the communication model of a parallel training layout (plan_model.h):
 * textbook ring/tree formulas, group placement over NVLink domains, pricing of each
 * collective (analytic, or braid's tuner for a topology XML) and the layout search.
 * Used by tools/braid-plan; tested by tests/unit/test_plan_model.c.
 */
#include "plan_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/debug.h"
#include "topo/graph.h"
#include "topo/topo.h"
#include "topo/tuner.h"

/* Default per-step latencies (us): an NVLink hop and a network hop (NCCL's order). */
#define PLAN_NVL_LAT_US 1.0
#define PLAN_NET_LAT_US 2.0

const char* braid_plan_model_coll_name(int coll) {
  static const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "AllToAll", "SendRecv"};
  return coll >= 0 && coll < BRAID_PLAN_NUM_COLLS ? names[coll] : "?";
}

double braid_plan_model_ring_bytes(int coll, int n, double S) {
  if (coll == BRAID_PLAN_SENDRECV) return S;
  if (n <= 1) return 0.0;
  double f = (double)(n - 1) / n;
  return coll == BRAID_PLAN_ALLREDUCE ? 2.0 * f * S : f * S;
}

int braid_plan_model_ring_steps(int coll, int n) {
  if (coll == BRAID_PLAN_SENDRECV) return 1;
  if (n <= 1) return 0;
  return coll == BRAID_PLAN_ALLREDUCE ? 2 * (n - 1) : n - 1;
}

int braid_plan_model_tree_steps(int n) {
  int d = 0;
  while ((1 << d) < n) d++;
  return 2 * d;
}

double braid_plan_model_tree_bytes(int n, double S) {
  return n <= 1 ? 0.0 : 2.0 * S;
}

double braid_plan_model_time_us(int steps, double lat_us, double bytes, double bw_GBps) {
  return steps * lat_us + (bw_GBps > 0 ? bytes / (bw_GBps * 1e3) : 0.0);
}

/* ---- cluster ---- */

ncclResult_t braid_plan_model_cluster_init(int nodes, int gpus_per_node, int nvl_domain, double nvl_bw, double nic_bw,
                                           struct braid_plan_cluster* c) {
  const char* bad = nodes < 1           ? "nodes"
                    : gpus_per_node < 1 ? "gpus per node"
                    : nvl_domain < 1    ? "NVLink domain"
                    : !(nvl_bw > 0)     ? "NVLink bandwidth"
                    : !(nic_bw > 0)     ? "NIC bandwidth"
                                        : NULL;
  if (bad == NULL && nvl_domain % gpus_per_node != 0 && gpus_per_node % nvl_domain != 0) bad = "NVLink domain";
  if (bad == NULL && nvl_domain > gpus_per_node && (nodes * gpus_per_node) % nvl_domain != 0) bad = "NVLink domain";
  if (bad != NULL) {
    BRAID_WARN(
        "braid-plan: bad cluster %s (nodes %d, gpus per node %d, NVLink domain %d, NVLink %.1f GB/s, NIC %.1f GB/s)",
        bad, nodes, gpus_per_node, nvl_domain, nvl_bw, nic_bw);
    return ncclInvalidArgument;
  }
  memset(c, 0, sizeof(*c));
  c->nodes = nodes;
  c->gpus_per_node = gpus_per_node;
  c->nvl_domain = nvl_domain;
  c->nvl_bw = nvl_bw;
  c->nic_bw = nic_bw;
  c->nvl_lat_us = PLAN_NVL_LAT_US;
  c->net_lat_us = PLAN_NET_LAT_US;
  c->intra_name = "NVLink";
  return ncclSuccess;
}

/* The channels and tuner of a communicator of ppn GPUs (the first ones) on each of nnodes copies. */
static ncclResult_t tuner_make(const struct braid_topo_system* sys, int ppn, int nnodes,
                               struct braid_channel_graph** g_p, struct braid_tuner** t_p) {
  ncclResult_t res = ncclSuccess;
  int n = ppn * nnodes;
  struct braid_topo_rank* ranks = NULL;
  struct braid_channel_graph* g = NULL;
  BRAID_CALLOC_GOTO(ranks, (size_t)n, res, out);
  for (int i = 0; i < n; i++) {
    ranks[i].rank = i;
    ranks[i].node = i / ppn;
    ranks[i].local_rank = i % ppn;
    ranks[i].host_hash = 0x1000 + (uint64_t)(i / ppn);
    ranks[i].cuda_dev = sys->nodes[sys->gpus[i % ppn]].dev;
    ranks[i].bus_id = sys->nodes[sys->gpus[i % ppn]].id;
  }
  BRAID_CHECK_GOTO(braid_graph_compute(sys, n, ranks, &g), res, out);
  if (t_p != NULL) {
    BRAID_CHECK_GOTO(braid_tuner_init(g, n, nnodes, t_p), res, err_free_graph);
    braid_tuner_set_log(*t_p, 0);
  }
  if (g_p != NULL) {
    *g_p = g;
    g = NULL;
  }
err_free_graph:
  braid_graph_free(g);
out:
  free(ranks);
  return res;
}

ncclResult_t braid_plan_model_cluster_xml(const char* xml, int nodes, struct braid_plan_cluster* c) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  if (xml == NULL || nodes < 1) {
    BRAID_WARN("braid-plan: bad cluster (xml %s, nodes %d)", xml ? xml : "(null)", nodes);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_load_xml(xml, &sys));
  if (sys->ngpus < 1) {
    BRAID_WARN("braid-plan: topology %s has no GPUs", xml);
    res = ncclInvalidArgument;
    goto err_free_sys;
  }
  BRAID_CHECK_GOTO(tuner_make(sys, sys->ngpus, 1, &g, NULL), res, err_free_sys);
  double nic = 0;
  for (int i = 0; i < sys->nnics; i++) nic += sys->nodes[sys->nics[i]].speed / 8000.0; /* Mb/s -> GB/s */
  if (nic <= 0) nic = BRAID_TOPO_NET_SPEED_DEFAULT / 8000.0;
  double nvl = g->nvl_bw > 0 ? g->nvl_bw : g->bw_intra * g->nrings;
  if (!(nvl > 0)) nvl = BRAID_TOPO_BW_PCI_DEFAULT;
  BRAID_CHECK_GOTO(braid_plan_model_cluster_init(nodes, sys->ngpus, sys->ngpus, nvl, nic / sys->ngpus, c), res,
                   err_free_graph);
  c->intra_name = g->nvl_bw > 0 ? "NVLink" : braid_topo_path_name(g->type_intra);
  c->sys = sys;
  sys = NULL;
err_free_graph:
  braid_graph_free(g);
err_free_sys:
  braid_topo_free(sys);
  return res;
}

void braid_plan_model_cluster_free(struct braid_plan_cluster* c) {
  if (c == NULL) return;
  for (int i = 0; i < c->ncache; i++) braid_tuner_free(c->cache[i].t);
  c->ncache = 0;
  braid_topo_free(c->sys);
  c->sys = NULL;
}

/* The tuner for a group shape, built on first use; NULL when it cannot be built. */
static struct braid_tuner* tuner_get(struct braid_plan_cluster* c, int ppn, int nnodes) {
  for (int i = 0; i < c->ncache; i++)
    if (c->cache[i].ppn == ppn && c->cache[i].nnodes == nnodes) return c->cache[i].t;
  struct braid_tuner* t = NULL;
  if (tuner_make(c->sys, ppn, nnodes, NULL, &t) != ncclSuccess) t = NULL;
  if (c->ncache < BRAID_PLAN_TUNER_CACHE) {
    c->cache[c->ncache].ppn = ppn;
    c->cache[c->ncache].nnodes = nnodes;
    c->cache[c->ncache++].t = t;
  }
  return t;
}

void braid_plan_model_placement(const struct braid_plan_cluster* c, int n, int stride, int* ppn_p, int* ndomains_p) {
  int domains = 0, last = -1, most = 0, here = 0;
  for (int i = 0; i < n; i++) {
    int d = (i * stride) / c->nvl_domain;
    if (d != last) {
      domains++;
      last = d;
      here = 0;
    }
    if (++here > most) most = here;
  }
  *ppn_p = most;
  *ndomains_p = domains;
}

/* Analytic price: ring (and tree for all-reduce) for AR/AG/RS, split traffic for all-to-all. */
static void price_analytic(const struct braid_plan_cluster* c, int coll, int n, int ppn, int ndom, double S,
                           struct braid_plan_item* it) {
  int net = ndom > 1;
  double lat = net ? c->net_lat_us : c->nvl_lat_us;
  /* A ring leaves each domain through the NICs of its ppn members there. */
  double bw = net ? fmin(c->nvl_bw, ppn * c->nic_bw) : c->nvl_bw;
  it->bytes = braid_plan_model_ring_bytes(coll, n, S);
  if (coll == BRAID_PLAN_SENDRECV) {
    it->time_us = braid_plan_model_time_us(1, lat, S, net ? c->nic_bw : c->nvl_bw);
    snprintf(it->algo, sizeof(it->algo), "P2P");
  } else if (coll == BRAID_PLAN_ALLTOALL) {
    /* (ppn-1)/n of S stays in the domain, (n-ppn)/n leaves through this GPU's NIC. */
    double t_in = S * (ppn - 1) / n / (c->nvl_bw * 1e3), t_out = net ? S * (n - ppn) / n / (c->nic_bw * 1e3) : 0;
    it->time_us = braid_plan_model_ring_steps(coll, n) * lat + fmax(t_in, t_out);
    snprintf(it->algo, sizeof(it->algo), "Pairwise");
  } else {
    it->time_us = braid_plan_model_time_us(braid_plan_model_ring_steps(coll, n), lat, it->bytes, bw);
    snprintf(it->algo, sizeof(it->algo), "Ring");
    if (coll == BRAID_PLAN_ALLREDUCE) {
      double tree =
          braid_plan_model_time_us(braid_plan_model_tree_steps(n), lat, braid_plan_model_tree_bytes(n, S), bw);
      if (tree < it->time_us) {
        it->time_us = tree;
        snprintf(it->algo, sizeof(it->algo), "Tree");
      }
    }
  }
}

ncclResult_t braid_plan_model_coll(struct braid_plan_cluster* c, int coll, int n, int stride, double S,
                                   struct braid_plan_item* it) {
  if (coll < 0 || coll >= BRAID_PLAN_NUM_COLLS || n < 1 || stride < 1 || !(S >= 0)) {
    BRAID_WARN("braid-plan: bad collective (coll %d, group %d, stride %d, bytes %.0f)", coll, n, stride, S);
    return ncclInvalidArgument;
  }
  int ppn, ndom;
  braid_plan_model_placement(c, n, stride, &ppn, &ndom);
  it->coll = coll;
  it->group = n;
  it->size = S;
  it->network = ndom > 1;
  it->ppn = ppn;
  price_analytic(c, coll, n, ppn, ndom, S, it);
  static const int funcs[] = {BRAID_FUNC_AllReduce, BRAID_FUNC_AllGather, BRAID_FUNC_ReduceScatter};
  if (c->sys != NULL && coll <= BRAID_PLAN_REDUCESCATTER && n > 1 && ppn <= c->sys->ngpus) {
    struct braid_tuner* t = tuner_get(c, ppn, ndom);
    struct braid_tuner_choice ch;
    if (t != NULL && braid_tuner_choose(t, funcs[coll], (size_t)S, &ch) == ncclSuccess) {
      it->time_us = ch.time_us;
      snprintf(it->algo, sizeof(it->algo), "%s/%s", braid_tuner_algo_name(ch.algo), braid_tuner_proto_name(ch.proto));
    }
  }
  return ncclSuccess;
}

/* ---- model and layouts ---- */

ncclResult_t braid_plan_model_check(const struct braid_plan_model* m) {
  const char* bad = m->layers < 1                                               ? "layers"
                    : m->hidden < 1                                             ? "hidden"
                    : m->seq < 1                                                ? "seq"
                    : m->micro_batch < 1                                        ? "micro-batch"
                    : m->micro_batches < 1                                      ? "micro-batches"
                    : m->bytes_per_elem < 1                                     ? "bytes per element"
                    : !(m->params > 0)                                          ? "params"
                    : m->experts < 0                                            ? "experts"
                    : (m->experts > 0 && (m->topk < 1 || m->topk > m->experts)) ? "top-k"
                    : m->ffn < 0                                                ? "ffn"
                    : (m->zero < 0 || m->zero > 3)                              ? "zero"
                    : !(m->tflops > 0)                                          ? "tflops"
                    : m->gpu_mem_gb < 0                                         ? "gpu memory"
                                                                                : NULL;
  if (bad != NULL) {
    BRAID_WARN(
        "braid-plan: bad model %s (layers %d hidden %d seq %d micro-batch %d x %d, %d B/elem, %.3g params, "
        "experts %d top-k %d, ffn %d, zero %d, %.1f TFLOP/s, %.1f GB)",
        bad, m->layers, m->hidden, m->seq, m->micro_batch, m->micro_batches, m->bytes_per_elem, m->params, m->experts,
        m->topk, m->ffn, m->zero, m->tflops, m->gpu_mem_gb);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

int braid_plan_model_layout_valid(const struct braid_plan_cluster* c, const struct braid_plan_model* m,
                                  const struct braid_plan_layout* l, const char** why) {
  const char* w = NULL;
  if (l->tp < 1 || l->pp < 1 || l->dp < 1 || l->ep < 1)
    w = "every degree must be at least 1";
  else if ((long)l->tp * l->pp * l->dp != (long)c->nodes * c->gpus_per_node)
    w = "TP x PP x DP must equal the GPU count";
  else if (m->hidden % l->tp != 0)
    w = "TP must divide the hidden size";
  else if (m->layers % l->pp != 0)
    w = "PP must divide the layer count";
  else if (l->dp % l->ep != 0)
    w = "EP must divide DP";
  else if (l->ep > 1 && m->experts == 0)
    w = "EP needs an MoE model (--experts)";
  else if (l->ep > 1 && m->experts % l->ep != 0)
    w = "EP must divide the expert count";
  if (why != NULL) *why = w;
  return w == NULL;
}

/* Parameters in the experts: 3 h x ffn (gated MLP) per expert per layer, at most all of them. */
static double expert_params(const struct braid_plan_model* m) {
  if (m->experts == 0) return 0;
  double ffn = m->ffn > 0 ? m->ffn : 4.0 * m->hidden;
  return fmin(m->params, 3.0 * m->hidden * ffn * m->experts * m->layers);
}

static ncclResult_t add(struct braid_plan_cluster* c, struct braid_plan_result* r, const char* what, int coll, int n,
                        int stride, double S, double count) {
  if (n <= 1 || count <= 0) return ncclSuccess;
  struct braid_plan_item* it = &r->items[r->nitems];
  memset(it, 0, sizeof(*it));
  BRAID_CHECK(braid_plan_model_coll(c, coll, n, stride, S, it));
  it->what = what;
  it->count = count;
  it->total_us = count * it->time_us;
  r->total_us += it->total_us;
  r->nitems++;
  return ncclSuccess;
}

/* Gradient reduction over a data-parallel group (plain all-reduce, or ZeRO's pieces). */
static ncclResult_t add_dp(struct braid_plan_cluster* c, const struct braid_plan_model* m, struct braid_plan_result* r,
                           const char* what, int n, int stride, double grad_bytes) {
  int mb = m->micro_batches;
  if (m->zero == 0) return add(c, r, what, BRAID_PLAN_ALLREDUCE, n, stride, grad_bytes, 1);
  double per = m->zero == 3 ? mb : 1; /* ZeRO-3 gathers weights for every micro-batch's forward and backward */
  BRAID_CHECK(add(c, r, what, BRAID_PLAN_REDUCESCATTER, n, stride, grad_bytes, per));
  return add(c, r, what, BRAID_PLAN_ALLGATHER, n, stride, grad_bytes, m->zero == 3 ? 2.0 * mb : 1);
}

ncclResult_t braid_plan_model_evaluate(struct braid_plan_cluster* c, const struct braid_plan_model* m,
                                       const struct braid_plan_layout* l, struct braid_plan_result* r) {
  const char* why;
  BRAID_CHECK(braid_plan_model_check(m));
  if (!braid_plan_model_layout_valid(c, m, l, &why)) {
    BRAID_WARN("braid-plan: layout TP %d x PP %d x DP %d x EP %d: %s", l->tp, l->pp, l->dp, l->ep, why);
    return ncclInvalidArgument;
  }
  memset(r, 0, sizeof(*r));
  r->layout = *l;
  int M = m->micro_batches, stage_layers = m->layers / l->pp;
  double act = (double)m->micro_batch * m->seq * m->hidden * m->bytes_per_elem; /* one layer's activations */
  double pexp = expert_params(m), pdense = m->params - pexp;
  /* TP (Megatron): attention and MLP outputs, forward and backward: 4 all-reduces per layer. */
  BRAID_CHECK(add(c, r, "TP", BRAID_PLAN_ALLREDUCE, l->tp, 1, act, 4.0 * stage_layers * M));
  /* EP: dispatch and combine of top-k copies of every token, forward and backward. */
  if (m->experts > 0)
    BRAID_CHECK(add(c, r, "EP", BRAID_PLAN_ALLTOALL, l->ep, l->tp, act * m->topk, 4.0 * stage_layers * M));
  /* PP: activations forward and gradients backward at each stage boundary, split over TP. */
  if (l->pp > 1) {
    /* Priced over all stages, so that it counts as network when any boundary leaves a domain. */
    struct braid_plan_item* it = &r->items[r->nitems];
    BRAID_CHECK(add(c, r, "PP", BRAID_PLAN_SENDRECV, l->pp, l->tp * l->dp, act / l->tp, 2.0 * M));
    it->group = 2; /* each transfer is between two neighbouring stages */
  }
  /* DP: gradients of this GPU's share of the dense weights over DP; the experts' over DP / EP. */
  double before = r->total_us;
  BRAID_CHECK(add_dp(c, m, r, "DP", l->dp, l->tp, pdense / ((double)l->tp * l->pp) * m->bytes_per_elem));
  if (pexp > 0)
    BRAID_CHECK(add_dp(c, m, r, "DP-expert", l->dp / l->ep, l->tp * l->ep,
                       pexp / ((double)l->tp * l->pp * l->ep) * m->bytes_per_elem));
  r->dp_us = r->total_us - before;
  /* Overlap window: one micro-batch's backward (4 x active params x tokens FLOPs). */
  double active = pdense + (m->experts > 0 ? pexp * m->topk / m->experts : 0);
  r->backward_us = 4.0 * active / ((double)l->tp * l->pp) * m->micro_batch * m->seq / (m->tflops * 1e12) * 1e6;
  r->bubble = (double)(l->pp - 1) / (M + l->pp - 1);
  /* Model states: weights and gradients at bytes_per_elem, fp32 master + Adam m, v = 12 B. */
  double pg = pdense / ((double)l->tp * l->pp) + pexp / ((double)l->tp * l->pp * l->ep);
  double w = m->bytes_per_elem, g = m->bytes_per_elem, o = 12.0;
  if (m->zero >= 1) o /= l->dp;
  if (m->zero >= 2) g /= l->dp;
  if (m->zero >= 3) w /= l->dp;
  r->mem_gb = pg * (w + g + o) / 1e9;
  for (int i = 0; i < r->nitems; i++) {
    if (strcmp(r->items[i].what, "TP") == 0 && r->items[i].network) r->warn |= BRAID_PLAN_WARN_TP_DOMAIN;
    if (strcmp(r->items[i].what, "EP") == 0 && r->items[i].network) r->warn |= BRAID_PLAN_WARN_EP_NETWORK;
  }
  double window = m->zero == 3 ? r->backward_us * M : r->backward_us;
  if (r->dp_us > window) r->warn |= BRAID_PLAN_WARN_DP_EXPOSED;
  if (r->bubble > 0.10) r->warn |= BRAID_PLAN_WARN_BUBBLE;
  if (m->gpu_mem_gb > 0 && r->mem_gb > m->gpu_mem_gb) r->warn |= BRAID_PLAN_WARN_MEMORY;
  return ncclSuccess;
}

static int rank_cmp(const void* a, const void* b) {
  const struct braid_plan_result *x = a, *y = b;
  int fx = !(x->warn & BRAID_PLAN_WARN_MEMORY), fy = !(y->warn & BRAID_PLAN_WARN_MEMORY);
  if (fx != fy) return fy - fx;
  if (x->total_us != y->total_us) return x->total_us < y->total_us ? -1 : 1;
  if (x->layout.tp != y->layout.tp) return x->layout.tp - y->layout.tp;
  if (x->layout.pp != y->layout.pp) return x->layout.pp - y->layout.pp;
  return x->layout.ep - y->layout.ep;
}

ncclResult_t braid_plan_model_search(struct braid_plan_cluster* c, const struct braid_plan_model* m,
                                     struct braid_plan_result** out_p, int* n_p) {
  ncclResult_t res = ncclSuccess;
  int N = c->nodes * c->gpus_per_node, n = 0, cap = 0;
  struct braid_plan_result* out = NULL;
  BRAID_CHECK(braid_plan_model_check(m));
  for (int pass = 0; pass < 2; pass++) { /* count, then fill */
    for (int tp = 1; tp <= N; tp++) {
      if (N % tp) continue;
      for (int pp = 1; pp <= N / tp; pp++) {
        if ((N / tp) % pp) continue;
        int dp = N / tp / pp;
        for (int ep = 1; ep <= dp; ep++) {
          struct braid_plan_layout l = {tp, pp, dp, ep};
          if (dp % ep || !braid_plan_model_layout_valid(c, m, &l, NULL)) continue;
          if (pass == 0) {
            cap++;
            continue;
          }
          BRAID_CHECK_GOTO(braid_plan_model_evaluate(c, m, &l, &out[n]), res, err_free);
          n++;
        }
      }
    }
    if (pass == 0) {
      if (cap == 0) {
        BRAID_WARN("braid-plan: no valid layout for %d GPUs (layers %d, hidden %d, experts %d)", N, m->layers,
                   m->hidden, m->experts);
        return ncclInvalidArgument;
      }
      BRAID_CALLOC_GOTO(out, (size_t)cap, res, err_free);
    }
  }
  qsort(out, (size_t)n, sizeof(*out), rank_cmp);
  *out_p = out;
  *n_p = n;
  return ncclSuccess;
err_free:
  free(out);
  return res;
}
