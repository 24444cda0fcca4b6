/*
 * cuda_vmm.c - ncclMemAlloc's memory through the CUDA VMM (cuMem) driver API, fetched at run
 * time like the multicast entry points (braid_cuda_driver_sym), as NCCL allocates it:
 *   - cuMemCreate of pinned device memory with a POSIX-fd shareable handle (and
 *     gpuDirectRDMACapable where the device says so), its size rounded up to the recommended
 *     allocation granularity and, where the device has multicast, to the multicast granularity
 *     (so that a window of it can be bound to a multicast object);
 *   - cuMemAddressReserve + cuMemMap, cuMemSetAccess for this device and every device that can
 *     reach it; zeroed (as every braid allocation) on the setup stream;
 *   - export: the allocation's descriptor (cuMemExportToShareableHandle, made once and kept
 *     open while the allocation lives); a peer process takes a copy with pidfd_getfd and
 *     imports it (cuMemImportFromShareableHandle), then maps it the same way. No cudaIpc.
 * Where VMM is missing (an old driver, a device without it) or peers could not take the
 * descriptor (no pidfd_getfd before Linux 5.6; Yama ptrace_scope 1 or more refuses it between
 * sibling processes, as torchrun's ranks are, unless NCCL_CUMEM_ENABLE=1 says to use cuMem
 * anyway) vmm_alloc fails with an INFO and ncclMemAlloc falls back to cudaMalloc, shared by
 * CUDA IPC (core/sym/mem.c; NCCL_CUMEM_ENABLE=0 goes there directly). NCCL passes the
 * descriptors over its proxy's unix socket instead; braid has no such service yet.
 * Written from CUDA's documented API; not yet run on a GPU (docs/notes/2026-12-02-mmwin.md).
 */
#include "device/device.h"

#if defined(BRAID_CUDA_BUILT) && BRAID_CUDA_BUILT

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "device/cuda_mc.h"

#define VMM_MAGIC 0x63766d6du /* "cvmm" */
#define FD_TYPE CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

/* The handle another process imports: the owner's pid and descriptor, the size. */
struct vmm_wire {
  uint32_t magic;
  int32_t pid, fd;
  uint32_t pad;
  uint64_t bytes;
};

struct vmm_mem {
  struct vmm_mem* next;
  CUdeviceptr base;
  size_t bytes;
  CUmemGenericAllocationHandle h; /* own allocations only (an import releases its handle once mapped) */
  int imported;
  int fd; /* the exported descriptor, -1 until the first export */
};

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_mem* vmms;

#define SYM(ret, name, args) ret(*name) args = braid_cuda_driver_sym(#name)
#define CU_TRY_GOTO(call, label)                                                             \
  do {                                                                                       \
    CUresult r_ = (call);                                                                    \
    if (r_ != CUDA_SUCCESS) {                                                                \
      BRAID_INFO(BRAID_LOG_ALLOC, "cuMem: %s failed: CUDA driver error %d", #call, (int)r_); \
      res = ncclUnhandledCudaError;                                                          \
      goto label;                                                                            \
    }                                                                                        \
  } while (0)

static const char* const vmm_syms[] = {"cuDeviceGet",
                                       "cuDeviceGetAttribute",
                                       "cuMemGetAllocationGranularity",
                                       "cuMemCreate",
                                       "cuMemAddressReserve",
                                       "cuMemMap",
                                       "cuMemSetAccess",
                                       "cuMemUnmap",
                                       "cuMemAddressFree",
                                       "cuMemRelease",
                                       "cuMemExportToShareableHandle",
                                       "cuMemImportFromShareableHandle"};

static const char* pidfd_why = "";
static int yama_scope;
static void pidfd_decide(void) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  int copy = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, pidfd, 0) : -1;
  if (copy >= 0) close(copy);
  if (pidfd >= 0) close(pidfd);
  if (copy < 0) {
    pidfd_why = "this kernel has no pidfd_getfd (Linux 5.6+), which peers use to take the allocation's descriptor";
    return;
  }
#else
  pidfd_why = "built without pidfd_getfd, which peers would use to take the allocation's descriptor";
  return;
#endif
  FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  int scope = 0;
  if (f != NULL) {
    if (fscanf(f, "%d", &scope) != 1) scope = 0;
    fclose(f);
  }
  yama_scope = scope;
}
/* "" when another local process of this user can take this process's descriptors with
 * pidfd_getfd (what vmm_import does), else why not. The kernel's answer is found once. */
static const char* pidfd_missing(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, pidfd_decide);
  if (pidfd_why[0] == '\0' && yama_scope >= 1 && braid_param_int(BRAID_PARAM_CUMEM_ENABLE) != 1)
    return "Yama ptrace_scope >= 1 refuses pidfd_getfd between sibling processes (NCCL_CUMEM_ENABLE=1 uses cuMem "
           "anyway: then every rank must be one process, or peers be its ancestors)";
  return pidfd_why;
}

/* "" when device `dev` has VMM with POSIX-fd handles, else why not. */
static const char* vmm_missing(CUdevice dev) {
  SYM(CUresult, cuDeviceGetAttribute, (int*, CUdevice_attribute, CUdevice));
  for (size_t i = 0; i < sizeof(vmm_syms) / sizeof(vmm_syms[0]); i++)
    if (braid_cuda_driver_sym(vmm_syms[i]) == NULL) return "the driver lacks the cuMem entry points";
  int v = 0;
  if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS || !v)
    return "the device has no virtual memory management";
  v = 0;
  if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) != CUDA_SUCCESS ||
      !v)
    return "the device cannot export cuMem memory as file descriptors";
  return pidfd_missing();
}

static CUmemAllocationProp alloc_prop(CUdevice dev) {
  SYM(CUresult, cuDeviceGetAttribute, (int*, CUdevice_attribute, CUdevice));
  CUmemAllocationProp p;
  int rdma = 0;
  memset(&p, 0, sizeof(p));
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = (int)dev;
  p.requestedHandleTypes = FD_TYPE;
  if (cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev) == CUDA_SUCCESS &&
      rdma)
    p.allocFlags.gpuDirectRDMACapable = 1;
  return p;
}

/* The allocation granularity, and the multicast one where the device has multicast. */
static size_t granularity(CUdevice dev, int cuda_dev, const CUmemAllocationProp* p) {
  SYM(CUresult, cuMemGetAllocationGranularity, (size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags));
  size_t g = 0, mg = 0;
  int mc = 0;
  if (cuMemGetAllocationGranularity(&g, p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS || g == 0) return 0;
  if (braid_cuda_mc_supported(cuda_dev, &mc) == ncclSuccess && mc &&
      braid_cuda_mc_granularity(1, g, &mg) == ncclSuccess && mg > g && mg % g == 0)
    g = mg;
  (void)dev;
  return g;
}

/* Map handle h (bytes) at a new address readable and writable by this device and its peers. */
static ncclResult_t map_here(CUmemGenericAllocationHandle h, size_t bytes, size_t align, CUdeviceptr* va_p) {
  SYM(CUresult, cuMemAddressReserve, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long));
  SYM(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long));
  SYM(CUresult, cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t));
  SYM(CUresult, cuMemUnmap, (CUdeviceptr, size_t));
  SYM(CUresult, cuMemAddressFree, (CUdeviceptr, size_t));
  const struct braid_device_ops* d = braid_device_cuda;
  ncclResult_t res = ncclSuccess;
  CUdeviceptr va = 0;
  int cur = 0, n = 0, mapped = 0;
  BRAID_CHECK(d->get_current(&cur));
  BRAID_CHECK(d->count(&n));
  CU_TRY_GOTO(cuMemAddressReserve(&va, bytes, align, 0, 0), fail);
  CU_TRY_GOTO(cuMemMap(va, bytes, 0, h, 0), fail);
  mapped = 1;
  for (int i = 0; i < n; i++) {
    int p2p = i == cur;
    if (!p2p && d->can_access_peer(i, cur, &p2p) != ncclSuccess) p2p = 0;
    if (!p2p) continue;
    CUmemAccessDesc a;
    memset(&a, 0, sizeof(a));
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = i;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_TRY_GOTO(cuMemSetAccess(va, bytes, &a, 1), fail);
  }
  *va_p = va;
  return ncclSuccess;
fail:
  if (mapped) cuMemUnmap(va, bytes);
  if (va) cuMemAddressFree(va, bytes);
  return res;
}

static void list_add(struct vmm_mem* m) {
  pthread_mutex_lock(&vmm_mu);
  m->next = vmms;
  vmms = m;
  pthread_mutex_unlock(&vmm_mu);
}

ncclResult_t braid_cuda_vmm_alloc(size_t bytes, size_t* alloc_bytes, void** ptr) {
  SYM(CUresult, cuDeviceGet, (CUdevice*, int));
  SYM(CUresult, cuMemCreate, (CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long));
  SYM(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
  ncclResult_t res = ncclSuccess;
  int cur = 0;
  CUdevice dev = 0;
  BRAID_CHECK(braid_device_cuda->get_current(&cur));
  if (cuDeviceGet == NULL || cuDeviceGet(&dev, cur) != CUDA_SUCCESS) {
    BRAID_INFO(BRAID_LOG_ALLOC, "cuMem: no driver device for CUDA device %d", cur);
    return ncclSystemError;
  }
  const char* why = vmm_missing(dev);
  if (why[0] != '\0') {
    BRAID_INFO(BRAID_LOG_ALLOC, "cuMem: not used on CUDA device %d: %s", cur, why);
    return ncclSystemError;
  }
  CUmemAllocationProp p = alloc_prop(dev);
  size_t g = granularity(dev, cur, &p);
  if (g == 0) {
    BRAID_INFO(BRAID_LOG_ALLOC, "cuMem: no allocation granularity for CUDA device %d", cur);
    return ncclSystemError;
  }
  struct vmm_mem* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  m->fd = -1;
  m->bytes = (bytes + g - 1) / g * g;
  CU_TRY_GOTO(cuMemCreate(&m->h, m->bytes, &p, 0), err_free);
  BRAID_CHECK_GOTO(map_here(m->h, m->bytes, g, &m->base), res, err_release);
  list_add(m);
  res = braid_cuda_zero((void*)m->base, m->bytes);
  if (res != ncclSuccess) {
    braid_cuda_vmm_free((void*)m->base);
    return res;
  }
  *alloc_bytes = m->bytes;
  *ptr = (void*)m->base;
  return ncclSuccess;
err_release:
  cuMemRelease(m->h);
err_free:
  free(m);
  return res;
}

static struct vmm_mem* take(void* ptr, int imported) {
  pthread_mutex_lock(&vmm_mu);
  struct vmm_mem** pp = &vmms;
  while (*pp != NULL && !((*pp)->base == (CUdeviceptr)ptr && (*pp)->imported == imported)) pp = &(*pp)->next;
  struct vmm_mem* m = *pp;
  if (m != NULL) *pp = m->next;
  pthread_mutex_unlock(&vmm_mu);
  return m;
}

static void unmap(struct vmm_mem* m) {
  SYM(CUresult, cuMemUnmap, (CUdeviceptr, size_t));
  SYM(CUresult, cuMemAddressFree, (CUdeviceptr, size_t));
  SYM(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
  CUresult r = cuMemUnmap(m->base, m->bytes);
  if (r == CUDA_SUCCESS) r = cuMemAddressFree(m->base, m->bytes);
  if (r == CUDA_SUCCESS && !m->imported) r = cuMemRelease(m->h);
  if (r != CUDA_SUCCESS)
    BRAID_WARN("cuMem: releasing %zu bytes at %p failed: CUDA driver error %d", m->bytes, (void*)m->base, (int)r);
  if (m->fd >= 0) close(m->fd);
  free(m);
}

void braid_cuda_vmm_free(void* ptr) {
  struct vmm_mem* m = take(ptr, 0);
  if (m == NULL) {
    BRAID_WARN("cuMem: free of %p, which is not a cuMem allocation of this process", ptr);
    return;
  }
  unmap(m);
}

ncclResult_t braid_cuda_vmm_export(void* base, struct braid_ipc_handle* h) {
  SYM(CUresult, cuMemExportToShareableHandle,
      (void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long));
  struct vmm_wire w = {VMM_MAGIC, (int32_t)getpid(), -1, 0, 0};
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_mu);
  struct vmm_mem* m = vmms;
  while (m != NULL && !(m->base == (CUdeviceptr)base && !m->imported)) m = m->next;
  if (m != NULL && m->fd < 0) {
    int fd = -1;
    r = cuMemExportToShareableHandle(&fd, m->h, FD_TYPE, 0);
    if (r == CUDA_SUCCESS) m->fd = fd;
  }
  if (m != NULL && m->fd >= 0) {
    w.fd = m->fd;
    w.bytes = m->bytes;
  }
  pthread_mutex_unlock(&vmm_mu);
  if (w.fd < 0) {
    BRAID_WARN(
        "cuMem: cannot export %p (%s)", base,
        m == NULL ? "not the start of a cuMem allocation of this process" : "cuMemExportToShareableHandle failed");
    return m == NULL ? ncclInvalidArgument : ncclUnhandledCudaError;
  }
  _Static_assert(sizeof(w) <= BRAID_IPC_HANDLE_BYTES, "cuMem handle fits");
  memset(h, 0, sizeof(*h));
  memcpy(h->bytes, &w, sizeof(w));
  return ncclSuccess;
}

ncclResult_t braid_cuda_vmm_import(const struct braid_ipc_handle* h, void** ptr) {
  SYM(CUresult, cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType));
  SYM(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
  ncclResult_t res = ncclSuccess;
  struct vmm_wire w;
  memcpy(&w, h->bytes, sizeof(w));
  if (w.magic != VMM_MAGIC || w.bytes == 0) {
    BRAID_WARN("cuMem: not a cuMem handle (magic 0x%x)", w.magic);
    return ncclInvalidArgument;
  }
  int fd = braid_cuda_take_fd(w.pid, w.fd);
  if (fd < 0) {
    BRAID_WARN("cuMem: cannot take descriptor %d of process %d (pidfd_getfd: Linux 5.6+ and ptrace permission over it)",
               w.fd, w.pid);
    return ncclSystemError;
  }
  struct vmm_mem* m = calloc(1, sizeof(*m));
  if (m == NULL) {
    close(fd);
    return ncclSystemError;
  }
  m->fd = -1;
  m->imported = 1;
  m->bytes = w.bytes;
  CU_TRY_GOTO(cuMemImportFromShareableHandle(&m->h, (void*)(uintptr_t)fd, FD_TYPE), err);
  res = map_here(m->h, m->bytes, 0, &m->base);
  cuMemRelease(m->h); /* the mapping holds the memory */
  if (res != ncclSuccess) goto err;
  close(fd);
  list_add(m);
  *ptr = (void*)m->base;
  return ncclSuccess;
err:
  BRAID_WARN("cuMem: cannot map a peer's allocation of %llu bytes (process %d)", (unsigned long long)w.bytes, w.pid);
  close(fd);
  free(m);
  return res;
}

void braid_cuda_vmm_close(void* ptr) {
  struct vmm_mem* m = take(ptr, 1);
  if (m == NULL) {
    BRAID_WARN("cuMem: close of %p, which was not imported", ptr);
    return;
  }
  unmap(m);
}

ncclResult_t braid_cuda_vmm_handle(const void* ptr, size_t bytes, unsigned long long* handle, size_t* offset) {
  ncclResult_t res = ncclInvalidArgument;
  CUdeviceptr p = (CUdeviceptr)ptr;
  pthread_mutex_lock(&vmm_mu);
  for (struct vmm_mem* m = vmms; m != NULL; m = m->next)
    if (!m->imported && p >= m->base && p + bytes <= m->base + m->bytes) {
      *handle = m->h;
      *offset = (size_t)(p - m->base);
      res = ncclSuccess;
      break;
    }
  pthread_mutex_unlock(&vmm_mu);
  return res;
}

#endif /* BRAID_CUDA_BUILT */
