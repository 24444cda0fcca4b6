/*
 * profile_proxy.c - ProxyOp / ProxyStep events (profile.h): before a host-mode group runs,
 * every work item's steps on each proxied connection (network) are counted from the very
 * schedules the executor runs (algo/ring.h, algo/tree.h, the p2p chunking) and queued on
 * that connection as one struct braid_prof_op (transport/prof_op.h) of the item's task; the
 * connection's proxy emits the events as the steps move (transport/net/net_prof.c). After the
 * run each connection's step counter must have moved by what was counted (else one WARN and
 * the ops are cancelled), and the group's task events stop only once the sends still in
 * flight completed: a ProxyOp never outlives its Coll / P2p event.
 *
 * Device mode: the kernels advance the step counters (on the device copies), and several
 * launches may be queued on a stream, so the host cannot read where a connection stands. It
 * counts instead: every launch of a communicator with a profiler (whatever the mask asks:
 * skipping one would shift every later op) adds its steps to the end's prof_next
 * (transport.h), so an op's first step is what the earlier launches queued; the ops are
 * queued at launch time, in the order the launch's kernels (one per datatype, device/launch.c)
 * run the items. The plan's ops then go with its task events into the batch that waits for
 * the kernels (profile_done.c), which stops those only once every op finished. A stream being
 * captured (its replays move steps nobody counts) or a failed launch ends the counting: no
 * more proxy events on that communicator (one INFO says why).
 */
#include <sched.h>
#include <stdlib.h>

#include "algo/ring.h"
#include "algo/tree.h"
#include "base/check.h"
#include "core/profile.h"
#include "device/device.h"
#include "device/launch.h"  /* the kernels' order */
#include "kernels/coll.h"   /* braid_p2p_chunk */
#include "kernels/direct.h" /* braid_direct_pair */
#include "plugin/profiler_abi.h"
#include "plugin/profiler_plugin.h"
#include "transport/prof_op.h"
#include "transport/progress.h"
#include "transport/transport.h"

#define OP_MASK (NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP | NCCL_PROF_NET_PLUGIN)
#define DRAIN_NS 10000000000LL /* sends still in flight after the run: give up after 10 s */

struct conn_use {
  struct braid_conn* conn;
  uint64_t base, total; /* its step counter before the run (device: prof_next); the steps counted */
  int warned;
};

struct proxy_ops {
  struct braid_prof_op* ops;
  int nops, cap;
  struct conn_use* conns;
  int nconns, conns_cap;
  int device; /* counts from prof_next (device mode) */
  int push;   /* the mask asks for proxy events: ops are queued (device mode counts anyway) */
  int scan;   /* device: ops before it are finished (braid_profile_proxy_left) */
};

static int prim_sends(int prim) {
  return prim == BRAID_PRIM_SEND || prim == BRAID_PRIM_COPY_SEND || prim == BRAID_PRIM_RECV_SEND ||
         prim == BRAID_PRIM_RECV_COPY_SEND || prim == BRAID_PRIM_RECV_REDUCE_SEND ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND || prim == BRAID_PRIM_RECV_REDUCE_FINAL_SEND;
}
static int prim_recvs(int prim) {
  return prim == BRAID_PRIM_RECV || prim == BRAID_PRIM_RECV_SEND || prim == BRAID_PRIM_RECV_COPY_SEND ||
         prim == BRAID_PRIM_RECV_REDUCE_SEND || prim == BRAID_PRIM_RECV_REDUCE_COPY ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND || prim == BRAID_PRIM_RECV_REDUCE_FINAL_SEND;
}

static uint64_t div_up(uint64_t a, uint64_t b) {
  return b == 0 ? 0 : (a + b - 1) / b;
}

/* Steps of a ring schedule (nsteps per loop, `loops` loops) on the ring's send or receive end. */
static uint64_t ring_steps(const struct braid_work* w, const struct braid_dev_channel* ch, int is_send,
                           uint64_t loops) {
  int n = w->nranks, ns = 0, pos = ch->ring.index;
  uint64_t per = 0;
  if (w->func == BRAID_FUNC_Broadcast || w->func == BRAID_FUNC_Reduce) {
    int root_pos = -1;
    for (int i = 0; i < n; i++)
      if (ch->ring.ranks[i] == w->root) root_pos = i;
    if (root_pos < 0) return 0;
    if (w->func == BRAID_FUNC_Reduce && w->split && braid_direct_pair(ch->ring_send, ch->ring_recv)) {
      /* the split Reduce (kernels/coll.h): loops of two chunks */
      int rel = braid_ring_reduce_pos(n, pos, root_pos);
      for (int s = 0; s < braid_ring_reduce_split_nsteps(n); s++) {
        struct braid_step st = {0, 0};
        if (braid_ring_reduce_split_step(n, rel, s, &st) != BRAID_SCHED_OK) return 0;
        per += is_send ? prim_sends(st.prim) : prim_recvs(st.prim);
      }
      return per * div_up(w->chan_count, (uint64_t)BRAID_RING_REDUCE_SPLIT_CHUNKS * w->chunk_elems);
    }
    struct braid_step st = {0, 0};
    int bc = w->func == BRAID_FUNC_Broadcast;
    int rel = bc ? braid_ring_bcast_pos(n, pos, root_pos) : braid_ring_reduce_pos(n, pos, root_pos);
    if ((bc ? braid_ring_broadcast_step(n, rel, 0, &st) : braid_ring_reduce_step(n, rel, 0, &st)) != BRAID_SCHED_OK)
      return 0;
    return (is_send ? prim_sends(st.prim) : prim_recvs(st.prim)) ? loops : 0;
  }
  ns = w->func == BRAID_FUNC_AllReduce   ? braid_ring_allreduce_nsteps(n)
       : w->func == BRAID_FUNC_AllGather ? braid_ring_allgather_nsteps(n)
                                         : braid_ring_reducescatter_nsteps(n);
  for (int s = 0; s < ns; s++) {
    struct braid_step st = {0, 0};
    int rc = w->func == BRAID_FUNC_AllReduce   ? braid_ring_allreduce_step(n, pos, s, &st)
             : w->func == BRAID_FUNC_AllGather ? braid_ring_allgather_step(n, pos, s, &st)
                                               : braid_ring_reducescatter_step(n, pos, s, &st);
    if (rc != BRAID_SCHED_OK) return 0;
    per += is_send ? prim_sends(st.prim) : prim_recvs(st.prim);
  }
  return per * loops;
}

/* Steps of the tree all-reduce on one of its connections (dir: up or down, is_send). */
static uint64_t tree_steps(const struct braid_work* w, const struct braid_dev_channel* ch, int dir, int is_send) {
  int ndown = 0, has_up = ch->tree.up >= 0;
  for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) ndown += ch->tree.down[d] >= 0;
  int nchunks = (int)div_up(w->chan_count, w->chunk_elems);
  int nsteps = braid_tree_allreduce_nsteps(has_up, ndown, nchunks);
  uint64_t k = 0;
  for (int s = 0; s < nsteps; s++) {
    struct braid_tree_step ts = {0, 0, 0, 0, 0};
    if (braid_tree_allreduce_step(has_up, ndown, nchunks, BRAID_NSTEPS / 2, s, &ts) != BRAID_SCHED_OK) return 0;
    if (ts.prim != BRAID_PRIM_NONE && (is_send ? ts.send : ts.recv) == dir) k++;
  }
  return k;
}

/* Steps work item w moves on connection c of channel ch (the executors' loops, kernels/coll.h). */
static uint64_t work_steps(const struct braid_work* w, const struct braid_dev_channel* ch, struct braid_conn* c,
                           int is_send, int* peer_p) {
  if (w->func == BRAID_FUNC_SendRecv) {
    uint64_t k = 0;
    for (int i = 0; i < w->nops; i++) {
      const struct braid_p2p_op* op = &w->ops[i];
      if (op->is_send != is_send || (is_send ? ch->p2p_send : ch->p2p_recv)[op->peer] != c) continue;
      k += div_up(op->bytes, braid_p2p_chunk(w, c, op)), *peer_p = op->peer;
    }
    return k;
  }
  if (w->nranks == 1 || w->algo == BRAID_ALGO_NVLS || w->chunk_elems == 0) return 0;
  if (w->func == BRAID_FUNC_AllReduce && w->algo == BRAID_ALGO_TREE) {
    if (c == (is_send ? ch->tree_up_send : ch->tree_up_recv))
      return *peer_p = ch->tree.up, tree_steps(w, ch, 1, is_send);
    for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++)
      if (ch->tree.down[d] >= 0 && c == (is_send ? ch->tree_down_send[d] : ch->tree_down_recv[d]))
        return *peer_p = ch->tree.down[d], tree_steps(w, ch, 2, is_send);
    return 0;
  }
  if (c != (is_send ? ch->ring_send : ch->ring_recv)) return 0;
  *peer_p = is_send ? ch->ring.next : ch->ring.prev;
  if (w->func == BRAID_FUNC_AllReduce && w->exchange) return div_up(w->chan_count, w->chunk_elems);
  uint64_t loop = w->func == BRAID_FUNC_AllReduce ? (uint64_t)w->nranks * w->chunk_elems : w->chunk_elems;
  return ring_steps(w, ch, is_send, div_up(w->chan_count, loop));
}

/* The task of a work item: collectives in task order per channel; a p2p item's op by peer,
 * direction and buffer. */
static struct braid_task* coll_task(struct braid_task** cursor, struct braid_comm* comm, const struct braid_work* w) {
  for (struct braid_task* t = *cursor; t != NULL; t = t->next)
    if (t->comm == comm && t->kind == BRAID_TASK_COLL && (int)t->func == w->func && t->sendbuff == w->sendbuff &&
        t->recvbuff == w->recvbuff && t->count == w->count) {
      *cursor = t->next;
      return t;
    }
  return NULL;
}
static struct braid_task* p2p_task(struct braid_task* tasks, struct braid_comm* comm, int is_send, int peer) {
  for (struct braid_task* t = tasks; t != NULL; t = t->next)
    if (t->comm == comm && t->kind == (is_send ? BRAID_TASK_SEND : BRAID_TASK_RECV) && t->root == peer &&
        t->prof_event != NULL)
      return t;
  return NULL;
}

static struct conn_use* use_of(struct proxy_ops* q, struct braid_conn* c) {
  for (int i = 0; i < q->nconns; i++)
    if (q->conns[i].conn == c) return &q->conns[i];
  if (q->nconns == q->conns_cap) {
    int cap = q->conns_cap ? 2 * q->conns_cap : 16;
    struct conn_use* g = realloc(q->conns, (size_t)cap * sizeof(*g));
    if (g == NULL) return NULL;
    q->conns = g, q->conns_cap = cap;
  }
  struct conn_use* u = &q->conns[q->nconns++];
  struct braid_connector* k = (struct braid_connector*)c; /* conn is the connector's first member */
  if (q->device && !k->prof_counted) k->prof_next = c->step, k->prof_counted = 1; /* its first launch */
  u->conn = c, u->base = q->device ? k->prof_next : c->step, u->total = 0, u->warned = 0;
  return u;
}

static struct braid_prof_op* new_op(struct proxy_ops* q) {
  if (q->nops == q->cap) return NULL;
  return &q->ops[q->nops++];
}

/* One work item on one proxied connection end. */
static void queue_one(struct proxy_ops* q, struct braid_plan* plan, struct braid_task* tasks, struct braid_task* t,
                      const struct braid_host_job* job, const struct braid_work* w, struct braid_conn* c, int is_send,
                      int mask) {
  struct braid_connector* k = (struct braid_connector*)c; /* conn is the connector's first member */
  if (c == NULL || k->transport == NULL || k->transport->prof_push == NULL) return;
  int peer = -1;
  uint64_t n = work_steps(w, job->ch, c, is_send, &peer);
  if (n == 0) return;
  struct conn_use* u = use_of(q, c);
  if (u == NULL) return;
  struct braid_prof_op* op = q->push ? new_op(q) : NULL;
  if (op == NULL) {
    u->total += n; /* device mode: counted only */
    return;
  }
  if (w->func == BRAID_FUNC_SendRecv) t = p2p_task(tasks, plan->comm, is_send, peer);
  *op = (struct braid_prof_op){0};
  op->prof = plan->comm->prof;
  op->parent = t != NULL ? t->prof_event : NULL;
  op->mask = mask;
  op->rank = plan->comm->rank;
  op->channel = job->ch->id;
  op->peer = peer;
  op->is_send = is_send;
  op->first = u->base + u->total;
  op->nsteps = n;
  op->chunk = w->func == BRAID_FUNC_SendRecv ? w->p2p_chunk_bytes : (size_t)w->chunk_elems * braid_dtype_size(w->dtype);
  u->total += n;
  k->transport->prof_push(k, op);
}

static int listed(struct braid_conn* const* out, int n, const struct braid_conn* c) {
  for (int i = 0; i < n; i++)
    if (out[i] == c) return 1;
  return 0;
}

/* Every connection end a channel has, each once (a ring's and a p2p's may be one). */
static int channel_conns(const struct braid_dev_channel* ch, int nranks, struct braid_conn** out, int* is_send) {
  int n = 0;
#define ADD(c, s) \
  if ((c) != NULL && !listed(out, n, (c))) out[n] = (c), is_send[n++] = (s)
  ADD(ch->ring_send, 1);
  ADD(ch->ring_recv, 0);
  ADD(ch->tree_up_send, 1);
  ADD(ch->tree_up_recv, 0);
  for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) {
    ADD(ch->tree_down_send[d], 1);
    ADD(ch->tree_down_recv[d], 0);
  }
  for (int p = 0; p < nranks; p++) {
    if (ch->p2p_send != NULL) ADD(ch->p2p_send[p], 1);
    if (ch->p2p_recv != NULL) ADD(ch->p2p_recv[p], 0);
  }
#undef ADD
  return n;
}

/* Every item of the plan on every connection end of its channel: host mode in item order,
 * device mode kernel by kernel (the items of one datatype each). `item_task` has room for
 * every item; conns / is_send for one channel's ends. */
static void queue_plan(struct proxy_ops* q, struct braid_plan* plan, struct braid_task* tasks, int mask,
                       struct braid_task** item_task, struct braid_conn** conns, int* is_send) {
  struct braid_comm* comm = plan->comm;
  int dtypes[BRAID_NUM_DTYPES], ndt = q->device ? braid_launch_dtypes(plan, dtypes) : 1;
  for (int j = 0, at = 0; j < plan->njobs; at += plan->jobs[j++].nworks) {
    struct braid_task* cursor = tasks; /* a channel's items: the tasks in order */
    for (int i = 0; i < plan->jobs[j].nworks; i++) {
      const struct braid_work* w = &plan->jobs[j].works[i];
      item_task[at + i] = w->func == BRAID_FUNC_SendRecv ? NULL : coll_task(&cursor, comm, w);
    }
  }
  for (int d = 0; d < ndt; d++)
    for (int j = 0, at = 0; j < plan->njobs; at += plan->jobs[j++].nworks) {
      const struct braid_host_job* job = &plan->jobs[j];
      int nc = channel_conns(job->ch, comm->nranks, conns, is_send);
      for (int i = 0; i < job->nworks; i++) {
        const struct braid_work* w = &job->works[i];
        if (q->device && w->dtype != dtypes[d]) continue;
        for (int k = 0; k < nc; k++) queue_one(q, plan, tasks, item_task[at + i], job, w, conns[k], is_send[k], mask);
      }
    }
}

/* Device mode: whether the plan's launch is counted: the communicator's counting still holds
 * and the stream is not being captured (a capture ends it). */
static int device_counts(struct braid_plan* plan) {
  struct braid_comm* comm = plan->comm;
  const struct braid_device_ops* dev = comm->device;
  int capturing = 0, cur = -1;
  if (comm->prof == NULL || comm->prof_proxy_off) return 0;
  if (dev->get_current(&cur) == ncclSuccess && cur != comm->cuda_dev) dev->set_current(comm->cuda_dev);
  ncclResult_t res = dev->stream_capturing(plan->stream, &capturing);
  if (cur >= 0 && cur != comm->cuda_dev) dev->set_current(cur);
  if (res == ncclSuccess && !capturing) return 1;
  comm->prof_proxy_off = 1;
  BRAID_INFO(BRAID_LOG_PROFILE,
             "PROFILER: rank %d: %s: no more ProxyOp / ProxyStep events on this communicator (the replays of a "
             "graph move steps braid cannot count)",
             comm->rank, res == ncclSuccess ? "a launch into a stream being captured" : "a stream braid cannot query");
  return 0;
}

void braid_profile_proxy_queue(struct braid_plan* plan, struct braid_task* tasks) {
  struct braid_comm* comm = plan->comm;
  int mask = braid_prof_mask(comm->prof), device = comm->device != NULL;
  plan->prof_proxy = NULL;
  if (plan->njobs == 0 || (!device && !(mask & OP_MASK)) || (device && !device_counts(plan))) return;
  struct proxy_ops* q = calloc(1, sizeof(*q));
  int nconn_max = 2 + 2 * (1 + BRAID_MAX_TREE_ARITY) + 2 * comm->nranks;
  struct braid_conn** conns = calloc((size_t)nconn_max, sizeof(*conns));
  int* is_send = calloc((size_t)nconn_max, sizeof(*is_send));
  size_t cap = 0, nitems = 0;
  for (int j = 0; j < plan->njobs; j++) nitems += (size_t)plan->jobs[j].nworks;
  cap = nitems * (size_t)nconn_max;
  struct braid_task** item_task = calloc(nitems + 1, sizeof(*item_task));
  if (q != NULL) q->ops = calloc(cap + 1, sizeof(*q->ops)), q->cap = (int)cap;
  if (q == NULL || conns == NULL || is_send == NULL || item_task == NULL || q->ops == NULL) {
    BRAID_WARN("PROFILER: no memory for the proxy events of rank %d's group: none emitted%s", comm->rank,
               device ? " (device mode: none from now on, its steps are not counted)" : "");
    if (device) comm->prof_proxy_off = 1;
    if (q != NULL) free(q->ops);
    free(q), free(conns), free(is_send), free(item_task);
    return;
  }
  q->device = device;
  q->push = (mask & OP_MASK) != 0;
  void* ctrl = NULL; /* ProxyCtrl Append ... AppendEnd: the ops handed to the proxies */
  if (q->push && (mask & NCCL_PROF_PROXY_CTRL)) {
    struct braid_prof_event e = {.type = NCCL_PROF_PROXY_CTRL, .rank = comm->rank};
    ctrl = braid_prof_start(comm->prof, &e);
    braid_prof_record(ctrl, BRAID_PROF_CTRL_APPEND, 0, 0, NULL);
  }
  queue_plan(q, plan, tasks, mask, item_task, conns, is_send);
  if (ctrl != NULL) {
    braid_prof_record(ctrl, BRAID_PROF_CTRL_APPEND_END, 0, 0, NULL);
    braid_prof_stop(comm->prof, ctrl);
  }
  free(conns), free(is_send), free(item_task);
  for (int i = 0; i < q->nconns && device; i++) {
    struct braid_connector* k = (struct braid_connector*)q->conns[i].conn;
    k->prof_next = q->conns[i].base + q->conns[i].total; /* the next launch's first step */
  }
  if (device && q->nops == 0) { /* counted only (the mask asks for no proxy event) */
    braid_profile_proxy_free(q);
    return;
  }
  plan->prof_proxy = q;
}

/* Device mode: stop the ops of q still open (its launch failed, or nothing waits for its
 * kernels) on every connection they are queued on. */
static void cancel_all(struct proxy_ops* q) {
  for (int i = 0; i < q->nconns; i++) {
    struct braid_connector* k = (struct braid_connector*)q->conns[i].conn;
    k->transport->prof_drain(k, 1);
  }
}

int braid_profile_proxy_left(void* ops) {
  struct proxy_ops* q = ops;
  while (q->scan < q->nops && __atomic_load_n(&q->ops[q->scan].finished, __ATOMIC_ACQUIRE)) q->scan++;
  return q->nops - q->scan; /* 0 once every op finished; else at least one is open */
}

void braid_profile_proxy_free(void* ops) {
  struct proxy_ops* q = ops;
  if (q == NULL) return;
  free(q->ops);
  free(q->conns);
  free(q);
}

/* After the run: the counts checked, the sends in flight waited for (or everything cancelled
 * when the call failed), the ops freed. */
void braid_profile_proxy_finish(struct braid_plan* plan, ncclResult_t res) {
  struct proxy_ops* q = plan->prof_proxy;
  struct braid_comm* comm = plan->comm;
  if (comm->device != NULL && res != ncclSuccess && comm->prof != NULL && !comm->prof_proxy_off) {
    comm->prof_proxy_off = 1; /* what was counted may not all be launched */
    BRAID_INFO(BRAID_LOG_PROFILE,
               "PROFILER: rank %d: a launch failed: no more ProxyOp / ProxyStep events on this communicator",
               comm->rank);
  }
  if (q == NULL) return;
  plan->prof_proxy = NULL;
  if (q->device) { /* not taken by the batch that waits for the kernels (profile_done.c) */
    cancel_all(q);
    braid_profile_proxy_free(q);
    return;
  }
  for (int i = 0; i < q->nconns; i++) {
    struct conn_use* u = &q->conns[i];
    struct braid_connector* k = (struct braid_connector*)u->conn;
    int cancel = res != ncclSuccess;
    if (!cancel && u->conn->step != u->base + u->total) {
      BRAID_WARN(
          "PROFILER: rank %d: a connection moved %llu steps where the plan counted %llu: its ProxyOp events are "
          "cut short",
          plan->comm->rank, (unsigned long long)(u->conn->step - u->base), (unsigned long long)u->total);
      cancel = 1;
    }
    int64_t until = braid_progress_clock_ns() + DRAIN_NS;
    while (k->transport->prof_drain(k, cancel) > 0) {
      if (__atomic_load_n(&plan->comm->abort_flag, __ATOMIC_ACQUIRE) || braid_progress_clock_ns() > until) cancel = 1;
      sched_yield();
    }
  }
  braid_profile_proxy_free(q);
}
