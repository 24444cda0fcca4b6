/*
 * launch.c - a communicator on a device (launch.h).
 *
 * Mirror: the kernels run on device copies of the channels (struct braid_dev_channel), of
 * every connection end (struct braid_conn, whose `step` only the kernels advance from then
 * on), of the ring orders and of the p2p pointer tables. Per channel the connections sit in
 * fixed slots: ring send/recv, tree up send/recv, tree down send/recv x3, then p2p send and
 * receive per peer.
 *
 * Launch: one kernel per communicator per group, grid = channels with work (one rank: copies
 * without a kernel, or up to 64 blocks per call, below: "one rank"). Work items go
 * inline in the kernel arguments when they fit; the kernel statuses, overflow items and p2p
 * ops go to a launch buffer in pinned, mapped host memory (as NCCL's work FIFO): written by
 * plain stores, read by the kernel. A buffer is reused only after the event recorded behind
 * its kernel completed; a buffer used by a launch into a capturing stream belongs to the
 * graph and is never rewritten (freed with the communicator). Every replay of a graph
 * writes its statuses there again: a poll reports the failure of a replay that finished.
 *
 * A group runs in two passes (enqueue.c): braid_launch_prepare for every communicator (mirror
 * new connections with setup copies, take the launch buffers, check the streams), then
 * braid_launch_plan for each. So nothing that could wait for a kernel (a legacy-stream copy,
 * an allocation) runs after the group's first kernel, which may already spin waiting for the
 * kernel of a communicator launched after it on the same device.
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
#include "transport/progress.h"

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
  int reserved;       /* taken by braid_launch_prepare for the launch that follows */
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
  /* braid_launch_prepare -> braid_launch_plan: one buffer per kernel of the plan, in launch
   * order, and whether the plan's stream is being captured. */
  struct launch_buf* prepared[BRAID_NUM_DTYPES];
  int nprepared, capturing;
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
      BRAID_CHECK(dev->setup_copy(&s->d_conns[c * s->slots + k], &copy, sizeof(copy)));
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
    BRAID_CHECK(dev->setup_copy(d.p2p_send, s->h_p2p, 2 * n * sizeof(*s->h_p2p)));
    BRAID_CHECK(dev->setup_copy(&s->d_channels[c], &d, sizeof(d)));
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
  BRAID_CHECK_GOTO(dev->setup_copy(s->d_ring_ranks, ranks, (size_t)nch * n * sizeof(int)), res, err);
  BRAID_CHECK_GOTO(braid_launch_sync(comm), res, err);
  free(ranks);
  return ncclSuccess;
err:
  free(ranks);
  return res; /* braid_comm_free calls braid_launch_free */
}

/* The watchdog's reads (braid_launch_running, on the progress engine's thread, which holds
 * no communicator lock) against braid_launch_free, which may run under comm->mutex: a leaf
 * lock of its own. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t running_once = PTHREAD_ONCE_INIT;
static void running_lock_child(void) {
  pthread_mutex_init(&running_lock, NULL); /* a parent's thread may have held it */
}
static void running_lock_atfork(void) {
  pthread_atfork(NULL, NULL, running_lock_child);
}

void braid_launch_free(struct braid_comm* comm) {
  pthread_once(&running_once, running_lock_atfork);
  pthread_mutex_lock(&running_lock);
  struct braid_launch_state* s = comm->launch;
  comm->launch = NULL;
  pthread_mutex_unlock(&running_lock);
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
}

int braid_launch_running(struct braid_comm* comm) {
  int n = 0;
  pthread_once(&running_once, running_lock_atfork);
  pthread_mutex_lock(&running_lock);
  struct braid_launch_state* s = comm->launch;
  /* Buffers are only added at the head (released there, take_buf); their status words and
   * counts may be rewritten meanwhile (pack): a stale read only miscounts for one tick. */
  for (struct launch_buf* b = s ? __atomic_load_n(&s->bufs, __ATOMIC_ACQUIRE) : NULL; b != NULL; b = b->next) {
    const volatile int* st = (const volatile int*)b->host;
    int nb = b->nblocks < BRAID_MAX_CHANNELS ? b->nblocks : BRAID_MAX_CHANNELS;
    for (int i = 0; i < nb; i++) n += st[i] == BRAID_KERNEL_STATUS_RUNNING;
  }
  pthread_mutex_unlock(&running_lock);
  return n;
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

/* An event query in relaxed capture mode: ncclCommGetAsyncError is polled from other threads
 * (PyTorch's watchdog) while the application may capture a graph in global mode, which a
 * plain cudaEventQuery would invalidate. */
static ncclResult_t query_relaxed(const struct braid_device_ops* dev, braid_event_t ev, int* done) {
  int mode = BRAID_CAPTURE_RELAXED;
  BRAID_CHECK(dev->capture_mode(&mode));
  ncclResult_t res = dev->event_query(ev, done);
  dev->capture_mode(&mode);
  return res;
}

/* A graph's buffer: the statuses its last replay wrote (-1 before the first ends; a replay
 * still running shows the previous one's). A failure is reported once. */
static ncclResult_t check_graph_buf(struct braid_comm* comm, struct launch_buf* b) {
  volatile int* st = (volatile int*)b->host;
  for (int i = 0; i < b->nblocks; i++) {
    int v = st[i];
    if (v <= BRAID_EXEC_OK) continue;
    st[i] = -1; /* reported; the next replay writes it again */
    ncclResult_t res = status_error(comm, v, i);
    if (comm->async_error == ncclSuccess) comm->async_error = res;
    return res;
  }
  return ncclSuccess;
}

/* Under comm->mutex: ncclCommGetAsyncError may poll from another thread while a call
 * launches. */
static ncclResult_t poll_locked(struct braid_comm* comm) {
  struct braid_launch_state* s = comm->launch;
  ncclResult_t res = ncclSuccess;
  for (struct launch_buf* b = s->bufs; b != NULL; b = b->next) {
    int done = 0;
    ncclResult_t r = ncclSuccess;
    if (b->graph) {
      r = check_graph_buf(comm, b);
    } else if (b->busy && !b->reserved) {
      BRAID_CHECK(query_relaxed(s->dev, b->done, &done));
      if (done) r = check_buf(comm, b);
    }
    if (res == ncclSuccess) res = r;
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
      ncclResult_t res = b->busy && !b->graph ? query_relaxed(s->dev, b->done, &done) : ncclSuccess;
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
      if (!b->busy && !b->graph && !b->reserved && b->bytes >= bytes) {
        b->reserved = 1;
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
  b->reserved = 1;
  b->next = s->bufs;
  __atomic_store_n(&s->bufs, b, __ATOMIC_RELEASE); /* b is whole before braid_launch_running sees it */
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

/* ---- one rank -----------------------------------------------------------------------------
 * A collective on one rank moves bytes only, unless its operator computes (PreMulSum, and
 * SumPostDiv, integer AVG); SUM, PROD, MIN and MAX of one input are the input. As NCCL does,
 * a plan whose collectives all only move bytes runs no kernel: each call is one
 * cudaMemcpyAsync on the kernel's stream (a memcpy node under capture), in call order, none
 * where sendbuff == recvbuff. A plan with a computing call keeps every call in the kernel (so
 * the calls stay in order, as they were), and each call is cut into up to
 * BRAID_MAX_CHANNELS pieces of at least ONE_RANK_PIECE bytes, one block each: one block is a
 * small fraction of a GPU's copy bandwidth. Every call has its first channel share on channel
 * 0 (plan.c add_coll), covering `count`: channel 0's items are the calls, in call order; the
 * other channels' items are shares of the same calls and are not used. */
#define ONE_RANK_PIECE (64 << 10)

static int one_rank(const struct braid_plan* plan) {
  return plan->comm->nranks == 1 && plan->njobs > 0 && plan->jobs[0].ch == &plan->comm->channels[0].dev;
}

static int computes(const struct braid_work* w) {
  return w->redop.kind == BRAID_RED_PREMULSUM || w->redop.kind == BRAID_RED_SUMPOSTDIV;
}

/* One rank, no call computes: the plan is copies. */
static int one_rank_copies(const struct braid_plan* plan) {
  if (!one_rank(plan)) return 0;
  for (int j = 0; j < plan->njobs; j++)
    for (int i = 0; i < plan->jobs[j].nworks; i++)
      if (plan->jobs[j].works[i].func == BRAID_FUNC_SendRecv || computes(&plan->jobs[j].works[i])) return 0;
  return 1;
}

/* One rank with a computing call: blocks of the kernel for one datatype. */
static int one_rank_nblocks(const struct braid_plan* plan, int dtype) {
  size_t most = 0;
  const struct braid_host_job* job = &plan->jobs[0];
  for (int i = 0; i < job->nworks; i++) {
    const struct braid_work* w = &job->works[i];
    size_t bytes = w->count * (size_t)braid_dtype_size(w->dtype);
    if (w->dtype == dtype && bytes > most) most = bytes;
  }
  size_t n = (most + ONE_RANK_PIECE - 1) / ONE_RANK_PIECE;
  return n < 1 ? 1 : n > BRAID_MAX_CHANNELS ? BRAID_MAX_CHANNELS : (int)n;
}

/* Piece b of nb of one call: 64-byte multiples (16-byte vectors stay aligned), 0 if empty. */
static int one_rank_piece(const struct braid_work* w, int nb, int b, size_t* off, size_t* count) {
  size_t es = (size_t)braid_dtype_size(w->dtype), unit = 64 / es, per = (w->count + nb - 1) / nb;
  per = (per + unit - 1) / unit * unit;
  *off = (size_t)b * per;
  if (*off >= w->count) return 0;
  *count = w->count - *off < per ? w->count - *off : per;
  return 1;
}

/* One rank's kernel items of one datatype: *nblocks_p blocks, the total returned. */
static int one_rank_count(const struct braid_plan* plan, int dtype, int* nblocks_p) {
  int nb = one_rank_nblocks(plan, dtype), total = 0, nblocks = 0;
  const struct braid_host_job* job = &plan->jobs[0];
  for (int b = 0; b < nb; b++) {
    int k = 0;
    size_t off = 0, count = 0;
    for (int i = 0; i < job->nworks; i++)
      k += job->works[i].dtype == dtype && one_rank_piece(&job->works[i], nb, b, &off, &count);
    total += k;
    nblocks += k > 0;
  }
  *nblocks_p = nblocks;
  return total;
}

/* The kernels' datatypes: none for a one-rank plan of copies. */
static int kernel_dtypes(const struct braid_plan* plan, int* out) {
  return one_rank_copies(plan) ? 0 : braid_launch_dtypes(plan, out);
}

/* A one-rank plan of copies, on the kernel's stream in call order. */
static ncclResult_t one_rank_copy(struct braid_plan* plan) {
  const struct braid_host_job* job = &plan->jobs[0];
  for (int i = 0; i < job->nworks; i++) {
    const struct braid_work* w = &job->works[i];
    if (w->sendbuff != w->recvbuff)
      BRAID_CHECK(plan->comm->launch->dev->memcpy_async(w->recvbuff, w->sendbuff,
                                                        w->count * (size_t)braid_dtype_size(w->dtype), plan->stream));
  }
  return ncclSuccess;
}

/* Items of one datatype (a kernel is built per datatype: kernel.cuh), per channel in order. */
static int count_dtype(const struct braid_plan* plan, int dtype, int* nblocks_p) {
  if (one_rank(plan)) return one_rank_count(plan, dtype, nblocks_p);
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
  if (one_rank(plan)) {
    int nb = one_rank_nblocks(plan, dtype);
    const struct braid_host_job* job = &plan->jobs[0];
    for (int c = 0; c < nb; c++) {
      int first = k;
      for (int i = 0; i < job->nworks; i++) {
        size_t off = 0, count = 0;
        if (job->works[i].dtype != dtype || !one_rank_piece(&job->works[i], nb, c, &off, &count)) continue;
        dst[k] = job->works[i];
        dst[k].chan_off = off;
        dst[k].chan_count = count;
        k++;
      }
      if (k == first) continue;
      a->block_channel[blk] = (uint8_t)job->ch->id; /* channel 0: one rank uses no connection */
      a->block_first[blk] = (uint32_t)first;
      a->block_nworks[blk] = (uint32_t)(k - first);
      ((volatile int*)b->host)[blk] = BRAID_KERNEL_STATUS_QUEUED;
      blk++;
    }
    b->nblocks = nblocks;
    return;
  }
  for (int j = 0; j < plan->njobs; j++) {
    const struct braid_host_job* job = &plan->jobs[j];
    int first = k;
    for (int i = 0; i < job->nworks; i++) {
      if (job->works[i].dtype != dtype) continue;
      dst[k] = job->works[i];
      if (dst[k].func == BRAID_FUNC_SendRecv && dst[k].ops != NULL) dst[k].ops = ops_dev + (dst[k].ops - plan->ops);
      k++;
    }
    if (k == first) continue;
    a->block_channel[blk] = (uint8_t)job->ch->id;
    a->block_first[blk] = (uint32_t)first;
    a->block_nworks[blk] = (uint32_t)(k - first);
    ((volatile int*)b->host)[blk] = BRAID_KERNEL_STATUS_QUEUED; /* the block says RUNNING when it starts */
    blk++;
  }
  b->nblocks = nblocks;
}

/* Bytes of a launch buffer for the plan's kernel of one datatype; *inline_p: its items fit
 * in the kernel arguments. */
static size_t buf_bytes(const struct braid_plan* plan, int dtype, int* inline_p) {
  int nblocks = 0, total = count_dtype(plan, dtype, &nblocks);
  *inline_p = total <= BRAID_KERNEL_INLINE_WORKS && braid_param_int(BRAID_PARAM_WORK_INLINE) != 0;
  return BRAID_MAX_CHANNELS * sizeof(int) + (*inline_p ? 0 : total * sizeof(struct braid_work)) +
         (dtype == ncclInt8 ? plan->nops * sizeof(struct braid_p2p_op) : 0);
}

/* The datatypes of the plan's kernels, in order of first appearance: every rank derives the
 * same order from the same calls, so connections stay in lock-step across the launches. */
int braid_launch_dtypes(const struct braid_plan* plan, int* out) {
  uint32_t seen = 0;
  int n = 0;
  for (int j = 0; j < plan->njobs; j++)
    for (int i = 0; i < plan->jobs[j].nworks; i++) {
      int dtype = plan->jobs[j].works[i].dtype;
      if (dtype < 0 || dtype >= BRAID_NUM_DTYPES || (seen >> dtype & 1)) continue;
      seen |= 1u << dtype;
      out[n++] = dtype;
    }
  return n;
}

/* The kernel for the plan's items of one datatype, into its prepared buffer. */
static ncclResult_t launch_dtype(struct braid_plan* plan, int dtype, struct launch_buf* b) {
  struct braid_comm* comm = plan->comm;
  struct braid_launch_state* s = comm->launch;
  int nblocks = 0, inline_ok = 0;
  (void)count_dtype(plan, dtype, &nblocks);
  (void)buf_bytes(plan, dtype, &inline_ok);
  struct braid_kernel_args* a = calloc(1, sizeof(*a)); /* 4 KiB: kept off user threads' stacks */
  if (a == NULL) {
    BRAID_WARN("Failed to allocate kernel arguments");
    return ncclSystemError;
  }
  pthread_mutex_lock(&comm->mutex);
  pack(plan, dtype, b, inline_ok, a);
  int nthreads = braid_launch_threads(one_rank(plan) && nblocks > 1 ? BRAID_KERNEL_MAX_THREADS : plan->nthreads);
  ncclResult_t res = s->dev->launch(a, dtype, nblocks, nthreads, plan->stream);
  b->reserved = 0;
  if (res == ncclSuccess) {
    b->busy = 1;
    if (!b->graph) res = s->dev->event_record(b->done, plan->stream);
    /* The progress engine polls device connections only while it knows a kernel may be
     * running (transport/progress.h); a graph replay it learns of from its periodic nap. */
    braid_progress_launched();
  }
  pthread_mutex_unlock(&comm->mutex);
  free(a);
  return res;
}

/* Whether the plan's streams are being captured; a mix is refused (joining a captured stream
 * with one that is not by events would pull the other into the graph, or fail). */
static ncclResult_t plan_capturing(const struct braid_plan* plan, struct braid_task* tasks, int* capturing_p) {
  const struct braid_device_ops* dev = plan->comm->launch->dev;
  cudaStream_t streams[MAX_STREAMS];
  int n = plan_streams(plan, tasks, streams), first = 0;
  for (int i = 0; i < n; i++) {
    int c = 0;
    BRAID_CHECK(dev->stream_capturing(streams[i], &c));
    if (i == 0) first = c;
    if (c != first) {
      BRAID_WARN(
          "rank %d: a group mixes a stream that is being captured into a CUDA graph (%p) with one that is not "
          "(%p): every stream of a group must be captured, or none",
          plan->comm->rank, (void*)(c ? streams[i] : streams[0]), (void*)(c ? streams[0] : streams[i]));
      return ncclInvalidUsage;
    }
  }
  *capturing_p = first;
  return ncclSuccess;
}

ncclResult_t braid_launch_check_group(struct braid_plan* plans, int nplans, struct braid_task* tasks) {
  int capturing = -1;
  for (int i = 0; i < nplans; i++) {
    struct braid_plan* a = &plans[i];
    int c = 0, ka = 0;
    if (a->njobs == 0) continue;
    BRAID_CHECK(plan_capturing(a, tasks, &c));
    if (capturing >= 0 && c != capturing) {
      BRAID_WARN(
          "rank %d: a group mixes streams that are being captured into a CUDA graph with streams that are not: "
          "every stream of a group must be captured, or none",
          a->comm->rank);
      return ncclInvalidUsage;
    }
    capturing = c;
    BRAID_CHECK(a->comm->launch->dev->stream_kind(a->stream, &ka));
    for (int j = 0; j < i; j++) {
      struct braid_plan* b = &plans[j];
      int kb = 0;
      if (b->njobs == 0 || b->comm->cuda_dev != a->comm->cuda_dev) continue;
      BRAID_CHECK(b->comm->launch->dev->stream_kind(b->stream, &kb));
      if (a->stream == b->stream || ka == BRAID_STREAM_LEGACY || kb == BRAID_STREAM_LEGACY) {
        /* The second kernel would queue behind the first, which waits for it: a deadlock. */
        BRAID_WARN(
            "ncclGroupEnd: ranks %d and %d (communicators %p and %p) share CUDA device %d and launch on %s: "
            "their kernels wait for each other; give each rank its own stream, not the legacy default stream",
            b->comm->rank, a->comm->rank, (void*)b->comm, (void*)a->comm, a->comm->cuda_dev,
            a->stream == b->stream ? "the same stream" : "the legacy default stream");
        return ncclInvalidUsage;
      }
    }
  }
  return ncclSuccess;
}

ncclResult_t braid_launch_prepare(struct braid_plan* plan, struct braid_task* tasks) {
  struct braid_comm* comm = plan->comm;
  struct braid_launch_state* s = comm->launch;
  int dtypes[BRAID_NUM_DTYPES], cur = -1;
  ncclResult_t res = ncclSuccess;
  s->nprepared = 0;
  if (plan->njobs == 0) return ncclSuccess;
  BRAID_CHECK(s->dev->get_current(&cur));
  if (cur != comm->cuda_dev) BRAID_CHECK(s->dev->set_current(comm->cuda_dev));
  BRAID_CHECK_GOTO(plan_capturing(plan, tasks, &s->capturing), res, out);
  int n = kernel_dtypes(plan, dtypes);
  pthread_mutex_lock(&comm->mutex);
  for (int k = 0; k < n && res == ncclSuccess; k++) {
    int inline_ok = 0;
    res = take_buf(comm, buf_bytes(plan, dtypes[k], &inline_ok), s->capturing, &s->prepared[k]);
    if (res == ncclSuccess) s->nprepared = k + 1;
  }
  if (res != ncclSuccess)
    for (int k = 0; k < s->nprepared; k++) s->prepared[k]->reserved = 0;
  pthread_mutex_unlock(&comm->mutex);
out:
  if (cur != comm->cuda_dev) s->dev->set_current(cur);
  return res;
}

ncclResult_t braid_launch_plan(struct braid_plan* plan, struct braid_task* tasks) {
  struct braid_comm* comm = plan->comm;
  struct braid_launch_state* s = comm->launch;
  const struct braid_device_ops* dev = s->dev;
  cudaStream_t streams[MAX_STREAMS];
  int cur = -1, dtypes[BRAID_NUM_DTYPES], k = 0;
  ncclResult_t res = ncclSuccess;
  BRAID_CHECK(dev->get_current(&cur));
  if (cur != comm->cuda_dev) BRAID_CHECK_GOTO(dev->set_current(comm->cuda_dev), res, out);
  int nstreams = plan_streams(plan, tasks, streams);
  /* The kernel waits for what was queued before on every stream of the group. */
  for (int i = 1; i < nstreams; i++) {
    BRAID_CHECK_GOTO(dev->event_record(s->join, streams[i]), res, out);
    BRAID_CHECK_GOTO(dev->stream_wait_event(plan->stream, s->join), res, out);
  }
  for (int i = 0; i < plan->ncopies; i++)
    if (plan->copies[i].dst != plan->copies[i].src)
      BRAID_CHECK_GOTO(dev->memcpy_async(plan->copies[i].dst, plan->copies[i].src, plan->copies[i].bytes, plan->stream),
                       res, out);
  if (one_rank_copies(plan)) BRAID_CHECK_GOTO(one_rank_copy(plan), res, out);
  int n = plan->njobs > 0 ? kernel_dtypes(plan, dtypes) : 0;
  if (n != s->nprepared) {
    BRAID_WARN("rank %d: launch of %d kernels with %d prepared buffers (braid_launch_prepare not called)", comm->rank,
               n, s->nprepared);
    res = ncclInternalError;
    goto out;
  }
  for (; k < n; k++) BRAID_CHECK_GOTO(launch_dtype(plan, dtypes[k], s->prepared[k]), res, out);
  /* Later work on every stream of the group waits for the kernels. */
  if (nstreams > 1) {
    BRAID_CHECK_GOTO(dev->event_record(s->join, plan->stream), res, out);
    for (int i = 1; i < nstreams; i++) BRAID_CHECK_GOTO(dev->stream_wait_event(streams[i], s->join), res, out);
  }
out:
  for (int i = k; i < s->nprepared; i++) s->prepared[i]->reserved = 0; /* not launched */
  s->nprepared = 0;
  if (cur != comm->cuda_dev) dev->set_current(cur);
  return res;
}
