/*
 * blame.h - whom a failed communicator blames (blame.c). A rank whose communicator fails
 * tells every peer why over the bootstrap (a failure notice: its rank, the rank it blames, the
 * status and the reason) before the failing call returns, so before it can exit. A rank that
 * is about to blame a peer P for leaving (P's process is gone, its connection closed) first
 * looks for P's notice: when P failed because rank Q died, Q is blamed, not P, and the reason
 * says both. braid_comm_raise (core/comm.c) does both steps; see there for the threads that
 * must not wait.
 */
#ifndef BRAID_BLAME_H
#define BRAID_BLAME_H

#include <stddef.h>
#include <stdint.h>

struct braid_comm;

/* A failure's reason, as kept (comm->abort_reason) and as told: room for a relayed reason (a
 * peer's own, itself naming a verbs call and its attributes) inside this rank's. */
#define BRAID_REASON_MAX 1024

/* What travels (fixed size, host byte order: ranks of one build). */
struct braid_fail_notice {
  int32_t rank;   /* the rank that failed */
  int32_t blamed; /* the rank it blamed, -1: none */
  int32_t status; /* enum braid_exec_status of its abort flag */
  int32_t pad;
  char reason[BRAID_REASON_MAX]; /* its abort reason */
};

#define BRAID_BLAME_WAIT_MS 1000 /* how long a peer's notice is awaited while it looks alive */
#define BRAID_BLAME_TELL_MS 1000 /* the budget of telling every peer */

/* The rank to blame for `peer`'s departure: `peer`, or the rank whose death made it fail
 * (followed through further notices). why (len bytes): "rank P (host, pid) left after
 * failing: <its reason>" when P left a notice, else "". A notice that blames another rank for
 * a death or for a wait that timed out passes the blame on; one for a local error keeps it. */
int braid_blame_resolve(struct braid_comm* comm, int peer, int wait_ms, char* why, size_t len);
/* Tell every peer why comm failed (its abort reason, or the last error), once. Quiet: no WARN
 * of it replaces the failure's text. */
void braid_blame_tell(struct braid_comm* comm);
/* Tell every peer, once, that this rank gave up waiting for `peer` (a bootstrap wait of init
 * that timed out): a rank that sees it leave then blames `peer` (braid_blame_resolve). */
void braid_blame_tell_timeout(struct braid_comm* comm, int peer, const char* reason);
/* After a failure raised by a thread that could not wait (braid_comm_raise_nowait): resolve
 * the blamed peer now, rewriting the reason if it changes, then tell. */
void braid_blame_settle(struct braid_comm* comm);

/* BRAID_TIMEOUT: tell every peer whom this rank waits for (`peer`, `what`), then follow the
 * other ranks' notices from `peer` (each waits for the next) to the rank that reported no
 * wait: chain (len bytes) says "the communicator waits for rank X (host, pid): 2 -> 1 -> 0",
 * or names a cycle. Returns that rank, or peer when nothing more is known. Waits up to
 * BRAID_BLAME_CHAIN_MS in all. */
#define BRAID_BLAME_CHAIN_MS 2000
int braid_blame_wait_chain(struct braid_comm* comm, int peer, const char* what, char* chain, size_t len);

#endif /* BRAID_BLAME_H */
