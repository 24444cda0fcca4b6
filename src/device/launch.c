/*
 * launch.c - a communicator on a device (launch.h).
 *
 * Mirror: the kernels run on device copies of the channels (struct braid_dev_channel), of
 * every connection end (struct braid_conn, whose `step` only the kernels advance from then
 * on), of the ring orders and of the p2p pointer tables. Per channel the connections sit in
 * fixed slots: ring send/recv, tree up send/recv, tree down send/recv x3, then p2p send and
 * receive per peer.
 *
 * Launch: one kernel per communicator per group, grid = channels with work. Work items go
 * inline in the kernel arguments when they fit; the kernel statuses, overflow items and p2p
 * ops go to a launch buffer in pinned, mapped host memory (as NCCL's work FIFO): written by
 * plain stores, read by the kernel. A buffer is reused only after the event recorded behind
 * its kernel completed; a buffer used by a launch into a capturing stream belongs to the
 * graph and is never rewritten (freed with the communicator).
 */
#include "device/launch.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "core/exec_status.h"
#include "device/device.h"
#include "kernels/kernel.cuh"
#include "transport/net/net.h"

_Static_assert(sizeof(struct braid_kernel_args) <= 4096, "kernel arguments fit CUDA's 4 KiB parameter space");

#define FIXED_CONNS (4 + 2 * BRAID_MAX_TREE_ARITY) /* ring x2, tree up x2, tree down x6 */
#define MAX_STREAMS 16                             /* distinct streams of one comm in a group */

struct launch_buf {
  struct launch_buf* next;
  char* host;
  char* dev;
  size_t bytes;
  braid_event_t done; /* recorded behind the kernel that reads it */
  int busy;           /* a launch may still read it */
  int graph;          /* captured: owned by the graph for the comm's lifetime */
  int nblocks;        /* statuses to check */
};

struct braid_launch_state {
  const struct braid_device_ops* dev;
  int slots; /* connections per channel: FIXED_CONNS + 2 nranks */
  struct braid_dev_channel* d_channels;
  struct braid_conn* d_conns; /* [nchannels * slots] */
  int* d_ring_ranks;          /* [nchannels * nranks] */
  struct braid_conn** d_p2p;  /* [nchannels * 2 nranks] */
  uint8_t* mirrored;          /* [nchannels * slots] host flags */
  struct braid_conn** h_p2p;  /* staging for d_p2p */
  braid_event_t join;         /* cross-stream ordering */
  struct launch_buf* bufs;
  int error_reported;
};

/* ---- the mirror ------------------------------------------------------------------------- */

static struct braid_connector* slot_connector(struct braid_channel* ch, int nranks, int k) {
  if (k == 0) return &ch->ring_send;
  if (k == 1) return &ch->ring_recv;
  if (k == 2) return &ch->tree_up_send;
  if (k == 3) return &ch->tree_up_recv;
  if (k < 4 + BRAID_MAX_TREE_ARITY) return &ch->tree_down_send[k - 4];
  if (k < FIXED_CONNS) return &ch->tree_down_recv[k - 4 - BRAID_MAX_TREE_ARITY];
  k -= FIXED_CONNS;
  return k < nranks ? &ch->p2p_send[k] : &ch->p2p_recv[k - nranks];
}

/* The device address of a host-side conn the channel points at, or NULL. */
static struct braid_conn* dev_conn(struct braid_launch_state* s, struct braid_channel* ch, int c, int nranks,
                                   const struct braid_conn* host) {
  if (host == NULL) return NULL;
  for (int k = 0; k < s->slots; k++)
    if (&slot_connector(ch, nranks, k)->conn == host && s->mirrored[c * s->slots + k])
      return &s->d_conns[c * s->slots + k];
  return NULL;
}

ncclResult_t braid_launch_sync(struct braid_comm* comm) {
  struct braid_launch_state* s = comm->launch;
  const struct braid_device_ops* dev = s->dev;
  int n = comm->nranks;
  for (int c = 0; c < comm->nchannels; c++) {
    struct braid_channel* ch = &comm->channels[c];
    for (int k = 0; k < s->slots; k++) {
      struct braid_connector* conn = slot_connector(ch, n, k);
      if (!conn->connected || s->mirrored[c * s->slots + k]) continue;
      struct braid_conn copy = conn->conn;
      copy.host_kick = NULL; /* host-only */
      BRAID_CHECK(dev->memcpy_sync(&s->d_conns[c * s->slots + k], &copy, sizeof(copy)));
      s->mirrored[c * s->slots + k] = 1;
    }
    struct braid_dev_channel d = ch->dev;
    d.ring.ranks = s->d_ring_ranks + (size_t)c * n;
    d.ring_send = dev_conn(s, ch, c, n, ch->dev.ring_send);
    d.ring_recv = dev_conn(s, ch, c, n, ch->dev.ring_recv);
    d.tree_up_send = dev_conn(s, ch, c, n, ch->dev.tree_up_send);
    d.tree_up_recv = dev_conn(s, ch, c, n, ch->dev.tree_up_recv);
    for (int i = 0; i < BRAID_MAX_TREE_ARITY; i++) {
      d.tree_down_send[i] = dev_conn(s, ch, c, n, ch->dev.tree_down_send[i]);
      d.tree_down_recv[i] = dev_conn(s, ch, c, n, ch->dev.tree_down_recv[i]);
    }
    d.p2p_send = s->d_p2p + (size_t)c * 2 * n;
    d.p2p_recv = d.p2p_send + n;
    for (int p = 0; p < n; p++) {
      s->h_p2p[p] = dev_conn(s, ch, c, n, ch->dev.p2p_send[p]);
      s->h_p2p[n + p] = dev_conn(s, ch, c, n, ch->dev.p2p_recv[p]);
    }
    BRAID_CHECK(dev->memcpy_sync(d.p2p_send, s->h_p2p, 2 * n * sizeof(*s->h_p2p)));
    BRAID_CHECK(dev->memcpy_sync(&s->d_channels[c], &d, sizeof(d)));
  }
  return ncclSuccess;
}

ncclResult_t braid_launch_setup(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  const struct braid_device_ops* dev = comm->device;
  int n = comm->nranks, nch = comm->nchannels;
  struct braid_launch_state* s = NULL;
  int* ranks = NULL;
  BRAID_CALLOC_GOTO(s, 1, res, err);
  comm->launch = s;
  s->dev = dev;
  s->slots = FIXED_CONNS + 2 * n;
  BRAID_CALLOC_GOTO(s->mirrored, (size_t)nch * s->slots, res, err);
  BRAID_CALLOC_GOTO(s->h_p2p, 2 * (size_t)n, res, err);
  BRAID_CALLOC_GOTO(ranks, (size_t)nch * n, res, err);
  BRAID_CHECK_GOTO(dev->alloc((void**)&s->d_channels, nch * sizeof(*s->d_channels)), res, err);
  BRAID_CHECK_GOTO(dev->alloc((void**)&s->d_conns, (size_t)nch * s->slots * sizeof(*s->d_conns)), res, err);
  BRAID_CHECK_GOTO(dev->alloc((void**)&s->d_ring_ranks, (size_t)nch * n * sizeof(int)), res, err);
  BRAID_CHECK_GOTO(dev->alloc((void**)&s->d_p2p, (size_t)nch * 2 * n * sizeof(*s->d_p2p)), res, err);
  BRAID_CHECK_GOTO(dev->event_create(&s->join), res, err);
  for (int c = 0; c < nch; c++) memcpy(ranks + (size_t)c * n, comm->channels[c].ring_ranks, n * sizeof(int));
  BRAID_CHECK_GOTO(dev->memcpy_sync(s->d_ring_ranks, ranks, (size_t)nch * n * sizeof(int)), res, err);
  BRAID_CHECK_GOTO(braid_launch_sync(comm), res, err);
  free(ranks);
  return ncclSuccess;
err:
  free(ranks);
  return res; /* braid_comm_free calls braid_launch_free */
}

void braid_launch_free(struct braid_comm* comm) {
  struct braid_launch_state* s = comm->launch;
  if (s == NULL) return;
  const struct braid_device_ops* dev = s->dev;
  while (s->bufs != NULL) {
    struct launch_buf* b = s->bufs;
    s->bufs = b->next;
    dev->event_destroy(b->done);
    dev->host_free(b->host);
    free(b);
  }
  if (s->join != NULL) dev->event_destroy(s->join);
  dev->free(s->d_p2p);
  dev->free(s->d_ring_ranks);
  dev->free(s->d_conns);
  dev->free(s->d_channels);
  free(s->h_p2p);
  free(s->mirrored);
  free(s);
  comm->launch = NULL;
}

/* ---- statuses ----------------------------------------------------------------------------- */

static ncclResult_t status_error(struct braid_comm* comm, int status, int block) {
  return braid_exec_status_error(comm, status, "kernel", block);
}

/* A finished buffer's statuses; frees it for reuse. */
static ncclResult_t check_buf(struct braid_comm* comm, struct launch_buf* b) {
  ncclResult_t res = ncclSuccess;
  const volatile int* st = (const volatile int*)b->host;
  for (int i = 0; i < b->nblocks && res == ncclSuccess; i++)
    if (st[i] != BRAID_EXEC_OK) res = status_error(comm, st[i], i);
  b->busy = 0;
  if (res != ncclSuccess && comm->async_error == ncclSuccess) comm->async_error = res;
  return res;
}

/* Under comm->mutex: ncclCommGetAsyncError may poll from another thread while a call
 * launches. */
static ncclResult_t poll_locked(struct braid_comm* comm) {
  struct braid_launch_state* s = comm->launch;
  ncclResult_t res = ncclSuccess;
  for (struct launch_buf* b = s->bufs; b != NULL; b = b->next) {
    int done = 0;
    if (!b->busy || b->graph) continue;
    BRAID_CHECK(s->dev->event_query(b->done, &done));
    if (done) {
      ncclResult_t r = check_buf(comm, b);
      if (res == ncclSuccess) res = r;
    }
  }
  return res;
}

ncclResult_t braid_launch_poll(struct braid_comm* comm) {
  if (comm->launch == NULL) return ncclSuccess;
  pthread_mutex_lock(&comm->mutex);
  ncclResult_t res = poll_locked(comm);
  pthread_mutex_unlock(&comm->mutex);
  return res;
}

ncclResult_t braid_launch_wait(struct braid_comm* comm) {
  struct braid_launch_state* s = comm->launch;
  if (s == NULL) return ncclSuccess;
  /* Buffers are only added at the head (under the mutex): walking the list is safe. */
  for (struct launch_buf* b = s->bufs; b != NULL; b = b->next) {
    uint32_t spins = 0;
    for (;;) {
      int done = 1;
      pthread_mutex_lock(&comm->mutex);
      ncclResult_t res = b->busy && !b->graph ? s->dev->event_query(b->done, &done) : ncclSuccess;
      pthread_mutex_unlock(&comm->mutex);
      if (res != ncclSuccess) return res;
      if (done) break;
      if (++spins > 64) sched_yield();
    }
  }
  return braid_launch_poll(comm);
}

void braid_launch_count_buffers(struct braid_comm* comm, int* graph, int* other) {
  *graph = *other = 0;
  if (comm->launch == NULL) return;
  pthread_mutex_lock(&comm->mutex);
  for (struct launch_buf* b = comm->launch->bufs; b != NULL; b = b->next) (b->graph ? graph : other)[0]++;
  pthread_mutex_unlock(&comm->mutex);
}

/* ---- launching ---------------------------------------------------------------------------- */

int braid_launch_threads(int wanted) {
  int n = wanted > 0 ? wanted : 256;
  if (n < 64) n = 64;
  if (n > BRAID_KERNEL_MAX_THREADS) n = BRAID_KERNEL_MAX_THREADS;
  return n / 32 * 32;
}

/* A free buffer of at least `bytes` (never one a graph owns), or a new one. */
static ncclResult_t take_buf(struct braid_comm* comm, size_t bytes, int capturing, struct launch_buf** b_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_launch_state* s = comm->launch;
  if (!capturing) {
    BRAID_CHECK(poll_locked(comm)); /* a failed earlier launch fails this call */
    for (struct launch_buf* b = s->bufs; b != NULL; b = b->next)
      if (!b->busy && !b->graph && b->bytes >= bytes) {
        *b_p = b;
        return ncclSuccess;
      }
  }
  struct launch_buf* b = NULL;
  BRAID_CALLOC_GOTO(b, 1, res, err);
  b->bytes = bytes < 4096 ? 4096 : bytes;
  BRAID_CHECK_GOTO(s->dev->host_alloc((void**)&b->host, (void**)&b->dev, b->bytes), res, err_free);
  BRAID_CHECK_GOTO(s->dev->event_create(&b->done), res, err_host);
  b->graph = capturing;
  b->next = s->bufs;
  s->bufs = b;
  *b_p = b;
  return ncclSuccess;
err_host:
  s->dev->host_free(b->host);
err_free:
  free(b);
err:
  return res;
}

/* Streams the plan's tasks name, the kernel's first. */
static int plan_streams(const struct braid_plan* plan, struct braid_task* tasks, cudaStream_t* out) {
  int n = 0;
  out[n++] = plan->stream;
  for (struct braid_task* t = tasks; t != NULL; t = t->next) {
    if (t->comm != plan->comm) continue;
    int seen = 0;
    for (int i = 0; i < n && !seen; i++) seen = out[i] == t->stream;
    if (!seen && n < MAX_STREAMS) out[n++] = t->stream;
  }
  return n;
}

/* Items of one datatype (a kernel is built per datatype: kernel.cuh), per channel in order. */
static int count_dtype(const struct braid_plan* plan, int dtype, int* nblocks_p) {
  int total = 0, nblocks = 0;
  for (int j = 0; j < plan->njobs; j++) {
    int k = 0;
    for (int i = 0; i < plan->jobs[j].nworks; i++) k += plan->jobs[j].works[i].dtype == dtype;
    total += k;
    nblocks += k > 0;
  }
  *nblocks_p = nblocks;
  return total;
}

/* Fill the kernel arguments and the buffer: statuses, then overflow items, then p2p ops. */
static void pack(struct braid_plan* plan, int dtype, struct launch_buf* b, int inline_ok, struct braid_kernel_args* a) {
  struct braid_comm* comm = plan->comm;
  int nblocks = 0, total = count_dtype(plan, dtype, &nblocks), k = 0, blk = 0;
  size_t works_off = BRAID_MAX_CHANNELS * sizeof(int);
  size_t ops_off = works_off + (inline_ok ? 0 : (size_t)total * sizeof(struct braid_work));
  struct braid_work* dst = inline_ok ? a->inline_works : (struct braid_work*)(b->host + works_off);
  struct braid_p2p_op* ops_dev = (struct braid_p2p_op*)(b->dev + ops_off);
  int with_ops = dtype == ncclInt8 && plan->nops > 0;
  if (with_ops) memcpy(b->host + ops_off, plan->ops, plan->nops * sizeof(*plan->ops));
  a->channels = comm->launch->d_channels;
  a->works = inline_ok ? NULL : (const struct braid_work*)(b->dev + works_off);
  a->abort_flag = (const volatile uint32_t*)((char*)comm->dev_self + offsetof(struct braid_comm, abort_flag));
  a->status = (int*)b->dev;
  a->nblocks = nblocks;
  a->nworks = total;
  for (int j = 0; j < plan->njobs; j++) {
    const struct braid_host_job* job = &plan->jobs[j];
    int first = k;
    for (int i = 0; i < job->nworks; i++) {
      if (job->works[i].dtype != dtype) continue;
      dst[k] = job->works[i];
      if (dst[k].ops != NULL) dst[k].ops = ops_dev + (dst[k].ops - plan->ops);
      k++;
    }
    if (k == first) continue;
    a->block_channel[blk] = (uint8_t)job->ch->id;
    a->block_first[blk] = (uint32_t)first;
    a->block_nworks[blk] = (uint32_t)(k - first);
    ((volatile int*)b->host)[blk] = -1; /* not run yet */
    blk++;
  }
  b->nblocks = nblocks;
}

/* One kernel for the plan's items of one datatype. */
static ncclResult_t launch_dtype(struct braid_plan* plan, int dtype, int capturing) {
  struct braid_comm* comm = plan->comm;
  struct braid_launch_state* s = comm->launch;
  struct launch_buf* b = NULL;
  int nblocks = 0, total = count_dtype(plan, dtype, &nblocks);
  int inline_ok = total <= BRAID_KERNEL_INLINE_WORKS && braid_param_int(BRAID_PARAM_WORK_INLINE) != 0;
  size_t bytes = BRAID_MAX_CHANNELS * sizeof(int) + (inline_ok ? 0 : total * sizeof(struct braid_work)) +
                 (dtype == ncclInt8 ? plan->nops * sizeof(struct braid_p2p_op) : 0);
  struct braid_kernel_args* a = calloc(1, sizeof(*a)); /* 4 KiB: kept off user threads' stacks */
  if (a == NULL) {
    BRAID_WARN("Failed to allocate kernel arguments");
    return ncclSystemError;
  }
  pthread_mutex_lock(&comm->mutex);
  ncclResult_t res = take_buf(comm, bytes, capturing, &b);
  if (res == ncclSuccess) {
    pack(plan, dtype, b, inline_ok, a);
    res = s->dev->launch(a, dtype, nblocks, braid_launch_threads(plan->nthreads), plan->stream);
  }
  if (res == ncclSuccess) {
    b->busy = 1;
    if (!capturing) res = s->dev->event_record(b->done, plan->stream);
    /* The net proxy polls device connections only while it knows a kernel may be running
     * (net_proxy.c); a graph replay it learns of from its periodic nap instead. */
    braid_proxy_launched(comm);
  }
  pthread_mutex_unlock(&comm->mutex);
  free(a);
  return res;
}

ncclResult_t braid_launch_plan(struct braid_plan* plan, struct braid_task* tasks) {
  struct braid_comm* comm = plan->comm;
  struct braid_launch_state* s = comm->launch;
  const struct braid_device_ops* dev = s->dev;
  cudaStream_t streams[MAX_STREAMS];
  int capturing = 0, cur = -1;
  ncclResult_t res = ncclSuccess;
  BRAID_CHECK(dev->get_current(&cur));
  if (cur != comm->cuda_dev) BRAID_CHECK(dev->set_current(comm->cuda_dev));
  int nstreams = plan_streams(plan, tasks, streams);
  BRAID_CHECK_GOTO(dev->stream_capturing(plan->stream, &capturing), res, out);
  /* The kernel waits for what was queued before on every stream of the group. */
  for (int i = 1; i < nstreams; i++) {
    BRAID_CHECK_GOTO(dev->event_record(s->join, streams[i]), res, out);
    BRAID_CHECK_GOTO(dev->stream_wait_event(plan->stream, s->join), res, out);
  }
  for (int i = 0; i < plan->ncopies; i++)
    if (plan->copies[i].dst != plan->copies[i].src)
      BRAID_CHECK_GOTO(dev->memcpy_async(plan->copies[i].dst, plan->copies[i].src, plan->copies[i].bytes, plan->stream),
                       res, out);
  /* A kernel per datatype, in order of first appearance: every rank derives the same order
   * from the same calls, so connections stay in lock-step across the launches. */
  uint32_t launched = 0;
  for (int j = 0; j < plan->njobs; j++) {
    for (int i = 0; i < plan->jobs[j].nworks; i++) {
      int dtype = plan->jobs[j].works[i].dtype;
      if (dtype >= 32 || (launched >> dtype & 1)) continue;
      launched |= 1u << dtype;
      BRAID_CHECK_GOTO(launch_dtype(plan, dtype, capturing), res, out);
    }
  }
  /* Later work on every stream of the group waits for the kernels. */
  if (nstreams > 1) {
    BRAID_CHECK_GOTO(dev->event_record(s->join, plan->stream), res, out);
    for (int i = 1; i < nstreams; i++) BRAID_CHECK_GOTO(dev->stream_wait_event(streams[i], s->join), res, out);
  }
out:
  if (cur != comm->cuda_dev) dev->set_current(cur);
  return res;
}
