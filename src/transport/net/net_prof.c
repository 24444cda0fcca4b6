/*
 * net_prof.c - ProxyOp / ProxyStep events of network connections (net_prof.h), under the
 * connection's lock, whoever moves it (the engine thread or an executor's kick).
 *
 * The core queues, before a group runs (device mode: before each launch), one struct
 * braid_prof_op per task and connection end with the range of the connection's steps the
 * task moves (core/profile_proxy.c). The proxy looks each step it posts up in that queue:
 * the first step of an op starts its ProxyOp (parent: the task's Coll / P2p event), every
 * step a ProxyStep (parent: the ProxyOp, step number within the op, as NCCL counts them),
 * and the last step done stops the ProxyOp and takes it off the queue. States, as the ABI
 * version defines them:
 *   v4+  ProxyOp: InProgress once; ProxyStep, as NCCL's net proxy records them: send
 *        SendGPUWait then SendPeerWait at once (braid's proxy sees a step only when the
 *        executor has published it: the wait for data is not measured), SendWait (isend
 *        posted, transSize its bytes) until done; receive RecvWait (irecv posted),
 *        RecvFlushWait (received, transSize its bytes; with a GDR flush from its start),
 *        RecvGPUWait (handed to the executor, right before the stop: braid's receive proxy
 *        does not watch the executor consume a step).
 *   v1-3 on the ProxyOp with transSize and steps so far: SendPosted, SendTransmitted,
 *        SendDone; RecvPosted, RecvReceived, RecvTransmitted, RecvDone.
 * A receive posted before its op was queued (irecvs are pre-posted up to NSTEPS ahead) gets
 * its events when the op is there: at the push, in step order (received: all of them;
 * posted: its start; so later steps, posted after the push, are numbered after it).
 */
#include <string.h>
#include <unistd.h>

#include "plugin/profiler_abi.h"
#include "plugin/profiler_plugin.h"
#include "transport/net/net_internal.h"
#include "transport/prof_op.h"

__thread struct braid_net_prof_step* braid_net_prof_phandle;

#define OP_MASK (NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP | NCCL_PROF_NET_PLUGIN)
#define STEP_MASK (NCCL_PROF_PROXY_STEP | NCCL_PROF_NET_PLUGIN)

static int old_abi(void) {
  return braid_prof_version() < 4;
}

static struct braid_prof_op* op_of(struct net_res* r, uint64_t step) {
  for (struct braid_prof_op* o = r->prof_head; o != NULL; o = o->next)
    if (step >= o->first && step < o->first + o->nsteps) return o;
  return NULL;
}

static void op_start(struct braid_prof_op* o) {
  o->started = 1;
  if (!(o->mask & OP_MASK)) return;
  struct braid_prof_event e = {0};
  e.type = NCCL_PROF_PROXY_OP;
  e.parent_obj = o->parent;
  e.rank = o->rank;
  e.pid = (int)getpid();
  e.channel = o->channel;
  e.peer = o->peer;
  e.is_send = o->is_send;
  e.nsteps = (int)o->nsteps;
  e.chunk = (int)o->chunk;
  o->handle = braid_prof_start(o->prof, &e);
  if (!old_abi()) braid_prof_record(o->handle, BRAID_PROF_OP_IN_PROGRESS_V4, 0, 0, NULL);
}

/* Off the queue, ProxyOp stopped; the core may free it once `finished` reads 1. */
static void op_finish(struct net_res* r, struct braid_prof_op* o) {
  for (struct braid_prof_op** p = &r->prof_head; *p != NULL; p = &(*p)->next)
    if (*p == o) {
      *p = o->next;
      break;
    }
  if (!o->started) op_start(o); /* an op of zero steps is never queued: this is a cancel */
  if (old_abi())
    braid_prof_record(o->handle, o->is_send ? BRAID_PROF_OP_SEND_DONE : BRAID_PROF_OP_RECV_DONE, o->bytes,
                      (int)o->nstopped, NULL);
  braid_prof_stop(o->prof, o->handle);
  o->handle = NULL;
  __atomic_store_n(&o->finished, 1, __ATOMIC_RELEASE);
}

struct braid_net_prof_step* braid_net_prof_begin(struct net_res* r, uint64_t step) {
  int slot = (int)(step % BRAID_NSTEPS);
  if (r->prof_step_op[slot] != NULL && r->prof_step_no[slot] == step) return &r->prof_step[slot];
  struct braid_prof_op* o = op_of(r, step);
  if (o == NULL) return NULL;
  if (!o->started) op_start(o);
  struct braid_net_prof_step* s = &r->prof_step[slot];
  r->prof_step_op[slot] = o;
  r->prof_step_no[slot] = step;
  s->prof = o->prof;
  s->mask = o->mask;
  s->rank = o->rank;
  s->step = NULL;
  if (o->mask & STEP_MASK) {
    struct braid_prof_event e = {0};
    e.type = NCCL_PROF_PROXY_STEP;
    e.parent_obj = o->handle;
    e.rank = o->rank;
    e.step = (int)(step - o->first);
    s->step = braid_prof_start(o->prof, &e);
  }
  s->flushed = 0;
  if (o->is_send && !old_abi()) {
    braid_prof_record(s->step, BRAID_PROF_STEP_SEND_GPU_WAIT, 0, 0, NULL);
    braid_prof_record(s->step, BRAID_PROF_STEP_SEND_PEER_WAIT_V4, 0, 0, NULL);
  }
  if (o->is_send && old_abi())
    braid_prof_record(o->handle, BRAID_PROF_OP_SEND_POSTED, o->bytes, (int)(step - o->first + 1), NULL);
  return s;
}

void braid_net_prof_posted(struct net_res* r, uint64_t step, size_t size) {
  int slot = (int)(step % BRAID_NSTEPS);
  struct braid_prof_op* o = r->prof_step_op[slot];
  if (o == NULL || r->prof_step_no[slot] != step) return;
  int n = (int)(step - o->first + 1);
  if (old_abi())
    braid_prof_record(o->handle, o->is_send ? BRAID_PROF_OP_SEND_TRANSMITTED : BRAID_PROF_OP_RECV_POSTED,
                      o->bytes + (o->is_send ? size : 0), n, NULL);
  else
    braid_prof_record(r->prof_step[slot].step, o->is_send ? BRAID_PROF_STEP_SEND_WAIT : BRAID_PROF_STEP_RECV_WAIT, size,
                      0, NULL);
}

void braid_net_prof_flushing(struct net_res* r, uint64_t step, size_t size) {
  int slot = (int)(step % BRAID_NSTEPS);
  struct braid_prof_op* o = r->prof_step_op[slot];
  if (o == NULL || r->prof_step_no[slot] != step || old_abi()) return;
  braid_prof_record(r->prof_step[slot].step, BRAID_PROF_STEP_RECV_FLUSH_WAIT, size, 0, NULL);
  r->prof_step[slot].flushed = 1;
}

void braid_net_prof_done(struct net_res* r, uint64_t step, size_t size) {
  int slot = (int)(step % BRAID_NSTEPS);
  if (r->prof_step_op[slot] == NULL || r->prof_step_no[slot] != step) {
    if (braid_net_prof_begin(r, step) == NULL) return; /* a step of no queued op */
    braid_net_prof_posted(r, step, size);
  }
  struct braid_prof_op* o = r->prof_step_op[slot];
  struct braid_net_prof_step* s = &r->prof_step[slot];
  o->bytes += size;
  int n = (int)(step - o->first + 1);
  if (!o->is_send && old_abi()) {
    braid_prof_record(o->handle, BRAID_PROF_OP_RECV_RECEIVED, o->bytes, n, NULL);
    braid_prof_record(o->handle, BRAID_PROF_OP_RECV_TRANSMITTED, o->bytes, n, NULL);
  } else if (!o->is_send) {
    if (!s->flushed) braid_prof_record(s->step, BRAID_PROF_STEP_RECV_FLUSH_WAIT, size, 0, NULL);
    braid_prof_record(s->step, BRAID_PROF_STEP_RECV_GPU_WAIT, 0, 0, NULL);
  }
  braid_prof_stop(o->prof, s->step);
  s->step = NULL;
  r->prof_step_op[slot] = NULL;
  if (++o->nstopped == o->nsteps) op_finish(r, o);
}

void braid_net_prof_cancel(struct net_res* r) {
  for (int i = 0; i < BRAID_NSTEPS; i++) {
    if (r->prof_step_op[i] == NULL) continue;
    braid_prof_stop(r->prof_step_op[i]->prof, r->prof_step[i].step);
    r->prof_step[i].step = NULL;
    r->prof_step_op[i] = NULL;
  }
  while (r->prof_head != NULL) op_finish(r, r->prof_head);
}

void braid_net_prof_push(struct braid_connector* c, struct braid_prof_op* op) {
  struct net_res* r = c->res;
  op->next = NULL;
  if (r == NULL) {
    __atomic_store_n(&op->finished, 1, __ATOMIC_RELEASE);
    return;
  }
  pthread_mutex_lock(&r->lock);
  struct braid_prof_op** p = &r->prof_head;
  while (*p != NULL) p = &(*p)->next;
  *p = op;
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) {
    op_finish(r, op); /* nothing will move: the op starts and stops empty */
  } else if (!r->is_send) {
    /* Steps of this op the proxy took before it was queued (irecvs are pre-posted; the peer
     * may have sent them while this rank was still in its previous call or launch), in step
     * order: received ones get their events now, posted ones their start. */
    for (uint64_t s = op->first; s < r->posted && s < op->first + op->nsteps; s++)
      if (s < r->done)
        braid_net_prof_done(r, s, (size_t)r->ctrl->sizes[s % BRAID_NSTEPS]);
      else if (braid_net_prof_begin(r, s) != NULL)
        braid_net_prof_posted(r, s, r->stride);
  }
  pthread_mutex_unlock(&r->lock);
}

/* A v10+ plugin's own events (NCCL's ncclProfilerCallback): start under the step whose
 * handle it got with the request, when the mask asks for NetPlugin. */
ncclResult_t braid_net_prof_callback(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  if (eHandle == NULL) return ncclSuccess;
  if (type == 0) { /* ncclProfilerNetEventStart */
    struct braid_net_prof_step* s = pHandle;
    *eHandle = NULL;
    if (s == NULL || s->prof == NULL || !(s->mask & NCCL_PROF_NET_PLUGIN)) return ncclSuccess;
    struct braid_prof_event e = {0};
    e.type = NCCL_PROF_NET_PLUGIN;
    e.parent_obj = s->step;
    e.rank = s->rank;
    e.net_id = pluginId;
    e.net_data = extData;
    *eHandle = braid_prof_start(s->prof, &e);
    return ncclSuccess;
  }
  if (*eHandle == NULL) return ncclSuccess;
  if (type == 2 || type == 3) braid_prof_record(*eHandle, BRAID_PROF_NET_PLUGIN_UPDATE, 0, 0, extData);
  if (type == 1 || type == 3) braid_prof_stop(NULL, *eHandle);
  return ncclSuccess;
}
