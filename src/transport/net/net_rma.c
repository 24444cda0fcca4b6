/*
 * net_rma.c - one-sided message channels over the net plugin (transport/rma.h): what
 * ncclPutSignal / ncclSignal to a rank on another node travel on.
 *
 * Per remote peer: a send comm (to its listen handle) and a receive comm (from ours), of the
 * plugin the collectives use (NCCL_NET: Socket, UCX, IB), in the communicator's plugin
 * context. Every net message is one fragment: a frame (where it starts in its message's
 * payload, how long, last or not, the core's header) then up to RMA_FRAG_PAYLOAD bytes.
 *   receive side: RMA_NRECV irecvs of RMA_FRAG_BYTES are kept posted into a registered
 *     bounce buffer; completed ones are delivered in order (requests of one comm complete in
 *     posting order) and posted again. Whoever holds the peer's recv_lock does this: the
 *     progress engine (an item per channel set, sleeping on the plugin's waitFds), or a
 *     thread waiting for a signal of that peer (braid_rma_poll, so a waiter needs no thread
 *     hand-off);
 *   send side: the caller, under the peer's send_lock: fragments are copied into RMA_NSEND
 *     registered slots and isent, two in flight; the call returns when all completed.
 * A failed request (the peer died, reset, aborted) fails the peer: what is in flight is
 * dropped, later sends and polls return ncclRemoteError, the reason names the rank.
 */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket.h"
#include "transport/net/net_internal.h"
#include "transport/progress.h"
#include "transport/rma.h"

#define RMA_FRAG_BYTES (256u << 10)
#define RMA_NRECV 4
#define RMA_NSEND 2
#define RMA_DRIVEN_NS 2000000LL /* a receive side a waiter moved this recently is the waiter's */

struct rma_frame {
  uint64_t frag_off;
  uint32_t len, last;
  unsigned char hdr[BRAID_RMA_HDR_BYTES];
};
#define RMA_FRAG_PAYLOAD (RMA_FRAG_BYTES - sizeof(struct rma_frame))

struct rma_addr_in {
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE];
  int32_t dev, used;
};
_Static_assert(sizeof(struct rma_addr_in) <= BRAID_RMA_ADDR_BYTES, "rma address too large");

enum { PEER_OK = 0, PEER_FAILED, PEER_CLOSED };

struct rma_peer {
  int remote;
  void *listen_comm, *send_comm, *recv_comm;
  void *send_mh, *recv_mh;
  char *send_buf, *recv_buf;
  void* rreq[RMA_NRECV];
  uint64_t rposted, rdone;
  pthread_mutex_t send_lock, recv_lock;
  int state;      /* PEER_* (atomic) */
  int64_t driven; /* (atomic) when a waiter last moved it: the engine leaves it to the waiter */
  char why[400];
};

struct braid_rma {
  const struct braid_transport_ctx* t;
  const struct braid_net_v1* net;
  struct net_ctx* ctx;
  int dev, added;
  braid_rma_deliver_fn deliver;
  void* arg;
  struct rma_peer* peers; /* [nranks] */
  struct braid_progress_item item;
};

static void peer_fail(struct braid_rma* rma, int r, void* comm, ncclResult_t res, const char* doing) {
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

/* ---- receive side ------------------------------------------------------------------------- */

/* Post free slots, deliver completed ones (caller holds recv_lock). 1 when something moved. */
static int recv_move(struct braid_rma* rma, int r) {
  struct rma_peer* p = &rma->peers[r];
  int moved = 0;
  for (;;) {
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_OK) return moved;
    while (p->rposted < p->rdone + RMA_NRECV) {
      int slot = (int)(p->rposted % RMA_NRECV);
      void* data = p->recv_buf + (size_t)slot * RMA_FRAG_BYTES;
      size_t size = RMA_FRAG_BYTES;
      int tag = 0;
      void* req = NULL;
      ncclResult_t res = rma->net->irecv(p->recv_comm, 1, &data, &size, &tag, &p->recv_mh, &req);
      if (res != ncclSuccess) {
        peer_fail(rma, r, p->recv_comm, res, "failed to post a receive");
        return 1;
      }
      if (req == NULL) break;
      p->rreq[slot] = req;
      p->rposted++;
    }
    if (p->rdone == p->rposted) return moved;
    int slot = (int)(p->rdone % RMA_NRECV), done = 0;
    size_t got = 0;
    ncclResult_t res = rma->net->test(p->rreq[slot], &done, &got);
    if (res != ncclSuccess) {
      peer_fail(rma, r, p->recv_comm, res, "broke while receiving");
      return 1;
    }
    if (!done) return moved;
    p->rreq[slot] = NULL;
    p->rdone++;
    moved = 1;
    const struct rma_frame* f = (const struct rma_frame*)(p->recv_buf + (size_t)slot * RMA_FRAG_BYTES);
    if (got < sizeof(*f) || f->len > got - sizeof(*f)) {
      peer_fail(rma, r, NULL, ncclInternalError, "sent a malformed fragment");
      return 1;
    }
    res = rma->deliver(rma->arg, r, f->hdr, f->frag_off, f + 1, f->len, (int)f->last);
    if (res != ncclSuccess) peer_fail(rma, r, NULL, res, "sent a one-sided operation this rank refused");
  }
}

static int rma_progress(struct braid_progress_item* it, int64_t now, unsigned flags) {
  struct braid_rma* rma = it->arg;
  int moved = 0;
  for (int r = 0; r < rma->t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    if (p->recv_comm == NULL || now - __atomic_load_n(&p->driven, __ATOMIC_RELAXED) < RMA_DRIVEN_NS ||
        pthread_mutex_trylock(&p->recv_lock) != 0)
      continue;
    moved |= recv_move(rma, r);
    pthread_mutex_unlock(&p->recv_lock);
  }
  return moved ? BRAID_PROGRESS_MOVED : 0;
}

/* Sleep on the receive comms' descriptors; one more pass after asking for them (net.h). */
static void rma_wait(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* w) {
  struct braid_rma* rma = it->arg;
  int nfds = 0;
  for (int r = 0; r < rma->t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    if (p->recv_comm == NULL || __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_OK) continue;
    int64_t driven = __atomic_load_n(&p->driven, __ATOMIC_RELAXED) + RMA_DRIVEN_NS - now;
    if (driven > 0) { /* a waiter moves it: look again once it may have left */
      int ms = (int)(driven / 1000000) + 1;
      if (w->timeout_ms < 0 || ms < w->timeout_ms) w->timeout_ms = ms;
      continue;
    }
    if (pthread_mutex_trylock(&p->recv_lock) != 0) {
      w->blind = 1; /* a waiter is moving it */
      continue;
    }
    int k = 0;
    if (rma->net->waitFds == NULL || nfds >= BRAID_PROGRESS_MAX_FDS ||
        rma->net->waitFds(p->recv_comm, w->fds + nfds, BRAID_PROGRESS_MAX_FDS - nfds, &k) != ncclSuccess)
      w->blind = 1;
    else
      nfds += k;
    if (recv_move(rma, r)) w->timeout_ms = 0;
    pthread_mutex_unlock(&p->recv_lock);
  }
  w->nfds = nfds;
}

static const struct braid_progress_ops rma_ops = {rma_progress, rma_wait};

ncclResult_t braid_rma_poll(struct braid_rma* rma, int peer) {
  struct rma_peer* p = &rma->peers[peer];
  if (p->recv_comm != NULL && pthread_mutex_trylock(&p->recv_lock) == 0) {
    __atomic_store_n(&p->driven, braid_progress_clock_ns(), __ATOMIC_RELAXED);
    recv_move(rma, peer);
    pthread_mutex_unlock(&p->recv_lock);
  }
  return braid_rma_peer_error(rma, peer, NULL);
}

ncclResult_t braid_rma_wait(struct braid_rma* rma, int peer, int timeout_us) {
  struct rma_peer* p = &rma->peers[peer];
  if (p->recv_comm == NULL || pthread_mutex_trylock(&p->recv_lock) != 0) {
    sched_yield(); /* the engine is delivering */
    return braid_rma_peer_error(rma, peer, NULL);
  }
  __atomic_store_n(&p->driven, braid_progress_clock_ns(), __ATOMIC_RELAXED);
  struct pollfd fds[BRAID_PROGRESS_MAX_FDS];
  int k = 0;
  /* Ask for the descriptors, then look once more before sleeping (net.h: waitFds). */
  if (!recv_move(rma, peer) && __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PEER_OK && rma->net->waitFds != NULL &&
      rma->net->waitFds(p->recv_comm, fds, BRAID_PROGRESS_MAX_FDS, &k) == ncclSuccess && k > 0 &&
      !recv_move(rma, peer)) {
    /* Short (the caller's choice): a plugin whose descriptors miss wake-ups (UCX's, when
     * test() consumed the event after waitFds armed it) costs at most this per message. */
    struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000};
    (void)ppoll(fds, (nfds_t)k, &ts, NULL);
  }
  recv_move(rma, peer);
  pthread_mutex_unlock(&p->recv_lock);
  return braid_rma_peer_error(rma, peer, NULL);
}

ncclResult_t braid_rma_peer_error(struct braid_rma* rma, int peer, const char** why) {
  struct rma_peer* p = &rma->peers[peer];
  if (why != NULL) *why = p->why;
  if (p->send_comm == NULL || p->recv_comm == NULL) {
    if (why != NULL) *why = "no one-sided connection to this rank";
    return ncclInternalError;
  }
  return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PEER_OK ? ncclSuccess : ncclRemoteError;
}

/* ---- send side ---------------------------------------------------------------------------- */

/* Between two tries: abort flag, peer failure, BRAID_TIMEOUT (0: none). */
static ncclResult_t send_wait(struct braid_rma* rma, int r, int64_t start, unsigned* tries) {
  const struct braid_transport_ctx* t = rma->t;
  char who[160];
  const char* why;
  if (braid_rma_peer_error(rma, r, &why) != ncclSuccess) {
    BRAID_WARN("NET/%s : rank %d: one-sided send: %s", rma->net->name, t->rank, why);
    return ncclRemoteError;
  }
  if (__atomic_load_n(t->abort_flag, __ATOMIC_ACQUIRE)) {
    BRAID_WARN("NET/%s : rank %d: one-sided send to %s: the communicator was aborted", rma->net->name, t->rank,
               braid_transport_peer_name(t, r, who, sizeof(who)));
    return ncclInvalidUsage;
  }
  int64_t limit = braid_param_int(BRAID_PARAM_TIMEOUT);
  if (limit > 0 && (*tries & 255) == 0 && braid_socket_clock_ns() - start > limit * 1000000000LL) {
    BRAID_WARN("NET/%s : rank %d: BRAID_TIMEOUT=%lld s: a one-sided send to %s did not complete", rma->net->name,
               t->rank, (long long)limit, braid_transport_peer_name(t, r, who, sizeof(who)));
    return ncclSystemError;
  }
  if ((*tries)++ < 1000)
    sched_yield();
  else
    usleep(50);
  return ncclSuccess;
}

/* Test one send request until it completes. */
static ncclResult_t send_complete(struct braid_rma* rma, int r, void* req, int64_t start) {
  struct rma_peer* p = &rma->peers[r];
  unsigned tries = 0;
  for (;;) {
    int done = 0;
    ncclResult_t res = rma->net->test(req, &done, NULL);
    if (res != ncclSuccess) {
      peer_fail(rma, r, p->send_comm, res, "broke while sending");
      return send_wait(rma, r, start, &tries);
    }
    if (done) return ncclSuccess;
    BRAID_CHECK(send_wait(rma, r, start, &tries));
  }
}

static ncclResult_t send_locked(struct braid_rma* rma, int r, const void* hdr, const char* data, size_t bytes) {
  struct rma_peer* p = &rma->peers[r];
  void* reqs[RMA_NSEND] = {NULL};
  int64_t start = braid_socket_clock_ns();
  ncclResult_t res = ncclSuccess;
  uint64_t off = 0;
  unsigned k = 0;
  do {
    int slot = (int)(k % RMA_NSEND);
    if (reqs[slot] != NULL) BRAID_CHECK(send_complete(rma, r, reqs[slot], start));
    reqs[slot] = NULL;
    size_t len = bytes - off < RMA_FRAG_PAYLOAD ? bytes - off : RMA_FRAG_PAYLOAD;
    struct rma_frame* f = (struct rma_frame*)(p->send_buf + (size_t)slot * RMA_FRAG_BYTES);
    f->frag_off = off;
    f->len = (uint32_t)len;
    f->last = off + len == bytes;
    memcpy(f->hdr, hdr, BRAID_RMA_HDR_BYTES);
    if (len > 0) memcpy(f + 1, data + off, len);
    unsigned tries = 0;
    for (;;) {
      res = rma->net->isend(p->send_comm, f, sizeof(*f) + len, 0, p->send_mh, &reqs[slot]);
      if (res != ncclSuccess) {
        peer_fail(rma, r, p->send_comm, res, "broke while sending");
        return send_wait(rma, r, start, &tries);
      }
      if (reqs[slot] != NULL) break;
      BRAID_CHECK(send_wait(rma, r, start, &tries));
    }
    off += len;
    k++;
  } while (off < bytes);
  for (int i = 0; i < RMA_NSEND; i++)
    if (reqs[(k + i) % RMA_NSEND] != NULL) BRAID_CHECK(send_complete(rma, r, reqs[(k + i) % RMA_NSEND], start));
  return ncclSuccess;
}

ncclResult_t braid_rma_send(struct braid_rma* rma, int peer, const void* hdr, const void* data, size_t bytes) {
  struct rma_peer* p = &rma->peers[peer];
  const char* why;
  if (braid_rma_peer_error(rma, peer, &why) != ncclSuccess) {
    BRAID_WARN("NET/%s : rank %d: one-sided send: %s", rma->net->name, rma->t->rank, why);
    return ncclRemoteError;
  }
  pthread_mutex_lock(&p->send_lock);
  ncclResult_t res = send_locked(rma, peer, hdr, data, bytes);
  pthread_mutex_unlock(&p->send_lock);
  return res;
}

/* ---- setup and teardown ------------------------------------------------------------------- */

ncclResult_t braid_rma_open(const struct braid_transport_ctx* t, const int* remote, braid_rma_deliver_fn deliver,
                            void* arg, struct braid_rma** rma_p, struct braid_rma_addr* mine) {
  ncclResult_t res = ncclSuccess;
  struct braid_rma* rma;
  int ndev = 0;
  *rma_p = NULL;
  BRAID_CALLOC_GOTO(rma, 1, res, out);
  rma->t = t;
  rma->deliver = deliver;
  rma->arg = arg;
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

static ncclResult_t buf_alloc(char** p, size_t bytes) {
  if (posix_memalign((void**)p, 4096, bytes) == 0) return ncclSuccess;
  *p = NULL;
  BRAID_WARN("Failed to allocate %zu bytes for one-sided connection buffers", bytes);
  return ncclSystemError;
}

/* Both comms of a connected peer: buffers, registrations. */
static ncclResult_t peer_start(struct braid_rma* rma, struct rma_peer* p) {
  BRAID_CHECK(buf_alloc(&p->send_buf, RMA_NSEND * (size_t)RMA_FRAG_BYTES));
  BRAID_CHECK(buf_alloc(&p->recv_buf, RMA_NRECV * (size_t)RMA_FRAG_BYTES));
  BRAID_CHECK(
      rma->net->regMr(p->send_comm, p->send_buf, RMA_NSEND * (size_t)RMA_FRAG_BYTES, BRAID_NET_PTR_HOST, &p->send_mh));
  BRAID_CHECK(
      rma->net->regMr(p->recv_comm, p->recv_buf, RMA_NRECV * (size_t)RMA_FRAG_BYTES, BRAID_NET_PTR_HOST, &p->recv_mh));
  return ncclSuccess;
}

ncclResult_t braid_rma_connect(struct braid_rma* rma, const struct braid_rma_addr* theirs, int64_t deadline_ns) {
  const struct braid_transport_ctx* t = rma->t;
  char who[160];
  unsigned tries = 0;
  for (;;) {
    int left = 0;
    for (int r = 0; r < t->nranks; r++) {
      struct rma_peer* p = &rma->peers[r];
      const struct rma_addr_in* a = (const struct rma_addr_in*)theirs[r].data;
      if (!p->remote) continue;
      if (p->send_comm == NULL) {
        if (!a->used) {
          BRAID_WARN("NET/%s : rank %d: %s has no one-sided address for this rank", rma->net->name, t->rank,
                     braid_transport_peer_name(t, r, who, sizeof(who)));
          return ncclInternalError;
        }
        unsigned char handle[BRAID_NET_HANDLE_MAXSIZE];
        memcpy(handle, a->handle, sizeof(handle));
        BRAID_CHECK(rma->net->connect(braid_net_ctx_plugin(rma->ctx), a->dev, handle, &p->send_comm));
      }
      if (p->recv_comm == NULL) BRAID_CHECK(rma->net->accept(p->listen_comm, &p->recv_comm));
      if (p->send_comm == NULL || p->recv_comm == NULL) {
        left++;
        continue;
      }
      if (p->listen_comm != NULL) {
        rma->net->closeListen(p->listen_comm);
        p->listen_comm = NULL;
        BRAID_CHECK(peer_start(rma, p));
      }
    }
    if (left == 0) break;
    if (__atomic_load_n(t->abort_flag, __ATOMIC_ACQUIRE)) return ncclInvalidUsage;
    if (deadline_ns != 0 && braid_socket_clock_ns() > deadline_ns) {
      for (int r = 0; r < t->nranks; r++)
        if (rma->peers[r].remote && (rma->peers[r].send_comm == NULL || rma->peers[r].recv_comm == NULL))
          BRAID_WARN("NET/%s : rank %d: the one-sided connection with %s did not complete within BRAID_INIT_TIMEOUT",
                     rma->net->name, t->rank, braid_transport_peer_name(t, r, who, sizeof(who)));
      return ncclRemoteError;
    }
    if (tries++ < 200)
      sched_yield();
    else
      usleep(tries < 2000 ? 100 : 1000);
  }
  rma->item.ops = &rma_ops;
  rma->item.arg = rma;
  BRAID_CHECK(braid_progress_add(&rma->item));
  rma->added = 1;
  return ncclSuccess;
}

size_t braid_rma_bytes(const struct braid_rma* rma) {
  size_t n = 0;
  for (int r = 0; rma != NULL && r < rma->t->nranks; r++)
    n += (rma->peers[r].send_buf != NULL ? RMA_NSEND * (size_t)RMA_FRAG_BYTES : 0) +
         (rma->peers[r].recv_buf != NULL ? RMA_NRECV * (size_t)RMA_FRAG_BYTES : 0);
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
    if (p->send_mh != NULL) rma->net->deregMr(p->send_comm, p->send_mh);
    if (p->recv_mh != NULL) rma->net->deregMr(p->recv_comm, p->recv_mh);
    if (p->send_comm != NULL) rma->net->closeSend(p->send_comm);
    if (p->recv_comm != NULL) rma->net->closeRecv(p->recv_comm);
    if (p->listen_comm != NULL) rma->net->closeListen(p->listen_comm);
    free(p->send_buf);
    free(p->recv_buf);
    pthread_mutex_destroy(&p->send_lock);
    pthread_mutex_destroy(&p->recv_lock);
  }
  if (rma->ctx != NULL) braid_net_ctx_put(rma->ctx);
  free(rma->peers);
  free(rma);
}
