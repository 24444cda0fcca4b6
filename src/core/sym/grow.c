/*
 * grow.c - ncclCommGetUniqueId and ncclCommGrow (NCCL 2.30): the ranks of a communicator and
 * some new ranks form a larger communicator. Existing ranks keep their rank numbers; new
 * ranks take the numbers their callers give them (from the old size up).
 *
 *   root (one existing rank): ncclCommGetUniqueId(comm, &id), hands id to the new ranks;
 *   existing ranks:           ncclCommGrow(comm, nRanks, root ? &id : NULL, -1, &newcomm, cfg);
 *   new ranks:                ncclCommGrow(NULL, nRanks, &id, rank, &newcomm, cfg).
 *
 * The id is an ordinary bootstrap id (a root thread in the root's process serves exactly one
 * communicator) plus a grow stamp in its unused tail: the old size, so a new rank that claims
 * an existing rank's number is refused before it connects. The existing ranks agree on the id
 * with an allgather over the old communicator (exactly one of them must pass it), then every
 * rank runs the normal init from it. One id at a time per communicator; ncclCommGrow consumes
 * it, so a second grow needs a new id. The old communicator stays usable and is destroyed by
 * its owner as usual.
 */
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/group.h"
#include "core/init_internal.h"
#include "core/sym/sym.h"

#define GROW_STAMP_OFFSET 96
#define GROW_MAGIC 0x62726169642d6772ULL /* "braid-gr" */

struct grow_stamp {
  uint64_t magic;
  int32_t old_nranks;
  int32_t pad;
  uint64_t parent_hash;
};

struct grow_vote {
  int has_id;
  ncclUniqueId id;
};

BRAID_API ncclResult_t ncclCommGetUniqueId(ncclComm_t handle, ncclUniqueId* uniqueId) {
  const char* fn = "ncclCommGetUniqueId";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (uniqueId == NULL) {
    BRAID_WARN("%s: uniqueId argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (braid_param_str(BRAID_PARAM_COMM_ID) != NULL) {
    BRAID_WARN("%s should not be called when NCCL_COMM_ID is set", fn);
    return ncclInvalidUsage;
  }
  if (comm->sym->grow_pending) {
    BRAID_WARN("%s: rank %d: the id made earlier for comm %p has not been used by ncclCommGrow yet", fn, comm->rank,
               (void*)comm);
    return ncclInvalidUsage;
  }
  ncclUniqueId id;
  BRAID_CHECK(braid_bootstrap_get_unique_id(&id));
  struct grow_stamp st = {GROW_MAGIC, comm->nranks, 0, comm->comm_hash};
  memcpy(id.internal + GROW_STAMP_OFFSET, &st, sizeof(st));
  comm->sym->grow_id = id;
  comm->sym->grow_pending = 1;
  *uniqueId = id;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommGetUniqueId)

/* Existing ranks: agree on the id (exactly one rank, the one that made it, passes it). */
static ncclResult_t agree_on_id(struct braid_comm* comm, const ncclUniqueId* mine, ncclUniqueId* id_p) {
  const char* fn = "ncclCommGrow";
  struct grow_vote* votes = calloc((size_t)comm->nranks, sizeof(*votes));
  if (votes == NULL) return ncclSystemError;
  if (mine != NULL) {
    votes[comm->rank].has_id = 1;
    votes[comm->rank].id = *mine;
  }
  ncclResult_t res = braid_sym_allgather(comm, votes, sizeof(*votes), braid_sym_deadline(), fn);
  int nids = 0, from = -1;
  for (int r = 0; res == ncclSuccess && r < comm->nranks; r++)
    if (votes[r].has_id) nids++, from = r;
  if (res == ncclSuccess && nids != 1) {
    BRAID_WARN(
        "%s: rank %d: %d existing ranks passed a unique id; exactly one must (the rank that called "
        "ncclCommGetUniqueId), the others pass NULL",
        fn, comm->rank, nids);
    res = ncclInvalidUsage;
  }
  if (res == ncclSuccess) *id_p = votes[from].id;
  free(votes);
  return res;
}

static ncclResult_t check_new_rank(int nRanks, const ncclUniqueId* id, int rank) {
  const char* fn = "ncclCommGrow";
  if (id == NULL) {
    BRAID_WARN("%s: new ranks must pass the unique id (uniqueId is NULL)", fn);
    return ncclInvalidArgument;
  }
  if (rank < 0 || rank >= nRanks) {
    BRAID_WARN("%s: new rank %d is out of range (nRanks %d)", fn, rank, nRanks);
    return ncclInvalidArgument;
  }
  struct grow_stamp st;
  memcpy(&st, id->internal + GROW_STAMP_OFFSET, sizeof(st));
  if (st.magic != GROW_MAGIC) {
    BRAID_WARN("%s: the unique id was not made by ncclCommGetUniqueId", fn);
    return ncclInvalidArgument;
  }
  if (rank < st.old_nranks || nRanks <= st.old_nranks) {
    BRAID_WARN("%s: new rank %d of %d: ranks 0..%d are the existing ranks of the communicator being grown", fn, rank,
               nRanks, st.old_nranks - 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* Allocate the new communicator and start its init from `id` (init.c). */
static ncclResult_t start_init(struct braid_comm* parent, int nRanks, const ncclUniqueId* id, int rank,
                               ncclConfig_t* user_config, ncclComm_t* newcomm) {
  const char* fn = "ncclCommGrow";
  ncclConfig_t config;
  struct braid_comm* comm;
  if (user_config != NULL || parent == NULL)
    BRAID_CHECK(braid_config_resolve(user_config, &config, fn));
  else
    config = parent->config;
  struct init_args* a = calloc(1, sizeof(*a));
  if (a == NULL || (a->ids = malloc(sizeof(*id))) == NULL) {
    free(a);
    BRAID_WARN("%s: out of memory", fn);
    return ncclSystemError;
  }
  *a->ids = *id;
  a->nids = 1;
  a->fn = fn;
  if (parent != NULL && parent->device != NULL) {
    ncclResult_t res = parent->device->set_current(parent->cuda_dev);
    if (res != ncclSuccess) {
      braid_init_args_free(a);
      return res;
    }
  }
  ncclResult_t res = braid_comm_alloc(rank, nRanks, &config, &comm);
  if (res != ncclSuccess) {
    braid_init_args_free(a);
    return res;
  }
  comm->comm_hash = braid_hash(id, sizeof(*id), 0);
  comm->parent = parent;
  a->comm = comm;
  *newcomm = braid_comm_handle(comm);
  res = braid_init_start(a);
  if (res != ncclSuccess && res != ncclInProgress && config.blocking && braid_group_depth() == 0) *newcomm = NULL;
  return res;
}

BRAID_API ncclResult_t ncclCommGrow(ncclComm_t handle, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                    ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommGrow";
  braid_debug_banner();
  if (newcomm == NULL) {
    BRAID_WARN("%s: newcomm argument is NULL", fn);
    return ncclInvalidArgument;
  }
  *newcomm = NULL;
  if (nRanks <= 0) {
    BRAID_WARN("%s: total ranks must be positive, got %d", fn, nRanks);
    return ncclInvalidArgument;
  }
  if (handle == NULL) {
    BRAID_CHECK(check_new_rank(nRanks, uniqueId, rank));
    BRAID_INFO(BRAID_LOG_INIT, "%s: new rank %d creating a communicator of %d ranks", fn, rank, nRanks);
    return start_init(NULL, nRanks, uniqueId, rank, config, newcomm);
  }
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (nRanks <= comm->nranks) {
    BRAID_WARN("%s: total ranks %d is not more than the current %d", fn, nRanks, comm->nranks);
    return ncclInvalidArgument;
  }
  if (rank != -1) {
    BRAID_WARN("%s: existing ranks must pass rank=-1, got %d", fn, rank);
    return ncclInvalidArgument;
  }
  if (uniqueId != NULL && (!comm->sym->grow_pending || memcmp(uniqueId, &comm->sym->grow_id, sizeof(*uniqueId)) != 0)) {
    BRAID_WARN("%s: rank %d: the unique id was not made by ncclCommGetUniqueId on this communicator (or was used)", fn,
               comm->rank);
    uniqueId = NULL; /* still vote, so every existing rank fails together */
    nRanks = -1;
  }
  ncclUniqueId id;
  ncclResult_t res = agree_on_id(comm, uniqueId, &id);
  if (uniqueId != NULL) comm->sym->grow_pending = 0; /* consumed, whatever happens next */
  if (res == ncclSuccess && nRanks < 0) res = ncclInvalidArgument;
  if (res != ncclSuccess) return res;
  BRAID_INFO(BRAID_LOG_INIT, "%s: existing rank %d creating a communicator of %d ranks", fn, comm->rank, nRanks);
  return start_init(comm, nRanks, &id, comm->rank, config, newcomm);
}
BRAID_PROFILE_ALIAS(ncclCommGrow)
