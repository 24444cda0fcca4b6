/*
 * lsa.c - the per-communicator scratch of the NVLS-style all-reduce (kernels/lsa.h) in host
 * mode: one segment per rank (ncclMemAlloc memory, registered as a symmetric window so every
 * local rank maps every other's), in which calls stage their inputs and publish partial
 * results. It is a per-node resource, not a per-pair connection: it exists when the whole
 * communicator is one LSA team (every rank load/store reachable: one node), NCCL_NVLS_ENABLE
 * is not 0 and BRAID_LSA_MAX_BYTES is not 0; then the tuner may choose one-shot or two-shot
 * all-reduces up to BRAID_LSA_MAX_BYTES (tuner_tables.h, the LSA block).
 *
 * Device mode has no NVLS path yet (CUDA IPC peer mappings and multicast objects are the next
 * step): the scratch is not made there and the tuner never offers NVLS.
 */
#include "kernels/lsa.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "core/sym/sym.h"
#include "topo/tuner.h"

struct braid_lsa {
  void* mem;        /* this rank's segment */
  ncclWindow_t win; /* the window over it: peer_ptr[r] is rank r's segment as mapped here */
  char** seg;       /* [nranks] refreshed from the window at each call (suspend/resume remap) */
  struct braid_lsa_view view;
  uint64_t seq; /* calls planned on this communicator */
};

ncclResult_t braid_lsa_init(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  struct braid_sym* s = comm->sym;
  int64_t max = braid_param_int(BRAID_PARAM_LSA_MAX_BYTES);
  /* The same decision on every rank: from shared facts and the (shared) environment. */
  if (comm->device != NULL || comm->nranks < 2 || s->lsa_size != comm->nranks || comm->nranks > BRAID_LSA_MAX_RANKS ||
      max <= 0 || braid_param_int(BRAID_PARAM_NVLS_ENABLE) == 0 || s->peer_local == NULL /* numRmaCtx 0 */)
    return ncclSuccess;
  size_t slot = ((size_t)max + 4095) & ~(size_t)4095, bytes = BRAID_LSA_SEG_BYTES(slot);
  struct braid_lsa* l = NULL;
  BRAID_CALLOC_GOTO(l, 1, res, out);
  BRAID_CALLOC_GOTO(l->seg, comm->nranks, res, err_free);
  BRAID_CHECK_GOTO(ncclMemAlloc(&l->mem, bytes), res, err_free);
  BRAID_CHECK_GOTO(braid_win_register(comm, l->mem, bytes, &l->win, NCCL_WIN_COLL_SYMMETRIC), res, err_mem);
  l->view.nranks = comm->nranks;
  l->view.slot_bytes = slot;
  l->view.seg = l->seg;
  s->lsa = l;
  braid_tuner_enable_lsa(comm->tuner, slot, (int)sysconf(_SC_NPROCESSORS_ONLN));
  BRAID_INFO(BRAID_LOG_INIT, "rank %d: one-/two-shot all-reduce scratch: %zu bytes (calls up to %zu bytes)", comm->rank,
             bytes, slot);
  return ncclSuccess;
err_mem:
  ncclMemFree(l->mem);
err_free:
  free(l->seg);
  free(l);
out:
  return res;
}

/* Peers of this process read its segment through its own mapping: before that goes, wait
 * (bounded: a peer may have died or left mid-call) until each finished its last call. */
static void wait_peers_done(struct braid_comm* comm, struct braid_lsa* l) {
  const uint32_t seq = (uint32_t)l->seq;
  double deadline = braid_time_now() + 5.0;
  for (int r = 0; r < comm->nranks; r++) {
    if (r == comm->rank || comm->peers[r].pid_hash != comm->peers[comm->rank].pid_hash) continue;
    const volatile uint64_t* done = (const volatile uint64_t*)((char*)l->mem + BRAID_LSA_DONE_OFF + 8 * r);
    while ((int32_t)((uint32_t)simt_ld_acquire_u64(done) - seq) < 0 && !comm->abort_flag) {
      if (braid_time_now() > deadline) {
        BRAID_INFO(BRAID_LOG_INIT, "rank %d: rank %d never finished one-/two-shot call %u; freeing its scratch anyway",
                   comm->rank, r, seq);
        return;
      }
      sched_yield();
    }
  }
}

void braid_lsa_free(struct braid_comm* comm) {
  struct braid_lsa* l = comm->sym->lsa;
  if (l == NULL) return;
  if (l->seq > 0) wait_peers_done(comm, l);
  comm->sym->lsa = NULL;
  ncclMemFree(l->mem); /* the window goes with the others (braid_win_free_all) */
  free(l->seg);
  free(l);
}

const struct braid_lsa_view* braid_lsa_next(struct braid_comm* comm, uint64_t* seq_p) {
  struct braid_lsa* l = comm->sym != NULL ? comm->sym->lsa : NULL;
  if (l == NULL || !l->win->mapped) return NULL;
  for (int r = 0; r < comm->nranks; r++) l->seg[r] = l->win->peer_ptr[r];
  *seq_p = ++l->seq;
  return &l->view;
}
