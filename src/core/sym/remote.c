/*
 * remote.c - one-sided puts and signals to ranks that cannot load/store each other's memory
 * (other nodes; fake nodes of NCCL_HOSTID). The seam signal.c uses for every remote peer:
 * connect, put, signal, progress, and the message each carries.
 *
 * Carrier: the network transport's one-sided channels (transport/rma.h, net/net_rma*.c) over
 * the collectives' net plugin (Socket, UCX, IB). The communicator's first
 * ncclCommWindowRegister (as NCCL's ncclRmaProxyConnectOnce) and ncclCommResume open them
 * collectively: a listen per remote peer, whose addresses the bootstrap allgathers; a pair's
 * connection is made by its first put or signal (the target's progress engine accepts it).
 * A put is one message (header + payload), a signal a header alone; one connection per
 * direction, so they are handled in the order sent. The target applies them as they arrive,
 * from the progress engine's thread or from its own ncclWaitSignal polling that origin:
 *   - bounce path: a put's fragments are copied into the window named by its registration
 *     number (under the windows lock), and after its last fragment its signal is counted;
 *   - direct path (host window at both ends, a plugin that takes any host address): place
 *     says where the put lands and holds the window (deregistration waits for it), the
 *     plugin receives straight into it, landed counts the signal.
 * Either way release order: a wait that sees the signal sees the data, and every put sent
 * before it on that pair. An origin never needs the target's attention.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "core/sym/sym.h"
#include "transport/rma.h"

enum { RMA_PUT = 1, RMA_SIGNAL = 2 };

struct rma_hdr {
  uint32_t kind; /* RMA_PUT (a payload of `bytes` follows) or RMA_SIGNAL */
  int32_t ctx, sig;
  int32_t signal; /* RMA_PUT: raise (ctx, sig) once the payload is written */
  uint64_t win_id, offset, bytes;
  uint64_t pad;
};
_Static_assert(sizeof(struct rma_hdr) == BRAID_RMA_HDR_BYTES, "one-sided header size");

static int has_remote(const struct braid_comm* comm) {
  for (int r = 0; r < comm->nranks; r++)
    if (!comm->sym->peer_local[r]) return 1;
  return 0;
}

static ncclResult_t bad_hdr(const struct braid_comm* comm, int peer, const struct rma_hdr* h) {
  BRAID_WARN("ncclWaitSignal: rank %d: malformed one-sided message from rank %d (kind %u, context %d, index %d)",
             comm->rank, peer, h->kind, h->ctx, h->sig);
  return ncclInternalError;
}

/* A fragment of a put, or a signal, from `peer` (the channel's thread or a waiter). */
static ncclResult_t deliver(void* arg, int peer, const void* hdr_v, uint64_t frag_off, const void* data, size_t len,
                            int last) {
  struct braid_comm* comm = arg;
  struct rma_hdr h;
  memcpy(&h, hdr_v, sizeof(h));
  if ((h.kind != RMA_PUT && h.kind != RMA_SIGNAL) || h.ctx < 0 || h.ctx >= comm->sym->nctx || h.sig < 0 ||
      h.sig >= BRAID_SYM_NSIGNALS) {
    return bad_hdr(comm, peer, &h);
  }
  ncclResult_t res = ncclSuccess;
  if (h.kind == RMA_PUT && len > 0) {
    /* Under the windows lock: a deregistration cannot free the window under the copy. */
    pthread_mutex_lock(&comm->sym->lock);
    struct ncclWindow_vidmem* w = comm->sym->windows;
    while (w != NULL && w->id != h.win_id) w = w->next;
    int ok = w != NULL && h.offset <= w->size && h.bytes <= w->size - h.offset && frag_off + len <= h.bytes;
    if (ok) {
      char* dst = (char*)w->user_ptr + h.offset + frag_off;
      if (w->infos[comm->rank].on_device)
        res = comm->device->memcpy_sync(dst, data, len);
      else
        memcpy(dst, data, len);
    }
    pthread_mutex_unlock(&comm->sym->lock);
    if (!ok) {
      BRAID_WARN(
          "ncclWaitSignal: rank %d: a put from rank %d names window %llu (%llu bytes at %llu), which is not "
          "registered here (deregistered?): dropped",
          comm->rank, peer, (unsigned long long)h.win_id, (unsigned long long)h.bytes, (unsigned long long)h.offset);
      return ncclInvalidUsage;
    }
    if (res != ncclSuccess) return res;
  }
  if (last) __atomic_fetch_add(braid_sym_slot(comm->sym->inbox, comm, peer, h.ctx, h.sig), 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}

/* A direct put's header: its window (host memory, not closing), held until landed. */
static ncclResult_t place(void* arg, int peer, const void* hdr_v, size_t bytes, void** dst,
                          struct braid_rma_span* win) {
  struct braid_comm* comm = arg;
  struct rma_hdr h;
  memcpy(&h, hdr_v, sizeof(h));
  if (h.kind != RMA_PUT || h.ctx < 0 || h.ctx >= comm->sym->nctx || h.sig < 0 || h.sig >= BRAID_SYM_NSIGNALS ||
      h.bytes != bytes)
    return bad_hdr(comm, peer, &h);
  pthread_mutex_lock(&comm->sym->lock);
  struct ncclWindow_vidmem* w = comm->sym->windows;
  while (w != NULL && w->id != h.win_id) w = w->next;
  int ok = w != NULL && !w->rma_closing && !w->infos[comm->rank].on_device && h.offset <= w->size &&
           h.bytes <= w->size - h.offset;
  if (ok) {
    w->rma_busy++;
    *dst = (char*)w->user_ptr + h.offset;
    *win = (struct braid_rma_span){w->user_ptr, w->size};
  }
  pthread_mutex_unlock(&comm->sym->lock);
  if (ok) return ncclSuccess;
  BRAID_WARN(
      "ncclWaitSignal: rank %d: a put from rank %d names window %llu (%llu bytes at %llu), which is not a host window "
      "registered here (deregistered?): refused",
      comm->rank, peer, (unsigned long long)h.win_id, (unsigned long long)h.bytes, (unsigned long long)h.offset);
  return ncclInvalidUsage;
}

static void landed(void* arg, int peer, const void* hdr_v, int ok) {
  struct braid_comm* comm = arg;
  struct rma_hdr h;
  memcpy(&h, hdr_v, sizeof(h));
  pthread_mutex_lock(&comm->sym->lock);
  struct ncclWindow_vidmem* w = comm->sym->windows;
  while (w != NULL && w->id != h.win_id) w = w->next;
  if (w != NULL && w->rma_busy > 0) w->rma_busy--; /* listed while held: deregistration waits */
  pthread_mutex_unlock(&comm->sym->lock);
  if (ok) __atomic_fetch_add(braid_sym_slot(comm->sym->inbox, comm, peer, h.ctx, h.sig), 1, __ATOMIC_RELEASE);
}

ncclResult_t braid_remote_win_quiesce(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  int64_t start = braid_socket_clock_ns();
  int warned = 0;
  pthread_mutex_lock(&comm->sym->lock);
  w->rma_closing = 1; /* a direct put that comes now is refused (as one to an unknown window) */
  while (w->rma_busy > 0) {
    pthread_mutex_unlock(&comm->sym->lock);
    if (__atomic_load_n(comm->tctx.abort_flag, __ATOMIC_ACQUIRE)) {
      /* still registered: ncclCommDestroy / Abort close the connections, then free it */
      BRAID_WARN(
          "ncclCommWindowDeregister: rank %d: the communicator was aborted while puts from remote ranks were "
          "landing in window %p; it stays registered until the communicator goes",
          comm->rank, (void*)w);
      return ncclInvalidUsage;
    }
    if (!warned && braid_socket_clock_ns() - start > 10000000000LL) {
      BRAID_WARN(
          "ncclCommWindowDeregister: rank %d: waiting for %d put(s) from remote ranks still landing in window %p",
          comm->rank, w->rma_busy, (void*)w);
      warned = 1;
    }
    usleep(100); /* the progress engine (or a waiter) completes them, or their origin fails */
    pthread_mutex_lock(&comm->sym->lock);
  }
  pthread_mutex_unlock(&comm->sym->lock);
  /* nothing sends from or lands in it now: its registrations go before its memory can */
  if (comm->sym->rma != NULL) braid_rma_win_drop(comm->sym->rma, w->user_ptr, w->size);
  return ncclSuccess;
}

ncclResult_t braid_remote_connect(struct braid_comm* comm, int64_t deadline, const char* fn) {
  struct braid_sym* s = comm->sym;
  if (s->nctx <= 0 || s->rma != NULL || !has_remote(comm)) return ncclSuccess;
  ncclResult_t res = ncclSuccess, mine;
  int n = comm->nranks;
  struct braid_rma_addr* all = calloc((size_t)n * n, sizeof(*all));
  int* remote = calloc((size_t)n, sizeof(*remote));
  if (all == NULL || remote == NULL) { /* a rare OOM; the others fail at the deadline */
    free(all);
    free(remote);
    BRAID_WARN("%s: rank %d: out of memory for the one-sided connections' addresses", fn, comm->rank);
    return ncclSystemError;
  }
  for (int r = 0; r < n; r++) remote[r] = !s->peer_local[r];
  /* A rank whose open fails still takes part (its addresses say "none"): its peers fail at once. */
  struct braid_rma_sink sink = {deliver, place, landed, comm};
  mine = braid_rma_open(&comm->tctx, remote, &sink, &s->rma, all + (size_t)comm->rank * n);
  free(remote);
  BRAID_CHECK_GOTO(braid_sym_allgather(comm, all, (size_t)n * sizeof(*all), deadline, fn), res, out);
  if (mine != ncclSuccess) {
    res = mine;
    goto out;
  }
  struct braid_rma_addr* theirs = calloc((size_t)n, sizeof(*theirs));
  if (theirs == NULL) {
    res = ncclSystemError;
    goto out;
  }
  for (int r = 0; r < n; r++) theirs[r] = all[(size_t)r * n + comm->rank];
  res = braid_rma_connect(s->rma, theirs);
  free(theirs);
  s->rma_wanted = res == ncclSuccess;
  if (res == ncclSuccess)
    BRAID_INFO(BRAID_LOG_NET,
               "%s: rank %d: one-sided connections to its remote peers via NET/%s, each made on first use", fn,
               comm->rank, braid_rma_net_name(s->rma));
out:
  free(all);
  if (res != ncclSuccess) {
    BRAID_WARN("%s: rank %d: could not set up the one-sided connections to remote ranks (%s)", fn, comm->rank,
               ncclGetErrorString(res));
    braid_remote_free(comm);
  }
  return res;
}

void braid_remote_free(struct braid_comm* comm) {
  if (comm->sym == NULL) return;
  braid_rma_close(comm->sym->rma);
  comm->sym->rma = NULL;
}

size_t braid_remote_bytes(const struct braid_comm* comm) {
  return comm->sym != NULL ? braid_rma_bytes(comm->sym->rma) : 0;
}

static ncclResult_t need_rma(struct braid_comm* comm, int peer, const char* fn) {
  if (comm->sym->rma != NULL) return ncclSuccess;
  BRAID_WARN(
      "%s: rank %d: rank %d is on another node and this communicator has no one-sided connections yet: they are "
      "made by the first ncclCommWindowRegister (as NCCL)%s",
      fn, comm->rank, peer, comm->sym->suspended ? " and ncclCommResume" : "");
  return ncclInvalidUsage;
}

/* The host window of this rank that holds [src, src + bytes), held (rma_busy: its
 * deregistration waits, and then drops its registrations) until src_release; NULL if none. */
static struct ncclWindow_vidmem* src_hold(struct braid_comm* comm, const void* src, size_t bytes) {
  const char* s = src;
  pthread_mutex_lock(&comm->sym->lock);
  struct ncclWindow_vidmem* w = comm->sym->windows;
  for (; w != NULL; w = w->next) {
    const char* b = w->user_ptr;
    if (w->magic == BRAID_WIN_MAGIC && !w->rma_closing && !w->infos[comm->rank].on_device && s >= b &&
        bytes <= w->size && (size_t)(s - b) <= w->size - bytes)
      break;
  }
  if (w != NULL) w->rma_busy++;
  pthread_mutex_unlock(&comm->sym->lock);
  return w;
}

static void src_release(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  pthread_mutex_lock(&comm->sym->lock);
  w->rma_busy--;
  pthread_mutex_unlock(&comm->sym->lock);
}

/* A failure is WARNed where it is decided (net_rma.c, naming the peer and why). */
static ncclResult_t send_hdr(struct braid_comm* comm, int peer, const struct rma_hdr* h, const void* src, int direct) {
  /* a large put from a window may go without a copy on plugins that need registered memory */
  struct ncclWindow_vidmem* sw = direct && h->bytes >= BRAID_RMA_DIRECT_MIN ? src_hold(comm, src, h->bytes) : NULL;
  struct braid_rma_span span = {sw != NULL ? sw->user_ptr : NULL, sw != NULL ? sw->size : 0};
  ncclResult_t res = braid_rma_send(comm->sym->rma, peer, h, src, h->bytes, direct, sw != NULL ? &span : NULL),
               why = comm->async_error;
  if (sw != NULL) src_release(comm, sw);
  if (res == ncclInvalidUsage && comm->abort_reason[0] != '\0' && why != ncclSuccess && why != ncclInProgress) {
    /* the abort flag stopped it, raised by braid (a peer died, seen first elsewhere): its cause */
    BRAID_WARN("%s: rank %d: the communicator failed while sending to rank %d: %s",
               h->kind == RMA_PUT ? "ncclPutSignal" : "ncclSignal", comm->rank, peer, comm->abort_reason);
    return why;
  }
  return res;
}

ncclResult_t braid_remote_put(struct braid_comm* comm, int peer, uint64_t win_id, size_t offset, const void* src,
                              size_t bytes, int src_on_device, int dst_on_device, int ctx, int sig) {
  const char* fn = "ncclPutSignal";
  struct rma_hdr h = {RMA_PUT, ctx, sig, 1, win_id, offset, bytes, 0};
  ncclResult_t res = ncclSuccess;
  void* staged = NULL;
  BRAID_CHECK(need_rma(comm, peer, fn));
  if (bytes > 0 && src_on_device) {
    /* Device memory goes through a host copy (no GPUDirect on this path). */
    staged = malloc(bytes);
    if (staged == NULL) {
      BRAID_WARN("%s: out of memory staging %zu bytes for rank %d", fn, bytes, peer);
      return ncclSystemError;
    }
    BRAID_CHECK_GOTO(comm->device->memcpy_sync(staged, src, bytes), res, out);
    src = staged;
  }
  res = send_hdr(comm, peer, &h, src, !dst_on_device); /* a staged source is host memory */
out:
  free(staged);
  return res;
}

ncclResult_t braid_remote_signal(struct braid_comm* comm, int peer, int ctx, int sig) {
  struct rma_hdr h = {RMA_SIGNAL, ctx, sig, 1, 0, 0, 0, 0};
  BRAID_CHECK(need_rma(comm, peer, "ncclSignal"));
  return send_hdr(comm, peer, &h, NULL, 0);
}

ncclResult_t braid_remote_progress(struct braid_comm* comm, int peer, int sleep_us) {
  BRAID_CHECK(need_rma(comm, peer, "ncclWaitSignal"));
  struct braid_rma* rma = comm->sym->rma;
  return sleep_us > 0 ? braid_rma_wait(rma, peer, sleep_us) : braid_rma_poll(rma, peer);
}

ncclResult_t braid_remote_fail(struct braid_comm* comm, int peer) {
  const char* why;
  ncclResult_t res = braid_rma_peer_error(comm->sym->rma, peer, &why);
  BRAID_WARN("ncclWaitSignal: rank %d: waiting for signals from rank %d: %s", comm->rank, peer, why);
  return res;
}

int braid_remote_connections(const struct braid_comm* comm) {
  return comm->sym != NULL ? braid_rma_connections(comm->sym->rma) : 0;
}

void braid_remote_rma_stats(const struct braid_comm* comm, struct braid_rma_stats* st) {
  braid_rma_get_stats(comm->sym != NULL ? comm->sym->rma : NULL, st);
}
