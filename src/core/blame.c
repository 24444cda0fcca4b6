/*
 * blame.c - failure notices and whom to blame (blame.h).
 */
#include "core/blame.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/debug.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "kernels/work.h"

static const char* peer_name(struct braid_comm* comm, int peer, char* buf, size_t len) {
  if (comm->peers == NULL || peer < 0 || peer >= comm->nranks) {
    snprintf(buf, len, "rank %d", peer);
    return buf;
  }
  snprintf(buf, len, "rank %d (host %s, pid %d)", peer, comm->peers[peer].hostname, comm->peers[peer].pid);
  return buf;
}

int braid_blame_resolve(struct braid_comm* comm, int peer, int wait_ms, char* why, size_t len) {
  struct braid_fail_notice n;
  char who[160];
  int cur = peer;
  if (len > 0) why[0] = '\0';
  if (comm->bootstrap == NULL || peer < 0 || peer >= comm->nranks || peer == comm->rank) return peer;
  for (int hop = 0; hop < comm->nranks; hop++) {
    if (!braid_bootstrap_notice(comm->bootstrap, cur, &n, sizeof(n), hop == 0 ? wait_ms : 0)) break;
    n.reason[sizeof(n.reason) - 1] = '\0';
    if (hop == 0) snprintf(why, len, "%s left after failing: %s", peer_name(comm, cur, who, sizeof(who)), n.reason);
    /* "it died" and "I waited for it in vain" are passed on; a local error is the leaver's own */
    if ((n.status != BRAID_EXEC_PEER_FAILED && n.status != BRAID_EXEC_TIMEOUT) || n.blamed < 0 ||
        n.blamed >= comm->nranks || n.blamed == comm->rank || n.blamed == cur)
      break;
    cur = n.blamed;
  }
  return cur;
}

static void tell(struct braid_comm* comm, int status, int blamed, const char* reason) {
  struct braid_fail_notice n;
  if (comm->bootstrap == NULL || comm->nranks < 2) return;
  if (__atomic_exchange_n(&comm->failure_told, 1, __ATOMIC_ACQ_REL)) return;
  memset(&n, 0, sizeof(n));
  n.rank = comm->rank;
  n.status = status;
  n.blamed = blamed;
  snprintf(n.reason, sizeof(n.reason), "%s", reason);
  braid_debug_set_quiet(1); /* a peer gone meanwhile: said at INFO, never the error's text */
  int all = braid_bootstrap_tell(comm->bootstrap, &n, sizeof(n), BRAID_BLAME_TELL_MS);
  braid_debug_set_quiet(0);
  BRAID_INFO(BRAID_LOG_INIT, "rank %d: told %s peer why the communicator failed", comm->rank,
             all ? "every" : "every reachable");
}

void braid_blame_tell_timeout(struct braid_comm* comm, int peer, const char* reason) {
  tell(comm, BRAID_EXEC_TIMEOUT, peer, reason);
}

void braid_blame_tell(struct braid_comm* comm) {
  uint32_t flag = __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE);
  tell(comm, (int)flag, comm->abort_reason[0] ? comm->failed_peer : -1,
       comm->abort_reason[0] ? comm->abort_reason : braid_debug_last_error());
}

int braid_blame_wait_chain(struct braid_comm* comm, int peer, const char* what, char* chain, size_t len) {
  struct braid_fail_notice n;
  char who[160], path[128];
  int cur = peer, pn = 0, seen_self = 0;
  int64_t deadline;
  struct timespec ts;
  chain[0] = '\0';
  tell(comm, BRAID_EXEC_TIMEOUT, peer, what);
  if (comm->bootstrap == NULL || peer < 0 || peer >= comm->nranks) return peer;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + BRAID_BLAME_CHAIN_MS;
  pn = snprintf(path, sizeof(path), "%d -> %d", comm->rank, peer);
  for (int hop = 0; hop < comm->nranks; hop++) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t left = deadline - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    if (cur == comm->rank) {
      seen_self = 1;
      break;
    }
    if (!braid_bootstrap_notice(comm->bootstrap, cur, &n, sizeof(n), left > 0 ? (int)left : 0)) break;
    if (n.status != BRAID_EXEC_TIMEOUT || n.blamed < 0 || n.blamed >= comm->nranks) break;
    if (pn < (int)sizeof(path)) pn += snprintf(path + pn, sizeof(path) - pn, " -> %d", n.blamed);
    if (n.blamed == peer) { /* back where it started */
      seen_self = 1;
      break;
    }
    cur = n.blamed;
  }
  if (seen_self)
    snprintf(chain, len, "the ranks wait for each other in a cycle (%s): mismatched calls?", path);
  else
    snprintf(chain, len, "the communicator waits for %s (%s)", peer_name(comm, cur, who, sizeof(who)), path);
  return cur;
}

void braid_blame_settle(struct braid_comm* comm) {
  char why[BRAID_REASON_MAX];
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) == BRAID_EXEC_PEER_FAILED && comm->abort_reason[0]) {
    int peer = comm->failed_peer;
    int blamed = braid_blame_resolve(comm, peer, BRAID_BLAME_WAIT_MS, why, sizeof(why));
    if (blamed != peer) braid_comm_reblame(comm, peer, blamed, why);
  }
  braid_blame_tell(comm);
}
