/*
 * direct.h - host executor only: Simple steps over direct connections (work.h
 * braid_conn.direct: the send end of a host-mode network connection). Included by prims.h;
 * compiles to nothing for the device, whose kernels never take this path.
 *
 * A sending step normally writes its payload into the FIFO slot and the proxy sends the slot.
 * On a direct connection the step instead leaves the payload where it already is in user
 * memory and publishes its address (ctrl->ptrs[slot], with sizes[slot], before tail); the
 * proxy hands that address to the net plugin. What the step sends from:
 *   SEND                    my input chunk, untouched (not with a pre-op: PreMulSum)
 *   COPY_SEND, RECV_COPY_SEND, RECV_REDUCE_COPY_SEND
 *                           my output chunk, where the step wrote the value anyway
 *   RECV_REDUCE_SEND        my output chunk, into which the step writes the partial result,
 *                           only where the output is scratch until the call ends (AllReduce:
 *                           the chunk is overwritten by the all-gather or broadcast phase)
 * This saves one copy of every byte sent (two for RECV_REDUCE_COPY_SEND), on a machine where
 * memory bandwidth, not the socket, bounds network collectives.
 *
 * Completion rule. The source must stay unchanged until the plugin is done reading it. On a
 * network connection `head` of the send end is written by this end's own proxy when the send
 * request of a step completes (net_proxy.c progress_send; the plugin contract: a completed
 * isend no longer reads its buffer), not when the peer receives it. So step k's source is
 * free once head > k. The executor keeps every direct send still in flight in a small list
 * (struct braid_direct, one per executor thread), and
 *   - before a Simple step writes my output, waits for those whose source overlaps the bytes
 *     it writes (in place, input and output are the same memory; a RECV_REDUCE_SEND partial
 *     is overwritten later in the same call);
 *   - after a work item, waits for all of them (braid_direct_drain): a call never returns
 *     while the plugin may still read the user's buffers.
 * A failed or aborted call returns without waiting; the socket plugin reads the source only
 * through send(), so a buffer freed after that fails the (already failed) connection with
 * EFAULT, it cannot crash the process.
 *
 * Receiving (work.h braid_conn.rdirect: the receive end of such a connection). A step whose
 * payload becomes my output unchanged — RECV and RECV_COPY_SEND of one connection, a p2p
 * receive — lands there: before waiting for it the executor declares its destination (ctrl->
 * ptrs[slot], sizes[slot], then ctrl->want) and the proxy posts that receive into user memory;
 * every other step is declared too, as "its slot". So the proxy posts receives only as far as
 * the executor has declared, not NSTEPS ahead: until then the bytes wait in the socket, which
 * holds them as the slots would. A RECV_COPY_SEND that also sends directly from my output then
 * copies nothing at all. Rules:
 *   - the destination must not be written by a send still in flight (in place): declaring
 *     waits for the sends that read it, like a write (a p2p receive, whose readiness is polled
 *     among other ops, takes its slot instead of waiting);
 *   - a receive into user memory must be over when the call returns, also when it fails: the
 *     executor remembers each one until its tail arrives, and a failed work item hands the
 *     ones still pending to braid_conn.host_abandon, which stops their connection for good
 *     (the communicator is failed anyway) so nothing writes to the user's buffer later.
 */
#ifndef BRAID_DIRECT_H
#define BRAID_DIRECT_H

#include "kernels/simt.h"
#include "kernels/work.h"

/* Smaller steps are copied: the copy is cheap and keeps their completion out of the way. */
#define BRAID_DIRECT_MIN_BYTES 16384
#define BRAID_DIRECT_MAX_PEND 32

#if !BRAID_DEVICE_COMPILE

struct braid_direct_pend {
  struct braid_conn* conn;
  uint64_t step; /* done once *conn->head > step */
  const char* src;
  size_t bytes;
};

/* A receive into user memory: over once *conn->tail > step. */
struct braid_direct_rpend {
  struct braid_conn* conn;
  uint64_t step;
};

/* One executor thread's direct sends and receives in flight. */
struct braid_direct {
  int scratch_out; /* the current work item's output may hold partial results */
  int npend, nrpend;
  struct braid_direct_pend pend[BRAID_DIRECT_MAX_PEND];
  struct braid_direct_rpend rpend[BRAID_DIRECT_MAX_PEND];
};

/* Wait until send `e` completed. 0, or the abort flag's value. */
static inline int braid_direct_wait_one(const struct braid_direct_pend* e, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(e->conn->head) <= e->step) {
    if (e->conn->host_kick) e->conn->host_kick(e->conn);
    simt_spin_pause(&spins);
    if ((spins & 255) == 0 && *abort_flag) return (int)*abort_flag;
  }
  return 0;
}

/* Forget completed sends. */
static inline void braid_direct_prune(struct braid_direct* d) {
  int k = 0;
  for (int i = 0; i < d->npend; i++)
    if (simt_ld_acquire_u64(d->pend[i].conn->head) <= d->pend[i].step) d->pend[k++] = d->pend[i];
  d->npend = k;
}

/* Before writing [dst, dst + bytes): wait for the sends that read any of it. */
static inline int braid_direct_before_write(struct braid_direct* d, const char* dst, size_t bytes,
                                            const volatile uint32_t* abort_flag) {
  if (d == NULL || d->npend == 0 || dst == NULL || bytes == 0) return 0;
  for (int i = 0; i < d->npend; i++) {
    const struct braid_direct_pend* e = &d->pend[i];
    if (e->src < dst + bytes && dst < e->src + e->bytes) {
      int st = braid_direct_wait_one(e, abort_flag);
      if (st) return st;
    }
  }
  braid_direct_prune(d);
  return 0;
}

/* Remember a direct send just published on c (as step c->step - 1). */
static inline int braid_direct_track(struct braid_direct* d, struct braid_conn* c, const char* src, size_t bytes,
                                     const volatile uint32_t* abort_flag) {
  if (d->npend == BRAID_DIRECT_MAX_PEND) braid_direct_prune(d);
  if (d->npend == BRAID_DIRECT_MAX_PEND) {
    int st = braid_direct_wait_one(&d->pend[0], abort_flag);
    if (st) return st;
    braid_direct_prune(d);
  }
  d->pend[d->npend++] = (struct braid_direct_pend){c, c->step - 1, src, bytes};
  return 0;
}

/* Does a send still in flight read any of [dst, dst + bytes)? */
static inline int braid_direct_overlaps(struct braid_direct* d, const char* dst, size_t bytes) {
  braid_direct_prune(d);
  for (int i = 0; i < d->npend; i++)
    if (d->pend[i].src < dst + bytes && dst < d->pend[i].src + d->pend[i].bytes) return 1;
  return 0;
}

/* Receive end of an rdirect connection: has the executor declared the current step? */
static inline int braid_recv_declared(const struct braid_conn* c) {
  return simt_ld_acquire_u64(c->want) > c->step;
}

/* Declare where the current step lands: `dst` (user memory, `bytes` expected) or NULL for its
 * slot. A receive into user memory is remembered until it arrives (d may be NULL for slots);
 * with BRAID_DIRECT_MAX_PEND of them pending (p2p with many peers) the step takes its slot. */
static inline void braid_recv_declare(struct braid_direct* d, struct braid_conn* c, char* dst, size_t bytes) {
  int slot = (int)(c->step % BRAID_NSTEPS);
  if (dst != NULL) {
    int k = 0;
    for (int i = 0; i < d->nrpend; i++) /* forget arrived ones */
      if (simt_ld_acquire_u64(d->rpend[i].conn->tail) <= d->rpend[i].step) d->rpend[k++] = d->rpend[i];
    d->nrpend = k;
    if (d->nrpend < BRAID_DIRECT_MAX_PEND)
      d->rpend[d->nrpend++] = (struct braid_direct_rpend){c, c->step};
    else
      dst = NULL;
  }
  c->ptrs[slot] = (uint64_t)(uintptr_t)dst;
  c->sizes[slot] = dst != NULL ? bytes : 0;
  simt_st_release_u64(c->want, c->step + 1);
}

/* The destination the current (declared) step of an rdirect connection lands in; NULL: slot. */
static inline char* braid_recv_declared_dst(const struct braid_conn* c) {
  return (char*)(uintptr_t)c->ptrs[c->step % BRAID_NSTEPS];
}

/* A failed work item: stop every connection still receiving into user memory. */
static inline void braid_direct_abandon(struct braid_direct* d) {
  for (int i = 0; i < d->nrpend; i++) {
    struct braid_conn* c = d->rpend[i].conn;
    if (simt_ld_acquire_u64(c->tail) <= d->rpend[i].step && c->host_abandon) c->host_abandon(c);
  }
  d->nrpend = 0;
}

/* After a work item: every direct send completed. 0, or the abort flag's value (the list is
 * emptied either way). */
static inline int braid_direct_drain(struct braid_direct* d, const volatile uint32_t* abort_flag) {
  int st = 0;
  for (int i = 0; i < d->npend && st == 0; i++) st = braid_direct_wait_one(&d->pend[i], abort_flag);
  d->npend = 0;
  if (st) braid_direct_abandon(d);
  d->nrpend = 0; /* every declared receive was waited for */
  return st;
}

#endif /* !BRAID_DEVICE_COMPILE */
#endif /* BRAID_DIRECT_H */
