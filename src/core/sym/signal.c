/*
 * signal.c - one-sided operations: ncclPutSignal, ncclSignal, ncclWaitSignal, and the
 * per-communicator state they use (struct braid_sym: the signal inbox).
 *
 * Every rank owns an inbox of counters, one per (origin rank, context, signal index). An
 * origin raises a signal by incrementing its counter in the target's inbox; the target's
 * ncclWaitSignal adds opCnt to what it has consumed of that counter and waits until the
 * counter reaches it. Local peers (sym.h) write the inbox directly (it is a shared-memory
 * segment when some local peer is another process); remote peers send a message that the
 * target applies while it waits (remote.c). A put is written (or sent) before its signal is
 * raised (release order), so a wait that sees the signal sees the data.
 *
 * Host mode: synchronous - a put or signal returns when the data is in the target's window
 * (local) or handed to the connection (remote); a wait returns when the signals arrived.
 * Device mode: the copy runs on the user's stream (memcpy_async), then the call waits for the
 * stream and raises the signal from the host; waits are host waits.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/api.h"
#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/group.h"
#include "core/sym/sym.h"
#include "kernels/executor.h"

struct inbox_info {
  uint64_t pid_hash;
  uint64_t* ptr;
  char name[BRAID_SYM_NAME_MAX];
};

uint64_t* braid_sym_slot(uint64_t* table, const struct braid_comm* comm, int origin, int ctx, int sig) {
  return table + ((size_t)origin * comm->sym->nctx + (size_t)ctx) * BRAID_SYM_NSIGNALS + (size_t)sig;
}

/* Load/store reachable: the same process, or the same host and /dev/shm (as the shm transport
 * decides). Fake nodes (NCCL_HOSTID) are remote to each other. */
static int reachable(const struct braid_comm* comm, int r) {
  const struct braid_peer_info* me = &comm->peers[comm->rank];
  const struct braid_peer_info* p = &comm->peers[r];
  if (p->pid_hash == me->pid_hash) return 1;
  return p->host_hash == me->host_hash && p->shm_dev == me->shm_dev && p->host_mode == me->host_mode;
}

static ncclResult_t inbox_alloc(struct braid_comm* comm, struct inbox_info* me) {
  static atomic_uint counter;
  struct braid_sym* s = comm->sym;
  s->inbox_bytes = (size_t)comm->nranks * s->nctx * BRAID_SYM_NSIGNALS * sizeof(uint64_t);
  for (int r = 0; r < comm->nranks; r++)
    s->inbox_shm |= s->peer_local[r] && comm->peers[r].pid_hash != comm->peers[comm->rank].pid_hash;
  if (!s->inbox_shm) {
    s->inbox = calloc(1, s->inbox_bytes);
    if (s->inbox == NULL) return ncclSystemError;
  } else {
    /* The shm transport's prefix (braid-<pid>-<comm hash>-<rank>-), so that survivors of a rank
     * that dies before sym_ready remove it with its FIFOs (the shm transport's forget_dead). */
    snprintf(s->inbox_name, sizeof(s->inbox_name), "/braid-%d-%llx-%d-sig-%u", (int)getpid(),
             (unsigned long long)comm->comm_hash, comm->rank, atomic_fetch_add(&counter, 1));
    int fd = shm_open(s->inbox_name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)s->inbox_bytes) != 0) {
      BRAID_WARN("Rank %d: cannot create the signal inbox %s: %s", comm->rank, s->inbox_name, strerror(errno));
      if (fd >= 0) close(fd);
      shm_unlink(s->inbox_name);
      s->inbox_name[0] = '\0';
      return ncclSystemError;
    }
    void* p = mmap(NULL, s->inbox_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      BRAID_WARN("Rank %d: mmap of the signal inbox failed: %s", comm->rank, strerror(errno));
      shm_unlink(s->inbox_name);
      s->inbox_name[0] = '\0';
      return ncclSystemError;
    }
    s->inbox = p;
  }
  me->pid_hash = comm->peers[comm->rank].pid_hash;
  me->ptr = s->inbox;
  memcpy(me->name, s->inbox_name, sizeof(me->name));
  return ncclSuccess;
}

ncclResult_t braid_sym_init(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  struct inbox_info* all = NULL;
  int n = comm->nranks;
  struct braid_sym* s;
  BRAID_CALLOC_GOTO(s, 1, res, out);
  pthread_mutex_init(&s->lock, NULL);
  comm->sym = s;
  s->nctx = comm->config.numRmaCtx;
  braid_sym_lsa_team(comm);
  if (s->nctx <= 0) return ncclSuccess; /* one-sided operations off: no inbox */
  BRAID_CALLOC_GOTO(s->peer_local, n, res, out);
  BRAID_CALLOC_GOTO(s->peer_inbox, n, res, out);
  BRAID_CALLOC_GOTO(s->waited, (size_t)n * s->nctx * BRAID_SYM_NSIGNALS, res, out);
  BRAID_CALLOC_GOTO(all, n, res, out);
  for (int r = 0; r < n; r++) s->peer_local[r] = reachable(comm, r);
  BRAID_CHECK_GOTO(inbox_alloc(comm, &all[comm->rank]), res, out);
  BRAID_CHECK_GOTO(braid_bootstrap_allgather(comm->bootstrap, all, sizeof(*all)), res, out);
  /* Until init's last barrier: if init fails, whoever frees the communicator removes every
   * local inbox name (a rank stopped or killed before sym_ready leaves its own behind). */
  BRAID_CALLOC_GOTO(s->peer_names, n, res, out);
  for (int r = 0; r < n; r++)
    if (s->peer_local[r]) memcpy(s->peer_names[r], all[r].name, sizeof(s->peer_names[r]));
  for (int r = 0; r < n; r++) {
    if (!s->peer_local[r]) continue;
    if (all[r].pid_hash == all[comm->rank].pid_hash) {
      s->peer_inbox[r] = all[r].ptr;
      continue;
    }
    int fd = shm_open(all[r].name, O_RDWR, 0600);
    void* p = fd < 0 ? MAP_FAILED : mmap(NULL, s->inbox_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    if (p == MAP_FAILED) {
      BRAID_WARN("Rank %d: cannot map rank %d's signal inbox %s: %s", comm->rank, r, all[r].name, strerror(errno));
      res = ncclSystemError;
      goto out;
    }
    s->peer_inbox[r] = p;
  }
out:
  free(all);
  return res; /* a failure leaves comm->sym for braid_sym_free */
}

void braid_sym_ready(struct braid_comm* comm) {
  struct braid_sym* s = comm->sym;
  if (s != NULL && s->inbox_name[0] != '\0') {
    shm_unlink(s->inbox_name);
    s->inbox_name[0] = '\0';
  }
  if (s != NULL) {
    free(s->peer_names); /* every peer mapped its inbox: the names are gone or going */
    s->peer_names = NULL;
  }
}

void braid_sym_free(struct braid_comm* comm) {
  struct braid_sym* s = comm->sym;
  if (s == NULL) return;
  braid_remote_free(comm); /* first: nothing lands in a window after this */
  braid_devcomm_free_all(comm);
  braid_lsa_free(comm);
  braid_win_free_all(comm);
  for (int r = 0; s->peer_names != NULL && r < comm->nranks; r++) /* init never got to sym_ready */
    if (s->peer_names[r][0] != '\0') shm_unlink(s->peer_names[r]);
  braid_sym_ready(comm);
  for (int r = 0; s->peer_inbox != NULL && r < comm->nranks; r++)
    if (s->peer_inbox[r] != NULL && s->peer_inbox[r] != s->inbox &&
        comm->peers[r].pid_hash != comm->peers[comm->rank].pid_hash)
      munmap(s->peer_inbox[r], s->inbox_bytes);
  if (s->inbox_shm && s->inbox != NULL)
    munmap(s->inbox, s->inbox_bytes);
  else
    free(s->inbox);
  free(s->peer_inbox);
  free(s->peer_local);
  free(s->waited);
  pthread_mutex_destroy(&s->lock);
  free(s);
  comm->sym = NULL;
}

ncclResult_t braid_sym_check_active(const struct braid_comm* comm, const char* fn) {
  if (comm->sym == NULL || !comm->sym->suspended) return ncclSuccess;
  BRAID_WARN("%s: rank %d: communicator %p is suspended (ncclCommSuspend); call ncclCommResume first", fn, comm->rank,
             (void*)comm);
  return ncclInvalidUsage;
}

/* ---- argument checks ---------------------------------------------------------------------- */

static ncclResult_t check_rma(ncclComm_t handle, const char* fn, struct braid_comm** comm_p) {
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (comm->sym == NULL || comm->sym->nctx <= 0) {
    BRAID_WARN("%s: rank %d: one-sided operations are off for this communicator (config.numRmaCtx 0)", fn, comm->rank);
    return ncclInvalidUsage;
  }
  *comm_p = comm;
  return ncclSuccess;
}

static ncclResult_t check_signal(const struct braid_comm* comm, const char* fn, int peer, int sig, int ctx) {
  if (peer < 0 || peer >= comm->nranks) {
    BRAID_WARN("%s: invalid peer %d (nranks %d)", fn, peer, comm->nranks);
    return ncclInvalidArgument;
  }
  if (sig < 0 || sig >= BRAID_SYM_NSIGNALS) {
    BRAID_WARN("%s: invalid signal index %d (0..%d)", fn, sig, BRAID_SYM_NSIGNALS - 1);
    return ncclInvalidArgument;
  }
  if (ctx < 0 || ctx >= comm->sym->nctx) {
    BRAID_WARN("%s: invalid context %d (config.numRmaCtx %d)", fn, ctx, comm->sym->nctx);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t raise_signal(struct braid_comm* comm, int peer, int ctx, int sig) {
  if (!comm->sym->peer_local[peer]) return braid_remote_signal(comm, peer, ctx, sig);
  uint64_t* slot = braid_sym_slot(comm->sym->peer_inbox[peer], comm, comm->rank, ctx, sig);
  __atomic_fetch_add(slot, 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}

/* ---- the calls ---------------------------------------------------------------------------- */

static ncclResult_t local_put(struct braid_comm* comm, void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return ncclSuccess;
  if (comm->device == NULL) {
    memcpy(dst, src, bytes);
    return ncclSuccess;
  }
  /* Stream order: the copy runs after the stream's earlier work; the signal after the copy. */
  BRAID_CHECK(comm->device->memcpy_async(dst, src, bytes, stream));
  return comm->device->stream_sync(stream);
}

BRAID_API ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                     ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                     unsigned int flags, ncclComm_t handle, cudaStream_t stream) {
  const char* fn = "ncclPutSignal";
  struct braid_comm* comm;
  BRAID_CHECK(check_rma(handle, fn, &comm));
  BRAID_CHECK(check_signal(comm, fn, peer, sigIdx, ctx));
  if ((int)datatype < 0 || datatype >= ncclNumTypes) {
    BRAID_WARN("%s: invalid datatype %d", fn, (int)datatype);
    return ncclInvalidArgument;
  }
  if (flags != 0) {
    BRAID_WARN("%s: invalid flags %u (must be 0)", fn, flags);
    return ncclInvalidArgument;
  }
  struct ncclWindow_vidmem* w = braid_win_lookup(comm, peerWin, fn);
  if (w == NULL) return ncclInvalidArgument;
  size_t bytes = count * braid_dtype_size(datatype);
  if (count > 0 && localbuff == NULL) {
    BRAID_WARN("%s: localbuff is NULL", fn);
    return ncclInvalidArgument;
  }
  if (peerWinOffset > w->infos[peer].size || bytes > w->infos[peer].size - peerWinOffset) {
    BRAID_WARN("%s: %zu bytes at offset %zu do not fit rank %d's window of %zu bytes", fn, bytes, peerWinOffset, peer,
               w->infos[peer].size);
    return ncclInvalidArgument;
  }
  struct braid_sym_op op = {.kind = BRAID_SYM_OP_PUT,
                            .comm = comm,
                            .peer = peer,
                            .ctx = ctx,
                            .sig = sigIdx,
                            .stream = stream,
                            .src = localbuff,
                            .bytes = bytes,
                            .win = w,
                            .offset = peerWinOffset};
  return braid_group_depth() > 0 ? braid_sym_defer(&op) : braid_sym_op_run(&op);
}
BRAID_PROFILE_ALIAS(ncclPutSignal)

static ncclResult_t put_run(const struct braid_sym_op* op) {
  struct braid_comm* comm = op->comm;
  struct ncclWindow_vidmem* w = op->win;
  int peer = op->peer;
  if (!comm->sym->peer_local[peer])
    return braid_remote_put(comm, peer, w->id, op->offset, op->src, op->bytes, comm->device != NULL,
                            w->infos[peer].on_device, op->ctx, op->sig);
  if (w->peer_ptr[peer] == NULL) {
    BRAID_WARN("ncclPutSignal: rank %d: rank %d's window is not mapped here", comm->rank, peer);
    return ncclInternalError;
  }
  BRAID_CHECK(local_put(comm, (char*)w->peer_ptr[peer] + op->offset, op->src, op->bytes, op->stream));
  return raise_signal(comm, peer, op->ctx, op->sig);
}

BRAID_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t handle,
                                  cudaStream_t stream) {
  const char* fn = "ncclSignal";
  struct braid_comm* comm;
  BRAID_CHECK(check_rma(handle, fn, &comm));
  BRAID_CHECK(check_signal(comm, fn, peer, sigIdx, ctx));
  if (flags != 0) {
    BRAID_WARN("%s: invalid flags %u (must be 0)", fn, flags);
    return ncclInvalidArgument;
  }
  struct braid_sym_op op = {
      .kind = BRAID_SYM_OP_SIGNAL, .comm = comm, .peer = peer, .ctx = ctx, .sig = sigIdx, .stream = stream};
  return braid_group_depth() > 0 ? braid_sym_defer(&op) : braid_sym_op_run(&op);
}
BRAID_PROFILE_ALIAS(ncclSignal)

static ncclResult_t signal_run(const struct braid_sym_op* op) {
  /* Device mode: after the stream's earlier work (puts included). */
  if (op->comm->device != NULL) BRAID_CHECK(op->comm->device->stream_sync(op->stream));
  return raise_signal(op->comm, op->peer, op->ctx, op->sig);
}

/* Wait until `slot` reaches `target`, applying what a remote origin sent meanwhile (an origin
 * whose connection breaks fails the wait, naming it). Waits poll the abort flag and end after
 * BRAID_TIMEOUT seconds (0: no limit) with ncclSystemError, as a stuck collective. */
static ncclResult_t wait_slot(struct braid_comm* comm, int origin, uint64_t* slot, uint64_t target) {
  int64_t limit = braid_param_int(BRAID_PARAM_TIMEOUT);
  double start = 0;
  for (unsigned spins = 0; __atomic_load_n(slot, __ATOMIC_ACQUIRE) < target; spins++) {
    /* A broken connection of the origin first: it names the cause the abort flag may follow. */
    if (!comm->sym->peer_local[origin] && braid_remote_progress(comm, origin, spins < 20 ? 0 : 100) != ncclSuccess)
      return __atomic_load_n(slot, __ATOMIC_ACQUIRE) >= target ? ncclSuccess : braid_remote_fail(comm, origin);
    if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) {
      ncclResult_t why = comm->async_error;
      if (comm->abort_reason[0] != '\0' && why != ncclSuccess && why != ncclInProgress) {
        /* braid failed it (a peer died, seen first by another connection): its cause */
        BRAID_WARN("ncclWaitSignal: rank %d: the communicator failed while waiting for rank %d: %s", comm->rank, origin,
                   comm->abort_reason);
        return why;
      }
      BRAID_WARN("ncclWaitSignal: rank %d: communicator aborted while waiting for rank %d", comm->rank, origin);
      return ncclInvalidUsage;
    }
    if (spins < 1000) continue;
    sched_yield();
    if (limit <= 0 || spins % 1024 != 0) continue;
    double now = braid_time_now();
    if (start == 0) start = now;
    if (now - start > (double)limit) {
      BRAID_WARN("ncclWaitSignal: rank %d: BRAID_TIMEOUT=%lld s: %llu of %llu signals from rank %d arrived", comm->rank,
                 (long long)limit, (unsigned long long)__atomic_load_n(slot, __ATOMIC_ACQUIRE),
                 (unsigned long long)target, origin);
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

BRAID_API ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t handle,
                                      cudaStream_t stream) {
  const char* fn = "ncclWaitSignal";
  struct braid_comm* comm;
  BRAID_CHECK(check_rma(handle, fn, &comm));
  if (nDesc <= 0 || signalDescs == NULL) {
    BRAID_WARN("%s: invalid descriptors (nDesc %d, signalDescs %p)", fn, nDesc, (void*)signalDescs);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < nDesc; i++) {
    const ncclWaitSignalDesc_t* d = &signalDescs[i];
    if (d->opCnt <= 0) {
      BRAID_WARN("%s: descriptor %d has invalid opCnt %d", fn, i, d->opCnt);
      return ncclInvalidArgument;
    }
    BRAID_CHECK(check_signal(comm, fn, d->peer, d->sigIdx, d->ctx));
  }
  struct braid_sym_op op = {
      .kind = BRAID_SYM_OP_WAIT, .comm = comm, .stream = stream, .ndesc = nDesc, .descs = signalDescs};
  return braid_group_depth() > 0 ? braid_sym_defer(&op) : braid_sym_op_run(&op);
}
BRAID_PROFILE_ALIAS(ncclWaitSignal)

static ncclResult_t wait_run(const struct braid_sym_op* op) {
  struct braid_comm* comm = op->comm;
  /* Device mode: the stream's earlier work is ordered before the wait returns. */
  if (comm->device != NULL) BRAID_CHECK(comm->device->stream_sync(op->stream));
  for (int i = 0; i < op->ndesc; i++) {
    const ncclWaitSignalDesc_t* d = &op->descs[i];
    uint64_t* waited = braid_sym_slot(comm->sym->waited, comm, d->peer, d->ctx, d->sigIdx);
    uint64_t target = *waited + (uint64_t)d->opCnt;
    BRAID_CHECK(wait_slot(comm, d->peer, braid_sym_slot(comm->sym->inbox, comm, d->peer, d->ctx, d->sigIdx), target));
    *waited = target;
  }
  return ncclSuccess;
}

ncclResult_t braid_sym_op_run(const struct braid_sym_op* op) {
  switch (op->kind) {
    case BRAID_SYM_OP_REGISTER:
      return braid_win_register(op->comm, (void*)op->src, op->bytes, op->out_win, op->flags);
    case BRAID_SYM_OP_PUT:
      return put_run(op);
    case BRAID_SYM_OP_SIGNAL:
      return signal_run(op);
    default:
      return wait_run(op);
  }
}
