/*
 * net_watch.c - the watchdog, run by the proxy thread every tick (net_proxy.c) for every
 * communicator with connections, network or shared memory (braid_proxy_watch).
 *
 * A communicator is busy while a group run uses it (comm->inflight); its progress signature
 * is the sum of the tail and head counters of all its connections. When a busy communicator's
 * signature has not moved for STALL_MS, the watchdog checks its peers on this machine (same
 * hostname and pid namespace, so a pid means something here): a pid that is gone, a zombie, or
 * a new process under the old pid (start time) is a dead peer, and the communicator fails with
 * BRAID_EXEC_PEER_FAILED naming it. That catches shared-memory peers, which have no socket to
 * break, and names the real culprit when a network connection broke because a third rank died.
 * BRAID_TIMEOUT=s (0: off) fails a communicator whose collective made no progress for s
 * seconds, with BRAID_EXEC_TIMEOUT and the channel, step and peer it waits for.
 *
 * "Waits for": the executor's own step counters are visible (struct braid_conn.step), so a
 * receive connection whose tail is not past its step waits for data and a send connection
 * NSTEPS ahead of its head waits for room. Among those, one that moved during this collective
 * wins, then the one that moved last, so an idle channel's connection is not blamed for a
 * busy one's wait.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "core/init_internal.h"
#include "transport/net/net_internal.h"

#define STALL_MS 1000

/* One connection end as the watchdog sees it. */
struct watch_conn {
  struct braid_conn* c;
  int channel, peer, is_send;
  const char* kind; /* "ring", "tree", "p2p" */
};

typedef void (*watch_visit_fn)(void* arg, const struct watch_conn* wc);

static void visit_one(struct braid_conn* c, int channel, int peer, int is_send, const char* kind, watch_visit_fn fn,
                      void* arg) {
  if (c == NULL || c->tail == NULL) return;
  struct watch_conn wc = {c, channel, peer, is_send, kind};
  fn(arg, &wc);
}

/* Every connection of comm, in a fixed order: per channel ring, tree, then p2p. */
static void visit_conns(struct braid_comm* comm, watch_visit_fn fn, void* arg) {
  for (int ch = 0; ch < comm->nchannels; ch++) {
    struct braid_dev_channel* d = &comm->channels[ch].dev;
    visit_one(d->ring_recv, ch, d->ring.prev, 0, "ring", fn, arg);
    visit_one(d->ring_send, ch, d->ring.next, 1, "ring", fn, arg);
    visit_one(d->tree_up_recv, ch, d->tree.up, 0, "tree", fn, arg);
    visit_one(d->tree_up_send, ch, d->tree.up, 1, "tree", fn, arg);
    for (int i = 0; i < BRAID_MAX_TREE_ARITY; i++) {
      visit_one(d->tree_down_recv[i], ch, d->tree.down[i], 0, "tree", fn, arg);
      visit_one(d->tree_down_send[i], ch, d->tree.down[i], 1, "tree", fn, arg);
    }
    for (int r = 0; d->p2p_recv != NULL && r < comm->nranks; r++) {
      visit_one(__atomic_load_n(&d->p2p_recv[r], __ATOMIC_ACQUIRE), ch, r, 0, "p2p", fn, arg);
      visit_one(__atomic_load_n(&d->p2p_send[r], __ATOMIC_ACQUIRE), ch, r, 1, "p2p", fn, arg);
    }
  }
}

static uint64_t conn_counters(const struct braid_conn* c) {
  return __atomic_load_n(c->tail, __ATOMIC_ACQUIRE) + __atomic_load_n(c->head, __ATOMIC_ACQUIRE);
}

/* One tick over the connections: the progress signature, and when each one last moved. */
struct track_pass {
  struct braid_watch* w;
  int64_t now;
  uint64_t sig;
  int index;
};

static void visit_track(void* arg, const struct watch_conn* wc) {
  struct track_pass* t = arg;
  struct braid_watch* w = t->w;
  uint64_t v = conn_counters(wc->c);
  int i = t->index++;
  t->sig += v;
  if (i >= w->captrack) {
    int cap = w->captrack ? 2 * w->captrack : 32;
    struct braid_watch_track* grown = realloc(w->track, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return; /* only the attribution of a wait gets vaguer */
    w->track = grown;
    w->captrack = cap;
  }
  struct braid_watch_track* k = &w->track[i];
  if (i >= w->ntrack || k->conn != wc->c) { /* new here (a connection made since) */
    *k = (struct braid_watch_track){wc->c, v, 0};
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

static int peer_dead(const struct braid_watch_peer* p) {
  if (!p->local) return 0;
  if (!have_procfs()) return kill(p->pid, 0) != 0 && errno == ESRCH;
  char state = 0;
  unsigned long long start = 0;
  if (proc_stat(p->pid, &state, &start) != 0) return 1;
  if (state == 'Z' || state == 'X') return 1;
  return p->start != 0 && start != 0 && start != p->start;
}

ncclResult_t braid_watch_new(struct braid_comm* comm, struct braid_watch** w_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_watch* w;
  char ns[128] = "", ident[256];
  BRAID_CALLOC_GOTO(w, 1, res, out);
  BRAID_CALLOC_GOTO(w->peers, comm->nranks, res, err_free);
  w->comm = comm;
  ssize_t len = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (len > 0) ns[len] = '\0';
  const struct braid_peer_info* me = &comm->peers[comm->rank];
  for (int r = 0; r < comm->nranks; r++) {
    const struct braid_peer_info* p = &comm->peers[r];
    struct braid_watch_peer* wp = &w->peers[r];
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
  *w_p = w;
  return ncclSuccess;
err_free:
  free(w);
out:
  return res;
}

void braid_watch_free(struct braid_watch* w) {
  if (w == NULL) return;
  free(w->peers);
  free(w->track);
  free(w);
}

/* Look at the peers not yet known dead; returns the one seen dead first (-1: none). When
 * ranks fail one after another (the others abort, and may exit), the first to go is the cause. */
static int watch_dead(struct braid_watch* w, int64_t now) {
  int first = -1;
  for (int r = 0; r < w->comm->nranks; r++) {
    struct braid_watch_peer* p = &w->peers[r];
    if (p->local && p->dead_seen == 0 && peer_dead(p)) p->dead_seen = now;
    if (p->dead_seen != 0 && (first < 0 || p->dead_seen < w->peers[first].dead_seen)) first = r;
  }
  return first;
}

int braid_watch_dead_peer(struct braid_watch* list, const struct braid_comm* comm) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  for (struct braid_watch* w = list; w != NULL; w = w->next)
    if (w->comm == comm) return watch_dead(w, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  return -1;
}

/* ---- what a stalled collective waits for --------------------------------------------------- */

struct wait_search {
  struct braid_watch* w;
  int index; /* visit order, matching w->track */
  struct watch_conn best;
  int best_score; /* 0 none; higher is better evidence */
  int64_t best_moved;
  uint64_t step;
};

static void visit_wait(void* arg, const struct watch_conn* wc) {
  struct wait_search* s = arg;
  const struct braid_conn* c = wc->c;
  uint64_t step = __atomic_load_n(&c->step, __ATOMIC_RELAXED);
  uint64_t tail = __atomic_load_n(c->tail, __ATOMIC_ACQUIRE), head = __atomic_load_n(c->head, __ATOMIC_ACQUIRE);
  int i = s->index++;
  int64_t moved = i < s->w->ntrack && s->w->track[i].conn == c ? s->w->track[i].moved : 0;
  int score = 0;
  if (wc->is_send && step >= head + BRAID_NSTEPS)
    score = 2; /* it filled every slot: certainly waiting */
  else if (!wc->is_send && tail <= step)
    score = 1;
  if (score == 0) return;
  if (moved >= s->w->busy_since) score += 4; /* part of this collective */
  if (score > s->best_score || (score == s->best_score && moved > s->best_moved)) {
    s->best_score = score;
    s->best_moved = moved;
    s->best = *wc;
    s->step = step;
  }
}

/* "channel 0 waits for step 12 from rank 1 (host h, pid p) (ring receive connection)" into buf;
 * returns the peer, or -1 when no connection is waiting (it is still setting up). */
static int describe_wait(struct braid_watch* w, char* buf, size_t len) {
  struct braid_comm* comm = w->comm;
  struct wait_search s;
  char who[160];
  memset(&s, 0, sizeof(s));
  s.w = w;
  visit_conns(comm, visit_wait, &s);
  if (s.best_score == 0) {
    snprintf(buf, len, "no connection is waiting: it is still setting up");
    return -1;
  }
  braid_proxy_peer_name(comm, s.best.peer, who, sizeof(who));
  if (s.best.is_send)
    snprintf(buf, len, "channel %d waits for %s to make room for step %llu (%s send connection, all %d slots full)",
             s.best.channel, who, (unsigned long long)s.step, s.best.kind, BRAID_NSTEPS);
  else
    snprintf(buf, len, "channel %d waits for step %llu from %s (%s receive connection)", s.best.channel,
             (unsigned long long)s.step, who, s.best.kind);
  return s.best.peer;
}

static void raise_timeout(struct braid_watch* w, double waited, int64_t limit) {
  char what[400];
  int peer = describe_wait(w, what, sizeof(what));
  braid_proxy_raise(w->comm, BRAID_EXEC_TIMEOUT, ncclSystemError, peer,
                    "rank %d: BRAID_TIMEOUT=%lld s: no progress for %.1f s; %s", w->comm->rank, (long long)limit,
                    waited, what);
}

void braid_watch_tick(struct braid_watch* list, int64_t now) {
  int64_t limit = braid_param_int(BRAID_PARAM_TIMEOUT);
  for (struct braid_watch* w = list; w != NULL; w = w->next) {
    struct braid_comm* comm = w->comm;
    if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) continue;
    if (__atomic_load_n(&comm->inflight, __ATOMIC_ACQUIRE) <= 0) {
      w->busy = 0;
      continue;
    }
    struct track_pass t = {w, now, 0, 0};
    visit_conns(comm, visit_track, &t);
    uint64_t sig = t.sig;
    if (!w->busy) {
      w->busy = 1;
      w->busy_since = now;
      w->sig = sig + 1; /* a new collective starts its stall clock now */
    }
    int dead = watch_dead(w, now); /* every tick: the order of deaths matters */
    if (sig != w->sig) {
      w->sig = sig;
      w->still_since = now;
      continue;
    }
    int64_t still = now - w->still_since;
    if (still >= STALL_MS * 1000000LL) {
      if (dead >= 0) {
        char who[160], what[400];
        describe_wait(w, what, sizeof(what));
        braid_proxy_raise(comm, BRAID_EXEC_PEER_FAILED, ncclRemoteError, dead,
                          "rank %d: %s died while this rank waited in a collective (%s)", comm->rank,
                          braid_proxy_peer_name(comm, dead, who, sizeof(who)), what);
        continue;
      }
    }
    if (limit > 0 && still >= limit * 1000000000LL) raise_timeout(w, (double)still * 1e-9, limit);
  }
}
