/*
 * sync.c - the bootstrap steps of the collective calls made after init (window registration,
 * ncclDevCommCreate, suspend/resume, grow): bounded like init's. A rank that never comes (it
 * returned early, hangs elsewhere, or calls the collectives in another order) fails every
 * other rank's call after BRAID_INIT_TIMEOUT seconds with ncclRemoteError, and the WARN names
 * the ranks waited for; a rank whose bootstrap connection closes (it died, or destroyed its
 * communicator) fails them at once. The deadline is the call's own, not the bootstrap's, so
 * another thread's wait on the same communicator (a remote signal) keeps its own bound.
 */
#include "base/check.h"
#include "base/param.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "core/sym/sym.h"

int64_t braid_sym_deadline(void) {
  int64_t t = braid_param_int(BRAID_PARAM_INIT_TIMEOUT);
  return t > 0 ? braid_socket_deadline_ms(t * 1000) : 0;
}

ncclResult_t braid_sym_allgather(struct braid_comm* comm, void* all, size_t size, int64_t deadline, const char* fn) {
  return braid_bootstrap_allgather_until(comm->bootstrap, all, size, deadline, fn); /* its WARN names fn, the ranks */
}

ncclResult_t braid_sym_barrier(struct braid_comm* comm, int64_t deadline, const char* fn) {
  ncclResult_t res = braid_bootstrap_barrier_until(comm->bootstrap, deadline);
  if (res != ncclSuccess)
    BRAID_WARN("%s: rank %d: the barrier with the other ranks failed (%s): every rank must make this call", fn,
               comm->rank, ncclGetErrorString(res));
  return res;
}
