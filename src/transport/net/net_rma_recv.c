/*
 * net_rma_recv.c - the receive side of the one-sided channels (transport/rma.h,
 * net_rma_int.h): what a target does with what its remote origins send.
 *
 * Per peer a queue of posted receives, tested in posting order (requests of one comm complete
 * in order), so messages are handled in the order sent. Whoever holds the peer's recv_lock
 * moves it: the progress engine (an item per channel set, sleeping on the plugin's waitFds),
 * or a thread waiting for a signal of that peer (braid_rma_poll / braid_rma_wait, so a waiter
 * needs no thread hand-off). Either one also accepts the peer's first connect.
 *   bounce path (a plugin without BRAID_NET_PTR_HOST_ANY): RMA_NRECV frames kept posted into
 *     the registered buffer, each handed to the sink's deliver and posted again;
 *   onecopy plugin (HOST_ANY, or one that registers host memory: IB): what the next message
 *     is depends on the one before (a direct put's header is followed by its chunks), so only
 *     frames known to come are posted: the next message after a put or signal, and the frames a
 *     bounce frame says follow it (into up to nrslots slots: 1 on HOST_ANY, RMA_NRECV on IB); a
 *     direct header asks the sink where the put lands (place), the chunks are posted there (up
 *     to RMA_NRECV in flight, then the next frame behind them; without HOST_ANY with the
 *     target window's registration, made once per receive comm), and the last chunk's
 *     completion calls landed. A message after the put is tested only after the put's chunks
 *     completed.
 */
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "transport/net/net_rma_int.h"

void rma_recv_drop(struct braid_rma* rma, int r) {
  struct rma_peer* p = &rma->peers[r];
  if (!p->dheld) return;
  p->dheld = 0;
  p->dleft = 0;
  rma->sink.landed(rma->sink.arg, r, p->dhdr, 0);
}

/* A failed peer with a direct put in flight: close its receive comm first (a plugin that is
 * not recvInline, UCX, may still write into a posted receive until then; close cancels it),
 * then let the window go: its deregistration may proceed. */
static void recv_abandon(struct braid_rma* rma, int r) {
  struct rma_peer* p = &rma->peers[r];
  if (!p->dheld) return;
  rma_reg_drop(rma, p->recv_comm, p->dregs, NULL, 0);
  if (p->recv_mh != NULL) rma->net->deregMr(p->recv_comm, p->recv_mh);
  rma->net->closeRecv(p->recv_comm);
  p->recv_mh = NULL;
  p->recv_comm = NULL;
  p->rdone = p->rposted;
  rma_recv_drop(rma, r);
}

/* Post one receive (kind, into data, size bytes, with mh; a frame: its slot); 0 when the
 * plugin has no room now. */
static int post(struct braid_rma* rma, int r, int kind, int last, int slot, void* data, size_t size, void* mh) {
  struct rma_peer* p = &rma->peers[r];
  int tag = 0;
  void* req = NULL;
  ncclResult_t res = rma->net->irecv(p->recv_comm, 1, &data, &size, &tag, &mh, &req);
  if (res != ncclSuccess) {
    rma_peer_fail(rma, r, p->recv_comm, res, "failed to post a receive");
    return 0;
  }
  if (req == NULL) return 0;
  struct rma_rq* q = &p->rq[p->rposted % RMA_QMAX];
  q->req = req;
  q->kind = kind;
  q->last = last;
  q->slot = slot;
  p->rposted++;
  return 1;
}

/* Post what can be posted now, in the order it will arrive. */
static void post_all(struct braid_rma* rma, int r) {
  struct rma_peer* p = &rma->peers[r];
  while (p->rposted - p->rdone < RMA_QMAX && __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PEER_OK) {
    if (p->dleft > 0) { /* onecopy: a direct put's chunks */
      if (p->rposted - p->rdone >= RMA_NRECV) return;
      size_t len = p->dleft < RMA_CHUNK_BYTES ? p->dleft : RMA_CHUNK_BYTES;
      if (!post(rma, r, RQ_CHUNK, len == p->dleft, -1, p->ddst, len, p->dmh)) return;
      p->ddst += len;
      p->dleft -= len;
      if (p->dleft == 0) p->known_end = p->rposted + 1;      /* a frame follows the put */
    } else if (!rma->onecopy || p->rposted < p->known_end) { /* bounce: every message is a frame */
      if (p->frames_posted - p->frames_done >= (uint64_t)p->nrslots) return;
      int slot = (int)(p->frames_posted % (uint64_t)p->nrslots);
      if (!post(rma, r, RQ_FRAME, 0, slot, p->recv_buf + (size_t)slot * RMA_FRAG_BYTES, RMA_FRAG_BYTES, p->recv_mh))
        return;
      p->frames_posted++;
    } else {
      return;
    }
  }
}

/* The registration a direct put into `win` is received with (caller holds recv_lock). */
static ncclResult_t dst_mh(struct braid_rma* rma, int r, const struct braid_rma_span* win, void** mh) {
  struct rma_peer* p = &rma->peers[r];
  if (rma->direct) {
    *mh = p->recv_mh; /* HOST_ANY: any host address with the comm's handle */
    return ncclSuccess;
  }
  int hit = 0;
  BRAID_CHECK(rma_reg_get(rma, p->recv_comm, p, p->dregs, win, mh, &hit));
  if (!hit) __atomic_fetch_add(&rma->stats.dst_regs, 1, __ATOMIC_RELAXED);
  return ncclSuccess;
}

/* A completed frame (message `seq` of the queue, in slot `slot`, `got` bytes). */
static void frame_done(struct braid_rma* rma, int r, uint64_t seq, int slot, size_t got) {
  struct rma_peer* p = &rma->peers[r];
  const struct rma_frame* f = (const struct rma_frame*)(p->recv_buf + (size_t)slot * RMA_FRAG_BYTES);
  if (got < sizeof(*f) || f->len > got - sizeof(*f) || ((f->flags & RMA_F_DIRECT) && (!rma->onecopy || f->len != 0))) {
    rma_peer_fail(rma, r, NULL, ncclInternalError, "sent a malformed fragment");
    return;
  }
  /* onecopy: what is known to come next. A bounce frame: the frames it says follow, then a
   * frame (the next message). A direct header: its chunks, then a frame (post_all). */
  uint64_t known =
      (f->flags & RMA_F_DIRECT) ? (f->frag_off == 0 ? seq + 2 : 0) : seq + 2 + (f->flags >> RMA_F_MORE_SHIFT);
  if (known > p->known_end) p->known_end = known;
  ncclResult_t res;
  if (f->flags & RMA_F_DIRECT) {
    void* dst = NULL;
    struct braid_rma_span win = {NULL, 0};
    res = rma->sink.place(rma->sink.arg, r, f->hdr, (size_t)f->frag_off, &dst, &win);
    if (res == ncclSuccess && f->frag_off > 0) {
      memcpy(p->dhdr, f->hdr, sizeof(p->dhdr));
      p->dheld = 1;
      if (dst_mh(rma, r, &win, &p->dmh) != ncclSuccess) {
        rma_peer_fail(rma, r, NULL, ncclSystemError, "sent a put into a window this rank could not register");
        return;
      }
      p->ddst = dst;
      p->dleft = (size_t)f->frag_off;
      __atomic_fetch_add(&rma->stats.direct_recv, 1, __ATOMIC_RELAXED);
    } else if (res == ncclSuccess) {
      rma->sink.landed(rma->sink.arg, r, f->hdr, 1);
    }
  } else {
    res = rma->sink.deliver(rma->sink.arg, r, f->hdr, f->frag_off, f + 1, f->len, (int)(f->flags & RMA_F_LAST));
  }
  if (res != ncclSuccess) rma_peer_fail(rma, r, NULL, res, "sent a one-sided operation this rank refused");
}

/* Accept, post, handle what completed (caller holds recv_lock). 1 when something moved. */
static int recv_move(struct braid_rma* rma, int r) {
  struct rma_peer* p = &rma->peers[r];
  int moved = 0;
  if (p->recv_comm == NULL && !rma_recv_ready(rma, r)) return 0;
  for (;;) {
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_OK) {
      recv_abandon(rma, r);
      return 1;
    }
    post_all(rma, r);
    if (p->rdone == p->rposted) return moved;
    struct rma_rq* q = &p->rq[p->rdone % RMA_QMAX];
    int done = 0;
    size_t got = 0;
    ncclResult_t res = rma->net->test(q->req, &done, &got);
    if (res != ncclSuccess) {
      rma_peer_fail(rma, r, p->recv_comm, res, "broke while receiving");
      continue;
    }
    if (!done) return moved;
    q->req = NULL;
    uint64_t seq = p->rdone;
    p->rdone++;
    moved = 1;
    if (q->kind == RQ_CHUNK) {
      if (q->last) {
        p->dheld = 0;
        rma->sink.landed(rma->sink.arg, r, p->dhdr, 1);
      }
      continue;
    }
    frame_done(rma, r, seq, q->slot, got);
    p->frames_done++; /* its slot may be posted again */
  }
}

/* The engine looks for connects every RMA_ACCEPT_POLL_MS, not on every pass: a busy engine
 * (collectives) would make n-1 accept calls per pass. 1 when it is time (the engine's thread). */
static int accept_due(struct braid_rma* rma, int64_t now) {
  if (now < rma->next_accept) return 0;
  rma->next_accept = now + RMA_ACCEPT_POLL_MS * 1000000LL;
  return 1;
}

static int rma_progress(struct braid_progress_item* it, int64_t now, unsigned flags) {
  struct braid_rma* rma = it->arg;
  int moved = 0, accept = accept_due(rma, now);
  (void)flags;
  for (int r = 0; r < rma->t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    if (!p->remote || now - __atomic_load_n(&p->driven, __ATOMIC_RELAXED) < RMA_DRIVEN_NS ||
        pthread_mutex_trylock(&p->recv_lock) != 0)
      continue;
    if (p->recv_comm != NULL || accept) moved |= recv_move(rma, r);
    pthread_mutex_unlock(&p->recv_lock);
  }
  return moved ? BRAID_PROGRESS_MOVED : 0;
}

/* Sleep on the receive comms' descriptors; one more pass after asking for them (net.h). A
 * peer not connected yet has no descriptor: look again within RMA_ACCEPT_POLL_MS. */
static void rma_wait(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* w) {
  struct braid_rma* rma = it->arg;
  int nfds = 0;
  for (int r = 0; r < rma->t->nranks; r++) {
    struct rma_peer* p = &rma->peers[r];
    if (!p->remote || __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_OK) continue;
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
    if (p->recv_comm == NULL) { /* rma_progress looks for its connect when due */
      int64_t due = (rma->next_accept - now) / 1000000 + 1;
      int ms = due < 1 ? 1 : (int)due;
      if (w->timeout_ms < 0 || w->timeout_ms > ms) w->timeout_ms = ms;
      pthread_mutex_unlock(&p->recv_lock);
      continue;
    } else if (rma->net->waitFds == NULL || nfds >= BRAID_PROGRESS_MAX_FDS ||
               rma->net->waitFds(p->recv_comm, w->fds + nfds, BRAID_PROGRESS_MAX_FDS - nfds, &k) != ncclSuccess) {
      w->blind = 1;
    } else {
      nfds += k;
    }
    if (recv_move(rma, r)) w->timeout_ms = 0;
    pthread_mutex_unlock(&p->recv_lock);
  }
  w->nfds = nfds;
}

const struct braid_progress_ops braid_rma_progress_ops = {rma_progress, rma_wait};

ncclResult_t braid_rma_poll(struct braid_rma* rma, int peer) {
  struct rma_peer* p = &rma->peers[peer];
  if (p->remote && pthread_mutex_trylock(&p->recv_lock) == 0) {
    __atomic_store_n(&p->driven, braid_progress_clock_ns(), __ATOMIC_RELAXED);
    recv_move(rma, peer);
    pthread_mutex_unlock(&p->recv_lock);
  }
  return braid_rma_peer_error(rma, peer, NULL);
}

ncclResult_t braid_rma_wait(struct braid_rma* rma, int peer, int timeout_us) {
  struct rma_peer* p = &rma->peers[peer];
  if (!p->remote || pthread_mutex_trylock(&p->recv_lock) != 0) {
    sched_yield(); /* the engine is delivering */
    return braid_rma_peer_error(rma, peer, NULL);
  }
  __atomic_store_n(&p->driven, braid_progress_clock_ns(), __ATOMIC_RELAXED);
  struct pollfd fds[BRAID_PROGRESS_MAX_FDS];
  int k = 0;
  struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000};
  if (!recv_move(rma, peer) && __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PEER_OK) {
    /* Ask for the descriptors, then look once more before sleeping (net.h: waitFds). Short
     * (the caller's choice): a plugin whose descriptors miss wake-ups (UCX's, when test()
     * consumed the event after waitFds armed it) costs at most this per message. Not
     * connected yet: no descriptor, sleep the same. */
    if (p->recv_comm == NULL)
      (void)ppoll(NULL, 0, &ts, NULL);
    else if (rma->net->waitFds != NULL &&
             rma->net->waitFds(p->recv_comm, fds, BRAID_PROGRESS_MAX_FDS, &k) == ncclSuccess && k > 0 &&
             !recv_move(rma, peer))
      (void)ppoll(fds, (nfds_t)k, &ts, NULL);
  }
  recv_move(rma, peer);
  pthread_mutex_unlock(&p->recv_lock);
  return braid_rma_peer_error(rma, peer, NULL);
}
