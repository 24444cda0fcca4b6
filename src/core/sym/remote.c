/*
 * remote.c - one-sided puts and signals to ranks that cannot load/store each other's memory
 * (other nodes; fake nodes of NCCL_HOSTID). The seam: three calls (put, signal, progress) that
 * signal.c uses for every remote peer, so the carrier can change without touching the API.
 *
 * Carrier today: the communicator's bootstrap connections (TCP, one per rank pair, kept
 * open). A put is a header message followed by its payload, a signal a header alone, all on
 * one tag, so they arrive in the order sent. The target applies them when it waits for a
 * signal of that origin (ncclWaitSignal): a put lands in the window named by its
 * registration number, then the signal after it is counted. The bootstrap queues what
 * arrives while nobody waits, so an origin never needs the target's attention to finish its
 * call; two ranks putting to each other cannot deadlock (a blocked send keeps receiving).
 * This is not the net transport (no plugin, no RDMA): moving it onto the transport boundary
 * the architecture work is building means reimplementing these three functions.
 */
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "bootstrap/bootstrap.h"
#include "core/sym/sym.h"

#define TAG_RMA 0x524d410000000000ULL /* "RMA" */

enum { RMA_PUT = 1, RMA_SIGNAL = 2 };

struct rma_hdr {
  uint32_t kind; /* RMA_PUT (a payload of `bytes` follows) or RMA_SIGNAL */
  int32_t ctx, sig;
  int32_t signal; /* RMA_PUT: raise (ctx, sig) once the payload is written */
  uint64_t win_id, offset, bytes;
};

ncclResult_t braid_remote_put(struct braid_comm* comm, int peer, uint64_t win_id, size_t offset, const void* src,
                              size_t bytes, int src_on_device, int ctx, int sig) {
  struct rma_hdr h = {RMA_PUT, ctx, sig, 1, win_id, offset, bytes};
  ncclResult_t res = ncclSuccess;
  void* staged = NULL;
  if (bytes > 0 && src_on_device) {
    /* Device memory goes through a host copy (no GPUDirect on this path). */
    staged = malloc(bytes);
    if (staged == NULL) {
      BRAID_WARN("ncclPutSignal: out of memory staging %zu bytes for rank %d", bytes, peer);
      return ncclSystemError;
    }
    BRAID_CHECK_GOTO(comm->device->memcpy_sync(staged, src, bytes), res, out);
    src = staged;
  }
  /* One sender at a time per communicator, so a header and its payload stay together. */
  pthread_mutex_lock(&comm->sym->lock);
  res = braid_bootstrap_send(comm->bootstrap, peer, TAG_RMA, &h, sizeof(h));
  if (res == ncclSuccess && bytes > 0) res = braid_bootstrap_send(comm->bootstrap, peer, TAG_RMA, src, bytes);
  pthread_mutex_unlock(&comm->sym->lock);
out:
  free(staged);
  return res;
}

ncclResult_t braid_remote_signal(struct braid_comm* comm, int peer, int ctx, int sig) {
  struct rma_hdr h = {RMA_SIGNAL, ctx, sig, 1, 0, 0, 0};
  pthread_mutex_lock(&comm->sym->lock);
  ncclResult_t res = braid_bootstrap_send(comm->bootstrap, peer, TAG_RMA, &h, sizeof(h));
  pthread_mutex_unlock(&comm->sym->lock);
  return res;
}

/* A put's payload into its window (host memory directly; device memory through a copy). */
static ncclResult_t land_put(struct braid_comm* comm, int peer, const struct rma_hdr* h) {
  struct ncclWindow_vidmem* w = braid_win_by_id(comm, h->win_id);
  int ok = w != NULL && h->offset <= w->size && h->bytes <= w->size - h->offset;
  int on_device = ok && w->infos[comm->rank].on_device;
  void* dst = ok && !on_device ? (char*)w->user_ptr + h->offset : malloc(h->bytes);
  if (dst == NULL) {
    BRAID_WARN("ncclWaitSignal: out of memory receiving %llu bytes from rank %d", (unsigned long long)h->bytes, peer);
    return ncclSystemError;
  }
  ncclResult_t res = braid_bootstrap_recv(comm->bootstrap, peer, TAG_RMA, dst, h->bytes);
  if (res == ncclSuccess && on_device) res = comm->device->memcpy_sync((char*)w->user_ptr + h->offset, dst, h->bytes);
  if (!ok || on_device) free(dst);
  if (res != ncclSuccess) return res;
  if (!ok) {
    BRAID_WARN(
        "ncclWaitSignal: rank %d: a put from rank %d names window %llu (%llu bytes at %llu), which is not "
        "registered here (deregistered?): dropped",
        comm->rank, peer, (unsigned long long)h->win_id, (unsigned long long)h->bytes, (unsigned long long)h->offset);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t braid_remote_progress(struct braid_comm* comm, int peer) {
  struct rma_hdr h;
  BRAID_CHECK(braid_bootstrap_recv(comm->bootstrap, peer, TAG_RMA, &h, sizeof(h)));
  if (h.kind == RMA_PUT && h.bytes > 0) BRAID_CHECK(land_put(comm, peer, &h));
  if (h.kind != RMA_PUT && h.kind != RMA_SIGNAL) {
    BRAID_WARN("ncclWaitSignal: rank %d: malformed one-sided message from rank %d (kind %u)", comm->rank, peer, h.kind);
    return ncclInternalError;
  }
  if (h.ctx < 0 || h.ctx >= comm->sym->nctx || h.sig < 0 || h.sig >= BRAID_SYM_NSIGNALS) {
    BRAID_WARN("ncclWaitSignal: rank %d: rank %d signals context %d index %d, out of range here", comm->rank, peer,
               h.ctx, h.sig);
    return ncclInvalidUsage;
  }
  __atomic_fetch_add(braid_sym_slot(comm->sym->inbox, comm, peer, h.ctx, h.sig), 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}
