/*
 * fake_mc.c - multicast objects on the fake GPU (device.h's mc_* operations), off unless
 * BRAID_FAKE_GPU_MULTICAST says "1". An object is a shared-memory segment holding its size,
 * device count, how many members joined and bound, and each bound member's memory as a fake IPC
 * handle (a fake device allocation: a segment of its own). mc_map returns a struct
 * braid_mc_emul listing every member's memory as this process maps it: kernels/multimem.h's
 * host path reads it (ld_reduce: read every member's copy and reduce; st: write each). The
 * handle is the segment's name, so other processes import it as they would a CUDA one.
 * Faults for tests, comma words after the 1: bindfail:D, joinfail:D, mapfail:D (that call fails
 * on fake device D), gran:N (granularity N bytes; 0: the query fails).
 */
#include "device/fake_mc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "device/device.h"
#include "kernels/work.h"

#define FAKE_MC_MAGIC 0x666d6330u /* "fmc0" */
#define FAKE_MC_GRAN (2u << 20)   /* CUDA's minimum multicast granularity on Hopper */

struct fake_mc_shared {
  uint32_t magic;
  int ndev;
  uint64_t bytes;
  int nadded, nbound; /* atomics */
  int bound[BRAID_LSA_MAX_RANKS];
  struct braid_ipc_handle mem[BRAID_LSA_MAX_RANKS];
};

struct fake_mc {
  char name[48];
  struct fake_mc_shared* sh;
  int creator, slot, dev;
  void* local;
  int user_mem;              /* local is a VMM allocation bound by mc_bind_mem: its owner frees it */
  struct braid_mc_emul emul; /* what mc_map returns */
  int mapped;
};

static const char* setting(void) {
  return braid_param_str(BRAID_PARAM_FAKE_GPU_MULTICAST);
}

/* The value of word `key:` of the setting (-1: absent). */
static long long fault_value(const char* key) {
  const char* s = setting();
  size_t k = strlen(key);
  for (const char* p = s; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, key, k) == 0 && p[k] == ':') return strtoll(p + k + 1, NULL, 0);
  return -1;
}
static int faulty(const char* key, int dev) {
  return fault_value(key) == dev;
}

ncclResult_t braid_fake_mc_supported(int dev, int* yes) {
  const char* s = setting();
  (void)dev;
  *yes = s != NULL && s[0] == '1' && (s[1] == '\0' || s[1] == ',');
  return ncclSuccess;
}

ncclResult_t braid_fake_mc_granularity(int ndev, size_t bytes, size_t* gran) {
  long long g = fault_value("gran");
  (void)bytes;
  if (g == 0 || ndev < 1) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: cuMulticastGetGranularity(%d devices) failed", ndev);
    return ncclSystemError;
  }
  *gran = g > 0 ? (size_t)g : FAKE_MC_GRAN;
  return ncclSuccess;
}

static ncclResult_t map_shared(struct fake_mc* m, int create) {
  int fd = shm_open(m->name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0 || (create && ftruncate(fd, sizeof(struct fake_mc_shared)) != 0)) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: multicast object %s: cannot %s it", m->name, create ? "create" : "open");
    if (fd >= 0) close(fd);
    if (fd >= 0 && create) shm_unlink(m->name);
    return ncclSystemError;
  }
  void* p = mmap(NULL, sizeof(struct fake_mc_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(m->name);
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: multicast object %s: mmap failed", m->name);
    return ncclSystemError;
  }
  m->sh = p;
  return ncclSuccess;
}

static ncclResult_t new_mc(const char* name, int create, void** mc_p) {
  struct fake_mc* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  snprintf(m->name, sizeof(m->name), "%s", name);
  m->creator = create;
  m->slot = m->dev = -1;
  ncclResult_t res = map_shared(m, create);
  if (res != ncclSuccess) {
    free(m);
    return res;
  }
  *mc_p = m;
  return ncclSuccess;
}

ncclResult_t braid_fake_mc_create(int ndev, size_t bytes, void** mc_p, struct braid_mc_handle* h) {
  static int seq;
  size_t gran = 0;
  BRAID_CHECK(braid_fake_mc_granularity(ndev, bytes, &gran));
  if (ndev < 1 || ndev > BRAID_LSA_MAX_RANKS || bytes == 0 || bytes % gran != 0) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: cuMulticastCreate(%d devices, %zu bytes): invalid (granularity %zu)", ndev,
               bytes, gran);
    return ncclInvalidArgument;
  }
  char name[48];
  snprintf(name, sizeof(name), "/braid-fakemc-%d-%d", (int)getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
  BRAID_CHECK(new_mc(name, 1, mc_p));
  struct fake_mc* m = *mc_p;
  m->sh->ndev = ndev;
  m->sh->bytes = bytes;
  __atomic_store_n(&m->sh->magic, FAKE_MC_MAGIC, __ATOMIC_RELEASE);
  memset(h, 0, sizeof(*h));
  memcpy(h->bytes, name, strlen(name) + 1);
  return ncclSuccess;
}

ncclResult_t braid_fake_mc_import(const struct braid_mc_handle* h, void** mc_p) {
  char name[48];
  memcpy(name, h->bytes, sizeof(name));
  name[sizeof(name) - 1] = '\0';
  if (strncmp(name, "/braid-fakemc-", 14) != 0) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: not a multicast handle");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(new_mc(name, 0, mc_p));
  struct fake_mc* m = *mc_p;
  if (__atomic_load_n(&m->sh->magic, __ATOMIC_ACQUIRE) != FAKE_MC_MAGIC) {
    braid_fake_mc_release(m);
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: multicast object %s is not set up", name);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t braid_fake_mc_add_device(void* mc, int dev) {
  struct fake_mc* m = mc;
  if (faulty("joinfail", dev)) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: cuMulticastAddDevice(device %d) failed (BRAID_FAKE_GPU_MULTICAST)", dev);
    return ncclSystemError;
  }
  int slot = __atomic_fetch_add(&m->sh->nadded, 1, __ATOMIC_ACQ_REL);
  if (slot >= m->sh->ndev) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: cuMulticastAddDevice(device %d): the object has its %d devices", dev,
               m->sh->ndev);
    return ncclInvalidArgument;
  }
  m->slot = slot;
  m->dev = dev;
  return ncclSuccess;
}

size_t braid_fake_vmm_granularity(void) {
  int yes = 0;
  long page = sysconf(_SC_PAGESIZE);
  long long g = fault_value("gran");
  braid_fake_mc_supported(0, &yes);
  if (yes && g != 0) return g > 0 ? (size_t)g : FAKE_MC_GRAN;
  return page > 0 ? (size_t)page : 4096;
}

/* The checks of cuMulticastBindMem common to both binds; 0 (INFO said why) when it fails. */
static int bind_ok(const struct fake_mc* m, int dev, size_t bytes, const char* what) {
  size_t gran = 0;
  if (braid_fake_mc_granularity(m->sh->ndev, bytes, &gran) != ncclSuccess) return 0;
  if (m->slot < 0 || dev != m->dev || bytes > m->sh->bytes || bytes % gran != 0 ||
      __atomic_load_n(&m->sh->nadded, __ATOMIC_ACQUIRE) < m->sh->ndev || faulty("bindfail", dev)) {
    BRAID_INFO(BRAID_LOG_INIT,
               "fake GPU: cuMulticastBindMem(device %d, %zu bytes of %s) failed (object of %llu bytes, %d/%d "
               "devices added, granularity %zu)",
               dev, bytes, what, (unsigned long long)m->sh->bytes, m->sh->nadded, m->sh->ndev, gran);
    return 0;
  }
  return 1;
}

static ncclResult_t publish(struct fake_mc* m, void* mem) {
  ncclResult_t res = braid_device_fake->ipc_export(mem, &m->sh->mem[m->slot]);
  if (res != ncclSuccess) return res;
  m->local = mem;
  __atomic_store_n(&m->sh->bound[m->slot], 1, __ATOMIC_RELEASE);
  __atomic_fetch_add(&m->sh->nbound, 1, __ATOMIC_ACQ_REL);
  return ncclSuccess;
}

/* A window's memory: only a VMM allocation (ncclMemAlloc), at an offset of whole granules, as
 * cuMulticastBindMem takes only cuMemCreate handles (cudaMalloc memory has none). */
ncclResult_t braid_fake_mc_bind_mem(void* mc, int dev, void* ptr, size_t bytes) {
  struct fake_mc* m = mc;
  size_t off = 0, gran = 0;
  if (!bind_ok(m, dev, bytes, "a VMM allocation")) return ncclSystemError;
  BRAID_CHECK(braid_fake_mc_granularity(m->sh->ndev, bytes, &gran));
  if (!braid_fake_vmm_find(ptr, bytes, &off) || off % gran != 0) {
    BRAID_INFO(BRAID_LOG_INIT,
               "fake GPU: cuMulticastBindMem(%p, %zu bytes): not whole granules (%zu) of a VMM allocation of this "
               "process",
               ptr, bytes, gran);
    return ncclSystemError;
  }
  BRAID_CHECK(publish(m, ptr));
  m->user_mem = 1;
  return ncclSuccess;
}

ncclResult_t braid_fake_mc_bind(void* mc, int dev, size_t bytes, void** local) {
  struct fake_mc* m = mc;
  void* mem = NULL;
  if (!bind_ok(m, dev, bytes, "new memory")) return ncclSystemError;
  BRAID_CHECK(braid_device_fake->alloc(&mem, bytes));
  ncclResult_t res = publish(m, mem);
  if (res != ncclSuccess) {
    braid_device_fake->free(mem);
    return res;
  }
  *local = mem;
  return ncclSuccess;
}

ncclResult_t braid_fake_mc_map(void* mc, size_t bytes, void** mcptr) {
  struct fake_mc* m = mc;
  const struct braid_device_ops* d = braid_device_fake;
  int n = m->sh->ndev;
  if (m->local == NULL || bytes > m->sh->bytes || __atomic_load_n(&m->sh->nbound, __ATOMIC_ACQUIRE) < n ||
      faulty("mapfail", m->dev)) {
    BRAID_INFO(BRAID_LOG_INIT, "fake GPU: cuMemMap of multicast object %s (device %d) failed (%d/%d bound)", m->name,
               m->dev, m->sh->nbound, n);
    return ncclSystemError;
  }
  m->emul.magic = BRAID_MC_EMUL_MAGIC;
  for (int i = 0; i < n; i++) {
    if (i == m->slot) {
      m->emul.member[i] = m->local;
    } else {
      void* p = NULL;
      ncclResult_t res = d->ipc_import(&m->sh->mem[i], &p);
      if (res != ncclSuccess) return res; /* mc_release closes what was imported */
      m->emul.member[i] = p;
    }
    m->emul.n = i + 1;
  }
  m->mapped = 1;
  *mcptr = &m->emul;
  return ncclSuccess;
}

void braid_fake_mc_release(void* mc) {
  struct fake_mc* m = mc;
  const struct braid_device_ops* d = braid_device_fake;
  if (m == NULL) return;
  for (int i = 0; i < m->emul.n; i++)
    if (i != m->slot && m->emul.member[i] != NULL) d->ipc_close(m->emul.member[i]);
  if (m->local != NULL && !m->user_mem) d->free(m->local);
  munmap(m->sh, sizeof(*m->sh));
  if (m->creator) shm_unlink(m->name);
  free(m);
}
