/*
 * ring.h - ring and chain schedules for one "loop" of a channel: AllReduce, AllGather,
 * ReduceScatter over a ring of nranks positions, Broadcast and Reduce as pipelined chains
 * along the ring. Pure HD functions (sched.h); valid C and CUDA C.
 *
 * Every rank sends only to ring.next and receives only from ring.prev. `pos` is the rank's
 * index in the channel's ring order (braid_dev_ring.index), except for Broadcast and Reduce,
 * which take the position relative to the root (braid_ring_bcast_pos, braid_ring_reduce_pos).
 *
 * Chunk layout of one loop (the executor maps chunk -> bytes):
 * - AllReduce: the loop's data is cut into nranks chunks; chunk c is the c-th of them. Chunk
 *   c is fully reduced at ring position c.
 * - AllGather, ReduceScatter: chunk c is the data OF the rank at ring position c (its user
 *   rank is ring.ranks[c]; NCCL's output layout is by user rank).
 * - Broadcast, Reduce, one rank: chunk 0 (the loop's whole piece).
 *
 * All ranks run the same number of steps per loop (the *_nsteps functions), so loops
 * concatenate: the executor runs loop 0's steps, then loop 1's, over the same connections.
 * FIFO discipline (checked by tests/unit/test_schedule.c): every send is received, in order,
 * by the next position, with the same chunk index. Ring schedules are lock-step safe: a
 * receive at step s consumes a send of step s-1. A ring step receives and sends at once, so
 * every FIFO of the ring can be full with every rank waiting for room: connections must hold
 * at least TWO chunks (NCCL's chunk is half its 8 slots for this reason). Chains need one.
 */
#ifndef BRAID_ALGO_RING_H
#define BRAID_ALGO_RING_H

#include "algo/sched.h"
#include "kernels/axes.h"

/* Steps per loop: 2n-1 for AllReduce (2(n-1) transfers), n for AllGather/ReduceScatter,
 * 1 for Broadcast/Reduce (one step per loop-chunk; the chain pipelines across loops);
 * 1 for every collective on one rank. 0 when nranks is out of range. */
HD int braid_ring_allreduce_nsteps(int nranks) {
  if (nranks < 1 || nranks > BRAID_SCHED_MAX_RANKS) return 0;
  return nranks == 1 ? 1 : 2 * nranks - 1;
}
HD int braid_ring_allgather_nsteps(int nranks) {
  if (nranks < 1 || nranks > BRAID_SCHED_MAX_RANKS) return 0;
  return nranks;
}
HD int braid_ring_reducescatter_nsteps(int nranks) {
  return braid_ring_allgather_nsteps(nranks);
}
HD int braid_ring_broadcast_nsteps(int nranks) {
  return (nranks < 1 || nranks > BRAID_SCHED_MAX_RANKS) ? 0 : 1;
}
HD int braid_ring_reduce_nsteps(int nranks) {
  return braid_ring_broadcast_nsteps(nranks);
}

/* Common argument check of the step functions. */
HD int braid_ring_check(int nranks, int pos, int step, int nsteps) {
  if (nranks < 1 || nranks > BRAID_SCHED_MAX_RANKS) return BRAID_SCHED_EBADN;
  if (pos < 0 || pos >= nranks) return BRAID_SCHED_EBADPOS;
  if (step < 0 || step >= nsteps) return BRAID_SCHED_EBADSTEP;
  return BRAID_SCHED_OK;
}

/*
 * AllReduce = reduce-scatter then all-gather. At step s position r works on chunk r-s-1
 * (mod n):
 *   s = 0          SEND                    chunk r-1 (my contribution starts its trip)
 *   s = 1..n-2     RECV_REDUCE_SEND        add mine, pass on
 *   s = n-1        RECV_REDUCE_COPY_SEND   chunk r: last contribution, final; keep and pass
 *   s = n..2n-3    RECV_COPY_SEND          final chunks travel round: keep and pass
 *   s = 2n-2       RECV                    chunk r+1: its owner's successor does not forward
 */
HD int braid_ring_allreduce_step(int nranks, int pos, int step, struct braid_step* out) {
  int err = braid_ring_check(nranks, pos, step, braid_ring_allreduce_nsteps(nranks));
  if (err != BRAID_SCHED_OK) return err;
  if (nranks == 1) {
    out->prim = BRAID_PRIM_LOCAL_COPY;
    out->chunk = 0;
    return BRAID_SCHED_OK;
  }
  if (step == 0)
    out->prim = BRAID_PRIM_SEND;
  else if (step < nranks - 1)
    out->prim = BRAID_PRIM_RECV_REDUCE_SEND;
  else if (step == nranks - 1)
    out->prim = BRAID_PRIM_RECV_REDUCE_COPY_SEND;
  else if (step < 2 * nranks - 2)
    out->prim = BRAID_PRIM_RECV_COPY_SEND;
  else
    out->prim = BRAID_PRIM_RECV;
  out->chunk = braid_sched_mod(pos - step - 1, nranks);
  return BRAID_SCHED_OK;
}

/*
 * AllGather: at step s position r handles the data of position r-s (mod n):
 *   s = 0          COPY_SEND       my own chunk r: to my output and on its way
 *   s = 1..n-2     RECV_COPY_SEND  keep and pass
 *   s = n-1        RECV            chunk r+1: its owner's predecessor does not forward
 */
HD int braid_ring_allgather_step(int nranks, int pos, int step, struct braid_step* out) {
  int err = braid_ring_check(nranks, pos, step, braid_ring_allgather_nsteps(nranks));
  if (err != BRAID_SCHED_OK) return err;
  if (nranks == 1)
    out->prim = BRAID_PRIM_LOCAL_COPY;
  else if (step == 0)
    out->prim = BRAID_PRIM_COPY_SEND;
  else if (step < nranks - 1)
    out->prim = BRAID_PRIM_RECV_COPY_SEND;
  else
    out->prim = BRAID_PRIM_RECV;
  out->chunk = braid_sched_mod(pos - step, nranks);
  return BRAID_SCHED_OK;
}

/*
 * ReduceScatter: at step s position r works on the chunk destined to position r-s-1 (mod n):
 *   s = 0          SEND                 chunk r-1
 *   s = 1..n-2     RECV_REDUCE_SEND     add mine, pass on
 *   s = n-1        RECV_REDUCE_COPY     chunk r, mine: final, written to my output
 */
HD int braid_ring_reducescatter_step(int nranks, int pos, int step, struct braid_step* out) {
  int err = braid_ring_check(nranks, pos, step, braid_ring_reducescatter_nsteps(nranks));
  if (err != BRAID_SCHED_OK) return err;
  if (nranks == 1)
    out->prim = BRAID_PRIM_LOCAL_COPY;
  else if (step == 0)
    out->prim = BRAID_PRIM_SEND;
  else if (step < nranks - 1)
    out->prim = BRAID_PRIM_RECV_REDUCE_SEND;
  else
    out->prim = BRAID_PRIM_RECV_REDUCE_COPY;
  out->chunk = braid_sched_mod(pos - step - 1, nranks);
  return BRAID_SCHED_OK;
}

/* Chain positions along the ring. Broadcast: the root is chain position 0 and data flows
 * down the ring, so chain position = ring position - root's ring position (mod n); the last
 * (position n-1) is the root's ring predecessor and does not forward. Reduce: the root is
 * chain position n-1, the chain starts at the root's ring successor: chain position =
 * ring position - root's ring position - 1 (mod n). Both take and return positions in
 * [0, n); -1 on bad input. */
HD int braid_ring_bcast_pos(int nranks, int ring_pos, int root_ring_pos) {
  if (nranks < 1 || ring_pos < 0 || ring_pos >= nranks || root_ring_pos < 0 || root_ring_pos >= nranks) return -1;
  return braid_sched_mod(ring_pos - root_ring_pos, nranks);
}
HD int braid_ring_reduce_pos(int nranks, int ring_pos, int root_ring_pos) {
  if (nranks < 1 || ring_pos < 0 || ring_pos >= nranks || root_ring_pos < 0 || root_ring_pos >= nranks) return -1;
  return braid_sched_mod(ring_pos - root_ring_pos - 1, nranks);
}

/* Broadcast chain, pos = braid_ring_bcast_pos(): root (0) COPY_SEND (SEND in place), middle
 * RECV_COPY_SEND, last (n-1) RECV; one rank LOCAL_COPY. Chunk 0. */
HD int braid_ring_broadcast_step(int nranks, int pos, int step, struct braid_step* out) {
  int err = braid_ring_check(nranks, pos, step, braid_ring_broadcast_nsteps(nranks));
  if (err != BRAID_SCHED_OK) return err;
  if (nranks == 1)
    out->prim = BRAID_PRIM_LOCAL_COPY;
  else if (pos == 0)
    out->prim = BRAID_PRIM_COPY_SEND;
  else if (pos < nranks - 1)
    out->prim = BRAID_PRIM_RECV_COPY_SEND;
  else
    out->prim = BRAID_PRIM_RECV;
  out->chunk = 0;
  return BRAID_SCHED_OK;
}

/* Reduce chain, pos = braid_ring_reduce_pos(): first (0) SEND, middle RECV_REDUCE_SEND,
 * root (n-1) RECV_REDUCE_COPY; one rank LOCAL_COPY. Chunk 0. Only the root writes output. */
HD int braid_ring_reduce_step(int nranks, int pos, int step, struct braid_step* out) {
  int err = braid_ring_check(nranks, pos, step, braid_ring_reduce_nsteps(nranks));
  if (err != BRAID_SCHED_OK) return err;
  if (nranks == 1)
    out->prim = BRAID_PRIM_LOCAL_COPY;
  else if (pos == 0)
    out->prim = BRAID_PRIM_SEND;
  else if (pos < nranks - 1)
    out->prim = BRAID_PRIM_RECV_REDUCE_SEND;
  else
    out->prim = BRAID_PRIM_RECV_REDUCE_COPY;
  out->chunk = 0;
  return BRAID_SCHED_OK;
}

/*
 * Split Reduce (two ranks): each rank reduces half of every loop and the non-root delivers
 * its half to the root, instead of the root reducing everything while the non-root only sends
 * (the chain above). A loop is cut into 2 chunks; chunk c is reduced at chain position c
 * (pos = braid_ring_reduce_pos(): the non-root is 0, the root 1):
 *   step   non-root (0)                         root (1)
 *   0      SEND chunk 1                         SEND chunk 0
 *   1      RECV_REDUCE_FINAL_SEND chunk 0       RECV_REDUCE_COPY chunk 1
 *   2      NONE                                 RECV chunk 0 (the non-root's final value)
 * So the root reduces one chunk and copies the other; the non-root's output is never
 * touched (NCCL's Reduce: it may not be valid memory). Each rank's reduction is
 * op(my input, the peer's), the operands the chain's root combines: with commutative
 * operators the two agree bit for bit. The same FIFO rules as the ring (a receive at step s
 * consumes a send of step s-1); lock-step safe with connections of one chunk. Two ranks
 * only, else EBADN: with more, a ring reduce-scatter would have to forward the others'
 * chunks to the root (the chain stays; one rank is the executors' LOCAL_COPY).
 */
#define BRAID_RING_REDUCE_SPLIT_CHUNKS 2
HD int braid_ring_reduce_split_nsteps(int nranks) {
  return nranks == 2 ? 3 : 0;
}
HD int braid_ring_reduce_split_step(int nranks, int pos, int step, struct braid_step* out) {
  if (braid_ring_reduce_split_nsteps(nranks) == 0) return BRAID_SCHED_EBADN;
  int err = braid_ring_check(nranks, pos, step, braid_ring_reduce_split_nsteps(nranks));
  if (err != BRAID_SCHED_OK) return err;
  if (step == 0) {
    out->prim = BRAID_PRIM_SEND;
    out->chunk = 1 - pos; /* the half the peer reduces */
  } else if (step == 1) {
    out->prim = pos == 0 ? BRAID_PRIM_RECV_REDUCE_FINAL_SEND : BRAID_PRIM_RECV_REDUCE_COPY;
    out->chunk = pos; /* my half */
  } else {
    out->prim = pos == 0 ? BRAID_PRIM_NONE : BRAID_PRIM_RECV;
    out->chunk = 0; /* the non-root's half, final */
  }
  return BRAID_SCHED_OK;
}

/* Dispatch by collective (enum braid_func): the step counts and steps above. SendRecv and
 * unknown ids: 0 steps / BRAID_SCHED_EBADARG. */
HD int braid_ring_nsteps(int func, int nranks) {
  switch (func) {
    case BRAID_FUNC_Broadcast:
      return braid_ring_broadcast_nsteps(nranks);
    case BRAID_FUNC_Reduce:
      return braid_ring_reduce_nsteps(nranks);
    case BRAID_FUNC_AllGather:
      return braid_ring_allgather_nsteps(nranks);
    case BRAID_FUNC_ReduceScatter:
      return braid_ring_reducescatter_nsteps(nranks);
    case BRAID_FUNC_AllReduce:
      return braid_ring_allreduce_nsteps(nranks);
    default:
      return 0;
  }
}
HD int braid_ring_step(int func, int nranks, int pos, int step, struct braid_step* out) {
  switch (func) {
    case BRAID_FUNC_Broadcast:
      return braid_ring_broadcast_step(nranks, pos, step, out);
    case BRAID_FUNC_Reduce:
      return braid_ring_reduce_step(nranks, pos, step, out);
    case BRAID_FUNC_AllGather:
      return braid_ring_allgather_step(nranks, pos, step, out);
    case BRAID_FUNC_ReduceScatter:
      return braid_ring_reducescatter_step(nranks, pos, step, out);
    case BRAID_FUNC_AllReduce:
      return braid_ring_allreduce_step(nranks, pos, step, out);
    default:
      return BRAID_SCHED_EBADARG;
  }
}

#endif /* BRAID_ALGO_RING_H */
