/*
 * progress.c - the progress engine (progress.h): one thread per process, alive while any item
 * is registered.
 *
 * A pass calls every item's progress(). After a pass that moved something the thread goes
 * round again; with nothing to do it keeps passing for BRAID_PROXY_SPIN_US (yielding the core
 * between passes), then sleeps in poll() on an eventfd (wakes: braid_progress_wake, add,
 * launches), the descriptors the items' wait() name, and the smallest timeout they ask for.
 * Before sleeping it stores `sleeping` and makes one more pass: a thread that left work to it
 * stores its counters, fences, then reads `sleeping` (Dekker), so no wake-up is lost. An idle
 * process costs nothing but the timeouts its items ask for (the watchdog's 200 ms tick).
 *
 * Device items: kernels fill and drain their FIFOs and never wake anyone, so while one exists
 * naps last at most DEVICE_NAP_MS, and for DEVICE_LINGER_NS after a launch or after any device
 * item moved the thread does not sleep at all (a kernel publishes its next step within
 * microseconds of its last, or of the data it waited for, which this thread delivered).
 */
#include "transport/progress.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "transport/transport.h"

#define DEVICE_LINGER_NS 10000000LL
#define DEVICE_NAP_MS 10

static struct {
  pthread_mutex_t lock; /* the item list; held by the thread during each pass */
  pthread_mutex_t life; /* starting and joining the thread */
  pthread_t thread;
  int stop;                          /* (lock) */
  int refs;                          /* registered items (life) */
  int efd;                           /* wake-ups */
  int sleeping;                      /* (atomic) the thread is in, or about to enter, poll() */
  int64_t device_until;              /* (atomic) device items are polled until then */
  struct braid_progress_item* items; /* (lock) */
  struct pollfd* fds;                /* the thread's poll set */
  int nfds_cap;
} eng = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, -1, 0, 0, NULL, NULL, 0};

/* Pass results beyond progress()'s bits: some device item exists. */
#define PASS_DEVICE 0x100

/* One pass over every item (eng.lock held). */
static int pass(int64_t now) {
  int out = 0;
  for (struct braid_progress_item* it = eng.items; it != NULL; it = it->next) {
    unsigned flags = it->flags;
    it->flags = 0;
    int r = it->ops->progress(it, now, flags);
    out |= r & (BRAID_PROGRESS_MOVED | BRAID_PROGRESS_BUSY);
    if (it->device) {
      out |= PASS_DEVICE;
      if (r & BRAID_PROGRESS_MOVED) __atomic_store_n(&eng.device_until, now + DEVICE_LINGER_NS, __ATOMIC_RELAXED);
    }
  }
  if ((out & PASS_DEVICE) && now < __atomic_load_n(&eng.device_until, __ATOMIC_RELAXED)) out |= BRAID_PROGRESS_BUSY;
  return out;
}

/* Room for n descriptors in the thread's poll set. */
static int pollset_reserve(int n) {
  if (n <= eng.nfds_cap) return 0;
  int cap = eng.nfds_cap ? eng.nfds_cap : 64;
  while (cap < n) cap *= 2;
  struct pollfd* grown = realloc(eng.fds, (size_t)cap * sizeof(*grown));
  if (grown == NULL) return -1;
  eng.fds = grown;
  eng.nfds_cap = cap;
  return 0;
}

/* The descriptors to sleep on: the eventfd first, then what each item names. *timeout_ms:
 * the smallest an item asked for (-1: none); *blind_p: some item can only be polled. */
static int pollset_build(int64_t now, int* timeout_ms, int* blind_p) {
  int n = 0;
  *blind_p = 0;
  *timeout_ms = -1;
  if (pollset_reserve(1) != 0) {
    *blind_p = 1;
    return 0;
  }
  eng.fds[n++] = (struct pollfd){.fd = eng.efd, .events = POLLIN};
  for (struct braid_progress_item* it = eng.items; it != NULL; it = it->next) {
    it->pfd_count = 0;
    if (it->ops->wait == NULL || pollset_reserve(n + BRAID_PROGRESS_MAX_FDS) != 0) {
      *blind_p = 1;
      continue;
    }
    struct braid_progress_wait w = {eng.fds + n, 0, *timeout_ms, 0};
    it->ops->wait(it, now, &w);
    if (w.nfds < 0 || w.nfds > BRAID_PROGRESS_MAX_FDS) w.nfds = 0, w.blind = 1;
    it->pfd_first = n;
    it->pfd_count = w.nfds;
    n += w.nfds;
    *timeout_ms = w.timeout_ms;
    *blind_p |= w.blind;
  }
  return n;
}

/* After poll(), eng.lock held again: items whose descriptors fired are told in their next
 * progress() call. An item added since has no entries (pfd_count 0); one removed since is no
 * longer in the list. */
static void pollset_wake(int n) {
  for (struct braid_progress_item* it = eng.items; it != NULL; it = it->next)
    for (int i = 0; i < it->pfd_count && it->pfd_first + i < n; i++)
      if (eng.fds[it->pfd_first + i].revents != 0) {
        it->flags |= BRAID_PROGRESS_WOKEN;
        break;
      }
}

void (*volatile braid_progress_ctrl_hook)(int what);

/* The profiler's view (ProxyCtrl): the thread's idle / active transitions, sleep, wake-up. */
static void ctrl(int what) {
  void (*hook)(int) = braid_progress_ctrl_hook;
  if (hook != NULL) hook(what);
}

static void* engine_main(void* arg) {
  int64_t spin_ns = braid_param_int(BRAID_PARAM_PROXY_SPIN_US) * 1000;
  int64_t last_busy = braid_progress_clock_ns();
  int active = 0; /* for ctrl: the last pass moved something */
  pthread_mutex_lock(&eng.lock);
  while (!eng.stop) {
    int64_t now = braid_progress_clock_ns();
    int st = pass(now);
    if ((st & (BRAID_PROGRESS_MOVED | BRAID_PROGRESS_BUSY)) || now - last_busy < spin_ns) {
      if (st & BRAID_PROGRESS_MOVED) last_busy = now;
      pthread_mutex_unlock(&eng.lock); /* let add / remove in */
      if ((st & BRAID_PROGRESS_MOVED) && !active) active = 1, ctrl(BRAID_PROGRESS_CTRL_ACTIVE);
      if (!(st & BRAID_PROGRESS_MOVED)) sched_yield();
      pthread_mutex_lock(&eng.lock);
      continue;
    }
    int blind = 0, timeout = -1, n = pollset_build(now, &timeout, &blind);
    __atomic_store_n(&eng.sleeping, 1, __ATOMIC_SEQ_CST);
    st = pass(braid_progress_clock_ns());
    if (st & (BRAID_PROGRESS_MOVED | BRAID_PROGRESS_BUSY)) { /* a wake-up may have been missed: go round */
      __atomic_store_n(&eng.sleeping, 0, __ATOMIC_RELAXED);
      last_busy = braid_progress_clock_ns();
      continue;
    }
    if (blind) timeout = 1;
    if ((st & PASS_DEVICE) && (timeout < 0 || timeout > DEVICE_NAP_MS)) timeout = DEVICE_NAP_MS;
    pthread_mutex_unlock(&eng.lock);
    if (active) active = 0, ctrl(BRAID_PROGRESS_CTRL_IDLE);
    ctrl(BRAID_PROGRESS_CTRL_SLEEP);
    int ready = poll(eng.fds, (nfds_t)n, timeout);
    ctrl(BRAID_PROGRESS_CTRL_WAKEUP);
    if (ready > 0 && (eng.fds[0].revents & POLLIN)) { /* n >= 1 then */
      uint64_t v;
      (void)!read(eng.efd, &v, sizeof(v));
    }
    __atomic_store_n(&eng.sleeping, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&eng.lock);
    if (ready > 0) pollset_wake(n);
  }
  pthread_mutex_unlock(&eng.lock);
  return NULL;
}

/* ---- waking -------------------------------------------------------------------------------- */

static void wake_always(void) {
  uint64_t one = 1;
  if (eng.efd >= 0) (void)!write(eng.efd, &one, sizeof(one));
}

int braid_progress_asleep(void) {
  return __atomic_load_n(&eng.sleeping, __ATOMIC_RELAXED);
}

void braid_progress_wake(void) {
  if (__atomic_exchange_n(&eng.sleeping, 0, __ATOMIC_ACQ_REL)) wake_always();
}

void braid_progress_launched(void) {
  __atomic_store_n(&eng.device_until, braid_progress_clock_ns() + DEVICE_LINGER_NS, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* Dekker with the thread's `sleeping` */
  braid_progress_wake();
}

/* ---- lifetime ------------------------------------------------------------------------------ */

static void fork_child(void) {
  /* The thread did not survive the fork: forget it and what it served (the parent's). */
  pthread_mutex_init(&eng.lock, NULL);
  pthread_mutex_init(&eng.life, NULL);
  if (eng.efd >= 0) close(eng.efd);
  eng.efd = -1;
  eng.refs = 0;
  eng.stop = 0;
  eng.sleeping = 0;
  eng.items = NULL;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) {
  pthread_atfork(NULL, NULL, fork_child);
}

/* With eng.life held. */
static ncclResult_t engine_retain(void) {
  ncclResult_t res = ncclSuccess;
  pthread_once(&atfork_once, atfork_register);
  if (eng.refs > 0) {
    eng.refs++;
    return ncclSuccess;
  }
  BRAID_SYSCHECK_GOTO(eng.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd", res, out);
  eng.stop = 0;
  BRAID_PTHREADCHECK_GOTO(pthread_create(&eng.thread, NULL, engine_main, NULL), "pthread_create", res, err_close);
  eng.refs = 1;
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_PROXY, "Proxy thread started");
  return ncclSuccess;
err_close:
  close(eng.efd);
  eng.efd = -1;
out:
  return res;
}

/* With eng.life held, eng.lock not. */
static void engine_release(void) {
  if (--eng.refs > 0) return;
  pthread_mutex_lock(&eng.lock);
  eng.stop = 1;
  pthread_mutex_unlock(&eng.lock);
  wake_always();
  pthread_join(eng.thread, NULL);
  close(eng.efd);
  eng.efd = -1;
  free(eng.fds);
  eng.fds = NULL;
  eng.nfds_cap = 0;
}

ncclResult_t braid_progress_add(struct braid_progress_item* it) {
  pthread_mutex_lock(&eng.life);
  ncclResult_t res = engine_retain();
  if (res == ncclSuccess) {
    pthread_mutex_lock(&eng.lock);
    it->pfd_count = 0;
    it->flags = 0;
    it->next = eng.items;
    eng.items = it;
    pthread_mutex_unlock(&eng.lock);
    wake_always(); /* it may have work now (a receiver wants its receives posted) */
  }
  pthread_mutex_unlock(&eng.life);
  return res;
}

void braid_progress_remove(struct braid_progress_item* it) {
  int found = 0;
  pthread_mutex_lock(&eng.life);
  pthread_mutex_lock(&eng.lock); /* no pass is inside while we hold it */
  for (struct braid_progress_item** pp = &eng.items; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == it) {
      *pp = it->next;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&eng.lock);
  if (found) engine_release();
  pthread_mutex_unlock(&eng.life);
}

/* ---- connectors ---------------------------------------------------------------------------- */

static int conn_progress(struct braid_progress_item* it, int64_t now, unsigned flags) {
  struct braid_connector* c = it->arg;
  return c->transport->progress(c, now, flags);
}

static void conn_wait(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* w) {
  struct braid_connector* c = it->arg;
  if (c->transport->wait != NULL)
    c->transport->wait(c, now, w);
  else
    w->blind = 1;
}

static const struct braid_progress_ops conn_ops = {.progress = conn_progress, .wait = conn_wait};

ncclResult_t braid_progress_add_conn(struct braid_connector* c, int device) {
  if (c->transport == NULL || c->transport->progress == NULL) {
    BRAID_WARN("Progress engine: a connection of transport %s has no progress function",
               c->transport ? c->transport->name : "(none)");
    return ncclInternalError;
  }
  c->item.ops = &conn_ops;
  c->item.arg = c;
  c->item.device = device;
  return braid_progress_add(&c->item);
}

void braid_progress_remove_conn(struct braid_connector* c) {
  braid_progress_remove(&c->item);
}
