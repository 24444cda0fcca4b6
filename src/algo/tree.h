/*
 * tree.h - NCCL's double binary tree and the tree AllReduce schedule. Pure HD functions
 * (sched.h); valid C and CUDA C.
 *
 * braid_btree builds a binary tree over n indices (NCCL: the tree is over nodes; graph.c
 * hangs a chain of the node's GPUs under each node, so a rank has up to 3 children).
 * braid_dbtree builds the pair: tree 0 is braid_btree, tree 1 its shift (n odd) or mirror
 * (n even), so that most indices that are inner nodes of one tree are leaves of the other:
 * for n even every index is a leaf in exactly one tree; for n odd (>= 3) every index except
 * 0 is, and 0 is an inner node of both (NCCL's construction; tests check exactly this).
 *
 * Tree AllReduce per chunk: reduce up (leaf SEND to its parent, inner RECV_REDUCE_SEND from
 * all its children to its parent), the root RECV_REDUCE_COPY_SEND (final value, post-op,
 * output, and down to its children in the same step), then broadcast down (inner
 * RECV_COPY_SEND from the parent to all children, leaf RECV).
 */
#ifndef BRAID_ALGO_TREE_H
#define BRAID_ALGO_TREE_H

#include "algo/sched.h"

/* Children a rank may have: two tree children and the next GPU of its node's chain. */
#define BRAID_TREE_MAX_DOWN 3

/*
 * Tree 0 over n indices, for index r. Root 0 has a single child, the largest power of two
 * below n. For r > 0 with lowest set bit b: parent (r^b)|(b<<1), or r^b when that is >= n;
 * children r-b/2 and r+b/2 (the latter halved, b/4, b/8, ..., until it is < n); odd r are
 * leaves. Absent links are -1; the root has up = -1, down0 = -1. Outputs written on success.
 */
HD int braid_btree(int n, int r, int* up, int* down0, int* down1) {
  int bit, u, d0, d1, low;
  if (n < 1 || n > BRAID_SCHED_MAX_RANKS) return BRAID_SCHED_EBADN;
  if (r < 0 || r >= n) return BRAID_SCHED_EBADPOS;
  if (r == 0) {
    bit = 1; /* the smallest power of two >= n: its half is the largest one below n */
    while (bit < n) bit <<= 1;
    *up = -1;
    *down0 = -1;
    *down1 = n > 1 ? bit >> 1 : -1;
    return BRAID_SCHED_OK;
  }
  bit = r & -r;
  u = (r ^ bit) | (bit << 1);
  if (u >= n) u = r ^ bit;
  low = bit >> 1;
  d0 = low ? r - low : -1;
  d1 = -1;
  for (; low; low >>= 1) {
    if (r + low < n) {
      d1 = r + low;
      break;
    }
  }
  *up = u;
  *down0 = d0;
  *down1 = d1;
  return BRAID_SCHED_OK;
}

/* Tree `tree` (0 or 1) of the pair. Tree 1: n odd -> shift: btree of (r-1) mod n with every
 * result +1 mod n (root 1); n even -> mirror: btree of n-1-r with every result x -> n-1-x
 * (root n-1). */
HD int braid_dbtree(int n, int r, int tree, int* up, int* down0, int* down1) {
  int u, d0, d1, err;
  if (n < 1 || n > BRAID_SCHED_MAX_RANKS) return BRAID_SCHED_EBADN;
  if (r < 0 || r >= n) return BRAID_SCHED_EBADPOS;
  if (tree != 0 && tree != 1) return BRAID_SCHED_EBADARG;
  if (tree == 0) return braid_btree(n, r, up, down0, down1);
  if (n % 2 == 1) {
    err = braid_btree(n, (r - 1 + n) % n, &u, &d0, &d1);
    if (err != BRAID_SCHED_OK) return err;
    *up = u < 0 ? -1 : (u + 1) % n;
    *down0 = d0 < 0 ? -1 : (d0 + 1) % n;
    *down1 = d1 < 0 ? -1 : (d1 + 1) % n;
  } else {
    err = braid_btree(n, n - 1 - r, &u, &d0, &d1);
    if (err != BRAID_SCHED_OK) return err;
    *up = u < 0 ? -1 : n - 1 - u;
    *down0 = d0 < 0 ? -1 : n - 1 - d0;
    *down1 = d1 < 0 ? -1 : n - 1 - d1;
  }
  return BRAID_SCHED_OK;
}

/* The root index of tree `tree` over n (0; tree 1: 1 for odd n >= 3, n-1 for even n);
 * -1 on bad input. */
HD int braid_dbtree_root(int n, int tree) {
  if (n < 1 || n > BRAID_SCHED_MAX_RANKS || (tree != 0 && tree != 1)) return -1;
  if (tree == 0 || n == 1) return 0;
  return n % 2 == 1 ? 1 : n - 1;
}

/* Which connections a tree step uses. */
enum braid_tree_dir {
  BRAID_TREE_NONE = 0, /* no connection on this side */
  BRAID_TREE_UP = 1,   /* the parent */
  BRAID_TREE_DOWN = 2  /* every child (fan-in: reduce them all; fan-out: send to each) */
};
/* Which half of the AllReduce a step belongs to; an executor that runs the halves
 * concurrently (GPU: split thread groups) gives each group one phase. */
enum braid_tree_phase {
  BRAID_TREE_PHASE_REDUCE = 1, /* data flows up */
  BRAID_TREE_PHASE_BCAST = 2,  /* data flows down */
  BRAID_TREE_PHASE_BOTH = 3    /* the root's fused step, and a lone node's LOCAL_COPY */
};

/* One step of a tree schedule. */
struct braid_tree_step {
  uint8_t prim;  /* enum braid_prim */
  uint8_t recv;  /* enum braid_tree_dir: receive from the parent, from all children, or not */
  uint8_t send;  /* enum braid_tree_dir: send to the parent, to all children, or not */
  uint8_t phase; /* enum braid_tree_phase */
  int chunk;     /* chunk of the channel's data, 0..nchunks-1, in order of the data */
};

/* Argument check shared by the tree schedule functions. */
HD int braid_tree_check(int has_up, int ndown) {
  if (has_up != 0 && has_up != 1) return BRAID_SCHED_EBADARG;
  if (ndown < 0 || ndown > BRAID_TREE_MAX_DOWN) return BRAID_SCHED_EBADARG;
  return BRAID_SCHED_OK;
}

/*
 * The step of one phase for one chunk, for a node with a parent or not (has_up) and ndown
 * children:
 *              REDUCE                                       BCAST
 *   lone       LOCAL_COPY (phase BOTH)                      -
 *   root       RECV_REDUCE_COPY_SEND down->down (BOTH)      -
 *   inner      RECV_REDUCE_SEND down->up                    RECV_COPY_SEND up->down
 *   leaf       SEND ->up                                    RECV up->
 * "-": the phase has no step there (BRAID_PRIM_NONE, phase = the one asked). chunk is copied.
 */
HD int braid_tree_allreduce_chunk_step(int has_up, int ndown, int phase, int chunk, struct braid_tree_step* out) {
  int err = braid_tree_check(has_up, ndown);
  struct braid_tree_step s;
  if (err != BRAID_SCHED_OK) return err;
  if (phase != BRAID_TREE_PHASE_REDUCE && phase != BRAID_TREE_PHASE_BCAST) return BRAID_SCHED_EBADARG;
  if (chunk < 0) return BRAID_SCHED_EBADSTEP;
  s.prim = BRAID_PRIM_NONE;
  s.recv = BRAID_TREE_NONE;
  s.send = BRAID_TREE_NONE;
  s.phase = (uint8_t)phase;
  s.chunk = chunk;
  if (!has_up) {
    if (phase == BRAID_TREE_PHASE_REDUCE) {
      s.phase = BRAID_TREE_PHASE_BOTH;
      if (ndown == 0) {
        s.prim = BRAID_PRIM_LOCAL_COPY;
      } else {
        s.prim = BRAID_PRIM_RECV_REDUCE_COPY_SEND;
        s.recv = BRAID_TREE_DOWN;
        s.send = BRAID_TREE_DOWN;
      }
    }
  } else if (phase == BRAID_TREE_PHASE_REDUCE) {
    s.prim = ndown ? BRAID_PRIM_RECV_REDUCE_SEND : BRAID_PRIM_SEND;
    s.recv = ndown ? BRAID_TREE_DOWN : BRAID_TREE_NONE;
    s.send = BRAID_TREE_UP;
  } else {
    s.prim = ndown ? BRAID_PRIM_RECV_COPY_SEND : BRAID_PRIM_RECV;
    s.recv = BRAID_TREE_UP;
    s.send = ndown ? BRAID_TREE_DOWN : BRAID_TREE_NONE;
  }
  *out = s;
  return BRAID_SCHED_OK;
}

/* Steps of the whole AllReduce over nchunks chunks for one executor thread: nchunks at the
 * root or a lone node, 2*nchunks elsewhere; 0 on bad input. */
HD int braid_tree_allreduce_nsteps(int has_up, int ndown, int nchunks) {
  if (braid_tree_check(has_up, ndown) != BRAID_SCHED_OK) return 0;
  if (nchunks < 0 || nchunks > BRAID_SCHED_MAX_RANKS) return 0;
  return has_up ? 2 * nchunks : nchunks;
}

/*
 * The same as one sequential program, software-pipelined `depth` chunks deep: a non-root
 * node runs UP(0..D-1), then DOWN(i), UP(i+D) for each i, then the last D DOWNs, where
 * D = min(depth, nchunks) and UP/DOWN are the REDUCE/BCAST steps of a chunk. depth 1 is
 * strictly sequential (each chunk's round trip to the root before the next chunk starts);
 * deeper keeps the tree busy. The root and a lone node run their one step per chunk in
 * order. Deadlock-free when every connection holds at least D chunks (the root may run D
 * chunks ahead of a child); tests/unit/test_schedule.c checks this by simulation.
 */
HD int braid_tree_allreduce_step(int has_up, int ndown, int nchunks, int depth, int step, struct braid_tree_step* out) {
  int nsteps = braid_tree_allreduce_nsteps(has_up, ndown, nchunks);
  int d, t, chunk, phase;
  if (braid_tree_check(has_up, ndown) != BRAID_SCHED_OK || nchunks < 0 || depth < 1) return BRAID_SCHED_EBADARG;
  if (step < 0 || step >= nsteps) return BRAID_SCHED_EBADSTEP;
  if (!has_up) return braid_tree_allreduce_chunk_step(has_up, ndown, BRAID_TREE_PHASE_REDUCE, step, out);
  d = depth < nchunks ? depth : nchunks;
  if (step < d) {
    chunk = step;
    phase = BRAID_TREE_PHASE_REDUCE;
  } else {
    t = step - d;
    if (t < 2 * (nchunks - d)) {
      chunk = (t % 2 == 0) ? t / 2 : t / 2 + d;
      phase = (t % 2 == 0) ? BRAID_TREE_PHASE_BCAST : BRAID_TREE_PHASE_REDUCE;
    } else {
      chunk = (nchunks - d) + (t - 2 * (nchunks - d));
      phase = BRAID_TREE_PHASE_BCAST;
    }
  }
  return braid_tree_allreduce_chunk_step(has_up, ndown, phase, chunk, out);
}

#endif /* BRAID_ALGO_TREE_H */
