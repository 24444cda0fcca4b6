/*
 * launch.h - the device side of a communicator (launch.c): its channel state mirrored into
 * device memory, and turning a group's plan into one kernel launch on the user's stream.
 * Used only when the communicator is on a device (comm->device != NULL); host mode never
 * calls into it.
 */
#ifndef BRAID_LAUNCH_H
#define BRAID_LAUNCH_H

#include "core/comm.h"
#include "core/group.h"
#include "core/plan.h"

/* After the ring connections exist: device copies of the channels, their connections and
 * ring orders, events. Undone by braid_launch_free. */
ncclResult_t braid_launch_setup(struct braid_comm* comm);
/* Mirror connections made since the last call (p2p, trees). Step counters of connections
 * already mirrored are the kernels' and are left alone. */
ncclResult_t braid_launch_sync(struct braid_comm* comm);
/* A group's rules before anything runs: two communicators of one device must launch on
 * distinct streams, neither the legacy default stream (their kernels would queue behind each
 * other and deadlock); the group's streams are all being captured or none. ncclInvalidUsage
 * with a WARN otherwise. */
ncclResult_t braid_launch_check_group(struct braid_plan* plans, int nplans, struct braid_task* tasks);
/* Everything the plan's launch needs that could wait for a kernel (launch buffers; the caller
 * mirrors new connections first with braid_launch_sync): called for every communicator of a
 * group before the first braid_launch_plan. */
ncclResult_t braid_launch_prepare(struct braid_plan* plan, struct braid_task* tasks);
/* The plan's kernels (one per datatype) on its stream, ordered with every other stream its
 * tasks name: those streams' prior work before the kernel, their later work after it. Returns
 * once launched; makes no call that waits for the device. */
ncclResult_t braid_launch_plan(struct braid_plan* plan, struct braid_task* tasks);
/* The datatypes of plan's kernels in launch order (one kernel each), into out
 * (BRAID_NUM_DTYPES); returns how many. */
int braid_launch_dtypes(const struct braid_plan* plan, int* out);
/* Kernel statuses of finished launches: the first failure becomes comm->async_error (WARN
 * naming the rank). Returns that error, or ncclSuccess. */
ncclResult_t braid_launch_poll(struct braid_comm* comm);
/* Wait until every launch of the communicator finished (abort ends stuck kernels), then poll. */
ncclResult_t braid_launch_wait(struct braid_comm* comm);
/* Release the device state (after braid_launch_wait, or on a failed init). */
void braid_launch_free(struct braid_comm* comm);
/* The watchdog's view of the kernels (core/watchdog.c): blocks of this communicator's
 * launches that started and have not finished (their status words in pinned memory). Any
 * thread, holding no communicator lock; 0 once braid_launch_free ran. */
int braid_launch_running(struct braid_comm* comm);

/* Test hook: launch buffers the communicator holds, owned by captured graphs and others. */
void braid_launch_count_buffers(struct braid_comm* comm, int* graph, int* other);

/* Threads per block for a launch: NCCL_NTHREADS / the tuner's wish, within what the kernel
 * was built for, a multiple of the warp. */
int braid_launch_threads(int wanted);

#endif /* BRAID_LAUNCH_H */
