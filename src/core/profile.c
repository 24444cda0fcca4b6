/*
 * profile.c - group, collective and p2p events for NCCL_PROFILER_PLUGIN (profile.h).
 * Which events start follows NCCL: a Group event when the mask asks for anything beneath it,
 * a Coll (P2p) event when it asks for Coll (P2p) or for events a collective's proxy work would
 * carry (ProxyOp, ProxyStep, KernelCh, NetPlugin), so that a plugin can nest those.
 */
#include "core/profile.h"

#include "base/check.h"
#include "plugin/profiler_abi.h"
#include "plugin/profiler_plugin.h"
#include "transport/progress.h"

int braid_profile_on;

#define BELOW_TASK (NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP | NCCL_PROF_KERNEL_CH | NCCL_PROF_NET_PLUGIN)
#define COLL_MASK (NCCL_PROF_COLL | BELOW_TASK)
#define P2P_MASK (NCCL_PROF_P2P | BELOW_TASK)
#define GROUP_MASK (NCCL_PROF_GROUP | COLL_MASK | P2P_MASK)
#define COLL_API_MASK (NCCL_PROF_COLL_API | COLL_MASK)
#define P2P_API_MASK (NCCL_PROF_P2P_API | P2P_MASK)
#define GROUP_API_MASK (NCCL_PROF_GROUP_API | NCCL_PROF_KERNEL_LAUNCH | GROUP_MASK | COLL_API_MASK | P2P_API_MASK)

/* The calling thread's outermost group, for its GroupApi event. */
static __thread struct {
  int open;
  struct braid_prof* prof;
  void* handle;
} api;

ncclResult_t braid_profile_open(struct braid_comm* comm) {
  struct braid_prof_shape s = {comm->comm_hash, comm->config.commName, comm->nnodes, comm->nranks, comm->rank};
  BRAID_CHECK(braid_prof_open(&s, &comm->prof));
  if (comm->prof != NULL) {
    __atomic_store_n(&braid_profile_on, 1, __ATOMIC_RELAXED);
    braid_progress_ctrl_hook = braid_prof_ctrl; /* ProxyCtrl: the progress thread's sleeps */
  }
  return ncclSuccess;
}

void braid_profile_close(struct braid_comm* comm) {
  braid_profile_done_close(comm);
  braid_prof_close(comm->prof);
  comm->prof = NULL;
}

static void task_start(struct braid_plan* plan, struct braid_task* t, int mask) {
  struct braid_comm* comm = plan->comm;
  struct braid_prof_event e = {0};
  e.parent_group = plan->prof_group;
  e.parent_obj = t->prof_api;
  e.rank = comm->rank;
  e.dtype = t->dtype;
  e.count = t->count;
  if (t->kind == BRAID_TASK_COLL) {
    uint64_t seq = comm->prof_seq[t->func]++; /* counted whether or not the mask shows it */
    if (!(mask & COLL_MASK)) return;
    e.type = NCCL_PROF_COLL;
    e.seq = seq;
    e.func = t->func;
    e.sendbuff = t->sendbuff;
    e.recvbuff = t->recvbuff;
    e.root = t->root;
    e.algo = t->chosen.algo;
    e.proto = t->chosen.proto;
    e.nchannels = t->chosen.nchannels;
    e.nwarps = comm->device != NULL ? t->chosen.nthreads / 32 : 0;
  } else {
    if (!(mask & P2P_MASK)) return;
    e.type = NCCL_PROF_P2P;
    e.func = BRAID_FUNC_SendRecv;
    e.is_send = t->kind == BRAID_TASK_SEND;
    e.recvbuff = t->kind == BRAID_TASK_SEND ? (void*)t->sendbuff : t->recvbuff;
    e.peer = t->root;
    e.nchannels = 1; /* braid's p2p ops run on channel 0 (plan.c) */
  }
  t->prof_event = braid_prof_start(comm->prof, &e);
}

void braid_profile_group_start(struct braid_plan* plans, int nplans, struct braid_task* tasks) {
  for (int i = 0; i < nplans; i++) {
    struct braid_plan* plan = &plans[i];
    int mask = braid_prof_mask(plan->comm->prof);
    plan->prof_group = NULL;
    plan->prof_proxy = NULL;
    if (!(mask & GROUP_MASK)) {
      if (plan->comm->device != NULL) braid_profile_proxy_queue(plan, tasks); /* counted all the same */
      continue;
    }
    struct braid_prof_event g = {.type = NCCL_PROF_GROUP, .rank = plan->comm->rank};
    plan->prof_group = braid_prof_start(plan->comm->prof, &g);
    for (struct braid_task* t = tasks; t != NULL; t = t->next)
      if (t->comm == plan->comm) task_start(plan, t, mask);
    braid_profile_proxy_queue(plan, tasks);
  }
}

void braid_profile_group_stop(struct braid_plan* plans, int nplans, struct braid_task* tasks, ncclResult_t res) {
  /* Device mode: what was launched stops when its kernels are done (profile_done.c). */
  for (int i = 0; i < nplans && res == ncclSuccess; i++)
    if (plans[i].comm->device != NULL) braid_profile_defer(&plans[i], tasks);
  for (int i = 0; i < nplans; i++) braid_profile_proxy_finish(&plans[i], res); /* ProxyOps end first */
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    if (t->prof_event == NULL) continue;
    braid_prof_stop(t->comm->prof, t->prof_event);
    t->prof_event = NULL;
  }
  for (int i = 0; i < nplans; i++) {
    if (plans[i].prof_group == NULL) continue;
    braid_prof_stop(plans[i].comm->prof, plans[i].prof_group);
    plans[i].prof_group = NULL;
  }
}

void braid_profile_api_call(struct braid_task* t) {
  struct braid_prof* p = t->comm->prof;
  int mask = braid_prof_mask(p);
  t->prof_api = NULL;
  if (!api.open) {
    api.open = 1, api.prof = p, api.handle = NULL;
    if (mask & GROUP_API_MASK) {
      struct braid_prof_event g = {.type = NCCL_PROF_GROUP_API, .rank = t->comm->rank};
      g.group_depth = braid_group_depth();
      api.handle = braid_prof_start(p, &g);
    }
  }
  int is_coll = t->kind == BRAID_TASK_COLL;
  if (!(mask & (is_coll ? COLL_API_MASK : P2P_API_MASK))) return;
  struct braid_prof_event e = {0};
  e.type = is_coll ? NCCL_PROF_COLL_API : NCCL_PROF_P2P_API;
  e.parent_obj = api.prof == p ? api.handle : NULL;
  e.rank = t->comm->rank;
  e.func = t->func;
  e.is_send = t->kind == BRAID_TASK_SEND;
  e.count = t->count;
  e.dtype = t->dtype;
  e.root = is_coll ? t->root : -1;
  e.stream = t->stream;
  t->prof_api = braid_prof_start(p, &e);
  braid_prof_stop(p, t->prof_api); /* NCCL stops it once the task is appended */
}

void braid_profile_api_end(void) {
  if (!api.open) return;
  if (api.handle != NULL) braid_prof_stop(api.prof, api.handle);
  api.open = 0, api.prof = NULL, api.handle = NULL;
}
