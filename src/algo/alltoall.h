/*
 * alltoall.h - the point-to-point round schedule (NCCL's p2p schedule) and the expansion of
 * AlltoAll, Gather and Scatter into rounds of sends and receives. Pure HD functions
 * (sched.h); valid C and CUDA C.
 *
 * n ranks run n rounds. In round k rank i sends to i+delta(k) and receives from i-delta(k)
 * (mod n), so in every round each rank has exactly one send peer and one receive peer and the
 * pairs of a round form a permutation: nobody waits behind a peer that serves someone else
 * (no head-of-line blocking). delta(k) enumerates the triangular numbers (x*x+x)/2 modulo P,
 * the next power of two >= n, for x = 0, 1, ..., P-1 (a permutation of 0..P-1), skipping the
 * values >= n: every delta in 0..n-1 appears exactly once, delta(0) = 0 (self). Over the
 * rounds every ordered pair (i, j) is a send exactly once.
 * (NCCL groups the rounds by node when multi-node; that variant is not here yet.)
 */
#ifndef BRAID_ALGO_ALLTOALL_H
#define BRAID_ALGO_ALLTOALL_H

#include "algo/sched.h"

/* Rounds for n ranks: n; 0 on bad n. */
HD int braid_p2p_nrounds(int n) {
  return (n < 1 || n > BRAID_SCHED_MAX_RANKS) ? 0 : n;
}

/* The next power of two >= n (n >= 1). */
HD int braid_p2p_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/*
 * Iterator over the deltas in round order: start with *x_p = 0 and call n times; each call
 * returns the next delta and advances *x_p (the triangular-number index). O(1) amortised.
 * Returns -1 (and leaves *x_p) when n is bad or the sequence is exhausted.
 */
HD int braid_p2p_delta_next(int n, int* x_p) {
  int p, x;
  uint64_t tri;
  if (n < 1 || n > BRAID_SCHED_MAX_RANKS) return -1;
  p = braid_p2p_pow2(n);
  for (x = *x_p; x >= 0 && x < p; x++) {
    tri = ((uint64_t)x * (uint64_t)(x + 1) / 2) & (uint64_t)(p - 1);
    if (tri < (uint64_t)n) {
      *x_p = x + 1;
      return (int)tri;
    }
  }
  return -1;
}

/* delta of round `round` (0..n-1); -1 on bad input. O(P): use braid_p2p_delta_next to walk
 * all rounds. */
HD int braid_p2p_delta(int n, int round) {
  int x = 0, k, d = -1;
  if (n < 1 || n > BRAID_SCHED_MAX_RANKS || round < 0 || round >= n) return -1;
  for (k = 0; k <= round; k++) {
    d = braid_p2p_delta_next(n, &x);
    if (d < 0) return -1;
  }
  return d;
}

/* The peers of `rank` in round `round`: send to rank+delta(round), receive from
 * rank-delta(round) (mod n); -1 on bad input. Each call costs braid_p2p_delta's O(P). */
HD int braid_p2p_send_peer(int n, int rank, int round) {
  int d = braid_p2p_delta(n, round);
  if (d < 0 || rank < 0 || rank >= n) return -1;
  return (rank + d) % n;
}
HD int braid_p2p_recv_peer(int n, int rank, int round) {
  int d = braid_p2p_delta(n, round);
  if (d < 0 || rank < 0 || rank >= n) return -1;
  return (rank - d + n) % n;
}

/*
 * Rounds a rank progresses together. Rounds exist so that a rank waits on one send peer and
 * one receive peer at a time (a GPU block polls few connections); on host threads that share
 * cores, though, a round ends only when both of its peers have run, so a rank whose peer is
 * descheduled idles (it yields the core) although the peers of later rounds are ready. Taking
 * g consecutive rounds together lets it serve whichever of them is ready, as a rank that posts
 * every send and receive at once does (Open MPI's linear all-to-all). Any grouping is safe,
 * even one that differs between ranks: both ends of a message are in the same round (its
 * delta's), and the lowest round with an unfinished message is in every rank's current group,
 * so its two ends are polled together and it moves. Ops to one peer in one direction keep
 * their order inside a group (coll.h: braid_p2p_blocked), which makes a pass over a group's
 * ops quadratic in their number: a group taken by default holds at most
 * BRAID_P2P_GROUP_AUTO_MAX rounds.
 * param: BRAID_P2P_ROUND_GROUP (0: decide; g > 0: g). cores_per_rank: the host executor's
 * cores per rank on the busiest machine (0: ranks outnumber cores), -1 on a GPU. By default
 * rounds are grouped only where ranks outnumber cores; elsewhere a rank waiting on a peer
 * does not take the core that peer needs, and NCCL's schedule stays. Returns >= 1.
 */
#define BRAID_P2P_GROUP_AUTO_MAX 16
HD int braid_p2p_round_group(int n, int param, int cores_per_rank) {
  if (param > 0) return param;
  if (cores_per_rank != 0 || n <= 1) return 1;
  return n < BRAID_P2P_GROUP_AUTO_MAX ? n : BRAID_P2P_GROUP_AUTO_MAX;
}

/*
 * What `rank` does in the round whose delta is given (braid_p2p_delta or the iterator), for
 * a collective expanded into p2p.
 * A block is `count` elements; send_block indexes the send buffer, recv_block the receive
 * buffer. -1 peers mean nothing that side this round. A round whose send and receive peer
 * are the rank itself (delta 0) is a local copy; NCCL pairs a self-send with a self-receive.
 */
struct braid_p2p_round {
  int send_peer;  /* rank to send to, or -1 */
  int send_block; /* block of my send buffer to send */
  int recv_peer;  /* rank to receive from, or -1 */
  int recv_block; /* block of my receive buffer to receive into */
};

/* Common argument check of the expansions below. */
HD int braid_p2p_check(int n, int rank, int delta) {
  if (n < 1 || n > BRAID_SCHED_MAX_RANKS) return BRAID_SCHED_EBADN;
  if (rank < 0 || rank >= n) return BRAID_SCHED_EBADPOS;
  if (delta < 0 || delta >= n) return BRAID_SCHED_EBADSTEP;
  return BRAID_SCHED_OK;
}

/* AlltoAll: send block j of mine to rank j, receive rank j's block (mine) into my block j. */
HD int braid_p2p_alltoall_round(int n, int rank, int delta, struct braid_p2p_round* out) {
  int err = braid_p2p_check(n, rank, delta);
  if (err != BRAID_SCHED_OK) return err;
  out->send_peer = (rank + delta) % n;
  out->send_block = out->send_peer;
  out->recv_peer = (rank - delta + n) % n;
  out->recv_block = out->recv_peer;
  return BRAID_SCHED_OK;
}

/* Gather to root: every rank sends its one block (block 0) to the root in the round where
 * rank+delta = root; the root receives rank j's block into its block j, one per round. */
HD int braid_p2p_gather_round(int n, int rank, int root, int delta, struct braid_p2p_round* out) {
  int err = braid_p2p_check(n, rank, delta);
  if (err != BRAID_SCHED_OK) return err;
  if (root < 0 || root >= n) return BRAID_SCHED_EBADROOT;
  out->send_peer = (rank + delta) % n == root ? root : -1;
  out->send_block = 0;
  out->recv_peer = rank == root ? (rank - delta + n) % n : -1;
  out->recv_block = out->recv_peer < 0 ? 0 : out->recv_peer;
  return BRAID_SCHED_OK;
}

/* Scatter from root: the root sends its block j to rank j, one per round; every rank
 * receives its block into its block 0 in the round where rank-delta = root. */
HD int braid_p2p_scatter_round(int n, int rank, int root, int delta, struct braid_p2p_round* out) {
  int err = braid_p2p_check(n, rank, delta);
  if (err != BRAID_SCHED_OK) return err;
  if (root < 0 || root >= n) return BRAID_SCHED_EBADROOT;
  out->send_peer = rank == root ? (rank + delta) % n : -1;
  out->send_block = out->send_peer < 0 ? 0 : out->send_peer;
  out->recv_peer = (rank - delta + n) % n == root ? root : -1;
  out->recv_block = 0;
  return BRAID_SCHED_OK;
}

#endif /* BRAID_ALGO_ALLTOALL_H */
