/*
 * net_rma_send.c - the send side of the one-sided channels (transport/rma.h,
 * net_rma_int.h). The caller sends, under the peer's send_lock, and returns when the plugin
 * completed every request (host mode is synchronous: the user's buffer is free on return).
 *   bounce path: fragments copied into RMA_NSEND registered slots, two in flight;
 *   direct path (the core allows it, >= RMA_DIRECT_MIN bytes, and the plugin takes any host
 *     address or the source lies in a window the core named: its registration from the
 *     send side's cache, net_rma.c): a frame with the header alone, then the payload from the
 *     caller's buffer in chunks of RMA_CHUNK_BYTES, RMA_NSEND_DIRECT in flight. The plugin
 *     holds a chunk back until the target posted its receive (or buffers it: Socket's kernel
 *     buffers, UCX's unexpected queue); nothing is copied on either side. A source
 *     registration that fails (locked-memory limit) sends that put by the bounce path.
 * The first send to a peer connects (net_rma.c: rma_send_ready).
 */
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket.h"
#include "transport/net/net_rma_int.h"

ncclResult_t rma_send_wait(struct braid_rma* rma, int r, int64_t start, unsigned* tries) {
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
      rma_peer_fail(rma, r, p->send_comm, res, "broke while sending");
      return rma_send_wait(rma, r, start, &tries);
    }
    if (done) return ncclSuccess;
    BRAID_CHECK(rma_send_wait(rma, r, start, &tries));
  }
}

/* isend until the plugin takes it. */
static ncclResult_t post_send(struct braid_rma* rma, int r, void* data, size_t size, void* mh, void** req,
                              int64_t start) {
  struct rma_peer* p = &rma->peers[r];
  unsigned tries = 0;
  for (;;) {
    ncclResult_t res = rma->net->isend(p->send_comm, data, size, 0, mh, req);
    if (res != ncclSuccess) {
      rma_peer_fail(rma, r, p->send_comm, res, "broke while sending");
      return rma_send_wait(rma, r, start, &tries);
    }
    if (*req != NULL) return ncclSuccess;
    BRAID_CHECK(rma_send_wait(rma, r, start, &tries));
  }
}

/* Wait for every request of reqs[n] (in posting order from `first`). */
static ncclResult_t drain(struct braid_rma* rma, int r, void** reqs, int n, unsigned first, int64_t start) {
  for (int i = 0; i < n; i++) {
    void** q = &reqs[(first + (unsigned)i) % (unsigned)n];
    if (*q != NULL) BRAID_CHECK(send_complete(rma, r, *q, start));
    *q = NULL;
  }
  return ncclSuccess;
}

static ncclResult_t send_bounce(struct braid_rma* rma, int r, const void* hdr, const char* data, size_t bytes,
                                int64_t start) {
  struct rma_peer* p = &rma->peers[r];
  void* reqs[RMA_NSEND] = {NULL};
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
    size_t more = (bytes - off - len + RMA_FRAG_PAYLOAD - 1) / RMA_FRAG_PAYLOAD; /* frames after this one */
    f->flags = (off + len == bytes ? RMA_F_LAST : 0) | (uint32_t)(more < RMA_F_MORE_MAX ? more : RMA_F_MORE_MAX)
                                                           << RMA_F_MORE_SHIFT;
    memcpy(f->hdr, hdr, BRAID_RMA_HDR_BYTES);
    if (len > 0) memcpy(f + 1, data + off, len);
    BRAID_CHECK(post_send(rma, r, f, sizeof(*f) + len, p->send_mh, &reqs[slot], start));
    off += len;
    k++;
  } while (off < bytes);
  return drain(rma, r, reqs, RMA_NSEND, k, start);
}

/* mh: what the chunks are sent with (HOST_ANY: the comm's; else the source window's). */
static ncclResult_t send_direct(struct braid_rma* rma, int r, const void* hdr, const char* data, size_t bytes, void* mh,
                                int64_t start) {
  struct rma_peer* p = &rma->peers[r];
  void* reqs[RMA_NSEND_DIRECT] = {NULL};
  struct rma_frame* f = (struct rma_frame*)p->send_buf;
  f->frag_off = bytes;
  f->len = 0;
  f->flags = RMA_F_DIRECT | RMA_F_LAST;
  memcpy(f->hdr, hdr, BRAID_RMA_HDR_BYTES);
  BRAID_CHECK(post_send(rma, r, f, sizeof(*f), p->send_mh, &reqs[0], start));
  unsigned k = 1;
  for (size_t off = 0; off < bytes; k++) {
    int slot = (int)(k % RMA_NSEND_DIRECT);
    if (reqs[slot] != NULL) BRAID_CHECK(send_complete(rma, r, reqs[slot], start));
    reqs[slot] = NULL;
    size_t len = bytes - off < RMA_CHUNK_BYTES ? bytes - off : RMA_CHUNK_BYTES;
    /* HOST_ANY: any host address goes with the comm's registered handle (net.h) */
    BRAID_CHECK(post_send(rma, r, (void*)(data + off), len, mh, &reqs[slot], start));
    off += len;
  }
  return drain(rma, r, reqs, RMA_NSEND_DIRECT, k, start);
}

/* The direct path's handle for this put, or 0 when it goes by the bounce path. */
static int direct_mh(struct braid_rma* rma, int r, const void* data, size_t bytes, int direct,
                     const struct braid_rma_span* win, void** mh) {
  struct rma_peer* p = &rma->peers[r];
  if (!direct || bytes < RMA_DIRECT_MIN || !rma->onecopy) return 0;
  *mh = p->send_mh;
  if (rma->direct) return 1;
  const char* d = data;
  if (win == NULL || d < (const char*)win->base || bytes > win->size ||
      (size_t)(d - (const char*)win->base) > win->size - bytes)
    return 0; /* not inside a window: its memory's lifetime is unknown (net_rma.c) */
  int hit = 0;
  ncclResult_t res = rma_reg_get(rma, p->send_comm, p, p->sregs, win, mh, &hit);
  if (res != ncclSuccess) {
    BRAID_INFO(BRAID_LOG_NET, "NET/%s : rank %d: window %p (%zu bytes) not registered (%s): put by copy",
               rma->net->name, rma->t->rank, win->base, win->size, ncclGetErrorString(res));
    return 0;
  }
  __atomic_fetch_add(hit ? &rma->stats.src_hits : &rma->stats.src_regs, 1, __ATOMIC_RELAXED);
  return 1;
}

ncclResult_t braid_rma_send(struct braid_rma* rma, int peer, const void* hdr, const void* data, size_t bytes,
                            int direct, const struct braid_rma_span* src_win) {
  struct rma_peer* p = &rma->peers[peer];
  const char* why;
  if (braid_rma_peer_error(rma, peer, &why) != ncclSuccess) {
    BRAID_WARN("NET/%s : rank %d: one-sided send: %s", rma->net->name, rma->t->rank, why);
    return ncclRemoteError;
  }
  int64_t start = braid_socket_clock_ns();
  pthread_mutex_lock(&p->send_lock);
  ncclResult_t res = rma_send_ready(rma, peer, start);
  void* mh = NULL;
  if (res == ncclSuccess && direct_mh(rma, peer, data, bytes, direct, src_win, &mh)) {
    res = send_direct(rma, peer, hdr, data, bytes, mh, start);
    __atomic_fetch_add(&rma->stats.direct_sent, 1, __ATOMIC_RELAXED);
  } else if (res == ncclSuccess)
    res = send_bounce(rma, peer, hdr, data, bytes, start);
  pthread_mutex_unlock(&p->send_lock);
  return res;
}
