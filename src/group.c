/*
 * group.c - ncclGroupStart/End. Each thread has its own group: a nesting depth, the tasks
 * appended by calls made inside it, and the communicator inits started inside it (they run
 * on threads and are joined here). Only the outermost ncclGroupEnd runs anything.
 */
#include <stdlib.h>

#include "api.h"
#include "check.h"
#include "group.h"
#include "init_internal.h"

#define GROUP_MAX_INITS 4096

static __thread int depth;
static __thread struct braid_task* head;
static __thread struct braid_task* tail;
static __thread struct braid_comm** inits;
static __thread int ninits, inits_cap;

int braid_group_depth(void) { return depth; }

ncclResult_t braid_group_add(struct braid_task* task) {
  task->next = NULL;
  if (depth == 0) return braid_enqueue_run(task);
  if (tail != NULL)
    tail->next = task;
  else
    head = task;
  tail = task;
  return ncclSuccess;
}

ncclResult_t braid_group_add_init(struct braid_comm* comm) {
  if (ninits == inits_cap) {
    int cap = inits_cap ? 2 * inits_cap : 16;
    struct braid_comm** grown = cap <= GROUP_MAX_INITS ? realloc(inits, cap * sizeof(*grown)) : NULL;
    if (grown == NULL) {
      BRAID_WARN("ncclGroupEnd: too many communicator inits in one group (%d)", ninits);
      return ncclSystemError;
    }
    inits = grown;
    inits_cap = cap;
  }
  inits[ninits++] = comm;
  return ncclSuccess;
}

static void drop_tasks(void) {
  while (head != NULL) {
    struct braid_task* t = head;
    head = t->next;
    free(t);
  }
  tail = NULL;
}

/* Join the group's inits. Non-blocking communicators are left running (ncclInProgress). */
static ncclResult_t join_inits(void) {
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < ninits; i++) {
    struct braid_comm* comm = inits[i];
    if (!comm->config.blocking) {
      if (res == ncclSuccess) res = ncclInProgress;
      continue;
    }
    ncclResult_t r = braid_init_join(comm);
    if (r != ncclSuccess && (res == ncclSuccess || res == ncclInProgress)) res = r;
  }
  ninits = 0;
  free(inits);
  inits = NULL;
  inits_cap = 0;
  return res;
}

BRAID_API ncclResult_t ncclGroupStart(void) {
  depth++;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclGroupStart)

BRAID_API ncclResult_t ncclGroupEnd(void) {
  if (depth == 0) {
    BRAID_WARN("ncclGroupEnd: not in a group call (ncclGroupEnd without ncclGroupStart)");
    return ncclInvalidUsage;
  }
  if (--depth > 0) return ncclSuccess;
  ncclResult_t res = join_inits();
  if (res != ncclSuccess && res != ncclInProgress) {
    drop_tasks();
    return res;
  }
  struct braid_task* tasks = head;
  head = tail = NULL;
  if (tasks == NULL) return res;
  ncclResult_t run = braid_enqueue_run(tasks);
  return run != ncclSuccess ? run : res;
}
BRAID_PROFILE_ALIAS(ncclGroupEnd)

BRAID_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (simInfo == NULL || simInfo->magic != 0x74685283) {
    BRAID_WARN("ncclGroupSimulateEnd: simInfo argument is %s", simInfo == NULL ? "NULL" : "not initialized via NCCL_SIM_INFO_INITIALIZER");
    return ncclInvalidArgument;
  }
  if (depth == 0) {
    BRAID_WARN("ncclGroupSimulateEnd: not in a group call");
    return ncclInvalidUsage;
  }
  /* Not implemented until the tuner lands: say so, and close the group without running it. */
  BRAID_WARN("ncclGroupSimulateEnd is not implemented yet in braid (it needs the tuner's cost model); the group's "
             "operations were dropped");
  if (--depth == 0) {
    drop_tasks();
    join_inits();
  }
  return ncclInvalidUsage;
}
BRAID_PROFILE_ALIAS(ncclGroupSimulateEnd)
