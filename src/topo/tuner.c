/*
 * tuner.c - the cost model (tuner.h). At init, for every function x algorithm x protocol,
 * a latency (us) and an algorithm bandwidth (GB/s, 0 = not available) from the graph:
 *
 *   busBw = rings x per-channel speed (intra-node on one node, else the slower of intra/inter)
 *   Ring   LL: min(LL ceiling, busBw/2)   LL128: min(.92 busBw, rings x LL128 per channel)
 *          Simple: busBw;  algBw = busBw x n / nsteps (AllReduce 2(n-1), AG/RS n-1, else n)
 *          lat = base + (nsteps - nInter) x max(intra step, net overhead) + nInter x net step,
 *          net step = the network row (the tree's with one rank per node) + the plugin's
 *          latency of the graph's NICs (x2 for Simple on GPUs: the flush), as NCCL's interLat
 *   Tree   (AllReduce) treeBw = rings x the tree search's speed (intra-node up to 2 nodes,
 *          else the network's; host mode: busBw);
 *          base = min(.92 treeBw, rings x tree per channel); LL base/3.8,
 *          LL128 base x 7/9 (one node) or 120/128; algBw = busBw / 2;
 *          lat = base + 2((ppn-1) x intra step + log2(nodes) x net step)
 *   NVLS / NVLSTree (AllReduce, NVSwitch sm90+), PAT (AllGather/ReduceScatter, one rank per
 *          node): model only, never chosen.
 *
 * Per call: time = lat + bytes / (1000 algBw), with the tree efficiency by size and the ring
 * Simple multi-node plateau (lat x 1.4, x 1.9 before Ampere) on GPUs; in host mode instead the
 * steps' latency grows with the channels the size gets (each is a thread; on a small machine
 * they share cores), measured like the host rows of tuner_tables.h; then channels and threads are
 * trimmed for small sizes (NCCL's thread thresholds). LL128 is on by default only where its
 * 128-byte stores arrive whole: intra-node paths NVL/NVB, network paths PXB (PXN on sm90+),
 * one GPU generation >= sm70; never in host mode unless NCCL_PROTO names it.
 */
#include "topo/tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "plugin/tuner_plugin.h"
#include "topo/tuner_memo.h"
#include "topo/tuner_tables.h"

struct braid_tuner {
  int nranks, nnodes, ppn, host_mode, log;
  /* NCCL_TUNER_PLUGIN's context for this communicator, or NULL (next to `log`: the two fields
   * every call reads, on one line) */
  struct braid_tuner_plugin* plugin;
  int nchannels;         /* of the graph */
  int multi_plateau_old; /* pre-Ampere ring plateau factor */
  float lat[BRAID_NUM_FUNCS][BRAID_NUM_ALGOS][BRAID_NUM_PROTOS];
  float bw[BRAID_NUM_FUNCS][BRAID_NUM_ALGOS][BRAID_NUM_PROTOS]; /* algBw; 0 unavailable */
  /* the part of lat that is the plugin's latency (the wire's: host mode's per-channel core
   * sharing does not scale it) */
  float wire[BRAID_NUM_FUNCS][BRAID_NUM_ALGOS][BRAID_NUM_PROTOS];
  uint8_t algo_on[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX], algo_named[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX];
  uint8_t proto_on[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX], proto_named[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX];
  int max_threads[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS];
  char algo_env[128], proto_env[128];
  size_t lsa_max_bytes;         /* host one-/two-shot all-reduce up to this size; 0: none */
  int lsa_cores;                /* CPUs the ranks' spinning shares */
  int lsa_variant;              /* BRAID_LSA_VARIANT: 0 the cheaper, else enum braid_lsa_mode */
  int lsa_device;               /* the one-/two-shot scratch is device memory (GPUs with P2P) */
  size_t reduce_split_bytes;    /* Ring/Simple Reduces this large take the split schedule; 0: never */
  struct braid_tuner_memo memo; /* braid_tuner_choose's answers per (function, bytes) */
};

static const uint8_t algo_runs[BRAID_NUM_ALGOS] = {
#define BRAID_X(id, name, str, runs) [id] = runs,
    BRAID_ALGOS(BRAID_X)
#undef BRAID_X
};

int braid_tuner_implemented(int algo) {
  return algo >= 0 && algo < BRAID_NUM_ALGOS && algo_runs[algo];
}

void braid_tuner_enable_lsa(struct braid_tuner* t, size_t max_bytes, int ncores) {
  if (t == NULL || !t->host_mode) return;
  t->lsa_max_bytes = max_bytes;
  t->lsa_cores = ncores > 0 ? ncores : 1;
  t->lsa_variant = (int)braid_param_int(BRAID_PARAM_LSA_VARIANT);
  braid_tuner_memo_clear(&t->memo);
}

void braid_tuner_enable_lsa_device(struct braid_tuner* t, size_t max_bytes) {
  if (t == NULL || t->host_mode) return;
  t->lsa_max_bytes = max_bytes;
  t->lsa_cores = 1;
  t->lsa_variant = (int)braid_param_int(BRAID_PARAM_LSA_VARIANT);
  t->lsa_device = 1;
  braid_tuner_memo_clear(&t->memo);
}

/* One-shot / two-shot (tuner_tables.h, LSA block): NCCL_ALGO names them NVLS. */
static int lsa_runs(const struct braid_tuner* t) {
  return t->lsa_max_bytes > 0 && (t->host_mode || t->lsa_device);
}
static int lsa_offered(const struct braid_tuner* t, int f, int a, int p, size_t bytes) {
  return a == BRAID_ALGO_NVLS && p == BRAID_PROTO_SIMPLE && f == BRAID_FUNC_AllReduce && lsa_runs(t) &&
         bytes <= t->lsa_max_bytes && t->algo_on[f][a] && t->proto_on[f][p];
}
static float lsa_time(const struct braid_tuner* t, size_t bytes, int* variant_p) {
  /* host: more ranks than cores, the waits take turns on the cores; device: one block per rank */
  float n = (float)t->nranks, over = n > (float)t->lsa_cores ? n / (float)t->lsa_cores : 1.0f;
  float lat1 = t->lsa_device ? BRAID_TUNER_LSA_DEV_ONESHOT_LAT_US : BRAID_TUNER_LSA_ONESHOT_LAT_US;
  float lat2 = t->lsa_device ? BRAID_TUNER_LSA_DEV_TWOSHOT_LAT_US : BRAID_TUNER_LSA_TWOSHOT_LAT_US;
  float bw = t->lsa_device ? BRAID_TUNER_LSA_DEV_BW : BRAID_TUNER_LSA_BW;
  if (t->lsa_device) over = 1.0f;
  float one = over * lat1 + (float)bytes * (1.0f + n) / (1000.0f * bw);
  float two = over * lat2 + (float)bytes * 3.0f / (1000.0f * bw);
  int v = t->lsa_variant != 0 ? t->lsa_variant : one <= two ? 1 /* BRAID_LSA_ONESHOT */ : 2 /* BRAID_LSA_TWOSHOT */;
  if (variant_p != NULL) *variant_p = v;
  return v == 1 ? one : two;
}

void braid_tuner_set_log(struct braid_tuner* t, int enabled) {
  if (t != NULL) t->log = enabled;
}

/* NCCL's TUNING table at init (rank 0): latency (us) / algorithm bandwidth (GB/s) of every
 * function x algorithm x protocol, three algorithms a block, as ncclTopoTuneModel prints it. */
void braid_tuner_log_model(const struct braid_tuner* t) {
  char line[1024];
  if (t == NULL || !BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_LOG_TUNING)) return;
  for (int block = 0; block < (BRAID_NUM_ALGOS + 2) / 3; block++) {
    int o = snprintf(line, sizeof(line), "  Algorithm   |");
    for (int a = block * 3; a < block * 3 + 3 && a < BRAID_NUM_ALGOS; a++)
      o += snprintf(line + o, sizeof(line) - (size_t)o, " %14s   %14s   %14s |", "", braid_tuner_algo_name(a), "");
    BRAID_INFO(BRAID_LOG_TUNING, "%s", line);
    o = snprintf(line, sizeof(line), "  Protocol    |");
    for (int a = block * 3; a < block * 3 + 3; a++)
      for (int p = 0; p < BRAID_NUM_PROTOS; p++)
        o += snprintf(line + o, sizeof(line) - (size_t)o, " %14s |", braid_tuner_proto_name(p));
    BRAID_INFO(BRAID_LOG_TUNING, "%s", line);
    o = snprintf(line, sizeof(line), " Max NThreads |");
    for (int a = block * 3; a < block * 3 + 3 && a < BRAID_NUM_ALGOS; a++)
      for (int p = 0; p < BRAID_NUM_PROTOS; p++)
        o += snprintf(line + o, sizeof(line) - (size_t)o, " %14d |", t->max_threads[a][p]);
    BRAID_INFO(BRAID_LOG_TUNING, "%s", line);
    for (int f = 0; f < BRAID_NUM_FUNCS; f++) {
      if (f == BRAID_FUNC_SendRecv) continue;
      o = snprintf(line, sizeof(line), "%13s |", braid_tuner_func_name(f));
      for (int a = block * 3; a < block * 3 + 3 && a < BRAID_NUM_ALGOS; a++)
        for (int p = 0; p < BRAID_NUM_PROTOS; p++)
          o += snprintf(line + o, sizeof(line) - (size_t)o, "%8.1f/%6.1f |", (double)t->lat[f][a][p],
                        (double)t->bw[f][a][p]);
      BRAID_INFO(BRAID_LOG_TUNING, "%s", line);
    }
  }
}

void braid_tuner_cap_channels(struct braid_tuner* t, int n) {
  if (t != NULL && n >= 1 && n < t->nchannels) {
    t->nchannels = n;
    braid_tuner_memo_clear(&t->memo);
  }
}

void braid_tuner_free(struct braid_tuner* t) {
  if (t != NULL) braid_tuner_plugin_close(t->plugin);
  free(t);
}

ncclResult_t braid_tuner_attach_plugin(struct braid_tuner* t, uint64_t comm_id) {
  struct braid_tuner_plugin_shape s;
  memset(&s, 0, sizeof(s));
  s.comm_id = comm_id;
  s.nranks = t->nranks;
  s.nnodes = t->nnodes;
  s.nvl_domains = t->nnodes; /* one NVLink domain per node (braid sees no multi-node NVLink) */
  s.min_ranks_per_nvl_domain = s.max_ranks_per_nvl_domain = t->ppn;
  for (int a = 0; a < BRAID_NUM_ALGOS && a < BRAID_TUNER_PLUGIN_ALGOS; a++)
    for (int p = 0; p < BRAID_NUM_PROTOS && p < BRAID_TUNER_PLUGIN_PROTOS; p++) {
      s.base_lat[a][p] = t->host_mode ? braid_tuner_base_lat_host[a][p] : braid_tuner_base_lat[a][p];
      for (int h = 0; h < 3; h++) s.hw_lat[h][a][p] = braid_tuner_hw_lat[h][a][p];
    }
  braid_tuner_memo_clear(&t->memo); /* with a plugin, every call asks it (best_of) */
  return braid_tuner_plugin_open(&s, &t->plugin);
}

struct braid_tuner_plugin* braid_tuner_plugin_of(const struct braid_tuner* t) {
  return t != NULL ? t->plugin : NULL;
}

static int arch_of(const struct braid_channel_graph* g) {
  if (g->host_mode) return BRAID_ARCH_HOST;
  if (g->min_sm >= 100) return BRAID_ARCH_BLACKWELL;
  if (g->min_sm >= 90) return BRAID_ARCH_HOPPER;
  if (g->min_sm >= 80) return BRAID_ARCH_AMPERE;
  return BRAID_ARCH_VOLTA;
}

static float minf(float a, float b) {
  return a < b ? a : b;
}

static int ll128_default(const struct braid_channel_graph* g) {
  int inter_max = g->min_sm >= 90 ? BRAID_PATH_PXN : BRAID_PATH_PXB;
  if (g->host_mode || g->min_sm < 70 || g->min_sm != g->max_sm) return 0;
  if (g->type_intra > BRAID_PATH_NVB) return 0;
  return g->nnodes == 1 || g->type_inter <= inter_max;
}

/* One network step (us), NCCL's interLat: the hardware row (with one rank per node the tree's,
 * every step exposed; not in host mode, whose rows are measured per algorithm) plus the
 * plugin's latency of the graph's NICs, twice for Simple on GPUs (the receive's flush). */
static float net_wire(const struct braid_channel_graph* g, int p, float plugin_lat) {
  return p == BRAID_PROTO_SIMPLE && !g->host_mode ? 2 * plugin_lat : plugin_lat;
}
static float net_step(const struct braid_channel_graph* g, int hw, int a, int p, int ppn, float plugin_lat) {
  int row = !g->host_mode && ppn == 1 ? BRAID_ALGO_TREE : a;
  return braid_tuner_hw_lat[hw][row][p] + net_wire(g, p, plugin_lat);
}

/* The model's latency and bandwidth of every function x algorithm x protocol. */
static void build_model(struct braid_tuner* t, const struct braid_channel_graph* g) {
  int n = t->nranks, nodes = t->nnodes, arch = arch_of(g);
  int ncls = nodes == 1 ? BRAID_NODES_1 : nodes == 2 ? BRAID_NODES_2 : BRAID_NODES_MANY;
  int intra_hw = g->host_mode ? BRAID_HW_SHM : g->type_intra <= BRAID_PATH_NVB ? BRAID_HW_NVLINK : BRAID_HW_PCI;
  int inter_hw = g->host_mode ? BRAID_HW_SOCKET : BRAID_HW_NET;
  /* NCCL takes the intra-node speed up to 2 nodes; braid's search may raise it above the
   * network's, and a ring goes no faster than its slowest hop, so the smaller one. */
  float bus0 = (float)g->nrings * (nodes == 1 ? g->bw_intra : minf(g->bw_intra, g->bw_inter));
  /* The tree runs on the tree search's channels: NCCL prices them at the intra-node speed up
   * to two nodes (its search raises that up to twice the network's), else the network's. Host
   * mode keeps the ring's figure, which its measured tree factor was calibrated against. */
  float tree_bw = nodes <= 2 ? g->tree_bw_intra : g->tree_bw_inter;
  float tree0 = g->host_mode || !(tree_bw > 0) ? bus0 : (float)g->nrings * tree_bw;
  int log2nodes = 0;
  while ((1 << (log2nodes + 1)) <= nodes) log2nodes++;
  int ll128 = ll128_default(g);
  memset(t->lat, 0, sizeof(t->lat));
  memset(t->bw, 0, sizeof(t->bw));
  memset(t->wire, 0, sizeof(t->wire));
  for (int f = 0; f < BRAID_NUM_FUNCS; f++) {
    if (f == BRAID_FUNC_SendRecv) continue;
    int ar = f == BRAID_FUNC_AllReduce;
    int nsteps = ar ? 2 * (n - 1) : (f == BRAID_FUNC_AllGather || f == BRAID_FUNC_ReduceScatter) ? n - 1 : n;
    int ninter = nodes > 1 ? (ar ? 2 * (nodes - 1) : nodes - 1) : 0;
    if (nsteps < 1) nsteps = 1;
    for (int p = 0; p < BRAID_NUM_PROTOS; p++) {
      const float* base =
          g->host_mode ? braid_tuner_base_lat_host[BRAID_ALGO_RING] : braid_tuner_base_lat[BRAID_ALGO_RING];
      int proto_ok = p != BRAID_PROTO_LL128 || ll128 || t->proto_named[f][p];
      /* Ring */
      float intra = braid_tuner_hw_lat[intra_hw][BRAID_ALGO_RING][p];
      float inter = net_step(g, inter_hw, BRAID_ALGO_RING, p, t->ppn, g->latency_inter);
      if (nodes > 1 && !g->host_mode) {
        float ovh = braid_tuner_net_overhead[g->cpu_vendor == BRAID_CPU_VENDOR_AMD] * (p == BRAID_PROTO_SIMPLE ? 3 : 1);
        if (intra < ovh) intra = ovh;
      }
      float bus = bus0;
      if (p == BRAID_PROTO_LL) bus = minf(braid_tuner_ll_max_bw[arch][ncls], bus0 * 0.5f);
      if (p == BRAID_PROTO_LL128) bus = minf(bus0 * 0.92f, (float)g->nrings * braid_tuner_ring_ll128_per_ch[arch]);
      if (proto_ok) {
        t->lat[f][BRAID_ALGO_RING][p] = base[p] + (float)(nsteps - ninter) * intra + (float)ninter * inter;
        t->wire[f][BRAID_ALGO_RING][p] = (float)ninter * net_wire(g, p, g->latency_inter);
        t->bw[f][BRAID_ALGO_RING][p] = bus * (float)n / (float)nsteps;
      }
      /* Tree: AllReduce only */
      if (ar && proto_ok) {
        const float* tb =
            g->host_mode ? braid_tuner_base_lat_host[BRAID_ALGO_TREE] : braid_tuner_base_lat[BRAID_ALGO_TREE];
        float tintra = braid_tuner_hw_lat[intra_hw][BRAID_ALGO_TREE][p];
        float tinter = net_step(g, inter_hw, BRAID_ALGO_TREE, p, t->ppn, g->tree_latency_inter);
        float tbus = minf(tree0 * 0.92f, (float)g->nrings * braid_tuner_tree_per_ch[arch][ncls]);
        if (p == BRAID_PROTO_LL) tbus = minf(tbus / 3.8f, braid_tuner_ll_max_bw[arch][ncls]);
        if (p == BRAID_PROTO_LL128) tbus = tbus * (nodes == 1 ? 7.0f / 9.0f : 120.0f / 128.0f);
        t->lat[f][BRAID_ALGO_TREE][p] = tb[p] + 2.0f * ((float)(t->ppn - 1) * tintra + (float)log2nodes * tinter);
        t->wire[f][BRAID_ALGO_TREE][p] = 2.0f * (float)log2nodes * net_wire(g, p, g->tree_latency_inter);
        t->bw[f][BRAID_ALGO_TREE][p] = tbus * (g->host_mode ? BRAID_TUNER_TREE_BW_HOST : 0.5f);
        /* Host mode, two ranks: the tree is the ring's own two hops (reduce up, broadcast down)
         * and small messages take the one-hop exchange (plan.c), which the per-step figures
         * above do not describe: measured over sockets, 8 B tree 10.5 us, ring 5.6-6.2 us.
         * Only a tree the user asks for by name runs there. */
        if (g->host_mode && n == 2 && !t->algo_named[f][BRAID_ALGO_TREE]) t->bw[f][BRAID_ALGO_TREE][p] = 0;
      }
    }
    /* model only: NVLS (one node) and NVLSTree (several), Simple */
    if (ar && g->nvls && braid_tuner_nvls_eff[arch] > 0) {
      float nvls_bw = g->nvl_bw * braid_tuner_nvls_eff[arch];
      if (nodes == 1) {
        t->lat[f][BRAID_ALGO_NVLS][BRAID_PROTO_SIMPLE] =
            braid_tuner_hw_lat[BRAID_HW_NVLINK][BRAID_ALGO_NVLS][BRAID_PROTO_SIMPLE];
        t->bw[f][BRAID_ALGO_NVLS][BRAID_PROTO_SIMPLE] = nvls_bw;
      } else {
        float tree_bw = t->bw[f][BRAID_ALGO_TREE][BRAID_PROTO_SIMPLE];
        t->lat[f][BRAID_ALGO_NVLS_TREE][BRAID_PROTO_SIMPLE] =
            braid_tuner_hw_lat[BRAID_HW_NVLINK][BRAID_ALGO_NVLS_TREE][BRAID_PROTO_SIMPLE] +
            2.0f * (float)log2nodes *
                net_step(g, BRAID_HW_NET, BRAID_ALGO_NVLS_TREE, BRAID_PROTO_SIMPLE, 0, g->tree_latency_inter);
        t->bw[f][BRAID_ALGO_NVLS_TREE][BRAID_PROTO_SIMPLE] = minf(nvls_bw, tree_bw > 0 ? tree_bw : nvls_bw);
      }
    }
    /* model only: PAT, one rank per node, AllGather/ReduceScatter, Simple */
    if ((f == BRAID_FUNC_AllGather || f == BRAID_FUNC_ReduceScatter) && !g->host_mode && t->ppn == 1 && nodes > 1 &&
        braid_param_int(BRAID_PARAM_PAT_ENABLE) != 0) {
      int log2n = 0;
      while ((1 << (log2n + 1)) <= n) log2n++;
      t->lat[f][BRAID_ALGO_PAT][BRAID_PROTO_SIMPLE] =
          braid_tuner_base_lat[BRAID_ALGO_PAT][BRAID_PROTO_SIMPLE] +
          (float)log2n * braid_tuner_hw_lat[BRAID_HW_NET][BRAID_ALGO_PAT][BRAID_PROTO_SIMPLE];
      t->bw[f][BRAID_ALGO_PAT][BRAID_PROTO_SIMPLE] = bus0 * 0.75f * (float)n / (float)nsteps;
    }
  }
  /* NCCL_ALGO / NCCL_PROTO */
  for (int f = 0; f < BRAID_NUM_FUNCS; f++)
    for (int a = 0; a < BRAID_NUM_ALGOS; a++)
      for (int p = 0; p < BRAID_NUM_PROTOS; p++)
        if (!t->algo_on[f][a] || !t->proto_on[f][p]) t->bw[f][a][p] = 0;
}

static int threads_param(enum braid_param id, int def) {
  int64_t v = braid_param_int(id);
  if (v == BRAID_PARAM_UNSET || v < 64 || v > 1024 || v % 32 != 0) return def;
  return (int)v;
}

ncclResult_t braid_tuner_init(const struct braid_channel_graph* g, int nranks, int nnodes, struct braid_tuner** t_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_tuner* t = NULL;
  if (g == NULL || t_p == NULL || nranks < 1 || nnodes < 1 || nnodes > nranks) {
    BRAID_WARN("braid_tuner_init: bad argument (graph %p, nranks %d, nnodes %d)", (const void*)g, nranks, nnodes);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(t, 1, res, err);
  t->nranks = nranks;
  t->nnodes = nnodes;
  t->ppn = g->ppn > 0 ? g->ppn : (nranks + nnodes - 1) / nnodes;
  t->host_mode = g->host_mode;
  t->nchannels = g->nchannels;
  t->multi_plateau_old = !g->host_mode && g->min_sm < 80;
  t->log = 1;
  /* The split Reduce (algo/ring.h) is two ranks' only; the executors run it where the
   * connections are direct shm (kernels/direct.h braid_direct_pair), the chain elsewhere. */
  if (g->host_mode && nranks == 2 && nnodes == 1) {
    int64_t v = braid_param_int(BRAID_PARAM_REDUCE_SPLIT_BYTES);
    t->reduce_split_bytes = v > 0 ? (size_t)v : 0;
  }
  const char* algo = braid_param_str(BRAID_PARAM_ALGO);
  const char* proto = braid_param_str(BRAID_PARAM_PROTO);
  snprintf(t->algo_env, sizeof(t->algo_env), "%s", algo ? algo : "");
  snprintf(t->proto_env, sizeof(t->proto_env), "%s", proto ? proto : "");
  BRAID_CHECK_GOTO(braid_tuner_parse_list(algo, BRAID_TUNER_LIST_ALGO, "NCCL_ALGO", t->algo_on, t->algo_named), res,
                   err_free);
  BRAID_CHECK_GOTO(braid_tuner_parse_list(proto, BRAID_TUNER_LIST_PROTO, "NCCL_PROTO", t->proto_on, t->proto_named),
                   res, err_free);
  int nt = threads_param(BRAID_PARAM_NTHREADS, 0), nt128 = threads_param(BRAID_PARAM_LL128_NTHREADS, 0);
  for (int a = 0; a < BRAID_NUM_ALGOS; a++)
    for (int p = 0; p < BRAID_NUM_PROTOS; p++) {
      int v = braid_tuner_max_threads[a][p];
      if (p == BRAID_PROTO_LL128 && nt128) v = nt128;
      if (p != BRAID_PROTO_LL128 && nt) v = nt;
      /* a ring of slow channels does not need a full block of copiers (NCCL: 256) */
      if (a == BRAID_ALGO_RING && p == BRAID_PROTO_SIMPLE && !nt && g->bw_intra * (float)g->nrings <= 12.0f) v = 256;
      t->max_threads[a][p] = g->host_mode ? 1 : v;
    }
  build_model(t, g);
  braid_tuner_memo_clear(&t->memo); /* empty already: starts the epoch (braid_tuner_epoch) */
  *t_p = t;
  return ncclSuccess;
err_free:
  free(t);
err:
  return res;
}

/* Host mode: channels for `bytes`, one more per BRAID_TUNER_HOST_BYTES_PER_CHANNEL. */
static int host_channels(const struct braid_tuner* t, size_t bytes) {
  int nc = t->nchannels;
  while (nc > 1 && bytes < (size_t)nc * BRAID_TUNER_HOST_BYTES_PER_CHANNEL) nc--;
  return nc;
}

static float model_time(const struct braid_tuner* t, int f, int a, int p, size_t bytes) {
  float bw = t->bw[f][a][p], lat = t->lat[f][a][p];
  if (a == BRAID_ALGO_NVLS && (t->host_mode || t->lsa_device))
    return lsa_offered(t, f, a, p, bytes) ? lsa_time(t, bytes, NULL) : -1.0f;
  if (bw <= 0) return -1.0f;
  if (t->host_mode) {
    /* the steps (all but the call's own cost) slow down with the channel threads sharing cores */
    float base = braid_tuner_base_lat_host[a][p];
    int nc = host_channels(t, bytes);
    float wire = t->wire[f][a][p];
    lat = base + (lat - base - wire) * (1.0f + BRAID_TUNER_HOST_CHANNEL_STEP_SHARE * (float)(nc - 1)) + wire;
  }
  if (a == BRAID_ALGO_TREE && !t->host_mode) {
    int b = 0;
    for (size_t s = bytes >> 6; s > 1 && b < BRAID_TUNER_TREE_BUCKETS - 1; s >>= 1) b++;
    bw *= braid_tuner_tree_corr[p][b];
  }
  if (a == BRAID_ALGO_RING && p == BRAID_PROTO_SIMPLE && t->nnodes > 1 && f == BRAID_FUNC_AllReduce && !t->host_mode &&
      bytes / ((size_t)t->nchannels * (size_t)t->nranks) >= 64)
    lat *= t->multi_plateau_old ? 1.9f : 1.4f;
  return lat + (float)bytes / (1000.0f * bw);
}

float braid_tuner_predict(const struct braid_tuner* t, int func, int algo, int proto, size_t bytes) {
  if (t == NULL || func < 0 || func >= BRAID_NUM_FUNCS || algo < 0 || algo >= BRAID_NUM_ALGOS || proto < 0 ||
      proto >= BRAID_NUM_PROTOS)
    return -1.0f;
  return model_time(t, func, algo, proto, bytes);
}

/* Channels and threads for one op: fewer channels, then fewer threads, for small sizes. */
static void size_op(const struct braid_tuner* t, int a, int p, size_t bytes, struct braid_tuner_choice* c) {
  int nc = t->nchannels, nt = t->max_threads[a][p];
  if (t->host_mode) {
    nc = host_channels(t, bytes);
  } else {
    size_t thr =
        (size_t)braid_tuner_thread_threshold[p] * (a == BRAID_ALGO_RING && p == BRAID_PROTO_LL ? (size_t)t->nranks : 1);
    while (bytes < (size_t)nc * (size_t)nt * thr) {
      if (nc >= 2)
        nc--;
      else if (nt % 128 == 0)
        nt /= 2;
      else
        break;
    }
    if (a == BRAID_ALGO_RING && p == BRAID_PROTO_SIMPLE) nt += 32; /* one warp more for synchronisation */
    if (nt < 96) nt = 96;
  }
  c->nchannels = nc;
  c->nthreads = nt;
}

/* The model's costs of every pair (-1: not allowed, or not implemented when asked). */
static void cost_table(const struct braid_tuner* t, int func, size_t bytes, int implemented_only,
                       float cost[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS]) {
  for (int a = 0; a < BRAID_NUM_ALGOS; a++)
    for (int p = 0; p < BRAID_NUM_PROTOS; p++)
      cost[a][p] = implemented_only && !braid_tuner_implemented(a) && !(a == BRAID_ALGO_NVLS && t->lsa_max_bytes)
                       ? -1.0f
                       : model_time(t, func, a, p, bytes);
}

static struct braid_tuner_choice cheapest(float cost[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS]) {
  struct braid_tuner_choice best = {-1, -1, 0, 0, -1.0f, 0};
  for (int a = 0; a < BRAID_NUM_ALGOS; a++)
    for (int p = 0; p < BRAID_NUM_PROTOS; p++)
      if (cost[a][p] >= 0 && (best.time_us < 0 || cost[a][p] < best.time_us)) {
        best.algo = a;
        best.proto = p;
        best.time_us = cost[a][p];
      }
  return best;
}

/* NCCL_TUNER_PLUGIN, when one is loaded: it sees the costs of what braid can run here and may
 * change them and the channel count (plugin/tuner_plugin.h validates what comes back). */
static void plugin_choice(const struct braid_tuner* t, int func, size_t bytes,
                          float cost[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS], struct braid_tuner_choice* best) {
  int nch = best->nchannels;
  if (!braid_tuner_plugin_apply(t->plugin, func, bytes, cost, &nch, t->nchannels)) return;
  struct braid_tuner_choice tuned = cheapest(cost);
  if (tuned.algo < 0) {
    BRAID_INFO(BRAID_LOG_TUNING, "TUNER/Plugin: %s left %s no algorithm and protocol; braid's choice is kept",
               braid_tuner_plugin_name(t->plugin), braid_tuner_func_name(func));
    return;
  }
  if (tuned.algo != best->algo || tuned.proto != best->proto) {
    size_op(t, tuned.algo, tuned.proto, bytes, &tuned);
  } else {
    tuned.nchannels = best->nchannels;
    tuned.nthreads = best->nthreads;
  }
  if (nch != best->nchannels) tuned.nchannels = nch;
  tuned.time_us = model_time(t, func, tuned.algo, tuned.proto, bytes); /* the model's prediction */
  *best = tuned;
}

static ncclResult_t best_of(const struct braid_tuner* t, int func, size_t bytes, int implemented_only,
                            struct braid_tuner_choice* out) {
  float cost[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS];
  if (t == NULL || out == NULL || func < 0 || func >= BRAID_NUM_FUNCS || func == BRAID_FUNC_SendRecv) {
    BRAID_WARN("braid_tuner_choose: bad argument (tuner %p, func %d)", (const void*)t, func);
    return ncclInvalidArgument;
  }
  cost_table(t, func, bytes, implemented_only, cost);
  struct braid_tuner_choice best = cheapest(cost);
  if (best.algo < 0) {
    BRAID_WARN("Error : no algorithm/protocol available for function %s.%s%s%s%s%s", braid_tuner_func_name(func),
               t->algo_env[0] ? " NCCL_ALGO was set to " : "", t->algo_env, t->algo_env[0] ? "." : "",
               t->proto_env[0] ? " NCCL_PROTO was set to " : "", t->proto_env[0] ? t->proto_env : "");
    return ncclInvalidUsage;
  }
  size_op(t, best.algo, best.proto, bytes, &best);
  if (implemented_only) plugin_choice(t, func, bytes, cost, &best);
  if (best.algo == BRAID_ALGO_NVLS && lsa_runs(t)) {
    lsa_time(t, bytes, &best.variant);
    best.nchannels = 1; /* the calling thread (host) or one block (device) does it all */
  }
  if (func == BRAID_FUNC_Reduce && best.algo == BRAID_ALGO_RING && best.proto == BRAID_PROTO_SIMPLE &&
      t->reduce_split_bytes > 0 && bytes >= t->reduce_split_bytes)
    best.variant = BRAID_TUNER_REDUCE_SPLIT;
  *out = best;
  return ncclSuccess;
}

uint32_t braid_tuner_epoch(const struct braid_tuner* t) {
  if (t == NULL || t->plugin != NULL || (t->log && BRAID_LOG_ENABLED(BRAID_LOG_INFO, BRAID_LOG_TUNING))) return 0;
  return __atomic_load_n(&t->memo.epoch, __ATOMIC_ACQUIRE);
}

ncclResult_t braid_tuner_choose(const struct braid_tuner* t, int func, size_t bytes, struct braid_tuner_choice* out) {
  /* the memo is the tuner's own cache: logically const (tuner_memo.h) */
  int memo = t != NULL && out != NULL && t->plugin == NULL;
  if (!memo || !braid_tuner_memo_get(&t->memo, func, bytes, out)) {
    BRAID_CHECK(best_of(t, func, bytes, 1, out));
    if (memo) braid_tuner_memo_put((struct braid_tuner_memo*)&t->memo, func, bytes, out);
  }
  if (t->log)
    BRAID_INFO(BRAID_LOG_TUNING, "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}%s",
               braid_tuner_func_name(func), (long)bytes, braid_tuner_algo_name(out->algo),
               braid_tuner_proto_name(out->proto), 0, out->nchannels - 1,
               out->algo != BRAID_ALGO_NVLS ? (out->variant == BRAID_TUNER_REDUCE_SPLIT ? " (split)" : "")
               : out->variant == 1          ? " (one-shot)"
               : out->variant == 2          ? " (two-shot)"
                                            : "");
  return ncclSuccess;
}

ncclResult_t braid_tuner_model_best(const struct braid_tuner* t, int func, size_t bytes,
                                    struct braid_tuner_choice* out) {
  return best_of(t, func, bytes, 0, out);
}
