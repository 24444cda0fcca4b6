/*
 * win_mc.c - windows bound to a multicast object (NVSwitch, NVLink SHARP): what makes
 * ncclGetLsaMultimemDevicePointer / the device API's ncclGetLsaMultimemPointer answer and
 * ncclCommQueryProperties' multimemSupport 1. At registration (collective), when the
 * communicator's NVLS set-up made its own object (lsa.c: every rank on one node, each on a GPU
 * of its own with multicast, sm_90+, NCCL_NVLS_ENABLE not 0) and every rank's window is cuMem
 * memory (ncclMemAlloc; cudaMalloc memory cannot be bound), of one size, starting at a granule
 * boundary of its allocation: a new object of that size (rounded up to the granularity) with
 * every rank's device, each rank's window memory bound at offset 0 (transport/nvls, the same
 * agreed steps as the NVLS scratch), mapped: view.multimem. Any other case, or a step that fails
 * on some rank, leaves the window without one on every rank, and mc_why says why. One object
 * per window: its size is the window's, so nothing is reserved up front; deregistration
 * unbinds and releases it.
 */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "core/sym/sym.h"
#include "transport/nvls/nvls.h"

/* "" when every rank's window can be bound, else why not (the same text on every rank). */
static void why_not(const struct braid_comm* comm, const struct ncclWindow_vidmem* w, char* why, size_t len) {
  const struct braid_sym* s = comm->sym;
  why[0] = '\0';
  if (comm->device == NULL) {
    snprintf(why, len, "host mode (no device)");
    return;
  }
  if (!s->mc_capable) {
    snprintf(why, len, "the communicator has no multicast object: %.100s",
             s->mc_why[0] ? s->mc_why : "none made (yet: init's NVLS set-up makes it, for 2+ ranks of one node)");
    return;
  }
  for (int r = 0; r < comm->nranks; r++) {
    const struct braid_win_info* p = &w->infos[r];
    if (p->share.kind != BRAID_SHARE_VMM) {
      snprintf(why, len,
               "rank %d's buffer %p is not cuMem memory from ncclMemAlloc (cudaMalloc memory cannot be bound to a "
               "multicast object)",
               r, p->ptr);
      return;
    }
    if (p->size != w->infos[0].size) {
      snprintf(why, len, "the ranks' windows differ in size (rank 0: %zu bytes, rank %d: %zu)", w->infos[0].size, r,
               p->size);
      return;
    }
  }
}

ncclResult_t braid_win_mc_bind(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  why_not(comm, w, w->mc_why, sizeof(w->mc_why));
  if (w->mc_why[0] != '\0') {
    BRAID_INFO(BRAID_LOG_REG, "rank %d: window %p has no multicast mapping: %s", comm->rank, (void*)w, w->mc_why);
    return ncclSuccess;
  }
  const struct braid_share* me = &w->infos[comm->rank].share;
  struct braid_nvls_args a = {.dev = comm->device,
                              .cuda_dev = comm->cuda_dev,
                              .rank = comm->rank,
                              .nranks = comm->nranks,
                              .peers = comm->peers,
                              .bs = comm->bootstrap,
                              .bytes = w->size,
                              .bind_ptr = w->user_ptr,
                              .bind_off = me->offset,
                              .bind_room = me->seg_bytes - me->offset};
  char why[160] = "";
  ncclResult_t res = braid_nvls_setup(&a, &w->nvls, why, sizeof(why));
  if (res != ncclSuccess) {
    snprintf(w->mc_why, sizeof(w->mc_why), "the bootstrap failed while binding it");
    return res;
  }
  if (w->nvls == NULL) {
    snprintf(w->mc_why, sizeof(w->mc_why), "%s", why);
    BRAID_INFO(BRAID_LOG_REG, "rank %d: window %p has no multicast mapping: %s", comm->rank, (void*)w, why);
    return ncclSuccess;
  }
  w->view.multimem = w->nvls->mcptr;
  BRAID_INFO(BRAID_LOG_REG,
             "rank %d: window %p (%zu bytes) bound to a multicast object of %d GPUs (%zu bytes, granularity %zu): "
             "multimem address %p",
             comm->rank, (void*)w, w->size, comm->nranks, w->nvls->bytes, w->nvls->gran, w->nvls->mcptr);
  return ncclSuccess;
}

void braid_win_mc_unbind(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  if (w->nvls == NULL) return;
  w->view.multimem = NULL;
  braid_nvls_release(comm->device, w->nvls);
  w->nvls = NULL;
}
