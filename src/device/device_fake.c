/*
 * device_fake.c - the fake GPU (device.h), for tests on machines without one. BRAID_FAKE_GPU=N
 * selects it (device.c) and poses N devices:
 *   - device memory is host memory, one named shared-memory segment per allocation, so an IPC
 *     handle is the segment's name and another process maps the same bytes;
 *   - pinned and registered host memory map to themselves;
 *   - a dma-buf of device memory (GPUDirect RDMA) is a descriptor of its segment;
 *   - a stream is a worker thread that runs what was queued on it in order: a kernel launch
 *     runs its blocks as concurrent host jobs (the host executor, src/kernels/host.c) over
 *     exactly the argument block a CUDA launch gets; copies; event records and waits;
 *   - events complete when the stream reaches them, as CUDA's do;
 *   - multicast objects (fake_mc.c) when BRAID_FAKE_GPU_MULTICAST asks for them.
 * Stream handles are any pointer value: each distinct value (NULL per device) gets its own
 * worker the first time it is used, so a test names streams (cudaStream_t)1, (cudaStream_t)2.
 * Those are non-blocking unless a test makes one blocking (braid_device_fake_blocking): then,
 * as in CUDA, work on it waits for the NULL (legacy) stream of its device and work on the
 * legacy stream waits for it. memcpy_sync copies at once unless a test asks for cudaMemcpy's
 * legacy-stream behaviour (braid_device_fake_legacy_copies); setup_copy always copies at once,
 * which is what its contract promises.
 * Graph capture is not simulated: stream_capturing says no unless a test set the stream's
 * flag (braid_device_fake_capture); the work still runs at once. What is simulated is the rule
 * of a capture in global mode: an event query, synchronous copy or stream sync made meanwhile
 * from a thread that is not in relaxed capture mode (capture_mode) invalidates it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "device/device.h"
#include "device/fake_mc.h"
#include "kernels/executor.h"
#include "kernels/kernel.cuh"
#include "topo/topo.h"

#define FAKE_IPC_MAGIC 0x66616b65u /* "fake" */

/* ---- devices ---------------------------------------------------------------------------- */

static __thread int cur_dev;

static int ndevices(void) {
  int64_t n = braid_param_int(BRAID_PARAM_FAKE_GPU);
  return n > 0 && n <= 64 ? (int)n : (n > 64 ? 64 : 0);
}

static ncclResult_t check_dev(int dev, const char* fn) {
  if (dev < 0 || dev >= ndevices()) {
    BRAID_WARN("fake GPU: %s: invalid device %d (BRAID_FAKE_GPU=%d)", fn, dev, ndevices());
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t fake_count(int* n) {
  *n = ndevices();
  return ncclSuccess;
}
static ncclResult_t fake_get_current(int* dev) {
  *dev = cur_dev;
  return ncclSuccess;
}
static ncclResult_t fake_set_current(int dev) {
  BRAID_CHECK(check_dev(dev, "set_current"));
  cur_dev = dev;
  return ncclSuccess;
}
static ncclResult_t fake_bus_id(int dev, int64_t* bus_id, char* str, size_t len) {
  BRAID_CHECK(check_dev(dev, "bus_id"));
  /* PCI bus 0x1b + dev, as if each fake device sat on its own bus: "0000:1b:00.0". */
  char buf[16];
  snprintf(buf, sizeof(buf), "0000:%02x:00.0", 0x1b + dev);
  BRAID_CHECK(braid_topo_busid_parse(buf, bus_id));
  if (str != NULL && len > 0) snprintf(str, len, "%s", buf);
  return ncclSuccess;
}
static ncclResult_t fake_compute_capability(int dev, int* sm) {
  BRAID_CHECK(check_dev(dev, "compute_capability"));
  *sm = 90;
  return ncclSuccess;
}
static ncclResult_t fake_can_access_peer(int dev, int peer_dev, int* yes) {
  BRAID_CHECK(check_dev(dev, "can_access_peer"));
  BRAID_CHECK(check_dev(peer_dev, "can_access_peer"));
  *yes = 1;
  return ncclSuccess;
}

/* ---- memory ----------------------------------------------------------------------------- */

/* Allocations of this process (device memory and imports), to free, export, classify. */
struct fake_mem {
  struct fake_mem* next;
  char* base;
  size_t bytes;
  int dev;
  int imported;
  int vmm; /* made by vmm_alloc (ncclMemAlloc): exportable as a whole, bindable to multicast */
  char name[BRAID_IPC_HANDLE_BYTES - 24];
};
static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_mem* mems;
static uint64_t mem_seq;

static struct fake_mem* mem_find(const void* p) { /* under mem_mu */
  for (struct fake_mem* m = mems; m != NULL; m = m->next)
    if ((const char*)p >= m->base && (const char*)p < m->base + m->bytes) return m;
  return NULL;
}

static ncclResult_t map_segment(const char* name, size_t bytes, int create, char** base_p) {
  ncclResult_t res = ncclSuccess;
  int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0 && create && errno == EEXIST) {
    /* Our names carry our pid and a sequence only this process advances: one that exists was
     * left by a dead process that had our pid (pids wrap), never by a live one. */
    BRAID_INFO(BRAID_LOG_ALLOC, "fake GPU: removing stale %s (a dead process with pid %d left it)", name,
               (int)getpid());
    shm_unlink(name);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd < 0) {
    BRAID_WARN("fake GPU: shm_open %s failed: %s", name, strerror(errno));
    return ncclSystemError;
  }
  if (create && ftruncate(fd, (off_t)bytes) != 0) {
    BRAID_WARN("fake GPU: ftruncate %s to %zu bytes failed: %s", name, bytes, strerror(errno));
    res = ncclSystemError;
    goto out;
  }
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    BRAID_WARN("fake GPU: mmap %s (%zu bytes) failed: %s", name, bytes, strerror(errno));
    res = ncclSystemError;
    goto out;
  }
  *base_p = p;
out:
  close(fd);
  if (res != ncclSuccess && create) shm_unlink(name);
  return res;
}

static ncclResult_t fake_alloc(void** ptr, size_t bytes) {
  ncclResult_t res = ncclSuccess;
  struct fake_mem* m = NULL;
  BRAID_CALLOC_GOTO(m, 1, res, err);
  m->bytes = bytes ? bytes : 1;
  m->dev = cur_dev;
  pthread_mutex_lock(&mem_mu);
  uint64_t seq = ++mem_seq;
  pthread_mutex_unlock(&mem_mu);
  snprintf(m->name, sizeof(m->name), "/braid-fakegpu-%d-%llu", (int)getpid(), (unsigned long long)seq);
  BRAID_CHECK_GOTO(map_segment(m->name, m->bytes, 1, &m->base), res, err_free); /* zeroed by ftruncate */
  pthread_mutex_lock(&mem_mu);
  m->next = mems;
  mems = m;
  pthread_mutex_unlock(&mem_mu);
  *ptr = m->base;
  return ncclSuccess;
err_free:
  free(m);
err:
  return res;
}

static struct fake_mem* mem_take(void* ptr) {
  pthread_mutex_lock(&mem_mu);
  struct fake_mem** pp = &mems;
  while (*pp != NULL && (*pp)->base != (char*)ptr) pp = &(*pp)->next;
  struct fake_mem* m = *pp;
  if (m != NULL) *pp = m->next;
  pthread_mutex_unlock(&mem_mu);
  return m;
}

static void fake_free(void* ptr) {
  if (ptr == NULL) return;
  struct fake_mem* m = mem_take(ptr);
  if (m == NULL || m->imported) {
    BRAID_WARN("fake GPU: free of %p, which is not a device allocation of this process", ptr);
    return;
  }
  munmap(m->base, m->bytes);
  shm_unlink(m->name);
  free(m);
}

static ncclResult_t fake_host_alloc(void** host, void** dev, size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  void* p = NULL;
  if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytes ? bytes : 1) != 0) {
    BRAID_WARN("fake GPU: failed to allocate %zu bytes of pinned memory", bytes);
    return ncclSystemError;
  }
  memset(p, 0, bytes);
  *host = p;
  *dev = p;
  return ncclSuccess;
}
static void fake_host_free(void* host) {
  free(host);
}
static ncclResult_t fake_host_register(void* host, size_t bytes, void** dev) {
  *dev = host;
  return ncclSuccess;
}
static void fake_host_unregister(void* host) {}
static ncclResult_t fake_pointer_kind(const void* p, int* kind, int* dev) {
  pthread_mutex_lock(&mem_mu);
  struct fake_mem* m = mem_find(p);
  *kind = m != NULL ? BRAID_MEM_DEVICE : BRAID_MEM_HOST;
  *dev = m != NULL ? m->dev : -1;
  pthread_mutex_unlock(&mem_mu);
  return ncclSuccess;
}

/* GPUDirect RDMA: the segment stands for the dma-buf (the emulated verbs provider maps it). */
/* VMM allocations (ncclMemAlloc): a fake allocation rounded up to the granularity CUDA would
 * use (fake_mc.c: a page, or the multicast granularity when fake multicast is on), marked so
 * that only such memory exports as a whole and binds to a multicast object. */
static ncclResult_t fake_vmm_alloc(size_t bytes, size_t* alloc_bytes, void** ptr) {
  size_t gran = braid_fake_vmm_granularity();
  size_t n = (bytes + gran - 1) / gran * gran;
  BRAID_CHECK(fake_alloc(ptr, n));
  pthread_mutex_lock(&mem_mu);
  mem_find(*ptr)->vmm = 1;
  pthread_mutex_unlock(&mem_mu);
  *alloc_bytes = n;
  return ncclSuccess;
}
static void fake_vmm_free(void* ptr) {
  fake_free(ptr);
}
static ncclResult_t fake_ipc_export(void* dptr, struct braid_ipc_handle* h);
static ncclResult_t fake_vmm_export(void* base, struct braid_ipc_handle* h) {
  pthread_mutex_lock(&mem_mu);
  struct fake_mem* m = mem_find(base);
  int ok = m != NULL && m->vmm && m->base == (char*)base;
  pthread_mutex_unlock(&mem_mu);
  if (!ok) {
    BRAID_WARN("fake GPU: vmm_export of %p, which is not the start of a VMM allocation of this process", base);
    return ncclInvalidArgument;
  }
  return fake_ipc_export(base, h);
}

int braid_fake_vmm_find(const void* ptr, size_t bytes, size_t* offset) {
  pthread_mutex_lock(&mem_mu);
  struct fake_mem* m = mem_find(ptr);
  int ok = m != NULL && m->vmm && !m->imported && (const char*)ptr + bytes <= m->base + m->bytes;
  if (ok) *offset = (size_t)((const char*)ptr - m->base);
  pthread_mutex_unlock(&mem_mu);
  return ok;
}

static ncclResult_t fake_dmabuf_supported(int dev, int* yes) {
  BRAID_CHECK(check_dev(dev, "dmabuf_supported"));
  *yes = 1;
  return ncclSuccess;
}
static ncclResult_t fake_dmabuf_get(void* ptr, size_t bytes, int* fd_p, uint64_t* offset_p) {
  char name[sizeof(((struct fake_mem*)0)->name)] = "";
  uint64_t off = 0;
  pthread_mutex_lock(&mem_mu);
  struct fake_mem* m = mem_find(ptr);
  if (m != NULL && (char*)ptr + bytes <= m->base + m->bytes) {
    snprintf(name, sizeof(name), "%s", m->name);
    off = (uint64_t)((char*)ptr - m->base);
  }
  pthread_mutex_unlock(&mem_mu);
  int fd = name[0] ? shm_open(name, O_RDWR, 0600) : -1;
  if (fd < 0) {
    BRAID_INFO(BRAID_LOG_ALLOC | BRAID_LOG_NET, "fake GPU: no dma-buf for %zu bytes at %p: %s", bytes, ptr,
               name[0] ? strerror(errno) : "not one device allocation of this process");
    return ncclSystemError;
  }
  *fd_p = fd;
  *offset_p = off;
  return ncclSuccess;
}

/* The handle: magic, size, offset of dptr in its allocation, segment name. */
struct fake_ipc {
  uint32_t magic;
  uint32_t pad;
  uint64_t bytes;
  uint64_t offset;
  char name[BRAID_IPC_HANDLE_BYTES - 24];
};

static ncclResult_t fake_ipc_export(void* dptr, struct braid_ipc_handle* h) {
  struct fake_ipc f;
  memset(&f, 0, sizeof(f));
  pthread_mutex_lock(&mem_mu);
  struct fake_mem* m = mem_find(dptr);
  if (m != NULL && !m->imported) {
    f.magic = FAKE_IPC_MAGIC;
    f.bytes = m->bytes;
    f.offset = (uint64_t)((char*)dptr - m->base);
    snprintf(f.name, sizeof(f.name), "%s", m->name);
  }
  pthread_mutex_unlock(&mem_mu);
  if (f.magic != FAKE_IPC_MAGIC) {
    BRAID_WARN("fake GPU: ipc_export of %p, which is not device memory of this process", dptr);
    return ncclInvalidArgument;
  }
  _Static_assert(sizeof(f) == BRAID_IPC_HANDLE_BYTES, "fake IPC handle size");
  memcpy(h->bytes, &f, sizeof(f));
  return ncclSuccess;
}

static ncclResult_t fake_ipc_import(const struct braid_ipc_handle* h, void** dptr) {
  ncclResult_t res = ncclSuccess;
  struct fake_ipc f;
  struct fake_mem* m = NULL;
  memcpy(&f, h->bytes, sizeof(f));
  f.name[sizeof(f.name) - 1] = '\0';
  if (f.magic != FAKE_IPC_MAGIC || f.offset >= f.bytes) {
    BRAID_WARN("fake GPU: ipc_import: not a fake IPC handle (magic 0x%x)", f.magic);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(m, 1, res, err);
  m->bytes = f.bytes;
  m->imported = 1;
  m->dev = -1;
  snprintf(m->name, sizeof(m->name), "%s", f.name);
  BRAID_CHECK_GOTO(map_segment(m->name, m->bytes, 0, &m->base), res, err_free);
  pthread_mutex_lock(&mem_mu);
  m->next = mems;
  mems = m;
  pthread_mutex_unlock(&mem_mu);
  *dptr = m->base + f.offset;
  return ncclSuccess;
err_free:
  free(m);
err:
  return res;
}

static void fake_ipc_close(void* dptr) {
  pthread_mutex_lock(&mem_mu);
  struct fake_mem* m = mem_find(dptr);
  pthread_mutex_unlock(&mem_mu);
  if (m == NULL || !m->imported) {
    BRAID_WARN("fake GPU: ipc_close of %p, which was not imported", dptr);
    return;
  }
  m = mem_take(m->base);
  munmap(m->base, m->bytes);
  free(m);
}

/* ---- streams and events --------------------------------------------------------------------
 * One lock for all of it: tests are small, and it keeps ordering arguments simple. */

enum op_kind { OP_LAUNCH, OP_COPY, OP_RECORD, OP_WAIT, OP_WAIT_STREAM };

struct fake_event {
  uint64_t recorded;  /* records issued */
  uint64_t completed; /* the highest record its stream reached */
  int refs;           /* the handle + queued ops */
};

struct fake_op {
  struct fake_op* next;
  int kind;
  struct fake_event* ev;
  uint64_t gen;
  void* dst;
  const void* src;
  size_t bytes;
  void* staged;              /* OP_COPY from a staging copy of pageable memory: freed after */
  struct fake_stream* after; /* OP_WAIT_STREAM: wait until this stream has done `gen` ops */
  int nblocks;
  struct braid_kernel_args args; /* by value, as a kernel launch copies them */
};

struct fake_stream {
  struct fake_stream* next;
  cudaStream_t handle;
  int dev;    /* for the NULL stream: one per device */
  int of_dev; /* the device current when the stream was first used (every stream) */
  pthread_t thread;
  pthread_cond_t cond; /* work queued */
  struct fake_op *head, *tail;
  uint64_t queued, done;
  int held;        /* test hook: start nothing while set */
  int capturing;   /* test hook: stream_capturing says yes */
  int invalidated; /* an unsafe call was made during the capture */
  int blocking;    /* test hook: ordered with the legacy stream */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER; /* some op completed */
static struct fake_stream* streams;
static int legacy_copies;                                /* test hook */
static int count_launches, count_copies, last_grid[2];   /* test hook: braid_device_fake_counts */
static __thread int capture_mode = BRAID_CAPTURE_GLOBAL; /* this thread's */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A forked child has none of its parent's stream threads: start from scratch. */
static void after_fork_child(void) {
  pthread_mutex_init(&mu, NULL);
  pthread_cond_init(&progress, NULL);
  pthread_mutex_init(&mem_mu, NULL);
  streams = NULL;
  legacy_copies = 0;
  mems = NULL; /* the parent's segments stay mapped here; the parent owns them */
}
static void install_atfork(void) {
  pthread_atfork(NULL, NULL, after_fork_child);
}

static void event_unref(struct fake_event* ev) { /* under mu */
  if (--ev->refs == 0) free(ev);
}

static void run_launch(struct fake_op* op) {
  struct braid_host_job jobs[BRAID_MAX_CHANNELS];
  const struct braid_kernel_args* a = &op->args;
  memset(jobs, 0, sizeof(jobs));
  for (int b = 0; b < op->nblocks; b++) {
    a->status[b] = BRAID_KERNEL_STATUS_RUNNING; /* as a kernel's blocks say when they start */
    jobs[b].ch = &a->channels[a->block_channel[b]];
    jobs[b].works = (struct braid_work*)braid_kernel_works(a, b);
    jobs[b].nworks = (int)a->block_nworks[b];
    jobs[b].abort_flag = a->abort_flag;
  }
  if (braid_host_run(jobs, op->nblocks) != ncclSuccess) {
    for (int b = 0; b < op->nblocks; b++) a->status[b] = BRAID_EXEC_PEER_FAILED;
    return;
  }
  for (int b = 0; b < op->nblocks; b++) a->status[b] = jobs[b].status;
}

static void* stream_main(void* arg) {
  struct fake_stream* s = arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (s->head == NULL || s->held) pthread_cond_wait(&s->cond, &mu);
    struct fake_op* op = s->head;
    if (op->kind == OP_WAIT) {
      while (op->ev->completed < op->gen) pthread_cond_wait(&progress, &mu);
    } else if (op->kind == OP_WAIT_STREAM) {
      while (op->after->done < op->gen) pthread_cond_wait(&progress, &mu);
    } else if (op->kind == OP_RECORD) {
      if (op->ev->completed < op->gen) op->ev->completed = op->gen;
    } else {
      pthread_mutex_unlock(&mu);
      if (op->kind == OP_LAUNCH)
        run_launch(op);
      else
        memmove(op->dst, op->src, op->bytes);
      pthread_mutex_lock(&mu);
    }
    s->head = op->next;
    if (s->head == NULL) s->tail = NULL;
    if (op->ev != NULL) event_unref(op->ev);
    free(op->staged);
    free(op);
    s->done++;
    pthread_cond_broadcast(&progress);
  }
  return NULL;
}

/* The stream for a handle, started on first use. Under mu. */
static ncclResult_t stream_get(cudaStream_t handle, struct fake_stream** s_p) {
  ncclResult_t res = ncclSuccess;
  int dev = handle == NULL ? cur_dev : -1;
  struct fake_stream* s;
  for (s = streams; s != NULL; s = s->next)
    if (s->handle == handle && s->dev == dev) {
      *s_p = s;
      return ncclSuccess;
    }
  BRAID_CALLOC_GOTO(s, 1, res, out);
  s->handle = handle;
  s->dev = dev;
  s->of_dev = cur_dev;
  pthread_cond_init(&s->cond, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&s->thread, &attr, stream_main, s);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    BRAID_WARN("fake GPU: failed to start a stream thread: %s", strerror(err));
    pthread_cond_destroy(&s->cond);
    free(s);
    res = ncclSystemError;
    goto out;
  }
  s->next = streams;
  streams = s;
  *s_p = s;
out:
  return res;
}

static void push(struct fake_stream* s, struct fake_op* op) { /* under mu */
  op->next = NULL;
  if (s->tail != NULL)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  s->queued++;
  pthread_cond_signal(&s->cond);
}

/* CUDA's implicit synchronisation: work on the legacy stream of a device waits for what every
 * blocking stream of that device has queued, and work on a blocking stream for what the legacy
 * stream has queued. Under mu; best effort (an allocation failure drops the ordering). */
static void implicit_waits(struct fake_stream* s) {
  for (struct fake_stream* o = streams; o != NULL; o = o->next) {
    int legacy_s = s->handle == NULL, legacy_o = o->handle == NULL;
    if (o == s || o->of_dev != s->of_dev || o->queued == o->done) continue;
    if (!((legacy_s && o->blocking) || (s->blocking && legacy_o))) continue;
    struct fake_op* w = calloc(1, sizeof(*w));
    if (w == NULL) continue;
    w->kind = OP_WAIT_STREAM;
    w->after = o;
    w->gen = o->queued;
    push(s, w);
  }
}

/* Queue `op` on the stream (takes it); *pos_p (may be NULL): the stream's op count once it is done. */
static ncclResult_t enqueue_at(cudaStream_t handle, struct fake_op* op, struct fake_stream** s_p, uint64_t* pos_p) {
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&mu);
  struct fake_stream* s = NULL;
  ncclResult_t res = stream_get(handle, &s);
  if (res != ncclSuccess) {
    if (op->ev != NULL) event_unref(op->ev);
    pthread_mutex_unlock(&mu);
    free(op->staged);
    free(op);
    return res;
  }
  implicit_waits(s);
  push(s, op);
  if (s_p != NULL) *s_p = s;
  if (pos_p != NULL) *pos_p = s->queued;
  pthread_mutex_unlock(&mu);
  return ncclSuccess;
}
static ncclResult_t enqueue(cudaStream_t handle, struct fake_op* op) {
  return enqueue_at(handle, op, NULL, NULL);
}

/* A call that a capture in global mode forbids, made by this thread: unless it is in relaxed
 * mode, every capture in progress is invalidated (CUDA: cudaErrorStreamCaptureInvalidated). */
static void unsafe_call(void) {
  if (capture_mode == BRAID_CAPTURE_RELAXED) return;
  pthread_mutex_lock(&mu);
  for (struct fake_stream* s = streams; s != NULL; s = s->next)
    if (s->capturing) s->invalidated = 1;
  pthread_mutex_unlock(&mu);
}

static ncclResult_t new_op(int kind, struct fake_op** op_p) {
  struct fake_op* op = calloc(1, sizeof(*op));
  if (op == NULL) {
    BRAID_WARN("fake GPU: out of memory queueing an operation");
    return ncclSystemError;
  }
  op->kind = kind;
  *op_p = op;
  return ncclSuccess;
}

static ncclResult_t fake_launch(const struct braid_kernel_args* args, int dtype, int nblocks, int nthreads,
                                cudaStream_t stream) {
  struct fake_op* op = NULL;
  if (nblocks < 1 || nblocks > BRAID_MAX_CHANNELS || nthreads < 1 || nthreads > BRAID_KERNEL_MAX_THREADS) {
    BRAID_WARN("fake GPU: launch: invalid grid %d x %d threads", nblocks, nthreads);
    return ncclInvalidArgument;
  }
  /* As a real kernel, built for one datatype, would misread any other's items. */
  for (int b = 0; b < nblocks; b++) {
    const struct braid_work* w = braid_kernel_works(args, b);
    for (uint32_t i = 0; i < args->block_nworks[b]; i++) {
      if (w[i].dtype != dtype) {
        BRAID_WARN("fake GPU: launch of the datatype %d kernel holds an item of datatype %d (block %d item %u)", dtype,
                   w[i].dtype, b, i);
        return ncclInternalError;
      }
    }
  }
  BRAID_CHECK(new_op(OP_LAUNCH, &op));
  op->args = *args;
  op->nblocks = nblocks;
  pthread_mutex_lock(&mu);
  count_launches++;
  last_grid[0] = nblocks;
  last_grid[1] = nthreads;
  pthread_mutex_unlock(&mu);
  return enqueue(stream, op);
}

/* Host memory is everyone's: nothing to enable. */
static ncclResult_t fake_enable_peer_access(int peer_dev) {
  return ncclSuccess;
}

static ncclResult_t fake_memcpy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  struct fake_op* op = NULL;
  BRAID_CHECK(new_op(OP_COPY, &op));
  op->dst = dst;
  op->src = src;
  op->bytes = bytes;
  pthread_mutex_lock(&mu);
  count_copies++;
  pthread_mutex_unlock(&mu);
  return enqueue(stream, op);
}

static ncclResult_t fake_event_create(braid_event_t* ev_p) {
  struct fake_event* ev = calloc(1, sizeof(*ev));
  if (ev == NULL) {
    BRAID_WARN("fake GPU: out of memory creating an event");
    return ncclSystemError;
  }
  ev->refs = 1;
  *ev_p = ev;
  return ncclSuccess;
}

static void fake_event_destroy(braid_event_t e) {
  if (e == NULL) return;
  pthread_mutex_lock(&mu);
  event_unref(e);
  pthread_mutex_unlock(&mu);
}

/* Record/wait: the generation is taken when the call is made, as CUDA's are. */
static ncclResult_t event_op(int kind, struct fake_event* ev, cudaStream_t stream) {
  struct fake_op* op = NULL;
  BRAID_CHECK(new_op(kind, &op));
  pthread_mutex_lock(&mu);
  if (kind == OP_RECORD) ev->recorded++;
  op->gen = ev->recorded;
  op->ev = ev;
  ev->refs++;
  pthread_mutex_unlock(&mu);
  return enqueue(stream, op);
}

static ncclResult_t fake_event_record(braid_event_t ev, cudaStream_t stream) {
  return event_op(OP_RECORD, ev, stream);
}
static ncclResult_t fake_stream_wait_event(cudaStream_t stream, braid_event_t ev) {
  return event_op(OP_WAIT, ev, stream);
}

static ncclResult_t fake_event_query(braid_event_t e, int* done) {
  struct fake_event* ev = e;
  unsafe_call();
  pthread_mutex_lock(&mu);
  *done = ev->completed >= ev->recorded;
  pthread_mutex_unlock(&mu);
  return ncclSuccess;
}

static ncclResult_t fake_stream_sync(cudaStream_t stream) {
  pthread_once(&atfork_once, install_atfork);
  unsafe_call();
  pthread_mutex_lock(&mu);
  struct fake_stream* s = NULL;
  ncclResult_t res = stream_get(stream, &s);
  if (res == ncclSuccess) {
    uint64_t target = s->queued;
    while (s->done < target) pthread_cond_wait(&progress, &mu);
  }
  pthread_mutex_unlock(&mu);
  return res;
}

/* Test hooks on a stream's flags. */
enum { FLAG_HELD, FLAG_CAPTURING, FLAG_BLOCKING };
static ncclResult_t set_flag(cudaStream_t stream, int which, int on) {
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&mu);
  struct fake_stream* s = NULL;
  ncclResult_t res = stream_get(stream, &s);
  if (res == ncclSuccess) {
    if (which == FLAG_HELD) {
      s->held = on;
    } else if (which == FLAG_BLOCKING) {
      s->blocking = on;
    } else {
      if (!on && s->capturing && s->invalidated) {
        BRAID_WARN("fake GPU: the capture of stream %p was invalidated by an unsafe call", (void*)stream);
        res = ncclInvalidUsage;
      }
      s->capturing = on;
      s->invalidated = 0;
    }
    pthread_cond_signal(&s->cond);
  }
  pthread_mutex_unlock(&mu);
  return res;
}
ncclResult_t braid_device_fake_hold(cudaStream_t stream, int on) {
  return set_flag(stream, FLAG_HELD, on);
}
ncclResult_t braid_device_fake_capture(cudaStream_t stream, int on) {
  return set_flag(stream, FLAG_CAPTURING, on);
}
ncclResult_t braid_device_fake_blocking(cudaStream_t stream, int on) {
  return set_flag(stream, FLAG_BLOCKING, on);
}
void braid_device_fake_legacy_copies(int on) {
  legacy_copies = on;
}
void braid_device_fake_counts(int* launches, int* copies, int* last_blocks, int* last_threads) {
  pthread_mutex_lock(&mu);
  if (launches) *launches = count_launches;
  if (copies) *copies = count_copies;
  if (last_blocks) *last_blocks = last_grid[0];
  if (last_threads) *last_threads = last_grid[1];
  pthread_mutex_unlock(&mu);
}

static ncclResult_t fake_stream_kind(cudaStream_t stream, int* kind) {
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&mu);
  struct fake_stream* s = NULL;
  ncclResult_t res = stream_get(stream, &s);
  if (res == ncclSuccess)
    *kind = stream == NULL ? BRAID_STREAM_LEGACY : s->blocking ? BRAID_STREAM_BLOCKING : BRAID_STREAM_NONBLOCKING;
  pthread_mutex_unlock(&mu);
  return res;
}

static ncclResult_t fake_capture_mode(int* mode) {
  int old = capture_mode;
  capture_mode = *mode;
  *mode = old;
  return ncclSuccess;
}

static ncclResult_t fake_stream_capturing(cudaStream_t stream, int* yes) {
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&mu);
  struct fake_stream* s = NULL;
  ncclResult_t res = stream_get(stream, &s);
  if (res == ncclSuccess) *yes = s->capturing;
  pthread_mutex_unlock(&mu);
  return res;
}

static int is_device_mem(const void* p) {
  pthread_mutex_lock(&mem_mu);
  int yes = mem_find(p) != NULL;
  pthread_mutex_unlock(&mem_mu);
  return yes;
}

/* cudaMemcpy on the legacy stream: waits for the stream's earlier work (so, through
 * implicit_waits, for every blocking stream's), then copies; from pageable host memory to the
 * device it returns once the bytes are staged, and they land when the stream gets to them. */
static ncclResult_t legacy_copy(void* dst, const void* src, size_t bytes) {
  struct fake_op* op = NULL;
  struct fake_stream* s = NULL;
  uint64_t pos = 0;
  int staged = is_device_mem(dst) && !is_device_mem(src);
  BRAID_CHECK(new_op(OP_COPY, &op));
  op->dst = dst;
  op->src = src;
  op->bytes = bytes;
  if (staged) {
    if ((op->staged = malloc(bytes ? bytes : 1)) == NULL) {
      free(op);
      BRAID_WARN("fake GPU: out of memory staging a copy");
      return ncclSystemError;
    }
    memcpy(op->staged, src, bytes);
    op->src = op->staged;
  }
  BRAID_CHECK(enqueue_at(NULL, op, &s, &pos));
  pthread_mutex_lock(&mu);
  while (s->done < (staged ? pos - 1 : pos)) pthread_cond_wait(&progress, &mu);
  pthread_mutex_unlock(&mu);
  return ncclSuccess;
}

static ncclResult_t fake_memcpy_sync(void* dst, const void* src, size_t bytes) {
  unsafe_call();
  if (legacy_copies) return legacy_copy(dst, src, bytes);
  memmove(dst, src, bytes);
  return ncclSuccess;
}

/* Lands at once, waits for nobody: the contract of setup_copy (a private stream, synced). */
static ncclResult_t fake_setup_copy(void* dst, const void* src, size_t bytes) {
  memmove(dst, src, bytes);
  return ncclSuccess;
}

static const struct braid_device_ops fake_ops = {
    .name = "fake",
    .count = fake_count,
    .get_current = fake_get_current,
    .set_current = fake_set_current,
    .bus_id = fake_bus_id,
    .compute_capability = fake_compute_capability,
    .can_access_peer = fake_can_access_peer,
    .alloc = fake_alloc,
    .free = fake_free,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
    .host_register = fake_host_register,
    .host_unregister = fake_host_unregister,
    .memcpy_sync = fake_memcpy_sync,
    .pointer_kind = fake_pointer_kind,
    .ipc_export = fake_ipc_export,
    .ipc_import = fake_ipc_import,
    .ipc_close = fake_ipc_close,
    .launch = fake_launch,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .event_record = fake_event_record,
    .event_query = fake_event_query,
    .stream_wait_event = fake_stream_wait_event,
    .stream_sync = fake_stream_sync,
    .stream_capturing = fake_stream_capturing,
    .memcpy_async = fake_memcpy_async,
    .enable_peer_access = fake_enable_peer_access,
    .setup_copy = fake_setup_copy,
    .stream_kind = fake_stream_kind,
    .capture_mode = fake_capture_mode,
    .dmabuf_supported = fake_dmabuf_supported,
    .dmabuf_get = fake_dmabuf_get,
    .mc_supported = braid_fake_mc_supported,
    .mc_granularity = braid_fake_mc_granularity,
    .mc_create = braid_fake_mc_create,
    .mc_import = braid_fake_mc_import,
    .mc_add_device = braid_fake_mc_add_device,
    .mc_bind = braid_fake_mc_bind,
    .mc_map = braid_fake_mc_map,
    .mc_release = braid_fake_mc_release,
    .vmm_alloc = fake_vmm_alloc,
    .vmm_free = fake_vmm_free,
    .vmm_export = fake_vmm_export,
    .vmm_import = fake_ipc_import,
    .vmm_close = fake_ipc_close,
    .mc_bind_mem = braid_fake_mc_bind_mem,
    .caps = BRAID_DEVICE_CAP_HOST_THREADS | BRAID_DEVICE_CAP_HOST_READS_DEVICE,
};

const struct braid_device_ops* const braid_device_fake = &fake_ops;
