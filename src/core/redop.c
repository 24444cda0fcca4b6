/*
 * redop.c - reduction operators: the built-in ones and user PreMulSum operators
 * (ncclRedOpCreatePreMulSum / ncclRedOpDestroy), whose handles are ncclNumOps + a slot index
 * in the communicator's table.
 */
#include "core/redop.h"

#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "device/device.h"

static int is_floating(int dtype) {
  return dtype >= ncclFloat16 && dtype != ncclNumTypes;
}

/* The scalar's bits, zero-extended, read from memory holding one element of `dtype`. On a
 * device communicator a ncclScalarDevice scalar is device memory: the work item carries its
 * address and the kernel reads it when it starts (kernels/coll.h), as NCCL dereferences it
 * while the collective runs; so a scalar written by work queued earlier on the stream counts,
 * and the call makes no device-synchronising copy. */
static void scalar_bits(const struct braid_comm* comm, const void* p, int dtype, struct braid_redop* out) {
  out->scalar = 0;
  if (comm->device != NULL) {
    out->scalar = (uint64_t)(uintptr_t)p;
    out->scalar_dev = 1;
    return;
  }
  memcpy(&out->scalar, p, braid_dtype_size(dtype));
}

ncclResult_t braid_redop_resolve(struct braid_comm* comm, const char* fn, ncclRedOp_t op, ncclDataType_t dtype,
                                 struct braid_redop* out) {
  out->dtype = (uint8_t)dtype;
  out->scalar_dev = 0;
  out->scalar = 0;
  switch ((int)op) {
    case ncclSum:
      out->kind = BRAID_RED_SUM;
      return ncclSuccess;
    case ncclProd:
      out->kind = BRAID_RED_PROD;
      return ncclSuccess;
    case ncclMax:
      out->kind = BRAID_RED_MAX;
      return ncclSuccess;
    case ncclMin:
      out->kind = BRAID_RED_MIN;
      return ncclSuccess;
    case ncclAvg:
      if (is_floating(dtype)) {
        out->kind = BRAID_RED_PREMULSUM;
        out->scalar = braid_redop_scalar_from_double(dtype, 1.0 / comm->nranks);
      } else {
        out->kind = BRAID_RED_SUMPOSTDIV;
        out->scalar = (uint64_t)comm->nranks;
      }
      return ncclSuccess;
    default:
      break;
  }
  int slot = (int)op - ncclNumOps;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&comm->mutex);
  if ((int)op < 0 || slot >= comm->nredops || !comm->redops[slot].in_use) {
    BRAID_WARN("%s: invalid reduction op %d (not a built-in op nor a live PreMulSum op of comm %p)", fn, (int)op,
               (void*)comm);
    res = ncclInvalidArgument;
  } else if (comm->redops[slot].dtype != (int)dtype) {
    BRAID_WARN("%s: PreMulSum op %d was created for datatype %d, used with datatype %d", fn, (int)op,
               comm->redops[slot].dtype, (int)dtype);
    res = ncclInvalidArgument;
  } else {
    const struct braid_user_redop* u = &comm->redops[slot];
    out->kind = BRAID_RED_PREMULSUM;
    if (u->residence == ncclScalarHostImmediate)
      out->scalar = u->scalar;
    else
      scalar_bits(comm, u->scalar_ptr, u->dtype, out);
  }
  pthread_mutex_unlock(&comm->mutex);
  return res;
}

BRAID_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                ncclScalarResidence_t residence, ncclComm_t handle) {
  const char* fn = "ncclRedOpCreatePreMulSum";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (op == NULL || scalar == NULL) {
    BRAID_WARN("%s: %s argument is NULL", fn, op == NULL ? "op" : "scalar");
    return ncclInvalidArgument;
  }
  if ((int)datatype < 0 || (int)datatype >= ncclNumTypes) {
    BRAID_WARN("%s: invalid datatype %d", fn, (int)datatype);
    return ncclInvalidArgument;
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    BRAID_WARN("%s: invalid scalar residence %d", fn, (int)residence);
    return ncclInvalidArgument;
  }
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&comm->mutex);
  int slot = 0;
  while (slot < comm->nredops && comm->redops[slot].in_use) slot++;
  if (slot == comm->nredops) {
    struct braid_user_redop* grown = realloc(comm->redops, (comm->nredops + 1) * sizeof(*grown));
    if (grown == NULL || ncclNumOps + comm->nredops + 1 > 0x7fffffff) {
      BRAID_WARN("%s: cannot create more reduction operators (%d live)", fn, comm->nredops);
      res = ncclSystemError;
      goto out;
    }
    comm->redops = grown;
    comm->nredops++;
  }
  struct braid_user_redop* u = &comm->redops[slot];
  u->in_use = 1;
  u->dtype = datatype;
  u->residence = residence;
  u->scalar = 0;
  if (residence == ncclScalarHostImmediate) memcpy(&u->scalar, scalar, braid_dtype_size(datatype));
  u->scalar_ptr = scalar;
  *op = (ncclRedOp_t)(ncclNumOps + slot);
out:
  pthread_mutex_unlock(&comm->mutex);
  return res;
}
BRAID_PROFILE_ALIAS(ncclRedOpCreatePreMulSum)

BRAID_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t handle) {
  const char* fn = "ncclRedOpDestroy";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if ((int)op >= 0 && (int)op < ncclNumOps) {
    BRAID_WARN("%s: op %d is a built-in operator and cannot be destroyed", fn, (int)op);
    return ncclInvalidArgument;
  }
  int slot = (int)op - ncclNumOps;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&comm->mutex);
  if ((int)op < 0 || slot >= comm->nredops || !comm->redops[slot].in_use) {
    BRAID_WARN("%s: op %d is not a live PreMulSum op of comm %p (already destroyed?)", fn, (int)op, (void*)comm);
    res = ncclInvalidArgument;
  } else {
    comm->redops[slot].in_use = 0;
  }
  pthread_mutex_unlock(&comm->mutex);
  return res;
}
BRAID_PROFILE_ALIAS(ncclRedOpDestroy)
