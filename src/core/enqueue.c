/*
 * enqueue.c - turning a group's tasks into work and running it (docs/ARCHITECTURE.md 3 step 2).
 * Per communicator: each collective gets a protocol and a channel count, and one work item
 * per channel holding that channel's share; sends and receives become point-to-point ops
 * sorted into rounds (src/algo/alltoall.h) on channel 0, connecting peers on first use.
 * Then every (communicator, channel) with work becomes one job of the host executor, or, for
 * communicators on a device, a kernel launch on the user's stream (launch.c).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "algo/alltoall.h"
#include "base/check.h"
#include "base/param.h"
#include "core/exec_status.h"
#include "core/flight.h"
#include "core/group.h"
#include "core/mismatch.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/sym/sym.h"
#include "device/launch.h"
#include "kernels/executor.h"

/* Plans are kept per thread and reused: a small collective then costs no allocation for its
 * plan or its work items (they keep their capacity). Freed when the thread exits. */
struct plan_cache {
  struct braid_plan* plans;
  int cap;
};
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void* p) {
  struct plan_cache* cache = p;
  for (int i = 0; i < cache->cap; i++) free(cache->plans[i].works);
  free(cache->plans);
  free(cache);
}
static void cache_init(void) {
  pthread_key_create(&cache_key, cache_free);
}

static struct plan_cache* thread_cache(void) {
  pthread_once(&cache_once, cache_init);
  struct plan_cache* cache = pthread_getspecific(cache_key);
  if (cache == NULL && (cache = calloc(1, sizeof(*cache))) != NULL) pthread_setspecific(cache_key, cache);
  return cache;
}

/* Distinct communicators of a task list, in order of first appearance, one plan each. */
static ncclResult_t collect_comms(struct braid_task* tasks, struct braid_plan** plans_p, int* nplans_p) {
  struct plan_cache* cache = thread_cache();
  int n = 0;
  if (cache == NULL) goto oom;
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    int i = 0;
    while (i < n && cache->plans[i].comm != t->comm) i++;
    if (i < n) continue;
    if (n == cache->cap) {
      int cap = cache->cap ? 2 * cache->cap : 4;
      struct braid_plan* grown = realloc(cache->plans, cap * sizeof(*grown));
      if (grown == NULL) goto oom;
      memset(grown + cache->cap, 0, (cap - cache->cap) * sizeof(*grown));
      cache->plans = grown;
      cache->cap = cap;
    }
    struct braid_plan* plan = &cache->plans[n++];
    struct braid_work* works = plan->works;
    size_t works_cap = plan->works_cap;
    memset(plan, 0, offsetof(struct braid_plan, jobs)); /* jobs[0..njobs) are written before use */
    plan->works = works;
    plan->works_cap = works_cap;
    plan->comm = t->comm;
  }
  *plans_p = cache ? cache->plans : NULL;
  *nplans_p = n;
  return ncclSuccess;
oom:
  BRAID_WARN("Failed to allocate a plan for %d communicators", n + 1);
  return ncclSystemError;
}

static ncclResult_t exec_error(struct braid_plan* plan, int status) {
  return braid_exec_status_error(plan->comm, status, "operation", -1);
}

/* A connection made at first use failed. When braid itself stopped the communicator meanwhile
 * (BRAID_TIMEOUT, a dead peer: the bootstrap wait then only sees "aborted"), the call fails
 * the way the data path would have, with the reason the watchdog or the proxy wrote. */
static ncclResult_t connect_error(struct braid_plan* plan, ncclResult_t res) {
  uint32_t flag = __atomic_load_n(&plan->comm->abort_flag, __ATOMIC_ACQUIRE);
  if (flag == BRAID_EXEC_TIMEOUT || flag == BRAID_EXEC_PEER_FAILED) return exec_error(plan, (int)flag);
  return res;
}

/* Run every plan's jobs together: they may depend on each other (one thread driving all the
 * ranks of an ncclCommInitAll clique). */
static ncclResult_t run_plans(struct braid_plan* plans, int nplans) {
  ncclResult_t res = ncclSuccess;
  int njobs = 0;
  for (int i = 0; i < nplans; i++) njobs += plans[i].njobs;
  if (njobs == 0) return ncclSuccess;
  struct braid_host_job stack_jobs[BRAID_MAX_CHANNELS];
  struct braid_host_job* jobs = stack_jobs;
  if (njobs > BRAID_MAX_CHANNELS) BRAID_CALLOC_GOTO(jobs, njobs, res, out);
  int k = 0;
  for (int i = 0; i < nplans; i++)
    for (int j = 0; j < plans[i].njobs; j++) jobs[k++] = plans[i].jobs[j];
  BRAID_CHECK_GOTO(braid_host_run(jobs, njobs), res, out_jobs);
  k = 0;
  for (int i = 0; i < nplans; i++) {
    for (int j = 0; j < plans[i].njobs; j++, k++) {
      if (jobs[k].status != BRAID_EXEC_OK && res == ncclSuccess) res = exec_error(&plans[i], jobs[k].status);
    }
  }
out_jobs:
  if (jobs != stack_jobs) free(jobs);
out:
  return res;
}

/* Device mode: mirror connections made for this group, then one launch per communicator;
 * returns once launched (the kernels run on the users' streams). */
static ncclResult_t launch_plans(struct braid_plan* plans, int nplans, struct braid_task* tasks) {
  for (int i = 0; i < nplans; i++) {
    if (plans[i].comm->device == NULL) {
      BRAID_WARN("A group mixes host-mode and device communicators (rank %d of comm %p is in host mode)",
                 plans[i].comm->rank, (void*)plans[i].comm);
      return ncclInvalidUsage;
    }
  }
  /* Everything that could wait for the device before the first kernel: that kernel may spin
   * waiting for one launched after it (two ranks of one process on one device). */
  BRAID_CHECK(braid_launch_check_group(plans, nplans, tasks));
  for (int i = 0; i < nplans; i++) {
    struct braid_plan* plan = &plans[i];
    if (plan->connect_trees || plan->nconnect_send + plan->nconnect_recv > 0)
      BRAID_CHECK(braid_launch_sync(plan->comm));
    BRAID_CHECK(braid_launch_prepare(plan, tasks));
  }
  for (int i = 0; i < nplans; i++) BRAID_CHECK(braid_launch_plan(&plans[i], tasks));
  return ncclSuccess;
}

/* The flight recorder's state of every task (channels: its plan's jobs, host mode). */
static void flight_set_all(struct braid_plan* plans, int nplans, struct braid_task* tasks, int state) {
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    int nch = -1;
    for (int i = 0; i < nplans; i++)
      if (plans[i].comm == t->comm && t->comm->device == NULL) nch = plans[i].njobs;
    braid_flight_set(t->comm, t->flight_id, state, nch);
  }
}

/* The plan's path: everything but the lone one-line all-reduce. Out of line, so that call
 * does not pay for this one's frame. */
static __attribute__((noinline)) ncclResult_t run_planned(struct braid_task* tasks) {
  ncclResult_t res = ncclSuccess;
  struct braid_plan* plans = NULL;
  int nplans = 0, profiled = 0;
  BRAID_CHECK_GOTO(collect_comms(tasks, &plans, &nplans), res, out_tasks);
  for (int i = 0; i < nplans; i++) __atomic_add_fetch(&plans[i].comm->inflight, 1, __ATOMIC_ACQ_REL);
  /* BRAID_CHECK_MISMATCH: the ranks agree on what the group does before anything moves */
  if (braid_mismatch_enabled()) BRAID_CHECK_GOTO(braid_mismatch_check(plans, nplans, tasks), res, out_plans);
  for (int i = 0; i < nplans; i++) BRAID_CHECK_GOTO(braid_plan_build(&plans[i], tasks), res, out_plans);
  /* Connect new peers, each phase over every communicator before the next (comm.h). */
  for (int phase = BRAID_CONNECT_POST; phase <= BRAID_CONNECT_RECVS; phase++)
    for (int i = 0; i < nplans; i++)
      if ((res = braid_plan_connect(&plans[i], phase)) != ncclSuccess) {
        res = connect_error(&plans[i], res);
        goto out_plans;
      }
  if (braid_profile_on) braid_profile_group_start(plans, nplans, tasks), profiled = 1;
  if (plans[0].comm->device != NULL) { /* device mode (a group never mixes modes: launch_plans) */
    res = launch_plans(plans, nplans, tasks);
    goto out_plans;
  }
  for (int i = 0; i < nplans; i++) braid_plan_self_copies(&plans[i]);
  flight_set_all(plans, nplans, tasks, BRAID_FLIGHT_RUNNING);
  res = run_plans(plans, nplans);
out_plans:
  if (profiled) braid_profile_group_stop(plans, nplans, tasks, res);
  flight_set_all(plans, nplans, tasks,
                 res != ncclSuccess              ? BRAID_FLIGHT_FAILED
                 : plans[0].comm->device != NULL ? BRAID_FLIGHT_LAUNCHED
                                                 : BRAID_FLIGHT_DONE);
  for (int i = 0; i < nplans; i++) {
    struct braid_comm* comm = plans[i].comm;
    braid_plan_free(&plans[i]);
    __atomic_sub_fetch(&comm->inflight, 1, __ATOMIC_ACQ_REL); /* last touch: abort may free it now */
  }
out_tasks:
  if (braid_profile_on) braid_profile_api_end(); /* the outermost group's end */
  while (tasks != NULL) {
    struct braid_task* t = tasks;
    tasks = t->next;
    if (!t->on_stack) free(t);
  }
  return res;
}

ncclResult_t braid_enqueue_run(struct braid_task* tasks) {
  ncclResult_t res = ncclSuccess;
  /* A lone small all-reduce the tuner sends to the one-line one-shot runs without a plan (the
   * profiler's events come from the plan's path: not when it is on). */
  if (tasks->next == NULL && !braid_profile_on && braid_lsa_lone(tasks, &res)) {
    if (!tasks->on_stack) free(tasks);
    return res;
  }
  return run_planned(tasks);
}
