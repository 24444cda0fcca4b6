/*
 * net_rma.c - one-sided message channels over the net plugin (transport/rma.h): what
 * ncclPutSignal / ncclSignal to a rank on another node travel on. This file: setup, the
 * connection of a pair on its first use, failure, teardown. Receive side: net_rma_recv.c;
 * send side: net_rma_send.c; what they share: net_rma_int.h.
 *
 * Per remote peer, in the communicator's plugin context of the plugin the collectives use
 * (NCCL_NET: Socket, UCX, IB): a listen comm from open (its handle allgathered by the core),
 * then, once used, a send comm (the origin connects on its first send) and a receive comm
 * (the target accepts it: its progress-engine item looks for connects every
 * RMA_ACCEPT_POLL_MS, and a thread waiting for that origin looks itself). Buffers are
 * allocated and registered when a side is made, so memory statistics count what exists.
 * A failed request (the peer died, reset, aborted) fails the peer: what is in flight is
 * dropped, later sends and polls return ncclRemoteError, the reason names the rank.
 *
 * Window registrations (plugins without HOST_ANY: IB): a direct put's chunks are sent from and
 * received into memory registered with the comm. Both ends register the whole window the put
 * comes from / lands in, once per connection side (rma_reg_get: a small cache keyed by the
 * window's span), and the core drops them (braid_rma_win_drop) at the window's deregistration,
 * after no put from or into it is in flight. Only windows are cached, because only their
 * lifetime is known: an arbitrary source may be freed and its address handed out again with
 * other pages behind it, and a registration kept from before would send the old pages. Those
 * sources take the bounce path.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket.h"
#include "transport/net/net_rma_int.h"

struct rma_addr_in {
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE];
  int32_t dev, used;
};
_Static_assert(sizeof(struct rma_addr_in) <= BRAID_RMA_ADDR_BYTES, "rma address too large");

void rma_peer_fail(struct braid_rma* rma, int r, void* comm, ncclResult_t res, const char* doing) {
  struct rma_peer* p = &rma->peers[r];
  if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_OK) return;
  struct braid_net_status st;
  memset(&st, 0, sizeof(st));
  if (comm != NULL && rma->net->getStatus != NULL) rma->net->getStatus(comm, &st);
  char who[160];
  braid_transport_peer_name(rma->t, r, who, sizeof(who));
  int closed = st.closedByPeer;
  const char* reason = st.reason[0] != '\0' ? st.reason : ncclGetErrorString(res);
  if (closed)
    snprintf(p->why, sizeof(p->why), "%s closed its one-sided connection (its communicator is gone)", who);
  else
    snprintf(p->why, sizeof(p->why), "the one-sided connection with %s %s: %s", who, doing, reason);
  __atomic_store_n(&p->state, closed ? PEER_CLOSED : PEER_FAILED, __ATOMIC_RELEASE);
  if (!closed) BRAID_WARN("NET/%s : rank %d: %s", rma->net->name, rma->t->rank, p->why);
}

ncclResult_t braid_rma_peer_error(struct braid_rma* rma, int peer, const char** why) {
  struct rma_peer* p = &rma->peers[peer];
  if (why != NULL) *why = p->why;
  if (!p->remote) {
    if (why != NULL) *why = "no one-sided connection to this rank";
    return ncclInternalError;
  }
  return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PEER_OK ? ncclSuccess : ncclRemoteError;
}

static ncclResult_t buf_alloc(char** p, size_t bytes) {
  if (posix_memalign((void**)p, 4096, bytes) == 0) return ncclSuccess;
  *p = NULL;
  BRAID_WARN("Failed to allocate %zu bytes for one-sided connection buffers", bytes);
  return ncclSystemError;
}

/* ---- window registrations ----------------------------------------------------------------- */

ncclResult_t rma_reg_get(struct braid_rma* rma, void* comm, struct rma_peer* p, struct rma_reg* regs,
                         const struct braid_rma_span* win, void** mh, int* hit) {
  int victim = 0;
  *hit = 0;
  for (int i = 0; i < RMA_NREGS; i++) {
    if (regs[i].mh != NULL && regs[i].base == win->base && regs[i].size == win->size) {
      regs[i].used = ++p->reg_clock;
      *mh = regs[i].mh;
      *hit = 1;
      return ncclSuccess;
    }
    if (regs[victim].mh != NULL && (regs[i].mh == NULL || regs[i].used < regs[victim].used)) victim = i;
  }
  struct rma_reg* e = &regs[victim];
  if (e->mh != NULL) rma->net->deregMr(comm, e->mh);
  e->mh = NULL;
  BRAID_CHECK(rma->net->regMr(comm, win->base, win->size, BRAID_NET_PTR_HOST, &e->mh));
  e->base = win->base;
  e->size = win->size;
  e->used = ++p->reg_clock;
  *mh = e->mh;
  return ncclSuccess;
}

void rma_reg_drop(struct braid_rma* rma, void* comm, struct rma_reg* regs, const void* base, size_t size) {
  const char* b = base;
  for (int i = 0; i < RMA_NREGS; i++) {
    struct rma_reg* e = &regs[i];
    if (e->mh == NULL || (size > 0 && (e->base >= b + size || e->base + e->size <= b))) continue;
    rma->net->deregMr(comm, e->mh);
    e->mh = NULL;
  }
}

void braid_rma_win_drop(struct braid_rma* rma, const void* base, size_t size) {
  if (rma == NULL || rma->peers == NULL || rma->direct || size == 0) return; /* HOST_ANY: none made */
  for (int r = 0; r < rma->t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    if (!p->remote) continue;
    pthread_mutex_lock(&p->send_lock);
    rma_reg_drop(rma, p->send_comm, p->sregs, base, size);
    pthread_mutex_unlock(&p->send_lock);
    pthread_mutex_lock(&p->recv_lock);
    rma_reg_drop(rma, p->recv_comm, p->dregs, base, size);
    pthread_mutex_unlock(&p->recv_lock);
  }
}

void braid_rma_get_stats(const struct braid_rma* rma, struct braid_rma_stats* st) {
  memset(st, 0, sizeof(*st));
  if (rma == NULL) return;
  st->direct_sent = __atomic_load_n(&rma->stats.direct_sent, __ATOMIC_RELAXED);
  st->direct_recv = __atomic_load_n(&rma->stats.direct_recv, __ATOMIC_RELAXED);
  st->src_regs = __atomic_load_n(&rma->stats.src_regs, __ATOMIC_RELAXED);
  st->src_hits = __atomic_load_n(&rma->stats.src_hits, __ATOMIC_RELAXED);
  st->dst_regs = __atomic_load_n(&rma->stats.dst_regs, __ATOMIC_RELAXED);
}

/* ---- a pair's connection, on first use ----------------------------------------------------- */

int rma_recv_ready(struct braid_rma* rma, int r) {
  struct rma_peer* p = &rma->peers[r];
  if (p->recv_comm != NULL) return 1;
  if (p->listen_comm == NULL || __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_OK) return 0;
  ncclResult_t res = rma->net->accept(p->listen_comm, &p->recv_comm);
  if (res != ncclSuccess) {
    rma_peer_fail(rma, r, NULL, res, "could not be accepted");
    return 0;
  }
  if (p->recv_comm == NULL) return 0;
  rma->net->closeListen(p->listen_comm);
  p->listen_comm = NULL;
  p->nrslots = rma->direct ? 1 : RMA_NRECV; /* HOST_ANY: frames are posted one at a time */
  size_t bytes = (size_t)p->nrslots * RMA_FRAG_BYTES;
  res = buf_alloc(&p->recv_buf, bytes);
  if (res == ncclSuccess) res = rma->net->regMr(p->recv_comm, p->recv_buf, bytes, BRAID_NET_PTR_HOST, &p->recv_mh);
  if (res != ncclSuccess) {
    rma_peer_fail(rma, r, NULL, res, "could not get receive buffers");
    return 0;
  }
  p->known_end = 1; /* the first message is a frame */
  BRAID_INFO(BRAID_LOG_NET, "NET/%s : rank %d: one-sided connection from rank %d accepted", rma->net->name,
             rma->t->rank, r);
  return 1;
}

ncclResult_t rma_send_ready(struct braid_rma* rma, int r, int64_t start) {
  struct rma_peer* p = &rma->peers[r];
  if (p->send_mh != NULL) return ncclSuccess;
  unsigned tries = 0;
  while (p->send_comm == NULL) {
    /* the same handle every time: connect may keep its state in it (net.h) */
    ncclResult_t res = rma->net->connect(braid_net_ctx_plugin(rma->ctx), p->handle_dev, p->handle, &p->send_comm);
    if (res != ncclSuccess) {
      rma_peer_fail(rma, r, NULL, res, "could not be connected");
      return rma_send_wait(rma, r, start, &tries);
    }
    if (p->send_comm == NULL) BRAID_CHECK(rma_send_wait(rma, r, start, &tries));
  }
  size_t bytes = RMA_NSEND * (size_t)RMA_FRAG_BYTES;
  BRAID_CHECK(buf_alloc(&p->send_buf, bytes));
  BRAID_CHECK(rma->net->regMr(p->send_comm, p->send_buf, bytes, BRAID_NET_PTR_HOST, &p->send_mh));
  BRAID_INFO(BRAID_LOG_NET, "NET/%s : rank %d: one-sided connection to rank %d made", rma->net->name, rma->t->rank, r);
  return ncclSuccess;
}

/* ---- setup and teardown ------------------------------------------------------------------- */

ncclResult_t braid_rma_open(const struct braid_transport_ctx* t, const int* remote, const struct braid_rma_sink* sink,
                            struct braid_rma** rma_p, struct braid_rma_addr* mine) {
  ncclResult_t res = ncclSuccess;
  struct braid_rma* rma;
  int ndev = 0;
  *rma_p = NULL;
  BRAID_CALLOC_GOTO(rma, 1, res, out);
  rma->t = t;
  rma->sink = *sink;
  BRAID_CALLOC_GOTO(rma->peers, t->nranks, res, out);
  for (int r = 0; r < t->nranks; r++) {
    pthread_mutex_init(&rma->peers[r].send_lock, NULL);
    pthread_mutex_init(&rma->peers[r].recv_lock, NULL);
  }
  *rma_p = rma;
  BRAID_CHECK_GOTO(braid_net_plugin_get(&rma->net), res, out);
  BRAID_CHECK_GOTO(rma->net->devices(&ndev), res, out);
  if (ndev < 1) {
    BRAID_WARN("NET/%s : rank %d: no network device for one-sided operations", rma->net->name, t->rank);
    res = ncclSystemError;
    goto out;
  }
  rma->dev = t->rank % ndev;
  struct braid_net_props props;
  memset(&props, 0, sizeof(props));
  BRAID_CHECK_GOTO(rma->net->getProperties(rma->dev, &props), res, out);
  rma->direct = (props.ptrSupport & BRAID_NET_PTR_HOST_ANY) != 0;
  rma->onecopy = rma->direct || (props.ptrSupport & BRAID_NET_PTR_HOST) != 0;
  BRAID_CHECK_GOTO(braid_net_ctx_get(t, rma->net, &rma->ctx), res, out);
  for (int r = 0; r < t->nranks; r++) {
    struct rma_addr_in* a = (struct rma_addr_in*)mine[r].data;
    memset(&mine[r], 0, sizeof(mine[r]));
    if (!remote[r] || r == t->rank) continue;
    rma->peers[r].remote = 1;
    BRAID_CHECK_GOTO(rma->net->listen(braid_net_ctx_plugin(rma->ctx), rma->dev, a->handle, &rma->peers[r].listen_comm),
                     res, out);
    a->dev = rma->dev;
    a->used = 1;
  }
out:
  return res; /* a failure leaves *rma_p for braid_rma_close */
}

ncclResult_t braid_rma_connect(struct braid_rma* rma, const struct braid_rma_addr* theirs) {
  const struct braid_transport_ctx* t = rma->t;
  char who[160];
  for (int r = 0; r < t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    const struct rma_addr_in* a = (const struct rma_addr_in*)theirs[r].data;
    if (!p->remote) continue;
    if (!a->used) {
      BRAID_WARN("NET/%s : rank %d: %s has no one-sided address for this rank", rma->net->name, t->rank,
                 braid_transport_peer_name(t, r, who, sizeof(who)));
      return ncclInternalError;
    }
    memcpy(p->handle, a->handle, sizeof(p->handle));
    p->handle_dev = a->dev;
    p->has_handle = 1;
  }
  rma->item.ops = &braid_rma_progress_ops;
  rma->item.arg = rma;
  BRAID_CHECK(braid_progress_add(&rma->item));
  rma->added = 1;
  return ncclSuccess;
}

size_t braid_rma_bytes(const struct braid_rma* rma) {
  size_t n = 0;
  for (int r = 0; rma != NULL && r < rma->t->nranks; r++)
    n += (rma->peers[r].send_buf != NULL ? RMA_NSEND * (size_t)RMA_FRAG_BYTES : 0) +
         (rma->peers[r].recv_buf != NULL ? (size_t)rma->peers[r].nrslots * RMA_FRAG_BYTES : 0);
  return n;
}

int braid_rma_connections(const struct braid_rma* rma) {
  int n = 0;
  for (int r = 0; rma != NULL && r < rma->t->nranks; r++)
    n += (rma->peers[r].send_comm != NULL) + (rma->peers[r].recv_comm != NULL);
  return n;
}

const char* braid_rma_net_name(const struct braid_rma* rma) {
  return rma != NULL && rma->net != NULL ? rma->net->name : "?";
}

void braid_rma_close(struct braid_rma* rma) {
  if (rma == NULL) return;
  if (rma->added) braid_progress_remove(&rma->item);
  int aborted = __atomic_load_n(rma->t->abort_flag, __ATOMIC_ACQUIRE) != 0;
  for (int r = 0; rma->peers != NULL && r < rma->t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    int ok = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PEER_OK;
    if (p->send_comm != NULL && ok && !aborted && rma->net->finishSend != NULL) rma->net->finishSend(p->send_comm);
    if (p->send_comm != NULL && ok && aborted && rma->net->abortSend != NULL) rma->net->abortSend(p->send_comm, 0);
    if (p->send_comm != NULL) rma_reg_drop(rma, p->send_comm, p->sregs, NULL, 0);
    if (p->recv_comm != NULL) rma_reg_drop(rma, p->recv_comm, p->dregs, NULL, 0);
    if (p->send_mh != NULL) rma->net->deregMr(p->send_comm, p->send_mh);
    if (p->recv_mh != NULL) rma->net->deregMr(p->recv_comm, p->recv_mh);
    if (p->send_comm != NULL) rma->net->closeSend(p->send_comm);
    if (p->recv_comm != NULL) rma->net->closeRecv(p->recv_comm); /* nothing lands after this */
    if (p->listen_comm != NULL) rma->net->closeListen(p->listen_comm);
    rma_recv_drop(rma, r);
    free(p->send_buf);
    free(p->recv_buf);
    pthread_mutex_destroy(&p->send_lock);
    pthread_mutex_destroy(&p->recv_lock);
  }
  if (rma->ctx != NULL) braid_net_ctx_put(rma->ctx);
  free(rma->peers);
  free(rma);
}
