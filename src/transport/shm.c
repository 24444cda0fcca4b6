/*
 * shm.c - the shared-memory transport. The receiver allocates the connection's FIFO (control
 * block + one buffer per protocol); the sender maps it and writes into it.
 *
 * Between processes the FIFO is a POSIX shared-memory segment with a name unique per
 * process, communicator, channel and peer; the sender unlinks it as soon as it has mapped it,
 * so nothing is left in /dev/shm even after kill -9 once connections are up (the receiver
 * unlinks too when it is freed, in case the sender never got as far as mapping it). Between
 * ranks of one process it is plain memory with a reference count, freed by whichever side
 * lets go last.
 *
 * Device communicators: kernels read and write the FIFO in place, so each side registers the
 * memory it holds with the device layer (host_register: pinned and mapped) and its braid_conn
 * points at the device's view of it: the receiver registers the segment it created, a sender
 * in another process its own mapping of it. Within one process the receiver's registration
 * serves both sides and is undone by whichever side frees the memory. Host mode is unchanged.
 *
 * Direct path (host mode, BRAID_SHM_DIRECT): the receiver decides at setup whether it can read
 * the sender's memory (same process: plain pointers; another process: cross-memory attach,
 * probed now, transport/cma.h) and tells the sender the smallest step to send by pointer
 * (0: none). The sender then publishes large Simple steps by address (braid_conn.direct) and
 * the receiver copies them itself (braid_conn.host_fetch): one copy instead of two, chosen per
 * connection. A reducing step reduces straight from the sender's memory (same process:
 * braid_conn.host_load) or from cache-sized pieces copied out of it (kernels/direct.h). A
 * denied probe is said once per process (INFO) and leaves the FIFO path. A one-pass step copies
 * pieces of braid_conn.fetch_piece bytes per process_vm_readv: larger for far pairs (core/locality.h).
 * Both ends of a far pair between processes say so (braid_conn.far, through the blob).
 * The send end of a direct connection may also write into the receiver's memory
 * (braid_conn.host_store: memcpy between threads, process_vm_writev between processes, probed
 * at connect on the receiver's probe word; BRAID_REDUCE_STORE=0: never): the split Reduce's
 * non-root writes its final half into the root's output (kernels/direct.h).
 * The receive end can also write into the sender's memory (braid_conn.host_push:
 * process_vm_writev, the permission the probe found for the read): the 2-rank all-reduce's
 * push (kernels/direct.h), which falls back to the read where the write is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "core/locality.h"
#include "device/device.h"
#include "transport/cma.h"
#include "transport/transport.h"

/* BRAID_SHM_DIRECT=AUTO: steps from this size go by pointer (smaller ones are cheaper to copy
 * than a system call and a completion wait). */
#define SHM_DIRECT_AUTO_MIN (64u << 10)
enum { SHM_DIRECT_AUTO, SHM_DIRECT_ON, SHM_DIRECT_OFF };

/* The first page of every FIFO: lifetime bookkeeping, never touched by the data path. */
struct shm_header {
  atomic_int refs; /* same-process FIFOs: sides still holding it */
  int registered;  /* same-process FIFOs: registered with the device layer (device comms) */
  int cuda_dev;    /* the device current when it was registered */
};
#define SHM_HEADER_BYTES 4096

/* What the receiver tells the sender. */
struct shm_blob {
  uint64_t pid_hash; /* the receiver's process */
  void* ptr;         /* same process: the FIFO itself */
  void* dptr;        /* same process, device comm: the device's view of ptr */
  size_t bytes;
  char name[96];       /* other process: the segment to map */
  uint32_t direct_min; /* send steps from this size by pointer; 0: never (cma.h) */
  uint32_t p2p_step;   /* with direct_min: bytes per send/recv step (work.h braid_conn.p2p_step) */
  uint32_t far;        /* the pair's cores are far apart (core/locality.h): braid_conn.far */
  uint64_t local_id;   /* same process: the FIFO's entry in the untaken list */
  int32_t rank;        /* the receiver: where a sender may write (braid_conn.host_store) */
};

/* Same-process FIFOs a receiver made that no sender has taken yet. A sender takes its
 * reference only through this list (under its lock), so a receiver that gives up before the
 * sender's acknowledgement (shm_recv_free, not connected) knows whether the sender's reference
 * is still its to drop, and a sender that comes late finds nothing rather than freed memory. */
struct shm_untaken {
  struct shm_untaken* next;
  uint64_t id;
  const void* base;
};
static pthread_mutex_t untaken_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shm_untaken* untaken;
static uint64_t untaken_next_id = 1;

static ncclResult_t untaken_add(const void* base, uint64_t* id) {
  struct shm_untaken* u = calloc(1, sizeof(*u));
  if (u == NULL) {
    BRAID_WARN("Failed to allocate the bookkeeping of a connection FIFO");
    return ncclSystemError;
  }
  pthread_mutex_lock(&untaken_mu);
  u->id = *id = untaken_next_id++;
  u->base = base;
  u->next = untaken;
  untaken = u;
  pthread_mutex_unlock(&untaken_mu);
  return ncclSuccess;
}

/* Remove the entry (by id, or by base when id is 0): 1 if it was there. */
static int untaken_remove(uint64_t id, const void* base) {
  int found = 0;
  pthread_mutex_lock(&untaken_mu);
  for (struct shm_untaken** p = &untaken; *p != NULL; p = &(*p)->next) {
    struct shm_untaken* u = *p;
    if ((id != 0 && u->id != id) || u->base != base) continue;
    *p = u->next;
    free(u);
    found = 1;
    break;
  }
  pthread_mutex_unlock(&untaken_mu);
  return found;
}

/* Per-side state. */
struct shm_res {
  const struct braid_device_ops* d; /* NULL in host mode */
  char* base;                       /* mapping (or allocation) including the header */
  size_t bytes;
  int same_process;
  int registered; /* other process: this side's mapping is registered with the device layer */
  int cuda_dev;
  char name[96];
  int direct;                            /* direct path on (either end) */
  int peer, peer_pid;                    /* receive end: the sender; send end with host_store: the receiver */
  const struct braid_transport_ctx* ctx; /* to fail the communicator */
};

/* The device pointer of `host` for a device communicator's kernels, or host itself in host
 * mode. */
static ncclResult_t shm_map_for_device(const struct braid_transport_ctx* t, void* host, size_t bytes, void** dev_p,
                                       int* registered_p) {
  const struct braid_device_ops* d = t->device;
  int saved;
  *registered_p = 0;
  if (d == NULL) {
    *dev_p = host;
    return ncclSuccess;
  }
  BRAID_CHECK(braid_transport_device_enter(d, t->cuda_dev, &saved));
  ncclResult_t res = d->host_register(host, bytes, dev_p);
  braid_transport_device_leave(d, saved);
  if (res != ncclSuccess) {
    BRAID_WARN("Rank %d could not register %zu bytes of shared memory with CUDA device %d: %s", t->rank, bytes,
               t->cuda_dev, ncclGetErrorString(res));
    return res;
  }
  *registered_p = 1;
  return ncclSuccess;
}

static void shm_unmap_for_device(const struct braid_device_ops* d, void* host, int cuda_dev) {
  int saved;
  if (d == NULL) return;
  if (braid_transport_device_enter(d, cuda_dev, &saved) != ncclSuccess) saved = -1; /* unregister anyway */
  d->host_unregister(host);
  braid_transport_device_leave(d, saved);
}

static int shm_can_connect(const struct braid_transport_ctx* t, int peer) {
  if (braid_param_int(BRAID_PARAM_SHM_DISABLE) == 1) return 0;
  const struct braid_peer_info* me = &t->peers[t->rank];
  const struct braid_peer_info* p = &t->peers[peer];
  return me->host_hash == p->host_hash && me->shm_dev == p->shm_dev;
}

static ncclResult_t shm_send_setup(const struct braid_transport_ctx* t, int peer, int channel,
                                   struct braid_connector* c, struct braid_connect_blob* out) {
  memset(out, 0, sizeof(*out)); /* the receiver needs nothing from the sender */
  return ncclSuccess;
}

/* Reserve the pages now, so a too-small /dev/shm fails here with a clear message instead of
 * a SIGBUS at the first collective. */
static ncclResult_t shm_reserve(int fd, size_t bytes, const char* name) {
  int err = posix_fallocate(fd, 0, (off_t)bytes);
  if (err == 0) return ncclSuccess;
  struct statvfs vfs;
  unsigned long long avail = statvfs("/dev/shm", &vfs) == 0 ? (unsigned long long)vfs.f_bavail * vfs.f_frsize : 0;
  BRAID_WARN(
      "Failed to allocate %zu bytes of shared memory for %s: %s. /dev/shm has %llu bytes free; "
      "enlarge it (e.g. docker --shm-size) or lower NCCL_BUFFSIZE (now %lld)",
      bytes, name, strerror(err), avail, (long long)braid_param_int(BRAID_PARAM_BUFFSIZE));
  return ncclSystemError;
}

/* Receive end: the smallest step the sender should send by pointer, 0 for none. */
static uint32_t shm_direct_min(const struct braid_transport_ctx* t, int peer, int same_process) {
  static atomic_int told;
  int mode = (int)braid_param_int(BRAID_PARAM_SHM_DIRECT);
  if (t->device != NULL || mode == SHM_DIRECT_OFF) return 0;
  uint32_t min = mode == SHM_DIRECT_ON ? 1 : SHM_DIRECT_AUTO_MIN;
  if (same_process) return min;
  const struct braid_peer_info* p = &t->peers[peer];
  int err = braid_cma_probe(p->pid, p->cma_probe, p->pid_hash);
  if (err == 0) return min;
  if (atomic_exchange(&told, 1) == 0) {
    char name[128];
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_SHM,
               "SHM: cross-memory attach to %s is not possible (process_vm_readv: %s): shared-memory connections "
               "between processes copy through their FIFO",
               braid_transport_peer_name(t, peer, name, sizeof(name)), strerror(err));
  }
  return 0;
}

/* Receive end, cross-memory attach: bytes a one-pass reduction copies per system call
 * (kernels/direct.h). Each call pins every page it copies and is one kernel entry, so fewer,
 * larger pieces cost less; a piece must still be in this core's cache when it is reduced, and
 * a far pair's payload comes from memory anyway (docs/notes/2026-12-02-nearfar.md). */
#define SHM_PIECE_NEAR (256u << 10)
#define SHM_PIECE_FAR (1u << 20)
static uint32_t shm_fetch_piece(const struct braid_transport_ctx* t, int peer) {
  int64_t v = braid_param_int(BRAID_PARAM_SHM_PIECE);
  if (v != BRAID_PARAM_UNSET) return v < 4096 ? 4096 : v > (1 << 30) ? 1u << 30 : (uint32_t)v;
  int loc = t->locality != NULL ? t->locality[peer] : BRAID_LOCALITY_UNKNOWN;
  return loc == BRAID_LOCALITY_FAR ? SHM_PIECE_FAR : SHM_PIECE_NEAR;
}

/* Receive end of a direct connection: bytes per send/recv step on it. A step sent by pointer is
 * one copy (the receiver's) with nothing to pipeline, so it takes a whole slot (the most a step
 * may be: an in-place receive still lands in the slot); 128 KiB steps (NCCL_P2P_PCI_CHUNKSIZE's
 * default) cost four handshakes and system calls per slot instead of one. A chunk size the user
 * set is kept (0: the work item's). */
static uint32_t shm_p2p_step(const struct braid_conn* conn) {
  static atomic_int told;
  const char* src = braid_param_source(BRAID_PARAM_P2P_PCI_CHUNKSIZE);
  if (src != NULL && strcmp(src, "default") != 0) return 0;
  uint32_t step = conn->slot_bytes[BRAID_PROTO_SIMPLE];
  if (atomic_exchange(&told, 1) == 0)
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_SHM,
               "SHM: send/recv steps sent by pointer take whole slots (%u bytes; NCCL_P2P_PCI_CHUNKSIZE keeps its own)",
               step);
  return step;
}

/* A cross-memory copy with the peer failed: the communicator fails, naming the peer. */
static int shm_peer_failed(const struct shm_res* r, int err, const char* verb, const char* prep, const char* call,
                           size_t bytes) {
  char name[128];
  braid_transport_fail(r->ctx, BRAID_EXEC_PEER_FAILED, err == ESRCH ? ncclRemoteError : ncclSystemError, r->peer,
                       "%s %zu bytes %s the buffer of %s (%s) failed: %s%s", verb, bytes, prep,
                       braid_transport_peer_name(r->ctx, r->peer, name, sizeof(name)), call, strerror(err),
                       err == ESRCH ? " (the process is gone)" : "");
  return BRAID_EXEC_PEER_FAILED;
}

/* Write into the peer's memory: memcpy between threads, process_vm_writev between processes.
 * 0 or an errno. */
static int shm_write(const struct shm_res* r, uint64_t dst, const void* src, size_t bytes) {
  if (r->same_process) {
    memcpy((void*)(uintptr_t)dst, src, bytes);
    return 0;
  }
  return braid_cma_write(r->peer_pid, dst, src, bytes);
}

/* Receive end of a direct connection: a step the sender left in its own memory (direct.h). */
static int shm_fetch(struct braid_conn* conn, void* dst, uint64_t src, size_t bytes) {
  struct braid_connector* c = (struct braid_connector*)conn; /* conn is its first member */
  const struct shm_res* r = c->res;
  if (r->same_process) {
    memcpy(dst, (const void*)(uintptr_t)src, bytes);
    return 0;
  }
  int err = braid_cma_read(r->peer_pid, dst, src, bytes);
  return err == 0 ? 0 : shm_peer_failed(r, err, "Reading", "from", "process_vm_readv", bytes);
}

/* Send end of a direct connection: the receiver declared where a reduced step lands in its
 * own output (braid_conn.dest, kernels/direct.h); write it there. */
static int shm_store(struct braid_conn* conn, uint64_t dst, const void* src, size_t bytes) {
  const struct shm_res* r = ((struct braid_connector*)conn)->res; /* conn is its first member */
  int err = shm_write(r, dst, src, bytes);
  return err == 0 ? 0 : shm_peer_failed(r, err, "Writing", "into", "process_vm_writev", bytes);
}

/* Send end of a direct connection: may it write into the receiver's memory (BRAID_REDUCE_STORE,
 * and between processes process_vm_writev allowed: probed on the receiver's probe word)? Said
 * once per process where the policy forbids it. */
static int shm_can_store(const struct braid_transport_ctx* t, int peer, int same_process) {
  static atomic_int told;
  if (braid_param_int(BRAID_PARAM_REDUCE_STORE) == 0 || peer < 0 || peer >= t->nranks) return 0;
  if (same_process) return 1;
  const struct braid_peer_info* p = &t->peers[peer];
  int err = braid_cma_probe_write(p->pid, p->cma_probe, p->pid_hash);
  if (err == 0) return 1;
  if (atomic_exchange(&told, 1) == 0) {
    char name[128];
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_SHM,
               "SHM: writing into the memory of %s is not possible (process_vm_writev: %s): a split Reduce delivers "
               "the non-root's half through the FIFO, and a Gather's root reads each block",
               braid_transport_peer_name(t, peer, name, sizeof(name)), strerror(err));
  }
  return 0;
}

/* Receive end of a direct connection, the other way: write into the sender's memory (the
 * pushed all-reduce, kernels/direct.h). A failure is only returned: the caller lets the
 * sender read the bytes itself instead. */
static int shm_push(struct braid_conn* conn, uint64_t dst, const void* src, size_t bytes) {
  return shm_write(((struct braid_connector*)conn)->res, dst, src, bytes);
}

static ncclResult_t shm_recv_setup(const struct braid_transport_ctx* t, int peer, int channel,
                                   struct braid_connector* c, struct braid_connect_blob* out) {
  static atomic_uint counter;
  ncclResult_t res = ncclSuccess;
  struct shm_res* r;
  struct shm_blob* blob = (struct shm_blob*)out->data;
  int fd = -1;
  BRAID_CALLOC_GOTO(r, 1, res, err);
  r->d = t->device;
  r->bytes = SHM_HEADER_BYTES + braid_transport_fifo_bytes(t);
  r->same_process = t->peers[peer].pid_hash == t->peers[t->rank].pid_hash;
  if (r->same_process) {
    if (posix_memalign((void**)&r->base, 4096, r->bytes) != 0) {
      BRAID_WARN("Failed to allocate %zu bytes for a connection FIFO", r->bytes);
      res = ncclSystemError;
      goto err_free_res;
    }
    memset(r->base, 0, r->bytes);
    atomic_store(&((struct shm_header*)r->base)->refs, 2);
    res = untaken_add(r->base, &blob->local_id);
    if (res != ncclSuccess) {
      free(r->base);
      goto err_free_res;
    }
  } else {
    snprintf(r->name, sizeof(r->name), "/braid-%d-%llx-%d-%d-%d-%u", (int)getpid(), (unsigned long long)t->comm_hash,
             t->rank, peer, channel, atomic_fetch_add(&counter, 1));
    BRAID_SYSCHECK_GOTO(fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR, 0600), "shm_open", res, err_free_res);
    BRAID_CHECK_GOTO(shm_reserve(fd, r->bytes, r->name), res, err_close);
    r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
      BRAID_WARN("Call to mmap of %zu bytes (%s) failed: %s", r->bytes, r->name, strerror(errno));
      res = ncclSystemError;
      goto err_close;
    }
    close(fd);
    fd = -1;
  }
  void* dbase;
  int registered;
  r->cuda_dev = t->cuda_dev;
  BRAID_CHECK_GOTO(shm_map_for_device(t, r->base, r->bytes, &dbase, &registered), res, err_release);
  if (r->same_process) {
    ((struct shm_header*)r->base)->registered = registered;
    ((struct shm_header*)r->base)->cuda_dev = t->cuda_dev;
  } else {
    r->registered = registered;
  }
  uint64_t local_id = blob->local_id;
  memset(blob, 0, sizeof(*blob));
  blob->local_id = local_id;
  blob->pid_hash = t->peers[t->rank].pid_hash;
  blob->ptr = r->base;
  blob->dptr = registered ? dbase : NULL;
  blob->bytes = r->bytes;
  memcpy(blob->name, r->name, sizeof(blob->name));
  blob->direct_min = shm_direct_min(t, peer, r->same_process);
  blob->rank = t->rank;
  blob->far = !r->same_process && t->locality != NULL && t->locality[peer] == BRAID_LOCALITY_FAR;
  braid_transport_fifo_layout(t, (char*)dbase + SHM_HEADER_BYTES, &c->conn);
  if (blob->direct_min) {
    r->direct = 1;
    r->peer = peer;
    r->peer_pid = t->peers[peer].pid;
    r->ctx = t;
    c->conn.host_fetch = shm_fetch;
    c->conn.direct_min = blob->direct_min;
    c->conn.host_push = shm_push;
    c->conn.host_load = r->same_process;
    c->conn.fetch_piece = r->same_process ? 0 : shm_fetch_piece(t, peer);
    c->conn.far = (int)blob->far;
    c->conn.fetched = &((struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES))->fetched;
    c->conn.dest = (struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES);
    c->conn.odelta = &((struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES))->odelta;
    c->conn.ostep = &((struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES))->ostep;
    c->conn.p2p_step = blob->p2p_step = shm_p2p_step(&c->conn);
  }
  c->res = r;
  return ncclSuccess;
err_release:
  if (r->same_process) {
    untaken_remove(blob->local_id, r->base);
    free(r->base);
  } else {
    munmap(r->base, r->bytes);
    shm_unlink(r->name);
  }
  goto err_free_res;
err_close:
  close(fd);
  shm_unlink(r->name);
err_free_res:
  free(r);
err:
  return res;
}

static ncclResult_t shm_send_connect(const struct braid_transport_ctx* t, struct braid_connector* c,
                                     const struct braid_connect_blob* peer) {
  ncclResult_t res = ncclSuccess;
  const struct shm_blob* blob = (const struct shm_blob*)peer->data;
  struct shm_res* r;
  BRAID_CALLOC_GOTO(r, 1, res, err);
  r->d = t->device;
  r->bytes = blob->bytes;
  r->same_process = blob->pid_hash == t->peers[t->rank].pid_hash;
  r->cuda_dev = t->cuda_dev;
  void* dbase = NULL;
  if (r->same_process) {
    r->base = blob->ptr;
    /* the receiver registered it for both of us (connect.c refuses host/device pairs) */
    dbase = t->device == NULL ? r->base : blob->dptr;
    if (dbase == NULL) {
      BRAID_WARN(
          "Rank %d is on CUDA device %d but its shared-memory peer in this process did not register the "
          "FIFO for the device",
          t->rank, t->cuda_dev);
      res = ncclInternalError;
      goto err_free_res;
    }
    if (!untaken_remove(blob->local_id, blob->ptr)) { /* this side's reference is taken here */
      BRAID_WARN(
          "Rank %d: the receiving end of a shared-memory connection in this process gave up on it before "
          "this rank connected",
          t->rank);
      res = ncclRemoteError;
      goto err_free_res;
    }
  } else {
    int fd;
    BRAID_SYSCHECK_GOTO(fd = shm_open(blob->name, O_RDWR, 0600), "shm_open", res, err_free_res);
    r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    shm_unlink(blob->name); /* both sides have it now: nothing can leak from here on */
    if (r->base == MAP_FAILED) {
      BRAID_WARN("Call to mmap of %zu bytes (%s) failed: %s", r->bytes, blob->name, strerror(errno));
      res = ncclSystemError;
      goto err_free_res;
    }
    res = shm_map_for_device(t, r->base, r->bytes, &dbase, &r->registered);
    if (res != ncclSuccess) {
      munmap(r->base, r->bytes);
      goto err_free_res;
    }
  }
  braid_transport_fifo_layout(t, (char*)dbase + SHM_HEADER_BYTES, &c->conn);
  if (blob->direct_min && t->device == NULL) {
    r->direct = 1;
    c->conn.direct = 1;
    c->conn.direct_min = blob->direct_min;
    c->conn.p2p_step = blob->p2p_step;
    c->conn.far = (int)blob->far;
    c->conn.fetched = &((struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES))->fetched;
    c->conn.dest = (struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES);
    if (shm_can_store(t, blob->rank, r->same_process)) {
      r->peer = blob->rank;
      r->peer_pid = t->peers[blob->rank].pid;
      r->ctx = t;
      c->conn.host_store = shm_store;
      c->conn.store_load = r->same_process;
    }
    c->conn.odelta = &((struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES))->odelta;
    c->conn.ostep = &((struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES))->ostep;
  }
  c->res = r;
  return ncclSuccess;
err_free_res:
  free(r);
err:
  return res;
}

/* The receiver has nothing left to do: the sender maps and unlinks in its own connect. */
static ncclResult_t shm_recv_connect(const struct braid_transport_ctx* t, struct braid_connector* c,
                                     const struct braid_connect_blob* peer) {
  return ncclSuccess;
}

static void shm_free(struct braid_connector* c) {
  struct shm_res* r = c->res;
  if (r == NULL) return;
  if (r->same_process) {
    struct shm_header* h = (struct shm_header*)r->base;
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
      if (h->registered) shm_unmap_for_device(r->d, r->base, h->cuda_dev);
      free(r->base);
    }
  } else {
    /* The sender unlinked it after mapping; if it never got that far, the name goes now. */
    if (r->name[0]) shm_unlink(r->name);
    if (r->registered) shm_unmap_for_device(r->d, r->base, r->cuda_dev);
    munmap(r->base, r->bytes);
  }
  free(r);
  c->res = NULL;
}

/* A same-process FIFO no sender took still holds the sender's reference: drop it too (the
 * untaken list decides; "not connected" alone does not: the sender may have taken it and
 * failed, or this side may have given up waiting for its acknowledgement). */
static void shm_recv_free(struct braid_connector* c) {
  struct shm_res* r = c->res;
  if (r != NULL && r->same_process && !c->connected && untaken_remove(0, r->base))
    atomic_fetch_sub(&((struct shm_header*)r->base)->refs, 1);
  shm_free(c);
}

/* NCCL's words on a GPU ("SHM/direct/direct": kernels on both ends touch the memory, no copy
 * engine); braid's own in host mode. */
static const char* shm_desc(const struct braid_connector* c) {
  const struct shm_res* r = c->res;
  if (r == NULL) return "shared memory";
  if (r->registered || (r->same_process && ((const struct shm_header*)r->base)->registered)) return "direct/direct";
  if (r->direct) return r->same_process ? "direct pointer/read" : "shared memory/CMA";
  return r->same_process ? "direct pointer" : "shared memory";
}

/* The host's own mapping (or allocation) of the FIFO, whatever the device sees. */
static const volatile struct braid_conn_ctrl* shm_host_ctrl(const struct braid_connector* c) {
  const struct shm_res* r = c->res;
  return r != NULL && r->base != NULL ? (const volatile struct braid_conn_ctrl*)(r->base + SHM_HEADER_BYTES) : NULL;
}

/* ---- the survivors' cleanup (robust helper, issue 16): segments of a dead receiver ---------- */

static void shm_forget_dead(uint64_t comm_hash, int peer, int peer_pid) {
  char prefix[64], name[300];
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return;
  /* shm_recv_setup's names: /braid-<pid>-<comm hash>-<rank>-<peer>-<channel>-<n> */
  int n = snprintf(prefix, sizeof(prefix), "braid-%d-%llx-%d-", peer_pid, (unsigned long long)comm_hash, peer);
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, prefix, (size_t)n) != 0) continue;
    snprintf(name, sizeof(name), "/%s", e->d_name);
    if (shm_unlink(name) == 0)
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_SHM, "Removed %s, left by rank %d (pid %d), which died during init", name,
                 peer, peer_pid);
  }
  closedir(d);
}

const struct braid_transport braid_transport_shm = {
    .name = "SHM",
    .can_connect = shm_can_connect,
    .send_setup = shm_send_setup,
    .recv_setup = shm_recv_setup,
    .send_connect = shm_send_connect,
    .recv_connect = shm_recv_connect,
    .send_free = shm_free,
    .recv_free = shm_recv_free,
    .desc = shm_desc,
    .host_ctrl = shm_host_ctrl,
    .forget_dead = shm_forget_dead,
};
