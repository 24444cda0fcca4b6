/*
 * exec_status.h - what a status of the executors (enum braid_exec_status, kernels/work.h)
 * means for the caller: one mapping, used by the host executor's caller (core/enqueue.c) and
 * by the kernels' (device/launch.c), so a dead peer is the same error in host and device mode.
 */
#ifndef BRAID_EXEC_STATUS_H
#define BRAID_EXEC_STATUS_H

#include "core/comm.h"

/* The result of `status` when whoever stopped the communicator recorded `raised` (its
 * comm->async_error; ncclSuccess: nobody did):
 *   OK           ncclSuccess
 *   ABORTED      ncclInvalidUsage (the user aborted the communicator)
 *   TIMEOUT      `raised` if set, else ncclSystemError (BRAID_TIMEOUT, the watchdog)
 *   PEER_FAILED  `raised` if ncclSystemError or ncclRemoteError, else ncclRemoteError
 *   anything else ncclInternalError */
ncclResult_t braid_exec_status_result(int status, ncclResult_t raised);
/* The same, with the one WARN that names the rank, what stopped ("operation", or "kernel" and
 * its channel block when block >= 0) and why (comm->abort_reason when the watchdog or the
 * proxy wrote one). */
ncclResult_t braid_exec_status_error(struct braid_comm* comm, int status, const char* what, int block);

#endif /* BRAID_EXEC_STATUS_H */
