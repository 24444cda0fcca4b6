/*
 * watchdog.c - the communicator watchdog (watchdog.h), an item of the progress engine that
 * ticks every TICK_MS for one communicator, host mode or device, whatever its transports.
 *
 * Busy: a group run uses the communicator (comm->inflight: the host executor, or connections
 * made at first use), or one of its kernels is running (device communicators: the kernels
 * mark their status words in pinned memory when they start, device/launch.c
 * braid_launch_running; a kernel still queued behind other work on its stream is not
 * running). Progress: the sum of the tail and head counters of every connection whose control
 * block the host can read (the transport's host_ctrl: shared memory and network FIFOs always,
 * P2P FIFOs when device memory is host memory, as on the fake GPU; a P2P FIFO in a real GPU's
 * memory is invisible, and such a communicator's kernels look stalled while they run).
 *
 * When a busy communicator's counters have not moved for STALL_MS, the watchdog checks its
 * peers on this machine (same hostname and pid namespace, so a pid means something here): a
 * pid that is gone, a zombie, or a new process under the old pid (start time) is a dead peer,
 * and the communicator fails with BRAID_EXEC_PEER_FAILED naming it. That catches
 * shared-memory and P2P peers, which have no socket to break, and names the real culprit when
 * a network connection broke because a third rank died. BRAID_TIMEOUT=s (0: off) fails a
 * communicator that stayed busy without progress for s seconds, with BRAID_EXEC_TIMEOUT and
 * the channel, step and peer it waits for. Failing (braid_comm_raise) raises the abort flag that the host
 * executor and the kernels poll (a device communicator lives in pinned, mapped memory), so
 * the waits end and the call, or ncclCommGetAsyncError, reports the message.
 *
 * "Waits for", from the counters alone (the same on host and device): a receive connection
 * whose tail is not past its head waits for step `head`; a send connection whose tail is
 * NSTEPS ahead of its head waits for room for step `tail`. Among those, one that moved during
 * this busy period wins, then the one that moved last, so an idle channel's connection is not
 * blamed for a busy one's wait.
 */
#include "core/watchdog.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "core/blame.h"
#include "core/init_internal.h"
#include "device/launch.h"
#include "transport/progress.h"

#define TICK_MS 200
#define STALL_MS 1000

struct watch_peer {
  int local; /* a process of this machine and pid namespace: liveness is checkable */
  int pid;
  unsigned long long start; /* its start time (/proc), to notice a reused pid; 0 unknown */
  int64_t dead_seen;        /* when first seen dead (0: alive): the earliest death is the cause */
};

/* When a connection last moved, in visit order. */
struct watch_track {
  const struct braid_conn* conn;
  uint64_t counters; /* tail + head at the last tick */
  int64_t moved;     /* when they last changed (0: not seen to change) */
};

struct braid_watchdog {
  struct braid_progress_item item;
  struct braid_comm* comm;
  struct watch_peer* peers; /* [nranks], under peers_lock */
  int64_t next_tick;
  /* The engine thread's alone (ticks). */
  int busy;            /* busy at the last tick */
  uint64_t sig;        /* progress signature at the last tick */
  int64_t still_since; /* when it last changed, or the busy period began */
  int64_t busy_since;  /* when the current busy period began */
  struct watch_track* track;
  int ntrack, captrack;
};

/* Every watchdog's peers and comm->watchdog itself: the engine's ticks, the transports'
 * dead_peer calls (from the engine thread or an executor), and stop. */
static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_child(void) {
  pthread_mutex_init(&peers_lock, NULL); /* a thread of the parent may have held it */
}
static void atfork_register(void) {
  pthread_atfork(NULL, NULL, fork_child);
}

/* ---- failing a communicator: braid_comm_raise (core/comm.c) -------------------------------- */

int braid_comm_blamed_peer(const struct braid_comm* comm) {
  return comm->abort_reason[0] && comm->failed_peer >= 0 ? comm->failed_peer : -1;
}

/* ---- the connections as the watchdog sees them --------------------------------------------- */

struct watch_conn {
  const struct braid_conn* c;
  const volatile struct braid_conn_ctrl* ctrl; /* the host's view of its counters */
  int channel, peer, is_send;
  const char* kind; /* "ring", "tree", "p2p" */
};

typedef void (*watch_visit_fn)(void* arg, const struct watch_conn* wc);

/* A connection whose counters the host cannot read (a P2P FIFO in GPU memory) is skipped. */
static void visit_one(struct braid_conn* c, int channel, int peer, int is_send, const char* kind, watch_visit_fn fn,
                      void* arg) {
  if (c == NULL) return;
  const struct braid_connector* k = (const struct braid_connector*)c; /* conn opens the connector */
  if (k->transport == NULL) return;
  const volatile struct braid_conn_ctrl* ctrl = k->transport->host_ctrl(k);
  if (ctrl == NULL) return;
  struct watch_conn wc = {c, ctrl, channel, peer, is_send, kind};
  fn(arg, &wc);
}

/* Every connection of comm, in a fixed order: per channel ring, tree, then p2p. */
static void visit_conns(struct braid_comm* comm, watch_visit_fn fn, void* arg) {
  for (int ch = 0; ch < comm->nchannels; ch++) {
    struct braid_dev_channel* d = &comm->channels[ch].dev;
    visit_one(d->ring_recv, ch, d->ring.prev, 0, "ring", fn, arg);
    visit_one(d->ring_send, ch, d->ring.next, 1, "ring", fn, arg);
    visit_one(__atomic_load_n(&d->tree_up_recv, __ATOMIC_ACQUIRE), ch, d->tree.up, 0, "tree", fn, arg);
    visit_one(__atomic_load_n(&d->tree_up_send, __ATOMIC_ACQUIRE), ch, d->tree.up, 1, "tree", fn, arg);
    for (int i = 0; i < BRAID_MAX_TREE_ARITY; i++) {
      visit_one(__atomic_load_n(&d->tree_down_recv[i], __ATOMIC_ACQUIRE), ch, d->tree.down[i], 0, "tree", fn, arg);
      visit_one(__atomic_load_n(&d->tree_down_send[i], __ATOMIC_ACQUIRE), ch, d->tree.down[i], 1, "tree", fn, arg);
    }
    for (int r = 0; d->p2p_recv != NULL && r < comm->nranks; r++) {
      visit_one(__atomic_load_n(&d->p2p_recv[r], __ATOMIC_ACQUIRE), ch, r, 0, "p2p", fn, arg);
      visit_one(__atomic_load_n(&d->p2p_send[r], __ATOMIC_ACQUIRE), ch, r, 1, "p2p", fn, arg);
    }
  }
}

static uint64_t ctrl_counters(const volatile struct braid_conn_ctrl* ctrl) {
  return __atomic_load_n(&ctrl->tail, __ATOMIC_ACQUIRE) + __atomic_load_n(&ctrl->head, __ATOMIC_ACQUIRE);
}

/* One tick over the connections: the progress signature, and when each one last moved. */
struct track_pass {
  struct braid_watchdog* w;
  int64_t now;
  uint64_t sig;
  int index;
};

static void visit_track(void* arg, const struct watch_conn* wc) {
  struct track_pass* t = arg;
  struct braid_watchdog* w = t->w;
  uint64_t v = ctrl_counters(wc->ctrl);
  int i = t->index++;
  t->sig += v;
  if (i >= w->captrack) {
    int cap = w->captrack ? 2 * w->captrack : 32;
    struct watch_track* grown = realloc(w->track, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return; /* only the attribution of a wait gets vaguer */
    w->track = grown;
    w->captrack = cap;
  }
  struct watch_track* k = &w->track[i];
  if (i >= w->ntrack || k->conn != wc->c) { /* new here (a connection made since) */
    *k = (struct watch_track){wc->c, v, 0};
    if (i >= w->ntrack) w->ntrack = i + 1;
  } else if (k->counters != v) {
    k->counters = v;
    k->moved = t->now;
  }
}

/* ---- liveness ------------------------------------------------------------------------------ */

static int have_procfs(void) {
  return access("/proc/self/stat", R_OK) == 0;
}

/* State letter and start time of a process from /proc/<pid>/stat; -1 when it does not exist. */
static int proc_stat(int pid, char* state, unsigned long long* start) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')'); /* the command name may hold anything */
  if (p == NULL || p[1] == '\0') return -1;
  *state = p[2];
  /* Field 3 is the state; the start time is field 22, i.e. 19 fields further on. */
  const char* q = p + 2;
  for (int field = 3; field < 22 && q != NULL; field++) {
    q = strchr(q, ' ');
    if (q != NULL) q++;
  }
  *start = q != NULL ? strtoull(q, NULL, 10) : 0;
  return 0;
}

static int peer_dead(const struct watch_peer* p) {
  if (!p->local) return 0;
  if (!have_procfs()) return kill(p->pid, 0) != 0 && errno == ESRCH;
  char state = 0;
  unsigned long long start = 0;
  if (proc_stat(p->pid, &state, &start) != 0) return 1;
  if (state == 'Z' || state == 'X') return 1;
  return p->start != 0 && start != 0 && start != p->start;
}

/* Look at the peers not yet known dead; returns the one seen dead first (-1: none). When
 * ranks fail one after another (the others abort, and may exit), the first to go is the cause.
 * Under peers_lock. */
static int watch_dead(struct braid_watchdog* w, int64_t now) {
  int first = -1;
  for (int r = 0; r < w->comm->nranks; r++) {
    struct watch_peer* p = &w->peers[r];
    if (p->local && p->dead_seen == 0 && peer_dead(p)) p->dead_seen = now;
    if (p->dead_seen != 0 && (first < 0 || p->dead_seen < w->peers[first].dead_seen)) first = r;
  }
  return first;
}

int braid_watchdog_dead_peer(struct braid_comm* comm) {
  int dead = -1;
  pthread_mutex_lock(&peers_lock);
  if (comm->watchdog != NULL) dead = watch_dead(comm->watchdog, braid_progress_clock_ns());
  pthread_mutex_unlock(&peers_lock);
  return dead;
}

/* ---- what a stalled communicator waits for ------------------------------------------------- */

struct wait_search {
  struct braid_watchdog* w;
  int index; /* visit order, matching w->track */
  struct watch_conn best;
  int best_score; /* 0 none; higher is better evidence */
  int64_t best_moved;
  uint64_t step;
};

static void visit_wait(void* arg, const struct watch_conn* wc) {
  struct wait_search* s = arg;
  uint64_t tail = __atomic_load_n(&wc->ctrl->tail, __ATOMIC_ACQUIRE);
  uint64_t head = __atomic_load_n(&wc->ctrl->head, __ATOMIC_ACQUIRE);
  int i = s->index++;
  int64_t moved = i < s->w->ntrack && s->w->track[i].conn == wc->c ? s->w->track[i].moved : 0;
  int score = 0;
  uint64_t step = 0;
  if (wc->is_send && tail >= head + BRAID_NSTEPS) {
    score = 2; /* it filled every slot: certainly waiting */
    step = tail;
  } else if (!wc->is_send && tail <= head) {
    score = 1;
    step = head;
  }
  if (score == 0) return;
  if (moved >= s->w->busy_since) score += 4; /* part of this busy period */
  if (score > s->best_score || (score == s->best_score && moved > s->best_moved)) {
    s->best_score = score;
    s->best_moved = moved;
    s->best = *wc;
    s->step = step;
  }
}

/* "channel 0 waits for step 12 from rank 1 (host h, pid p) (ring receive connection)" into buf;
 * returns the peer, or -1 when no connection the host can see is waiting. */
static int describe_wait(struct braid_watchdog* w, char* buf, size_t len) {
  struct braid_comm* comm = w->comm;
  struct wait_search s;
  char who[160];
  memset(&s, 0, sizeof(s));
  s.w = w;
  visit_conns(comm, visit_wait, &s);
  if (s.best_score == 0) {
    snprintf(buf, len, "no connection the host can see is waiting (still setting up, or P2P in GPU memory)");
    return -1;
  }
  braid_transport_peer_name(&comm->tctx, s.best.peer, who, sizeof(who));
  if (s.best.is_send)
    snprintf(buf, len, "channel %d waits for %s to make room for step %llu (%s send connection, all %d slots full)",
             s.best.channel, who, (unsigned long long)s.step, s.best.kind, BRAID_NSTEPS);
  else
    snprintf(buf, len, "channel %d waits for step %llu from %s (%s receive connection)", s.best.channel,
             (unsigned long long)s.step, who, s.best.kind);
  return s.best.peer;
}

static int comm_busy(struct braid_comm* comm);

/* ---- the flight recorder's view ----------------------------------------------------------- */

struct describe_pass {
  char* buf;
  size_t len, n;
  int shown, hidden;
};

static void visit_describe(void* arg, const struct watch_conn* wc) {
  struct describe_pass* d = arg;
  if (d->shown >= 32) {
    d->hidden++;
    return;
  }
  uint64_t tail = __atomic_load_n(&wc->ctrl->tail, __ATOMIC_ACQUIRE);
  uint64_t head = __atomic_load_n(&wc->ctrl->head, __ATOMIC_ACQUIRE);
  d->shown++;
  if (d->n < d->len)
    d->n +=
        (size_t)snprintf(d->buf + d->n, d->len - d->n, "  channel %d %s %s rank %d: %llu steps sent, %llu consumed\n",
                         wc->channel, wc->kind, wc->is_send ? "send to" : "receive from", wc->peer,
                         (unsigned long long)tail, (unsigned long long)head);
}

/* This rank's own counters only (tail of a send, head of a receive): a peer's run ahead is
 * not this call's. */
static void visit_sum(void* arg, const struct watch_conn* wc) {
  *(uint64_t*)arg += __atomic_load_n(wc->is_send ? &wc->ctrl->tail : &wc->ctrl->head, __ATOMIC_ACQUIRE);
}

uint64_t braid_watchdog_steps(struct braid_comm* comm) {
  uint64_t sum = 0;
  visit_conns(comm, visit_sum, &sum);
  return sum;
}

struct counter_list {
  const volatile uint64_t** ptrs;
  int n, max;
};

static void visit_list(void* arg, const struct watch_conn* wc) {
  struct counter_list* l = arg;
  if (l->n < l->max) l->ptrs[l->n] = wc->is_send ? &wc->ctrl->tail : &wc->ctrl->head;
  l->n++;
}

int braid_watchdog_step_counters(struct braid_comm* comm, const volatile uint64_t** ptrs, int max) {
  struct counter_list l = {ptrs, 0, max};
  visit_conns(comm, visit_list, &l);
  return l.n;
}

size_t braid_watchdog_describe(struct braid_comm* comm, char* buf, size_t len) {
  struct describe_pass d = {buf, len, 0, 0, 0};
  char what[400];
  if (len == 0) return 0;
  buf[0] = '\0';
  visit_conns(comm, visit_describe, &d);
  if (d.hidden > 0 && d.n < len) d.n += (size_t)snprintf(buf + d.n, len - d.n, "  (%d more connections)\n", d.hidden);
  pthread_mutex_lock(&peers_lock);
  if (comm->watchdog != NULL && d.n < len) {
    /* the engine thread owns (and reallocates) the track: without it, on a copy */
    struct braid_watchdog w = *comm->watchdog;
    w.track = NULL;
    w.ntrack = 0;
    describe_wait(&w, what, sizeof(what));
    d.n += (size_t)snprintf(buf + d.n, len - d.n, "  now: %s\n", comm_busy(comm) ? what : "idle");
  }
  pthread_mutex_unlock(&peers_lock);
  return d.n < len ? d.n : len - 1;
}

/* ---- the tick ------------------------------------------------------------------------------ */

static int comm_busy(struct braid_comm* comm) {
  if (__atomic_load_n(&comm->inflight, __ATOMIC_ACQUIRE) > 0) return 1;
  return comm->device != NULL && braid_launch_running(comm) > 0;
}

static void tick(struct braid_watchdog* w, int64_t now) {
  struct braid_comm* comm = w->comm;
  int64_t limit = braid_param_int(BRAID_PARAM_TIMEOUT);
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) return;
  if (!comm_busy(comm)) {
    w->busy = 0;
    return;
  }
  struct track_pass t = {w, now, 0, 0};
  visit_conns(comm, visit_track, &t);
  if (!w->busy) {
    w->busy = 1;
    w->busy_since = now;
    w->sig = t.sig + 1; /* a new busy period starts its stall clock now */
  }
  pthread_mutex_lock(&peers_lock);
  int dead = watch_dead(w, now); /* every tick: the order of deaths matters */
  pthread_mutex_unlock(&peers_lock);
  if (t.sig != w->sig) {
    w->sig = t.sig;
    w->still_since = now;
    return;
  }
  int64_t still = now - w->still_since;
  char who[160], what[400];
  if (still >= STALL_MS * 1000000LL && dead >= 0) {
    describe_wait(w, what, sizeof(what));
    braid_comm_raise(comm, BRAID_EXEC_PEER_FAILED, ncclRemoteError, dead,
                     "rank %d: %s died while this rank waited in a collective (%s)", comm->rank,
                     braid_transport_peer_name(&comm->tctx, dead, who, sizeof(who)), what);
    return;
  }
  if (limit > 0 && still >= limit * 1000000000LL) {
    char chain[256];
    int peer = describe_wait(w, what, sizeof(what));
    /* the others time out too: their notices say whom they wait for, down to the one rank
     * that waits for nobody (blame.c) */
    braid_blame_wait_chain(comm, peer, what, chain, sizeof(chain));
    braid_comm_raise(comm, BRAID_EXEC_TIMEOUT, ncclSystemError, peer,
                     "rank %d: BRAID_TIMEOUT=%lld s: no progress for %.1f s; %s; %s", comm->rank, (long long)limit,
                     (double)still * 1e-9, chain, what);
  }
}

static int watchdog_progress(struct braid_progress_item* it, int64_t now, unsigned flags) {
  struct braid_watchdog* w = it->arg;
  if (now >= w->next_tick) {
    tick(w, now);
    w->next_tick = now + TICK_MS * 1000000LL;
  }
  return 0;
}

static void watchdog_wait(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* wt) {
  struct braid_watchdog* w = it->arg;
  int ms = w->next_tick > now ? (int)((w->next_tick - now) / 1000000) + 1 : 0;
  if (wt->timeout_ms < 0 || ms < wt->timeout_ms) wt->timeout_ms = ms;
}

static const struct braid_progress_ops watchdog_ops = {.progress = watchdog_progress, .wait = watchdog_wait};

/* ---- lifetime ------------------------------------------------------------------------------ */

static ncclResult_t watchdog_new(struct braid_comm* comm, struct braid_watchdog** w_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_watchdog* w;
  char ns[128] = "", ident[256];
  BRAID_CALLOC_GOTO(w, 1, res, out);
  BRAID_CALLOC_GOTO(w->peers, comm->nranks, res, err_free);
  w->comm = comm;
  ssize_t len = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (len > 0) ns[len] = '\0';
  const struct braid_peer_info* me = &comm->peers[comm->rank];
  for (int r = 0; r < comm->nranks; r++) {
    const struct braid_peer_info* p = &comm->peers[r];
    struct watch_peer* wp = &w->peers[r];
    if (r == comm->rank || p->pid_hash == me->pid_hash || strcmp(p->hostname, me->hostname) != 0) continue;
    /* Its pid_hash is hash(pid + pid namespace) seeded with its host identity: equal to ours
     * computed with our namespace means it lives in our pid namespace. */
    snprintf(ident, sizeof(ident), "%d%s", p->pid, ns);
    if (braid_hash(ident, strlen(ident), p->host_hash) != p->pid_hash) continue;
    char state;
    wp->local = 1;
    wp->pid = p->pid;
    if (proc_stat(p->pid, &state, &wp->start) != 0) wp->start = 0;
  }
  w->item.ops = &watchdog_ops;
  w->item.arg = w;
  *w_p = w;
  return ncclSuccess;
err_free:
  free(w);
out:
  return res;
}

static void watchdog_free(struct braid_watchdog* w) {
  free(w->peers);
  free(w->track);
  free(w);
}

ncclResult_t braid_watchdog_start(struct braid_comm* comm) {
  struct braid_watchdog* w = NULL;
  pthread_once(&atfork_once, atfork_register);
  if (comm->watchdog != NULL) return ncclSuccess;
  BRAID_CHECK(watchdog_new(comm, &w));
  pthread_mutex_lock(&peers_lock);
  comm->watchdog = w; /* transports may ask it about dead peers from now on */
  pthread_mutex_unlock(&peers_lock);
  ncclResult_t res = braid_progress_add(&w->item);
  if (res != ncclSuccess) braid_watchdog_stop(comm);
  return res;
}

void braid_watchdog_stop(struct braid_comm* comm) {
  struct braid_watchdog* w = comm->watchdog;
  if (w == NULL) return;
  braid_progress_remove(&w->item); /* no tick runs after this (a no-op if never added) */
  pthread_mutex_lock(&peers_lock);
  comm->watchdog = NULL; /* no dead_peer call reads it after this */
  pthread_mutex_unlock(&peers_lock);
  watchdog_free(w);
}
