/*
 * exec_status.c - the one mapping from executor statuses to results (core/exec_status.h).
 */
#include "core/exec_status.h"

#include <stdio.h>

#include "base/debug.h"
#include "base/param.h"
#include "kernels/work.h"

ncclResult_t braid_exec_status_result(int status, ncclResult_t raised) {
  switch (status) {
    case BRAID_EXEC_OK:
      return ncclSuccess;
    case BRAID_EXEC_ABORTED:
      return ncclInvalidUsage;
    case BRAID_EXEC_TIMEOUT:
      return raised != ncclSuccess ? raised : ncclSystemError;
    case BRAID_EXEC_MISMATCH:
      return ncclInvalidUsage;
    case BRAID_EXEC_PEER_FAILED:
      return raised == ncclSystemError ? ncclSystemError : ncclRemoteError;
    default:
      return ncclInternalError;
  }
}

ncclResult_t braid_exec_status_error(struct braid_comm* comm, int status, const char* what_, int block) {
  ncclResult_t res = braid_exec_status_result(status, comm->async_error);
  const char* reason = comm->abort_reason;
  char what[64];
  if (block >= 0)
    snprintf(what, sizeof(what), "%s (channel block %d)", what_, block);
  else
    snprintf(what, sizeof(what), "%s", what_);
  switch (status) {
    case BRAID_EXEC_OK:
      break;
    case BRAID_EXEC_ABORTED:
      BRAID_WARN("rank %d: %s stopped: communicator %p was aborted", comm->rank, what, (void*)comm);
      break;
    case BRAID_EXEC_TIMEOUT: /* the watchdog (core/watchdog.c) wrote what it waited for */
      if (reason[0])
        BRAID_WARN("%s", reason);
      else
        BRAID_WARN("rank %d: %s timed out waiting for a peer (BRAID_TIMEOUT=%lld s)", comm->rank, what,
                   (long long)braid_param_int(BRAID_PARAM_TIMEOUT));
      break;
    case BRAID_EXEC_PEER_FAILED: /* the net proxy or the watchdog named the peer */
      if (reason[0])
        BRAID_WARN("%s", reason);
      else
        BRAID_WARN("rank %d: %s failed: a peer failed", comm->rank, what);
      break;
    case BRAID_EXEC_BAD_SCHEDULE: /* kernels/coll.h: a schedule refused a step */
      BRAID_WARN(
          "rank %d: %s stopped: its schedule refused a step (bad ring position, root, step or primitive): "
          "internal error",
          comm->rank, what);
      break;
    case BRAID_EXEC_MISMATCH: /* kernels/lsa.h: a peer's line said another size */
      BRAID_WARN(
          "rank %d: %s stopped: a peer called it with a different size, or its BRAID_LSA_FLAT_BYTES differs "
          "(BRAID_CHECK_MISMATCH=1 names the rank and the arguments)",
          comm->rank, what);
      break;
    default:
      BRAID_WARN("rank %d: %s failed with status %d", comm->rank, what, status);
  }
  return res;
}
