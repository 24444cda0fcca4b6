/*
 * flight.h - the flight recorder (flight.c): each communicator keeps its last
 * BRAID_FLIGHT_CALLS calls (function, count, type, op, root or peer, channels, state: queued,
 * running, launched, done, failed, with times) and dumps them, with the counters of its
 * connections and what it waits for (the watchdog's view), as one block on stderr when it
 * fails (braid_comm_raise), on SIGUSR1 (every communicator of the process; also written to
 * $TMPDIR/braid-flight-<pid>.txt, which `braid-info --dump PID` prints).
 */
#ifndef BRAID_FLIGHT_H
#define BRAID_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

struct braid_comm;
struct braid_task;

enum braid_flight_state {
  BRAID_FLIGHT_QUEUED = 1, /* in an open group */
  BRAID_FLIGHT_RUNNING,    /* its group runs (host executor) */
  BRAID_FLIGHT_LAUNCHED,   /* device: its kernel is on the stream */
  BRAID_FLIGHT_DONE,
  BRAID_FLIGHT_FAILED,
};

/* A task joins its communicator's record (queued); returns its id for the updates, 0: none. */
uint64_t braid_flight_add(struct braid_task* task);
/* The state of call `id` of comm (nchannels: the channels its work uses, -1 unchanged). */
void braid_flight_set(struct braid_comm* comm, uint64_t id, int state, int nchannels);
/* The same for a call that runs on the calling thread as soon as it is queued and moves no
 * connection's steps (the lone one-line all-reduce, core/sym/lsa.c): RUNNING takes the queued
 * time as its start (one channel) and 0 steps so far, DONE / FAILED record 0 steps: neither
 * reads the connection counters. */
void braid_flight_set_direct(struct braid_comm* comm, uint64_t id, int state);
/* The block (why: what triggered it) into buf; returns its length. */
size_t braid_flight_format(struct braid_comm* comm, const char* why, char* buf, size_t len);
/* Format and write to stderr in one write, and to `fd` too when fd >= 0. */
void braid_flight_dump(struct braid_comm* comm, const char* why, int fd);
/* With the first communicator: the SIGUSR1 handler and its thread (only where SIGUSR1 has its
 * default action); with the last one gone (stop): neither, and SIGUSR1's default back. */
void braid_flight_signal_setup(void);
void braid_flight_signal_stop(void);
void braid_flight_free(struct braid_comm* comm);

#endif /* BRAID_FLIGHT_H */
