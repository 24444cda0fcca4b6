/*
 * profile.h - the profiler plugin's event sites in the core (profile.c; the plugin itself is
 * plugin/profiler_plugin.c). One call per site, each behind one branch on braid_profile_on,
 * which stays 0 unless some communicator of the process got a plugin context.
 *
 * Events, as NCCL 2.30 nests them: per outermost group (a lone call is one) of the calling
 * thread a GroupApi event, inside it a CollApi / P2pApi event per call (v5+); per group run
 * and communicator a Group event; inside it (parentGroup, and parentObj its API event) a
 * Coll event per collective (its seqNumber per function, the algorithm, protocol and channels
 * the tuner chose) and a P2p event per send or receive. Host mode: they stop when the group's
 * work is done (the call returns); device mode: when its kernels are done (profile_done.c:
 * the progress thread polls a device event recorded behind them; at launch when the stream
 * is being captured).
 */
#ifndef BRAID_PROFILE_H
#define BRAID_PROFILE_H

#include "core/comm.h"
#include "core/plan.h"

extern int braid_profile_on;

/* The communicator's plugin context (comm->prof), after its topology is known. */
ncclResult_t braid_profile_open(struct braid_comm* comm);
/* The plugin's finalize for the communicator (destroy, abort). */
void braid_profile_close(struct braid_comm* comm);
/* Group and task events of a group run: start before it moves data, stop when it is done. */
void braid_profile_group_start(struct braid_plan* plans, int nplans, struct braid_task* tasks);
void braid_profile_group_stop(struct braid_plan* plans, int nplans, struct braid_task* tasks, ncclResult_t res);
/* profile_done.c: device mode, a launched plan's events stop when its kernels are done (the
 * events it takes are cleared in the plan and tasks; what it leaves the caller stops now) ... */
void braid_profile_defer(struct braid_plan* plan, struct braid_task* tasks);
/* ... and what still waits stops at the communicator's end, before the plugin's finalize. */
void braid_profile_done_close(struct braid_comm* comm);
/* profile_proxy.c: the ProxyOp shares of a plan's tasks queued on its proxied connections
 * before it runs or launches (the tasks' events started; device mode: every launch of a
 * communicator with a profiler is counted, whatever the mask) ... */
void braid_profile_proxy_queue(struct braid_plan* plan, struct braid_task* tasks);
/* ... and after it ran (host mode), its proxies finished (or cancelled when res failed),
 * before the tasks' events stop; device mode: the ops braid_profile_defer did not take are
 * cancelled (a failed launch also ends the counting). */
void braid_profile_proxy_finish(struct braid_plan* plan, ncclResult_t res);
/* Device mode, for profile_done.c: the ops of a plan (plan->prof_proxy) not finished yet,
 * and their release once none is. */
int braid_profile_proxy_left(void* ops);
void braid_profile_proxy_free(void* ops);
/* API events (v5+): a call appends its task (a CollApi / P2pApi event, started and stopped
 * there, as NCCL does; the calling thread's GroupApi event starts with its first task) ... */
void braid_profile_api_call(struct braid_task* task);
/* ... and the outermost group ends (run or dropped): the GroupApi event stops. */
void braid_profile_api_end(void);

#endif /* BRAID_PROFILE_H */
