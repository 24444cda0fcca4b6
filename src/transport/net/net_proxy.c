/*
 * net_proxy.c - the proxy thread: one per process, shared by every communicator, alive while
 * a network connection or a watched communicator exists (started by the first, joined when
 * the last goes). It mirrors each network FIFO over the net plugin (net_internal.h) and runs
 * the watchdog (net_watch.c) every WATCH_TICK_MS.
 *
 * Who moves a connection: whoever holds its lock. In host mode that is mostly the executor
 * itself: braid_conn.host_kick runs when it publishes, releases or waits on a network
 * connection and moves that connection right there (a step leaves with the executor's own
 * sendmsg, a waiting executor reads its own socket), so the critical path has no thread
 * hand-off (on a small machine the two threads would also fight for one core). The thread
 * moves the rest: sends that could not leave at once, data arriving while no executor waits,
 * and everything once device kernels, which cannot kick, fill the FIFOs.
 *
 * Waiting. After a pass that moved something the thread goes round again; with nothing to do
 * it keeps polling for BRAID_PROXY_SPIN_US (yielding the core between passes), then sleeps in
 * poll() on: an eventfd (a kick that leaves a send in flight writes it while the thread
 * sleeps), the descriptors the plugin names for requests in flight (waitFds: data arriving,
 * room to send, helper threads done) except receive connections an executor moved in the
 * last DRIVEN_NS, and a timeout for the watchdog tick or the end of such a window. An idle
 * process costs nothing but the tick.
 *
 * Idle connections cost nothing either. Testing a host receive connection means a recv() that
 * finds nothing (the Socket plugin), so one whose last test here found nothing is "quiet":
 * passes skip it until poll() reports its descriptors ready or an executor moves it (kicked in
 * the last DRIVEN_NS). Its descriptors stay in the poll set, and poll() is level-triggered, so
 * data or a failure that comes while it is quiet wakes the thread and ends the quiet. Without
 * this, every pass paid a system call per idle connection: after a first tree all-reduce its
 * connections sat idle through every later ring call (4 fake nodes: six per rank). An
 * executor's own kicks always test (it waits on that connection), so a quiet connection never
 * stalls a host collective. The kick is a Dekker handshake: the thread stores
 * `sleeping` then makes a last pass, the executor stores tail/head then reads `sleeping`,
 * both with full fences.
 *
 * Failures. A request that fails breaks its connection: the plugin says why (getStatus). A
 * peer that finished cleanly (it destroyed its communicator) only marks the connection: a
 * collective still waiting on it is a mismatch of calls, which BRAID_TIMEOUT bounds. Anything
 * else raises the communicator's abort flag with BRAID_EXEC_PEER_FAILED (naming a dead peer
 * on this machine first, when the watchdog finds one), so the executor's waits return and the
 * call reports the message.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "transport/net/net_internal.h"

#define WATCH_TICK_MS 200
#define DRIVEN_NS 2000000LL /* a receive connection an executor moved this recently is its own */

static struct {
  pthread_mutex_t lock; /* the lists; held by the thread during each pass */
  pthread_mutex_t life; /* starting and joining the thread */
  pthread_t thread;
  int stop;                    /* (lock) */
  int refs;                    /* connections + watched communicators (life) */
  int efd;                     /* kicks */
  int sleeping;                /* (atomic) the thread is in, or about to enter, poll() */
  int64_t device_until;        /* (atomic) device connections are polled until then (progress_all) */
  struct net_res* conns;       /* (lock) */
  struct braid_watch* watches; /* (lock) */
  struct pollfd* fds;          /* the thread's poll set */
  int nfds_cap;
} px = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, -1, 0, 0, NULL, NULL, NULL, 0};

static pthread_mutex_t raise_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- messages and failures ----------------------------------------------------------------- */

const char* braid_proxy_peer_name(const struct braid_comm* comm, int peer, char* buf, size_t len) {
  if (peer < 0 || peer >= comm->nranks) {
    snprintf(buf, len, "rank %d", peer);
    return buf;
  }
  snprintf(buf, len, "rank %d (host %s, pid %d)", peer, braid_bootstrap_peer_host(comm->bootstrap, peer),
           comm->peers ? comm->peers[peer].pid : -1);
  return buf;
}

void braid_proxy_raise(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...) {
  pthread_mutex_lock(&raise_lock);
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm->abort_reason, sizeof(comm->abort_reason), fmt, ap);
    va_end(ap);
    comm->failed_peer = peer;
    comm->async_error = res;
    __atomic_store_n(&comm->abort_flag, (uint32_t)status, __ATOMIC_RELEASE);
    BRAID_WARN("%s", comm->abort_reason);
  }
  pthread_mutex_unlock(&raise_lock);
}

/* A request on r failed (r->err): say so, fail the communicator unless the peer merely left.
 * Called without r->lock, with px.lock (the watch list) held. */
static void conn_report(struct net_res* r) {
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
  braid_proxy_peer_name(r->comm, r->peer, who, sizeof(who));
  if (res == ncclRemoteError && st.closedByPeer) {
    __atomic_store_n(&r->state, NET_STATE_PEER_CLOSED, __ATOMIC_RELEASE);
    BRAID_INFO(BRAID_LOG_NET, "NET/%s : rank %d: %s closed the connection of channel %d/%d (%s side)", r->desc,
               r->comm->rank, who, r->channel, r->conn_index, side);
    return;
  }
  __atomic_store_n(&r->state, NET_STATE_FAILED, __ATOMIC_RELEASE);
  if (st.peerAborted) {
    /* It gave up, and said whom it blames (code: rank + 1; 0: its own user aborted). */
    int culprit = st.abortCode > 0 && st.abortCode <= r->comm->nranks ? st.abortCode - 1 : -1;
    if (culprit >= 0 && culprit != r->comm->rank)
      braid_proxy_raise(r->comm, BRAID_EXEC_PEER_FAILED, ncclRemoteError, culprit,
                        "rank %d: %s failed (reported by %s, which aborted: NET/%s channel %d, %s side)", r->comm->rank,
                        braid_proxy_peer_name(r->comm, culprit, dead_who, sizeof(dead_who)), who, r->desc, r->channel,
                        side);
    else
      braid_proxy_raise(r->comm, BRAID_EXEC_PEER_FAILED, ncclRemoteError, r->peer,
                        "rank %d: %s aborted its communicator (NET/%s channel %d, %s side, while %s)", r->comm->rank,
                        who, r->desc, r->channel, side, doing);
    return;
  }
  int dead = braid_watch_dead_peer(px.watches, r->comm);
  if (dead >= 0 && dead != r->peer)
    braid_proxy_raise(r->comm, BRAID_EXEC_PEER_FAILED, ncclRemoteError, dead,
                      "rank %d: %s died (detected when %s %s: NET/%s channel %d, %s side, while %s)", r->comm->rank,
                      braid_proxy_peer_name(r->comm, dead, dead_who, sizeof(dead_who)), who, r->reason, r->desc,
                      r->channel, side, doing);
  else
    braid_proxy_raise(r->comm, BRAID_EXEC_PEER_FAILED, res == ncclRemoteError ? ncclRemoteError : ncclSystemError,
                      r->peer, "rank %d: %s%s %s (NET/%s channel %d, %s side, while %s)", r->comm->rank, who,
                      dead == r->peer ? " died:" : "", r->reason, r->desc, r->channel, side, doing);
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
    ncclResult_t res = r->net->isend(r->net_comm, data, size, 0, r->mhandle, &req);
    if (res != ncclSuccess) return conn_broke(r, res, "sending");
    if (req == NULL) break;
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
                r->desc, r->comm->rank, r->peer, r->channel, r->conn_index, (unsigned long long)r->done,
                (unsigned long long)r->ctrl->sizes[r->done % BRAID_NSTEPS]);
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
    ncclResult_t res = r->net->irecv(r->net_comm, 1, &data, &size, &tag, &r->mhandle, &req);
    if (res != ncclSuccess) return conn_broke(r, res, "receiving");
    if (req == NULL) break;
    r->reqs[slot] = req;
    r->posted++;
    did = 1;
  }
  while (r->done < r->posted) {
    int done = 0, slot = (int)(r->done % BRAID_NSTEPS);
    size_t got = 0;
    ncclResult_t res = r->net->test(r->reqs[slot], &done, &got);
    if (res != ncclSuccess) return conn_broke(r, res, "receiving");
    if (!done) break;
    BRAID_TRACE(BRAID_LOG_NET | BRAID_LOG_PROXY, "NET/%s : rank %d <- %d channel %d/%d: received step %llu (%zu bytes)",
                r->desc, r->comm->rank, r->peer, r->channel, r->conn_index, (unsigned long long)r->done, got);
    r->ctrl->sizes[slot] = got;
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

/* The proxy thread's attempt at r (progress_one), skipping a quiet host receive connection that
 * no executor drives; a test of one that finds nothing makes it quiet. */
static int proxy_move(struct net_res* r, int64_t now) {
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

/* Device connections (net_internal.h: r->device): a kernel fills and drains the FIFO and never
 * kicks, so the thread polls their counters itself, without sleeping, while they are busy:
 * steps published and not yet sent, received steps the kernel still holds (it will release
 * them, and the receives behind them must be posted), or anything moved or launched within
 * DEVICE_LINGER_NS (a kernel publishes its next step within microseconds of its last, or of
 * the data it waited for, which this thread delivered). With nothing in flight it sleeps like
 * for host connections, on the sockets of its posted receives, but at most DEVICE_NAP_MS, in
 * case a kernel started without braid_proxy_launched. */
#define DEVICE_LINGER_NS 10000000LL
#define DEVICE_NAP_MS 10

static int device_busy(const struct net_res* r) {
  if (r->is_send) return __atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE) > r->done;
  return __atomic_load_n(&r->ctrl->head, __ATOMIC_ACQUIRE) < r->done;
}

/* The proxy thread's pass over every connection (px.lock held). *device_p: some device
 * connection is busy. */
static int progress_all(int64_t now, int* device_p) {
  int did = 0;
  *device_p = 0;
  for (struct net_res* r = px.conns; r != NULL; r = r->next) {
    int moved = proxy_move(r, now);
    did |= moved;
    if (r->device && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE) {
      if (moved) __atomic_store_n(&px.device_until, now + DEVICE_LINGER_NS, __ATOMIC_RELAXED);
      *device_p |= 1 + (moved || device_busy(r)); /* 1: device connections exist; 2: busy */
    }
    if (r->err != ncclSuccess && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_FAILED &&
        r->reason[0] == '\0') {
      conn_report(r);
      did = 1;
    }
  }
  if (*device_p && now < __atomic_load_n(&px.device_until, __ATOMIC_RELAXED)) *device_p = 2;
  return did;
}

/* Room for n descriptors in the thread's poll set. */
static int pollset_reserve(int n) {
  if (n <= px.nfds_cap) return 0;
  int cap = px.nfds_cap ? px.nfds_cap : 64;
  while (cap < n) cap *= 2;
  struct pollfd* grown = realloc(px.fds, (size_t)cap * sizeof(*grown));
  if (grown == NULL) return -1;
  px.fds = grown;
  px.nfds_cap = cap;
  return 0;
}

/* The descriptors to sleep on: the kick eventfd first, then what each connection with
 * requests in flight names, except receive connections an executor is moving itself (kicked
 * within DRIVEN_NS: their data would only wake this thread for nothing); a send that cannot
 * leave yet is watched in any case. *timeout_ms: when the first skipped one must be looked at
 * again (-1: never); *blind_p: some request can only be polled. */
static int build_pollset(int64_t now, int* timeout_ms, int* blind_p) {
  int n = 0;
  *blind_p = 0;
  *timeout_ms = -1;
  if (pollset_reserve(1) != 0) {
    *blind_p = 1;
    return 0;
  }
  px.fds[n++] = (struct pollfd){.fd = px.efd, .events = POLLIN};
  for (struct net_res* r = px.conns; r != NULL; r = r->next) {
    __atomic_store_n(&r->polled, 0, __ATOMIC_RELAXED);
    r->pfd_count = 0;
    if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) continue;
    int64_t driven = __atomic_load_n(&r->kicked, __ATOMIC_RELAXED) + DRIVEN_NS - now;
    if (!r->is_send && driven > 0) {
      int ms = (int)(driven / 1000000) + 1;
      if (*timeout_ms < 0 || ms < *timeout_ms) *timeout_ms = ms;
      continue;
    }
    if (pthread_mutex_trylock(&r->lock) != 0) {
      *blind_p = 1; /* the executor has it right now */
      continue;
    }
    int k = 0;
    if (r->posted != r->done) {
      if (r->net->waitFds == NULL || pollset_reserve(n + 4) != 0 ||
          r->net->waitFds(r->net_comm, px.fds + n, 4, &k) != ncclSuccess) {
        *blind_p = 1;
      } else {
        r->pfd_first = n;
        r->pfd_count = k;
        n += k;
      }
    }
    __atomic_store_n(&r->polled, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&r->lock);
  }
  return n;
}

/* After poll(), px.lock held again: connections whose descriptors poll() reported are quiet no
 * more. A connection added since has no entries (pfd_count 0) and is not quiet; one removed
 * since is no longer in the list. */
static void pollset_wake(int n) {
  for (struct net_res* r = px.conns; r != NULL; r = r->next)
    for (int i = 0; i < r->pfd_count && r->pfd_first + i < n; i++)
      if (px.fds[r->pfd_first + i].revents != 0) {
        __atomic_store_n(&r->quiet, 0, __ATOMIC_RELAXED);
        break;
      }
}

static void* proxy_main(void* arg) {
  int64_t spin_ns = braid_param_int(BRAID_PARAM_PROXY_SPIN_US) * 1000;
  int64_t last_busy = now_ns(), last_tick = 0;
  int device = 0;
  pthread_mutex_lock(&px.lock);
  while (!px.stop) {
    int64_t now = now_ns();
    int did = progress_all(now, &device);
    if (now - last_tick >= WATCH_TICK_MS * 1000000LL) {
      braid_watch_tick(px.watches, now);
      last_tick = now;
    }
    if (did || device == 2 || now - last_busy < spin_ns) {
      if (did) last_busy = now;
      pthread_mutex_unlock(&px.lock); /* let add / remove in */
      if (!did) sched_yield();
      pthread_mutex_lock(&px.lock);
      continue;
    }
    int blind = 0, timeout = -1, n = build_pollset(now, &timeout, &blind);
    __atomic_store_n(&px.sleeping, 1, __ATOMIC_SEQ_CST);
    if (progress_all(now_ns(), &device) || device == 2) { /* a kick may have been missed: go round again */
      __atomic_store_n(&px.sleeping, 0, __ATOMIC_RELAXED);
      last_busy = now_ns();
      continue;
    }
    if (blind) timeout = 1;
    if (px.watches != NULL && (timeout < 0 || timeout > WATCH_TICK_MS)) timeout = WATCH_TICK_MS;
    if (device && (timeout < 0 || timeout > DEVICE_NAP_MS)) timeout = DEVICE_NAP_MS;
    pthread_mutex_unlock(&px.lock);
    int ready = poll(px.fds, (nfds_t)n, timeout);
    if (ready > 0 && (px.fds[0].revents & POLLIN)) { /* n >= 1 then */
      uint64_t v;
      (void)!read(px.efd, &v, sizeof(v));
    }
    __atomic_store_n(&px.sleeping, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&px.lock);
    if (ready > 0) pollset_wake(n);
  }
  pthread_mutex_unlock(&px.lock);
  return NULL;
}

void braid_proxy_launched(struct braid_comm* comm) {
  __atomic_store_n(&px.device_until, now_ns() + DEVICE_LINGER_NS, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* Dekker with the thread's `sleeping` */
  if (__atomic_exchange_n(&px.sleeping, 0, __ATOMIC_ACQ_REL) && px.efd >= 0) {
    uint64_t one = 1;
    (void)!write(px.efd, &one, sizeof(one));
  }
}

void braid_proxy_kick_conn(struct braid_conn* c) {
  struct net_res* r = ((struct braid_connector*)c)->res; /* conn is the connector's first member */
  if (r == NULL) return;
  int did = progress_one(r);
  if (did) __atomic_store_n(&r->kicked, now_ns(), __ATOMIC_RELAXED);
  if (r->err != ncclSuccess && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_FAILED) {
    pthread_mutex_lock(&px.lock); /* the watch list, to name the culprit */
    if (r->reason[0] == '\0') conn_report(r);
    pthread_mutex_unlock(&px.lock);
    return;
  }
  /* A send that could not leave is the proxy thread's: wake it if it sleeps without watching r
   * (Dekker with the thread: we stored tail/head, it stores `sleeping`, then each reads). A
   * receive is this executor's while it waits, and the thread looks again DRIVEN_NS later. */
  if (!r->is_send) return;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(&px.sleeping, __ATOMIC_RELAXED) && !__atomic_load_n(&r->polled, __ATOMIC_RELAXED) &&
      __atomic_load_n(&r->posted, __ATOMIC_RELAXED) != __atomic_load_n(&r->done, __ATOMIC_RELAXED) &&
      __atomic_exchange_n(&px.sleeping, 0, __ATOMIC_ACQ_REL)) {
    uint64_t one = 1;
    (void)!write(px.efd, &one, sizeof(one));
  }
}

void braid_proxy_abandon_conn(struct braid_conn* c) {
  struct net_res* r = ((struct braid_connector*)c)->res;
  if (r == NULL) return;
  pthread_mutex_lock(&r->lock);
  if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE && r->posted != r->done) {
    snprintf(r->reason, sizeof(r->reason), "abandoned with a receive in flight (the call failed)");
    __atomic_store_n(&r->state, NET_STATE_FAILED, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&r->lock);
}

static void kick_always(void) {
  uint64_t one = 1;
  if (px.efd >= 0) (void)!write(px.efd, &one, sizeof(one));
}

/* ---- lifetime ------------------------------------------------------------------------------ */

static void fork_child(void) {
  /* The thread did not survive the fork: forget it and what it served (the parent's). */
  pthread_mutex_init(&px.lock, NULL);
  pthread_mutex_init(&px.life, NULL);
  pthread_mutex_init(&raise_lock, NULL);
  if (px.efd >= 0) close(px.efd);
  px.efd = -1;
  px.refs = 0;
  px.stop = 0;
  px.sleeping = 0;
  px.conns = NULL;
  px.watches = NULL;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) {
  pthread_atfork(NULL, NULL, fork_child);
}

/* With px.life held. */
static ncclResult_t proxy_retain(void) {
  ncclResult_t res = ncclSuccess;
  pthread_once(&atfork_once, atfork_register);
  if (px.refs > 0) {
    px.refs++;
    return ncclSuccess;
  }
  BRAID_SYSCHECK_GOTO(px.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd", res, out);
  px.stop = 0;
  BRAID_PTHREADCHECK_GOTO(pthread_create(&px.thread, NULL, proxy_main, NULL), "pthread_create", res, err_close);
  px.refs = 1;
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_PROXY, "Proxy thread started");
  return ncclSuccess;
err_close:
  close(px.efd);
  px.efd = -1;
out:
  return res;
}

/* With px.life held, px.lock not. */
static void proxy_release(void) {
  if (--px.refs > 0) return;
  pthread_mutex_lock(&px.lock);
  px.stop = 1;
  pthread_mutex_unlock(&px.lock);
  kick_always();
  pthread_join(px.thread, NULL);
  close(px.efd);
  px.efd = -1;
  free(px.fds);
  px.fds = NULL;
  px.nfds_cap = 0;
}

ncclResult_t braid_proxy_add(struct net_res* r) {
  pthread_mutex_lock(&px.life);
  ncclResult_t res = proxy_retain();
  if (res == ncclSuccess) {
    pthread_mutex_lock(&px.lock);
    __atomic_store_n(&r->state, NET_STATE_ACTIVE, __ATOMIC_RELEASE);
    r->next = px.conns;
    px.conns = r;
    pthread_mutex_unlock(&px.lock);
    kick_always(); /* a receiver wants its irecvs posted now */
  }
  pthread_mutex_unlock(&px.life);
  return res;
}

void braid_proxy_remove(struct net_res* r) {
  int found = 0;
  pthread_mutex_lock(&px.life);
  pthread_mutex_lock(&px.lock);
  for (struct net_res** pp = &px.conns; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == r) {
      *pp = r->next;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&px.lock);
  if (found) {
    /* A pass of the thread may still be inside (executors are done with it by now). */
    pthread_mutex_lock(&r->lock);
    pthread_mutex_unlock(&r->lock);
    proxy_release();
  }
  pthread_mutex_unlock(&px.life);
}

ncclResult_t braid_proxy_watch(struct braid_comm* comm) {
  struct braid_watch* w;
  BRAID_CHECK(braid_watch_new(comm, &w));
  pthread_mutex_lock(&px.life);
  ncclResult_t res = proxy_retain();
  if (res == ncclSuccess) {
    pthread_mutex_lock(&px.lock);
    w->next = px.watches;
    px.watches = w;
    pthread_mutex_unlock(&px.lock);
    kick_always(); /* a sleeping proxy starts ticking */
  } else {
    braid_watch_free(w);
  }
  pthread_mutex_unlock(&px.life);
  return res;
}

void braid_proxy_unwatch(struct braid_comm* comm) {
  struct braid_watch* found = NULL;
  pthread_mutex_lock(&px.life);
  pthread_mutex_lock(&px.lock);
  for (struct braid_watch** pp = &px.watches; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->comm == comm) {
      found = *pp;
      *pp = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&px.lock);
  if (found != NULL) {
    braid_watch_free(found);
    proxy_release();
  }
  pthread_mutex_unlock(&px.life);
}
