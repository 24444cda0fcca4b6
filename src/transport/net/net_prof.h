/*
 * net_prof.h - the profiler plugin's proxy events on network connections (net_prof.c):
 * ProxyOp per task and connection, ProxyStep per step, and the handle a v10+ NCCL net plugin
 * gets with each isend / irecv so that its own NetPlugin events nest under the step.
 */
#ifndef BRAID_NET_PROF_H
#define BRAID_NET_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct net_res;
struct braid_connector;
struct braid_prof_op;

/* What a v10+ plugin's pHandle points to: the step's event and its communicator. */
struct braid_net_prof_step {
  struct braid_prof* prof;
  void* step; /* the ProxyStep event */
  int mask, rank;
  int flushed; /* its RecvFlushWait is recorded (GPUDirect RDMA flush) */
};

/* The step handle of the isend / irecv this thread is making (NULL: none); the NCCL adapter
 * passes it as the request's phandle (plugin/nccl_adapt.c). */
extern __thread struct braid_net_prof_step* braid_net_prof_phandle;

/* Under r->lock, only while r->prof_head != NULL (one branch per step otherwise). A step the
 * proxy is about to post (isend / irecv): starts its op's ProxyOp at the first, then the
 * ProxyStep; returns the plugin's handle for it (NULL: no event). Idempotent per step. */
struct braid_net_prof_step* braid_net_prof_begin(struct net_res* r, uint64_t step);
/* The request was posted (size: bytes of a send, the slot for a receive). */
void braid_net_prof_posted(struct net_res* r, uint64_t step, size_t size);
/* A receive of `size` bytes completed and is being flushed (GPUDirect RDMA). */
void braid_net_prof_flushing(struct net_res* r, uint64_t step, size_t size);
/* The step is done (sent; received and handed to the executor): its events stop, and its
 * op's ProxyOp with its last step. */
void braid_net_prof_done(struct net_res* r, uint64_t step, size_t size);
/* Stop everything still open on r (a failed or closing connection). */
void braid_net_prof_cancel(struct net_res* r);

/* The transport's prof_push slot (takes r->lock). */
void braid_net_prof_push(struct braid_connector* c, struct braid_prof_op* op);

/* The profiler callback a v10+ NCCL plugin gets (NCCL's ncclProfilerCallback semantics). */
ncclResult_t braid_net_prof_callback(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

#endif /* BRAID_NET_PROF_H */
