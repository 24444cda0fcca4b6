/*
 * prof_op.h - one task's share of a proxied connection, for the profiler plugin's ProxyOp /
 * ProxyStep events (core/profile_proxy.c fills it, the transport's prof_push / prof_drain
 * slots move it; transport/net/net_prof.c). The core counts, per work item and connection,
 * the steps the schedule moves (the same count on both ends: the counters advance in
 * lock-step), so the proxy knows which of its steps belong to which task before they move.
 * Device mode: queued at each launch, `first` from what earlier launches counted
 * (braid_connector.prof_next); the batch waiting for the kernels owns it (profile_done.c).
 */
#ifndef BRAID_TRANSPORT_PROF_OP_H
#define BRAID_TRANSPORT_PROF_OP_H

#include <stddef.h>
#include <stdint.h>

struct braid_prof;

struct braid_prof_op {
  struct braid_prof_op* next; /* the connection's queue (its proxy's, under its lock) */
  struct braid_prof* prof;    /* the communicator's plugin context */
  void* parent;               /* the task's Coll / P2p event */
  int mask;                   /* the event mask when the group started */
  int rank, channel, peer, is_send;
  uint64_t first, nsteps; /* the connection's steps [first, first + nsteps) */
  size_t chunk;           /* bytes per step (one FIFO slot at most) */
  void* handle;           /* the ProxyOp event (NULL: not started, or not asked for) */
  int started;            /* the proxy took it (ProxyOp started) */
  uint64_t nstopped;      /* its steps done */
  size_t bytes;           /* bytes its steps moved */
  int finished;           /* (atomic) every step done, ProxyOp stopped, out of the queue */
};

#endif /* BRAID_TRANSPORT_PROF_OP_H */
