/*
 * progress.h - the progress engine: one thread per process, shared by every communicator,
 * that moves whatever registered with it and sleeps in poll() when nothing can move. It knows
 * no transport: an item is a callback (progress) and, optionally, what to sleep on (wait).
 *
 * Users today: network connections (transport/net: each end's steps between its FIFO and the
 * net plugin; registered as connectors, whose transport's `progress` / `wait` slots the engine
 * calls) and the communicator watchdog (core/watchdog.c: a tick every 200 ms). Completion
 * polling of IB or UCX contexts would be items of their own.
 *
 * Rules for an item:
 *   - progress() never blocks; it returns BRAID_PROGRESS_MOVED when something moved (the
 *     engine goes round again at once) and BRAID_PROGRESS_BUSY when work is in flight that
 *     only polling finds (the engine does not sleep);
 *   - before the engine sleeps it asks wait() for descriptors (at most BRAID_PROGRESS_MAX_FDS)
 *     and a timeout; an item without wait() makes the engine nap 1 ms at most;
 *   - a `device` item is driven by device kernels, which cannot wake the engine: it is polled
 *     without sleeping for 10 ms after braid_progress_launched() or after it moved, and naps
 *     are capped at 10 ms while one exists;
 *   - whoever leaves work to the thread while it may sleep wakes it: a full fence, then
 *     braid_progress_asleep() and braid_progress_wake() (Dekker with the thread, which stores
 *     `sleeping` before its last pass).
 * After braid_progress_remove() returns, the engine never touches the item again.
 */
#ifndef BRAID_PROGRESS_H
#define BRAID_PROGRESS_H

#include <poll.h>
#include <stdint.h>
#include <time.h>

#include "nccl.h"

struct braid_connector;

/* progress() results. */
enum { BRAID_PROGRESS_MOVED = 0x1, BRAID_PROGRESS_BUSY = 0x2 };
/* progress() flags. */
enum { BRAID_PROGRESS_WOKEN = 0x1 /* poll() reported one of its descriptors since the last call */ };

#define BRAID_PROGRESS_MAX_FDS 4

/* What an item tells the engine before it sleeps. */
struct braid_progress_wait {
  struct pollfd* fds; /* room for BRAID_PROGRESS_MAX_FDS entries */
  int nfds;           /* out: how many it filled */
  int timeout_ms;     /* in/out: lower it (from -1, none) to be looked at again that soon */
  int blind;          /* out: 1 when some of its work can only be polled (the engine naps 1 ms) */
};

struct braid_progress_item;
struct braid_progress_ops {
  int (*progress)(struct braid_progress_item* it, int64_t now, unsigned flags);
  void (*wait)(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* w); /* may be NULL */
};

struct braid_progress_item {
  const struct braid_progress_ops* ops;
  void* arg;  /* the owner's */
  int device; /* driven by device kernels (see above) */
  /* The engine's, under its lock. */
  struct braid_progress_item* next;
  int pfd_first, pfd_count;
  unsigned flags;
};

/* Monotonic nanoseconds, the clock of `now` in every callback. */
static inline int64_t braid_progress_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Register / unregister an item; the thread starts with the first and is joined with the
 * last. add wakes the thread (a new item may have work now). */
ncclResult_t braid_progress_add(struct braid_progress_item* it);
void braid_progress_remove(struct braid_progress_item* it);
/* A connector whose transport has `progress` (and maybe `wait`), as an item (c->item). */
ncclResult_t braid_progress_add_conn(struct braid_connector* c, int device);
void braid_progress_remove_conn(struct braid_connector* c);

/* The launch code's call after each kernel launch: device items are polled eagerly for a
 * while (a kernel's first step comes within microseconds). Cheap, from any thread. */
void braid_progress_launched(void);
/* Waking a sleeping thread, for work left to it (see the rules above). */
/* The profiler's ProxyCtrl events (core/profile.c sets it, plugin/profiler_plugin.c emits):
 * NULL unless a profiler is loaded; the engine thread calls it without its lock. */
enum { BRAID_PROGRESS_CTRL_IDLE, BRAID_PROGRESS_CTRL_ACTIVE, BRAID_PROGRESS_CTRL_SLEEP, BRAID_PROGRESS_CTRL_WAKEUP };
extern void (*volatile braid_progress_ctrl_hook)(int what);
int braid_progress_asleep(void);
void braid_progress_wake(void);

#endif /* BRAID_PROGRESS_H */
