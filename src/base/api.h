/*
 * api.h - how a public NCCL entry point is defined. The library is built with
 * -fvisibility=hidden and a version script (src/exports.map); BRAID_API marks the NCCL
 * functions, BRAID_PROFILE_ALIAS adds the `pnccl*` name NCCL also exports (profiling hooks).
 *
 *   BRAID_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { ... }
 *   BRAID_PROFILE_ALIAS(ncclCommCount)
 */
#ifndef BRAID_API_H
#define BRAID_API_H

#include "nccl.h"

#define BRAID_API __attribute__((visibility("default")))
#define BRAID_PROFILE_ALIAS(name) extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")));

#endif /* BRAID_API_H */
