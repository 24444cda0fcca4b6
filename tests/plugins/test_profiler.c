/*
 * test_profiler.c - a test profiler plugin under NCCL's ABI, built once per version by the
 * Makefile (-DPROF_V=1..6 -> build/lib/libnccl-profiler-braidtest-v<N>.so; PROF_V=0 exports
 * no table: the "unsupported" case). It counts events per type, checks that every task event
 * has a group that is still open (and, v5+, its API event as parentObj; an API call event
 * inside its GroupApi), that a group stops after its tasks, that
 * every start has a stop by finalize, and the descriptors (function, datatype, algorithm and
 * protocol names or numbers, channels, consecutive seqNumbers per function). Its results are
 * kept per rank after finalize for braid_test_profiler_result (tests/unit/test_profiler.c).
 *   BRAID_TEST_PROFILER_MASK   the activation mask it sets (default Group|Coll|P2p, and
 *                              GroupApi|CollApi|P2pApi from v5)
 *   BRAID_TEST_PROFILER_FAIL   1: init fails (ncclInternalError)
 *   BRAID_TEST_PROFILER_SUMMARY  set: finalize prints the proxy event counts (errors always)
 */
#include "test_profiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/profiler_abi.h"

#define EXPORT __attribute__((visibility("default")))

struct ctx;
struct event {
  int type;
  struct ctx* ctx;
  struct event* parent;
  int open_children;
  int stopped;
  struct event* kept;         /* groups, API and proxy events stay until finalize: children name them */
  int is_send, nsteps, steps; /* ProxyOp: its descriptor, its steps started */
  int op;                     /* ProxyOp: its entry in r.ops (-1: none) */
  long long bytes;            /* Coll / P2p: count times datatype size */
  int states;                 /* states recorded on it (bits by state number) */
};

struct ctx {
  int rank; /* -1 until an event says it (v1-v3's init does not) */
  int mask;
  struct event* kept;
  struct braid_test_profiler_result r;
  uint64_t next_seq[8];
};

/* Events start and stop from the calling threads and from braid's progress thread (device
 * mode: stops at kernel completion), as NCCL's proxy thread does: one lock for everything. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_test_profiler_result results[BRAID_TEST_PROFILER_MAX_RANKS];
static struct ctx* live[BRAID_TEST_PROFILER_MAX_RANKS]; /* contexts not finalized yet, by rank */

static int type_index(int type) {
  for (int b = 0; b < BRAID_TEST_PROFILER_TYPES; b++)
    if (type == (1 << b)) return b;
  return -1;
}

static void error(struct ctx* c, const char* what) {
  if (c->r.errors++ == 0) snprintf(c->r.first_error, sizeof(c->r.first_error), "%s", what);
}

static int known(const char* s, const char* const* names, int n) {
  for (int i = 0; s != NULL && i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}
static const char* const funcs[]
    __attribute__((unused)) = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
static const char* const algos[]
    __attribute__((unused)) = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
static const char* const protos[] __attribute__((unused)) = {"LL", "LL128", "SIMPLE"};
static const char* const dtypes[] __attribute__((unused)) = {
    "ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",   "ncclInt64",      "ncclUint64",
    "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
static const int dtype_bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}; /* in the order of dtypes */

static long long task_bytes(int dtype, size_t count) {
  return dtype >= 0 && dtype < N(dtype_bytes) ? (long long)count * dtype_bytes[dtype] : 0;
}

/* A collective's fields, whatever the version's layout: func index, seq, algo, proto, nch. */
static void check_coll(struct ctx* c, int func, uint64_t seq, int algo, int proto, int nch, int dtype, size_t count) {
  if (func < 0 || func >= N(funcs)) return error(c, "coll: unknown function");
  c->r.coll_by_func[func]++;
  if (seq != c->next_seq[func]) error(c, "coll: seqNumber not consecutive for its function");
  c->next_seq[func] = seq + 1;
  if (dtype < 0) error(c, "coll: unknown datatype");
  if (count > 0 && (algo < 0 || proto < 0 || nch < 1)) error(c, "coll: no algorithm, protocol or channels");
  if (count > 0) c->r.coll_by_algo[algo < 0 ? 0 : algo]++, c->r.coll_by_proto[proto < 0 ? 0 : proto]++;
}

static void check_p2p(struct ctx* c, const char* func, int is_send_num, int dtype) {
  int send = func != NULL ? strcmp(func, "Send") == 0 : is_send_num;
  int recv = func != NULL ? strcmp(func, "Recv") == 0 : !is_send_num;
  if (!send && !recv) return error(c, "p2p: function neither Send nor Recv");
  if (dtype < 0) error(c, "p2p: unknown datatype");
  if (send)
    c->r.sends++;
  else
    c->r.recvs++;
}

#if PROF_V >= 5
typedef struct nccl_prof_descr_v5 descr_t;
#elif PROF_V == 4
typedef struct nccl_prof_descr_v4 descr_t;
#elif PROF_V == 3
typedef struct nccl_prof_descr_v3 descr_t;
#elif PROF_V == 2
typedef struct nccl_prof_descr_v2 descr_t;
#else
typedef struct nccl_prof_descr_v1 descr_t;
#endif

static void* parent_of(const descr_t* d) {
#if PROF_V >= 5
  if (d->type == NCCL_PROF_COLL) return d->coll.parentGroup;
  if (d->type == NCCL_PROF_P2P) return d->p2p.parentGroup;
#endif
  return d->parentObj;
}

static void check_descr(struct ctx* c, const descr_t* d) {
#if PROF_V <= 1
  if (d->type == NCCL_PROF_COLL)
    check_coll(c, d->coll.func <= 4 ? d->coll.func : -1, d->coll.seqNumber, d->coll.algo < 7 ? d->coll.algo : -1,
               d->coll.proto < 3 ? d->coll.proto : -1, d->coll.nMaxChannels, d->coll.datatype < 12 ? 0 : -1,
               d->coll.count);
  else if (d->type == NCCL_PROF_P2P)
    check_p2p(c, NULL, d->p2p.func == 6, d->p2p.func == 6 || d->p2p.func == 7 ? d->p2p.datatype : -1);
#else
#if PROF_V <= 3
#define NCH nMaxChannels
#else
#define NCH nChannels
#endif
  if (d->type == NCCL_PROF_COLL)
    check_coll(c, known(d->coll.func, funcs, N(funcs)), d->coll.seqNumber, known(d->coll.algo, algos, N(algos)),
               known(d->coll.proto, protos, N(protos)), d->coll.NCH, known(d->coll.datatype, dtypes, N(dtypes)),
               d->coll.count);
  else if (d->type == NCCL_PROF_P2P)
    check_p2p(c, d->p2p.func, 0, known(d->p2p.datatype, dtypes, N(dtypes)));
#endif
}

/* ProxyOp: inside its open task (Coll / P2p) when the mask shows tasks, a sane descriptor;
 * ProxyStep: inside its open ProxyOp, step numbers 0 .. nSteps-1 once each; NetPlugin: inside
 * an open ProxyStep. */
static void check_proxy(struct ctx* c, struct event* e, struct event* parent, const descr_t* d) {
  int type = (int)d->type;
  int want = type == NCCL_PROF_PROXY_OP     ? NCCL_PROF_COLL | NCCL_PROF_P2P
             : type == NCCL_PROF_PROXY_STEP ? NCCL_PROF_PROXY_OP
                                            : NCCL_PROF_PROXY_STEP;
  if (parent == NULL) {
    if ((c->mask & want) == want) error(c, "proxy event without its parent");
  } else if (!(parent->type & want) || parent->ctx != c || parent->stopped) {
    error(c, "proxy event whose parent is of another type, context, or stopped");
  } else {
    e->parent = parent, parent->open_children++;
  }
  if (type == NCCL_PROF_PROXY_OP) {
    if (d->proxyOp.nSteps <= 0 || d->proxyOp.chunkSize <= 0 || d->proxyOp.peer < 0 || d->proxyOp.isSend < 0 ||
        d->proxyOp.isSend > 1 || d->proxyOp.pid != getpid())
      error(c, "ProxyOp: bad descriptor (nSteps, chunkSize, peer, isSend or pid)");
    e->is_send = d->proxyOp.isSend, e->nsteps = d->proxyOp.nSteps, e->op = -1;
    if (c->r.nops < BRAID_TEST_PROFILER_MAX_OPS) {
      int k = e->op = c->r.nops++;
      c->r.ops[k].bytes = 0, c->r.ops[k].parent_bytes = parent != NULL ? parent->bytes : 0;
      c->r.ops[k].is_send = d->proxyOp.isSend, c->r.ops[k].peer = d->proxyOp.peer;
      c->r.ops[k].nsteps = d->proxyOp.nSteps, c->r.ops[k].chunk = d->proxyOp.chunkSize;
      c->r.ops[k].channel = d->proxyOp.channelId, c->r.ops[k].parent_type = parent != NULL ? parent->type : 0;
    }
  } else if (type == NCCL_PROF_PROXY_STEP && e->parent != NULL) {
    if (d->proxyStep.step != parent->steps) error(c, "ProxyStep: steps not numbered 0, 1, ... within their op");
    if (d->proxyStep.step >= parent->nsteps) error(c, "ProxyStep: more steps than the op's nSteps");
    parent->steps++;
    e->is_send = parent->is_send;
  } else if (type == NCCL_PROF_NET_PLUGIN && e->parent != NULL) {
#if PROF_V >= 3
    if (d->netPlugin.data == NULL || (d->netPlugin.id >> 16) == 0) error(c, "NetPlugin: no plugin id or data");
#endif
    c->r.net_under_sends += parent->is_send;
  }
}

static ncclResult_t start_locked(struct ctx* c, void** handle, const descr_t* d) {
  *handle = NULL;
  if (c->rank < 0) c->rank = d->rank;
  if (c->rank >= 0 && c->rank < BRAID_TEST_PROFILER_MAX_RANKS) live[c->rank] = c;
  if (d->rank != c->rank) error(c, "an event names another rank");
  int type = (int)d->type, b = type_index(type);
  if (b < 0) return error(c, "unknown event type"), ncclSuccess;
  if (!((int)d->type & c->mask)) return c->r.unasked++, ncclSuccess; /* not asked for: no handle (NCCL's example) */
  struct event* e = calloc(1, sizeof(*e));
  if (e == NULL) return ncclSystemError;
  e->type = (int)d->type;
  e->ctx = c;
  c->r.starts[b]++;
  c->r.open++;
  struct event* parent = parent_of(d);
  if (d->type == NCCL_PROF_COLL || d->type == NCCL_PROF_P2P) {
    if (c->mask & NCCL_PROF_GROUP) {
      if (parent == NULL || parent->type != NCCL_PROF_GROUP || parent->ctx != c)
        error(c, "task without its group");
      else if (parent->stopped)
        error(c, "task started in a stopped group");
      else
        e->parent = parent, parent->open_children++;
    }
#if PROF_V >= 5
    int api = d->type == NCCL_PROF_COLL ? NCCL_PROF_COLL_API : NCCL_PROF_P2P_API;
    struct event* obj = d->parentObj;
    if ((c->mask & api) && (obj == NULL || obj->type != api || obj->ctx != c)) error(c, "task without its API event");
#endif
    check_descr(c, d);
#if PROF_V <= 1
    e->bytes = d->type == NCCL_PROF_COLL ? task_bytes(d->coll.datatype, d->coll.count)
                                         : task_bytes(d->p2p.datatype, d->p2p.count);
#else
    e->bytes = d->type == NCCL_PROF_COLL ? task_bytes(known(d->coll.datatype, dtypes, N(dtypes)), d->coll.count)
                                         : task_bytes(known(d->p2p.datatype, dtypes, N(dtypes)), d->p2p.count);
#endif
  } else if (type == NCCL_PROF_COLL_API || type == NCCL_PROF_P2P_API) {
    if ((c->mask & NCCL_PROF_GROUP_API) && (parent == NULL || parent->type != NCCL_PROF_GROUP_API || parent->stopped))
      error(c, "API call event outside an open GroupApi event");
    else if (parent != NULL)
      e->parent = parent, parent->open_children++;
  } else if (type & (NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP | NCCL_PROF_NET_PLUGIN)) {
    check_proxy(c, e, parent, d);
  } else if (parent != NULL) {
    error(c, "group with a parent");
  }
  *handle = e;
  return ncclSuccess;
}

static ncclResult_t start(void* context, void** handle, void* descr) {
  pthread_mutex_lock(&lock);
  ncclResult_t res = start_locked(context, handle, descr);
  pthread_mutex_unlock(&lock);
  return res;
}

/* The states a proxy event must have seen by its stop (NCCL's numbers, profiler_plugin.h):
 * v4+ a ProxyOp InProgress (19), a send step SendWait (9), a receive step RecvGPUWait (12);
 * v1-v3 a ProxyOp SendDone (3) or RecvDone (7); a ProxyCtrl Idle (13) or Active (14), or Sleep
 * (15) and Wakeup (16), or Append (17) and AppendEnd (18). A ProxyOp stops with all its steps
 * started. */
static void check_proxy_stop(struct ctx* c, struct event* e) {
  if (e->type == NCCL_PROF_PROXY_OP && (c->mask & NCCL_PROF_PROXY_STEP) && e->steps != e->nsteps)
    error(c, "ProxyOp stopped before all its steps started");
  int need = 0;
  if (e->type == NCCL_PROF_PROXY_OP) need = PROF_V >= 4 ? 19 : (e->is_send ? 3 : 7);
  if (e->type == NCCL_PROF_PROXY_STEP && PROF_V >= 4) need = e->is_send ? 9 : 12;
  if (need && !(e->states & (1u << need))) error(c, "proxy event stopped without its state");
  unsigned idle = 1u << 13 | 1u << 14, sleep = 1u << 15 | 1u << 16, append = 1u << 17 | 1u << 18;
  if (e->type == NCCL_PROF_PROXY_CTRL && !(e->states & idle) && (e->states & sleep) != sleep &&
      (e->states & append) != append)
    error(c, "ProxyCtrl stopped without Idle / Active, or a Sleep without its Wakeup, an Append without its end");
  if (e->type == NCCL_PROF_PROXY_CTRL && (e->states & append) == append) c->r.ctrl_appends++;
}

static ncclResult_t stop_locked(struct event* e) {
  if (e == NULL) return ncclSuccess;
  struct ctx* c = e->ctx;
  if (e->stopped) return error(c, "stopped twice"), ncclSuccess;
  if (e->open_children != 0) error(c, "a parent stopped before its children");
  check_proxy_stop(c, e);
  e->stopped = 1;
  c->r.stops[type_index(e->type)]++;
  c->r.open--;
  if (e->parent != NULL) e->parent->open_children--;
  if (e->type == NCCL_PROF_COLL || e->type == NCCL_PROF_P2P) /* none of the proxy's outlives its task */
    free(e);
  else
    e->kept = c->kept, c->kept = e; /* its children may name it later */
  return ncclSuccess;
}

static ncclResult_t stop(void* handle) {
  pthread_mutex_lock(&lock);
  ncclResult_t res = stop_locked(handle);
  pthread_mutex_unlock(&lock);
  return res;
}

/* States per version: v4+ ProxyOp InProgress only, ProxyStep 8..12 and 20 (send states on
 * sends, receive states on receives), NetPlugin 21; v1-v3 ProxyOp 0..7 (its direction's);
 * ProxyCtrl 13..18 in every version. */
static ncclResult_t record(void* handle, int state, union nccl_prof_state_args* args) {
  struct event* e = handle;
  if (e == NULL) return ncclSuccess;
  pthread_mutex_lock(&lock);
  struct ctx* c = e->ctx;
  int send_state = state == 0 || state == 1 || state == 2 || state == 3 || state == 8 || state == 9 || state == 20;
  int ok = 0;
  if (e->stopped) {
    error(c, "a state recorded on a stopped event");
  } else if (e->type == NCCL_PROF_PROXY_OP) {
    ok = PROF_V >= 4 ? state == 19 : state >= 0 && state <= 7 && send_state == e->is_send;
  } else if (e->type == NCCL_PROF_PROXY_STEP) {
    ok = PROF_V >= 4 && ((state >= 8 && state <= 12) || state == 20) && send_state == e->is_send;
    long long b = ok && args != NULL ? (long long)args->proxy.transSize * (state == 9 || state == 11) : 0;
    c->r.step_bytes += b;
    if (e->parent != NULL && e->parent->op >= 0) c->r.ops[e->parent->op].bytes += b;
  } else if (e->type == NCCL_PROF_NET_PLUGIN) {
    ok = state == 21;
  } else if (e->type == NCCL_PROF_PROXY_CTRL) {
    ok = state >= 13 && state <= 18;
  }
  if (!ok && !e->stopped) error(c, "a state the ABI does not give this event");
  if (state >= 0 && state < 32) e->states |= 1 << state;
  c->r.proxy_states++;
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

static ncclResult_t init_common(void** context, int* mask, int rank) {
  const char* fail = getenv("BRAID_TEST_PROFILER_FAIL");
  if (fail != NULL && strcmp(fail, "1") == 0) return ncclInternalError;
  struct ctx* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  const char* m = getenv("BRAID_TEST_PROFILER_MASK");
  c->mask = m != NULL ? (int)strtol(m, NULL, 0) : NCCL_PROF_GROUP | NCCL_PROF_COLL | NCCL_PROF_P2P;
  if (m == NULL && PROF_V >= 5) c->mask |= NCCL_PROF_GROUP_API | NCCL_PROF_COLL_API | NCCL_PROF_P2P_API;
  c->rank = rank;
  c->r.version = PROF_V;
  pthread_mutex_lock(&lock);
  if (rank >= 0 && rank < BRAID_TEST_PROFILER_MAX_RANKS) live[rank] = c;
  pthread_mutex_unlock(&lock);
  *mask = c->mask;
  *context = c;
  return ncclSuccess;
}

static ncclResult_t finalize(void* context) {
  struct ctx* c = context;
  pthread_mutex_lock(&lock);
  if (c->r.open != 0) error(c, "events never stopped");
  c->r.finalized = 1;
  if (c->r.errors) /* for runs outside the unit tests (benchmarks), which read no result */
    fprintf(stderr, "braid-test-profiler: rank %d: %d errors, the first: %s\n", c->rank, c->r.errors, c->r.first_error);
  if (getenv("BRAID_TEST_PROFILER_SUMMARY") != NULL)
    fprintf(stderr, "braid-test-profiler: rank %d: ProxyOp %d ProxyStep %d NetPlugin %d states %d\n", c->rank,
            c->r.starts[3], c->r.starts[4], c->r.starts[7], c->r.proxy_states);
  while (c->kept != NULL) {
    struct event* e = c->kept;
    c->kept = e->kept;
    free(e);
  }
  if (c->rank >= 0 && c->rank < BRAID_TEST_PROFILER_MAX_RANKS) {
    results[c->rank] = c->r;
    if (live[c->rank] == c) live[c->rank] = NULL;
  }
  pthread_mutex_unlock(&lock);
  free(c);
  return ncclSuccess;
}

EXPORT int braid_test_profiler_result(int rank, struct braid_test_profiler_result* out) {
  if (rank < 0 || rank >= BRAID_TEST_PROFILER_MAX_RANKS) return -1;
  pthread_mutex_lock(&lock);
  *out = results[rank];
  memset(&results[rank], 0, sizeof(results[rank]));
  pthread_mutex_unlock(&lock);
  return out->finalized ? 0 : -1;
}

/* The counts so far of rank's context that is not finalized yet (-1: none). */
EXPORT int braid_test_profiler_live(int rank, struct braid_test_profiler_result* out) {
  if (rank < 0 || rank >= BRAID_TEST_PROFILER_MAX_RANKS) return -1;
  pthread_mutex_lock(&lock);
  int found = live[rank] != NULL;
  if (found) *out = live[rank]->r;
  pthread_mutex_unlock(&lock);
  return found ? 0 : -1;
}

#if PROF_V >= 5
static ncclResult_t init5(void** context, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                          int rank, nccl_abi_prof_logger_t log) {
  (void)commId, (void)commName, (void)nNodes, (void)nRanks, (void)log;
  return init_common(context, mask, rank);
}
#define TABLE struct nccl_profiler_v5
#define INIT init5
#elif PROF_V == 4
static ncclResult_t init4(void** context, int* mask, const char* commName, uint64_t commHash, int nNodes, int nRanks,
                          int rank, nccl_abi_prof_logger_t log) {
  (void)commName, (void)commHash, (void)nNodes, (void)nRanks, (void)log;
  return init_common(context, mask, rank);
}
#define TABLE struct nccl_profiler_v4
#define INIT init4
#else
static ncclResult_t init1(void** context, int* mask) {
  return init_common(context, mask, -1);
}
#define TABLE struct nccl_profiler_v1
#define INIT init1
#endif

#define SYM2(v) ncclProfiler_v##v
#define SYM(v) SYM2(v)
#if PROF_V >= 1
EXPORT const TABLE SYM(PROF_V) = {"braid-test-profiler", INIT, start, stop, record, finalize};
#endif
