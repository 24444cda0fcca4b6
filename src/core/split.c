/*
 * split.c - communicators made from an existing one: ncclCommSplit (colors and keys) and
 * ncclCommShrink (drop ranks, e.g. dead ones). The child's bootstrap is built over the
 * parent's (no root), then init continues as for any communicator.
 */
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "bootstrap/bootstrap.h"
#include "core/init_internal.h"
#include "device/device.h"

/* The parent may be revoked (abort flag raised by ncclCommRevoke) but must be otherwise live. */
static ncclResult_t check_parent(ncclComm_t handle, const char* fn, struct braid_comm** comm_p) {
  ncclResult_t res = braid_comm_check(handle, fn);
  struct braid_comm* comm = braid_comm_of(handle);
  if (res == ncclInvalidUsage && comm->state == BRAID_COMM_READY && comm->bootstrap != NULL) res = ncclSuccess;
  if (res != ncclSuccess) return res;
  *comm_p = comm;
  return ncclSuccess;
}

/* Create the child: `members[i]` is the parent rank of child rank i. Takes `members`. */
static ncclResult_t make_child(struct braid_comm* parent, const char* fn, int* members, int nmembers, int myrank,
                               ncclConfig_t* user_config, uint64_t tag, ncclComm_t* newcomm) {
  ncclResult_t res;
  ncclConfig_t config;
  struct braid_comm* child;
  struct init_args* a = NULL;
  if (user_config != NULL)
    BRAID_CHECK_GOTO(braid_config_resolve(user_config, &config, fn), res, err_members);
  else
    config = parent->config;
  BRAID_CALLOC_GOTO(a, 1, res, err_members);
  /* The child lives on its parent's device, whatever device is current now (as NCCL). */
  if (parent->device != NULL) BRAID_CHECK_GOTO(parent->device->set_current(parent->cuda_dev), res, err_args);
  BRAID_CHECK_GOTO(braid_comm_alloc(myrank, nmembers, &config, &child), res, err_args);
  child->parent = parent;
  child->comm_hash = parent->comm_hash * 0x9e3779b97f4a7c15ULL + tag;
  a->comm = child;
  a->fn = fn;
  a->parent_bs = parent->bootstrap;
  a->parent_ranks = members;
  a->split_tag = tag;
  *newcomm = braid_comm_handle(child);
  return braid_init_start(a);
err_args:
  free(a);
err_members:
  free(members);
  return res;
}

struct split_entry {
  int color, key, rank;
};

static int by_key_then_rank(const void* x, const void* y) {
  const struct split_entry* a = x;
  const struct split_entry* b = y;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return a->rank - b->rank;
}

BRAID_API ncclResult_t ncclCommSplit(ncclComm_t handle, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  struct braid_comm* parent = NULL;
  ncclResult_t res = ncclSuccess;
  BRAID_CHECK(check_parent(handle, "ncclCommSplit", &parent));
  if (newcomm == NULL) {
    BRAID_WARN("ncclCommSplit: newcomm argument is NULL");
    return ncclInvalidArgument;
  }
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    BRAID_WARN("ncclCommSplit: invalid color %d (must be >= 0 or NCCL_SPLIT_NOCOLOR)", color);
    return ncclInvalidArgument;
  }
  int n = parent->nranks;
  struct split_entry* all;
  int* members = NULL;
  BRAID_CALLOC_GOTO(all, n, res, out);
  all[parent->rank] = (struct split_entry){color, key, parent->rank};
  BRAID_CHECK_GOTO(braid_bootstrap_allgather(parent->bootstrap, all, sizeof(*all)), res, out_all);
  uint64_t tag = parent->split_count++; /* identical on every rank: they all call split */
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = NULL;
    goto out_all;
  }
  int m = 0;
  for (int r = 0; r < n; r++)
    if (all[r].color == color) all[m++] = all[r];
  qsort(all, m, sizeof(*all), by_key_then_rank);
  BRAID_CALLOC_GOTO(members, m, res, out_all);
  int myrank = -1;
  for (int i = 0; i < m; i++) {
    members[i] = all[i].rank;
    if (all[i].rank == parent->rank) myrank = i;
  }
  res = make_child(parent, "ncclCommSplit", members, m, myrank, config, tag, newcomm);
  if (res == ncclSuccess || res == ncclInProgress) {
    struct braid_comm* child = braid_comm_of(*newcomm);
    if (child != NULL) {
      child->split_color = color;
      child->split_key = key;
    }
  }
out_all:
  free(all);
out:
  return res;
}
BRAID_PROFILE_ALIAS(ncclCommSplit)

BRAID_API ncclResult_t ncclCommShrink(ncclComm_t handle, int* excludeRanksList, int excludeRanksCount,
                                      ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  struct braid_comm* parent = NULL;
  ncclResult_t res = ncclSuccess;
  BRAID_CHECK(check_parent(handle, "ncclCommShrink", &parent));
  if (newcomm == NULL) {
    BRAID_WARN("ncclCommShrink: newcomm argument is NULL");
    return ncclInvalidArgument;
  }
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    BRAID_WARN("ncclCommShrink: invalid shrinkFlags %d", shrinkFlags);
    return ncclInvalidArgument;
  }
  int n = parent->nranks;
  if (excludeRanksCount < 0 || excludeRanksCount >= n || (excludeRanksCount > 0 && excludeRanksList == NULL)) {
    BRAID_WARN("ncclCommShrink: invalid exclude list (count %d, list %p, nranks %d)", excludeRanksCount,
               (void*)excludeRanksList, n);
    return ncclInvalidArgument;
  }
  char* excluded;
  int* members = NULL;
  BRAID_CALLOC_GOTO(excluded, n, res, out);
  for (int i = 0; i < excludeRanksCount; i++) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= n || excluded[r]) {
      BRAID_WARN("ncclCommShrink: excludeRanksList[%d] = %d is out of range or repeated (nranks %d)", i, r, n);
      res = ncclInvalidArgument;
      goto out_excluded;
    }
    excluded[r] = 1;
  }
  if (excluded[parent->rank]) {
    BRAID_WARN("ncclCommShrink: rank %d is in its own exclude list; excluded ranks must not call ncclCommShrink",
               parent->rank);
    res = ncclInvalidUsage;
    goto out_excluded;
  }
  int m = 0, myrank = -1;
  BRAID_CALLOC_GOTO(members, n, res, out_excluded);
  for (int r = 0; r < n; r++) {
    if (excluded[r]) continue;
    if (r == parent->rank) myrank = m;
    members[m++] = r;
  }
  res = make_child(parent, "ncclCommShrink", members, m, myrank, config, parent->split_count++, newcomm);
out_excluded:
  free(excluded);
out:
  return res;
}
BRAID_PROFILE_ALIAS(ncclCommShrink)
