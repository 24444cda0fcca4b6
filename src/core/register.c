/*
 * register.c - buffer registration and braid-allocated memory. In host mode a registration is
 * bookkeeping and validation (a registered buffer may later be read directly by peers);
 * ncclMemAlloc returns device memory on a GPU and page-aligned host memory in host mode, and
 * remembers it: ncclMemFree takes back only what it handed out.
 * Windows (symmetric memory) are not implemented yet.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "core/comm.h"
#include "device/device.h"

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

BRAID_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                              int winFlags) {
  BRAID_CHECK(braid_comm_check(comm, "ncclCommWindowRegister"));
  BRAID_WARN("ncclCommWindowRegister is not implemented yet in braid (symmetric windows need the CUDA backend)");
  return ncclInvalidUsage;
}
BRAID_PROFILE_ALIAS(ncclCommWindowRegister)

BRAID_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  BRAID_CHECK(braid_comm_check(comm, "ncclCommWindowDeregister"));
  BRAID_WARN("ncclCommWindowDeregister is not implemented yet in braid (symmetric windows need the CUDA backend)");
  return ncclInvalidUsage;
}
BRAID_PROFILE_ALIAS(ncclCommWindowDeregister)

/* What ncclMemAlloc handed out and ncclMemFree has not taken back: a pointer braid did not
 * allocate (or already freed, or inside an allocation) is refused instead of crashing free(). */
#define MEM_BUCKETS 256
struct mem_entry {
  struct mem_entry* next;
  void* ptr;
};
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_entry* mem_table[MEM_BUCKETS];

static struct mem_entry** mem_slot(void* ptr) {
  uintptr_t h = (uintptr_t)ptr >> 12;
  struct mem_entry** pp = &mem_table[(h ^ (h >> 8)) % MEM_BUCKETS];
  while (*pp != NULL && (*pp)->ptr != ptr) pp = &(*pp)->next;
  return pp;
}

BRAID_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == NULL) {
    BRAID_WARN("ncclMemAlloc: ptr argument is NULL");
    return ncclInvalidArgument;
  }
  if (size == 0) {
    BRAID_WARN("ncclMemAlloc: size is 0");
    return ncclInvalidArgument;
  }
  struct mem_entry* e = malloc(sizeof(*e));
  if (e == NULL) {
    BRAID_WARN("ncclMemAlloc: out of memory");
    return ncclSystemError;
  }
  /* Device memory on a GPU, page-aligned host memory in host mode (device.c). */
  ncclResult_t res = braid_device_mem_alloc(&e->ptr, size);
  if (res != ncclSuccess) {
    BRAID_WARN("ncclMemAlloc: failed to allocate %zu bytes", size);
    free(e);
    return res;
  }
  pthread_mutex_lock(&mem_lock);
  struct mem_entry** pp = mem_slot(e->ptr);
  e->next = *pp;
  *pp = e;
  pthread_mutex_unlock(&mem_lock);
  *ptr = e->ptr;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclMemAlloc)

BRAID_API ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == NULL) return ncclSuccess; /* as ncclMemFree(NULL) in NCCL */
  pthread_mutex_lock(&mem_lock);
  struct mem_entry** pp = mem_slot(ptr);
  struct mem_entry* e = *pp;
  if (e != NULL) *pp = e->next;
  pthread_mutex_unlock(&mem_lock);
  if (e == NULL) {
    BRAID_WARN("ncclMemFree: invalid argument ptr %p: not an address ncclMemAlloc returned (or freed already)", ptr);
    return ncclInvalidArgument;
  }
  free(e);
  braid_device_mem_free(ptr);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclMemFree)
