/*
 * watchdog.h - the communicator watchdog (watchdog.c); it fails communicators through
 * braid_comm_raise (core/comm.h), as the transports do through their context. Every communicator with peers has a
 * watchdog on the progress engine (transport/progress.h), host mode or device, whatever its transports: dead local
 * peers and BRAID_TIMEOUT.
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

/* The counters of comm's connections the host can read and what it waits for now, as lines
 * of the flight recorder's dump (core/flight.c); returns the length written. */
size_t braid_watchdog_describe(struct braid_comm* comm, char* buf, size_t len);

/* Steps this rank sent plus steps it consumed over comm's connections the host can read (the
 * flight recorder's steps per call: the difference between two readings). */
uint64_t braid_watchdog_steps(struct braid_comm* comm);
/* The counters braid_watchdog_steps sums, for a caller that keeps them while comm->conn_gen
 * stays the same (the flight recorder, per call): the first `max` into ptrs; returns how many
 * there are. */
int braid_watchdog_step_counters(struct braid_comm* comm, const volatile uint64_t** ptrs, int max);

/* The rank braid blamed when it failed comm (braid_comm_raise), or -1. */
int braid_comm_blamed_peer(const struct braid_comm* comm);

#endif /* BRAID_WATCHDOG_H */
