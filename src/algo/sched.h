/*
 * sched.h - the vocabulary every schedule in src/algo speaks: what one step of a channel does
 * (a primitive, named after NCCL's) and on which chunk, plus the status codes the schedule
 * functions return. Schedules are pure HD functions (docs/CONVENTIONS.md 10): no globals, no I/O, no
 * allocation; the CUDA kernels, the host executor and the unit tests call the very same code.
 * Valid C and CUDA C; includes nothing host-only.
 *
 * A schedule never sees bytes. It says WHICH primitive runs on WHICH chunk at a step; the
 * executor maps the chunk index to byte offsets (each schedule documents its chunk layout) and
 * moves the data over the channel's connections.
 */
#ifndef BRAID_ALGO_SCHED_H
#define BRAID_ALGO_SCHED_H

#include <stdint.h>

#include "kernels/simt.h"

/* What one step does. "input" is the calling rank's send buffer chunk, "output" its receive
 * buffer chunk; "send"/"recv" go over the connection(s) the schedule names (ring: to next /
 * from prev; tree: see tree.h). Reductions use the collective's operator; the pre-op (e.g. the
 * PreMulSum scalar) is applied where an input enters the data path, the post-op (e.g. the
 * division of integer Avg) where a fully reduced value is written to an output. */
enum braid_prim {
  BRAID_PRIM_NONE = 0,
  BRAID_PRIM_SEND,                   /* send my input chunk (pre-op applied) */
  BRAID_PRIM_RECV,                   /* receive into my output chunk */
  BRAID_PRIM_COPY_SEND,              /* copy my input chunk to my output chunk and send it;
                                        in place (input already at its output spot) the
                                        executor may run it as SEND */
  BRAID_PRIM_RECV_SEND,              /* receive and forward without keeping (no schedule here
                                        emits it yet; for chains whose middle has no output) */
  BRAID_PRIM_RECV_COPY_SEND,         /* receive into my output chunk and forward it */
  BRAID_PRIM_RECV_REDUCE_SEND,       /* receive, reduce with my input chunk, forward */
  BRAID_PRIM_RECV_REDUCE_COPY,       /* receive, reduce with my input chunk, write output
                                        (post-op applied: the value is final) */
  BRAID_PRIM_RECV_REDUCE_COPY_SEND,  /* the same, and forward the final value */
  BRAID_PRIM_LOCAL_COPY,             /* input chunk -> output chunk, no communication (1 rank);
                                        for reductions the one-rank op applies (pre/post-op) */
  BRAID_PRIM_RECV_REDUCE_FINAL_SEND, /* receive, reduce with my input chunk, send the value as
                                        final (post-op applied) without keeping it: a rank
                                        that reduces a share of what another rank outputs
                                        (ring.h's split Reduce; my output is not touched) */
  BRAID_NUM_PRIMS
};

/* One step of a ring/chain schedule (ring.h). */
struct braid_step {
  uint8_t prim; /* enum braid_prim */
  int chunk;    /* index of the chunk this step touches, in the collective's layout */
};

/* What schedule functions return. Errors name the argument that was out of range so that
 * a host caller can WARN with it (braid_sched_errarg) and return ncclInvalidArgument; output
 * arguments are written only on BRAID_SCHED_OK. */
enum braid_sched_status {
  BRAID_SCHED_OK = 0,
  BRAID_SCHED_EBADN = -1,    /* nranks (or node count) < 1, or too large */
  BRAID_SCHED_EBADPOS = -2,  /* position / rank not in [0, nranks) */
  BRAID_SCHED_EBADSTEP = -3, /* step / round not in [0, nsteps) */
  BRAID_SCHED_EBADROOT = -4, /* root not in [0, nranks) */
  BRAID_SCHED_EBADARG = -5   /* another argument (tree id, children count, chunk count,
                                depth, collective id, phase) */
};

/* Largest rank count any schedule accepts: keeps (x*x+x)/2 and 2*n in range. */
#define BRAID_SCHED_MAX_RANKS (1 << 24)

/* The argument an error status blames, for the caller's WARN ("ok" for BRAID_SCHED_OK). */
HD const char* braid_sched_errarg(int status) {
  switch (status) {
    case BRAID_SCHED_OK:
      return "ok";
    case BRAID_SCHED_EBADN:
      return "nranks";
    case BRAID_SCHED_EBADPOS:
      return "rank position";
    case BRAID_SCHED_EBADSTEP:
      return "step";
    case BRAID_SCHED_EBADROOT:
      return "root";
    default:
      return "argument";
  }
}

/* a mod n in [0, n) for any a and n >= 1. */
HD int braid_sched_mod(int a, int n) {
  int m = a % n;
  return m < 0 ? m + n : m;
}

/* RECV_REDUCE_FINAL_SEND runs only on host executors: its one user, the split Reduce, needs
 * direct connections (kernels/direct.h braid_direct_pair, 0 on the device). Device code is
 * compiled without it, so the kernels' predicates (and their register budget: the ring kernels
 * sit at 128 registers) are exactly what they were before it existed. */
#if BRAID_DEVICE_COMPILE
#define BRAID_PRIM_IS_FINAL_SEND(prim) 0
#else
#define BRAID_PRIM_IS_FINAL_SEND(prim) ((prim) == BRAID_PRIM_RECV_REDUCE_FINAL_SEND)
#endif

/* Properties of a primitive, for executors (which connections to touch) and tests. */
HD int braid_prim_recvs(int prim) {
  return prim == BRAID_PRIM_RECV || prim == BRAID_PRIM_RECV_SEND || prim == BRAID_PRIM_RECV_COPY_SEND ||
         prim == BRAID_PRIM_RECV_REDUCE_SEND || prim == BRAID_PRIM_RECV_REDUCE_COPY ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND || BRAID_PRIM_IS_FINAL_SEND(prim);
}
HD int braid_prim_sends(int prim) {
  return prim == BRAID_PRIM_SEND || prim == BRAID_PRIM_COPY_SEND || prim == BRAID_PRIM_RECV_SEND ||
         prim == BRAID_PRIM_RECV_COPY_SEND || prim == BRAID_PRIM_RECV_REDUCE_SEND ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND || BRAID_PRIM_IS_FINAL_SEND(prim);
}
/* Reads my input chunk (SEND, COPY_SEND, LOCAL_COPY and every RECV_REDUCE_*). */
HD int braid_prim_reads_input(int prim) {
  return prim == BRAID_PRIM_SEND || prim == BRAID_PRIM_COPY_SEND || prim == BRAID_PRIM_LOCAL_COPY ||
         prim == BRAID_PRIM_RECV_REDUCE_SEND || prim == BRAID_PRIM_RECV_REDUCE_COPY ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND || BRAID_PRIM_IS_FINAL_SEND(prim);
}
HD int braid_prim_writes_output(int prim) {
  return prim == BRAID_PRIM_RECV || prim == BRAID_PRIM_COPY_SEND || prim == BRAID_PRIM_RECV_COPY_SEND ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY || prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND ||
         prim == BRAID_PRIM_LOCAL_COPY;
}
/* Combines received data with my input through the reduction operator. */
HD int braid_prim_reduces(int prim) {
  return prim == BRAID_PRIM_RECV_REDUCE_SEND || prim == BRAID_PRIM_RECV_REDUCE_COPY ||
         prim == BRAID_PRIM_RECV_REDUCE_COPY_SEND || BRAID_PRIM_IS_FINAL_SEND(prim);
}
/* The value becomes final at this step, so the post-op applies here: a step that reads my
 * input and writes my output, or one that sends the final value on (FINAL_SEND). A partial
 * sum on its way (SEND, RECV_REDUCE_SEND) must not get it, and a value merely relayed is final
 * already. */
HD int braid_prim_finalizes(int prim) {
  return (braid_prim_reads_input(prim) && braid_prim_writes_output(prim)) || BRAID_PRIM_IS_FINAL_SEND(prim);
}

#endif /* BRAID_ALGO_SCHED_H */
