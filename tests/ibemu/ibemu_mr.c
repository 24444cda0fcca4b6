/*
 * ibemu_mr.c - the emulated verbs provider: memory regions (a per-process table the peer reads
 * to check an rkey: key, bounds, access flags) and the QP registry.
 *
 * dma-buf regions (ibv_reg_dmabuf_mr, GPUDirect RDMA): the descriptor is mapped here (the fake
 * GPU hands out its allocation's shared-memory segment), and keys address the region by its
 * iova, as an HCA does: a WR's address is translated to the mapping (emu_mr_slot.host), so
 * what lands is visible through every other mapping of the same pages (the fake GPU's).
 * IBEMU_DMABUF=0: ibv_reg_dmabuf_mr fails with EOPNOTSUPP (a kernel without dma-buf support).
 *
 * Keys: slot index in the low 12 bits, a generation above it (a deregistered key stays
 * invalid); lkey == rkey. The registry: a file mapped shared by every process
 * (IBEMU_REGISTRY, default /tmp/braid-ibemu-registry; never in /dev/shm), holding the next QP
 * number and, per QP number modulo its size, {qpn, pid, address of the emu_qp, address of that
 * process's MR table}: what a peer needs to reach a QP it was told about out of band, and a
 * lock a peer holds while it moves bytes through that QP, so that once ibv_destroy_qp returns
 * nothing more lands through it (as on an HCA). Either side waits for it 1 s at most (a
 * process killed while holding it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ibemu.h"

#undef ibv_reg_mr

struct emu_mr_slot ibemu_mrs[EMU_MR_MAX];
pthread_mutex_t ibemu_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t mr_gen[EMU_MR_MAX];
static size_t map_lens[EMU_MR_MAX]; /* a dma-buf region's mapping (at host - its page offset) */

static struct ibv_mr* mr_new(struct ibv_pd* pd, void* addr, size_t length, int access, void* host, size_t map_len) {
  struct ibv_mr* mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return NULL;
  pthread_mutex_lock(&ibemu_lock);
  int i = 0;
  while (i < EMU_MR_MAX && ibemu_mrs[i].valid) i++;
  if (i == EMU_MR_MAX) {
    pthread_mutex_unlock(&ibemu_lock);
    free(mr);
    errno = ENOMEM;
    return NULL;
  }
  uint32_t key = (uint32_t)i | (++mr_gen[i] << 12);
  ibemu_mrs[i] =
      (struct emu_mr_slot){(uint64_t)(uintptr_t)addr, length, key, access, 1, map_len != 0, (uint64_t)(uintptr_t)host};
  map_lens[i] = map_len;
  pthread_mutex_unlock(&ibemu_lock);
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->handle = (uint32_t)i;
  mr->lkey = mr->rkey = key;
  return mr;
}

struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t length, int access) {
  if (ibemu_fails("reg_mr", pd->context->device->name) || length == 0) {
    errno = EINVAL;
    return NULL;
  }
  return mr_new(pd, addr, length, access, addr, 0);
}

struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  const char* on = getenv("IBEMU_DMABUF");
  if (on != NULL && strcmp(on, "0") == 0) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  if (fd < 0) {
    errno = EBADF;
    return NULL;
  }
  if (ibemu_fails("reg_dmabuf_mr", pd->context->device->name) || length == 0) {
    errno = EINVAL;
    return NULL;
  }
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), skip = offset % page;
  size_t map_len = (size_t)(skip + length);
  char* p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - skip));
  if (p == MAP_FAILED) return NULL; /* errno from mmap */
  struct ibv_mr* mr = mr_new(pd, (void*)(uintptr_t)iova, length, access, p + skip, map_len);
  if (mr == NULL) munmap(p, map_len);
  return mr;
}

int ibv_dereg_mr(struct ibv_mr* mr) {
  pthread_mutex_lock(&ibemu_lock);
  uint32_t i = EMU_MR_IDX(mr->lkey);
  struct emu_mr_slot* s = &ibemu_mrs[i];
  if (s->valid && s->key == mr->lkey) {
    s->valid = 0;
    if (s->dmabuf) {
      uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
      munmap((void*)(uintptr_t)(s->host - s->host % page), map_lens[i]);
    }
  }
  pthread_mutex_unlock(&ibemu_lock);
  free(mr);
  return 0;
}

/* ---- the registry -------------------------------------------------------------------------- */

#define REG_SLOTS (1u << 16)

struct reg_entry {
  uint32_t qpn;
  uint32_t busy; /* a peer is moving bytes through this QP, or it is being destroyed */
  int32_t pid, pad;
  uint64_t qp, mrt;
};
struct registry {
  uint32_t next_qpn;
  uint32_t pad;
  struct reg_entry e[REG_SLOTS];
};

static struct registry* reg;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void reg_map(void) {
  const char* path = getenv("IBEMU_REGISTRY");
  int fd = open(path && path[0] ? path : "/tmp/braid-ibemu-registry", O_RDWR | O_CREAT, 0600);
  if (fd < 0) return;
  if (ftruncate(fd, sizeof(struct registry)) == 0) {
    void* p = mmap(NULL, sizeof(struct registry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) reg = p;
  }
  close(fd);
}

uint32_t ibemu_next_qpn(void) {
  pthread_once(&reg_once, reg_map);
  if (reg == NULL) return 0;
  uint32_t n;
  do n = __atomic_add_fetch(&reg->next_qpn, 1, __ATOMIC_RELAXED) & 0xffffffu; /* 24-bit QP numbers */
  while (n < 0x100);
  return n;
}

int ibemu_registry_add(struct emu_qp* q) {
  if (reg == NULL) return -1;
  struct reg_entry* e = &reg->e[q->qp.qp_num % REG_SLOTS];
  __atomic_store_n(&e->qpn, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE); /* a stale lock of a wrapped-around number */
  e->pid = (int32_t)getpid();
  e->qp = (uint64_t)(uintptr_t)q;
  e->mrt = (uint64_t)(uintptr_t)ibemu_mrs;
  __atomic_store_n(&e->qpn, q->qp.qp_num, __ATOMIC_RELEASE);
  return 0;
}

int ibemu_registry_find(uint32_t qpn, int* pid, uint64_t* qp_addr, uint64_t* mrt_addr) {
  pthread_once(&reg_once, reg_map);
  if (reg == NULL) return -1;
  struct reg_entry* e = &reg->e[qpn % REG_SLOTS];
  if (__atomic_load_n(&e->qpn, __ATOMIC_ACQUIRE) != qpn) return -1;
  *pid = e->pid, *qp_addr = e->qp, *mrt_addr = e->mrt;
  return __atomic_load_n(&e->qpn, __ATOMIC_ACQUIRE) == qpn ? 0 : -1;
}

static int entry_lock(struct reg_entry* e) {
  for (int i = 0; i < 1000000; i++) {
    uint32_t zero = 0;
    if (__atomic_compare_exchange_n(&e->busy, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return 0;
    if (i > 100) usleep(1);
  }
  return -1;
}

int ibemu_peer_lock(uint32_t qpn, int pid, uint64_t qp) {
  if (reg == NULL) return -1;
  struct reg_entry* e = &reg->e[qpn % REG_SLOTS];
  if (entry_lock(e) != 0) return -1;
  if (e->qpn == qpn && e->pid == pid && e->qp == qp) return 0;
  __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE);
  return -1;
}

void ibemu_peer_unlock(uint32_t qpn) {
  __atomic_store_n(&reg->e[qpn % REG_SLOTS].busy, 0, __ATOMIC_RELEASE);
}

void ibemu_registry_del(struct emu_qp* q) {
  if (reg == NULL) return;
  struct reg_entry* e = &reg->e[q->qp.qp_num % REG_SLOTS];
  int locked = entry_lock(e) == 0;
  if (e->qpn == q->qp.qp_num && e->pid == (int32_t)getpid() && e->qp == (uint64_t)(uintptr_t)q)
    __atomic_store_n(&e->qpn, 0, __ATOMIC_RELEASE);
  if (locked) __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE);
}
