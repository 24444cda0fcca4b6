/*
 * register.c - buffer registration and braid-allocated memory. In host mode a registration is
 * bookkeeping and validation (a registered buffer may later be read directly by peers);
 * windows and ncclMemAlloc (which remembers what it handed out: ncclMemFree takes back only
 * that) are in src/core/sym/ (window.c, mem.c).
 */
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "core/comm.h"

BRAID_API ncclResult_t ncclCommRegister(const ncclComm_t handle, void* buff, size_t size, void** handle_p) {
  const char* fn = "ncclCommRegister";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (handle_p == NULL) {
    BRAID_WARN("%s: handle argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (buff == NULL || size == 0) {
    BRAID_WARN("%s: invalid buffer %p of size %zu", fn, buff, size);
    return ncclInvalidArgument;
  }
  struct braid_reg* r = calloc(1, sizeof(*r));
  if (r == NULL) {
    BRAID_WARN("%s: out of memory", fn);
    return ncclSystemError;
  }
  r->buff = buff;
  r->size = size;
  pthread_mutex_lock(&comm->mutex);
  r->next = comm->regs;
  comm->regs = r;
  pthread_mutex_unlock(&comm->mutex);
  BRAID_INFO(BRAID_LOG_REG, "rank %d registered buffer %p size %zu", comm->rank, buff, size);
  *handle_p = r;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommRegister)

BRAID_API ncclResult_t ncclCommDeregister(const ncclComm_t handle, void* reg) {
  const char* fn = "ncclCommDeregister";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  ncclResult_t res = ncclInvalidArgument;
  pthread_mutex_lock(&comm->mutex);
  for (struct braid_reg** p = &comm->regs; *p != NULL; p = &(*p)->next) {
    if (*p == reg) {
      *p = (*p)->next;
      free(reg);
      res = ncclSuccess;
      break;
    }
  }
  pthread_mutex_unlock(&comm->mutex);
  if (res != ncclSuccess) BRAID_WARN("%s: handle %p is not a registration of comm %p", fn, reg, (void*)comm);
  return res;
}
BRAID_PROFILE_ALIAS(ncclCommDeregister)
