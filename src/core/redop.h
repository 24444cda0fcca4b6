/*
 * redop.h - turning an ncclRedOp_t into what the data path computes (struct braid_redop).
 */
#ifndef BRAID_REDOP_H
#define BRAID_REDOP_H

#include "core/comm.h"

/* Built-in ops and this communicator's PreMulSum handles. Avg on floating types becomes
 * PreMulSum by 1/nranks, on integers Sum then a division by nranks (NCCL's definitions). */
ncclResult_t braid_redop_resolve(struct braid_comm* comm, const char* fn, ncclRedOp_t op, ncclDataType_t dtype,
                                 struct braid_redop* out);

#endif /* BRAID_REDOP_H */
