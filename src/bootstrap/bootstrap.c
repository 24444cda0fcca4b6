/*
 * bootstrap.c - a rank's bootstrap: init (rendezvous through the root in bootstrap_root.c,
 * then the ring), split, and the out-of-band operations among ranks: tagged send/recv,
 * allgather (ring), barrier (dissemination).
 *
 * Connections. Each rank listens on one socket. To talk to a peer it connects once, on
 * demand, and keeps the connection ("out": only this rank writes on it); the peer sees it as
 * an incoming connection ("in"). Every connection opens with bs_peer_hello {secret, type
 * BOOTSTRAP, BS_CONN_PEER, rank, nranks, the rank's nonce}; anything else (wrong secret or
 * nonce, garbage, silence past BS_HANDSHAKE_MS, a second connection for one rank) is dropped
 * (bootstrap_conn.c bounds what strangers hold) and disturbs no one.
 * Init connects each rank to rank+1 and passes a token around the ring, so when it returns
 * every rank is known reachable.
 *
 * Messages are bs_hdr {kind, tag, size} + payload. Whoever waits (a recv, or a send whose
 * socket is full) runs the progress pass: accept, read handshakes, read all available bytes of
 * every incoming connection, and queue complete messages by (peer, kind, tag). The pass never
 * blocks and runs under bs->lock; waiting is a poll() of at most one slice outside the lock,
 * so several threads may share a bootstrap, and each slice checks both abort flags (the
 * caller's and braid_bootstrap_abort's) and the deadline. A send that finds its socket full
 * keeps receiving meanwhile, so two ranks sending large messages to each other cannot
 * deadlock.
 *
 * A dead peer never hangs a recv: when its incoming connection closes, the recv fails; when it
 * never connected, after BS_WATCH_MS the recv connects to it: refused, or closed later, means
 * it is gone (after BS_HUP_GRACE_MS for its last bytes to arrive on another connection). A
 * live peer that never answers holds a wait until braid_bootstrap_set_deadline's deadline.
 * When no thread waits, the service thread (bootstrap_service.c) serves the listener.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/debug.h"
#include "base/fault.h"
#include "base/param.h"
#include "base/socket_pending.h"
#include "bootstrap/bootstrap_int.h"

#define BS_WATCH_MS 1000     /* waiting this long for a silent peer: check that it is alive */
#define BS_HUP_GRACE_MS 1000 /* after a peer's socket closed: its last bytes may still come */

/* A thread telling its peers why its communicator failed (bootstrap_notice.c) sends although
 * the communicator's abort flag is up. */
__thread int bs_ignore_abort;

int bs_aborted(const struct braid_bootstrap* bs) {
  if (bs_ignore_abort) return 0;
  volatile uint32_t* flag = __atomic_load_n(&bs->abort_flag, __ATOMIC_ACQUIRE);
  return __atomic_load_n(&bs->abort, __ATOMIC_ACQUIRE) != 0 ||
         (flag != NULL && __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0);
}

/* ---- life cycle ---------------------------------------------------------------------------- */

static void bs_free(struct braid_bootstrap* bs) {
  bs_service_remove(bs);
  for (int r = 0; bs->peers != NULL && r < bs->nranks; r++) {
    braid_socket_close(&bs->peers[r].out);
    pthread_mutex_destroy(&bs->peers[r].out_lock);
  }
  while (bs->pending != NULL) {
    struct bs_in* in = bs->pending;
    bs->pending = in->next;
    bs_in_free(in);
  }
  while (bs->active != NULL) {
    struct bs_in* in = bs->active;
    bs->active = in->next;
    bs_in_free(in);
  }
  while (bs->queue != NULL) {
    struct bs_msg* m = bs->queue;
    bs->queue = m->next;
    free(m->data);
    free(m);
  }
  braid_socket_close(&bs->listener);
  pthread_mutex_destroy(&bs->lock);
  free(bs->table);
  free(bs->peers);
  free(bs);
}

/* A bootstrap listening on `where`'s address (any port). */
static ncclResult_t bs_create(int rank, int nranks, volatile uint32_t* abort_flag, const union braid_sockaddr* where,
                              struct braid_bootstrap** bs_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_bootstrap* bs;
  union braid_sockaddr local = *where;
  BRAID_CALLOC_GOTO(bs, 1, res, out);
  bs->rank = rank;
  bs->nranks = nranks;
  bs->timeout_peer = -1;
  bs->abort_flag = abort_flag;
  bs->queue_tail = &bs->queue;
  braid_socket_init(&bs->listener);
  pthread_mutex_init(&bs->lock, NULL);
  BRAID_CALLOC_GOTO(bs->table, nranks, res, err_free);
  BRAID_CALLOC_GOTO(bs->peers, nranks, res, err_free);
  for (int r = 0; r < nranks; r++) {
    pthread_mutex_init(&bs->peers[r].out_lock, NULL);
    braid_socket_init(&bs->peers[r].out);
    braid_socket_init(&bs->peers[r].watch);
  }
  bs->max_pending = braid_socket_max_pending();
  BRAID_CHECK_GOTO(braid_bootstrap_random_secret(&bs->nonce), res, err_free);
  braid_socket_addr_set_port(&local, 0);
  BRAID_CHECK_GOTO(braid_socket_listen(&bs->listener, &local), res, err_free);
  BRAID_CHECK_GOTO(bs_service_add(bs), res, err_free);
  *bs_p = bs;
  return ncclSuccess;
err_free:
  bs_free(bs);
out:
  return res;
}

static void bs_me(const struct braid_bootstrap* bs, struct bs_entry* me) {
  memset(me, 0, sizeof(*me));
  me->addr = bs->listener.addr;
  me->nonce = bs->nonce;
  braid_bootstrap_hostname(me->host);
}

/* The table is in: handshakes can be checked from now on. */
static void bs_set_ready(struct braid_bootstrap* bs) {
  pthread_mutex_lock(&bs->lock);
  bs->ready = 1;
  pthread_mutex_unlock(&bs->lock);
}

/* The WARN for a wait on `peer` that failed; returns the result for the caller. */
static ncclResult_t bs_peer_fail(const struct braid_bootstrap* bs, int peer, enum braid_socket_fail fail,
                                 ncclResult_t res, const char* doing) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  const char* host = bs->table[peer].host;
  if (bs_aborted(bs)) fail = BRAID_SOCKET_FAIL_ABORTED; /* others failing because of the abort */
  switch (fail) {
    case BRAID_SOCKET_FAIL_ABORTED:
      BRAID_WARN("Bootstrap: rank %d: aborted while %s rank %d (host %s)", bs->rank, doing, peer, host);
      return ncclInvalidUsage;
    case BRAID_SOCKET_FAIL_TIMEOUT:
      __atomic_store_n((int*)&bs->timeout_peer, peer, __ATOMIC_RELEASE); /* whom init blames (core/init.c) */
      BRAID_WARN("Bootstrap: rank %d: timeout while %s rank %d (host %s)", bs->rank, doing, peer, host);
      return ncclRemoteError;
    case BRAID_SOCKET_FAIL_SYSTEM:
      return res == ncclSuccess ? ncclSystemError : res; /* logged where it happened */
    default:
      BRAID_WARN("Bootstrap: rank %d (host %s) %s (rank %d was %s it at %s)", peer, host, braid_socket_fail_str(fail),
                 bs->rank, doing, braid_socket_addr_str(&bs->table[peer].addr, buf));
      return ncclRemoteError;
  }
}

/* ---- the outgoing side --------------------------------------------------------------------- */

/* Waits for s->fd, watching both abort flags and the deadline. */
static ncclResult_t bs_wait_fd(struct braid_bootstrap* bs, struct braid_socket* s, short events, int64_t deadline) {
  for (;;) {
    if (bs_aborted(bs)) {
      s->fail = BRAID_SOCKET_FAIL_ABORTED;
      return ncclInvalidUsage;
    }
    if (deadline != 0 && braid_socket_clock_ns() >= deadline) {
      s->fail = BRAID_SOCKET_FAIL_TIMEOUT;
      return ncclRemoteError;
    }
    struct pollfd p = {.fd = s->fd, .events = events};
    BRAID_CHECK(braid_socket_poll(&p, 1, deadline));
    if (p.revents != 0) return ncclSuccess;
  }
}

/* Connects to `peer` unless connected (peer's out_lock held). Failures: p->out.fail. */
static ncclResult_t bs_out_connect(struct braid_bootstrap* bs, int peer, int64_t deadline) {
  struct bs_peer* p = &bs->peers[peer];
  struct bs_peer_hello h;
  braid_bootstrap_test_hello(bs, &h);
  struct braid_socket s;
  size_t off = 0;
  int done = 0;
  if (p->out_broken) return ncclRemoteError;
  if (p->out.fd >= 0) return ncclSuccess;
  braid_socket_init(&s);
  ncclResult_t res = braid_socket_connect_start(&s, &bs->table[peer].addr, &done);
  while (res == ncclSuccess && !done) {
    res = bs_wait_fd(bs, &s, POLLOUT, deadline);
    if (res == ncclSuccess) res = braid_socket_connect_finish(&s, &done);
  }
  while (res == ncclSuccess && (res = braid_socket_send_try(&s, &h, sizeof(h), &off)) == ncclSuccess && off < sizeof(h))
    res = bs_wait_fd(bs, &s, POLLOUT, deadline);
  if (res != ncclSuccess) {
    braid_socket_close(&s);
    p->out = s;
    /* A refused or reset peer stays broken; an attempt cut short by the abort flag or the
     * deadline spoiled nothing (its half-made connection is closed, the peer drops it), so a
     * later send may connect again: the failure notice, sent although the flag is up, must
     * not be lost because init was connecting to that peer when it failed (the soak's miss). */
    p->out_broken = s.fail != BRAID_SOCKET_FAIL_ABORTED && s.fail != BRAID_SOCKET_FAIL_TIMEOUT;
    return res;
  }
  p->out = s;
  pthread_mutex_lock(&bs->lock);
  p->watch = s;
  pthread_mutex_unlock(&bs->lock);
  return ncclSuccess;
}

/* The send's socket is full: receive meanwhile, then wait for room. */
static ncclResult_t bs_wait_writable(struct braid_bootstrap* bs, struct braid_socket* s, int64_t deadline,
                                     struct pollfd** fds_p, int* cap_p) {
  pthread_mutex_lock(&bs->lock);
  ncclResult_t res = bs_progress(bs);
  int n = bs_pollset(bs, fds_p, cap_p, s->fd, POLLOUT);
  if (res == ncclSuccess && n >= 0) bs->nwaiters++;
  pthread_mutex_unlock(&bs->lock);
  if (res != ncclSuccess || n < 0) {
    s->fail = BRAID_SOCKET_FAIL_SYSTEM;
    return ncclSystemError;
  }
  if (bs_aborted(bs)) {
    s->fail = BRAID_SOCKET_FAIL_ABORTED;
    res = ncclInvalidUsage;
  } else if (deadline != 0 && braid_socket_clock_ns() >= deadline) {
    s->fail = BRAID_SOCKET_FAIL_TIMEOUT;
    res = ncclRemoteError;
  } else {
    res = braid_socket_poll(*fds_p, n, deadline);
  }
  pthread_mutex_lock(&bs->lock);
  bs->nwaiters--;
  pthread_mutex_unlock(&bs->lock);
  return res;
}

ncclResult_t bs_send(struct braid_bootstrap* bs, int peer, uint32_t kind, uint64_t tag, const void* data, size_t size,
                     int64_t deadline) {
  struct bs_peer* p = &bs->peers[peer];
  struct bs_hdr hdr = {kind, 0, tag, size};
  struct iovec iov[2] = {{&hdr, sizeof(hdr)}, {(void*)data, size}};
  size_t off = 0, total = sizeof(hdr) + size;
  struct pollfd* fds = NULL;
  int cap = 0;
  if (deadline == 0) deadline = __atomic_load_n(&bs->deadline, __ATOMIC_RELAXED);
  pthread_mutex_lock(&p->out_lock);
  ncclResult_t res = bs_out_connect(bs, peer, deadline);
  if (res != ncclSuccess) {
    res = bs_peer_fail(bs, peer, p->out.fail, res, "connecting to");
    goto out;
  }
  while ((res = braid_socket_sendv_try(&p->out, iov, 2, &off)) == ncclSuccess && off < total)
    res = bs_wait_writable(bs, &p->out, deadline, &fds, &cap);
  if (res != ncclSuccess) {
    p->out_broken = off > 0 && off < total; /* a message cut in two spoils the stream */
    if (p->out.fail == BRAID_SOCKET_FAIL_CLOSED || p->out.fail == BRAID_SOCKET_FAIL_RESET) p->out_broken = 1;
    res = bs_peer_fail(bs, peer, p->out.fail, res, "sending to");
  }
out:
  pthread_mutex_unlock(&p->out_lock);
  free(fds);
  return res;
}

/* ---- receiving ----------------------------------------------------------------------------- */

/* Connect to a silent peer to learn whether it lives (refused or closed later: it does not). */
static void bs_watch(struct braid_bootstrap* bs, int peer, int64_t deadline) {
  struct bs_peer* p = &bs->peers[peer];
  pthread_mutex_lock(&p->out_lock);
  ncclResult_t res = bs_out_connect(bs, peer, deadline);
  enum braid_socket_fail fail = p->out.fail;
  pthread_mutex_unlock(&p->out_lock);
  if (res == ncclSuccess || fail == BRAID_SOCKET_FAIL_ABORTED || fail == BRAID_SOCKET_FAIL_TIMEOUT) return;
  pthread_mutex_lock(&bs->lock);
  if (!p->out_dead) {
    p->out_dead = 1;
    p->out_dead_ns = braid_socket_clock_ns();
    p->out_fail = fail;
  }
  pthread_mutex_unlock(&bs->lock);
}

/* While waiting on `peer` (bs->lock held): fails once it is known gone. *watch_p: time to
 * connect to it to find out. */
static ncclResult_t bs_peer_check(struct braid_bootstrap* bs, int peer, int64_t since, int* watch_p) {
  struct bs_peer* p = &bs->peers[peer];
  int64_t now = braid_socket_clock_ns();
  *watch_p = 0;
  if (p->in != NULL)
    return p->in->closed ? bs_peer_fail(bs, peer, p->in->fail, ncclRemoteError, "receiving from") : ncclSuccess;
  if (peer == bs->rank) return ncclSuccess;
  if (p->watch.fd >= 0 && !p->out_dead) {
    int closed = 0;
    braid_socket_peer_closed(&p->watch, &closed);
    if (closed) {
      p->out_dead = 1;
      p->out_dead_ns = now;
      p->out_fail = BRAID_SOCKET_FAIL_CLOSED;
    }
  }
  if (p->out_dead && now - p->out_dead_ns >= BS_HUP_GRACE_MS * NS_PER_MS)
    return bs_peer_fail(bs, peer, p->out_fail, ncclRemoteError, "receiving from");
  *watch_p = !p->out_dead && p->watch.fd < 0 && now - since >= BS_WATCH_MS * NS_PER_MS;
  return ncclSuccess;
}

static ncclResult_t bs_deliver(struct braid_bootstrap* bs, struct bs_msg* m, void* data, size_t size) {
  ncclResult_t res = ncclSuccess;
  if (m->size != size) {
    BRAID_WARN(
        "Bootstrap: rank %d: the message from rank %d (kind %u, tag %llu) has %llu bytes, the receive expects %zu",
        bs->rank, m->peer, m->kind, (unsigned long long)m->tag, (unsigned long long)m->size, size);
    res = ncclInvalidUsage;
  } else if (size > 0) {
    memcpy(data, m->data, size);
  }
  free(m->data);
  free(m);
  return res;
}

static ncclResult_t bs_recv(struct braid_bootstrap* bs, int peer, uint32_t kind, uint64_t tag, void* data, size_t size,
                            int64_t deadline) {
  ncclResult_t res = ncclSuccess;
  struct pollfd* fds = NULL;
  int cap = 0, watched = 0;
  int64_t since = braid_socket_clock_ns();
  if (deadline == 0) deadline = __atomic_load_n(&bs->deadline, __ATOMIC_RELAXED);
  pthread_mutex_lock(&bs->lock);
  for (;;) {
    int watch;
    BRAID_CHECK_GOTO(bs_progress(bs), res, out);
    struct bs_msg* m = bs_queue_take(bs, peer, kind, tag);
    if (m != NULL) {
      res = bs_deliver(bs, m, data, size);
      break;
    }
    BRAID_CHECK_GOTO(bs_peer_check(bs, peer, since, &watch), res, out);
    if (bs_aborted(bs)) {
      res = bs_peer_fail(bs, peer, BRAID_SOCKET_FAIL_ABORTED, ncclInvalidUsage, "receiving from");
      break;
    }
    if (deadline != 0 && braid_socket_clock_ns() >= deadline) {
      res = bs_peer_fail(bs, peer, BRAID_SOCKET_FAIL_TIMEOUT, ncclRemoteError, "receiving from");
      break;
    }
    if (watch && !watched) {
      watched = 1;
      pthread_mutex_unlock(&bs->lock);
      bs_watch(bs, peer, deadline);
      pthread_mutex_lock(&bs->lock);
      continue;
    }
    struct bs_peer* p = &bs->peers[peer];
    int n = bs_pollset(bs, &fds, &cap, p->out_dead ? -1 : p->watch.fd, POLLIN);
    if (n < 0) {
      res = ncclSystemError;
      break;
    }
    bs->nwaiters++;
    pthread_mutex_unlock(&bs->lock);
    res = braid_socket_poll(fds, n, deadline);
    pthread_mutex_lock(&bs->lock);
    bs->nwaiters--;
    if (res != ncclSuccess) break;
  }
out:
  pthread_mutex_unlock(&bs->lock);
  free(fds);
  return res;
}

/* ---- init and split ------------------------------------------------------------------------ */

static int64_t bs_deadline(void) {
  int64_t t = braid_param_int(BRAID_PARAM_INIT_TIMEOUT);
  return t > 0 ? braid_socket_deadline_ms(t * 1000) : 0;
}

/* A token around the ring: every rank reaches its successor. */
static ncclResult_t bs_ring_check(struct braid_bootstrap* bs, int64_t deadline) {
  int n = bs->nranks;
  if (n == 1) return ncclSuccess;
  BRAID_CHECK(bs_send(bs, (bs->rank + 1) % n, BS_KIND_RING, 0, NULL, 0, deadline));
  BRAID_CHECK(bs_recv(bs, (bs->rank + n - 1) % n, BS_KIND_RING, 0, NULL, 0, deadline));
  return ncclSuccess;
}

static ncclResult_t init_check_args(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                    struct braid_bootstrap** bs_p) {
  if (ids == NULL || bs_p == NULL) {
    BRAID_WARN("braid_bootstrap_init: invalid argument %s NULL", ids == NULL ? "ids" : "bs_p");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks || nids < 1 || nids > nranks) {
    BRAID_WARN("braid_bootstrap_init: invalid argument rank %d nranks %d nids %d", rank, nranks, nids);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < nids; i++) {
    uint64_t secret;
    union braid_sockaddr addr;
    braid_bootstrap_id_decode(&ids[i], &secret, &addr);
    if (!braid_socket_addr_valid(&addr) || braid_socket_addr_port(&addr) == 0) {
      BRAID_WARN("braid_bootstrap_init: invalid argument: unique id %d holds no root address (family %d)", i,
                 (int)addr.sa.sa_family);
      return ncclInvalidArgument;
    }
  }
  return ncclSuccess;
}

ncclResult_t braid_bootstrap_init(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                  volatile uint32_t* abort_flag, struct braid_bootstrap** bs_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_bootstrap* bs;
  union braid_sockaddr ifaddr, root0;
  uint64_t secret0;
  struct bs_entry me;
  int64_t t0 = braid_socket_clock_ns();
  BRAID_CHECK(init_check_args(ids, nids, rank, nranks, bs_p));
  braid_bootstrap_id_decode(&ids[0], &secret0, &root0);
  BRAID_CHECK(braid_socket_bootstrap_interface(NULL, &ifaddr));
  BRAID_CHECK(bs_create(rank, nranks, abort_flag, &ifaddr, &bs));
  /* NCCL_COMM_ID: no root runs yet; rank 0 hosts it */
  if (nids == 1 && secret0 == BRAID_BOOTSTRAP_COMM_ID_MAGIC && rank == 0)
    BRAID_CHECK_GOTO(braid_bootstrap_root_start(&root0, secret0, NULL), res, err_free);
  bs_me(bs, &me);
  BRAID_CHECK_GOTO(braid_bootstrap_root_exchange(ids, nids, rank, nranks, &me, abort_flag, bs->table), res, err_free);
  bs->secret = secret0;
  bs_set_ready(bs);
  BRAID_CHECK_GOTO(bs_ring_check(bs, bs_deadline()), res, err_free);
  BRAID_INFO(BRAID_LOG_BOOTSTRAP, "Bootstrap: rank %d of %d connected in %.2f ms", rank, nranks,
             (braid_socket_clock_ns() - t0) / 1e6);
  *bs_p = bs;
  return ncclSuccess;
err_free:
  bs_free(bs);
  return res;
}

static ncclResult_t split_check_args(struct braid_bootstrap* parent, int rank, int nranks, const int* parent_ranks,
                                     struct braid_bootstrap** bs_p) {
  ncclResult_t res = ncclSuccess;
  unsigned char* seen = NULL;
  if (parent == NULL || parent_ranks == NULL || bs_p == NULL) {
    BRAID_WARN("braid_bootstrap_split: invalid argument %s NULL", parent == NULL         ? "parent"
                                                                  : parent_ranks == NULL ? "parent_ranks"
                                                                                         : "bs_p");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || nranks > parent->nranks || rank < 0 || rank >= nranks || parent_ranks[rank] != parent->rank) {
    BRAID_WARN(
        "braid_bootstrap_split: invalid argument rank %d nranks %d (parent rank %d of %d, parent_ranks[rank] %d)", rank,
        nranks, parent->rank, parent->nranks, rank >= 0 && rank < nranks ? parent_ranks[rank] : -1);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(seen, parent->nranks, res, out);
  for (int i = 0; i < nranks; i++) {
    int p = parent_ranks[i];
    if (p < 0 || p >= parent->nranks || seen[p]) {
      BRAID_WARN("braid_bootstrap_split: invalid argument parent_ranks[%d] = %d (out of range or repeated)", i, p);
      res = ncclInvalidArgument;
      break;
    }
    seen[p] = 1;
  }
  free(seen);
out:
  return res;
}

ncclResult_t braid_bootstrap_split(struct braid_bootstrap* parent, int rank, int nranks, const int* parent_ranks,
                                   uint64_t tag, struct braid_bootstrap** bs_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_bootstrap* bs;
  struct bs_entry me;
  uint64_t secret = 0;
  char* down = NULL;
  size_t down_size = sizeof(uint64_t) + (size_t)nranks * sizeof(struct bs_entry);
  int64_t deadline = bs_deadline();
  BRAID_CHECK(split_check_args(parent, rank, nranks, parent_ranks, bs_p));
  BRAID_CHECK(bs_create(rank, nranks, NULL, &parent->listener.addr, &bs));
  BRAID_CALLOC_GOTO(down, down_size, res, err_free);
  bs_me(bs, &me);
  /* the new rank 0 gathers every entry over the parent, picks a secret, sends all back */
  if (rank == 0) {
    bs->table[0] = me;
    for (int i = 1; i < nranks; i++)
      BRAID_CHECK_GOTO(bs_recv(parent, parent_ranks[i], BS_KIND_SPLIT_UP, tag, &bs->table[i], sizeof(me), deadline),
                       res, err_free);
    BRAID_CHECK_GOTO(braid_bootstrap_random_secret(&secret), res, err_free);
    memcpy(down, &secret, sizeof(secret));
    memcpy(down + sizeof(secret), bs->table, (size_t)nranks * sizeof(me));
    for (int i = 1; i < nranks; i++)
      BRAID_CHECK_GOTO(bs_send(parent, parent_ranks[i], BS_KIND_SPLIT_DOWN, tag, down, down_size, deadline), res,
                       err_free);
  } else {
    BRAID_CHECK_GOTO(bs_send(parent, parent_ranks[0], BS_KIND_SPLIT_UP, tag, &me, sizeof(me), deadline), res, err_free);
    BRAID_CHECK_GOTO(bs_recv(parent, parent_ranks[0], BS_KIND_SPLIT_DOWN, tag, down, down_size, deadline), res,
                     err_free);
    memcpy(&secret, down, sizeof(secret));
    memcpy(bs->table, down + sizeof(secret), (size_t)nranks * sizeof(me));
    for (int r = 0; r < nranks; r++) bs->table[r].host[BS_HOST_MAX - 1] = '\0';
  }
  bs->secret = secret;
  bs_set_ready(bs);
  BRAID_CHECK_GOTO(bs_ring_check(bs, deadline), res, err_free);
  free(down);
  *bs_p = bs;
  return ncclSuccess;
err_free:
  free(down);
  bs_free(bs);
  return res;
}

/* ---- the operations ------------------------------------------------------------------------ */

static ncclResult_t bs_check_args(const struct braid_bootstrap* bs, int peer, const void* data, size_t size,
                                  const char* fn) {
  if (bs == NULL) {
    BRAID_WARN("%s: invalid argument bs NULL", fn);
    return ncclInvalidArgument;
  }
  if (peer < 0 || peer >= bs->nranks) {
    BRAID_WARN("%s: invalid argument peer %d (nranks %d)", fn, peer, bs->nranks);
    return ncclInvalidArgument;
  }
  if (data == NULL && size > 0) {
    BRAID_WARN("%s: invalid argument data NULL with size %zu", fn, size);
    return ncclInvalidArgument;
  }
  if (size > BS_MSG_MAX) {
    BRAID_WARN("%s: invalid argument size %zu (a message carries at most %llu bytes)", fn, size,
               (unsigned long long)BS_MSG_MAX);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t braid_bootstrap_send_until(struct braid_bootstrap* bs, int peer, uint64_t tag, const void* data,
                                        size_t size, int64_t deadline) {
  BRAID_CHECK(bs_check_args(bs, peer, data, size, "braid_bootstrap_send"));
  if (braid_fault_hit("bootstrap.send")) return ncclSystemError;
  return bs_send(bs, peer, BS_KIND_USER, tag, data, size, deadline);
}

ncclResult_t braid_bootstrap_recv_until(struct braid_bootstrap* bs, int peer, uint64_t tag, void* data, size_t size,
                                        int64_t deadline) {
  BRAID_CHECK(bs_check_args(bs, peer, data, size, "braid_bootstrap_recv"));
  if (braid_fault_hit("bootstrap.recv")) return ncclSystemError;
  return bs_recv(bs, peer, BS_KIND_USER, tag, data, size, deadline);
}

ncclResult_t braid_bootstrap_send(struct braid_bootstrap* bs, int peer, uint64_t tag, const void* data, size_t size) {
  return braid_bootstrap_send_until(bs, peer, tag, data, size, 0);
}

ncclResult_t braid_bootstrap_recv(struct braid_bootstrap* bs, int peer, uint64_t tag, void* data, size_t size) {
  return braid_bootstrap_recv_until(bs, peer, tag, data, size, 0);
}

/* The WARN of an allgather that did not complete: the ranks whose slots never reached this
 * one (the ring relays them through rank - 1, so one of them is the rank that is missing). */
static void ag_warn_missing(const struct braid_bootstrap* bs, uint64_t seq, int step, const char* what) {
  char list[256];
  size_t len = 0;
  int n = bs->nranks, r = bs->rank, shown = 0;
  list[0] = '\0';
  for (int s = step; s < n - 1 && len < sizeof(list) - 16; s++, shown++)
    len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", shown ? "," : "", (r - s - 1 + n) % n);
  if (shown < n - 1 - step) snprintf(list + len, sizeof(list) - len, ",...");
  BRAID_WARN("%s: rank %d: allgather %llu incomplete: no data yet from rank(s) %s (relayed by rank %d)",
             what != NULL ? what : "Bootstrap", r, (unsigned long long)seq, list, (r + n - 1) % n);
}

/* Ring: at step s, pass on the slot received at step s-1 (own slot first). */
ncclResult_t braid_bootstrap_allgather_until(struct braid_bootstrap* bs, void* all, size_t size, int64_t deadline,
                                             const char* what) {
  BRAID_CHECK(bs_check_args(bs, 0, all, size, "braid_bootstrap_allgather"));
  int n = bs->nranks, r = bs->rank;
  char* a = all;
  if (n == 1) return ncclSuccess;
  uint64_t seq = __atomic_fetch_add(&bs->ag_seq, 1, __ATOMIC_RELAXED);
  for (int s = 0; s < n - 1; s++) {
    int send_slot = (r - s + n) % n, recv_slot = (r - s - 1 + n) % n;
    ncclResult_t res = bs_send(bs, (r + 1) % n, BS_KIND_ALLGATHER, seq, a + (size_t)send_slot * size, size, deadline);
    if (res == ncclSuccess)
      res = bs_recv(bs, (r + n - 1) % n, BS_KIND_ALLGATHER, seq, a + (size_t)recv_slot * size, size, deadline);
    if (res != ncclSuccess) {
      ag_warn_missing(bs, seq, s, what);
      return res;
    }
  }
  return ncclSuccess;
}

ncclResult_t braid_bootstrap_allgather(struct braid_bootstrap* bs, void* all, size_t size) {
  return braid_bootstrap_allgather_until(bs, all, size, 0, NULL);
}

/* Dissemination: in round k, signal rank + 2^k and wait for rank - 2^k. */
ncclResult_t braid_bootstrap_barrier_until(struct braid_bootstrap* bs, int64_t deadline) {
  BRAID_CHECK(bs_check_args(bs, 0, NULL, 0, "braid_bootstrap_barrier"));
  int n = bs->nranks, r = bs->rank;
  uint64_t seq = __atomic_fetch_add(&bs->bar_seq, 1, __ATOMIC_RELAXED);
  for (int k = 0, d = 1; d < n; k++, d <<= 1) {
    uint64_t tag = seq << 6 | (uint64_t)k;
    BRAID_CHECK(bs_send(bs, (r + d) % n, BS_KIND_BARRIER, tag, NULL, 0, deadline));
    BRAID_CHECK(bs_recv(bs, (r - d % n + n) % n, BS_KIND_BARRIER, tag, NULL, 0, deadline));
  }
  return ncclSuccess;
}

ncclResult_t braid_bootstrap_barrier(struct braid_bootstrap* bs) {
  return braid_bootstrap_barrier_until(bs, 0);
}

int braid_bootstrap_rank(const struct braid_bootstrap* bs) {
  return bs ? bs->rank : -1;
}
int braid_bootstrap_nranks(const struct braid_bootstrap* bs) {
  return bs ? bs->nranks : 0;
}

const char* braid_bootstrap_peer_host(struct braid_bootstrap* bs, int rank) {
  return bs != NULL && rank >= 0 && rank < bs->nranks ? bs->table[rank].host : "unknown";
}

const union braid_sockaddr* braid_bootstrap_peer_addr(struct braid_bootstrap* bs, int rank) {
  return bs != NULL && rank >= 0 && rank < bs->nranks ? &bs->table[rank].addr : NULL;
}

uint64_t braid_bootstrap_secret(struct braid_bootstrap* bs) {
  return bs ? bs->secret : 0;
}

void braid_bootstrap_set_abort_flag(struct braid_bootstrap* bs, volatile uint32_t* abort_flag) {
  if (bs != NULL) __atomic_store_n(&bs->abort_flag, abort_flag, __ATOMIC_RELEASE);
}

void braid_bootstrap_abort(struct braid_bootstrap* bs) {
  if (bs != NULL) __atomic_store_n(&bs->abort, 1, __ATOMIC_RELEASE);
}

void braid_bootstrap_set_deadline(struct braid_bootstrap* bs, int64_t deadline) {
  if (bs != NULL) __atomic_store_n(&bs->deadline, deadline, __ATOMIC_RELAXED);
}

void braid_bootstrap_watch(struct braid_bootstrap* bs, braid_bootstrap_death_fn fn, void* arg) {
  if (bs != NULL) bs_service_watch(bs, fn, arg);
}

void braid_bootstrap_test_hello(struct braid_bootstrap* bs, struct bs_peer_hello* h) {
  memset(h, 0, sizeof(*h));
  h->hs = (struct braid_socket_handshake){bs->secret, BRAID_SOCKET_TYPE_BOOTSTRAP, BS_CONN_PEER};
  h->rank = bs->rank;
  h->nranks = bs->nranks;
  h->nonce = bs->nonce;
}

void braid_bootstrap_close(struct braid_bootstrap* bs) {
  if (bs != NULL) bs_free(bs);
}
