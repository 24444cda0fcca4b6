/*
 * group.h - group semantics (ncclGroupStart/End): calls inside a group only validate and
 * append a task; the outermost ncclGroupEnd runs everything. A call outside any group is a
 * group of one.
 */
#ifndef BRAID_GROUP_H
#define BRAID_GROUP_H

#include "core/comm.h"

enum braid_task_kind {
  BRAID_TASK_COLL = 0, /* a collective: func in task->func */
  BRAID_TASK_SEND,
  BRAID_TASK_RECV,
};

struct braid_task {
  struct braid_task* next;
  struct braid_comm* comm;
  uint32_t comm_gen; /* comm->handle_gen when queued: ncclGroupEnd checks comm is still that one */
  int kind;
  int func; /* enum braid_func for collectives */
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int dtype;
  int op;                   /* ncclRedOp_t */
  int root;                 /* collectives with a root; peer for send/recv */
  int gather;               /* a send or receive of an ncclGather (coll_api.c expand): kernels/direct.h's store */
  int a2a;                  /* a send or receive of an ncclAlltoAll (coll_api.c expand) */
  struct braid_redop redop; /* resolved at enqueue time (PreMulSum scalars are read then) */
  int on_stack;             /* a lone call's task lives on its caller's stack: not freed */
  uint64_t flight_id;       /* its entry in comm's flight recorder (core/flight.h), 0: none */
  cudaStream_t stream;      /* the user's stream (device mode: the kernel runs there) */
  struct {                  /* collectives: what the tuner chose (plan.c), for the profiler */
    int algo, proto, nchannels, nthreads;
  } chosen;
  void* prof_event; /* the profiler plugin's handle of its coll / p2p event (core/profile.c) */
  void* prof_api;   /* ... and of its CollApi / P2pApi event (stopped; the parent of prof_event) */
};

/* Depth of the calling thread's group nesting. */
int braid_group_depth(void);
/* Append a task to the calling thread's group (runs it now when no group is open). */
ncclResult_t braid_group_add(struct braid_task* task);
/* Free `mem` (malloc'd host memory the group's tasks read) once the calling thread's group
 * has run or been dropped. Host mode only: device work outlives ncclGroupEnd. */
ncclResult_t braid_group_keep(void* mem);
/* Tasks of comm queued in the calling thread's open group (ncclCommDestroy refuses then). */
int braid_group_holds(const struct braid_comm* comm);
/* Communicator inits started inside a group complete at ncclGroupEnd. */
ncclResult_t braid_group_add_init(struct braid_comm* comm);
/* Run one group's tasks (enqueue.c). Frees the list. */
ncclResult_t braid_enqueue_run(struct braid_task* tasks);

#endif /* BRAID_GROUP_H */
