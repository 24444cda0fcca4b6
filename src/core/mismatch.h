/*
 * mismatch.h - BRAID_CHECK_MISMATCH=1 (mismatch.c): before a group's work runs, the ranks of
 * each communicator swap a fingerprint of its collectives (function, datatype, count, op and
 * root of the first BRAID_MISMATCH_CALLS, a hash of all, the communicator's group number) and
 * fail it, on every rank, with ncclInvalidUsage and a WARN naming the calls and the ranks that
 * disagree, before any of the group's bytes move (so the communicator stays usable). Host
 * mode: in band, a ring step on channel 0's connections; device communicators: the bootstrap.
 */
#ifndef BRAID_MISMATCH_H
#define BRAID_MISMATCH_H

#include "core/plan.h"

/* Whether the check is on (the parameter, read per group). */
int braid_mismatch_enabled(void);
/* The bit of braid_peer_info.must_agree that says the check is on: a rank without it would
 * take the others' fingerprint step for its data, so init refuses a job that is split. */
#define BRAID_PEER_AGREE_CHECK_MISMATCH 1
/* At init, after the peers' identities are in: ncclInvalidUsage, on every rank, when some
 * ranks run with BRAID_CHECK_MISMATCH=1 and others without (the WARN names both sets). */
ncclResult_t braid_mismatch_check_agree(const struct braid_comm* comm);
/* Swap this rank's fingerprint of `tasks` on plans[i].comm with every peer's, for every plan
 * at once (one thread may drive every rank of a clique), then check each plan. */
ncclResult_t braid_mismatch_check(struct braid_plan* plans, int nplans, struct braid_task* tasks);

/* Names for messages: "AllReduce", "float" (nccl-tests' names), "sum" ("user op" past avg). */
const char* braid_func_name(int func);
const char* braid_dtype_name(int dtype);
const char* braid_op_name(int op);

#endif /* BRAID_MISMATCH_H */
