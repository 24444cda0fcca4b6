/*
 * search.c - NCCL's channel search (src/graph/search.cc, ncclTopoCompute and what it calls),
 * re-implemented from its behaviour on braid's system graph (search.h).
 *
 * A channel is found depth first: from a NIC (several nodes) or a GPU (one node) through
 * every GPU of the node, each hop reserving the channel's speed on every link of its path
 * (PCIe through an Intel CPU costs 6/5; towards a pre-Ampere GPU from a non-GPU, and on
 * NVLink to a POWER CPU, the reverse direction is charged too). The next GPU is chosen by
 * score (NIC bandwidth and hops, then NVLink bandwidth and hops, then index order; on an
 * NVSwitch only the neighbours by index). Channel after channel until the most channels
 * (32) or the step budget; a candidate result replaces the saved one when it has more
 * channels x speed, or the same with fewer hops.
 *
 * ncclTopoCompute: starting from the fastest speed the links allow, pass 1 tries in turn:
 * different channels instead of identical ones, a plain tree (sm90+), a worse intra-node
 * and network path type, changing NICs (NCCL_CROSS_NIC=2), then the next lower speed, but
 * only while it is more than .49 of the best found; then channels are doubled at half
 * speed when fast (>= 25 GB/s; not on sm80+ with < 50 GB/s and > 4 channels); pass 2
 * raises the speed with the channel count fixed (rings: both speeds; trees: the intra-node
 * one up to twice the network's). Nothing found: one channel in index order at 0.1 GB/s.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "topo/search_int.h"

#define SEARCH_GLOBAL_TIMEOUT (1LL << 19)
#define SEARCH_TIMEOUT (1 << 14)
#define SEARCH_TIMEOUT_TREE (1 << 14)
#define SEARCH_TIMEOUT_SAME (1 << 8)
#define FORCED_PCI 1
#define FORCED_REPLAY 2

/* ---- the recursion -------------------------------------------------------------------- */

struct run {
  struct ssys* s;
  struct braid_search_graph* save;
};

static ncclResult_t search_rec(struct run* r, struct braid_search_graph* g, int* time);
static ncclResult_t rec_gpu(struct run* r, struct braid_search_graph* g, int gpu, int step, int back_net,
                            int back_first, int forced, int* time);

static int gpu_of_rank(const struct ssys* s, int rank) {
  for (int g = 0; g < s->ngpus; g++)
    if (s->rank[g] == rank) return g;
  return -1;
}

/* The GPU of the previous channel's step+1 (NCCL's ncclTopoReplayGetGpu). */
static int replay_gpu(const struct ssys* s, const struct braid_search_graph* g, int step) {
  if (g->nchannels == 0) return -1;
  return gpu_of_rank(s, g->intra[(g->nchannels - 1) * s->ngpus + step + 1]);
}

static void compare(const struct braid_search_graph* g, const struct braid_search_graph* ref, int* copy) {
  if (g->nchannels < g->min_channels) return;
  float a = (float)g->nchannels * g->bw_intra, b = (float)ref->nchannels * ref->bw_intra;
  if (a > b) {
    *copy = 1;
    return;
  }
  if (a < b) return;
  if (g->pattern == ref->pattern && g->cross_nic == ref->cross_nic && g->nhops < ref->nhops) *copy = 1;
}

static ncclResult_t try_gpu(struct run* r, struct braid_search_graph* g, int step, int back_net, int back_first,
                            int forced, int* time, int t1, int i1, int next) {
  struct ssys* s = r->s;
  uint64_t flag = 1ULL << g->nchannels;
  if (next < 0 || !braid_search_follow(s, g, t1, i1, T_GPU, next, 1)) return ncclSuccess;
  s->used[next] ^= flag;
  ncclResult_t res = rec_gpu(r, g, next, step, back_net, back_first, forced, time);
  s->used[next] ^= flag;
  braid_search_follow(s, g, t1, i1, T_GPU, next, -1);
  return res;
}

/* NCCL scores whole GB/s; a file's absurd bandwidth saturates instead of overflowing. */
static int bw_int(float x) {
  return x >= 1e9f ? 1000000000 : x <= -1e9f ? -1000000000 : (int)x;
}

static int pci_bw_of(const struct ssys* s, int g) {
  const struct braid_topo_node* n = &s->sys->nodes[s->gpu[g]];
  for (int l = 0; l < n->nlinks; l++) {
    const struct braid_topo_link* up = &n->links[l];
    if (up->kind != BRAID_LINK_PCI) continue;
    const struct braid_topo_node* p = &s->sys->nodes[up->remote];
    for (int k = 0; k < p->nlinks; k++)
      if (p->links[k].remote == s->gpu[g]) return bw_int(up->bw < p->links[k].bw ? up->bw : p->links[k].bw);
  }
  return -1;
}

struct score {
  int g, start, intra_hops, intra_bw, inter_hops, inter_pci, inter_bw;
};

#define CMP(a, b) (((a) > (b)) - ((a) < (b)))
static int cmp_score(const void* a, const void* b) {
  const struct score *x = a, *y = b;
  if (y->inter_bw != x->inter_bw) return CMP(y->inter_bw, x->inter_bw);
  if (y->inter_pci != x->inter_pci) return CMP(y->inter_pci, x->inter_pci);
  if (x->inter_hops != y->inter_hops) return CMP(x->inter_hops, y->inter_hops);
  if (y->intra_bw != x->intra_bw) return CMP(y->intra_bw, x->intra_bw);
  if (x->intra_hops != y->intra_hops) return CMP(x->intra_hops, y->intra_hops);
  return CMP(x->start, y->start);
}
#undef CMP

/* NCCL's ncclTopoSearchNextGpuSort: the GPUs to try after gpu, best first. Not inlined:
 * its score table stays off the recursion's frames. */
__attribute__((noinline)) static int next_gpus(const struct ssys* s, const struct braid_search_graph* g, int gpu,
                                               int sort_net, int* next) {
  struct score sc[256];
  uint64_t flag = 1ULL << g->nchannels;
  int count = 0, n = s->ngpus;
  int net = sort_net ? g->inter[g->nchannels * 2] : -1;
  for (int i = 1; i < n; i++) {
    int k = (gpu + i) % n;
    const struct spath* p = &s->gg[gpu * n + k];
    if (p->count == 0 || (s->used[k] & flag)) continue;
    memset(&sc[count], 0, sizeof(sc[count]));
    sc[count].g = k;
    sc[count].start = i;
    sc[count].intra_hops = p->count;
    sc[count].intra_bw = bw_int(p->bw);
    if (net >= 0) {
      const struct spath* np = &s->ng[net * n + k];
      sc[count].inter_hops = np->count;
      sc[count].inter_pci = pci_bw_of(s, k);
      sc[count].inter_bw = bw_int(np->bw);
    }
    count++;
  }
  qsort(sc, (size_t)count, sizeof(sc[0]), cmp_score);
  int same = 1;
  for (int i = 1; i < count; i++) same &= sc[i].intra_bw == sc[0].intra_bw && sc[i].intra_hops == sc[0].intra_hops;
  for (int i = 0; i < count; i++) next[i] = sort_net == -1 && same ? sc[count - 1 - i].g : sc[i].g;
  if (!s->nvs) return count;
  /* NVSwitches prefer few peers: the neighbours by index first, and only them */
  int prev = (gpu - 1 + n) % n, nxt = (gpu + 1) % n, first[2], nfirst, real = 0;
  if (g->pattern == BRAID_PATTERN_RING) {
    first[0] = nxt, first[1] = prev, nfirst = 2;
  } else if (g->pattern == BRAID_PATTERN_SPLIT_TREE || g->pattern == BRAID_PATTERN_BALANCED_TREE) {
    first[0] = prev, first[1] = nxt, nfirst = 2;
  } else {
    first[0] = nxt, nfirst = 1;
  }
  if (nxt == prev && nfirst == 2) nfirst = 1;
  for (int f = 0; f < nfirst; f++) {
    int i = 0;
    while (i < count && next[i] != first[f]) i++;
    if (i < count) {
      for (; i > 0; i--) next[i] = next[i - 1];
      next[0] = first[f];
      real++;
    }
  }
  return real;
}

/* Back to a NIC from GPU gpu at `step` (NCCL's step == backToNet branch). */
__attribute__((noinline)) static ncclResult_t back_to_net(struct run* r, struct braid_search_graph* g, int gpu,
                                                          int step, int back_first, int forced, int* time) {
  struct ssys* s = r->s;
  int nets[256], start = g->inter[g->nchannels * 2];
  int count = braid_search_select_nets(s, g->type_inter, gpu, nets);
  for (int i = 0; i < count; i++) {
    int n = nets[i], next_back = -1;
    if (!braid_search_check_net(s, g, start, n, step)) continue;
    float save = g->bw_inter;
    if (g->pattern == BRAID_PATTERN_BALANCED_TREE) { /* half of the bandwidth on each of the first two GPUs */
      if (step == 0) next_back = 1;
      g->bw_inter /= 2;
    }
    int ok = braid_search_follow(s, g, T_GPU, gpu, T_NET, n, 1);
    g->bw_inter = save;
    if (!ok) continue;
    g->inter[g->nchannels * 2 + 1] = n;
    BRAID_CHECK(rec_gpu(r, g, gpu, step, next_back, back_first, forced, time));
    if (g->pattern == BRAID_PATTERN_BALANCED_TREE) g->bw_inter /= 2;
    braid_search_follow(s, g, T_GPU, gpu, T_NET, n, -1);
    g->bw_inter = save;
  }
  return ncclSuccess;
}

static ncclResult_t rec_gpu(struct run* r, struct braid_search_graph* g, int gpu, int step, int back_net,
                            int back_first, int forced, int* time) {
  struct ssys* s = r->s;
  int n = s->ngpus;
  if (*time <= 0) return ncclSuccess;
  (*time)--;
  if (step == n) { /* a channel is complete */
    int copy = 0;
    g->nchannels++;
    compare(g, r->save, &copy);
    if (copy) {
      memcpy(r->save, g, sizeof(*g));
      if (g->nchannels == g->max_channels) *time = -1;
    }
    if (g->nchannels < g->max_channels) BRAID_CHECK(search_rec(r, g, time));
    g->nchannels--;
    return ncclSuccess;
  }
  g->intra[g->nchannels * n + step] = s->rank[gpu];
  if (step == back_net) {
    if (s->inter) BRAID_CHECK(back_to_net(r, g, gpu, step, back_first, forced, time));
  } else if (step < n - 1) {
    int next[256], count;
    if (forced == FORCED_PCI) {
      next[0] = step + 1;
      count = 1;
    } else if (forced == FORCED_REPLAY) {
      next[0] = replay_gpu(s, g, step);
      count = 1;
    } else {
      count = next_gpus(s, g, gpu, back_net == -1 ? 0 : back_net == step + 1 ? 1 : -1, next);
    }
    for (int i = 0; i < count; i++)
      BRAID_CHECK(try_gpu(r, g, step + 1, back_net, back_first, forced, time, T_GPU, gpu, next[i]));
  } else if (step == back_first) { /* close the ring */
    int p = gpu_of_rank(s, g->intra[g->nchannels * n]);
    if (p >= 0 && braid_search_follow(s, g, T_GPU, gpu, T_GPU, p, 1)) {
      BRAID_CHECK(rec_gpu(r, g, p, step + 1, back_net, -1, forced, time));
      braid_search_follow(s, g, T_GPU, gpu, T_GPU, p, -1);
    }
  } else {
    BRAID_CHECK(rec_gpu(r, g, gpu, n, -1, -1, forced, time));
  }
  return ncclSuccess;
}

static void search_params(const struct ssys* s, int pattern, int* back_net, int* back_first) {
  if (s->inter) {
    *back_net = pattern == BRAID_PATTERN_RING ? s->ngpus - 1 : pattern == BRAID_PATTERN_SPLIT_TREE ? 1 : 0;
    *back_first = -1;
  } else {
    *back_net = -1;
    *back_first = pattern == BRAID_PATTERN_RING ? s->ngpus - 1 : -1;
  }
}

/* The GPUs a NIC reaches best (NCCL's ncclTopoGetLocal from the NIC); *type_p: their path type. */
static int local_gpus(const struct ssys* s, int n, int* out, int* type_p) {
  float best = 0;
  int type = BRAID_PATH_DIS, count = 0;
  for (int g = 0; g < s->ngpus; g++) {
    const struct spath* p = &s->ng[n * s->ngpus + g];
    if (p->bw > best || (p->bw == best && p->type < type)) {
      best = p->bw;
      type = p->type;
      count = 0;
    }
    if (p->bw == best && p->type == type) out[count++] = g;
  }
  *type_p = type;
  return count;
}

static void net_take(struct ssys* s, int n, float bw) {
  const struct braid_topo_node* x = &s->sys->nodes[s->net[n]];
  for (int i = 0; i < s->nnets; i++) {
    const struct braid_topo_node* y = &s->sys->nodes[s->net[i]];
    if (y->guid == x->guid && y->port == x->port) s->net_bw[i] -= bw; /* ports of one NIC share it */
  }
}

static ncclResult_t rec_net(struct run* r, struct braid_search_graph* g, int back_net, int back_first, int* time) {
  struct ssys* s = r->s;
  const int bw = (int)g->bw_inter; /* NCCL counts whole GB/s here */
  int nets[256];
  int count = braid_search_select_nets(s, g->type_inter, -1, nets);
  for (int i = 0; i < count; i++) {
    int n = nets[(g->nchannels + i) % count];
    if (s->net_bw[n] < (float)bw) continue;
    if (g->pattern == BRAID_PATTERN_RING && g->cross_nic == 2 && (g->nchannels & 1) &&
        n != g->inter[(g->nchannels - 1) * 2 + 1])
      continue;
    g->inter[g->nchannels * 2] = n;
    g->latency_inter = s->sys->nodes[s->net[n]].latency;
    net_take(s, n, (float)bw);
    if (g->nchannels > 0 && g->same_channels == 1) { /* replay the last channel */
      BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, FORCED_REPLAY, time, T_NET, n, replay_gpu(s, g, -1)));
    } else {
      if (g->nchannels == 0 && !s->nvs) { /* the PCI order first, as a reference, on a small budget */
        int t = 1 << 10;
        BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, FORCED_PCI, &t, T_NET, n, 0));
        if (t == -1) *time = -1;
      }
      int lg = s->local_gpu[n], locals[256], type;
      if (lg >= 0) BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, 0, time, T_NET, n, lg));
      int nl = local_gpus(s, n, locals, &type);
      if (type == BRAID_PATH_DIS) continue; /* NCCL skips the NIC without giving its bandwidth back */
      for (int k = 0; k < nl; k++)
        if (locals[k] != lg) BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, 0, time, T_NET, n, locals[k]));
    }
    net_take(s, n, (float)-bw);
  }
  return ncclSuccess;
}

static ncclResult_t search_rec(struct run* r, struct braid_search_graph* g, int* time) {
  struct ssys* s = r->s;
  int back_net, back_first;
  search_params(s, g->pattern, &back_net, &back_first);
  if (s->inter) return rec_net(r, g, back_net, back_first, time);
  if (g->nchannels == 0) {
    BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, FORCED_PCI, time, T_NONE, -1, 0));
  } else {
    BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, FORCED_REPLAY, time, T_NONE, -1, replay_gpu(s, g, -1)));
  }
  if (g->same_channels == 0 || g->nchannels == 0)
    for (int k = 0; k < s->ngpus; k++) BRAID_CHECK(try_gpu(r, g, 0, back_net, back_first, 0, time, T_NONE, -1, k));
  return ncclSuccess;
}

/* ---- ncclTopoCompute ------------------------------------------------------------------ */

static void path_range(const struct ssys* s, int nets, int* lo, int* hi) {
  int mn = BRAID_PATH_SYS, mx = BRAID_PATH_LOC;
  for (int a = 0; a < s->ngpus; a++) {
    int to = nets ? s->nnets : s->ngpus;
    for (int b = 0; b < to; b++) {
      if (!nets && a == b) continue;
      int t = nets ? s->gn[a * s->nnets + b].type : s->gg[a * s->ngpus + b].type;
      if (t < mn) mn = t;
      if (t > mx) mx = t;
    }
  }
  *lo = mn;
  *hi = mx;
}

/* Two NVLink islands joined by something slower (NCCL's ncclTopoSplitNvLink). */
static int split_nvlink(const struct ssys* s) {
  int dom[256], cnt[256] = {0}, n = 0;
  for (int g = 0; g < s->ngpus; g++) dom[g] = g;
  for (int g = 0; g < s->ngpus; g++)
    for (int p = g + 1; p < s->ngpus; p++)
      if (s->gg[g * s->ngpus + p].type == BRAID_PATH_NVL) dom[p] = dom[g];
  for (int g = 0; g < s->ngpus; g++) cnt[dom[g]]++;
  for (int g = 0; g < s->ngpus; g++) n += cnt[g] > 1;
  return n == 2;
}

/* NCCL's ncclTopoDupChannels: fast channels become twice as many at half the speed. */
static void dup_channels(struct braid_search_graph* g, int cc) {
  if (g->nchannels == 0 || g->pattern == BRAID_PATTERN_NVLS || g->bw_intra < 25.0f) return;
  if (cc > 80 && g->bw_intra < 50.0f && g->nchannels > 4) return;
  int dup = g->nchannels * 2 < g->max_channels ? g->nchannels * 2 : g->max_channels;
  memcpy(&g->intra[g->nchannels * g->ngpus], g->intra, (size_t)(dup - g->nchannels) * g->ngpus * sizeof(int));
  memcpy(&g->inter[g->nchannels * 2], g->inter, (size_t)(dup - g->nchannels) * 2 * sizeof(int));
  int div = (dup + g->nchannels - 1) / g->nchannels;
  g->bw_intra /= (float)div;
  g->bw_inter /= (float)div;
  g->nchannels = dup;
}

struct compute {
  struct ssys* s;
  struct braid_search_graph *g, *tmp;
  const struct speeds* sp;
  int cc, cross_nic, min_intra, max_intra, min_inter, max_inter, same;
};

/* Pass 1's next try after a search that was not good enough; 0: none left. */
static int pass1_next(struct compute* c, int* speed, int time, int64_t* global) {
  struct braid_search_graph *g = c->g, *t = c->tmp;
  struct ssys* s = c->s;
  if (t->same_channels == 1 && !(s->cpu_arch == BRAID_CPU_ARCH_X86 && s->cpu_vendor == BRAID_CPU_VENDOR_AMD &&
                                 t->type_intra == BRAID_PATH_SYS)) {
    t->same_channels = 0; /* different channels */
    return 1;
  }
  t->same_channels = c->same;
  if (time != -1)
    *global += time;
  else
    *global = SEARCH_GLOBAL_TIMEOUT;
  if (*global < 0 && g->nchannels) return 0;
  if (c->cc >= 90 && t->pattern == BRAID_PATTERN_BALANCED_TREE) { /* a simpler tree */
    t->pattern = BRAID_PATTERN_TREE;
    return 1;
  }
  t->pattern = g->pattern;
  int max_intra = s->inter ? t->type_inter : c->max_intra;
  if (t->type_intra < max_intra && (g->nchannels == 0 || t->type_intra < g->type_intra)) {
    t->type_intra++;
    if (t->type_intra < BRAID_PATH_DIS) return 1;
  }
  t->type_intra = c->min_intra;
  if (s->inter && t->type_inter < c->max_inter &&
      (g->nchannels == 0 || t->type_inter < g->type_inter || t->type_inter < BRAID_PATH_PXN)) {
    t->type_inter++;
    if (t->type_inter < BRAID_PATH_DIS) return 1;
  }
  t->type_inter = c->min_inter;
  if (c->cross_nic == 2 && t->cross_nic == 0 &&
      (g->pattern == BRAID_PATTERN_RING || g->pattern == BRAID_PATTERN_BALANCED_TREE)) {
    t->cross_nic = 2; /* change NICs if that finds more */
    return 1;
  }
  t->cross_nic = c->cross_nic == 1;
  if (*speed < c->sp->n - 1 && (g->nchannels == 0 || c->sp->v[*speed + 1] / g->bw_inter > .49f)) {
    t->bw_intra = t->bw_inter = c->sp->v[++*speed]; /* slower, while above half the best */
    return 1;
  }
  return 0;
}

static ncclResult_t run_search(struct compute* c, int* time) {
  struct run r = {c->s, c->g};
  memset(c->s->used, 0, (size_t)c->s->ngpus * sizeof(uint64_t));
  c->tmp->nchannels = 0;
  return search_rec(&r, c->tmp, time);
}

static ncclResult_t compute(struct compute* c) {
  struct braid_search_graph *g = c->g, *t = c->tmp;
  struct ssys* s = c->s;
  int speed = 0, pass = 1, time;
  float total = s->total_bw;
  int64_t global = SEARCH_GLOBAL_TIMEOUT;
  if (s->ngpus > 1 && g->pattern != BRAID_PATTERN_RING) total *= (float)s->ngpus / (float)(s->ngpus - 1);
  while ((c->sp->v[speed] > s->max_bw || c->sp->v[speed] * (float)g->min_channels > total) && speed < c->sp->n - 1)
    speed++;
  t->bw_intra = t->bw_inter = c->sp->v[speed];
  for (;;) {
    time = t->same_channels                   ? SEARCH_TIMEOUT_SAME
           : t->pattern == BRAID_PATTERN_TREE ? SEARCH_TIMEOUT_TREE
                                              : SEARCH_TIMEOUT;
    global -= time;
    BRAID_CHECK(run_search(c, &time));
    int done = time == -1 || (float)g->nchannels * g->bw_inter >= s->total_bw;
    if (pass == 1 && !done && pass1_next(c, &speed, time, &global)) continue;
    if (pass == 1) {
      time = -1;
      dup_channels(g, c->cc);
      memcpy(t, g, sizeof(*t));
      speed = 0;
      while (c->sp->v[speed] > g->bw_inter && speed < c->sp->n - 1) speed++;
      t->bw_intra = t->bw_inter = c->sp->v[speed];
      t->min_channels = g->nchannels;
      pass = 2;
    }
    if (time != 0 && speed > 0) { /* pass 2: faster with the channels found */
      if (g->pattern == BRAID_PATTERN_RING) {
        t->bw_intra = t->bw_inter = c->sp->v[--speed];
        continue;
      }
      if (t->bw_intra == g->bw_intra && t->bw_intra < t->bw_inter * 2) {
        t->bw_intra = c->sp->v[--speed];
        continue;
      }
    }
    break;
  }
  if (g->nchannels == 0) { /* NCCL's fallback: one channel in index order */
    BRAID_INFO(BRAID_LOG_GRAPH, "Could not find a path for pattern %d, falling back to simple order", g->pattern);
    for (int i = 0; i < s->ngpus; i++) g->intra[i] = s->rank[i];
    g->inter[0] = g->inter[1] = s->nnets > 0 ? s->net_index[0] : -1;
    g->bw_intra = g->bw_inter = 0.1f;
    g->type_intra = g->type_inter = BRAID_PATH_SYS;
    g->nchannels = 1;
  }
  return ncclSuccess;
}

static ncclResult_t search_compute(struct braid_topo_system* sys, int inter, const struct braid_search_opts* opts,
                                   struct braid_search_graph* g) {
  ncclResult_t res = ncclSuccess;
  struct ssys s;
  struct compute c = {0};
  int version = opts && opts->nccl_version > 0 ? opts->nccl_version : 23007;
  BRAID_CHECK_GOTO(braid_search_sys_make(sys, inter, version, &s), res, out);
  if (s.ngpus < 1) {
    BRAID_WARN("Graph search: no GPU on the node");
    res = ncclInvalidArgument;
    goto out;
  }
  c.s = &s;
  c.g = g;
  c.cc = 1 << 30;
  for (int i = 0; i < s.ngpus; i++)
    if (sys->nodes[s.gpu[i]].sm < c.cc) c.cc = sys->nodes[s.gpu[i]].sm;
  int pattern = g->pattern;
  c.cross_nic = s.nnets > 1 && (pattern == BRAID_PATTERN_RING || pattern == BRAID_PATTERN_BALANCED_TREE ||
                                pattern == BRAID_PATTERN_SPLIT_TREE)
                    ? (int)braid_param_int(BRAID_PARAM_CROSS_NIC)
                    : 0;
  g->cross_nic = c.cross_nic == 1;
  g->bw_intra = g->bw_inter = g->latency_inter = 0;
  g->ngpus = s.ngpus;
  g->nhops = 0;
  c.min_intra = BRAID_PATH_LOC, c.max_intra = BRAID_PATH_SYS;
  c.min_inter = BRAID_PATH_PIX, c.max_inter = BRAID_PATH_SYS;
  if (s.ngpus > 1) path_range(&s, 0, &c.min_intra, &c.max_intra);
  if (inter) {
    path_range(&s, 1, &c.min_inter, &c.max_inter);
    c.max_intra = c.max_inter;
  }
  if (version >= 22907 && c.cc < 90) c.max_inter = BRAID_PATH_SYS;
  g->type_intra = c.min_intra;
  g->type_inter = c.min_inter;
  g->nchannels = 0;
  c.same = 1;
  g->same_channels = 1;
  if (s.ngpus == 1 && g->pattern != BRAID_PATTERN_RING) g->pattern = BRAID_PATTERN_TREE;
  if (g->pattern == BRAID_PATTERN_RING && split_nvlink(&s) && g->max_channels >= 2 && g->min_channels == 1)
    g->min_channels = 2; /* two NVLink islands: trees need two channels, rings follow */
  c.sp = braid_search_speeds(version, c.cc, inter);
  BRAID_CALLOC_GOTO(c.tmp, 1, res, out);
  memcpy(c.tmp, g, sizeof(*g));
  BRAID_CHECK_GOTO(compute(&c), res, out);
out:
  free(c.tmp);
  braid_search_sys_free(&s);
  return res;
}

/* The recursion goes one frame per GPU per channel (up to 32 x 256 pairs of frames): it runs
 * on a thread of its own with a stack sized for that, whatever the caller's. */
#define SEARCH_STACK (64u << 20)

struct search_job {
  struct braid_topo_system* sys;
  int inter;
  const struct braid_search_opts* opts;
  struct braid_search_graph* g;
  ncclResult_t res;
};

static void* search_main(void* arg) {
  struct search_job* j = arg;
  j->res = search_compute(j->sys, j->inter, j->opts, j->g);
  return NULL;
}

ncclResult_t braid_search_compute(struct braid_topo_system* sys, int inter, const struct braid_search_opts* opts,
                                  struct braid_search_graph* g) {
  struct search_job j = {sys, inter, opts, g, ncclInternalError};
  pthread_attr_t attr;
  pthread_t t;
  int err = pthread_attr_init(&attr);
  if (err == 0) err = pthread_attr_setstacksize(&attr, SEARCH_STACK);
  if (err == 0) err = pthread_create(&t, &attr, search_main, &j);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    BRAID_WARN("Graph search: pthread_create (a %u MiB stack): %s", SEARCH_STACK >> 20, strerror(err));
    return ncclSystemError;
  }
  pthread_join(t, NULL);
  return j.res;
}
