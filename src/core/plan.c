/*
 * plan.c - building one communicator's plan: protocol and channel count per collective, the
 * per-channel shares, point-to-point rounds. The tuner (tuner.h) picks algorithm, protocol and
 * channels for each collective; the host caps channels at what the communicator has.
 */
#include "core/plan.h"

#include <stdlib.h>
#include <string.h>

#include "algo/alltoall.h"
#include "base/check.h"
#include "base/param.h"
#include "core/sym/sym.h"
#include "kernels/multimem.h"
#include "kernels/prims.h"
#include "plugin/tuner_plugin.h"
#include "topo/tuner.h"

/* Two-rank all-reduces up to this size swap inputs instead of running the ring: measured
 * with all_reduce_perf -P 2 on 2 cores, one hop wins while latency dominates. */
#define BRAID_PAIR_EXCHANGE_BYTES (64 << 10)

/* Bytes that move per rank, for the protocol and channel choice. */
static size_t task_bytes(const struct braid_task* t, int nranks) {
  size_t b = t->count * braid_dtype_size(t->dtype);
  return t->func == BRAID_FUNC_AllGather || t->func == BRAID_FUNC_ReduceScatter ? b * nranks : b;
}

/* One-shot / two-shot all-reduce (kernels/lsa.h): the whole call, one item on channel 0. */
static ncclResult_t add_lsa(struct braid_plan* plan, const struct braid_task* t, const struct braid_tuner_choice* c,
                            int* nworks) {
  struct braid_comm* comm = plan->comm;
  uint64_t seq = 0;
  const struct braid_lsa_view* v = braid_lsa_next(comm, &seq);
  if (v == NULL) {
    BRAID_WARN("rank %d: the tuner chose NVLS but the communicator has no one-/two-shot scratch", comm->rank);
    return ncclInternalError;
  }
  struct braid_work* w = &plan->works[nworks[0]++];
  memset(w, 0, sizeof(*w));
  w->func = (uint8_t)t->func;
  w->algo = BRAID_ALGO_NVLS;
  w->proto = (uint8_t)c->proto;
  w->dtype = (uint8_t)t->dtype;
  w->redop = t->redop;
  w->nranks = comm->nranks;
  w->rank = comm->rank;
  w->sendbuff = t->sendbuff;
  w->recvbuff = t->recvbuff;
  w->count = t->count;
  w->chan_count = t->count;
  w->lsa = v;
  w->lsa_mode = (uint8_t)braid_lsa_mode_of(comm, c->variant, t->count * braid_dtype_size(t->dtype));
  if (w->lsa_mode != BRAID_LSA_ONELINE && braid_lsa_nvls(comm) != NULL && braid_mm_supported(t->dtype, t->redop.kind))
    w->lsa_mode |= BRAID_LSA_MC;
  /* The peers read this rank's input in place when it lies in a window (kernels/lsa.h), except
   * where lsa.h stages: PreMulSum (its owner's pre-op) and a one-shot whose output overwrites it. */
  int stage = t->redop.kind == BRAID_RED_PREMULSUM || (w->lsa_mode == BRAID_LSA_ONESHOT && t->sendbuff == t->recvbuff);
  size_t bytes = t->count * braid_dtype_size(t->dtype);
  if ((w->lsa_mode == BRAID_LSA_ONESHOT || w->lsa_mode == BRAID_LSA_TWOSHOT) && !stage)
    w->lsa_win = (uint8_t)braid_lsa_win_of(comm, t->sendbuff, bytes, &w->lsa_off);
  /* Through multicast: straight from and to windows bound to objects of their own (multimem.h). */
  if (w->lsa_mode & BRAID_LSA_MC)
    w->lsa_win =
        (uint8_t)braid_lsa_mc_direct(comm, w->lsa_mode & 3, t->sendbuff, t->recvbuff, bytes, &w->lsa_off, &w->lsa_rwin);
  return ncclSuccess;
}

static ncclResult_t add_coll(struct braid_plan* plan, struct braid_task* t, int* nworks) {
  struct braid_comm* comm = plan->comm;
  struct braid_tuner_choice choice;
  t->chosen.algo = t->chosen.proto = -1, t->chosen.nchannels = 0; /* for the profiler (core/profile.c) */
  if (t->count == 0) return ncclSuccess;
  size_t bytes = task_bytes(t, comm->nranks);
  int es = braid_dtype_size(t->dtype);
  BRAID_CHECK(braid_tuner_choose(comm->tuner, t->func, bytes, &choice));
  int proto = choice.proto;
  int nch = choice.nchannels < comm->nchannels ? choice.nchannels : comm->nchannels;
  if (nch < 1) nch = 1;
  t->chosen.algo = choice.algo, t->chosen.proto = proto, t->chosen.nchannels = nch,
  t->chosen.nthreads = choice.nthreads;
  if (choice.nthreads > plan->nthreads) plan->nthreads = choice.nthreads; /* NVLS too: its block's threads */
  if (choice.algo == BRAID_ALGO_NVLS) return add_lsa(plan, t, &choice, nworks);
  if (choice.algo == BRAID_ALGO_TREE && !comm->trees_connected) plan->connect_trees = 1;
  uint32_t slot = comm->buff_bytes[proto] / BRAID_NSTEPS;
  uint32_t chunk = braid_proto_payload(proto, slot) / es;
  struct braid_tuner_plugin* tp = braid_tuner_plugin_of(comm->tuner); /* v6 may set the step size */
  if (tp != NULL)
    chunk =
        (uint32_t)(braid_tuner_plugin_chunk(tp, t->func, bytes, choice.algo, proto, nch, (size_t)chunk * es, 64) / es);
  /* Channel shares in whole 64-byte units, so every share starts aligned like the buffer. */
  size_t unit = 64 / es, per = (t->count + nch - 1) / nch;
  per = (per + unit - 1) / unit * unit;
  for (int c = 0; c < nch; c++) {
    size_t off = (size_t)c * per;
    if (off >= t->count) break;
    struct braid_work* w = &plan->works[c * plan->stride + nworks[c]++];
    memset(w, 0, sizeof(*w));
    w->func = (uint8_t)t->func;
    w->algo = (uint8_t)choice.algo;
    w->proto = (uint8_t)proto;
    w->dtype = (uint8_t)t->dtype;
    w->redop = t->redop;
    w->nranks = comm->nranks;
    w->rank = comm->rank;
    w->root = t->root;
    w->sendbuff = t->sendbuff;
    w->recvbuff = t->recvbuff;
    w->count = t->count;
    w->chan_off = off;
    w->chan_count = t->count - off < per ? t->count - off : per;
    w->chunk_elems = chunk;
    /* Two ranks, small: one hop beats the ring's two (in place too: the input chunk is sent
     * before the output chunk is written). Decided from arguments every rank shares. */
    w->exchange = t->func == BRAID_FUNC_AllReduce && comm->nranks == 2 && choice.algo == BRAID_ALGO_RING &&
                  bytes <= BRAID_PAIR_EXCHANGE_BYTES;
    /* Two ranks, large Reduce: each reduces half. The tuner sets the variant only for a 2-rank
     * Ring/Simple Reduce (topo/tuner.c), the executor checks the connections (kernels/coll.h). */
    w->split = choice.variant == BRAID_TUNER_REDUCE_SPLIT;
  }
  return ncclSuccess;
}

static int add_peer(int* list, int* n, int peer) {
  for (int i = 0; i < *n; i++)
    if (list[i] == peer) return 0;
  list[(*n)++] = peer;
  return 1;
}

static int by_round(const void* a, const void* b) {
  const struct braid_p2p_op* x = a;
  const struct braid_p2p_op* y = b;
  if (x->round != y->round) return x->round - y->round;
  return x < y ? -1 : x > y;
}

/* Sends to self pair with receives from self, in call order. */
static ncclResult_t match_self(struct braid_plan* plan, struct braid_task* tasks) {
  struct braid_comm* comm = plan->comm;
  struct braid_task* recv = tasks;
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    if (t->comm != comm || t->kind != BRAID_TASK_SEND || t->root != comm->rank) continue;
    while (recv != NULL && !(recv->comm == comm && recv->kind == BRAID_TASK_RECV && recv->root == comm->rank))
      recv = recv->next;
    size_t bytes = t->count * braid_dtype_size(t->dtype);
    if (recv == NULL || recv->count * braid_dtype_size(recv->dtype) != bytes) {
      BRAID_WARN(
          "ncclSend: rank %d sends %zu bytes to itself without a matching ncclRecv of the same size in the "
          "same group",
          comm->rank, bytes);
      return ncclInvalidUsage;
    }
    plan->copies[plan->ncopies++] = (struct braid_self_copy){recv->recvbuff, t->sendbuff, bytes};
    recv = recv->next;
  }
  int nrecv = 0;
  for (struct braid_task* t = tasks; t != NULL; t = t->next)
    if (t->comm == comm && t->kind == BRAID_TASK_RECV && t->root == comm->rank) nrecv++;
  if (nrecv != plan->ncopies) {
    BRAID_WARN("ncclRecv: rank %d receives from itself without a matching ncclSend in the same group", comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

struct range {
  const char* lo;
  const char* hi; /* for the receives sorted by lo: the largest end up to this one */
};
static int by_lo(const void* a, const void* b) {
  const char* x = ((const struct range*)a)->lo;
  const char* y = ((const struct range*)b)->lo;
  return x < y ? -1 : x > y;
}

/* Host mode: a send whose source a receive of the same batch overwrites (an in-place exchange).
 * Sent by pointer, that receive could not land in place while the peer may still read the
 * source: it would land in the slot and be copied out once the peer is done, two copies on this
 * core and a wait; through the slot each end makes one (kernels/direct.h, slot sends). A batch
 * may hold ops to every rank of a large communicator: the receives are sorted once, and a send
 * overlaps one iff the largest end among the receives that start below its end lies above its
 * start. */
static ncclResult_t mark_slot_sends(struct braid_plan* plan) {
  ncclResult_t res = ncclSuccess;
  struct range* r = NULL;
  int nr = 0;
  BRAID_CALLOC_GOTO(r, plan->nops > 0 ? plan->nops : 1, res, out);
  for (int i = 0; i < plan->nops; i++)
    if (!plan->ops[i].is_send && plan->ops[i].bytes > 0)
      r[nr++] = (struct range){plan->ops[i].buff, plan->ops[i].buff + plan->ops[i].bytes};
  if (nr == 0) goto out;
  qsort(r, nr, sizeof(*r), by_lo);
  for (int i = 1; i < nr; i++)
    if (r[i].hi < r[i - 1].hi) r[i].hi = r[i - 1].hi;
  for (int i = 0; i < plan->nops; i++) {
    struct braid_p2p_op* s = &plan->ops[i];
    if (!s->is_send || s->bytes == 0) continue;
    const char* end = s->buff + s->bytes;
    int lo = 0, hi = nr; /* the receives [0, lo) start below `end` */
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (r[mid].lo < end)
        lo = mid + 1;
      else
        hi = mid;
    }
    s->slot = lo > 0 && r[lo - 1].hi > s->buff;
  }
out:
  free(r);
  return res;
}

static ncclResult_t add_p2p(struct braid_plan* plan, struct braid_task* tasks, int np2p, int* nworks) {
  ncclResult_t res = ncclSuccess;
  struct braid_comm* comm = plan->comm;
  int n = comm->nranks, me = comm->rank;
  int* round_of = NULL; /* delta -> round */
  BRAID_CALLOC_GOTO(plan->ops, np2p, res, out);
  BRAID_CALLOC_GOTO(plan->copies, np2p, res, out);
  BRAID_CALLOC_GOTO(plan->connect_send, n, res, out);
  BRAID_CALLOC_GOTO(plan->connect_recv, n, res, out);
  BRAID_CALLOC_GOTO(round_of, n, res, out);
  BRAID_CHECK_GOTO(match_self(plan, tasks), res, out);
  /* Rounds progressed together share a number: the executor runs ops of equal number at once. */
  int group = comm->p2p_round_group > 0 ? comm->p2p_round_group : 1; /* set once at init */
  for (int r = 0; r < braid_p2p_nrounds(n); r++) round_of[braid_p2p_delta(n, r)] = r / group;
  struct braid_channel* ch = &comm->channels[0];
  const uint32_t a2a_step = (uint32_t)braid_param_int(BRAID_PARAM_SHM_A2A_STEP);
  const size_t a2a_max = (size_t)braid_param_int(BRAID_PARAM_SHM_A2A_MAX);
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    if (t->comm != comm || t->kind == BRAID_TASK_COLL || t->root == me) continue;
    int send = t->kind == BRAID_TASK_SEND, peer = t->root;
    struct braid_p2p_op* op = &plan->ops[plan->nops++];
    op->round = round_of[send ? (peer - me + n) % n : (me - peer + n) % n];
    op->peer = peer;
    op->is_send = send;
    op->gather = t->gather;
    op->buff = send ? (char*)t->sendbuff : (char*)t->recvbuff;
    op->bytes = t->count * braid_dtype_size(t->dtype);
    op->a2a_step = t->a2a && comm->host_mode && op->bytes <= a2a_max ? a2a_step : 0;
    if (send && !ch->p2p_send[peer].connected) add_peer(plan->connect_send, &plan->nconnect_send, peer);
    if (!send && !ch->p2p_recv[peer].connected) add_peer(plan->connect_recv, &plan->nconnect_recv, peer);
  }
  qsort(plan->ops, plan->nops, sizeof(*plan->ops), by_round);
  if (comm->host_mode) BRAID_CHECK_GOTO(mark_slot_sends(plan), res, out);
  if (plan->nops > 0) {
    struct braid_work* w = &plan->works[nworks[0]++];
    memset(w, 0, sizeof(*w));
    w->func = BRAID_FUNC_SendRecv;
    w->proto = BRAID_PROTO_SIMPLE;
    w->dtype = ncclInt8;
    w->redop.dtype = ncclInt8;
    w->nranks = n;
    w->rank = me;
    w->nops = plan->nops;
    w->ops = plan->ops;
    uint32_t payload = comm->buff_bytes[BRAID_PROTO_SIMPLE] / BRAID_NSTEPS;
    int64_t chunk = braid_param_int(BRAID_PARAM_P2P_PCI_CHUNKSIZE);
    w->p2p_chunk_bytes = chunk > 0 && chunk < payload ? (uint32_t)chunk : payload;
  }
out:
  free(round_of);
  return res;
}

/* BRAID_P2P_SELF_COPY, in its words' order. AUTO: a rank that only sends to its peers (a
 * Scatter root) makes its copies while they take its sends (4 ranks on 2 cores, one build,
 * against FIRST: Scatter 8-24% faster by the median at 512 KiB-8 MiB, 2 ranks 31-44% from
 * 256 KiB), and so does a Gather's root whose senders write its blocks (BRAID_GATHER_STORE:
 * kernels/direct.h), or it would declare its destinations only after its own copy; one that
 * receives what it copies itself copies first, as before (AlltoAll and a reading Gather root
 * showed no gain beyond the spread of two runs of the same code: docs/notes/2026-12-03-p2p4.md). */
enum { SELF_COPY_AUTO, SELF_COPY_FIRST, SELF_COPY_WAIT, SELF_COPY_SENDS };
static int self_copy_mode(const struct braid_plan* plan) {
  int mode = (int)braid_param_int(BRAID_PARAM_P2P_SELF_COPY);
  if (mode != SELF_COPY_AUTO) return mode;
  int stored = braid_param_int(BRAID_PARAM_GATHER_STORE) != 0;
  for (int i = 0; i < plan->nops; i++)
    if (!plan->ops[i].is_send && !(stored && plan->ops[i].gather)) return SELF_COPY_FIRST;
  return SELF_COPY_WAIT;
}

ncclResult_t braid_plan_build(struct braid_plan* plan, struct braid_task* tasks) {
  ncclResult_t res = ncclSuccess;
  struct braid_comm* comm = plan->comm;
  int ncoll = 0, np2p = 0, nworks[BRAID_MAX_CHANNELS] = {0};
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    if (t->comm != comm) continue;
    if (ncoll + np2p == 0) plan->stream = t->stream;
    if (t->kind == BRAID_TASK_COLL)
      ncoll++;
    else
      np2p++;
  }
  plan->stride = ncoll + 1;
  size_t need = (size_t)comm->nchannels * plan->stride;
  if (need > plan->works_cap) {
    struct braid_work* grown = realloc(plan->works, need * sizeof(*grown));
    if (grown == NULL) {
      BRAID_WARN("Failed to allocate %zu work items", need);
      return ncclSystemError;
    }
    plan->works = grown;
    plan->works_cap = need;
  }
  for (struct braid_task* t = tasks; t != NULL; t = t->next)
    if (t->comm == comm && t->kind == BRAID_TASK_COLL) BRAID_CHECK_GOTO(add_coll(plan, t, nworks), res, out);
  if (np2p > 0) BRAID_CHECK_GOTO(add_p2p(plan, tasks, np2p, nworks), res, out);
  for (int c = 0; c < comm->nchannels; c++) {
    if (nworks[c] == 0) continue;
    struct braid_host_job* job = &plan->jobs[plan->njobs++];
    job->ch = &comm->channels[c].dev;
    job->works = &plan->works[c * plan->stride];
    job->nworks = nworks[c];
    job->abort_flag = &comm->abort_flag;
    /* Channel 0 runs the p2p work: its job may make the sends to self while that work waits
     * (else braid_plan_self_copies makes them before the call). */
    int mode = c == 0 && plan->ncopies > 0 ? self_copy_mode(plan) : SELF_COPY_FIRST;
    job->copies = mode != SELF_COPY_FIRST ? plan->copies : NULL;
    job->ncopies = mode != SELF_COPY_FIRST ? plan->ncopies : 0;
    job->copies_any_wait = mode == SELF_COPY_WAIT;
    if (mode != SELF_COPY_FIRST) plan->copies_in_job = 1;
  }
out:
  return res;
}

ncclResult_t braid_plan_connect(struct braid_plan* plan, int phase) {
  if (plan->connect_trees) BRAID_CHECK(braid_connect_trees(plan->comm, phase));
  if (plan->nconnect_send + plan->nconnect_recv == 0) return ncclSuccess;
  return braid_connect_p2p(plan->comm, 0, phase, plan->connect_send, plan->nconnect_send, plan->connect_recv,
                           plan->nconnect_recv);
}

void braid_plan_self_copies(struct braid_plan* plan) {
  if (plan->copies_in_job) return;
  for (int i = 0; i < plan->ncopies; i++)
    if (plan->copies[i].dst != plan->copies[i].src)
      memmove(plan->copies[i].dst, plan->copies[i].src, plan->copies[i].bytes);
}

void braid_plan_free(struct braid_plan* plan) {
  /* works stays with the plan for its next use (enqueue.c keeps plans per thread) */
  free(plan->ops);
  free(plan->copies);
  free(plan->connect_send);
  free(plan->connect_recv);
}
