/*
 * coll.h - runs one work item on one channel: the loop that walks a schedule (src/algo) and
 * calls a primitive (prims.h) per step. Shared subset: the host executor and the kernels call
 * braid_run_work() with the same arguments.
 *
 * Data layout per collective (counts in elements, `count` as the API counts it):
 *   AllReduce      in[count]          -> out[count]
 *   AllGather      in[count]          -> out[nranks * count], rank r's part at r * count
 *   ReduceScatter  in[nranks * count] -> out[count], rank r reduces part r
 *   Broadcast      in[count] at root  -> out[count]
 *   Reduce         in[count]          -> out[count] at root
 * Each channel owns the element range [chan_off, chan_off + chan_count) of every part.
 */
#ifndef BRAID_COLL_H
#define BRAID_COLL_H

#include "algo/ring.h"
#include "algo/tree.h"
#include "kernels/direct.h"
#include "kernels/multimem.h"
#include "kernels/prims.h"

HD size_t braid_min_sz(size_t a, size_t b) {
  return a < b ? a : b;
}

/* Chunks of the ring all-reduce are whole 16-byte multiples (NCCL aligns its chunks too), so
 * every chunk of my buffers starts at the same offset within 16 bytes as the slot it moves
 * through and the element loops run as 16-byte packs (reduce.h). */
HD size_t braid_align_elems(size_t n, int es) {
  size_t unit = es >= 16 ? 1 : (size_t)(16 / es);
  return (n + unit - 1) / unit * unit;
}

/* The connections of the next steps: thread 0 writes them (prims.h rules); also whether they
 * take the host-only variant of direct.h. */
HD void braid_prims_set_fan(struct braid_prims* p, struct braid_conn* const* send, int ns,
                            struct braid_conn* const* recv, int nr) {
  if (simt_tid() != 0) return;
  for (int i = 0; i < BRAID_MAX_FAN; i++) {
    p->send[i] = i < ns ? send[i] : 0;
    p->recv[i] = i < nr ? recv[i] : 0;
  }
  p->nsend = ns;
  p->nrecv = nr;
  p->variant = braid_direct_fan(p);
}

/* One peer each way (ring, chain, p2p); NULL for none. */
HD void braid_prims_set_peers(struct braid_prims* p, struct braid_conn* send, struct braid_conn* recv) {
  braid_prims_set_fan(p, &send, send ? 1 : 0, &recv, recv ? 1 : 0);
}

/* One step of a primitive over at most one slot of payload. Returns 0 or an exec status. A
 * primitive outside enum braid_prim (a schedule that went wrong) is an error, not a no-op. */
HD int braid_prim_step(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  if (prim <= BRAID_PRIM_NONE || prim >= BRAID_NUM_PRIMS) return BRAID_EXEC_BAD_SCHEDULE;
  if (prim == BRAID_PRIM_LOCAL_COPY) {
    braid_prim_compute(p, prim, in, out, 0, 0, nelem, post);
    simt_bar_sync();
    return 0;
  }
  if (p->variant) return braid_direct_prim(p, prim, in, out, nelem, post);
  if (p->proto == BRAID_PROTO_SIMPLE) return braid_prim_simple(p, prim, in, out, nelem, post);
  if (p->proto == BRAID_PROTO_LL) return braid_prim_ll(p, prim, in, out, nelem, post);
  if (p->proto == BRAID_PROTO_LL128) return braid_prim_ll128(p, prim, in, out, nelem, post);
  return BRAID_EXEC_BAD_SCHEDULE;
}

/* Position of `rank` in a ring order. */
HD int braid_ring_pos_of(const struct braid_dev_ring* ring, int nranks, int rank) {
  for (int i = 0; i < nranks; i++)
    if (ring->ranks[i] == rank) return i;
  return -1;
}

/* AllReduce: each loop covers nranks chunks; chunk c of the loop is the same range on every rank. */
HD_STEP int braid_run_ring_allreduce(struct braid_prims* p, const struct braid_work* w,
                                     const struct braid_dev_channel* ch) {
  int n = w->nranks, es = p->esize, nsteps = braid_ring_allreduce_nsteps(n);
  size_t size = w->chan_count, loop = (size_t)n * w->chunk_elems;
  const char* in = (const char*)w->sendbuff + w->chan_off * es;
  char* out = (char*)w->recvbuff + w->chan_off * es;
  if (nsteps <= 0) return BRAID_EXEC_BAD_SCHEDULE;
  for (size_t grid = 0; grid < size; grid += loop) {
    size_t chunk = braid_min_sz(w->chunk_elems, braid_align_elems((size - grid + n - 1) / n, es));
    for (int s = 0; s < nsteps; s++) {
      struct braid_step st = {0, 0};
      if (braid_ring_allreduce_step(n, ch->ring.index, s, &st) != BRAID_SCHED_OK) return BRAID_EXEC_BAD_SCHEDULE;
      size_t off = grid + (size_t)st.chunk * chunk;
      size_t nelem = off < size ? braid_min_sz(chunk, size - off) : 0;
      if (off > size) off = size;
      int rc = braid_prim_step(p, st.prim, in + off * es, out + off * es, nelem, 1);
      if (rc) return rc;
    }
  }
  return 0;
}

/* AllReduce of two ranks by exchange: each sends its whole input to the other and reduces
 * locally, so a chunk costs one one-way hop (the ring needs two). Both ranks compute
 * op(mine, theirs); every operator braid has is commutative, so they agree bit for bit. */
HD_STEP int braid_run_pair_allreduce(struct braid_prims* p, const struct braid_work* w) {
  /* (what a step needs is re-read from the work item each time, so little stays live across
   * the calls: the kernels then spill nothing) */
  for (size_t grid = 0; grid < w->chan_count; grid += w->chunk_elems) {
    size_t nelem = braid_min_sz(w->chunk_elems, w->chan_count - grid), at = (w->chan_off + grid) * p->esize;
    int rc = braid_prim_step(p, BRAID_PRIM_SEND, (const char*)w->sendbuff + at, 0, nelem, 1);
    if (rc == 0)
      rc = braid_prim_step(p, BRAID_PRIM_RECV_REDUCE_COPY, (const char*)w->sendbuff + at, (char*)w->recvbuff + at,
                           nelem, 1);
    if (rc) return rc;
  }
  return 0;
}

/* AllGather / ReduceScatter: chunk c of a loop is the data of the rank at ring position c. */
HD_STEP int braid_run_ring_gather_scatter(struct braid_prims* p, const struct braid_work* w,
                                          const struct braid_dev_channel* ch, int is_gather) {
  int n = w->nranks, es = p->esize;
  int nsteps = is_gather ? braid_ring_allgather_nsteps(n) : braid_ring_reducescatter_nsteps(n);
  size_t size = w->chan_count;
  if (nsteps <= 0) return BRAID_EXEC_BAD_SCHEDULE;
  for (size_t grid = 0; grid < size; grid += w->chunk_elems) {
    size_t nelem = braid_min_sz(w->chunk_elems, size - grid);
    for (int s = 0; s < nsteps; s++) {
      struct braid_step st = {0, 0};
      int rc = is_gather ? braid_ring_allgather_step(n, ch->ring.index, s, &st)
                         : braid_ring_reducescatter_step(n, ch->ring.index, s, &st);
      if (rc != BRAID_SCHED_OK) return BRAID_EXEC_BAD_SCHEDULE;
      size_t part = (size_t)ch->ring.ranks[st.chunk] * w->count + w->chan_off + grid;
      size_t mine = w->chan_off + grid;
      const char* in = (const char*)w->sendbuff + (is_gather ? mine : part) * es;
      char* out = (char*)w->recvbuff + (is_gather ? part : mine) * es;
      rc = braid_prim_step(p, st.prim, in, out, nelem, 1);
      if (rc) return rc;
    }
  }
  return 0;
}

/* Broadcast / Reduce: a pipelined chain along the ring, one step per chunk. */
HD_STEP int braid_run_ring_chain(struct braid_prims* p, const struct braid_work* w, const struct braid_dev_channel* ch,
                                 int is_bcast) {
  int n = w->nranks, es = p->esize;
  int root_pos = braid_ring_pos_of(&ch->ring, n, w->root);
  int rel =
      is_bcast ? braid_ring_bcast_pos(n, ch->ring.index, root_pos) : braid_ring_reduce_pos(n, ch->ring.index, root_pos);
  struct braid_step st = {0, 0};
  int rc = is_bcast ? braid_ring_broadcast_step(n, rel, 0, &st) : braid_ring_reduce_step(n, rel, 0, &st);
  if (rc != BRAID_SCHED_OK) return BRAID_EXEC_BAD_SCHEDULE; /* e.g. a root missing from the ring */
  size_t size = w->chan_count;
  const char* in = (const char*)w->sendbuff + w->chan_off * es;
  char* out = (char*)w->recvbuff + w->chan_off * es;
  for (size_t grid = 0; grid < size; grid += w->chunk_elems) {
    size_t nelem = braid_min_sz(w->chunk_elems, size - grid);
    rc = braid_prim_step(p, st.prim, in ? in + grid * es : 0, out ? out + grid * es : 0, nelem, 1);
    if (rc) return rc;
  }
  return 0;
}

/* Reduce of two ranks, split (algo/ring.h): each loop is two chunks (16-byte multiples, as the
 * ring all-reduce's), one reduced on each rank. Only the root passes its output. */
HD_STEP int braid_run_reduce_split(struct braid_prims* p, const struct braid_work* w,
                                   const struct braid_dev_channel* ch) {
  int n = w->nranks, es = p->esize, nsteps = braid_ring_reduce_split_nsteps(n);
  int pos = braid_ring_reduce_pos(n, ch->ring.index, braid_ring_pos_of(&ch->ring, n, w->root));
  size_t size = w->chan_count, loop = (size_t)BRAID_RING_REDUCE_SPLIT_CHUNKS * w->chunk_elems;
  const char* in = (const char*)w->sendbuff + w->chan_off * es;
  char* out = w->rank == w->root ? (char*)w->recvbuff + w->chan_off * es : 0;
  if (nsteps <= 0 || pos < 0) return BRAID_EXEC_BAD_SCHEDULE;
  for (size_t grid = 0; grid < size; grid += loop) {
    size_t chunk = braid_min_sz(w->chunk_elems, braid_align_elems((size - grid + 1) / 2, es));
#if !BRAID_DEVICE_COMPILE
    /* The root: where the loop's RECV (the non-root's final half) lands, declared before the
     * loop's first send so the non-root can store it there (direct.h); `ahead`: the receives
     * of the loop before it. */
    for (int s = 0, ahead = 0; s < nsteps && out; s++) {
      struct braid_step st = {0, 0};
      if (braid_ring_reduce_split_step(n, pos, s, &st) != BRAID_SCHED_OK) return BRAID_EXEC_BAD_SCHEDULE;
      size_t off = grid + (size_t)st.chunk * chunk;
      if (st.prim == BRAID_PRIM_RECV && off < size)
        braid_direct_reduce_dest(ch->ring_recv, (uint64_t)ahead, out + off * es, braid_min_sz(chunk, size - off) * es);
      ahead += braid_prim_recvs(st.prim) ? 1 : 0;
    }
#endif
    for (int s = 0; s < nsteps; s++) {
      struct braid_step st = {0, 0};
      if (braid_ring_reduce_split_step(n, pos, s, &st) != BRAID_SCHED_OK) return BRAID_EXEC_BAD_SCHEDULE;
      if (st.prim == BRAID_PRIM_NONE) continue;
      size_t off = grid + (size_t)st.chunk * chunk;
      size_t nelem = off < size ? braid_min_sz(chunk, size - off) : 0;
      if (off > size) off = size;
      int rc = braid_prim_step(p, st.prim, in + off * es, out ? out + off * es : 0, nelem, 1);
      if (rc) return rc;
    }
  }
  return 0;
}

/* Point the primitives at one side of a tree step: the parent, every child, or nothing. */
HD int braid_tree_conns(int dir, struct braid_conn* up, struct braid_conn* const* down, int ndown,
                        struct braid_conn** out) {
  if (dir == BRAID_TREE_UP) {
    out[0] = up;
    return 1;
  }
  if (dir == BRAID_TREE_DOWN) {
    for (int i = 0; i < ndown; i++) out[i] = down[i];
    return ndown;
  }
  return 0;
}

/* Tree AllReduce: reduce up the tree then broadcast down, software-pipelined a few chunks
 * deep (algo/tree.h), each chunk one FIFO slot. */
HD_STEP int braid_run_tree_allreduce(struct braid_prims* p, const struct braid_work* w,
                                     const struct braid_dev_channel* ch) {
  int ndown = 0, has_up = ch->tree.up >= 0;
  for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) ndown += ch->tree.down[d] >= 0;
  size_t chunk = w->chunk_elems;
  int nchunks = (int)((w->chan_count + chunk - 1) / chunk);
  /* The root may run this many chunks ahead of a child: each connection must hold them. */
  const int depth = BRAID_NSTEPS / 2;
  int nsteps = braid_tree_allreduce_nsteps(has_up, ndown, nchunks);
  if (nsteps <= 0 && nchunks > 0) return BRAID_EXEC_BAD_SCHEDULE;
  for (int s = 0; s < nsteps; s++) {
    struct braid_tree_step ts = {0, 0, 0, 0, 0};
    if (braid_tree_allreduce_step(has_up, ndown, nchunks, depth, s, &ts) != BRAID_SCHED_OK)
      return BRAID_EXEC_BAD_SCHEDULE;
    if (ts.prim == BRAID_PRIM_NONE) continue; /* a pipeline bubble: nothing this step */
    struct braid_conn *down_send[BRAID_MAX_TREE_ARITY], *down_recv[BRAID_MAX_TREE_ARITY], *rc_[BRAID_MAX_FAN],
        *sc_[BRAID_MAX_FAN];
    for (int d = 0, k = 0; d < BRAID_MAX_TREE_ARITY; d++) {
      if (ch->tree.down[d] < 0) continue;
      down_send[k] = ch->tree_down_send[d];
      down_recv[k++] = ch->tree_down_recv[d];
    }
    int nr = braid_tree_conns(ts.recv, ch->tree_up_recv, down_recv, ndown, rc_);
    int ns = braid_tree_conns(ts.send, ch->tree_up_send, down_send, ndown, sc_);
    braid_prims_set_fan(p, sc_, ns, rc_, nr);
    size_t off = (size_t)ts.chunk * chunk, at = (w->chan_off + off) * p->esize;
    int rc = braid_prim_step(p, ts.prim, (const char*)w->sendbuff + at, (char*)w->recvbuff + at,
                             braid_min_sz(chunk, w->chan_count - off), 1);
    if (rc) return rc;
  }
  return 0;
}

/* Non-blocking readiness, for point-to-point rounds; a proxied connection that is not ready
 * gets a kick (host: moved by this thread; prims.h braid_conn_kick). */
HD int braid_conn_can_send(struct braid_conn* c) {
  if (c->step < BRAID_NSTEPS || simt_ld_acquire_u64(c->head) >= c->step + 1 - BRAID_NSTEPS) return 1;
  braid_conn_kick(c);
  return simt_ld_acquire_u64(c->head) >= c->step + 1 - BRAID_NSTEPS;
}
HD int braid_conn_can_recv(struct braid_conn* c) {
  if (simt_ld_acquire_u64(c->tail) > c->step) return 1;
  braid_conn_kick(c);
  return simt_ld_acquire_u64(c->tail) > c->step;
}

/* Ops to one peer in one direction run in call order: op k waits for earlier unfinished ones. */
HD int braid_p2p_blocked(const struct braid_p2p_op* ops, int k) {
  for (int j = 0; j < k; j++)
    if (ops[j].peer == ops[k].peer && ops[j].is_send == ops[k].is_send && ops[j].done < ops[j].bytes) return 1;
  return 0;
}

/* The ops of one round where the polling loop reads them: copied to the primitives' scratch
 * (device: shared memory) when they fit, else in place. Their progress starts at 0. */
HD struct braid_p2p_op* braid_p2p_round_ops(struct braid_prims* p, struct braid_p2p_op* ops, int n) {
  struct braid_p2p_op* r = p->ops != 0 && n <= p->ops_cap ? p->ops : ops;
  simt_bar_sync(); /* a slower thread may still read the previous round's ops in its last pass */
  if (r != ops)
    for (int k = simt_tid(); k < n; k += simt_nthreads()) r[k] = ops[k];
  simt_bar_sync();
  if (simt_tid() == 0)
    for (int k = 0; k < n; k++) r[k].done = 0;
  simt_bar_sync();
  return r;
}

/* Bytes per step of a p2p op on connection c: the connection's own figure where it has one (a
 * shm connection that copies by pointer takes whole slots: one copy per step, no pipeline to
 * fill, so fewer, larger steps only save handshakes and system calls), else the work item's.
 * An AlltoAll's message up to BRAID_SHM_A2A_MAX on such a connection goes in op->a2a_step steps
 * instead: below the direct minimum they travel through the FIFO, pipelined, and no sender waits
 * for its receiver (with every rank sending to every other, 0.71-0.80x the time at 2 ranks,
 * 128 KiB-2 MiB; 0.72x at 4 ranks, 512 KiB-1 MiB: docs/notes/2026-12-04-lead3.md). */
HD size_t braid_p2p_chunk(const struct braid_work* w, const struct braid_conn* c, const struct braid_p2p_op* op) {
  if (c->p2p_step == 0) return w->p2p_chunk_bytes;
  return op->a2a_step != 0 && op->a2a_step < c->p2p_step ? op->a2a_step : c->p2p_step;
}

/* One pass over a round's ops: a step of each op whose connection is ready. *progressed_p:
 * some op moved. Returns 0 or an exec status. The block decides readiness by a vote of
 * thread 0's poll, and reads `done` only after the barrier that follows thread 0's update. */
HD int braid_p2p_pass(struct braid_prims* p, const struct braid_work* w, const struct braid_dev_channel* ch,
                      struct braid_p2p_op* ops, int n, int* pending_p, int* progressed_p) {
  for (int k = 0; k < n; k++) {
    struct braid_p2p_op* op = &ops[k];
    if (op->done >= op->bytes) continue;
    *pending_p = 1;
    if (braid_p2p_blocked(ops, k)) continue;
    struct braid_conn* c = op->is_send ? ch->p2p_send[op->peer] : ch->p2p_recv[op->peer];
    if (c == 0) return BRAID_EXEC_BAD_SCHEDULE; /* an op to a peer that was never connected */
    size_t step = braid_min_sz(braid_p2p_chunk(w, c, op), op->bytes - op->done);
    if (!op->is_send) braid_direct_before_poll(p, c, op->buff + op->done, step, op->gather);
    int mine = simt_tid() == 0 && (op->is_send ? braid_conn_can_send(c) && braid_direct_send_ready(c, op->gather, step)
                                               : braid_conn_can_recv(c));
    if (!simt_bar_or(mine)) continue;
    braid_prims_set_peers(p, op->is_send ? c : 0, op->is_send ? 0 : c);
    braid_direct_p2p_op(p, op->gather, op->slot);
    int rc = braid_prim_step(p, op->is_send ? BRAID_PRIM_SEND : BRAID_PRIM_RECV, op->buff + op->done,
                             op->buff + op->done, step, 0);
    if (rc) return rc;
    if (simt_tid() == 0) op->done += step;
    simt_bar_sync();
    *progressed_p = 1;
  }
  return 0;
}

#if !BRAID_DEVICE_COMPILE
#include <string.h>

#include "kernels/executor.h"

/*
 * Host executor: sends to self made while the p2p ops wait. A rank that copied its own block
 * before the call (as it used to) kept every peer waiting on its sends for that long; made in
 * the polls where no op can move, the copy fills time the rank would spend yielding, and its
 * sends go out first. Pieces of BRAID_IDLE_COPY_BYTES keep a poll of the ops between them; a
 * copy whose source and destination overlap (but differ) goes in one memmove.
 */
#define BRAID_IDLE_COPY_BYTES (64u << 10)
struct braid_idle_copies {
  const struct braid_self_copy* copies;
  int n, at;    /* copies, and the one in progress */
  size_t done;  /* bytes of copies[at] made */
  int any_wait; /* 1: in any poll where no op moves; 0: only where no receive is left either */
};

/* Whether a poll where none of `ops` moved may make a piece now. A receive still pending
 * means a peer's data may arrive any moment and its sender waits until it is taken; under
 * any_wait = 0 the copy waits until only sends are left (their receivers take them). */
static inline int braid_idle_copy_now(const struct braid_idle_copies* q, const struct braid_p2p_op* ops, int n) {
  if (q == NULL || q->at >= q->n) return 0;
  if (!q->any_wait)
    for (int k = 0; k < n; k++)
      if (!ops[k].is_send && ops[k].done < ops[k].bytes) return 0;
  return 1;
}

/* One piece of the next copy; 0 when none is left. */
static inline int braid_idle_copy_step(struct braid_idle_copies* q) {
  if (q == NULL) return 0;
  for (; q->at < q->n; q->at++, q->done = 0) {
    const struct braid_self_copy* c = &q->copies[q->at];
    char* dst = (char*)c->dst;
    const char* src = (const char*)c->src;
    if (dst == src || q->done >= c->bytes) continue;
    size_t piece = c->bytes - q->done;
    int overlap = dst < src + c->bytes && src < dst + c->bytes;
    if (!overlap && piece > BRAID_IDLE_COPY_BYTES) piece = BRAID_IDLE_COPY_BYTES;
    memmove(dst + q->done, src + q->done, piece);
    q->done += piece;
    return 1;
  }
  return 0;
}

/* Everything not made yet. */
static inline void braid_idle_copy_finish(struct braid_idle_copies* q) {
  while (braid_idle_copy_step(q)) continue;
}
#endif

/*
 * SendRecv: the ops of one round progress together, a step at a time, whichever side is
 * ready, so a rank sending a large message to one peer keeps draining another's. Each op
 * moves ceil(bytes / chunk) steps (none for 0 bytes), identically on both ends. On the host,
 * a poll where no op can move makes a piece of the sends to self instead of pausing.
 */
HD_STEP int braid_run_p2p(struct braid_prims* p, const struct braid_work* w, const struct braid_dev_channel* ch) {
  if (w->nops > 0 && (w->ops == 0 || w->p2p_chunk_bytes == 0)) return BRAID_EXEC_BAD_SCHEDULE;
  for (int i = 0, end; i < w->nops; i = end) {
    for (end = i; end < w->nops && w->ops[end].round == w->ops[i].round; end++) continue;
    struct braid_p2p_op* ops = braid_p2p_round_ops(p, w->ops + i, end - i);
    uint32_t spins = 0;
    for (int pending = 1; pending;) {
      int progressed = 0, rc;
      pending = 0;
      rc = braid_p2p_pass(p, w, ch, ops, end - i, &pending, &progressed);
      if (rc) return rc;
      if (pending && !progressed) {
#if !BRAID_DEVICE_COMPILE
        if (braid_idle_copy_now(p->idle, ops, end - i) && braid_idle_copy_step(p->idle))
          continue; /* host: one thread per block */
#endif
        /* Every thread spins in step with the others (same counter); thread 0 reads the flag
         * for the block and the vote tells everyone. */
        int st = braid_spin_check(&spins, p->abort_flag);
        if ((spins & 255) == 0 && braid_prims_vote(p, simt_tid() == 0 ? st : 0)) return p->status;
      }
    }
  }
  return 0;
}

/* The work item's operator, with a scalar that lives in device memory read now (ncclScalarDevice:
 * NCCL dereferences it while the collective runs, so stream-ordered writes before the call count). */
HD void braid_work_redop(const struct braid_redop* in, struct braid_redop* out) {
  *out = *in;
  if (!in->scalar_dev) return;
  const unsigned char* s = (const unsigned char*)(uintptr_t)in->scalar;
  uint64_t v = 0;
  for (int i = 0; i < braid_dtype_size(in->dtype); i++) v |= (uint64_t)s[i] << (8 * i);
  out->scalar = v;
  out->scalar_dev = 0;
}

/* Run one work item on one channel. Returns 0 or a braid_exec_status, the same in every thread
 * of the block. Thread 0 sets the shared primitives up; the barrier after it keeps a slower
 * thread from rewriting them (its `status = 0` would erase thread 0's first failure). */
HD int braid_run_work(struct braid_prims* p, const struct braid_work* w, const struct braid_dev_channel* ch,
                      const volatile uint32_t* abort_flag) {
  if (simt_tid() == 0) {
    braid_work_redop(&w->redop, &p->op);
    p->proto = w->proto;
    p->esize = w->func == BRAID_FUNC_SendRecv ? 1 : braid_dtype_size(w->dtype);
    p->abort_flag = abort_flag;
    p->status = 0;
  }
  braid_prims_set_peers(p, ch->ring_send, ch->ring_recv);
  simt_bar_sync();
  if (p->esize <= 0 || p->proto < 0 || p->proto >= BRAID_NUM_PROTOS) return BRAID_EXEC_BAD_SCHEDULE;
  if (w->nranks == 1 && w->func != BRAID_FUNC_SendRecv) {
    size_t size = w->chan_count;
    const char* in = (const char*)w->sendbuff + w->chan_off * p->esize;
    char* out = (char*)w->recvbuff + w->chan_off * p->esize;
    return braid_prim_step(p, BRAID_PRIM_LOCAL_COPY, in, out, size, 1);
  }
  switch (w->func) {
    case BRAID_FUNC_AllReduce:
      if (w->algo == BRAID_ALGO_TREE) return braid_run_tree_allreduce(p, w, ch);
      if (w->algo == BRAID_ALGO_NVLS) /* multicast (multimem.h), or one-/two-shot over the peers (lsa.h) */
        return (w->lsa_mode & BRAID_LSA_MC) ? braid_run_mc_allreduce(p, w) : braid_run_lsa_allreduce(p, w);
      return w->exchange ? braid_run_pair_allreduce(p, w) : braid_run_ring_allreduce(p, w, ch);
    case BRAID_FUNC_AllGather:
      return braid_run_ring_gather_scatter(p, w, ch, 1);
    case BRAID_FUNC_ReduceScatter:
      return braid_run_ring_gather_scatter(p, w, ch, 0);
    case BRAID_FUNC_Broadcast:
      return braid_run_ring_chain(p, w, ch, 1);
    case BRAID_FUNC_Reduce:
#if !BRAID_DEVICE_COMPILE /* direct connections are the host executor's (braid_direct_pair is 0 on the device) */
      if (w->split && braid_direct_pair(ch->ring_send, ch->ring_recv)) return braid_run_reduce_split(p, w, ch);
#endif
      return braid_run_ring_chain(p, w, ch, 0);
    case BRAID_FUNC_SendRecv:
      return braid_run_p2p(p, w, ch);
  }
  return BRAID_EXEC_BAD_SCHEDULE; /* a function the data path does not know */
}

#endif /* BRAID_COLL_H */
