/*
 * mem.c - ncclMemAlloc / ncclMemFree: memory that peers can map, so that a window registered
 * on it is a plain pointer for every rank of the node.
 *
 * Host mode: each allocation is an anonymous shared-memory file (memfd, whole pages, zeroed)
 * whose descriptor stays open while it lives; another process of the node maps it through
 * /proc/<pid>/fd/<fd> (so it must see this process there: the same user and pid namespace;
 * otherwise window registration fails with a WARN saying so). It has no name, so nothing is left in /dev/shm when a
 * process exits or is killed without ncclMemFree: the memory goes with its last mapping. Device mode (a CUDA device or
 * the fake GPU): the device layer's cuMem (VMM) allocation, rounded to its granularity (the multicast one where the
 * device has multicast, so windows of it can be bound to a multicast object: win_mc.c), which peers map through its
 * exported descriptor; where cuMem is missing or NCCL_CUMEM_ENABLE=0, cudaMalloc (said at INFO), shared by CUDA IPC.
 * A process-wide registry remembers which segment holds which addresses (windows may start inside an allocation).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/api.h"
#include "base/check.h"
#include "base/param.h"
#include "core/sym/sym.h"

struct mem_entry {
  struct mem_entry* next;
  char* ptr;
  size_t bytes;
  int on_device;
  int vmm; /* device mode: the device layer's vmm_alloc (else its alloc: cudaMalloc) */
  int fd;  /* host mode: the memfd */
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_entry* mem_list;
static uint64_t mem_live;

static ncclResult_t shm_segment(size_t bytes, struct mem_entry* e) {
  int fd = memfd_create("braid-mem", MFD_CLOEXEC);
  if (fd < 0) {
    BRAID_WARN("ncclMemAlloc: memfd_create failed: %s", strerror(errno));
    return ncclSystemError;
  }
  int err = posix_fallocate(fd, 0, (off_t)bytes);
  if (err != 0) {
    BRAID_WARN("ncclMemAlloc: cannot reserve %zu bytes of shared memory: %s", bytes, strerror(err));
    close(fd);
    return ncclSystemError;
  }
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    BRAID_WARN("ncclMemAlloc: mmap of %zu bytes failed: %s", bytes, strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  e->ptr = p;
  e->fd = fd;
  return ncclSuccess;
}

/* Device memory: cuMem where the device layer has it and NCCL_CUMEM_ENABLE is not 0. */
static ncclResult_t device_segment(const struct braid_device_ops* dev, size_t size, struct mem_entry* e) {
  int64_t cumem = braid_param_int(BRAID_PARAM_CUMEM_ENABLE);
  size_t got = 0;
  e->on_device = 1;
  if (cumem != 0 && dev->vmm_alloc != NULL && dev->vmm_alloc(e->bytes, &got, (void**)&e->ptr) == ncclSuccess) {
    e->vmm = 1;
    e->bytes = got;
    return ncclSuccess;
  }
  BRAID_INFO(BRAID_LOG_ALLOC,
             "ncclMemAlloc: %zu bytes through cudaMalloc, not cuMem (%s): windows of it are shared by CUDA IPC and "
             "have no multicast mapping",
             size, cumem == 0 ? "NCCL_CUMEM_ENABLE=0" : "cuMem unavailable, as said above");
  ncclResult_t res = dev->alloc((void**)&e->ptr, e->bytes);
  if (res != ncclSuccess) BRAID_WARN("ncclMemAlloc: failed to allocate %zu bytes of device memory", size);
  return res;
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
  const struct braid_device_ops* dev = braid_device();
  struct mem_entry* e = calloc(1, sizeof(*e));
  if (e == NULL) {
    BRAID_WARN("ncclMemAlloc: out of memory");
    return ncclSystemError;
  }
  /* Whole pages (NCCL_WIN_REQUIRED_ALIGNMENT), as NCCL rounds to its granularity. */
  e->bytes = (size + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT * NCCL_WIN_REQUIRED_ALIGNMENT;
  ncclResult_t res;
  if (dev != NULL) {
    res = device_segment(dev, size, e);
  } else {
    res = shm_segment(e->bytes, e);
  }
  if (res != ncclSuccess) {
    free(e);
    return res;
  }
  pthread_mutex_lock(&mem_lock);
  e->next = mem_list;
  mem_list = e;
  mem_live += e->bytes;
  pthread_mutex_unlock(&mem_lock);
  BRAID_INFO(BRAID_LOG_ALLOC, "ncclMemAlloc: %zu bytes at %p (%s)", e->bytes, (void*)e->ptr,
             e->vmm         ? "device, cuMem"
             : e->on_device ? "device"
                            : "host, shared");
  *ptr = e->ptr;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclMemAlloc)

BRAID_API ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == NULL) return ncclSuccess; /* as NCCL */
  struct mem_entry* e = NULL;
  pthread_mutex_lock(&mem_lock);
  for (struct mem_entry** p = &mem_list; *p != NULL; p = &(*p)->next) {
    if ((*p)->ptr == ptr) {
      e = *p;
      *p = e->next;
      mem_live -= e->bytes;
      break;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  if (e == NULL) {
    BRAID_WARN("ncclMemFree: %p was not returned by ncclMemAlloc (or was freed already)", ptr);
    return ncclInvalidArgument;
  }
  if (e->on_device) {
    const struct braid_device_ops* dev = braid_device();
    if (dev != NULL && e->vmm)
      dev->vmm_free(e->ptr);
    else if (dev != NULL)
      dev->free(e->ptr);
  } else {
    munmap(e->ptr, e->bytes);
    close(e->fd);
  }
  free(e);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclMemFree)

uint64_t braid_mem_live_bytes(void) {
  pthread_mutex_lock(&mem_lock);
  uint64_t v = mem_live;
  pthread_mutex_unlock(&mem_lock);
  return v;
}

ncclResult_t braid_mem_share(const void* ptr, size_t size, int on_device, struct braid_share* out) {
  memset(out, 0, sizeof(*out));
  const char* p = ptr;
  const char* base = p; /* device memory: the allocation an IPC handle opens at its start */
  pthread_mutex_lock(&mem_lock);
  for (struct mem_entry* e = mem_list; e != NULL; e = e->next) {
    if (p < e->ptr || p + size > e->ptr + e->bytes) continue;
    out->offset = (size_t)(p - e->ptr);
    if (e->vmm) {
      /* the whole allocation, by its exported descriptor (below, outside the lock) */
      out->kind = BRAID_SHARE_VMM;
      out->seg_bytes = e->bytes;
      base = e->ptr;
    } else if (e->on_device) {
      base = e->ptr;
    } else {
      out->kind = BRAID_SHARE_SHM;
      out->seg_bytes = e->bytes;
      snprintf(out->name, sizeof(out->name), "/proc/%d/fd/%d", (int)getpid(), e->fd);
    }
    break;
  }
  pthread_mutex_unlock(&mem_lock);
  if (out->kind == BRAID_SHARE_VMM) {
    const struct braid_device_ops* dev = braid_device();
    if (dev == NULL || dev->vmm_export((void*)base, &out->ipc) != ncclSuccess) out->kind = BRAID_SHARE_NONE;
    return ncclSuccess;
  }
  if (out->kind != BRAID_SHARE_NONE || !on_device) return ncclSuccess;
  /* Device memory: the device layer's IPC handle of its allocation (ncclMemAlloc's, or the
   * user's cudaMalloc, which must then start at the window: CUDA IPC maps whole allocations). */
  const struct braid_device_ops* dev = braid_device();
  if (dev != NULL && dev->ipc_export((void*)base, &out->ipc) == ncclSuccess) out->kind = BRAID_SHARE_DEVICE;
  if (base == p) out->offset = 0;
  return ncclSuccess;
}

ncclResult_t braid_mem_map(const struct braid_share* s, size_t size, void** ptr_p, void** cookie_p) {
  if (s->kind == BRAID_SHARE_SHM) {
    int fd = open(s->name, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      BRAID_WARN(
          "Window: cannot open a peer's memory %s: %s (freed with ncclMemFree while registered, or the peer "
          "runs as another user or in another pid namespace?)",
          s->name, strerror(errno));
      return ncclSystemError;
    }
    void* base = mmap(NULL, s->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
      BRAID_WARN("Window: mmap of a peer's memory %s (%zu bytes) failed: %s", s->name, s->seg_bytes, strerror(errno));
      return ncclSystemError;
    }
    *cookie_p = base;
    *ptr_p = (char*)base + s->offset;
    return ncclSuccess;
  }
  if (s->kind == BRAID_SHARE_DEVICE || s->kind == BRAID_SHARE_VMM) {
    const struct braid_device_ops* dev = braid_device();
    void* d = NULL;
    if (dev == NULL) {
      BRAID_WARN("Window: a peer's window is device memory but this rank has no device");
      return ncclInvalidUsage;
    }
    if (s->kind == BRAID_SHARE_VMM)
      BRAID_CHECK(dev->vmm_import(&s->ipc, &d));
    else
      BRAID_CHECK(dev->ipc_import(&s->ipc, &d));
    *cookie_p = d;
    *ptr_p = (char*)d + s->offset;
    return ncclSuccess;
  }
  BRAID_WARN("Window: internal error, mapping memory that cannot be shared");
  return ncclInternalError;
}

void braid_mem_unmap(const struct braid_share* s, void* cookie, size_t size) {
  if (cookie == NULL) return;
  if (s->kind == BRAID_SHARE_SHM) {
    munmap(cookie, s->seg_bytes);
  } else if (s->kind == BRAID_SHARE_DEVICE || s->kind == BRAID_SHARE_VMM) {
    const struct braid_device_ops* dev = braid_device();
    if (dev != NULL && s->kind == BRAID_SHARE_VMM)
      dev->vmm_close(cookie);
    else if (dev != NULL)
      dev->ipc_close(cookie);
  }
}
