/*
 * fake_nccl.c - a deliberately simple stand-in for libnccl.so.2, used only by
 * tests/bench/selftest.sh to exercise the benchmarks (launch modes, checking, output, exit
 * status) independently of braid's own collectives. Correct but slow: every collective
 * copies each rank's input into a POSIX shared-memory slot, meets at a barrier, computes its
 * output from all slots, and meets again. Works across threads and processes of one host.
 *
 * The ncclUniqueId carries the shm name; with NCCL_COMM_ID set every process derives the same
 * name from it (as NCCL derives the same id). Groups queue their calls; at ncclGroupEnd the
 * calls of each communicator run in a thread of their own, so one thread can drive several
 * ranks. A rank waiting for a peer that died waits forever - the benchmark's supervisor is
 * what the tests check then. FAKE_NCCL_SLOT sets the bytes per rank (default 8 MiB).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "nccl.h"

#define API __attribute__((visibility("default")))
#define DIR_BYTES 4096 /* per rank: the p2p directory */
#define MAX_SENDS 64
#define MAX_PREMUL 64

struct hdr {
  atomic_uint arrived, gen; /* barrier */
  atomic_int refs;          /* communicators mapped; the last one unlinks */
};
struct dir_entry {
  int peer;
  size_t offset, bytes;
};
struct ncclComm {
  struct hdr* h;
  char* base; /* after the header page: per rank DIR_BYTES + slot */
  size_t slot, map_bytes;
  int rank, nranks;
  char name[128];
  uint64_t premul[MAX_PREMUL]; /* PreMulSum scalars (raw), index = op - ncclNumOps */
  int premul_used[MAX_PREMUL];
};
struct op {
  int kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t dt;
  ncclRedOp_t red;
  int root; /* or peer for send/recv */
  struct ncclComm* comm;
};
enum { K_ALLREDUCE, K_REDUCE, K_BCAST, K_ALLGATHER, K_REDSCAT, K_ALLTOALL, K_GATHER, K_SCATTER, K_SEND, K_RECV };

static __thread char last_error[256];
static __thread int depth;
static __thread struct op* queue;
static __thread int nqueue, capqueue;
static atomic_uint id_counter;

static ncclResult_t fail(ncclResult_t r, const char* msg) {
  snprintf(last_error, sizeof(last_error), "%s", msg);
  return r;
}

static char* region(struct ncclComm* c, int rank) {
  return c->base + (size_t)rank * (DIR_BYTES + c->slot);
}

static void barrier(struct ncclComm* c) {
  unsigned g = atomic_load(&c->h->gen);
  if (atomic_fetch_add(&c->h->arrived, 1) == (unsigned)c->nranks - 1) {
    atomic_store(&c->h->arrived, 0);
    atomic_store(&c->h->gen, g + 1);
    return;
  }
  for (unsigned spins = 0; atomic_load(&c->h->gen) == g; spins++) spins < 1000 ? (void)sched_yield() : (void)usleep(50);
}

API ncclResult_t ncclGetVersion(int* v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
API const char* ncclGetErrorString(ncclResult_t r) {
  return r == ncclSuccess ? "no error" : "fake nccl error";
}
API const char* ncclGetLastError(ncclComm_t c) {
  (void)c;
  return last_error;
}

API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  const char* env = getenv("NCCL_COMM_ID");
  char name[96];
  if (env && *env) {
    int n = snprintf(name, sizeof(name), "/fakenccl-id-");
    for (const char* p = env; *p && n < (int)sizeof(name) - 1; p++) name[n++] = (*p == '/' || *p == ':') ? '_' : *p;
    name[n] = '\0';
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, sizeof(name), "/fakenccl-%d-%u-%ld", (int)getpid(), atomic_fetch_add(&id_counter, 1), ts.tv_nsec);
  }
  snprintf(id->internal, sizeof(id->internal), "FAKE%s", name);
  return ncclSuccess;
}

API ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (strncmp(id.internal, "FAKE/", 5) != 0) return fail(ncclInvalidArgument, "bad unique id");
  if (nranks < 1 || rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "bad rank");
  struct ncclComm* c = calloc(1, sizeof(*c));
  const char* s = getenv("FAKE_NCCL_SLOT");
  c->slot = s ? strtoull(s, NULL, 0) : (8u << 20);
  c->rank = rank;
  c->nranks = nranks;
  snprintf(c->name, sizeof(c->name), "%s", id.internal + 4);
  c->map_bytes = 4096 + (size_t)nranks * (DIR_BYTES + c->slot);
  int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)c->map_bytes) != 0) return fail(ncclSystemError, strerror(errno));
  void* m = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return fail(ncclSystemError, strerror(errno));
  c->h = m;
  c->base = (char*)m + 4096;
  atomic_fetch_add(&c->h->refs, 1);
  *out = c;
  return ncclSuccess;
}

API ncclResult_t ncclCommInitRankConfig(ncclComm_t* c, int n, ncclUniqueId id, int rank, ncclConfig_t* cfg) {
  (void)cfg;
  return ncclCommInitRank(c, n, id, rank);
}

API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int n, const int* devs) {
  (void)devs;
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  for (int i = 0; i < n; i++) {
    ncclResult_t r = ncclCommInitRank(comms + i, n, id, i);
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

API ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclSuccess;
  if (atomic_fetch_sub(&c->h->refs, 1) == 1) shm_unlink(c->name);
  munmap(c->h, c->map_bytes);
  free(c);
  return ncclSuccess;
}
API ncclResult_t ncclCommFinalize(ncclComm_t c) {
  (void)c;
  return ncclSuccess;
}
API ncclResult_t ncclCommAbort(ncclComm_t c) {
  return ncclCommDestroy(c);
}
API ncclResult_t ncclCommCount(const ncclComm_t c, int* n) {
  *n = c->nranks;
  return ncclSuccess;
}
API ncclResult_t ncclCommUserRank(const ncclComm_t c, int* r) {
  *r = c->rank;
  return ncclSuccess;
}
API ncclResult_t ncclCommCuDevice(const ncclComm_t c, int* d) {
  (void)c;
  *d = -1;
  return ncclSuccess;
}
API ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* e) {
  (void)c;
  *e = ncclSuccess;
  return ncclSuccess;
}
API ncclResult_t ncclMemAlloc(void** p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? ncclSuccess : ncclSystemError;
}
API ncclResult_t ncclMemFree(void* p) {
  free(p);
  return ncclSuccess;
}
API ncclResult_t ncclCommRegister(const ncclComm_t c, void* b, size_t n, void** h) {
  (void)c;
  (void)n;
  *h = b;
  return ncclSuccess;
}
API ncclResult_t ncclCommDeregister(const ncclComm_t c, void* h) {
  (void)c;
  (void)h;
  return ncclSuccess;
}
API ncclResult_t ncclCommWindowRegister(ncclComm_t c, void* b, size_t n, ncclWindow_t* w, int f) {
  (void)c;
  (void)n;
  (void)f;
  *w = (ncclWindow_t)b;
  return ncclSuccess;
}
API ncclResult_t ncclCommWindowDeregister(ncclComm_t c, ncclWindow_t w) {
  (void)c;
  (void)w;
  return ncclSuccess;
}

API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t dt, ncclScalarResidence_t res,
                                          ncclComm_t c) {
  (void)res;
  for (int i = 0; i < MAX_PREMUL; i++)
    if (!c->premul_used[i]) {
      c->premul_used[i] = 1;
      c->premul[i] = bench_dtype_load_bits(dt, scalar);
      *op = (ncclRedOp_t)(ncclNumOps + i);
      return ncclSuccess;
    }
  return fail(ncclInternalError, "too many PreMulSum ops");
}
API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t c) {
  if ((int)op < ncclNumOps || (int)op >= ncclNumOps + MAX_PREMUL) return fail(ncclInvalidArgument, "bad op");
  c->premul_used[op - ncclNumOps] = 0;
  return ncclSuccess;
}

/* Element j of every rank's slot (at byte offset `at`) combined into dst. */
static void reduce_into(struct ncclComm* c, struct op* o, size_t at, void* dst, size_t count) {
  size_t elt = bench_dtype_size(o->dt);
  int isf = bench_dtype_is_float(o->dt), sgn = bench_dtype_is_signed_int(o->dt);
  int red = (int)o->red >= ncclNumOps || (isf && o->red == ncclAvg) ? ncclSum : (int)o->red; /* inputs were scaled */
  uint64_t mask = elt == 8 ? ~0ull : (1ull << (8 * elt)) - 1;
  int sh = 64 - 8 * (int)elt;
  for (size_t j = 0; j < count; j++) {
    double facc = 0;
    uint64_t iacc = 0;
    for (int r = 0; r < c->nranks; r++) {
      const char* p = region(c, r) + DIR_BYTES + at + j * elt;
      if (isf) {
        double v = bench_dtype_decode(o->dt, p);
        facc = r == 0            ? v
               : red == ncclProd ? facc * v
               : red == ncclMax  ? (v > facc ? v : facc)
               : red == ncclMin  ? (v < facc ? v : facc)
                                 : facc + v;
      } else {
        uint64_t v = bench_dtype_load_bits(o->dt, p);
        int64_t sv = (int64_t)(v << sh) >> sh, sa = (int64_t)(iacc << sh) >> sh;
        int less = sgn ? sv < sa : v < iacc; /* v < acc */
        iacc = r == 0            ? v
               : red == ncclProd ? iacc * v
               : red == ncclMax  ? (less ? iacc : v)
               : red == ncclMin  ? (less ? v : iacc)
                                 : iacc + v;
      }
    }
    char* d = (char*)dst + j * elt;
    if (isf) {
      bench_dtype_encode(o->dt, facc, d);
    } else {
      if (red == ncclAvg)
        iacc = sgn ? (uint64_t)(((int64_t)(iacc << sh) >> sh) / c->nranks) : (iacc & mask) / (uint64_t)c->nranks;
      bench_dtype_store_bits(o->dt, iacc & mask, d);
    }
  }
}

/* Copy this rank's input into its slot, scaled for PreMulSum (and float Avg, which NCCL
 * computes as PreMulSum by 1/nranks rounded to the type). */
static void stage(struct ncclComm* c, struct op* o, const void* src, size_t count) {
  size_t elt = bench_dtype_size(o->dt);
  char* dst = region(c, c->rank) + DIR_BYTES;
  int isf = bench_dtype_is_float(o->dt);
  int premul = (int)o->red >= ncclNumOps || (o->red == ncclAvg && isf);
  if (!premul || !src) {
    if (src) memcpy(dst, src, count * elt);
    return;
  }
  uint64_t s = 0;
  if ((int)o->red >= ncclNumOps)
    s = c->premul[o->red - ncclNumOps];
  else
    bench_dtype_encode(o->dt, elt == 8 ? 1.0 / c->nranks : (double)(1.0f / (float)c->nranks), &s);
  for (size_t j = 0; j < count; j++) {
    const char* x = (const char*)src + j * elt;
    if (isf) {
      bench_dtype_encode(o->dt, bench_dtype_decode(o->dt, x) * bench_dtype_decode(o->dt, &s), dst + j * elt);
    } else {
      bench_dtype_store_bits(o->dt, bench_dtype_load_bits(o->dt, x) * s, dst + j * elt);
    }
  }
}

static ncclResult_t run_coll(struct op* o) {
  struct ncclComm* c = o->comm;
  size_t elt = bench_dtype_size(o->dt), n = (size_t)c->nranks, cnt = o->count, bytes = cnt * elt;
  int me = c->rank, root = o->root;
  int is_root = me == root;
  size_t in_count = (o->kind == K_REDSCAT || o->kind == K_ALLTOALL || (o->kind == K_SCATTER && is_root)) ? cnt * n
                    : ((o->kind == K_BCAST || o->kind == K_SCATTER) && !is_root)                         ? 0
                                                                                                         : cnt;
  if (elt == 0) return fail(ncclInvalidArgument, "bad datatype");
  if (in_count * elt > c->slot) return fail(ncclInvalidArgument, "message larger than FAKE_NCCL_SLOT");
  if ((o->kind == K_BCAST || o->kind == K_REDUCE || o->kind == K_GATHER || o->kind == K_SCATTER) &&
      (root < 0 || root >= c->nranks))
    return fail(ncclInvalidArgument, "bad root");
  stage(c, o, in_count ? o->send : NULL, in_count);
  barrier(c);
  char* recv = o->recv;
  switch (o->kind) {
    case K_ALLREDUCE:
      reduce_into(c, o, 0, recv, cnt);
      break;
    case K_REDUCE:
      if (is_root) reduce_into(c, o, 0, recv, cnt);
      break;
    case K_BCAST:
      memcpy(recv, region(c, root) + DIR_BYTES, bytes);
      break;
    case K_REDSCAT:
      reduce_into(c, o, (size_t)me * bytes, recv, cnt);
      break;
    case K_ALLGATHER:
      for (size_t r = 0; r < n; r++) memcpy(recv + r * bytes, region(c, (int)r) + DIR_BYTES, bytes);
      break;
    case K_ALLTOALL:
      for (size_t r = 0; r < n; r++)
        memcpy(recv + r * bytes, region(c, (int)r) + DIR_BYTES + (size_t)me * bytes, bytes);
      break;
    case K_GATHER:
      if (is_root)
        for (size_t r = 0; r < n; r++) memcpy(recv + r * bytes, region(c, (int)r) + DIR_BYTES, bytes);
      break;
    case K_SCATTER:
      memcpy(recv, region(c, root) + DIR_BYTES + (size_t)me * bytes, bytes);
      break;
  }
  barrier(c);
  return ncclSuccess;
}

/* All sends and receives of one communicator in one group, as a single exchange. */
static ncclResult_t run_p2p(struct op* ops, int nops) {
  struct ncclComm* c = ops[0].comm;
  struct dir_entry* dir = (struct dir_entry*)region(c, c->rank);
  int nsend = 0;
  size_t used = 0;
  for (int i = 0; i < nops; i++) {
    if (ops[i].kind != K_SEND) continue;
    size_t b = ops[i].count * bench_dtype_size(ops[i].dt);
    if (nsend + 1 >= MAX_SENDS || used + b > c->slot) return fail(ncclInvalidArgument, "too much p2p data");
    memcpy(region(c, c->rank) + DIR_BYTES + used, ops[i].send, b);
    dir[nsend++] = (struct dir_entry){ops[i].root, used, b};
    used += b;
  }
  dir[nsend].peer = -1;
  barrier(c);
  for (int i = 0; i < nops; i++) {
    if (ops[i].kind != K_RECV) continue;
    int seen = 0; /* the k-th receive from a peer matches its k-th send to us */
    for (int j = 0; j < i; j++) seen += ops[j].kind == K_RECV && ops[j].root == ops[i].root;
    struct dir_entry* pd = (struct dir_entry*)region(c, ops[i].root);
    for (int k = 0; pd[k].peer != -1 && k < MAX_SENDS; k++)
      if (pd[k].peer == c->rank && seen-- == 0) {
        memcpy(ops[i].recv, region(c, ops[i].root) + DIR_BYTES + pd[k].offset, pd[k].bytes);
        break;
      }
  }
  barrier(c);
  return ncclSuccess;
}

struct batch {
  struct op* ops;
  int n;
  ncclResult_t res;
  pthread_t tid;
};

static void* run_batch(void* arg) {
  struct batch* b = arg;
  int p2p = 0;
  for (int i = 0; i < b->n && b->res == ncclSuccess; i++) {
    if (b->ops[i].kind == K_SEND || b->ops[i].kind == K_RECV)
      p2p = 1;
    else
      b->res = run_coll(&b->ops[i]);
  }
  if (p2p && b->res == ncclSuccess) {
    struct op* pp = calloc((size_t)b->n, sizeof(struct op));
    int np = 0;
    for (int i = 0; i < b->n; i++)
      if (b->ops[i].kind == K_SEND || b->ops[i].kind == K_RECV) pp[np++] = b->ops[i];
    b->res = run_p2p(pp, np);
    free(pp);
  }
  return NULL;
}

API ncclResult_t ncclGroupStart(void) {
  depth++;
  return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void) {
  if (depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  int n = nqueue;
  struct op* ops = queue;
  queue = NULL;
  nqueue = capqueue = 0;
  struct batch* b = calloc((size_t)n + 1, sizeof(*b));
  int nb = 0;
  for (int i = 0; i < n; i++) { /* one batch per communicator, calls in order */
    int k = 0;
    while (k < nb && b[k].ops[0].comm != ops[i].comm) k++;
    if (k == nb) {
      b[nb].ops = calloc((size_t)n, sizeof(struct op));
      nb++;
    }
    b[k].ops[b[k].n++] = ops[i];
  }
  for (int k = 1; k < nb; k++) pthread_create(&b[k].tid, NULL, run_batch, &b[k]);
  if (nb) run_batch(&b[0]);
  ncclResult_t res = nb ? b[0].res : ncclSuccess;
  for (int k = 1; k < nb; k++) {
    pthread_join(b[k].tid, NULL);
    if (res == ncclSuccess) res = b[k].res;
  }
  for (int k = 0; k < nb; k++) free(b[k].ops);
  free(b);
  free(ops);
  return res;
}

static ncclResult_t enqueue(int kind, const void* s, void* r, size_t count, ncclDataType_t dt, ncclRedOp_t red,
                            int root, ncclComm_t c) {
  if (!c) return fail(ncclInvalidArgument, "NULL communicator");
  ncclGroupStart();
  if (nqueue == capqueue) {
    capqueue = capqueue ? 2 * capqueue : 16;
    queue = realloc(queue, sizeof(struct op) * (size_t)capqueue);
  }
  queue[nqueue++] = (struct op){kind, s, r, count, dt, red, root, c};
  return ncclGroupEnd();
}

API ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
  (void)st;
  return enqueue(K_ALLREDUCE, s, r, n, t, op, -1, c);
}
API ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                            cudaStream_t st) {
  (void)st;
  return enqueue(K_REDUCE, s, r, n, t, op, root, c);
}
API ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                               cudaStream_t st) {
  (void)st;
  return enqueue(K_BCAST, s, r, n, t, ncclSum, root, c);
}
API ncclResult_t ncclBcast(void* b, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
  return ncclBroadcast(b, b, n, t, root, c, st);
}
API ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  (void)st;
  return enqueue(K_ALLGATHER, s, r, n, t, ncclSum, -1, c);
}
API ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                                   cudaStream_t st) {
  (void)st;
  return enqueue(K_REDSCAT, s, r, n, t, op, -1, c);
}
API ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  (void)st;
  return enqueue(K_ALLTOALL, s, r, n, t, ncclSum, -1, c);
}
API ncclResult_t ncclGather(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                            cudaStream_t st) {
  (void)st;
  return enqueue(K_GATHER, s, r, n, t, ncclSum, root, c);
}
API ncclResult_t ncclScatter(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                             cudaStream_t st) {
  (void)st;
  return enqueue(K_SCATTER, s, r, n, t, ncclSum, root, c);
}
API ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)st;
  return enqueue(K_SEND, s, NULL, n, t, ncclSum, peer, c);
}
API ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)st;
  return enqueue(K_RECV, NULL, r, n, t, ncclSum, peer, c);
}
