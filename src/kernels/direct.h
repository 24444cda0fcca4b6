/*
 * direct.h - host executor only: the primitive variant for connections that take user
 * pointers (work.h braid_conn.direct: the send end of a host-mode network connection whose
 * plugin sends from any host memory; braid_conn.rdirect: the receive end of one that receives
 * into it). coll.h asks braid_direct_fan() whenever the connections of a step change and runs
 * the step through braid_direct_prim() when any of them is direct; every other connection
 * (and every connection on the device) runs the plain primitives of prims.h, which know
 * nothing of this file. On the device the hooks at the end compile to nothing.
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
 * Fetching (work.h braid_conn.host_fetch: the receive end of a shm connection whose sender
 * sends by pointer, the same send rules as above): after waiting for a Simple step the
 * receiver looks at ctrl->ptrs[slot]; set, the payload is still in the sender's memory and
 * host_fetch copies it (process_vm_readv between processes, memcpy between threads): into my
 * output when the step's payload becomes my output unchanged (RECV, RECV_COPY_SEND of one
 * connection: one copy instead of two), else into the slot, after which the step runs as if
 * it had arrived there. The receiver clears ptrs[slot] before it releases the step (head),
 * so a later step copied into that slot is never taken for a pointer.
 *
 * One pass (a reducing step: RECV_REDUCE_SEND, RECV_REDUCE_COPY, RECV_REDUCE_COPY_SEND). The
 * copy into the slot would cost a write and a read of every byte more than the reduction
 * itself, so the receiver does not make it: where the sender's address is valid here
 * (braid_conn.host_load: threads of one process) the reduction loads it in place; otherwise
 * (cross-memory attach) host_fetch copies it in pieces (braid_conn.fetch_piece, by default
 * BRAID_DIRECT_PIECE_BYTES: one system call each) to the start of the slot, and each piece is
 * reduced while it is still in this core's cache. Either way the
 * receiver clears ptrs[slot] and publishes `fetched` only after the reduction, so the sender's
 * source stays put until then. It never waits for its own sends while it holds the peer's
 * source (the in-place deadlock of the rule above): where a send of mine in flight still
 * reads the step's output, the step copies into the slot first, as before.
 *
 * Slot sends (struct braid_direct.slot_sends: per work item for a Reduce's chain unless
 * BRAID_SHM_DIRECT_REDUCE=1, per step for a p2p send marked `slot`). Sending by pointer moves
 * the sender's copy to the receiver: the right trade where both ends also receive (ring,
 * all-to-all), the wrong one in a chain that only flows one way, where the root would then
 * fetch and reduce every byte on its core while the sender's idles, and for a p2p send whose
 * source a receive of the same batch overwrites (core/plan.c mark_slot_sends: that receive
 * would land in the slot anyway, see the overlap rule above). Such a step sends through the
 * slot on shm connections (the receiver sees no pointer and reads the slot as usual); network
 * connections keep their direct sends, which save a copy on this end without adding one on
 * the other.
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

#include "kernels/prims.h"
#include "kernels/simt.h"
#include "kernels/work.h"

/* Smaller steps are copied: the copy is cheap and keeps their completion out of the way
 * (a connection may set its own bound: braid_conn.direct_min). */
#define BRAID_DIRECT_MIN_BYTES 16384
#define BRAID_DIRECT_MAX_PEND 32
/* A Gather's steps from the size braid_gather_store_min() gives are declared by the root and
 * may be written by the sender (below). */
#define BRAID_GATHER_STORE_MAX_MIN (32u << 10)
/* One pass over cross-memory attach: the piece copied, then reduced while in L1/L2. */
#define BRAID_DIRECT_PIECE_BYTES (64u << 10)
/* ctrl->ptrs[slot] of a step whose payload the sender already wrote into the receiver's
 * output (a pushed all-reduce, below): never an address the data path publishes. */
#define BRAID_DIRECT_PUSHED 1u
/* Pushed all-reduce: bytes reduced into the slot, then written to both outputs, at a time
 * where the connection sets no fetch_piece (threads of one process). */
#define BRAID_DIRECT_PUSH_PIECE_BYTES (256u << 10)

#if !BRAID_DEVICE_COMPILE

#include "kernels/reduce_isa.h" /* braid_reduce_stream_hold */

/* The connection's direct minimum, which both of its ends know, at most 32 KiB: a sender's
 * write wins from there, measured against the slot (docs/notes/2026-12-04-lead2.md). */
static inline size_t braid_gather_store_min(const struct braid_conn* c) {
  size_t min = c->direct_min ? c->direct_min : BRAID_DIRECT_MIN_BYTES;
  return min < BRAID_GATHER_STORE_MAX_MIN ? min : BRAID_GATHER_STORE_MAX_MIN;
}

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
  int scratch_out;  /* the current work item's output may hold partial results */
  int pair_push;    /* the current work item is a 2-rank ring all-reduce that may push (below) */
  int gather_store; /* BRAID_GATHER_STORE, read per work item: a Gather's root asks its senders to write */
  int gather_op;    /* the current p2p step is an ncclGather's (braid_direct_p2p_op) */
  int slot_sends;   /* the current work item (a Reduce) or p2p step sends through the shm slot (below) */
  int npend, nrpend;
  struct braid_direct_pend pend[BRAID_DIRECT_MAX_PEND];
  struct braid_direct_rpend rpend[BRAID_DIRECT_MAX_PEND];
};

/* The counter past which a direct send's source is free: the receiver's copy (fetched) where
 * it copies direct steps itself, else head. */
static inline const volatile uint64_t* braid_direct_done_ctr(const struct braid_conn* c) {
  return c->fetched ? c->fetched : c->head;
}

/* Wait until send `e` completed. 0, or the abort flag's value. */
static inline int braid_direct_wait_one(const struct braid_direct_pend* e, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(braid_direct_done_ctr(e->conn)) <= e->step) {
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
    if (simt_ld_acquire_u64(braid_direct_done_ctr(d->pend[i].conn)) <= d->pend[i].step) d->pend[k++] = d->pend[i];
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

/* Receives not declared to land in user memory land in their slots: declared as such before
 * the step waits for them, so the proxy posts them. */
static inline void braid_direct_declare_slots(struct braid_prims* p, int nr) {
  for (int i = 0; i < nr; i++)
    if (p->recv[i]->rdirect && !braid_recv_declared(p->recv[i])) braid_recv_declare(NULL, p->recv[i], NULL, 0);
}

/* Host executor, Simple: how a step uses direct connections (above). *src_p: where
 * it sends from (NULL: copy into the send slots as usual); *rdst_p: its receive lands in my
 * output (declared here, or earlier by a p2p receive polling for readiness); *scratch_p: a
 * RECV_REDUCE_SEND writing its partial result into my output chunk. Waits first for direct
 * sends still reading what the step writes. */
static inline int braid_prim_direct_plan(struct braid_prims* p, int prim, const char* in, char* out, int nr, int ns,
                                         size_t bytes, const char** src_p, char** rdst_p, int* scratch_p) {
  struct braid_direct* d = p->direct;
  int direct = d != NULL && ns > 0, writes_out = braid_prim_writes_output(prim);
  *src_p = 0;
  *rdst_p = 0;
  *scratch_p = 0;
  for (int i = 0; i < ns && direct; i++)
    direct = p->send[i]->direct &&
             bytes >= (p->send[i]->direct_min ? p->send[i]->direct_min : BRAID_DIRECT_MIN_BYTES) &&
             !(d->slot_sends && p->send[i]->fetched);
  if (direct && writes_out && out) {
    *src_p = out;
  } else if (direct && prim == BRAID_PRIM_SEND && p->op.kind != BRAID_RED_PREMULSUM) {
    *src_p = in;
  } else if (direct && prim == BRAID_PRIM_RECV_REDUCE_SEND && d->scratch_out && out) {
    *src_p = out;
    *scratch_p = 1;
  }
  if (nr == 1 && p->recv[0]->rdirect) {
    struct braid_conn* c = p->recv[0];
    if (braid_recv_declared(c)) {
      *rdst_p = braid_recv_declared_dst(c);
    } else if (d != NULL && (prim == BRAID_PRIM_RECV || prim == BRAID_PRIM_RECV_COPY_SEND) && out &&
               bytes >= BRAID_DIRECT_MIN_BYTES) {
      int st = braid_direct_before_write(d, out, bytes, p->abort_flag);
      if (st) return st;
      braid_recv_declare(d, c, out, bytes);
      *rdst_p = braid_recv_declared_dst(c);
      if (*rdst_p) return 0;
    }
  }
  if ((writes_out || *scratch_p) && !*rdst_p) return braid_direct_before_write(d, out, bytes, p->abort_flag);
  return 0;
}

/* Receive ends with host_fetch (above), first thing in a step: wait for it, then copy what the
 * senders left in their own memory, into my output (*rdst_p) where the payload becomes it
 * unchanged and no send of mine in flight reads it, else into the slot; a reducing step whose
 * output no send of mine still reads copies nothing now: peer[i] is the address it reduces
 * from in one pass (braid_direct_compute), 0 for a payload in its slot. */
static inline int braid_direct_fetch(struct braid_prims* p, int prim, char* out, int nr, size_t bytes, char** rdst_p,
                                     uint64_t* peer) {
  int any = 0, onepass = braid_prim_reads_input(prim) && p->direct != NULL &&
                         (out == NULL || !braid_direct_overlaps(p->direct, out, bytes));
  for (int i = 0; i < BRAID_MAX_FAN; i++) peer[i] = 0;
  for (int i = 0; i < nr; i++) any |= p->recv[i]->host_fetch != NULL;
  if (!any) return 0;
  braid_direct_declare_slots(p, nr);
  if (braid_prims_wait(p, prim, 1)) return p->status;
  for (int i = 0; i < nr; i++) {
    struct braid_conn* c = p->recv[i];
    int slot = (int)(c->step % BRAID_NSTEPS);
    uint64_t src = c->host_fetch ? c->ptrs[slot] : 0;
    /* both ends run one schedule (a step by pointer or through the slot alike) */
    if (c->host_fetch && c->sizes[slot] != bytes) return BRAID_EXEC_BAD_SCHEDULE;
    if (src == 0) continue;
    if (src == BRAID_DIRECT_PUSHED) { /* the sender wrote it into my output already */
      if (onepass || nr != 1 || out == NULL || (prim != BRAID_PRIM_RECV && prim != BRAID_PRIM_RECV_COPY_SEND))
        return BRAID_EXEC_BAD_SCHEDULE;
      *rdst_p = out;
      c->ptrs[slot] = 0;
      simt_st_release_u64(c->fetched, c->step + 1);
      continue;
    }
    if (onepass) {
      peer[i] = src;
      continue;
    }
    char* dst = braid_slot(c, BRAID_PROTO_SIMPLE);
    if (nr == 1 && out && (prim == BRAID_PRIM_RECV || prim == BRAID_PRIM_RECV_COPY_SEND) && p->direct &&
        !braid_direct_overlaps(p->direct, out, bytes))
      dst = *rdst_p = out;
    int st = c->host_fetch(c, dst, src, bytes);
    if (st) return st;
    c->ptrs[slot] = 0; /* before head releases the slot to the sender */
    simt_st_release_u64(c->fetched, c->step + 1);
  }
  return 0;
}

/* A step's reduction with receives left in the senders' memory (peer[i], one pass above):
 * loaded in place, or copied piece by piece into the slot and reduced at once. */
static inline int braid_direct_compute(const struct braid_prims* q, int prim, const char* in, char* out,
                                       const uint64_t* peer, char* const* sbuf, size_t nelem, int post) {
  int nr = braid_prim_recvs(prim) ? q->nrecv : 0;
  size_t es = (size_t)q->esize, piece = nelem;
  for (int i = 0; i < nr; i++)
    if (peer[i] && !q->recv[i]->host_load) {
      size_t b = q->recv[i]->fetch_piece ? q->recv[i]->fetch_piece : BRAID_DIRECT_PIECE_BYTES;
      if (b / es < piece) piece = b / es > 0 ? b / es : 1;
    }
  for (size_t e = 0; e < nelem; e += piece) {
    size_t n = nelem - e < piece ? nelem - e : piece, off = e * es;
    const char* rbuf[BRAID_MAX_FAN] = {0, 0, 0};
    char* sb[BRAID_MAX_FAN] = {0, 0, 0};
    for (int i = 0; i < nr; i++) {
      struct braid_conn* c = q->recv[i];
      /* a copied piece goes to the slot's start: each piece reuses the bytes the last one warmed */
      char* slot = braid_slot(c, BRAID_PROTO_SIMPLE) + (peer[i] ? 0 : off);
      rbuf[i] = peer[i] && c->host_load ? (const char*)(uintptr_t)(peer[i] + off) : slot;
      if (peer[i] && !c->host_load) {
        int st = c->host_fetch(c, slot, peer[i] + off, n * es);
        if (st) return st;
      }
    }
    for (int i = 0; i < BRAID_MAX_FAN; i++) sb[i] = sbuf[i] ? sbuf[i] + off : 0;
    braid_prim_compute(q, prim, in ? in + off : 0, out ? out + off : 0, rbuf, sb, n, post);
  }
  for (int i = 0; i < nr; i++)
    if (peer[i]) { /* the senders' sources are free: after the reduction, before head */
      struct braid_conn* c = q->recv[i];
      c->ptrs[c->step % BRAID_NSTEPS] = 0;
      simt_st_release_u64(c->fetched, c->step + 1);
    }
  return 0;
}

/*
 * Pushed all-reduce (2 ranks, ring, both connections direct shm: struct braid_direct.pair_push).
 * The ring's all-gather half has each rank copy the peer's reduced chunk out of the peer's
 * output, which the peer wrote a moment before: per payload byte one more read of memory
 * (or of the peer core's cache) than the least an all-reduce can move. Instead the rank that
 * reduces a chunk (RECV_REDUCE_COPY_SEND) reduces it piece by piece into its receive slot,
 * where the piece stays in this core's cache, writes the piece to its own output
 * (non-temporal stores where the output streams) and into the peer's output (host_push:
 * process_vm_writev, memcpy between threads), and publishes BRAID_DIRECT_PUSHED instead of its
 * output's address; the peer's RECV finds the payload in its output and copies nothing.
 * Each rank then reads both inputs once and writes both outputs once, between them.
 *   - The peer's output address: the peer's SEND steps of the work item publish odelta (its
 *     output minus its input: one value for the whole item, chunks sit at the same offsets in
 *     both) and ostep; a step is pushed only when ostep says a SEND at or after the one being
 *     reduced wrote it (an older value may be another call's). The peer is still in this
 *     work item: it ends only after the RECV of my last pushed step.
 *   - The peer's output chunk is written by nobody else meanwhile: the peer writes it only in
 *     that RECV. In place it is the peer's input chunk this step reads: each piece is read
 *     before it is overwritten, and the peer reads it nowhere else.
 *   - A failed write (a sandbox denying the write but not the read) is not an error: the step
 *     publishes its output's address as before and the peer copies it.
 * Either end decides alone: the receiver follows ptrs[slot], the sender needs the peer's
 * odelta. Returns 0 or an exec status; *pushed: the peer's chunk was written.
 */
static inline int braid_direct_push_target(const struct braid_prims* p, int prim, const char* src, const char* out,
                                           const uint64_t* peer, uint64_t* dst_p) {
  const struct braid_direct* d = p->direct;
  if (d == NULL || !d->pair_push || prim != BRAID_PRIM_RECV_REDUCE_COPY_SEND || p->nrecv != 1 || p->nsend != 1 ||
      peer[0] == 0 || src == NULL || src != out)
    return 0;
  const struct braid_conn* r = p->recv[0];
  if (r->host_push == NULL || r->ostep == NULL || simt_ld_acquire_u64(r->ostep) < r->step + 1) return 0;
  *dst_p = peer[0] + *r->odelta; /* the peer's input chunk -> its output chunk */
  return 1;
}

static inline int braid_direct_compute_push(const struct braid_prims* q, int prim, const char* in, char* out,
                                            const uint64_t* peer, uint64_t dst, size_t nelem, int post, int* pushed) {
  struct braid_conn* c = q->recv[0];
  size_t es = (size_t)q->esize, b = c->fetch_piece ? c->fetch_piece : BRAID_DIRECT_PUSH_PIECE_BYTES;
  size_t piece = b / es > 0 ? b / es : 1;
  char* slot = braid_slot(c, BRAID_PROTO_SIMPLE);
  struct braid_prims r = *q;
  r.nsend = 0; /* the result goes to the slot only; copied out below */
  *pushed = 1;
  for (size_t e = 0; e < nelem; e += piece) {
    size_t n = nelem - e < piece ? nelem - e : piece, off = e * es;
    const char* rbuf[BRAID_MAX_FAN] = {slot, 0, 0};
    char* sb[BRAID_MAX_FAN] = {0, 0, 0};
    if (c->host_load) {
      rbuf[0] = (const char*)(uintptr_t)(peer[0] + off);
    } else {
      int st = c->host_fetch(c, slot, peer[0] + off, n * es);
      if (st) return st;
    }
    braid_prim_compute(&r, prim, in + off, slot, rbuf, sb, n, post); /* slot = in + piece, in cache */
    BRAID_REDUCE_COPY(&q->op, out + off, 0, slot, 0, 0, 0, 0, n);
    if (*pushed && c->host_push(c, dst + off, slot, n * es) != 0) *pushed = 0;
  }
  c->ptrs[c->step % BRAID_NSTEPS] = 0; /* the sender's source is free: before head */
  simt_st_release_u64(c->fetched, c->step + 1);
  return 0;
}

/* The step itself: the received payload is in my output already (rdst) or gets computed
 * there (nothing for a plain SEND), from the slots or in one pass from the senders' memory
 * (peer); the sends go from `src` (publish the address, remember the sends until they
 * complete) or, without one, from a copy in their slots. */
static inline int braid_prim_simple_direct(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem,
                                           int post, const char* src, const char* rdst, int scratch,
                                           const uint64_t* peer) {
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
  size_t bytes = nelem * p->esize;
  uint64_t push_dst = 0;
  int pushed = 0;
  braid_direct_declare_slots(p, nr);
  if (braid_prims_wait(p, prim, 1)) return p->status;
  if (prim == BRAID_PRIM_SEND && src != NULL && src == in && out != NULL && p->direct->pair_push && ns == 1 &&
      p->send[0]->odelta) {
    *p->send[0]->odelta = (uint64_t)(uintptr_t)out - (uint64_t)(uintptr_t)in; /* before tail (finish) */
    simt_st_release_u64(p->send[0]->ostep, p->send[0]->step + 1);
  }
  if (rdst == NULL && braid_direct_push_target(p, prim, src, out, peer, &push_dst)) {
    int st = braid_direct_compute_push(p, prim, in, out, peer, push_dst, nelem, post, &pushed);
    if (st) return st;
  } else if (rdst != NULL) {
    for (int i = 0; i < ns && src == NULL; i++) /* a relay to a connection that copies */
      BRAID_REDUCE_COPY(&p->op, braid_slot(p->send[i], BRAID_PROTO_SIMPLE), 0, rdst, 0, 0, 0, 0, nelem);
  } else if (braid_prim_writes_output(prim) || scratch || src == NULL) { /* else a SEND from my input */
    char* sbuf[BRAID_MAX_FAN] = {out, 0, 0};
    struct braid_prims q = *p;
    q.nsend = scratch; /* a partial result goes to `out` as if it were the send slot: no post-op */
    if (src == NULL) { /* one pass, its sends copied into their slots */
      q.nsend = ns;
      for (int i = 0; i < ns; i++) sbuf[i] = braid_slot(p->send[i], BRAID_PROTO_SIMPLE);
    }
    /* An output the peer reads next from here (sent by pointer) is written through the cache:
     * streaming it out to memory would make the peer's read a memory read. */
    int fwd = src != NULL && src == out, far = ns > 0 && p->direct->scratch_out;
    /* ... unless it is an all-reduce's and every peer reading it is far (braid_conn.far): there
     * the lines cross between the cores' caches no faster than from memory (issue 20), and the
     * streaming stores read nothing for ownership (docs/notes/2026-12-02-far20.md). */
    for (int i = 0; i < ns; i++) far = far && p->send[i]->far;
    if (far) fwd = 0;
    if (fwd) braid_reduce_stream_hold(1);
    int st = braid_direct_compute(&q, prim, in, out, peer, sbuf, nelem, post);
    if (fwd) braid_reduce_stream_hold(0);
    if (st) return st;
  }
  if (pushed) src = NULL; /* nothing of mine to read: the peer finds its output written */
  for (int i = 0; i < ns && (src != NULL || pushed); i++)
    p->send[i]->ptrs[p->send[i]->step % BRAID_NSTEPS] = pushed ? BRAID_DIRECT_PUSHED : (uint64_t)(uintptr_t)src;
  braid_prims_finish(p, nr, ns, bytes, BRAID_PROTO_SIMPLE);
  if (src != NULL)
    for (int i = 0; i < ns; i++)
      if (braid_direct_track(p->direct, p->send[i], src, bytes, p->abort_flag)) return (int)*p->abort_flag;
  return 0;
}

/*
 * Split Reduce (algo/ring.h braid_ring_reduce_split_step): the non-root's reduced half lands in
 * the root's output. Before a loop's steps the root declares, on its receive end, where the
 * loop's final RECV lands (braid_direct_reduce_dest: struct braid_conn_ctrl dest_addr/bytes,
 * then dest_step, release); it does so before it publishes the loop's first send, so the
 * non-root, whose reducing step waits for that send, sees the declaration without waiting for
 * it. The non-root's RECV_REDUCE_FINAL_SEND on a send end that can write the root's memory
 * (braid_conn.host_store) then writes the reduced value there instead of into its slot:
 *   threads (store_load): the reduction stores straight into the root's output: one pass;
 *   processes: each piece is copied out of the root's input (process_vm_readv, as any one-pass
 *     step), reduced in place in this core's cache, and written into the root's output
 *     (process_vm_writev): the copy the root made out of the slot moves to the non-root and
 *     reads from a warm piece instead of a slot filled by the other core.
 * It marks the step (stored = step + 1, before tail); the root's RECV sees the mark and
 * copies nothing. Without a declaration matching the step (another schedule, BRAID_REDUCE_STORE
 * =0, writev denied: host_store NULL) the slot path runs, and the root, finding no mark,
 * copies the slot as before: the two ends never need to agree beforehand.
 */
static inline void braid_direct_declare_dest(struct braid_conn* c, uint64_t step, char* dst, size_t bytes) {
  if (c == NULL || c->dest == NULL || c->host_fetch == NULL || dst == NULL || bytes == 0) return;
  c->dest->dest_addr = (uint64_t)(uintptr_t)dst;
  c->dest->dest_bytes = bytes;
  simt_st_release_u64(&c->dest->dest_step, step + 1);
}

/* The non-root's RECV_REDUCE_FINAL_SEND (peer: braid_direct_fetch's one-pass sources) into a
 * declared destination. -1: not declared for this step, run the slot path. */
static inline int braid_direct_final_store(struct braid_prims* p, int prim, const char* in, size_t nelem, int post,
                                           const uint64_t* peer) {
  struct braid_conn *s = p->nsend == 1 ? p->send[0] : NULL, *r = p->nrecv == 1 ? p->recv[0] : NULL;
  if (prim != BRAID_PRIM_RECV_REDUCE_FINAL_SEND || s == NULL || r == NULL || s->dest == NULL || s->host_store == NULL)
    return -1;
  if (braid_prims_wait(p, prim, 1)) return p->status; /* the root's send: its declaration came before */
  size_t es = (size_t)p->esize, bytes = nelem * es;
  if (simt_ld_acquire_u64(&s->dest->dest_step) != s->step + 1) return -1;
  if (s->dest->dest_bytes != bytes) return BRAID_EXEC_BAD_SCHEDULE; /* both ends cut the loop alike */
  uint64_t dst = s->dest->dest_addr;
  struct braid_prims q = *p;
  q.nsend = 1;
  if (s->store_load) {
    char* sbuf[BRAID_MAX_FAN] = {(char*)(uintptr_t)dst, 0, 0};
    int st = braid_direct_compute(&q, prim, in, 0, peer, sbuf, nelem, post);
    if (st) return st;
  } else {
    char* slot = braid_slot(r, BRAID_PROTO_SIMPLE);
    size_t piece = (r->fetch_piece ? r->fetch_piece : BRAID_DIRECT_PIECE_BYTES) / es;
    if (piece == 0) piece = 1;
    for (size_t e = 0; e < nelem; e += piece) {
      size_t n = nelem - e < piece ? nelem - e : piece, off = e * es;
      /* the piece: copied to the slot's start (peer's memory) or already in the slot */
      char* buf = peer[0] ? slot : slot + off;
      if (peer[0]) {
        int st = r->host_fetch(r, buf, peer[0] + off, n * es);
        if (st) return st;
      }
      const char* rbuf[BRAID_MAX_FAN] = {buf, 0, 0};
      char* sbuf[BRAID_MAX_FAN] = {buf, 0, 0}; /* reduced in place, element by element */
      braid_prim_compute(&q, prim, in + off, 0, rbuf, sbuf, n, post);
      int st = s->host_store(s, dst + off, buf, n * es);
      if (st) return st;
    }
    if (peer[0]) { /* the root's source is free: after the reduction, before head */
      r->ptrs[r->step % BRAID_NSTEPS] = 0;
      simt_st_release_u64(r->fetched, r->step + 1);
    }
  }
  s->dest->stored = s->step + 1; /* before tail (released by the publish) */
  braid_prims_finish(p, 1, 1, bytes, BRAID_PROTO_SIMPLE);
  return 0;
}

/*
 * Gather (ops marked `gather`: coll_api.c expand). The root receives every block while each
 * sender has one send, so the root's copies bound the call, not the senders'. On a direct shm
 * connection the sender copies instead:
 *   - the root declares each step's destination as it polls the receive
 *     (braid_direct_gather_declare: dest_addr, dest_bytes, then dest_step, release);
 *   - the sender does not start the step before that declaration (braid_direct_send_ready);
 *   - it writes its block into the root's output (host_store: process_vm_writev, memcpy between
 *     threads) and marks the step stored (braid_direct_gather_store, before tail);
 *   - the root's RECV sees the mark (braid_direct_recv_stored) and copies nothing.
 * This holds for steps from the connection's direct minimum (braid_gather_store_min), which
 * both ends know; smaller ones go through the slot without either end waiting for the other.
 * The root declares every larger step, with no address (0) where it would rather read: BRAID_
 * GATHER_STORE=0, an output a send of mine still reads. The sender then sends as
 * before, and so does a sender that cannot write (host_store NULL). Both ends know the op is a
 * Gather's from the call itself, so they never need to agree on anything else, and a variable
 * set differently on two ranks changes only who copies.
 */
static inline void braid_direct_gather_declare(struct braid_prims* p, struct braid_conn* c, char* dst, size_t bytes) {
  if (c->host_fetch == NULL || c->dest == NULL || c->dest->dest_step == c->step + 1) return;
  if (bytes < braid_gather_store_min(c)) return; /* the sender does not wait for these */
  if (p->direct == NULL || !p->direct->gather_store || braid_direct_overlaps(p->direct, dst, bytes)) dst = NULL;
  c->dest->dest_addr = (uint64_t)(uintptr_t)dst;
  c->dest->dest_bytes = bytes;
  simt_st_release_u64(&c->dest->dest_step, c->step + 1);
}

/* A Gather's SEND on a direct shm connection whose root declared where it lands: written
 * there. -1: no address declared (or this end cannot write): send as usual. */
static inline int braid_direct_gather_store(struct braid_prims* p, int prim, const char* in, size_t nelem) {
  struct braid_conn* s = p->nsend == 1 ? p->send[0] : NULL;
  if (prim != BRAID_PRIM_SEND || p->direct == NULL || !p->direct->gather_op || s == NULL || s->dest == NULL ||
      s->host_store == NULL || in == NULL)
    return -1;
  size_t bytes = nelem * (size_t)p->esize;
  if (bytes < braid_gather_store_min(s)) return -1;
  if (braid_prims_wait(p, prim, 1)) return p->status;
  if (simt_ld_acquire_u64(&s->dest->dest_step) != s->step + 1) return BRAID_EXEC_BAD_SCHEDULE; /* waited for */
  uint64_t dst = s->dest->dest_addr;
  if (dst == 0) return -1;
  if (s->dest->dest_bytes != bytes) return BRAID_EXEC_BAD_SCHEDULE; /* both ends cut a message alike */
  int st = s->host_store(s, dst, in, bytes);
  if (st) return st;
  s->dest->stored = s->step + 1; /* before tail (released by the publish) */
  braid_prims_finish(p, 0, 1, bytes, BRAID_PROTO_SIMPLE);
  return 0;
}

/* The root's RECV of the non-root's half: where the sender stored it into my output as
 * declared, nothing to copy. -1: not declared, or the sender used the slot. */
static inline int braid_direct_recv_stored(struct braid_prims* p, int prim, const char* out, size_t nelem) {
  struct braid_conn* r = p->nrecv == 1 ? p->recv[0] : NULL;
  if (prim != BRAID_PRIM_RECV || r == NULL || r->dest == NULL || out == NULL) return -1;
  if (r->dest->dest_step != r->step + 1 || r->dest->dest_addr != (uint64_t)(uintptr_t)out) return -1; /* mine */
  if (braid_prims_wait(p, prim, 1)) return p->status;
  if (simt_ld_acquire_u64(&r->dest->stored) != r->step + 1) return -1;
  braid_prims_finish(p, 1, 0, nelem * p->esize, BRAID_PROTO_SIMPLE);
  return 0;
}

/* A p2p receive about to poll connection c for its next step (of `bytes` into `dst`): declare
 * where it lands, user memory unless a send in flight still reads it (waiting there, among
 * other ops polled for readiness, could wait on a peer that waits on us). */
static inline void braid_p2p_recv_declare(struct braid_prims* p, struct braid_conn* c, char* dst, size_t bytes) {
  if (!c->rdirect || braid_recv_declared(c)) return;
  if (p->direct == NULL || p->proto != BRAID_PROTO_SIMPLE || bytes < BRAID_DIRECT_MIN_BYTES ||
      braid_direct_overlaps(p->direct, dst, bytes))
    dst = NULL;
  braid_recv_declare(p->direct, c, dst, bytes);
}

/* The variant's step: Simple steps that can use user pointers do; everything else runs the
 * plain primitive once the receives are declared. */
static inline int braid_direct_step(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem,
                                    int post) {
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
  if (p->proto == BRAID_PROTO_SIMPLE) {
    const char* src;
    char *rdst, *fetched = NULL;
    uint64_t peer[BRAID_MAX_FAN];
    int st = braid_direct_recv_stored(p, prim, out, nelem), scratch;
    if (st >= 0) return st;
    st = braid_direct_fetch(p, prim, out, nr, nelem * p->esize, &fetched, peer);
    if (st) return st;
    st = braid_direct_final_store(p, prim, in, nelem, post, peer);
    if (st >= 0) return st;
    st = braid_direct_gather_store(p, prim, in, nelem);
    if (st >= 0) return st;
    st = braid_prim_direct_plan(p, prim, in, out, nr, ns, nelem * p->esize, &src, &rdst, &scratch);
    if (st) return st;
    if (fetched) rdst = fetched;
    if (src != 0 || rdst != 0 || peer[0] || peer[1] || peer[2])
      return braid_prim_simple_direct(p, prim, in, out, nelem, post, src, rdst, scratch, peer);
  }
  braid_direct_declare_slots(p, nr);
  if (p->proto == BRAID_PROTO_SIMPLE) return braid_prim_simple(p, prim, in, out, nelem, post);
  return p->proto == BRAID_PROTO_LL ? braid_prim_ll(p, prim, in, out, nelem, post)
                                    : braid_prim_ll128(p, prim, in, out, nelem, post);
}

#endif /* !BRAID_DEVICE_COMPILE */

/* ---- the hooks coll.h calls (shared subset; nothing on the device) ---- */

/* Does the step whose connections were just set (p->send/recv) take the variant? */
HD int braid_direct_fan(const struct braid_prims* p) {
#if BRAID_DEVICE_COMPILE
  return 0;
#else
  for (int i = 0; i < p->nsend; i++)
    if (p->send[i]->direct) return 1;
  for (int i = 0; i < p->nrecv; i++)
    if (p->recv[i]->rdirect || p->recv[i]->host_fetch) return 1;
  return 0;
#endif
}

/* Are both ring connections of a two-rank channel shm connections sent by pointer, the
 * receiver fetching (braid_conn.direct with `fetched` on the send end, host_fetch on the
 * receive end)? Both ranks see the same two connections from either end, so they agree; with
 * BRAID_SHM_DIRECT=OFF, cross-memory attach denied between processes, a network or on the
 * device: no. */
HD int braid_direct_pair(const struct braid_conn* send, const struct braid_conn* recv) {
#if BRAID_DEVICE_COMPILE
  (void)send;
  (void)recv;
  return 0;
#else
  return send != 0 && recv != 0 && send->direct && send->fetched != 0 && recv->host_fetch != 0;
#endif
}

/* A step of the variant (p->variant set); never reached on the device. */
HD int braid_direct_prim(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
#if BRAID_DEVICE_COMPILE
  return BRAID_EXEC_BAD_SCHEDULE;
#else
  return braid_direct_step(p, prim, in, out, nelem, post);
#endif
}

/* A split Reduce's root, before a loop's steps: the receive `ahead` steps past the current one
 * of connection c lands, reduced, at [dst, dst + bytes) of my output (above). */
HD void braid_direct_reduce_dest(struct braid_conn* c, uint64_t ahead, char* dst, size_t bytes) {
#if BRAID_DEVICE_COMPILE
  (void)c;
  (void)ahead;
  (void)dst;
  (void)bytes;
#else
  if (simt_tid() == 0 && c != 0) braid_direct_declare_dest(c, c->step + ahead, dst, bytes);
#endif
}

/* A p2p receive about to poll connection c for its next step of `bytes` into `dst` (`gather`:
 * an ncclGather's, above). */
HD void braid_direct_before_poll(struct braid_prims* p, struct braid_conn* c, char* dst, size_t bytes, int gather) {
#if BRAID_DEVICE_COMPILE
  (void)gather;
#else
  braid_p2p_recv_declare(p, c, dst, bytes);
  if (gather) braid_direct_gather_declare(p, c, dst, bytes);
#endif
}

/* May a p2p send start its next step (of `bytes`) on c? An ncclGather's waits on a direct shm
 * connection until the root has declared where the step lands (above), from the connection's
 * direct minimum up (both ends know it: the receiver chose it); everything else: yes. */
HD int braid_direct_send_ready(const struct braid_conn* c, int gather, size_t bytes) {
#if BRAID_DEVICE_COMPILE
  (void)c;
  (void)gather;
  (void)bytes;
  return 1;
#else
  return !gather || !c->direct || c->dest == 0 || bytes < braid_gather_store_min(c) ||
         simt_ld_acquire_u64(&c->dest->dest_step) == c->step + 1;
#endif
}

/* The p2p step about to run belongs to an ncclGather (or not), and goes through the slot on
 * shm (its op is marked `slot`) or not. */
HD void braid_direct_p2p_op(struct braid_prims* p, int gather, int slot) {
#if BRAID_DEVICE_COMPILE
  (void)p;
  (void)gather;
  (void)slot;
#else
  if (p->direct != 0) {
    p->direct->gather_op = gather;
    p->direct->slot_sends = slot;
  }
#endif
}
#endif /* BRAID_DIRECT_H */
