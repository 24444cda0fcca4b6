/*
 * test_gpu.c - braid on a real GPU, through the public API only, with device buffers and a
 * stream per rank (the CUDA runtime is dlopen'd: gpu_rt.h). Every case carries the Check tag
 * `gpu`; the runner skips them where no CUDA device is usable (main.c). Ranks are forked
 * processes that are the first in their line to call CUDA (CUDA does not survive fork); several
 * ranks share the one GPU under BRAID_GPU_SHARING=1.
 *
 * TCases:
 *   matrix   AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, AlltoAll (grouped
 *            send/recv) and a Send/Recv ring x f32 f16 bf16 i32 u8 f64 (f8e4m3 on sm_90 and
 *            later) x sum prod max min avg PreMulSum (host-immediate and device scalar) x
 *            NCCL_PROTO LL, LL128, Simple, on 2 processes, 4 processes and 2 ranks in one
 *            process (ncclCommInitAll with device 0 twice), and one rank with Simple (copies
 *            by cudaMemcpyAsync, AVG and PreMulSum by a kernel of many blocks); counts 0, 1, 7, 1031, 65537 and,
 *            with Simple, 1048583 (4 MiB of f32); in place at 1031 and 1048583. Checked against
 *            refdata's reference, with 64 guard bytes after every receive buffer and non-root
 *            Reduce buffers left untouched.
 *   nvls     AllReduce with NCCL_ALGO=NVLS (one-shot, two-shot: BRAID_LSA_VARIANT) over the ranks'
 *            device-memory scratch mapped by CUDA IPC: 7 datatypes x every op x counts 1, 7,
 *            1031, 65521, in and out of place, on 1 process x 2 ranks, 2 and 4 processes.
 *   graph    an all-reduce captured into a CUDA graph, replayed 3 times with new input, each
 *            result checked (8 and 65537 elements, 2 processes).
 *   abort    2 processes: (kill) rank 1 is killed while rank 0 waits in a 64 MiB all-reduce:
 *            within 30 s ncclCommGetAsyncError reports an error whose text names rank 1, and
 *            ncclCommAbort returns and the stream drains within 10 s; (silent) rank 1 never
 *            joins: after 1 s rank 0's stream is still busy, ncclCommAbort returns and the
 *            stream drains within 10 s.
 *   nonblock config.blocking = 0: init and an all-reduce return ncclInProgress or success,
 *            ncclCommGetAsyncError reaches ncclSuccess, the result is right, finalize works.
 */
#ifdef BRAID_CHECK_SHIM
#include "../gpu/check_shim.h" /* built without libcheck: tests/gpu/run.sh */
#else
#include <check.h>
#endif
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_rt.h"
#include "nccl.h"
#include "refdata.h"

#define CALL_TIMEOUT_S 60 /* one collective, before a rank gives up and says so */
#define RUN_TIMEOUT_S 150 /* a whole multi-process case, before its processes are killed */
#define TCASE_TIMEOUT_S 200
#define GUARD 64
#define MAX_LOCAL 2
#define MAX_MSGS 12
#define BIG_COUNT ((size_t)1048583) /* prime; 4 MiB of f32 */
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- processes ------------------------------------------------------------------------------ */

struct gshared {
  ncclUniqueId id;
  atomic_int id_state; /* 0 pending, 1 ready, -1 failed */
};

struct gproc {
  int proc, nprocs;
  ncclUniqueId id;
  const void* arg;
};

typedef int (*gpu_body)(struct gproc* p);

/*
 * Run fn in nprocs forked processes; process 0 creates the unique id (no library or CUDA call
 * happens in this process). Returns the number of processes that failed, crashed or hung,
 * not counting `victim` when it died of SIGKILL as planned (-1: none).
 */
static int gpu_procs(int nprocs, gpu_body fn, const void* arg, int victim) {
  struct gshared* sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return nprocs;
  atomic_store(&sh->id_state, 0);
  pid_t pids[8] = {0};
  int failed = 0;
  fflush(stdout);
  fflush(stderr);
  for (int p = 0; p < nprocs; p++) {
    pids[p] = fork();
    if (pids[p] != 0) continue;
    struct gproc me = {p, nprocs, {{0}}, arg};
    if (p == 0) {
      ncclResult_t res = ncclGetUniqueId(&sh->id);
      if (res != ncclSuccess) fprintf(stderr, "proc 0: ncclGetUniqueId: %s\n", ncclGetErrorString(res));
      atomic_store(&sh->id_state, res == ncclSuccess ? 1 : -1);
    }
    double until = now_s() + 30;
    while (atomic_load(&sh->id_state) == 0 && now_s() < until) usleep(1000);
    if (atomic_load(&sh->id_state) != 1) _exit(1);
    me.id = sh->id;
    int r = fn(&me);
    fflush(stdout);
    fflush(stderr);
    _exit(r == 0 ? 0 : 1);
  }
  double deadline = now_s() + RUN_TIMEOUT_S, first_failure = 0;
  int alive = nprocs;
  while (alive > 0) {
    alive = 0;
    for (int p = 0; p < nprocs; p++) {
      if (pids[p] <= 0) continue;
      int status;
      pid_t w = waitpid(pids[p], &status, WNOHANG);
      if (w == 0) {
        alive++;
        continue;
      }
      int planned = p == victim && w > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      if (!planned && (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        if (w > 0 && WIFSIGNALED(status)) fprintf(stderr, "gpu: process %d killed by signal %d\n", p, WTERMSIG(status));
        if (p == victim) fprintf(stderr, "gpu: process %d was to be killed by SIGKILL but was not\n", p);
        failed++;
        if (first_failure == 0) first_failure = now_s();
      }
      pids[p] = 0;
    }
    /* A failed rank leaves its peers waiting: 10 s to report their own view, then kill. */
    int give_up = now_s() > deadline || (first_failure > 0 && now_s() > first_failure + 10);
    if (alive > 0 && give_up) {
      fprintf(stderr, "gpu: %d processes still running %s: killing them\n", alive,
              first_failure > 0 ? "10 s after another failed" : "at the case's time limit");
      for (int p = 0; p < nprocs; p++)
        if (pids[p] > 0) {
          kill(pids[p], SIGKILL);
          waitpid(pids[p], NULL, 0);
          failed++;
        }
      break;
    }
    if (alive > 0) usleep(2000);
  }
  munmap(sh, sizeof(*sh));
  return failed;
}

/* ---- one process's ranks on the GPU --------------------------------------------------------- */

struct gctx {
  const struct bench_cuda* rt;
  const char* label;
  int nlocal, nranks, cc; /* ranks here, in all; compute capability (major*10 + minor) */
  int ranks[MAX_LOCAL], devs[MAX_LOCAL];
  ncclComm_t comms[MAX_LOCAL];
  cudaStream_t streams[MAX_LOCAL];
  char *dsend[MAX_LOCAL], *drecv[MAX_LOCAL], *dscalar[MAX_LOCAL];
  char *hsend, *hrecv; /* host staging, cap + GUARD bytes */
  size_t cap;          /* bytes of each device buffer, guard included */
  long calls, wrong;
  int msgs;
};

/* Print a failure line naming the process's ranks (stderr), count it; returns 1. */
__attribute__((format(printf, 2, 3))) static int gfail(struct gctx* c, const char* fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  c->wrong++;
  if (c->msgs++ < MAX_MSGS) fprintf(stderr, "gpu %s rank %d/%d: %s\n", c->label, c->ranks[0], c->nranks, buf);
  return 1;
}

#define CUCHECK(c, call)                                                                                               \
  do {                                                                                                                 \
    int e_ = (call);                                                                                                   \
    if (e_ != BENCH_CUDA_SUCCESS) return gfail((c), "%s:%d: %s: %s", __FILE__, __LINE__, #call, bench_cuda_error(e_)); \
  } while (0)
#define NCHECK(c, call)                                                                          \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess)                                                                       \
      return gfail((c), "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
                   ncclGetLastError(NULL));                                                      \
  } while (0)

/* Wait for stream i: poll it and the communicator's error state for CALL_TIMEOUT_S. */
static int gwait(struct gctx* c, int i, const char* what) {
  double until = now_s() + CALL_TIMEOUT_S;
  for (;;) {
    int e = c->rt->StreamQuery(c->streams[i]);
    if (e == BENCH_CUDA_SUCCESS) return 0;
    if (e != BENCH_CUDA_NOT_READY) return gfail(c, "%s: the stream failed: %s", what, bench_cuda_error(e));
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(c->comms[i], &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
      return gfail(c, "%s: ncclCommGetAsyncError %s: %s", what, ncclGetErrorString(async),
                   ncclGetLastError(c->comms[i]));
    if (now_s() > until) {
      gfail(c, "%s did not complete within %d s", what, CALL_TIMEOUT_S);
      fflush(stderr);
      _exit(1); /* peers wait on us; the runner reports and cleans up */
    }
    usleep(20);
  }
}

/* Bind this process's ranks (ncclCommInitRank, or ncclCommInitAll for a single process of
 * several ranks), buffers of `cap` bytes, streams. `config` may be NULL. */
static int gopen(struct gctx* c, const struct gproc* p, int nlocal, size_t cap, const char* label,
                 ncclConfig_t* config) {
  char why[256];
  memset(c, 0, sizeof(*c));
  c->label = label;
  c->nlocal = nlocal;
  c->nranks = p->nprocs * nlocal;
  c->cap = cap + GUARD;
  c->ranks[0] = p->proc * nlocal;
  c->rt = bench_cuda_load(why, sizeof(why));
  if (c->rt == NULL) return gfail(c, "%s", why);
  int ndev = 0, major = 0, minor = 0;
  CUCHECK(c, c->rt->GetDeviceCount(&ndev));
  for (int i = 0; i < nlocal; i++) {
    c->ranks[i] = p->proc * nlocal + i;
    c->devs[i] = c->ranks[i] % ndev;
  }
  CUCHECK(c, c->rt->DeviceGetAttribute(&major, BENCH_CUDA_ATTR_CC_MAJOR, c->devs[0]));
  CUCHECK(c, c->rt->DeviceGetAttribute(&minor, BENCH_CUDA_ATTR_CC_MINOR, c->devs[0]));
  c->cc = major * 10 + minor;
  if (nlocal == 1) {
    CUCHECK(c, c->rt->SetDevice(c->devs[0]));
    if (config) { /* non-blocking: ncclInProgress, settled by the caller */
      ncclResult_t r = ncclCommInitRankConfig(&c->comms[0], c->nranks, p->id, c->ranks[0], config);
      if (r != ncclSuccess && r != ncclInProgress)
        return gfail(c, "ncclCommInitRankConfig: %s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
    } else
      NCHECK(c, ncclCommInitRank(&c->comms[0], c->nranks, p->id, c->ranks[0]));
  } else {
    NCHECK(c, ncclCommInitAll(c->comms, nlocal, c->devs));
  }
  for (int i = 0; i < nlocal && !config; i++) { /* non-blocking: checked once init is done */
    int dev = -2;
    NCHECK(c, ncclCommCuDevice(c->comms[i], &dev));
    if (dev != c->devs[i])
      return gfail(c, "ncclCommCuDevice is %d, expected %d: braid %s", dev, c->devs[i],
                   dev < 0 ? "runs in host mode although a CUDA device is usable" : "bound another device");
  }
  for (int i = 0; i < nlocal; i++) {
    void *s = NULL, *r = NULL, *k = NULL;
    CUCHECK(c, c->rt->SetDevice(c->devs[i]));
    CUCHECK(c, c->rt->Malloc(&s, c->cap));
    CUCHECK(c, c->rt->Malloc(&r, c->cap));
    CUCHECK(c, c->rt->Malloc(&k, 64));
    c->dsend[i] = s, c->drecv[i] = r, c->dscalar[i] = k;
    CUCHECK(c, c->rt->StreamCreateWithFlags(&c->streams[i], BENCH_CUDA_STREAM_NON_BLOCKING));
  }
  c->hsend = malloc(c->cap);
  c->hrecv = malloc(c->cap);
  if (!c->hsend || !c->hrecv) return gfail(c, "out of host memory");
  return 0;
}

static void gclose(struct gctx* c, int destroy) {
  for (int i = 0; i < c->nlocal; i++) {
    if (c->comms[i] && destroy) ncclCommDestroy(c->comms[i]);
    if (c->rt == NULL) continue;
    if (c->dsend[i]) c->rt->Free(c->dsend[i]);
    if (c->drecv[i]) c->rt->Free(c->drecv[i]);
    if (c->dscalar[i]) c->rt->Free(c->dscalar[i]);
    if (c->streams[i]) c->rt->StreamDestroy(c->streams[i]);
  }
  free(c->hsend);
  free(c->hrecv);
}

/* Copy on stream i and wait. */
static int gcopy(struct gctx* c, int i, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 0;
  CUCHECK(c, c->rt->MemcpyAsync(dst, src, bytes, BENCH_CUDA_MEMCPY_DEFAULT, c->streams[i]));
  CUCHECK(c, c->rt->StreamSynchronize(c->streams[i]));
  return 0;
}

/* ---- the correctness matrix ----------------------------------------------------------------- */

enum gcoll { G_ALLREDUCE, G_REDUCE, G_REDUCESCATTER, G_ALLGATHER, G_BROADCAST, G_ALLTOALL, G_SENDRECV, G_NUM };
static const char* const gcoll_names[G_NUM] = {"AllReduce", "Reduce",   "ReduceScatter", "AllGather",
                                               "Broadcast", "AlltoAll", "SendRecv"};
static int reduces(int coll) {
  return coll <= G_REDUCESCATTER;
}

struct gcall {
  int coll, dtype, op, root, in_place;
  size_t count;
  uint32_t seed;
};

/* Elements of the input and of the output of rank `rank`, and where they sit in place. */
static void gshape(const struct gcall* k, int nranks, int rank, size_t* in, size_t* out, size_t* in_off,
                   size_t* out_off) {
  size_t n = (size_t)nranks, cnt = k->count;
  *in = cnt, *out = cnt, *in_off = 0, *out_off = 0;
  if (k->coll == G_ALLGATHER) *out = n * cnt, *in_off = (size_t)rank * cnt;
  if (k->coll == G_REDUCESCATTER) *in = n * cnt, *out_off = (size_t)rank * cnt;
  if (k->coll == G_ALLTOALL) *in = *out = n * cnt;
}

static ncclResult_t gissue(struct gctx* c, int i, const struct gcall* k, ncclRedOp_t op) {
  size_t elt = ref_dtype_size(k->dtype), in, out, in_off, out_off;
  int rank = c->ranks[i], n = c->nranks;
  gshape(k, n, rank, &in, &out, &in_off, &out_off);
  const char* s = k->in_place ? c->drecv[i] + in_off * elt : c->dsend[i];
  char* r = k->in_place ? c->drecv[i] + out_off * elt : c->drecv[i];
  ncclDataType_t t = (ncclDataType_t)k->dtype;
  ncclComm_t comm = c->comms[i];
  cudaStream_t st = c->streams[i];
  switch (k->coll) {
    case G_ALLREDUCE:
      return ncclAllReduce(s, r, k->count, t, op, comm, st);
    case G_REDUCE:
      return ncclReduce(s, r, k->count, t, op, k->root, comm, st);
    case G_REDUCESCATTER:
      return ncclReduceScatter(s, r, k->count, t, op, comm, st);
    case G_ALLGATHER:
      return ncclAllGather(s, r, k->count, t, comm, st);
    case G_BROADCAST:
      return ncclBroadcast(s, r, k->count, t, k->root, comm, st);
    case G_SENDRECV: {
      ncclResult_t a = ncclSend(s, k->count, t, (rank + 1) % n, comm, st);
      ncclResult_t b = ncclRecv(r, k->count, t, (rank - 1 + n) % n, comm, st);
      return a != ncclSuccess ? a : b;
    }
    case G_ALLTOALL:
      for (int p = 0; p < n; p++) {
        ncclResult_t a = ncclSend(s + (size_t)p * k->count * elt, k->count, t, p, comm, st);
        ncclResult_t b = ncclRecv(r + (size_t)p * k->count * elt, k->count, t, p, comm, st);
        if (a != ncclSuccess || b != ncclSuccess) return a != ncclSuccess ? a : b;
      }
      return ncclSuccess;
  }
  return ncclInvalidArgument;
}

/* Rank i's result in c->hrecv (output region first), against the reference. */
static size_t gverify(struct gctx* c, int i, const struct gcall* k, const char* got, size_t out, char* msg,
                      size_t len) {
  int rank = c->ranks[i], n = c->nranks;
  size_t elt = ref_dtype_size(k->dtype), cnt = k->count, bad = 0;
  enum ref_kind kind = reduces(k->coll) ? ref_kind_of(k->op) : REF_KIND_SUM;
  struct ref_red red = {k->dtype, k->op, n, k->seed};
  switch (k->coll) {
    case G_ALLREDUCE:
      return ref_check_reduce(&red, 0, cnt, got, msg, len);
    case G_REDUCE:
      if (rank == k->root) return ref_check_reduce(&red, 0, cnt, got, msg, len);
      for (size_t b = 0; b < out * elt; b++) bad += (unsigned char)got[b] != 0xa5;
      if (bad) snprintf(msg, len, "%zu bytes of a non-root receive buffer were written", bad);
      return bad;
    case G_REDUCESCATTER:
      return ref_check_reduce(&red, (size_t)rank * cnt, cnt, got, msg, len);
    case G_BROADCAST:
      return ref_check_copy(k->dtype, kind, k->seed, k->root, 0, cnt, got, msg, len);
    case G_SENDRECV:
      return ref_check_copy(k->dtype, kind, k->seed, (rank - 1 + n) % n, 0, cnt, got, msg, len);
    case G_ALLGATHER:
    case G_ALLTOALL:
      for (int p = 0; p < n && !bad; p++)
        bad += ref_check_copy(k->dtype, kind, k->seed, p, k->coll == G_ALLTOALL ? (size_t)rank * cnt : 0, cnt,
                              got + (size_t)p * cnt * elt, msg, len);
      return bad;
  }
  return 1;
}

/* One call on every rank of this process (one group), checked. Nonzero: stop the case. */
static int gcall_run(struct gctx* c, const struct gcall* k) {
  size_t elt = ref_dtype_size(k->dtype);
  enum ref_kind kind = reduces(k->coll) ? ref_kind_of(k->op) : REF_KIND_SUM;
  ncclRedOp_t ops[MAX_LOCAL];
  char what[160];
  snprintf(what, sizeof(what), "%s %s %s count %zu root %d %s", gcoll_names[k->coll], ref_dtype_name(k->dtype),
           reduces(k->coll) ? ref_op_name(k->op) : "-", k->count, k->root, k->in_place ? "in place" : "out of place");
  for (int i = 0; i < c->nlocal; i++) {
    size_t in, out, in_off, out_off, span;
    gshape(k, c->nranks, c->ranks[i], &in, &out, &in_off, &out_off);
    span = (k->in_place ? (in_off + in > out_off + out ? in_off + in : out_off + out) : out) * elt;
    if (span + GUARD > c->cap || in * elt > c->cap) return gfail(c, "%s: buffers too small (test bug)", what);
    ref_fill(k->dtype, kind, k->seed, c->ranks[i], 0, in, c->hsend);
    memset(c->hrecv, 0xa5, span + GUARD);
    if (k->in_place) memcpy(c->hrecv + in_off * elt, c->hsend, in * elt);
    CUCHECK(c, c->rt->SetDevice(c->devs[i]));
    if (!k->in_place && gcopy(c, i, c->dsend[i], c->hsend, in * elt)) return 1;
    if (gcopy(c, i, c->drecv[i], c->hrecv, span + GUARD)) return 1;
    ops[i] = (ncclRedOp_t)(k->op < REF_PMS_IMM ? k->op : ncclSum);
    if (reduces(k->coll) && k->op >= REF_PMS_IMM) {
      char scalar[8];
      int dev = k->op == REF_PMS_DEV;
      ref_pms_scalar(k->dtype, dev, scalar);
      if (dev && gcopy(c, i, c->dscalar[i], scalar, elt)) return 1;
      NCHECK(c, ncclRedOpCreatePreMulSum(&ops[i], dev ? (void*)c->dscalar[i] : (void*)scalar, (ncclDataType_t)k->dtype,
                                         dev ? ncclScalarDevice : ncclScalarHostImmediate, c->comms[i]));
    }
  }
  NCHECK(c, ncclGroupStart());
  for (int i = 0; i < c->nlocal; i++) {
    CUCHECK(c, c->rt->SetDevice(c->devs[i]));
    ncclResult_t res = gissue(c, i, k, ops[i]);
    if (res != ncclSuccess) {
      ncclGroupEnd();
      return gfail(c, "%s: %s (%s)", what, ncclGetErrorString(res), ncclGetLastError(c->comms[i]));
    }
  }
  ncclResult_t end = ncclGroupEnd();
  if (end != ncclSuccess)
    return gfail(c, "%s: ncclGroupEnd: %s (%s)", what, ncclGetErrorString(end), ncclGetLastError(NULL));
  c->calls++;
  for (int i = 0; i < c->nlocal; i++) {
    size_t in, out, in_off, out_off, span;
    char msg[256] = "";
    if (gwait(c, i, what)) return 1;
    if (reduces(k->coll) && k->op >= REF_PMS_IMM) NCHECK(c, ncclRedOpDestroy(ops[i], c->comms[i]));
    gshape(k, c->nranks, c->ranks[i], &in, &out, &in_off, &out_off);
    span = (k->in_place ? (in_off + in > out_off + out ? in_off + in : out_off + out) : out) * elt;
    if (gcopy(c, i, c->hrecv, c->drecv[i], span + GUARD)) return 1;
    size_t res_off = k->in_place ? out_off * elt : 0;
    size_t bad = gverify(c, i, k, c->hrecv + res_off, out, msg, sizeof(msg));
    if (bad) gfail(c, "%s: %zu wrong elements; %s", what, bad, msg);
    size_t guard = 0;
    for (size_t b = span; b < span + GUARD; b++) guard += (unsigned char)c->hrecv[b] != 0xa5;
    if (guard) gfail(c, "%s: %zu bytes written past the receive buffer", what, guard);
  }
  return 0;
}

enum gmode { GM_PROCS2, GM_PROCS4, GM_ONEPROC2, GM_ONERANK };
static const char* const gmode_names[] = {"2 processes", "4 processes", "1 process x 2 ranks", "1 rank"};
static const char* const protos[] = {"LL", "LL128", "Simple"};

struct matrix_case {
  int mode, proto;
};
static const struct matrix_case matrix_cases[] = {
    {GM_PROCS2, 0}, {GM_PROCS2, 1},   {GM_PROCS2, 2},   {GM_PROCS4, 0},   {GM_PROCS4, 1},
    {GM_PROCS4, 2}, {GM_ONEPROC2, 0}, {GM_ONEPROC2, 1}, {GM_ONEPROC2, 2}, {GM_ONERANK, 2},
};

/* Run the call list of one case; stops at the first call that cannot go on. */
static int matrix_calls(struct gctx* c, int simple) {
  static const int all_dtypes[] = {ncclFloat32, ncclFloat16, ncclBfloat16,  ncclInt32,
                                   ncclUint8,   ncclFloat64, ncclFloat8e4m3};
  static const int mid_dtypes[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt32};
  static const int big_dtypes[] = {ncclFloat32, ncclBfloat16, ncclUint8};
  static const int mid_ops[] = {REF_SUM, REF_MAX, REF_AVG, REF_PMS_IMM};
  static const int big_ops[] = {REF_SUM, REF_MIN};
  static const size_t small[] = {0, 1, 7, 1031};
  struct gcall k = {0};
  uint32_t seed = 1;
  int ntypes = NELEMS(all_dtypes) - (c->cc < 90); /* fp8 needs sm_90 */
  for (int s = 0; s < NELEMS(small); s++)
    for (int d = 0; d < ntypes; d++)
      for (int coll = 0; coll < G_NUM; coll++)
        for (int op = 0; op < (reduces(coll) ? REF_NUM_OPS : 1); op++) {
          k = (struct gcall){coll, all_dtypes[d], op, (int)(seed % (uint32_t)c->nranks), 0, small[s], seed};
          seed++;
          if (gcall_run(c, &k)) return 1;
          int in_place_ok = coll != G_ALLTOALL && coll != G_SENDRECV && coll != G_REDUCE;
          if (small[s] == 1031 && op == 0 && in_place_ok) {
            k.in_place = 1, k.seed = seed++;
            if (gcall_run(c, &k)) return 1;
          }
        }
  for (int d = 0; d < NELEMS(mid_dtypes); d++)
    for (int coll = 0; coll < G_NUM; coll++)
      for (int o = 0; o < (reduces(coll) ? NELEMS(mid_ops) : 1); o++) {
        k = (struct gcall){coll, mid_dtypes[d], mid_ops[o], (int)(seed % (uint32_t)c->nranks), 0, 65537, seed};
        seed++;
        if (gcall_run(c, &k)) return 1;
      }
  if (!simple) return 0; /* the large messages run with Simple only, to keep the suite short */
  for (int d = 0; d < NELEMS(big_dtypes); d++)
    for (int coll = 0; coll < G_NUM; coll++)
      for (int o = 0; o < (reduces(coll) ? NELEMS(big_ops) : 1); o++) {
        k = (struct gcall){coll, big_dtypes[d], big_ops[o], (int)(seed % (uint32_t)c->nranks), 0, BIG_COUNT, seed};
        seed++;
        if (gcall_run(c, &k)) return 1;
      }
  k = (struct gcall){G_ALLREDUCE, ncclFloat32, REF_SUM, 0, 1, BIG_COUNT, seed};
  return gcall_run(c, &k);
}

static int body_matrix(struct gproc* p) {
  const struct matrix_case* m = p->arg;
  int nlocal = m->mode == GM_ONEPROC2 ? 2 : 1;
  char label[96];
  struct gctx c;
  snprintf(label, sizeof(label), "matrix %s NCCL_PROTO=%s", gmode_names[m->mode], protos[m->proto]);
  size_t cap = (size_t)(m->mode == GM_PROCS4 ? 4 : 2) * BIG_COUNT * 4;
  double t0 = now_s();
  if (gopen(&c, p, nlocal, cap, label, NULL)) return 1;
  matrix_calls(&c, m->proto == 2);
  if (c.ranks[0] == 0)
    fprintf(stderr, "gpu %s: %ld calls, %ld failures (%.1f s)\n", label, c.calls, c.wrong, now_s() - t0);
  gclose(&c, c.wrong == 0);
  return c.wrong != 0;
}

START_TEST(test_matrix) {
  const struct matrix_case* m = &matrix_cases[_i];
  setenv("BRAID_GPU_SHARING", "1", 1);
  setenv("NCCL_PROTO", protos[m->proto], 1);
  int nprocs = m->mode == GM_PROCS4 ? 4 : m->mode == GM_PROCS2 ? 2 : 1;
  int failed = gpu_procs(nprocs, body_matrix, m, -1);
  ck_assert_msg(failed == 0, "matrix, %s, NCCL_PROTO=%s: %d processes failed (see the lines above)",
                gmode_names[m->mode], protos[m->proto], failed);
}
END_TEST

/* ---- NVLS-style one-shot / two-shot all-reduce over the peers' device memory (kernels/lsa.h) ---- */

static const char* const lsa_variants[] = {"ONESHOT", "TWOSHOT"};
static const struct matrix_case nvls_cases[] = {
    /* proto: the index into lsa_variants */
    {GM_ONEPROC2, 0}, {GM_ONEPROC2, 1}, {GM_PROCS2, 0}, {GM_PROCS2, 1}, {GM_PROCS4, 0}, {GM_PROCS4, 1},
};

static int body_nvls(struct gproc* p) {
  static const int dtypes[] = {ncclFloat32, ncclFloat16, ncclBfloat16,  ncclInt32,
                               ncclUint8,   ncclFloat64, ncclFloat8e4m3};
  static const size_t counts[] = {1, 7, 1031, 65521}; /* f64 x 65521 fits the 512 KiB slot */
  const struct matrix_case* m = p->arg;
  char label[96];
  struct gctx c;
  snprintf(label, sizeof(label), "nvls %s BRAID_LSA_VARIANT=%s", gmode_names[m->mode], lsa_variants[m->proto]);
  double t0 = now_s();
  if (gopen(&c, p, m->mode == GM_ONEPROC2 ? 2 : 1, 65521 * 8, label, NULL)) return 1;
  int ntypes = NELEMS(dtypes) - (c.cc < 90);
  uint32_t seed = 1;
  for (int n = 0; n < NELEMS(counts) && c.wrong == 0; n++)
    for (int d = 0; d < ntypes; d++)
      for (int op = 0; op < REF_NUM_OPS; op++)
        for (int in_place = 0; in_place < 2; in_place++) {
          struct gcall k = {G_ALLREDUCE, dtypes[d], op, 0, in_place, counts[n], seed++};
          if (gcall_run(&c, &k)) goto out;
        }
out:
  if (c.ranks[0] == 0)
    fprintf(stderr, "gpu %s: %ld calls, %ld failures (%.1f s)\n", label, c.calls, c.wrong, now_s() - t0);
  gclose(&c, c.wrong == 0);
  return c.wrong != 0;
}

/* NCCL_ALGO=NVLS: every call must take the one-/two-shot path (no other algorithm is allowed,
 * so a communicator without the scratch fails the calls instead of passing on the ring). */
START_TEST(test_nvls) {
  const struct matrix_case* m = &nvls_cases[_i];
  setenv("BRAID_GPU_SHARING", "1", 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  setenv("BRAID_LSA_VARIANT", lsa_variants[m->proto], 1);
  int nprocs = m->mode == GM_PROCS4 ? 4 : m->mode == GM_PROCS2 ? 2 : 1;
  int failed = gpu_procs(nprocs, body_nvls, m, -1);
  ck_assert_msg(failed == 0, "nvls, %s, BRAID_LSA_VARIANT=%s: %d processes failed (see the lines above)",
                gmode_names[m->mode], lsa_variants[m->proto], failed);
}
END_TEST

/* ---- CUDA graph capture --------------------------------------------------------------------- */

static int body_graph(struct gproc* p) {
  static const size_t counts[] = {8, 65537};
  struct gctx c;
  if (gopen(&c, p, 1, 65537 * 4, "graph", NULL)) return 1;
  for (int n = 0; n < NELEMS(counts); n++) {
    size_t count = counts[n], bytes = count * 4;
    bench_cuda_graph_t graph = NULL;
    bench_cuda_graph_exec_t exec = NULL;
    CUCHECK(&c, c.rt->StreamBeginCapture(c.streams[0], BENCH_CUDA_CAPTURE_THREAD_LOCAL));
    ncclResult_t res = ncclAllReduce(c.dsend[0], c.drecv[0], count, ncclFloat32, ncclSum, c.comms[0], c.streams[0]);
    int end = c.rt->StreamEndCapture(c.streams[0], &graph);
    if (res != ncclSuccess)
      return gfail(&c, "ncclAllReduce under capture: %s (%s)", ncclGetErrorString(res), ncclGetLastError(c.comms[0]));
    CUCHECK(&c, end);
    CUCHECK(&c, c.rt->GraphInstantiateWithFlags(&exec, graph, 0));
    for (int rep = 0; rep < 3; rep++) {
      struct gcall k = {G_ALLREDUCE, ncclFloat32, REF_SUM, 0, 0, count, (uint32_t)(100 + 10 * n + rep)};
      char msg[256] = "", what[96];
      snprintf(what, sizeof(what), "graph replay %d of an all-reduce of %zu floats", rep + 1, count);
      ref_fill(ncclFloat32, REF_KIND_SUM, k.seed, c.ranks[0], 0, count, c.hsend);
      memset(c.hrecv, 0xa5, bytes);
      if (gcopy(&c, 0, c.dsend[0], c.hsend, bytes) || gcopy(&c, 0, c.drecv[0], c.hrecv, bytes)) return 1;
      CUCHECK(&c, c.rt->GraphLaunch(exec, c.streams[0]));
      if (gwait(&c, 0, what) || gcopy(&c, 0, c.hrecv, c.drecv[0], bytes)) return 1;
      size_t bad = gverify(&c, 0, &k, c.hrecv, count, msg, sizeof(msg));
      if (bad) gfail(&c, "%s: %zu wrong elements; %s", what, bad, msg);
    }
    c.rt->GraphExecDestroy(exec);
    c.rt->GraphDestroy(graph);
  }
  gclose(&c, c.wrong == 0);
  return c.wrong != 0;
}

START_TEST(test_graph) {
  setenv("BRAID_GPU_SHARING", "1", 1);
  unsetenv("NCCL_PROTO");
  ck_assert_msg(gpu_procs(2, body_graph, NULL, -1) == 0, "graph capture: processes failed (see above)");
}
END_TEST

/* ---- abort ---------------------------------------------------------------------------------- */

/* Wait until stream 0 has drained (the kernel left), up to `secs`; 0 when it did. */
static int drained(struct gctx* c, double secs) {
  double until = now_s() + secs;
  while (now_s() < until) {
    if (c->rt->StreamQuery(c->streams[0]) != BENCH_CUDA_NOT_READY) return 0;
    usleep(1000);
  }
  return 1;
}

static int body_abort(struct gproc* p) {
  int kill_peer = *(const int*)p->arg;
  size_t count = (64u << 20) / 4;
  struct gctx c;
  if (gopen(&c, p, 1, count * 4, kill_peer ? "abort (kill)" : "abort (silent peer)", NULL)) return 1;
  struct gcall warm = {G_ALLREDUCE, ncclFloat32, REF_SUM, 0, 0, 1024, 7};
  if (gcall_run(&c, &warm) || c.wrong) return 1; /* everyone is up */
  if (p->proc == 1) {
    if (kill_peer) raise(SIGKILL);
    sleep(4); /* never joins */
    ncclCommAbort(c.comms[0]);
    return 0;
  }
  NCHECK(&c, ncclAllReduce(c.dsend[0], c.drecv[0], count, ncclFloat32, ncclSum, c.comms[0], c.streams[0]));
  double t0 = now_s();
  if (kill_peer) {
    ncclResult_t async = ncclSuccess;
    while (now_s() < t0 + 30 && (async == ncclSuccess || async == ncclInProgress)) {
      if (c.rt->StreamQuery(c.streams[0]) == BENCH_CUDA_SUCCESS)
        return gfail(&c, "the all-reduce completed without rank 1");
      NCHECK(&c, ncclCommGetAsyncError(c.comms[0], &async));
      usleep(1000);
    }
    if (async == ncclSuccess || async == ncclInProgress)
      return gfail(&c, "rank 1 was killed but ncclCommGetAsyncError still says %s after 30 s",
                   ncclGetErrorString(async));
    const char* msg = ncclGetLastError(c.comms[0]);
    fprintf(stderr, "gpu abort (kill): error after %.1f s: %s: %s\n", now_s() - t0, ncclGetErrorString(async), msg);
    if (msg == NULL || strstr(msg, "rank 1") == NULL)
      gfail(&c, "the error does not name rank 1: %s", msg ? msg : "(none)");
  } else {
    usleep(1000000);
    if (c.rt->StreamQuery(c.streams[0]) != BENCH_CUDA_NOT_READY)
      return gfail(&c, "the all-reduce's stream finished although rank 1 never joined");
  }
  double a0 = now_s();
  ncclResult_t res = ncclCommAbort(c.comms[0]);
  double took = now_s() - a0;
  if (res != ncclSuccess) gfail(&c, "ncclCommAbort: %s", ncclGetErrorString(res));
  if (took > 10) gfail(&c, "ncclCommAbort took %.1f s", took);
  if (drained(&c, 10)) gfail(&c, "the stream is still busy 10 s after ncclCommAbort (the kernel never left)");
  c.comms[0] = NULL;
  gclose(&c, 0);
  return c.wrong != 0;
}

START_TEST(test_abort) {
  static const int kill_peer[2] = {1, 0};
  setenv("BRAID_GPU_SHARING", "1", 1);
  unsetenv("NCCL_PROTO");
  int failed = gpu_procs(2, body_abort, &kill_peer[_i], kill_peer[_i] ? 1 : -1);
  ck_assert_msg(failed == 0, "abort (%s): %d processes failed (see above)", kill_peer[_i] ? "kill" : "silent peer",
                failed);
}
END_TEST

/* ---- config.blocking = 0 -------------------------------------------------------------------- */

/* Poll until the communicator leaves ncclInProgress (60 s); 0 when it reached ncclSuccess. */
static int settle(struct gctx* c, ncclComm_t comm, const char* what) {
  ncclResult_t async = ncclInProgress;
  double until = now_s() + 60;
  while (async == ncclInProgress && now_s() < until) {
    NCHECK(c, ncclCommGetAsyncError(comm, &async));
    if (async == ncclInProgress) usleep(100);
  }
  if (async != ncclSuccess)
    return gfail(c, "%s: ncclCommGetAsyncError ends at %s (%s)", what, ncclGetErrorString(async),
                 ncclGetLastError(comm));
  return 0;
}

static int body_nonblock(struct gproc* p) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  struct gctx c;
  if (gopen(&c, p, 1, 1031 * 4, "nonblocking", &config)) return 1;
  if (settle(&c, c.comms[0], "ncclCommInitRankConfig")) return 1;
  int dev = -2;
  NCHECK(&c, ncclCommCuDevice(c.comms[0], &dev));
  if (dev != c.devs[0]) return gfail(&c, "ncclCommCuDevice is %d, expected %d", dev, c.devs[0]);
  struct gcall k = {G_ALLREDUCE, ncclFloat32, REF_SUM, 0, 0, 1031, 11};
  char msg[256] = "";
  ref_fill(ncclFloat32, REF_KIND_SUM, k.seed, c.ranks[0], 0, k.count, c.hsend);
  if (gcopy(&c, 0, c.dsend[0], c.hsend, k.count * 4)) return 1;
  ncclResult_t res = ncclAllReduce(c.dsend[0], c.drecv[0], k.count, ncclFloat32, ncclSum, c.comms[0], c.streams[0]);
  if (res != ncclSuccess && res != ncclInProgress) return gfail(&c, "ncclAllReduce: %s", ncclGetErrorString(res));
  if (settle(&c, c.comms[0], "ncclAllReduce") || gwait(&c, 0, "non-blocking all-reduce")) return 1;
  if (gcopy(&c, 0, c.hrecv, c.drecv[0], k.count * 4)) return 1;
  size_t bad = gverify(&c, 0, &k, c.hrecv, k.count, msg, sizeof(msg));
  if (bad) gfail(&c, "non-blocking all-reduce: %zu wrong elements; %s", bad, msg);
  res = ncclCommFinalize(c.comms[0]);
  if (res != ncclSuccess && res != ncclInProgress) return gfail(&c, "ncclCommFinalize: %s", ncclGetErrorString(res));
  if (settle(&c, c.comms[0], "ncclCommFinalize")) return 1;
  gclose(&c, 1);
  return c.wrong != 0;
}

START_TEST(test_nonblock) {
  setenv("BRAID_GPU_SHARING", "1", 1);
  unsetenv("NCCL_PROTO");
  ck_assert_msg(gpu_procs(2, body_nonblock, NULL, -1) == 0, "config.blocking = 0: processes failed (see above)");
}
END_TEST

Suite* gpu_suite(void) {
  Suite* s = suite_create("gpu");
  struct {
    const char* name;
    const TTest* test;
    int n;
  } cases[] = {
      {"matrix", test_matrix, NELEMS(matrix_cases)},
      {"nvls", test_nvls, NELEMS(nvls_cases)},
      {"graph", test_graph, 1},
      {"abort", test_abort, 2},
      {"nonblock", test_nonblock, 1},
  };
  for (int i = 0; i < NELEMS(cases); i++) {
    TCase* tc = tcase_create(cases[i].name);
    tcase_set_timeout(tc, TCASE_TIMEOUT_S);
    tcase_add_loop_test(tc, cases[i].test, 0, cases[i].n);
    gpu_rt_tag(tc, cases[i].n);
    suite_add_tcase(s, tc);
  }
  return s;
}
