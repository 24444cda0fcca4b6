/*
 * plan.h - one communicator's share of a group: its work items per channel, its
 * point-to-point ops, the peers to connect first, and the executor jobs (plan.c).
 */
#ifndef BRAID_PLAN_H
#define BRAID_PLAN_H

#include "core/comm.h"
#include "core/group.h"
#include "kernels/executor.h"

struct braid_plan {
  struct braid_comm* comm;
  struct braid_work* works; /* channel-major: channel c's items start at c * stride */
  size_t works_cap;         /* items allocated (plans are reused per thread) */
  int stride;
  int njobs;
  struct braid_p2p_op* ops; /* sends and receives with other ranks, sorted by round */
  int nops;
  int* connect_send; /* peers whose p2p send connection must be made first */
  int nconnect_send;
  int* connect_recv;
  int nconnect_recv;
  int connect_trees;              /* a collective uses trees not connected yet */
  int nthreads;                   /* device mode: threads per block, the most any item asked for */
  cudaStream_t stream;            /* device mode: the stream of the comm's first task (the kernel's) */
  struct braid_self_copy* copies; /* sends to self, matched with receives from self */
  int ncopies;
  int copies_in_job; /* host mode: a job makes them (executor.h), braid_plan_self_copies does not */
  void* prof_group;  /* the profiler plugin's group event (core/profile.c) */
  void* prof_proxy;  /* its queued ProxyOp shares (core/profile_proxy.c) */
  struct braid_host_job jobs[BRAID_MAX_CHANNELS]; /* last: a reused plan clears what precedes it */
};

ncclResult_t braid_plan_build(struct braid_plan* plan, struct braid_task* tasks);
/* One connection phase (enum braid_connect_phase) of what the plan needs first. */
ncclResult_t braid_plan_connect(struct braid_plan* plan, int phase);
/* Host mode: the sends to self that no job makes (copies_in_job: the job does). */
void braid_plan_self_copies(struct braid_plan* plan);
void braid_plan_free(struct braid_plan* plan);

#endif /* BRAID_PLAN_H */
