/*
 * group.c - ncclGroupStart/End. Each thread has its own group: a nesting depth, the tasks
 * appended by calls made inside it, and the communicator inits started inside it (they run
 * on threads and are joined here). Only the outermost ncclGroupEnd runs anything;
 * ncclGroupSimulateEnd ends a group the same way but only asks the tuner what it would cost.
 */
#include "core/group.h"

#include <stdlib.h>

#include "base/api.h"
#include "base/check.h"
#include "core/flight.h"
#include "core/init_internal.h"
#include "core/profile.h"
#include "core/sym/sym.h"
#include "topo/tuner.h"

/* ncclSimInfo_t as NCCL_SIM_INFO_INITIALIZER fills it (nccl.h): its magic, and the version
 * that introduced it (2.22.0, the struct is ncclSimInfo_v22200). */
#define BRAID_SIM_INFO_MAGIC 0x74685283u
#define BRAID_SIM_INFO_MIN_VERSION NCCL_VERSION(2, 22, 0)

#define GROUP_MAX_INITS 4096

static __thread int depth;
static __thread struct braid_task* head;
static __thread struct braid_task* tail;
static __thread struct braid_comm** inits;
static __thread uint32_t* inits_gen; /* their handle generations */
static __thread int ninits, inits_cap;
/* Host memory the group's tasks read (an in-place AlltoAll's copy of its input): freed once
 * the group has run or been dropped. */
struct group_keep {
  struct group_keep* next;
  void* mem;
};
static __thread struct group_keep* kept;

ncclResult_t braid_group_keep(void* mem) {
  struct group_keep* k = malloc(sizeof(*k));
  if (k == NULL) {
    BRAID_WARN("Failed to allocate group bookkeeping");
    return ncclSystemError;
  }
  k->mem = mem;
  k->next = kept;
  kept = k;
  return ncclSuccess;
}

static void free_kept(void) {
  while (kept != NULL) {
    struct group_keep* k = kept;
    kept = k->next;
    free(k->mem);
    free(k);
  }
}

int braid_group_depth(void) {
  return depth;
}

ncclResult_t braid_group_add(struct braid_task* task) {
  task->next = NULL;
  if (task->comm_gen == 0) task->comm_gen = task->comm->handle_gen; /* the comm it is queued on now */
  task->flight_id = braid_flight_add(task);
  if (braid_profile_on) braid_profile_api_call(task);
  if (depth == 0) return braid_enqueue_run(task);
  if (tail != NULL)
    tail->next = task;
  else
    head = task;
  tail = task;
  return ncclSuccess;
}

int braid_group_holds(const struct braid_comm* comm) {
  int n = 0;
  for (struct braid_task* t = head; t != NULL; t = t->next) n += t->comm == comm;
  return n + braid_sym_group_holds(comm);
}

ncclResult_t braid_group_add_init(struct braid_comm* comm) {
  if (ninits == inits_cap) {
    int cap = inits_cap ? 2 * inits_cap : 16;
    struct braid_comm** grown = cap <= GROUP_MAX_INITS ? realloc(inits, cap * sizeof(*grown)) : NULL;
    uint32_t* gens = grown != NULL ? realloc(inits_gen, cap * sizeof(*gens)) : NULL;
    if (grown != NULL) inits = grown;
    if (gens == NULL) {
      BRAID_WARN("ncclGroupEnd: too many communicator inits in one group (%d)", ninits);
      return ncclSystemError;
    }
    inits_gen = gens;
    inits_cap = cap;
  }
  inits_gen[ninits] = comm->handle_gen;
  inits[ninits++] = comm;
  return ncclSuccess;
}

/* Every task's communicator is still the one it was queued on: one destroyed or aborted since
 * (by another thread, or an abort here) fails the group instead of being touched. */
static ncclResult_t check_task_comms(const char* fn) {
  for (struct braid_task* t = head; t != NULL; t = t->next) {
    if (braid_comm_registry_valid(t->comm, t->comm_gen)) continue;
    BRAID_WARN("%s: comm %p, which a call of this group was queued on, was destroyed or aborted before %s", fn,
               (void*)((uintptr_t)t->comm | t->comm_gen), fn);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

static void drop_tasks(void) {
  if (braid_profile_on) braid_profile_api_end();
  braid_sym_group_drop();
  while (head != NULL) {
    struct braid_task* t = head;
    head = t->next;
    free(t);
  }
  tail = NULL;
  free_kept();
}

/* Join the group's inits. Non-blocking communicators are left running (ncclInProgress). */
static ncclResult_t join_inits(void) {
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < ninits; i++) {
    struct braid_comm* comm = inits[i];
    if (!braid_comm_registry_valid(comm, inits_gen[i])) continue; /* destroyed (its init joined) */
    if (!comm->config.blocking) {
      if (res == ncclSuccess) res = ncclInProgress;
      continue;
    }
    ncclResult_t r = braid_init_join(comm);
    if (r != ncclSuccess && (res == ncclSuccess || res == ncclInProgress)) res = r;
  }
  ninits = 0;
  free(inits);
  free(inits_gen);
  inits = NULL;
  inits_gen = NULL;
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
  if (res == ncclSuccess || res == ncclInProgress) {
    ncclResult_t ok = check_task_comms("ncclGroupEnd");
    if (ok != ncclSuccess) res = ok;
  }
  if (res != ncclSuccess && res != ncclInProgress) {
    drop_tasks();
    return res;
  }
  /* One-sided calls and registrations (core/sym/group_ops.c): registrations, puts and signals
   * before the collectives, waits after them. */
  ncclResult_t sym = braid_sym_group_begin();
  if (sym != ncclSuccess) {
    drop_tasks();
    return sym;
  }
  struct braid_task* tasks = head;
  head = tail = NULL;
  ncclResult_t run = tasks != NULL ? braid_enqueue_run(tasks) : ncclSuccess;
  free_kept(); /* host mode: the group has run (device groups keep nothing) */
  if (run != ncclSuccess) {
    braid_sym_group_drop();
    return run;
  }
  sym = braid_sym_group_finish();
  return sym != ncclSuccess ? sym : res;
}
BRAID_PROFILE_ALIAS(ncclGroupEnd)

/* Bytes the tuner is asked about for a collective task: the size NCCL's TUNING line shows, the
 * same as plan.c's (all-gather and reduce-scatter count the whole buffer). */
static size_t sim_task_bytes(const struct braid_task* t) {
  size_t b = t->count * braid_dtype_size(t->dtype);
  return t->func == BRAID_FUNC_AllGather || t->func == BRAID_FUNC_ReduceScatter ? b * (size_t)t->comm->nranks : b;
}

/* The model's time for one task (us): the tuner's choice for a collective, exactly as
 * ncclGroupEnd would plan it (plan.c asks braid_tuner_choose per task, no aggregation). An
 * empty call costs nothing; send/recv are not priced by braid's model (tuner.h) and count 0. */
static ncclResult_t sim_task_time(const struct braid_task* t, double* us_p) {
  struct braid_tuner_choice choice;
  *us_p = 0;
  if (t->kind != BRAID_TASK_COLL || t->count == 0) return ncclSuccess;
  if (t->comm->state != BRAID_COMM_READY || t->comm->tuner == NULL) {
    BRAID_WARN("ncclGroupSimulateEnd: communicator %p (rank %d) is not ready (state %d): its %s cannot be estimated",
               (void*)t->comm, t->comm->rank, t->comm->state, braid_tuner_func_name(t->func));
    return ncclInvalidUsage;
  }
  BRAID_CHECK(braid_tuner_choose(t->comm->tuner, t->func, sim_task_bytes(t), &choice));
  *us_p = choice.time_us;
  return ncclSuccess;
}

/* simInfo as NCCL_SIM_INFO_INITIALIZER makes it: at least our struct's size, NCCL's magic, a
 * version from 2.22 (which introduced it) on. A larger size (a newer header) is fine: only the
 * fields we know are written. */
static ncclResult_t sim_info_check(const ncclSimInfo_t* s) {
  if (s == NULL) {
    BRAID_WARN("ncclGroupSimulateEnd: simInfo argument is NULL");
    return ncclInvalidArgument;
  }
  if (s->size < sizeof(ncclSimInfo_t)) {
    BRAID_WARN(
        "ncclGroupSimulateEnd: simInfo->size %zu is smaller than sizeof(ncclSimInfo_t) %zu (initialize it with "
        "NCCL_SIM_INFO_INITIALIZER)",
        s->size, sizeof(ncclSimInfo_t));
    return ncclInvalidArgument;
  }
  if (s->magic != BRAID_SIM_INFO_MAGIC) {
    BRAID_WARN(
        "ncclGroupSimulateEnd: simInfo->magic 0x%x is not 0x%x: ncclSimInfo_t argument not initialized via "
        "NCCL_SIM_INFO_INITIALIZER",
        s->magic, BRAID_SIM_INFO_MAGIC);
    return ncclInvalidArgument;
  }
  if (s->version < BRAID_SIM_INFO_MIN_VERSION) {
    BRAID_WARN(
        "ncclGroupSimulateEnd: simInfo->version %u is older than %d, the first with ncclSimInfo_t (initialize it "
        "with NCCL_SIM_INFO_INITIALIZER)",
        s->version, BRAID_SIM_INFO_MIN_VERSION);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* ncclGroupSimulateEnd: ends the group as ncclGroupEnd would, up to planning: communicator inits
 * of the group are joined, each collective gets the tuner's choice, and simInfo->estimatedTime
 * receives the sum of those choices' predicted times (microseconds, as NCCL). Nothing runs: the
 * tasks are then freed, buffers stay untouched. A nested call only closes its level (as
 * ncclGroupEnd; simInfo is left alone). A bad simInfo is ncclInvalidArgument and still ends this
 * group level, so a caller that only logs the error is not left inside a group: an outermost
 * group's tasks are discarded. simInfo is written only on success. */
BRAID_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  ncclResult_t res = ncclSuccess;
  double total = 0;
  if (depth == 0) {
    BRAID_WARN("ncclGroupSimulateEnd: not in a group call (ncclGroupSimulateEnd without ncclGroupStart)");
    return ncclInvalidUsage;
  }
  ncclResult_t arg = sim_info_check(simInfo);
  if (--depth > 0) return arg;
  res = join_inits();
  if (arg != ncclSuccess) res = arg;
  if (res == ncclSuccess || res == ncclInProgress) {
    ncclResult_t ok = check_task_comms("ncclGroupSimulateEnd");
    if (ok != ncclSuccess) res = ok;
  }
  if (res != ncclSuccess && res != ncclInProgress) goto out_drop;
  for (struct braid_task* t = head; t != NULL; t = t->next) {
    double us;
    BRAID_CHECK_GOTO(sim_task_time(t, &us), res, out_drop);
    total += us;
  }
  simInfo->estimatedTime = (float)total; /* res: ncclSuccess, or ncclInProgress (non-blocking inits) */
out_drop:
  drop_tasks();
  return res;
}
BRAID_PROFILE_ALIAS(ncclGroupSimulateEnd)
