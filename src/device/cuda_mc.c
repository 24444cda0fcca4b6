/*
 * cuda_mc.c - multicast objects (NVSwitch, NVLink SHARP) through the CUDA driver API, whose
 * entry points are fetched at run time (braid_cuda_driver_sym), so a driver without them is
 * "no multicast", never a load failure. Written from CUDA's documented API; never run (no
 * NVSwitch system in braid's sessions so far: docs/notes/2026-12-01-mcast.md).
 *   - supported: CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED and every entry point below;
 *   - an object: cuMulticastCreate for ndev devices, shared as a POSIX file descriptor
 *     (cuMemExportToShareableHandle); the handle names the creator's pid and descriptor, and
 *     an importer of another process takes a copy with pidfd_getfd (Linux 5.6+, the same user,
 *     ptrace rules permitting: otherwise the import fails and braid stays unicast);
 *   - each member: cuMulticastAddDevice, then its memory (cuMemCreate, mapped here with
 *     cuMemMap / cuMemSetAccess, zeroed) bound with cuMulticastBindMem at offset 0, then the
 *     object mapped (cuMemAddressReserve / cuMemMap / cuMemSetAccess): the multimem address.
 */
#include "device/device.h"

#if defined(BRAID_CUDA_BUILT) && BRAID_CUDA_BUILT

#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/check.h"
#include "device/cuda_mc.h"

#if CUDA_VERSION >= 12010
#define MC_MAGIC 0x63756d63u /* "cumc" */
#define FD_TYPE CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

struct mc_wire {
  uint32_t magic;
  int32_t pid, fd;
};
struct cuda_mc {
  CUmemGenericAllocationHandle mc, mem;
  int have_mc, have_mem, bound, fd;
  CUdevice dev;
  size_t bytes, mapped_bytes;
  CUdeviceptr uc, mcva;
};

#define SYM(ret, name, args) ret(*name) args = braid_cuda_driver_sym(#name)
/* One failed driver call: INFO (the caller falls back and says so) and ncclSystemError. */
#define CU_TRY(call)                                                                            \
  do {                                                                                          \
    CUresult r_ = (call);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                   \
      BRAID_INFO(BRAID_LOG_INIT, "multicast: %s failed: CUDA driver error %d", #call, (int)r_); \
      return ncclSystemError;                                                                   \
    }                                                                                           \
  } while (0)

static CUmulticastObjectProp mc_prop(int ndev, size_t bytes) {
  CUmulticastObjectProp p;
  memset(&p, 0, sizeof(p));
  p.numDevices = (unsigned)ndev;
  p.size = bytes;
  p.handleTypes = FD_TYPE;
  return p;
}

ncclResult_t braid_cuda_mc_supported(int dev, int* yes) {
  static const char* const need[] = {"cuMulticastCreate",
                                     "cuMulticastAddDevice",
                                     "cuMulticastBindMem",
                                     "cuMulticastUnbind",
                                     "cuMulticastGetGranularity",
                                     "cuMemCreate",
                                     "cuMemAddressReserve",
                                     "cuMemMap",
                                     "cuMemSetAccess",
                                     "cuMemUnmap",
                                     "cuMemAddressFree",
                                     "cuMemRelease",
                                     "cuMemExportToShareableHandle",
                                     "cuMemImportFromShareableHandle",
                                     "cuDeviceGet"};
  SYM(CUresult, cuDeviceGetAttribute, (int*, CUdevice_attribute, CUdevice));
  int v = 0;
  *yes = 0;
  if (cuDeviceGetAttribute == NULL) return ncclSuccess;
  for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
    if (braid_cuda_driver_sym(need[i]) == NULL) return ncclSuccess;
  *yes = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, (CUdevice)dev) == CUDA_SUCCESS && v != 0;
  return ncclSuccess;
}

ncclResult_t braid_cuda_mc_granularity(int ndev, size_t bytes, size_t* gran) {
  SYM(CUresult, cuMulticastGetGranularity, (size_t*, const CUmulticastObjectProp*, CUmulticastGranularity_flags));
  CUmulticastObjectProp p = mc_prop(ndev, bytes);
  if (cuMulticastGetGranularity == NULL) return ncclSystemError;
  CU_TRY(cuMulticastGetGranularity(gran, &p, CU_MULTICAST_GRANULARITY_MINIMUM));
  return ncclSuccess;
}

static ncclResult_t new_mc(struct cuda_mc** m_p) {
  struct cuda_mc* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  m->fd = -1;
  *m_p = m;
  return ncclSuccess;
}

ncclResult_t braid_cuda_mc_create(int ndev, size_t bytes, void** mc_p, struct braid_mc_handle* h) {
  SYM(CUresult, cuMulticastCreate, (CUmemGenericAllocationHandle*, const CUmulticastObjectProp*));
  SYM(CUresult, cuMemExportToShareableHandle,
      (void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long));
  CUmulticastObjectProp p = mc_prop(ndev, bytes);
  struct cuda_mc* m = NULL;
  BRAID_CHECK(new_mc(&m));
  *mc_p = m;
  m->bytes = bytes;
  CU_TRY(cuMulticastCreate(&m->mc, &p));
  m->have_mc = 1;
  CU_TRY(cuMemExportToShareableHandle(&m->fd, m->mc, FD_TYPE, 0));
  struct mc_wire w = {MC_MAGIC, (int32_t)getpid(), m->fd};
  memset(h, 0, sizeof(*h));
  memcpy(h->bytes, &w, sizeof(w));
  return ncclSuccess;
}

/* This process's copy of descriptor fd of process pid (close it after the import). */
int braid_cuda_take_fd(int pid, int fd) {
  if (pid == (int)getpid()) return dup(fd);
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (pidfd < 0) return -1;
  int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  close(pidfd);
  return copy;
#else
  return -1;
#endif
}

ncclResult_t braid_cuda_mc_import(const struct braid_mc_handle* h, void** mc_p) {
  SYM(CUresult, cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType));
  struct mc_wire w;
  memcpy(&w, h->bytes, sizeof(w));
  if (w.magic != MC_MAGIC) return ncclInvalidArgument;
  int fd = braid_cuda_take_fd(w.pid, w.fd);
  if (fd < 0) {
    BRAID_INFO(BRAID_LOG_INIT, "multicast: cannot take descriptor %d of process %d (pidfd_getfd: ptrace rules?)", w.fd,
               w.pid);
    return ncclSystemError;
  }
  struct cuda_mc* m = NULL;
  ncclResult_t res = new_mc(&m);
  if (res == ncclSuccess) {
    *mc_p = m;
    CUresult r = cuMemImportFromShareableHandle(&m->mc, (void*)(uintptr_t)fd, FD_TYPE);
    if (r == CUDA_SUCCESS)
      m->have_mc = 1;
    else {
      BRAID_INFO(BRAID_LOG_INIT, "multicast: cuMemImportFromShareableHandle failed: CUDA driver error %d", (int)r);
      res = ncclSystemError;
    }
  }
  close(fd);
  return res;
}

ncclResult_t braid_cuda_mc_add_device(void* mc, int dev) {
  SYM(CUresult, cuDeviceGet, (CUdevice*, int));
  SYM(CUresult, cuMulticastAddDevice, (CUmemGenericAllocationHandle, CUdevice));
  struct cuda_mc* m = mc;
  CU_TRY(cuDeviceGet(&m->dev, dev));
  CU_TRY(cuMulticastAddDevice(m->mc, m->dev));
  return ncclSuccess;
}

static CUmemAccessDesc access_of(CUdevice dev) {
  CUmemAccessDesc a;
  memset(&a, 0, sizeof(a));
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = (int)dev;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return a;
}

ncclResult_t braid_cuda_mc_bind(void* mc, int dev, size_t bytes, void** local) {
  SYM(CUresult, cuMemCreate, (CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long));
  SYM(CUresult, cuMemAddressReserve, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long));
  SYM(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long));
  SYM(CUresult, cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t));
  SYM(CUresult, cuMulticastBindMem,
      (CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle, size_t, size_t, unsigned long long));
  struct cuda_mc* m = mc;
  CUmemAllocationProp p;
  memset(&p, 0, sizeof(p));
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  CUmemAccessDesc a = access_of(m->dev);
  CU_TRY(cuMemCreate(&m->mem, bytes, &p, 0));
  m->have_mem = 1;
  CU_TRY(cuMemAddressReserve(&m->uc, bytes, 0, 0, 0));
  m->mapped_bytes = bytes;
  CU_TRY(cuMemMap(m->uc, bytes, 0, m->mem, 0));
  CU_TRY(cuMemSetAccess(m->uc, bytes, &a, 1));
  void* zeros = calloc(1, bytes);
  if (zeros == NULL) return ncclSystemError;
  ncclResult_t res = braid_device_cuda->setup_copy((void*)m->uc, zeros, bytes);
  free(zeros);
  BRAID_CHECK(res);
  CU_TRY(cuMulticastBindMem(m->mc, 0, m->mem, 0, bytes, 0));
  m->bound = 1;
  *local = (void*)m->uc;
  return ncclSuccess;
}

ncclResult_t braid_cuda_mc_bind_mem(void* mc, int dev, void* ptr, size_t bytes) {
  SYM(CUresult, cuMulticastBindMem,
      (CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle, size_t, size_t, unsigned long long));
  struct cuda_mc* m = mc;
  CUmemGenericAllocationHandle h;
  size_t off = 0;
  (void)dev; /* the allocation's own device, added to the object by mc_add_device */
  if (braid_cuda_vmm_handle(ptr, bytes, &h, &off) != ncclSuccess) {
    BRAID_INFO(BRAID_LOG_INIT, "multicast: %p (%zu bytes) is not in one cuMem allocation of this process", ptr, bytes);
    return ncclSystemError;
  }
  CU_TRY(cuMulticastBindMem(m->mc, 0, h, off, bytes, 0));
  m->bound = 1;
  m->mapped_bytes = bytes; /* what mc_release unbinds; the memory stays its owner's */
  return ncclSuccess;
}

ncclResult_t braid_cuda_mc_map(void* mc, size_t bytes, void** mcptr) {
  SYM(CUresult, cuMemAddressReserve, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long));
  SYM(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long));
  SYM(CUresult, cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t));
  struct cuda_mc* m = mc;
  CUmemAccessDesc a = access_of(m->dev);
  CUdeviceptr va = 0;
  CU_TRY(cuMemAddressReserve(&va, bytes, bytes & (~bytes + 1), 0, 0)); /* aligned as the granularity divides bytes */
  m->mcva = va;
  m->bytes = bytes;
  CU_TRY(cuMemMap(va, bytes, 0, m->mc, 0));
  CU_TRY(cuMemSetAccess(va, bytes, &a, 1));
  *mcptr = (void*)va;
  return ncclSuccess;
}

void braid_cuda_mc_release(void* mc) {
  SYM(CUresult, cuMemUnmap, (CUdeviceptr, size_t));
  SYM(CUresult, cuMemAddressFree, (CUdeviceptr, size_t));
  SYM(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
  SYM(CUresult, cuMulticastUnbind, (CUmemGenericAllocationHandle, CUdevice, size_t, size_t));
  struct cuda_mc* m = mc;
  if (m == NULL) return;
  if (m->mcva) cuMemUnmap(m->mcva, m->bytes), cuMemAddressFree(m->mcva, m->bytes);
  if (m->bound) cuMulticastUnbind(m->mc, m->dev, 0, m->mapped_bytes);
  if (m->uc) cuMemUnmap(m->uc, m->mapped_bytes), cuMemAddressFree(m->uc, m->mapped_bytes);
  if (m->have_mem) cuMemRelease(m->mem);
  if (m->have_mc) cuMemRelease(m->mc);
  if (m->fd >= 0) close(m->fd);
  free(m);
}

#else /* CUDA before 12.1: no multicast API */

ncclResult_t braid_cuda_mc_supported(int dev, int* yes) {
  (void)dev;
  *yes = 0;
  return ncclSuccess;
}
ncclResult_t braid_cuda_mc_granularity(int ndev, size_t bytes, size_t* gran) {
  return ncclSystemError;
}
ncclResult_t braid_cuda_mc_create(int ndev, size_t bytes, void** mc, struct braid_mc_handle* h) {
  return ncclSystemError;
}
ncclResult_t braid_cuda_mc_import(const struct braid_mc_handle* h, void** mc) {
  return ncclSystemError;
}
ncclResult_t braid_cuda_mc_add_device(void* mc, int dev) {
  return ncclSystemError;
}
ncclResult_t braid_cuda_mc_bind(void* mc, int dev, size_t bytes, void** local) {
  return ncclSystemError;
}
ncclResult_t braid_cuda_mc_map(void* mc, size_t bytes, void** mcptr) {
  return ncclSystemError;
}
void braid_cuda_mc_release(void* mc) {
  (void)mc;
}
ncclResult_t braid_cuda_mc_bind_mem(void* mc, int dev, void* ptr, size_t bytes) {
  return ncclSystemError;
}

#endif
#endif /* BRAID_CUDA_BUILT */
