/*
 * net_proxy.c - moving the steps of network connections (net_internal.h): the transport's
 * `progress` and `wait` slots, which the progress engine (transport/progress.h) calls for
 * every connected end, the executor's kicks, and failure reports.
 *
 * Who moves a connection: whoever holds its lock. In host mode that is mostly the executor
 * itself: braid_conn.host_kick runs when it publishes, releases or waits on a network
 * connection and moves that connection right there (a step leaves with the executor's own
 * sendmsg, a waiting executor reads its own socket), so the critical path has no thread
 * hand-off (on a small machine the two threads would also fight for one core). The engine
 * thread moves the rest: sends that could not leave at once, data arriving while no executor
 * waits, and everything once device kernels, which cannot kick, fill the FIFOs.
 *
 * Before the engine sleeps, a connection names the descriptors the plugin gives for its
 * requests in flight (waitFds: data arriving, room to send, helper threads done), except a
 * receive connection an executor moved in the last DRIVEN_NS, which asks to be looked at again
 * when that window ends instead.
 *
 * Idle connections cost nothing. Testing a host receive connection means a recv() that finds
 * nothing (the Socket plugin), so one whose last test by the engine found nothing is "quiet":
 * passes skip it until poll() reports its descriptors ready (BRAID_PROGRESS_WOKEN) or an
 * executor moves it (kicked in the last DRIVEN_NS). Its descriptors stay in the poll set, and
 * poll() is level-triggered, so data or a failure that comes while it is quiet wakes the
 * thread and ends the quiet. Without this, every pass paid a system call per idle connection:
 * after a first tree all-reduce its connections sat idle through every later ring call (4 fake
 * nodes: six per rank). An executor's own kicks always test (it waits on that connection), so
 * a quiet connection never stalls a host collective.
 *
 * Device connections (r->device): a kernel fills and drains the FIFO and never kicks, so they
 * are device items of the engine, and report BRAID_PROGRESS_BUSY while steps are in flight:
 * published and not yet sent, or received steps the kernel still holds (it will release them,
 * and the receives behind them must be posted).
 *
 * Failures. A request that fails breaks its connection: the plugin says why (getStatus). A
 * peer that finished cleanly (it destroyed its communicator) only marks the connection: a
 * collective still waiting on it is a mismatch of calls, which BRAID_TIMEOUT bounds. Anything
 * else fails the communicator (ctx->fail, BRAID_EXEC_PEER_FAILED), naming a dead peer on this
 * machine first when the watchdog knows one (ctx->dead_peer), so the executor's waits return
 * and the call reports the message.
 */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "transport/net/net_internal.h"
#include "transport/prof_op.h"

#define DRIVEN_NS 2000000LL /* a receive connection an executor moved this recently is its own */

/* ---- failures ------------------------------------------------------------------------------ */

/* A request on r failed (r->err): say so, fail the communicator unless the peer merely left.
 * Called once per connection (r->reported), without r->lock. */
static void conn_report(struct net_res* r) {
  const struct braid_transport_ctx* t = r->tctx;
  struct braid_net_status st;
  char who[160], dead_who[160];
  ncclResult_t res = r->err;
  const char* doing = r->err_doing;
  memset(&st, 0, sizeof(st));
  pthread_mutex_lock(&r->lock);
  if (r->net->getStatus != NULL) r->net->getStatus(r->net_comm, &st);
  pthread_mutex_unlock(&r->lock);
  snprintf(r->reason, sizeof(r->reason), "%s", st.reason[0] ? st.reason : ncclGetErrorString(res));
  const char* side = r->is_send ? "send" : "receive";
  braid_transport_peer_name(t, r->peer, who, sizeof(who));
  if (res == ncclRemoteError && st.closedByPeer) {
    __atomic_store_n(&r->state, NET_STATE_PEER_CLOSED, __ATOMIC_RELEASE);
    BRAID_INFO(BRAID_LOG_NET, "NET/%s : rank %d: %s closed the connection of channel %d/%d (%s side)", r->desc, t->rank,
               who, r->channel, r->conn_index, side);
    return;
  }
  __atomic_store_n(&r->state, NET_STATE_FAILED, __ATOMIC_RELEASE);
  if (st.peerAborted) {
    /* It gave up, and said whom it blames (code: rank + 1; 0: its own user aborted). */
    int culprit = st.abortCode > 0 && st.abortCode <= t->nranks ? st.abortCode - 1 : -1;
    if (culprit >= 0 && culprit != t->rank)
      braid_transport_fail(t, BRAID_EXEC_PEER_FAILED, ncclRemoteError, culprit,
                           "rank %d: %s failed (reported by %s, which aborted: NET/%s channel %d, %s side)", t->rank,
                           braid_transport_peer_name(t, culprit, dead_who, sizeof(dead_who)), who, r->desc, r->channel,
                           side);
    else
      braid_transport_fail(t, BRAID_EXEC_PEER_FAILED, ncclRemoteError, r->peer,
                           "rank %d: %s aborted its communicator (NET/%s channel %d, %s side, while %s)", t->rank, who,
                           r->desc, r->channel, side, doing);
    return;
  }
  int dead = t->dead_peer != NULL ? t->dead_peer(t->owner) : -1;
  if (dead >= 0 && dead != r->peer)
    braid_transport_fail(t, BRAID_EXEC_PEER_FAILED, ncclRemoteError, dead,
                         "rank %d: %s died (detected when %s %s: NET/%s channel %d, %s side, while %s)", t->rank,
                         braid_transport_peer_name(t, dead, dead_who, sizeof(dead_who)), who, r->reason, r->desc,
                         r->channel, side, doing);
  else
    braid_transport_fail(t, BRAID_EXEC_PEER_FAILED, res == ncclRemoteError ? ncclRemoteError : ncclSystemError, r->peer,
                         "rank %d: %s%s %s (NET/%s channel %d, %s side, while %s)", t->rank, who,
                         dead == r->peer ? " died:" : "", r->reason, r->desc, r->channel, side, doing);
}

/* Report r's failure if it has one nobody reported yet; 1 if it did. */
static int conn_report_once(struct net_res* r) {
  if (r->err == ncclSuccess || __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_FAILED) return 0;
  if (__atomic_exchange_n(&r->reported, 1, __ATOMIC_ACQ_REL)) return 0;
  conn_report(r);
  return 1;
}

/* Under r->lock: remember the failure, stop moving r; conn_report tells. */
static int conn_broke(struct net_res* r, ncclResult_t res, const char* doing) {
  r->err = res;
  r->err_doing = doing;
  __atomic_store_n(&r->state, NET_STATE_FAILED, __ATOMIC_RELEASE);
  return 1;
}

/* ---- moving steps (under r->lock) ---------------------------------------------------------- */

static int progress_send(struct net_res* r) {
  int did = 0;
  uint64_t tail = __atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE);
  while (r->posted < tail) {
    int slot = (int)(r->posted % BRAID_NSTEPS);
    size_t size = (size_t)r->ctrl->sizes[slot];
    void* req = NULL;
    if (size > r->stride) {
      BRAID_WARN("NET/%s : step %llu of channel %d holds %zu bytes, more than its %zu-byte slot", r->desc,
                 (unsigned long long)r->posted, r->channel, size, r->stride);
      return conn_broke(r, ncclInternalError, "sending");
    }
    /* A direct step (kernels/direct.h) names its payload in user memory. */
    uint64_t ptr = r->ctrl->ptrs[slot];
    void* data = ptr != 0 ? (void*)(uintptr_t)ptr : (void*)(r->buff + (size_t)slot * r->stride);
    int prof = r->prof_head != NULL; /* a profiler's op is queued (net_prof.h) */
    if (prof) braid_net_prof_phandle = braid_net_prof_begin(r, r->posted);
    ncclResult_t res = r->net->isend(r->net_comm, data, size, 0, r->mhandle, &req);
    if (prof) braid_net_prof_phandle = NULL;
    if (res != ncclSuccess) return conn_broke(r, res, "sending");
    if (req == NULL) break;
    if (prof) braid_net_prof_posted(r, r->posted, size);
    r->reqs[slot] = req;
    r->posted++;
    did = 1;
  }
  while (r->done < r->posted) {
    int done = 0;
    ncclResult_t res = r->net->test(r->reqs[r->done % BRAID_NSTEPS], &done, NULL);
    if (res != ncclSuccess) return conn_broke(r, res, "sending");
    if (!done) break;
    BRAID_TRACE(BRAID_LOG_NET | BRAID_LOG_PROXY, "NET/%s : rank %d -> %d channel %d/%d: sent step %llu (%llu bytes)",
                r->desc, r->tctx->rank, r->peer, r->channel, r->conn_index, (unsigned long long)r->done,
                (unsigned long long)r->ctrl->sizes[r->done % BRAID_NSTEPS]);
    if (r->prof_head != NULL) braid_net_prof_done(r, r->done, (size_t)r->ctrl->sizes[r->done % BRAID_NSTEPS]);
    r->ctrl->ptrs[r->done % BRAID_NSTEPS] = 0; /* the slot's next step says again, if direct */
    r->done++;
    /* The slot is free again, and a direct step's source no longer read (direct.h). */
    __atomic_store_n(&r->ctrl->head, r->done, __ATOMIC_RELEASE);
    did = 1;
  }
  return did;
}

static int progress_recv(struct net_res* r) {
  int did = 0;
  uint64_t limit = __atomic_load_n(&r->ctrl->head, __ATOMIC_ACQUIRE) + BRAID_NSTEPS;
  if (r->rdirect) {
    uint64_t want = __atomic_load_n(&r->ctrl->want, __ATOMIC_ACQUIRE); /* ptrs, sizes before it */
    if (want < limit) limit = want;
  }
  while (r->posted < limit) {
    int slot = (int)(r->posted % BRAID_NSTEPS), tag = 0;
    void* data = r->buff + (size_t)slot * r->stride;
    size_t size = r->stride;
    void* req = NULL;
    if (r->rdirect && r->ctrl->ptrs[slot] != 0) { /* declared into user memory */
      data = (void*)(uintptr_t)r->ctrl->ptrs[slot];
      size = (size_t)r->ctrl->sizes[slot];
    }
    int prof = r->prof_head != NULL; /* a profiler's op is queued (net_prof.h) */
    if (prof) braid_net_prof_phandle = braid_net_prof_begin(r, r->posted);
    ncclResult_t res = r->net->irecv(r->net_comm, 1, &data, &size, &tag, &r->mhandle, &req);
    if (prof) braid_net_prof_phandle = NULL;
    if (res != ncclSuccess) return conn_broke(r, res, "receiving");
    if (req == NULL) break;
    if (prof) braid_net_prof_posted(r, r->posted, size);
    r->reqs[slot] = req;
    r->posted++;
    did = 1;
  }
  while (r->done < r->posted) {
    int done = 0, slot = (int)(r->done % BRAID_NSTEPS);
    size_t got = 0;
    if (r->flush_req == NULL) {
      ncclResult_t res = r->net->test(r->reqs[slot], &done, &got);
      if (res != ncclSuccess) return conn_broke(r, res, "receiving");
      if (!done) break;
      if (r->flush && got > 0) { /* GPUDirect RDMA: the bytes must be in GPU memory first */
        void* data = r->buff + (size_t)slot * r->stride;
        res = r->net->iflush(r->net_comm, 1, &data, &got, &r->mhandle, &r->flush_req);
        if (res != ncclSuccess) return conn_broke(r, res, "flushing");
        r->flush_got = got;
        if (r->prof_head != NULL) braid_net_prof_flushing(r, r->done, got);
        did = 1;
      }
    }
    if (r->flush_req != NULL) {
      ncclResult_t res = r->net->test(r->flush_req, &done, NULL);
      if (res != ncclSuccess) return conn_broke(r, res, "flushing");
      if (!done) break;
      r->flush_req = NULL;
      got = r->flush_got;
    }
    BRAID_TRACE(BRAID_LOG_NET | BRAID_LOG_PROXY, "NET/%s : rank %d <- %d channel %d/%d: received step %llu (%zu bytes)",
                r->desc, r->tctx->rank, r->peer, r->channel, r->conn_index, (unsigned long long)r->done, got);
    r->ctrl->sizes[slot] = got;
    if (r->prof_head != NULL) braid_net_prof_done(r, r->done, got);
    r->done++;
    __atomic_store_n(&r->ctrl->tail, r->done, __ATOMIC_RELEASE); /* the executor may read it */
    did = 1;
  }
  return did;
}

/* One attempt at r if nobody else is moving it. */
static int progress_one(struct net_res* r) {
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) return 0;
  if (pthread_mutex_trylock(&r->lock) != 0) return 0;
  int did = 0;
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE)
    did = r->is_send ? progress_send(r) : progress_recv(r);
  pthread_mutex_unlock(&r->lock);
  return did;
}

/* The engine's attempt at r (progress_one), skipping a quiet host receive connection that no
 * executor drives; a test of one that finds nothing makes it quiet. */
static int engine_move(struct net_res* r, int64_t now) {
  int host_recv = !r->is_send && !r->device;
  if (host_recv && __atomic_load_n(&r->quiet, __ATOMIC_RELAXED) &&
      now - __atomic_load_n(&r->kicked, __ATOMIC_RELAXED) >= DRIVEN_NS)
    return 0;
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) return 0;
  if (pthread_mutex_trylock(&r->lock) != 0) return 0;
  int did = 0;
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE) {
    did = r->is_send ? progress_send(r) : progress_recv(r);
    if (host_recv) __atomic_store_n(&r->quiet, !did && r->posted != r->done, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&r->lock);
  return did;
}

/* A device connection with steps in flight that only polling moves on. */
static int device_busy(const struct net_res* r) {
  if (r->is_send) return __atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE) > r->done;
  return __atomic_load_n(&r->ctrl->head, __ATOMIC_ACQUIRE) < r->done;
}

/* ---- the progress engine's view ------------------------------------------------------------ */

int braid_net_progress(struct braid_connector* c, int64_t now, unsigned flags) {
  struct net_res* r = c->res;
  if (flags & BRAID_PROGRESS_WOKEN) __atomic_store_n(&r->quiet, 0, __ATOMIC_RELAXED);
  int out = engine_move(r, now) ? BRAID_PROGRESS_MOVED : 0;
  if (r->device && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE && device_busy(r))
    out |= BRAID_PROGRESS_BUSY;
  if (conn_report_once(r)) out |= BRAID_PROGRESS_MOVED;
  return out;
}

void braid_net_wait(struct braid_connector* c, int64_t now, struct braid_progress_wait* w) {
  struct net_res* r = c->res;
  __atomic_store_n(&r->polled, 0, __ATOMIC_RELAXED);
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) return;
  /* A receive connection an executor is moving itself: its data would only wake the thread
   * for nothing; a send that cannot leave yet is watched in any case. */
  int64_t driven = __atomic_load_n(&r->kicked, __ATOMIC_RELAXED) + DRIVEN_NS - now;
  if (!r->is_send && driven > 0) {
    int ms = (int)(driven / 1000000) + 1;
    if (w->timeout_ms < 0 || ms < w->timeout_ms) w->timeout_ms = ms;
    return;
  }
  if (pthread_mutex_trylock(&r->lock) != 0) {
    w->blind = 1; /* the executor has it right now */
    return;
  }
  if (r->posted != r->done) {
    int k = 0;
    if (r->net->waitFds == NULL || r->net->waitFds(r->net_comm, w->fds, BRAID_PROGRESS_MAX_FDS, &k) != ncclSuccess)
      w->blind = 1;
    else
      w->nfds = k;
  }
  __atomic_store_n(&r->polled, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&r->lock);
}

/* ---- the executor's calls (host mode) ------------------------------------------------------ */

void braid_net_kick_conn(struct braid_conn* c) {
  struct net_res* r = ((struct braid_connector*)c)->res; /* conn is the connector's first member */
  if (r == NULL) return;
  int did = progress_one(r);
  if (did) __atomic_store_n(&r->kicked, braid_progress_clock_ns(), __ATOMIC_RELAXED);
  if (conn_report_once(r)) return;
  /* A send that could not leave is the engine thread's: wake it if it sleeps without watching
   * r (Dekker with the thread: we stored tail/head, it stores `sleeping`, then each reads). A
   * receive is this executor's while it waits, and the thread looks again DRIVEN_NS later. */
  if (!r->is_send) return;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (braid_progress_asleep() && !__atomic_load_n(&r->polled, __ATOMIC_RELAXED) &&
      __atomic_load_n(&r->posted, __ATOMIC_RELAXED) != __atomic_load_n(&r->done, __ATOMIC_RELAXED))
    braid_progress_wake();
}

void braid_net_abandon_conn(struct braid_conn* c) {
  struct net_res* r = ((struct braid_connector*)c)->res;
  if (r == NULL) return;
  pthread_mutex_lock(&r->lock);
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE && r->posted != r->done) {
    snprintf(r->reason, sizeof(r->reason), "abandoned with a receive in flight (the call failed)");
    __atomic_store_n(&r->reported, 1, __ATOMIC_RELEASE); /* the call's failure is reported already */
    __atomic_store_n(&r->state, NET_STATE_FAILED, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&r->lock);
}

/* ---- the profiler's drain (net_prof.c has the events) --------------------------------------- */

/* The transport's prof_drain slot: move r now (its ops finish as their steps complete); a
 * cancel, or a connection that no longer moves, stops what is open. The ops left. */
int braid_net_prof_drain(struct braid_connector* c, int cancel) {
  struct net_res* r = c->res;
  if (r == NULL) return 0;
  if (!cancel) progress_one(r);
  conn_report_once(r);
  pthread_mutex_lock(&r->lock);
  if (cancel || __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) braid_net_prof_cancel(r);
  int left = 0;
  for (struct braid_prof_op* o = r->prof_head; o != NULL; o = o->next) left++;
  pthread_mutex_unlock(&r->lock);
  return left;
}

/* ---- registration -------------------------------------------------------------------------- */

ncclResult_t braid_net_proxy_add(struct net_res* r) {
  __atomic_store_n(&r->state, NET_STATE_ACTIVE, __ATOMIC_RELEASE);
  ncclResult_t res = braid_progress_add_conn(r->connector, r->device);
  if (res != ncclSuccess) __atomic_store_n(&r->state, NET_STATE_SETUP, __ATOMIC_RELEASE);
  return res;
}

void braid_net_proxy_remove(struct net_res* r) {
  braid_progress_remove_conn(r->connector);
  /* An executor's kick may still be inside (executors are done with it by now). */
  pthread_mutex_lock(&r->lock);
  if (r->prof_head != NULL) braid_net_prof_cancel(r);
  pthread_mutex_unlock(&r->lock);
}
