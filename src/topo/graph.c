/*
 * graph.c - one node's channels (graph.h): the system NCCL would search for the node (only
 * its ranks' GPUs, braid_topo_subset; in host mode one pseudo-GPU per rank), then the ring
 * graph (pattern 4, 1..32 channels) and the tree graph (pattern 1, as many channels as the
 * ring), each from NCCL_GRAPH_FILE when the file has it, else from NCCL's search (search.c).
 * GPUs the topology does not know (the fake GPU, a shared GPU) get NCCL's fallback: one
 * channel in rank order at 0.1 GB/s.
 */
#include "topo/graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "topo/search.h"

/* The node's ranks in local order, with their node count; checks the table. */
static ncclResult_t node_ranks(int nranks, const struct braid_topo_rank* ranks, int node, int* local, int* n_p,
                               int* nnodes_p) {
  int n = 0, nnodes = 0;
  if (nranks < 1 || ranks == NULL) {
    BRAID_WARN("braid_graph: %d ranks (table %p)", nranks, (const void*)ranks);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < nranks; i++) {
    if (ranks[i].node + 1 > nnodes) nnodes = ranks[i].node + 1;
    if (ranks[i].node != node) continue;
    if (ranks[i].local_rank < 0 || ranks[i].local_rank >= BRAID_GRAPH_MAX_LOCAL) {
      BRAID_WARN("braid_graph: rank %d: local rank %d out of range", i, ranks[i].local_rank);
      return ncclInvalidArgument;
    }
    local[ranks[i].local_rank] = i;
    n++;
  }
  *n_p = n;
  *nnodes_p = nnodes;
  return ncclSuccess;
}

ncclResult_t braid_graph_node_gpus(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                   int node, int* gpus, int* n_p) {
  int local[BRAID_GRAPH_MAX_LOCAL], n, nnodes;
  BRAID_CHECK(node_ranks(nranks, ranks, node, local, &n, &nnodes));
  for (int i = 0; i < n; i++) {
    int g = braid_topo_gpu_find(sys, ranks[local[i]].bus_id);
    gpus[i] = g;
    for (int j = 0; j < i && g >= 0; j++)
      if (gpus[j] == g) gpus[i] = -1; /* a shared GPU (BRAID_GPU_SHARING): the rank order fallback */
  }
  *n_p = n;
  return ncclSuccess;
}

/* NCCL's fallback: one channel in rank order, 0.1 GB/s. */
static void fallback(struct braid_graph_part* p, int ndev, int multi, int pattern) {
  memset(p, 0, sizeof(*p));
  p->nchannels = 1;
  p->pattern = pattern;
  p->bw_intra = p->bw_inter = 0.1f;
  p->type_intra = p->type_inter = BRAID_PATH_SYS;
  for (int d = 0; d < ndev; d++) p->order[0][d] = (uint8_t)d;
  p->nic_in[0] = p->nic_out[0] = (int16_t)(multi ? 0 : -1);
  p->relay_in[0] = p->relay_out[0] = -1;
}

/* A search graph -> the plain part; PXN relays from the subset's paths. */
static void part_fill(const struct braid_topo_system* sub, const struct braid_search_graph* g, int multi,
                      struct braid_graph_part* p) {
  memset(p, 0, sizeof(*p));
  p->nchannels = g->nchannels > BRAID_GRAPH_MAX_RINGS ? BRAID_GRAPH_MAX_RINGS : g->nchannels;
  p->pattern = g->pattern;
  p->cross_nic = g->cross_nic;
  p->same_channels = g->same_channels;
  p->type_intra = g->type_intra;
  p->type_inter = g->type_inter;
  p->bw_intra = g->bw_intra;
  p->bw_inter = g->bw_inter;
  p->latency_inter = g->latency_inter;
  for (int c = 0; c < p->nchannels; c++) {
    for (int i = 0; i < g->ngpus; i++) p->order[c][i] = (uint8_t)g->intra[c * g->ngpus + i];
    p->nic_in[c] = p->nic_out[c] = p->relay_in[c] = p->relay_out[c] = -1;
    if (!multi) continue;
    p->nic_in[c] = (int16_t)g->inter[c * 2];
    p->nic_out[c] = (int16_t)g->inter[c * 2 + 1];
    int ends[2] = {g->intra[c * g->ngpus], g->intra[c * g->ngpus + g->ngpus - 1]};
    for (int e = 0; e < 2; e++) {
      int nic = e == 0 ? p->nic_in[c] : p->nic_out[c], gpu = -1;
      for (int k = 0; k < sub->ngpus; k++)
        if (sub->nodes[sub->gpus[k]].rank == ends[e]) gpu = sub->gpus[k];
      if (gpu < 0 || nic < 0 || nic >= sub->nnics) continue;
      const struct braid_topo_path* path = braid_topo_path(sub, gpu, sub->nics[nic]);
      int16_t relay = path->type == BRAID_PATH_PXN && path->relay >= 0 ? (int16_t)sub->nodes[path->relay].rank : -1;
      if (e == 0) p->relay_in[c] = relay;
      if (e == 1) p->relay_out[c] = relay;
    }
  }
}

/* A made-up socket NIC for several nodes that show no NIC (loopback only, a file without). */
static ncclResult_t add_lo_nic(struct braid_topo_system* c) {
  int nic;
  BRAID_CHECK(braid_topo_node_add(c, BRAID_TOPO_NIC, -1, &nic));
  snprintf(c->nodes[nic].name, sizeof(c->nodes[nic].name), "lo");
  c->nodes[nic].speed = BRAID_TOPO_NET_SPEED_DEFAULT;
  c->nodes[nic].dev = 0;
  c->nodes[nic].guid = 1;
  c->nodes[nic].parent = c->cpus[0];
  BRAID_CHECK(braid_topo_link_add(c, nic, c->cpus[0], BRAID_LINK_PCI, BRAID_TOPO_NET_SPEED_DEFAULT / 8000.0f));
  BRAID_CHECK(braid_topo_index(c));
  return braid_topo_compute_paths(c);
}

/* The system NCCL searches for this node. */
static ncclResult_t node_system(const struct braid_topo_system* sys, int host, int n, const int* gpus, int multi,
                                struct braid_topo_system** sub_p) {
  struct braid_topo_system* sub = NULL;
  if (host && sys->ngpus > 0 && sys->xml != NULL) { /* a file with GPUs: its machine without them */
    struct braid_topo_system* bare = NULL;
    BRAID_CHECK(braid_topo_subset(sys, 0, NULL, &bare));
    ncclResult_t res = braid_topo_add_pseudo_gpus(bare, n, &sub);
    braid_topo_free(bare);
    BRAID_CHECK(res);
  } else if (host) {
    BRAID_CHECK(braid_topo_add_pseudo_gpus(sys, n, &sub));
  } else {
    BRAID_CHECK(braid_topo_subset(sys, n, gpus, &sub));
  }
  if (multi && sub->nnics == 0 && sub->ncpus > 0) {
    ncclResult_t res = add_lo_nic(sub);
    if (res != ncclSuccess) {
      braid_topo_free(sub);
      return res;
    }
  }
  *sub_p = sub;
  return ncclSuccess;
}

/* One search graph: from NCCL_GRAPH_FILE, else searched. */
static ncclResult_t one_graph(struct braid_topo_system* sub, int id, int pattern, int min, int max, int multi,
                              const int* devs, const int* hosts, const int* ranks_of, const struct braid_graph_opts* o,
                              struct braid_graph_part* out) {
  const char* file = braid_param_str(BRAID_PARAM_GRAPH_FILE);
  int found = 0;
  if (file != NULL && file[0] != '\0') {
    BRAID_CHECK(braid_graph_file_read(file, id, sub, sub->ngpus, devs, hosts, ranks_of, multi, out, &found));
    if (found) return ncclSuccess;
  }
  struct braid_search_graph* g = calloc(1, sizeof(*g));
  if (g == NULL) {
    BRAID_WARN("Failed to allocate a search graph");
    return ncclSystemError;
  }
  struct braid_search_opts so = {o ? o->nccl_version : 0};
  g->id = id;
  g->pattern = pattern;
  g->min_channels = min;
  g->max_channels = max;
  ncclResult_t res = braid_search_compute(sub, multi, &so, g);
  if (res == ncclSuccess) part_fill(sub, g, multi, out);
  free(g);
  return res;
}

/* What the tuner needs to know about the node. */
static void node_facts(const struct braid_topo_system* sub, int host, int known, struct braid_graph_node_info* info) {
  info->host_mode = host;
  info->min_sm = host || !known ? 0 : 1 << 30;
  info->max_sm = 0;
  info->nvl_bw = host || !known ? 0 : 1e30f;
  for (int i = 0; i < sub->ngpus && known && !host; i++) {
    const struct braid_topo_node* g = &sub->nodes[sub->gpus[i]];
    float nvl = 0;
    if (g->sm < info->min_sm) info->min_sm = g->sm;
    if (g->sm > info->max_sm) info->max_sm = g->sm;
    for (int j = 0; j < g->nlinks; j++)
      if (g->links[j].kind == BRAID_LINK_NVL) nvl += g->links[j].bw;
    if (nvl < info->nvl_bw) info->nvl_bw = nvl;
  }
  info->cpu_vendor = sub->ncpus > 0 ? sub->nodes[sub->cpus[0]].vendor : BRAID_CPU_VENDOR_OTHER;
  info->cpu_arch = sub->ncpus > 0 ? sub->nodes[sub->cpus[0]].arch : BRAID_CPU_ARCH_X86;
  info->nnics = sub->nnics;
  info->nvls =
      !host && known && info->ndev > 1 && braid_topo_nvls_capable(sub) && braid_param_int(BRAID_PARAM_NVLS_ENABLE) != 0;
}

ncclResult_t braid_graph_node_search_ex(const struct braid_topo_system* sys, int nranks,
                                        const struct braid_topo_rank* ranks, int node,
                                        const struct braid_graph_opts* opts, struct braid_graph_node_info* info) {
  ncclResult_t res = ncclSuccess;
  int local[BRAID_GRAPH_MAX_LOCAL], gpus[BRAID_GRAPH_MAX_LOCAL], n, nnodes, known = 1;
  int devs[BRAID_GRAPH_MAX_LOCAL], hosts[BRAID_GRAPH_MAX_LOCAL];
  struct braid_topo_system* sub = NULL;
  if (sys == NULL || info == NULL) {
    BRAID_WARN("braid_graph_node_search: %s is NULL", sys == NULL ? "sys" : "info");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_graph_check_ranks(nranks, ranks));
  BRAID_CHECK(node_ranks(nranks, ranks, node, local, &n, &nnodes));
  if (n < 1) {
    BRAID_WARN("braid_graph_node_search: node %d has no rank", node);
    return ncclInvalidArgument;
  }
  int host = ranks[local[0]].bus_id<0, multi = nnodes> 1;
  memset(info, 0, sizeof(*info));
  info->ndev = n;
  if (!host) {
    BRAID_CHECK(braid_graph_node_gpus(sys, nranks, ranks, node, gpus, &n));
    for (int i = 0; i < n; i++) known &= gpus[i] >= 0;
  }
  if (!known) { /* GPUs this system does not have: rank order at NCCL's fallback speed */
    BRAID_INFO(BRAID_LOG_GRAPH, "Graph: node %d has GPUs not in the local topology; using rank order", node);
    fallback(&info->ring, n, multi, BRAID_GRAPH_PATTERN_RING);
    fallback(&info->tree, n, multi, BRAID_PATTERN_BALANCED_TREE);
    info->host_mode = 0;
    info->cpu_vendor = sys->ncpus > 0 ? sys->nodes[sys->cpus[0]].vendor : BRAID_CPU_VENDOR_OTHER;
    info->cpu_arch = sys->ncpus > 0 ? sys->nodes[sys->cpus[0]].arch : BRAID_CPU_ARCH_X86;
    info->nnics = sys->nnics;
    return ncclSuccess;
  }
  BRAID_CHECK(node_system(sys, host, n, gpus, multi, &sub));
  for (int i = 0; i < n; i++) { /* for NCCL_GRAPH_FILE: each local rank's NVML dev and host */
    devs[i] = host ? i : sys->nodes[sys->gpus[gpus[i]]].dev;
    hosts[i] = host ? 0 : sys->nodes[sys->gpus[gpus[i]]].host;
    local[i] = ranks[local[i]].rank;
  }
  BRAID_CHECK_GOTO(one_graph(sub, 0, BRAID_GRAPH_PATTERN_RING, 1, BRAID_GRAPH_MAX_RINGS, multi, devs, hosts, local,
                             opts, &info->ring),
                   res, out);
  BRAID_CHECK_GOTO(one_graph(sub, 1, BRAID_PATTERN_BALANCED_TREE, info->ring.nchannels, info->ring.nchannels, multi,
                             devs, hosts, local, opts, &info->tree),
                   res, out);
  node_facts(sub, host, known, info);
out:
  braid_topo_free(sub);
  return res;
}

ncclResult_t braid_graph_node_search(const struct braid_topo_system* sys, int nranks,
                                     const struct braid_topo_rank* ranks, int node,
                                     struct braid_graph_node_info* info) {
  return braid_graph_node_search_ex(sys, nranks, ranks, node, NULL, info);
}

ncclResult_t braid_graph_compute_ex(const struct braid_topo_system* sys, int nranks,
                                    const struct braid_topo_rank* ranks, const struct braid_graph_opts* opts,
                                    struct braid_channel_graph** graph_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_graph_node_info* infos = NULL;
  int nnodes = 0;
  if (sys == NULL || ranks == NULL || graph_p == NULL || nranks < 1) {
    BRAID_WARN("braid_graph_compute: bad argument (sys %p, nranks %d, ranks %p, graph_p %p)", (const void*)sys, nranks,
               (const void*)ranks, (void*)graph_p);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_graph_check_ranks(nranks, ranks));
  for (int i = 0; i < nranks; i++)
    if (ranks[i].node + 1 > nnodes) nnodes = ranks[i].node + 1;
  BRAID_CALLOC_GOTO(infos, nnodes, res, out);
  for (int k = 0; k < nnodes; k++) {
    int same = -1; /* a node with the same GPUs as an earlier one has the same channels */
    for (int j = 0; j < k && same < 0; j++) {
      int eq = 1, nj = 0, nk = 0;
      for (int i = 0; i < nranks && eq; i++) {
        nj += ranks[i].node == j;
        nk += ranks[i].node == k;
      }
      eq = nj == nk;
      for (int i = 0; i < nranks && eq; i++)
        for (int q = 0; q < nranks && eq; q++)
          if (ranks[i].node == j && ranks[q].node == k && ranks[i].local_rank == ranks[q].local_rank)
            eq = ranks[i].bus_id == ranks[q].bus_id;
      if (eq) same = j;
    }
    if (same >= 0) {
      memcpy(&infos[k], &infos[same], sizeof(infos[k]));
      continue;
    }
    BRAID_CHECK_GOTO(braid_graph_node_search_ex(sys, nranks, ranks, k, opts, &infos[k]), res, out);
  }
  BRAID_CHECK_GOTO(braid_graph_build(nranks, ranks, infos, graph_p), res, out);
out:
  free(infos);
  return res;
}

ncclResult_t braid_graph_compute(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                 struct braid_channel_graph** graph_p) {
  return braid_graph_compute_ex(sys, nranks, ranks, NULL, graph_p);
}
