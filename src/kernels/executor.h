/*
 * executor.h - the host executor's interface (src/kernels/host.c): runs the channels of one
 * or several communicators concurrently and returns when all are done. A lone job runs on
 * the calling thread (no hand-off: a small collective costs no thread wake-up); extra jobs go
 * to a pool of worker threads that lives while any communicator does.
 */
#ifndef BRAID_EXECUTOR_H
#define BRAID_EXECUTOR_H

#include "kernels/work.h"
#include "nccl.h"

/* A send to self matched with a receive from self (core/plan.c): a local copy. */
struct braid_self_copy {
  void* dst;
  const void* src;
  size_t bytes;
};

struct braid_host_job {
  struct braid_dev_channel* ch;
  struct braid_work* works; /* run in order on this channel */
  int nworks;
  /* Sends to self, made by this job: a piece at a time while its p2p ops wait on their peers
   * (instead of before the call, while the peers wait on this rank's sends), the rest after
   * each work item (coll.h braid_idle_copy_step). */
  const struct braid_self_copy* copies;
  int ncopies;
  int copies_any_wait; /* 1: in any poll where no op moves; 0: only once no receive is left */
  const volatile uint32_t* abort_flag;
  int status;        /* out: enum braid_exec_status of the first failure */
  volatile int done; /* set by the runner */
};

/* Run every job to completion (or failure); job statuses say which failed. */
ncclResult_t braid_host_run(struct braid_host_job* jobs, int njobs);

/* The pool lives while communicators do: init retains, destroy releases (threads joined). */
void braid_host_pool_retain(void);
void braid_host_pool_release(void);

#endif /* BRAID_EXECUTOR_H */
