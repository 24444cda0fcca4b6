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
/* One kernel for the plan on its stream, ordered with every other stream its tasks name:
 * those streams' prior work before the kernel, their later work after it. Returns once
 * launched. */
ncclResult_t braid_launch_plan(struct braid_plan* plan, struct braid_task* tasks);
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
