/*
 * suspend.c - ncclCommSuspend / ncclCommResume / ncclCommMemStats.
 *
 * NCCL_SUSPEND_MEM releases what the communicator can rebuild: every connection (their FIFO
 * memory: shared-memory segments, device buffers, network connections and proxy state), the
 * device mirror of the channels, and the mappings of peers' windows. Windows stay registered
 * (the user's memory is the user's). Resume rebuilds the ring connections as init does, the
 * device mirror, and the window mappings; trees and p2p connect again on first use. Both are
 * collective: every rank of the communicator calls them (a barrier on each side of the
 * release, so no peer still writes into a FIFO being freed). While suspended, every call but
 * ncclCommResume, the queries, ncclCommMemStats, destroy and abort fails with
 * ncclInvalidUsage naming the communicator (braid_sym_check_active).
 *
 * Memory statistics count what the communicator holds, in bytes (host memory in host mode,
 * where NCCL's names say "GPU"): suspendable = the FIFOs of connected receive connectors
 * (each receiver owns its FIFO) + peer window mappings + the one-sided connections' buffers; persistent = the
 * communicator itself, its peer table, channel tables, signal inbox and wait counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "base/debug.h"
#include "bootstrap/bootstrap.h"
#include "core/sym/sym.h"
#include "device/launch.h"
#include "transport/transport.h"

static size_t recv_fifo_bytes(const struct braid_comm* comm) {
  size_t fifo = braid_transport_fifo_bytes(&comm->tctx), total = 0;
  for (int c = 0; c < comm->nchannels; c++) {
    const struct braid_channel* ch = &comm->channels[c];
    total += ch->ring_recv.connected ? fifo : 0;
    total += ch->tree_up_recv.connected ? fifo : 0;
    for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) total += ch->tree_down_recv[d].connected ? fifo : 0;
    for (int p = 0; ch->p2p_recv != NULL && p < comm->nranks; p++) total += ch->p2p_recv[p].connected ? fifo : 0;
  }
  return total;
}

void braid_sym_mem_bytes(const struct braid_comm* comm, uint64_t* suspendable_p, uint64_t* persistent_p) {
  const struct braid_sym* s = comm->sym;
  uint64_t susp = recv_fifo_bytes(comm) + braid_remote_bytes(comm), pers = sizeof(*comm);
  size_t n = (size_t)comm->nranks;
  pers += n * sizeof(*comm->peers) + n * sizeof(*comm->rank_to_node);
  /* per channel: ring order, p2p connectors and their device-pointer tables */
  pers += (uint64_t)comm->nchannels *
          (n * sizeof(int) + 2 * n * sizeof(struct braid_connector) + 2 * n * sizeof(struct braid_conn*));
  if (s != NULL) {
    pers += sizeof(*s) + s->inbox_bytes + s->inbox_bytes /* waited */ + n * (sizeof(int) + sizeof(uint64_t*));
    for (const struct ncclWindow_vidmem* w = s->windows; w != NULL; w = w->next) {
      susp += w->mapped_bytes;
      pers += sizeof(*w) + n * (sizeof(*w->infos) + 2 * sizeof(void*));
    }
  }
  *suspendable_p = susp;
  *persistent_p = pers;
}

BRAID_API ncclResult_t ncclCommMemStats(ncclComm_t handle, ncclCommMemStat_t stat, uint64_t* value) {
  const char* fn = "ncclCommMemStats";
  BRAID_CHECK(braid_comm_check_resumable(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (value == NULL) {
    BRAID_WARN("%s: value argument is NULL", fn);
    return ncclInvalidArgument;
  }
  uint64_t susp, pers;
  pthread_mutex_lock(&comm->mutex);
  braid_sym_mem_bytes(comm, &susp, &pers);
  pthread_mutex_unlock(&comm->mutex);
  switch (stat) {
    case ncclStatGpuMemSuspend:
      *value = susp;
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = comm->sym != NULL && comm->sym->suspended;
      return ncclSuccess;
    case ncclStatGpuMemPersist:
      *value = pers;
      return ncclSuccess;
    case ncclStatGpuMemTotal:
      *value = susp + pers;
      return ncclSuccess;
    default:
      BRAID_WARN("%s: invalid stat %d (ncclStatGpuMemSuspend..ncclStatGpuMemTotal)", fn, (int)stat);
      return ncclInvalidArgument;
  }
}
BRAID_PROFILE_ALIAS(ncclCommMemStats)

static void release(struct braid_comm* comm) {
  if (comm->device != NULL) braid_launch_free(comm);
  braid_connect_free(comm);
  comm->trees_connected = 0;
  for (int c = 0; c < comm->nchannels; c++) {
    struct braid_channel* ch = &comm->channels[c];
    if (ch->p2p_send_dev != NULL) memset(ch->p2p_send_dev, 0, (size_t)comm->nranks * sizeof(*ch->p2p_send_dev));
    if (ch->p2p_recv_dev != NULL) memset(ch->p2p_recv_dev, 0, (size_t)comm->nranks * sizeof(*ch->p2p_recv_dev));
  }
  braid_win_unmap_all(comm);
  braid_remote_free(comm);
}

BRAID_API ncclResult_t ncclCommSuspend(ncclComm_t handle, int flags) {
  const char* fn = "ncclCommSuspend";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (flags & ~NCCL_SUSPEND_MEM) {
    BRAID_WARN("%s: invalid flags 0x%x (known: NCCL_SUSPEND_MEM 0x1)", fn, flags);
    return ncclInvalidArgument;
  }
  if (!(flags & NCCL_SUSPEND_MEM)) return ncclSuccess; /* nothing to release, as NCCL */
  if (comm->device != NULL) {
    int graph = 0, other = 0;
    BRAID_CHECK(braid_launch_wait(comm));
    braid_launch_count_buffers(comm, &graph, &other);
    if (graph > 0) {
      BRAID_WARN("%s: rank %d: %d captured CUDA graph launch(es) use this communicator's buffers; cannot suspend", fn,
                 comm->rank, graph);
      return ncclInvalidUsage;
    }
  }
  /* Every rank has stopped using the connections before anyone frees its side. */
  int64_t deadline = braid_sym_deadline();
  BRAID_CHECK(braid_sym_barrier(comm, deadline, fn));
  uint64_t before, pers;
  braid_sym_mem_bytes(comm, &before, &pers);
  pthread_mutex_lock(&comm->mutex);
  release(comm);
  comm->sym->suspended = 1;
  pthread_mutex_unlock(&comm->mutex);
  BRAID_CHECK(braid_sym_barrier(comm, deadline, fn));
  BRAID_INFO(BRAID_LOG_INIT, "ncclCommSuspend: rank %d released %llu bytes", comm->rank, (unsigned long long)before);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommSuspend)

BRAID_API ncclResult_t ncclCommResume(ncclComm_t handle) {
  const char* fn = "ncclCommResume";
  BRAID_CHECK(braid_comm_check_resumable(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (!comm->sym->suspended) return ncclSuccess; /* nothing was released */
  /* One deadline for every step, as init's connection phase (BRAID_INIT_TIMEOUT): a peer that
   * never resumes fails the others, naming it (the bootstrap wait's WARN), never hangs them. */
  int64_t deadline = braid_sym_deadline();
  ncclResult_t res = braid_connect_rings(comm, deadline);
  /* As at init: every sender mapped its FIFO before anyone may use (or free) it. */
  if (res == ncclSuccess) res = braid_sym_barrier(comm, deadline, fn);
  if (res == ncclSuccess && comm->device != NULL) res = braid_launch_setup(comm);
  if (res == ncclSuccess) res = braid_win_map_all(comm);
  if (res == ncclSuccess && comm->sym->rma_wanted) res = braid_remote_connect(comm, deadline, fn);
  if (res != ncclSuccess) {
    /* The cause (the rank waited for) is the WARN just before: repeat it for ncclGetLastError. */
    char cause[256];
    snprintf(cause, sizeof(cause), "%s", braid_debug_last_error());
    BRAID_WARN("%s: rank %d: could not reacquire the communicator's resources (%s); it stays suspended; cause: %s", fn,
               comm->rank, ncclGetErrorString(res), cause);
    pthread_mutex_lock(&comm->mutex);
    release(comm);
    pthread_mutex_unlock(&comm->mutex);
    return res;
  }
  comm->sym->suspended = 0;
  BRAID_INFO(BRAID_LOG_INIT, "ncclCommResume: rank %d resumed", comm->rank);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommResume)
