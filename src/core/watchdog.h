/*
 * watchdog.h - the communicator watchdog and the one place that fails a communicator
 * (watchdog.c). Every communicator with peers has a watchdog on the progress engine
 * (transport/progress.h), host mode or device, whatever its transports: dead local peers and
 * BRAID_TIMEOUT.
 */
#ifndef BRAID_WATCHDOG_H
#define BRAID_WATCHDOG_H

#include "core/comm.h"

/* After the ring connections exist: register comm's watchdog. stop before any connection is
 * freed (idempotent). */
ncclResult_t braid_watchdog_start(struct braid_comm* comm);
void braid_watchdog_stop(struct braid_comm* comm);
/* The peer of comm on this machine seen dead first (checked again now), or -1. */
int braid_watchdog_dead_peer(struct braid_comm* comm);

/* Fail a communicator: the first caller's message becomes comm->abort_reason and a WARN; the
 * abort flag carries `status` (enum braid_exec_status), async_error `res`, failed_peer `peer`.
 * Later calls change nothing. Any thread. */
void braid_comm_fail(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The rank braid blamed when it failed comm (braid_comm_fail), or -1. */
int braid_comm_blamed_peer(const struct braid_comm* comm);

#endif /* BRAID_WATCHDOG_H */
