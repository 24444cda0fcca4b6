/*
 * init_internal.h - what the communicator lifecycle files (init.c, init_api.c, split.c) share.
 */
#ifndef BRAID_INIT_INTERNAL_H
#define BRAID_INIT_INTERNAL_H

#include "core/comm.h"

/* One init to run: from unique ids (a root), or from a parent's bootstrap (split/shrink). */
struct init_args {
  struct braid_comm* comm;
  ncclUniqueId* ids; /* owned */
  int nids;
  const char* fn; /* API name for logs */
  struct braid_bootstrap* parent_bs;
  int* parent_ranks; /* owned; new rank -> parent rank */
  uint64_t split_tag;
};

ncclResult_t braid_config_resolve(const ncclConfig_t* user, ncclConfig_t* out, const char* fn);
ncclResult_t braid_comm_alloc(int rank, int nranks, const ncclConfig_t* config, struct braid_comm** comm_p);
void braid_comm_free(struct braid_comm* comm);
/* Starts init (takes ownership of a): blocking outside groups, on a thread otherwise. */
ncclResult_t braid_init_start(struct init_args* a);
void braid_init_args_free(struct init_args* a);
void braid_init_join_thread(struct braid_comm* comm);
/* Wait for a threaded init; returns its result. */
ncclResult_t braid_init_join(struct braid_comm* comm);
ncclResult_t braid_init_finish(struct braid_comm* comm, const char* fn, double t_boot);
void braid_comm_fill_identity(struct braid_comm* comm, struct braid_peer_info* me);
uint64_t braid_hash(const void* data, size_t len, uint64_t seed);

#endif /* BRAID_INIT_INTERNAL_H */
