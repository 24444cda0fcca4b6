/*
 * mismatch.h - BRAID_CHECK_MISMATCH=1 (mismatch.c): before a group's work runs, the ranks of
 * each communicator swap a fingerprint of its collectives (function, datatype, count, op and
 * root of the first BRAID_MISMATCH_CALLS, a hash of all) and fail it, on every rank, with
 * ncclInvalidUsage and a WARN naming the calls and the ranks that disagree, before any byte
 * moves (so the communicator stays usable).
 */
#ifndef BRAID_MISMATCH_H
#define BRAID_MISMATCH_H

#include "core/plan.h"

/* Whether the check is on (the parameter, read per group). */
int braid_mismatch_enabled(void);
/* Post this rank's fingerprint of `tasks` on plans[i].comm to every peer, for every plan, then
 * check every plan against its peers' (one thread may drive every rank of a clique). */
ncclResult_t braid_mismatch_check(struct braid_plan* plans, int nplans, struct braid_task* tasks);

/* Names for messages: "AllReduce", "float" (nccl-tests' names), "sum" ("user op" past avg). */
const char* braid_func_name(int func);
const char* braid_dtype_name(int dtype);
const char* braid_op_name(int op);

#endif /* BRAID_MISMATCH_H */
