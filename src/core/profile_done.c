/*
 * profile_done.c - device mode: a group's profiler events stop when its kernels are done, not
 * when they are on the stream (profile.h). After a launch, the group's Group event and its
 * Coll / P2p events of one communicator wait in a batch behind a device event recorded on the
 * plan's stream (which every other stream of the group joins, device/launch.c); a progress
 * item of the communicator (transport/progress.h, a device item: polled eagerly after each
 * launch, at least every millisecond while a batch waits) queries those events and stops each
 * finished batch's events, children first, from the progress thread (as NCCL's proxy thread
 * stops its proxy-level events). The plan's ProxyOps (profile_proxy.c) go into its batch too:
 * it stops once the kernels are done and every op finished (the kernels end with sends still
 * in flight on the proxy), so a ProxyOp never outlives its task. A stream being captured into
 * a graph gets no batch: its events stop at launch, as before (the replays are not groups
 * braid runs).
 */
#include <pthread.h>
#include <stdlib.h>

#include "base/check.h"
#include "core/profile.h"
#include "device/device.h"
#include "plugin/profiler_plugin.h"
#include "transport/progress.h"

struct batch {
  struct batch* next;
  braid_event_t ev; /* recorded behind the kernels; kept for reuse */
  int n, cap;
  void** handles; /* children first, the group last */
  void* proxy;    /* the plan's ProxyOps (profile_proxy.c): the batch stops once they finished */
};

struct braid_prof_done {
  pthread_mutex_t lock;
  struct braid_comm* comm;
  struct batch* waiting; /* in launch order */
  struct batch* spare;
  struct braid_progress_item item;
  int added;
};

static void batch_stop(struct braid_prof* prof, struct batch* b) {
  braid_profile_proxy_free(b->proxy); /* every ProxyOp stopped (done or cancelled) */
  b->proxy = NULL;
  for (int i = 0; i < b->n; i++) braid_prof_stop(prof, b->handles[i]);
  b->n = 0;
}

/* Under d->lock: stop every batch whose kernels are done; 1 if one was. */
static int poll_batches(struct braid_prof_done* d) {
  const struct braid_device_ops* dev = d->comm->device;
  int moved = 0, mode = BRAID_CAPTURE_RELAXED;
  /* relaxed: a query must not invalidate another thread's capture in global mode (launch.c) */
  if (dev->capture_mode(&mode) != ncclSuccess) return 0;
  for (struct batch** p = &d->waiting; *p != NULL;) {
    struct batch* b = *p;
    int done = 0;
    if (dev->event_query(b->ev, &done) != ncclSuccess) done = 1; /* the launch's failure is reported there */
    /* Sends the kernels published may still be on the wire: their ProxyOps end first. */
    if (done && b->proxy != NULL && braid_profile_proxy_left(b->proxy) > 0) done = 0;
    if (!done) {
      p = &b->next;
      continue;
    }
    batch_stop(d->comm->prof, b);
    *p = b->next;
    b->next = d->spare, d->spare = b;
    moved = 1;
  }
  dev->capture_mode(&mode);
  return moved;
}

static int done_progress(struct braid_progress_item* it, int64_t now, unsigned flags) {
  struct braid_prof_done* d = it->arg;
  (void)now, (void)flags;
  if (__atomic_load_n(&d->waiting, __ATOMIC_RELAXED) == NULL) return 0;
  pthread_mutex_lock(&d->lock);
  int moved = poll_batches(d);
  pthread_mutex_unlock(&d->lock);
  return moved ? BRAID_PROGRESS_MOVED : 0;
}

static void done_wait(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* w) {
  struct braid_prof_done* d = it->arg;
  (void)now;
  if (__atomic_load_n(&d->waiting, __ATOMIC_RELAXED) != NULL && (w->timeout_ms < 0 || w->timeout_ms > 1))
    w->timeout_ms = 1;
}

static const struct braid_progress_ops done_ops = {done_progress, done_wait};

static ncclResult_t done_state(struct braid_comm* comm, struct braid_prof_done** d_p) {
  if (comm->prof_done != NULL) return *d_p = comm->prof_done, ncclSuccess;
  struct braid_prof_done* d = calloc(1, sizeof(*d));
  if (d == NULL) {
    BRAID_WARN("rank %d: out of memory for the profiler's completion state", comm->rank);
    return ncclSystemError;
  }
  pthread_mutex_init(&d->lock, NULL);
  d->comm = comm;
  d->item.ops = &done_ops;
  d->item.arg = d;
  d->item.device = 1;
  comm->prof_done = d;
  *d_p = d;
  return ncclSuccess;
}

/* A batch with room for n handles and a device event of the comm's device (current). */
static ncclResult_t take_batch(struct braid_prof_done* d, int n, struct batch** b_p) {
  struct batch* b = d->spare;
  if (b != NULL) {
    d->spare = b->next;
  } else {
    b = calloc(1, sizeof(*b));
    if (b == NULL || d->comm->device->event_create(&b->ev) != ncclSuccess) {
      free(b);
      BRAID_WARN("rank %d: no device event for the profiler's completion batch", d->comm->rank);
      return ncclSystemError;
    }
  }
  if (n > b->cap) {
    void** h = realloc(b->handles, (size_t)n * sizeof(*h));
    if (h == NULL) {
      b->next = d->spare, d->spare = b;
      BRAID_WARN("rank %d: out of memory for %d profiler events", d->comm->rank, n);
      return ncclSystemError;
    }
    b->handles = h, b->cap = n;
  }
  b->next = NULL, b->n = 0, b->proxy = NULL;
  *b_p = b;
  return ncclSuccess;
}

/* Under d->lock, the device current: the batch of `plan` behind its kernels, or an error (the
 * caller stops the events at once). */
static ncclResult_t defer_locked(struct braid_prof_done* d, struct braid_plan* plan, struct braid_task* tasks) {
  const struct braid_device_ops* dev = plan->comm->device;
  int n = 1, capturing = 0;
  BRAID_CHECK(dev->stream_capturing(plan->stream, &capturing));
  if (capturing) return ncclInvalidUsage; /* not an error: stopped now (header) */
  for (struct braid_task* t = tasks; t != NULL; t = t->next) n += t->comm == plan->comm && t->prof_event != NULL;
  struct batch* b = NULL;
  BRAID_CHECK(take_batch(d, n, &b));
  ncclResult_t res = dev->event_record(b->ev, plan->stream);
  if (res != ncclSuccess) {
    b->next = d->spare, d->spare = b;
    return res;
  }
  for (struct braid_task* t = tasks; t != NULL; t = t->next)
    if (t->comm == plan->comm && t->prof_event != NULL) b->handles[b->n++] = t->prof_event, t->prof_event = NULL;
  b->handles[b->n++] = plan->prof_group;
  plan->prof_group = NULL;
  b->proxy = plan->prof_proxy; /* its ProxyOps: queued on the connections before the launch */
  plan->prof_proxy = NULL;
  struct batch** p = &d->waiting;
  while (*p != NULL) p = &(*p)->next;
  __atomic_store_n(p, b, __ATOMIC_RELEASE);
  return ncclSuccess;
}

void braid_profile_defer(struct braid_plan* plan, struct braid_task* tasks) {
  struct braid_comm* comm = plan->comm;
  struct braid_prof_done* d = NULL;
  if (plan->prof_group == NULL || done_state(comm, &d) != ncclSuccess) return;
  if (!d->added) {
    if (braid_progress_add(&d->item) != ncclSuccess) return; /* its WARN said why; stopped now */
    d->added = 1;
  }
  int cur = -1;
  if (comm->device->get_current(&cur) != ncclSuccess) return;
  if (cur != comm->cuda_dev && comm->device->set_current(comm->cuda_dev) != ncclSuccess) return;
  pthread_mutex_lock(&d->lock);
  (void)defer_locked(d, plan, tasks); /* what it did not take is stopped by the caller */
  pthread_mutex_unlock(&d->lock);
  if (cur != comm->cuda_dev) comm->device->set_current(cur);
  braid_progress_launched(); /* the item is a device item: poll it eagerly from now */
}

void braid_profile_done_close(struct braid_comm* comm) {
  struct braid_prof_done* d = comm->prof_done;
  if (d == NULL) return;
  if (d->added) braid_progress_remove(&d->item); /* the thread never touches d again */
  /* Destroy and abort: what is still waiting stops now, before the plugin's finalize. The
   * connections are freed by now, and their ops with them (net_proxy.c cancels what is
   * left): one still open would be a bug, kept rather than freed under a connection. */
  for (struct batch* b = d->waiting; b != NULL; b = b->next) {
    if (b->proxy != NULL && braid_profile_proxy_left(b->proxy) > 0) {
      BRAID_WARN("PROFILER: rank %d: %d ProxyOps still open at the communicator's end", comm->rank,
                 braid_profile_proxy_left(b->proxy));
      b->proxy = NULL;
    }
    batch_stop(comm->prof, b);
  }
  for (int k = 0; k < 2; k++)
    for (struct batch* b = k ? d->spare : d->waiting; b != NULL;) {
      struct batch* next = b->next;
      comm->device->event_destroy(b->ev);
      free(b->handles);
      free(b);
      b = next;
    }
  pthread_mutex_destroy(&d->lock);
  free(d);
  comm->prof_done = NULL;
}
