/*
 * test_net.c - the network transport (src/transport/net*.c): every collective and
 * point-to-point pattern over sockets between fake nodes (NCCL_HOSTID per process), mixed
 * shared memory + sockets, helper threads, failures, and the Socket plugin on its own.
 *
 * TCases (default tier; BRAID_TEST_TIER=full adds larger counts and the 256 MiB kill):
 *   colls    AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, a SendRecv ring and an
 *            all-to-all, int32, counts 1..262147, protocols LL, LL128 and Simple, checked
 *            exactly: 2, 3 and 4 ranks each on its own node (all sockets); 4 ranks two per node
 *            and 3 ranks as 2+1 (shared memory inside, sockets between); 2 and 3 ranks as
 *            threads with NCCL_SHM_DISABLE=1 (one proxy serves both ends); 2 ranks with
 *            NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2 (pieces over data sockets). From
 *            65537 elements also in place (AllReduce, ReduceScatter, AllGather) and AllReduce
 *            with Avg and PreMulSum (sends from user memory: kernels/direct.h).
 *   kill     kill -9 of each rank position in turn during an all-reduce over sockets (4 ranks,
 *            two fake nodes): every survivor's call fails within 30 s with ncclRemoteError or
 *            ncclSystemError and a message naming the dead rank, ncclCommGetAsyncError agrees,
 *            and after ncclCommAbort no descriptor or thread is left; also with shared memory
 *            inside the nodes, and on one node with shared memory only (the watchdog finds the
 *            dead shared-memory peer).
 *   abort    ncclCommAbort from another thread ends a collective stuck on a silent peer within
 *            a second; nothing is left behind.
 *   garbage  garbage written onto a data socket mid-run: the receiving rank fails naming the
 *            sender and the garbage, the sender fails too, nobody hangs.
 *   timeout  BRAID_TIMEOUT=2 fails a collective whose peer never comes, naming channel, step
 *            and peer, over sockets and over shared memory.
 *   env      NCCL_SOCKET_IFNAME matching nothing, NCCL_NET naming no network, a missing
 *            NCCL_NET_PLUGIN library: clear errors (or the internal plugin), never a hang.
 *   idle     two connected communicators cost (almost) no CPU while idle.
 *   device   an all-reduce of device communicators (fake GPU) over sockets: pinned, mapped
 *            FIFOs that only the progress engine moves (kernels never kick).
 *   caps     the zero-copy host paths follow what a net plugin declares, not which table it
 *            is: Socket's functions under another name without BRAID_NET_PTR_HOST_ANY and
 *            recvInline stage every step through the FIFO; under another name with them,
 *            they send from and receive into user memory.
 * Plugins: colls (the cases marked every_net), kill, abort, timeout and garbage run over every
 * net plugin of net_plugins[] (Socket, and UCX when built), NCCL_NET naming it; adding a plugin
 * is one line there.
 * The Socket plugin on its own: test_net_socket.c.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "device/device.h"
#include "harness.h"
#include "ibemu_fixture.h"
#include "nccl.h"
#include "transport/net/net_internal.h"
#include "transport/net/socket/net_socket.h"
#if BRAID_UCX_BUILT
#include "transport/net/ucx/ucx.h"
#endif
#if BRAID_IB_BUILT
#include <limits.h>

#include "transport/net/ib/ib_net.h"
#endif

#define HARNESS_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 240
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int full_tier(void) {
  const char* t = getenv("BRAID_TEST_TIER");
  return t != NULL && strcmp(t, "full") == 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the net plugins every failure case runs over ------------------------------------------ */

/* A plugin under test: its NCCL_NET name, and (white box, for the garbage case) the descriptor
 * of a connection's byte stream that garbage can be written onto (NULL: the case is skipped,
 * and says so). */
struct net_plugin_case {
  const char* name;
  int (*stream_fd)(void* net_comm);
  const char* kill_full_only; /* non-NULL: kill -9 cases only with BRAID_TEST_TIER=full, and why */
  void (*setup)(void);        /* before the ranks start (they inherit the environment); may be NULL */
};

static int socket_stream_fd(void* c) {
  return ((struct sock_comm*)c)->ctrl.fd;
}
#if BRAID_UCX_BUILT
static int ucx_stream_fd(void* c) {
  return ((struct ucx_comm*)c)->ctrl.fd; /* the control socket: UCX's own data path has no stream */
}
#endif

#if BRAID_IB_BUILT
static int ib_stream_fd(void* c) {
  return ((struct ib_comm*)c)->ctrl.fd; /* the control socket: RDMA writes have no stream */
}
/* Emulated IB (tests/ibemu/, next to the runner: BUILD/bin/../lib): two ports per fake node
 * process, InfiniBand and RoCE, all of them reachable from each other. */
static void ib_setup(void) {
  ibemu_fixture_env("mlx5_0:1:ib", NULL);
}
#endif

static const struct net_plugin_case net_plugins[] = {
    {"Socket", socket_stream_fd, NULL, NULL},
#if BRAID_UCX_BUILT
    /* UCX 1.13.1 sometimes aborts a survivor inside ucp_worker_progress after a peer's kill -9
     * (ucp_rndv_receive: "Assertion (*ep_p)->worker == worker failed"; 1 in about 10 runs) */
    {"UCX", ucx_stream_fd, "UCX 1.13 may abort a survivor in ucp_rndv_receive after a peer's kill -9", NULL},
#endif
#if BRAID_IB_BUILT
    {"IB", ib_stream_fd, NULL, ib_setup},
#endif
};
#define NPLUGINS NELEMS(net_plugins)

/* Select plugin p for the ranks this test starts (they inherit the environment). */
static const struct net_plugin_case* use_plugin(int p) {
  setenv("NCCL_NET", net_plugins[p].name, 1);
  if (net_plugins[p].setup != NULL) net_plugins[p].setup();
  braid_param_reload();
  return &net_plugins[p];
}

/* This process's rank lives on fake node rank / per_node (per_node 0: all on one node); the
 * network goes over loopback. Call before ncclCommInitRank, in the rank's own process. */
static void fake_node(const struct harness_rank* r, int per_node) {
  char id[48];
  snprintf(id, sizeof(id), "braid-test-node-%d", per_node > 0 ? r->rank / per_node : 0);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  braid_param_reload();
}

/* Set "A=1 B=2" (NULL: nothing). */
static void apply_env(const char* env) {
  char buf[256], *save = NULL;
  if (env == NULL) return;
  snprintf(buf, sizeof(buf), "%s", env);
  for (char* tok = strtok_r(buf, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
    char* eq = strchr(tok, '=');
    if (eq == NULL) continue;
    *eq = '\0';
    setenv(tok, eq + 1, 1);
  }
}

/* ---- collectives ------------------------------------------------------------------------------ */

static int32_t val(int rank, size_t i) {
  return (rank + 1) * 131 + (int32_t)(i % 977);
}

static int32_t* ibuf(size_t n) {
  int32_t* p = malloc((n ? n : 1) * sizeof(int32_t));
  return p;
}

/* Compare n values with expected(q, i); q is given by the caller's lambda-like switch. */
static int check_vals(struct harness_rank* r, const char* what, size_t count, const int32_t* got, size_t n,
                      int (*expect)(int nranks, int rank, size_t count, size_t i, int32_t* v), int rank) {
  for (size_t i = 0; i < n; i++) {
    int32_t v;
    expect(r->nranks, rank, count, i, &v);
    if (got[i] != v)
      return harness_fail(r, "%s count %zu: element %zu is %d, expected %d (NCCL_PROTO=%s)", what, count, i,
                          (int)got[i], (int)v, getenv("NCCL_PROTO") ? getenv("NCCL_PROTO") : "auto");
  }
  return 0;
}

static int ex_sum(int n, int rank, size_t count, size_t i, int32_t* v) {
  int32_t s = 0;
  for (int q = 0; q < n; q++) s += val(q, i);
  *v = s;
  return 0;
}
static int ex_rs(int n, int rank, size_t count, size_t i, int32_t* v) {
  int32_t s = 0;
  for (int q = 0; q < n; q++) s += val(q, (size_t)rank * count + i);
  *v = s;
  return 0;
}
static int ex_ag(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = val((int)(i / count), i % count);
  return 0;
}
static int ex_bcast(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = val(1 % n, i);
  return 0;
}
static int ex_ring(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = val((rank + n - 1) % n, i);
  return 0;
}
static int ex_a2a(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = val((int)(i / count), (size_t)rank * count + i % count);
  return 0;
}

/* Every pattern once at `count` elements per rank. */
static int run_patterns(struct harness_rank* r, ncclComm_t comm, size_t count) {
  int n = r->nranks, me = r->rank, root = n - 1, bad = 0;
  size_t big = (size_t)n * count;
  int32_t* in = ibuf(big);
  int32_t* out = ibuf(big);
  if (in == NULL || out == NULL) return harness_fail(r, "out of memory for %zu elements", big);
  for (size_t i = 0; i < big; i++) in[i] = val(me, i);

#define RUN(call)                                                                                                 \
  do {                                                                                                            \
    ncclResult_t res_ = (call);                                                                                   \
    if (res_ != ncclSuccess) {                                                                                    \
      bad = harness_fail(r, "%s (count %zu) returned %s; last error: %s", #call, count, ncclGetErrorString(res_), \
                         ncclGetLastError(NULL));                                                                 \
      goto out;                                                                                                   \
    }                                                                                                             \
  } while (0)

  RUN(ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = check_vals(r, "AllReduce", count, out, count, ex_sum, me))) goto out;
  memset(out, 0, count * sizeof(int32_t));
  RUN(ncclReduce(in, out, count, ncclInt32, ncclSum, root, comm, NULL));
  if (me == root && (bad = check_vals(r, "Reduce", count, out, count, ex_sum, me))) goto out;
  RUN(ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = check_vals(r, "ReduceScatter", count, out, count, ex_rs, me))) goto out;
  RUN(ncclAllGather(in, out, count, ncclInt32, comm, NULL));
  if ((bad = check_vals(r, "AllGather", count, out, big, ex_ag, me))) goto out;
  RUN(ncclBroadcast(in, out, count, ncclInt32, 1 % n, comm, NULL));
  if ((bad = check_vals(r, "Broadcast", count, out, count, ex_bcast, me))) goto out;
  RUN(ncclGroupStart());
  RUN(ncclSend(in, count, ncclInt32, (me + 1) % n, comm, NULL));
  RUN(ncclRecv(out, count, ncclInt32, (me + n - 1) % n, comm, NULL));
  RUN(ncclGroupEnd());
  if ((bad = check_vals(r, "SendRecv ring", count, out, count, ex_ring, me))) goto out;
  RUN(ncclGroupStart());
  for (int q = 0; q < n; q++) {
    RUN(ncclSend(in + (size_t)q * count, count, ncclInt32, q, comm, NULL));
    RUN(ncclRecv(out + (size_t)q * count, count, ncclInt32, q, comm, NULL));
  }
  RUN(ncclGroupEnd());
  if ((bad = check_vals(r, "AllToAll", count, out, big, ex_a2a, me))) goto out;
#undef RUN
out:
  free(in);
  free(out);
  return bad;
}

static int ex_avg(int n, int rank, size_t count, size_t i, int32_t* v) {
  ex_sum(n, rank, count, i, v);
  *v /= n;
  return 0;
}
static int ex_pms3(int n, int rank, size_t count, size_t i, int32_t* v) {
  ex_sum(n, rank, count, i, v);
  *v *= 3;
  return 0;
}

/* In place, and the operators with a pre- or post-operation: a sender that sends from user
 * memory (kernels/direct.h) must neither overwrite what is still being sent nor send a value
 * that misses its pre-op or carries a post-op too early. */
static int run_inplace(struct harness_rank* r, ncclComm_t comm, size_t count) {
  int n = r->nranks, me = r->rank, bad = 0;
  size_t big = (size_t)n * count;
  int32_t* buf = ibuf(big);
  int32_t* out = ibuf(count);
  int32_t three = 3;
  ncclRedOp_t pms;
  int have_pms = 0;
  if (buf == NULL || out == NULL) {
    bad = harness_fail(r, "out of memory for %zu elements", big);
    goto out;
  }
#define RUN(call)                                                                                                 \
  do {                                                                                                            \
    ncclResult_t res_ = (call);                                                                                   \
    if (res_ != ncclSuccess) {                                                                                    \
      bad = harness_fail(r, "%s (count %zu) returned %s; last error: %s", #call, count, ncclGetErrorString(res_), \
                         ncclGetLastError(NULL));                                                                 \
      goto out;                                                                                                   \
    }                                                                                                             \
  } while (0)
  for (size_t i = 0; i < count; i++) buf[i] = val(me, i);
  RUN(ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = check_vals(r, "AllReduce in place", count, buf, count, ex_sum, me))) goto out;
  for (size_t i = 0; i < big; i++) buf[i] = val(me, i);
  RUN(ncclReduceScatter(buf, buf + (size_t)me * count, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = check_vals(r, "ReduceScatter in place", count, buf + (size_t)me * count, count, ex_rs, me))) goto out;
  for (size_t i = 0; i < count; i++) buf[(size_t)me * count + i] = val(me, i);
  RUN(ncclAllGather(buf + (size_t)me * count, buf, count, ncclInt32, comm, NULL));
  if ((bad = check_vals(r, "AllGather in place", count, buf, big, ex_ag, me))) goto out;
  for (size_t i = 0; i < count; i++) buf[i] = val(me, i);
  RUN(ncclAllReduce(buf, out, count, ncclInt32, ncclAvg, comm, NULL));
  if ((bad = check_vals(r, "AllReduce avg", count, out, count, ex_avg, me))) goto out;
  RUN(ncclRedOpCreatePreMulSum(&pms, &three, ncclInt32, ncclScalarHostImmediate, comm));
  have_pms = 1;
  RUN(ncclAllReduce(buf, out, count, ncclInt32, pms, comm, NULL));
  if ((bad = check_vals(r, "AllReduce PreMulSum 3", count, out, count, ex_pms3, me))) goto out;
#undef RUN
out:
  if (have_pms) ncclRedOpDestroy(pms, comm);
  free(buf);
  free(out);
  return bad;
}

struct coll_case {
  int nranks;
  enum harness_mode mode;
  int per_node;    /* ranks per fake node (processes only); 0: one node */
  const char* env; /* for every rank: "A=1 B=2" */
  int loop_protos; /* processes: run every protocol (NCCL_PROTO) in turn */
  const char* name;
  int every_net; /* also over every other plugin of net_plugins[] (Socket runs every case) */
};

static const struct coll_case coll_cases[] = {
    {2, HARNESS_PROCS, 1, NULL, 1, "2 ranks, 2 nodes", 1},
    /* host mode gives each rank a channel per core it has (here usually one): two, as on a
     * larger machine, so that several channels' sockets and steps interleave */
    {2, HARNESS_PROCS, 1, "NCCL_MIN_NCHANNELS=2", 0, "2 ranks, 2 nodes, 2 channels", 0},
    {4, HARNESS_PROCS, 2, "NCCL_MIN_NCHANNELS=2 NCCL_SHM_DISABLE=1", 0, "4 ranks, 2 nodes, 2 channels, sockets only",
     1},
    {3, HARNESS_PROCS, 1, NULL, 1, "3 ranks, 3 nodes", 0},
    {4, HARNESS_PROCS, 1, NULL, 1, "4 ranks, 4 nodes", 1},
    /* nodes of 2 and 1 ranks: every rank must still agree on the channel count */
    {3, HARNESS_PROCS, 2, "NCCL_SHM_DISABLE=1", 1, "3 ranks, 2 nodes, sockets only", 0},
    {4, HARNESS_PROCS, 2, "NCCL_SHM_DISABLE=1", 1, "4 ranks, 2 nodes, sockets only", 0},
    {4, HARNESS_PROCS, 2, NULL, 1, "4 ranks, 2 nodes, shm inside", 1},
    {3, HARNESS_PROCS, 2, NULL, 0, "3 ranks, nodes of 2 and 1, shm inside", 0},
    {2, HARNESS_THREADS, 0, "NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo", 0, "2 threads, sockets", 1},
    {3, HARNESS_THREADS, 0, "NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_PROTO=LL", 0, "3 threads, sockets, LL", 0},
    {2, HARNESS_PROCS, 1, "NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2 NCCL_PROTO=Simple", 0,
     "2 nodes, 4 data sockets", 0},
    {3, HARNESS_PROCS, 3, NULL, 0, "control: 3 ranks on one node (shared memory only)", 0},
};

static const char* const protos[] = {"LL", "LL128", "Simple"};

static int body_colls(struct harness_rank* r) {
  const struct coll_case* k = r->arg;
  static const size_t counts[] = {1, 7, 1023, 65537, 262147};
  ncclComm_t comm;
  if (k->mode != HARNESS_THREADS) {
    apply_env(k->env);
    fake_node(r, k->per_node);
  }
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int np = k->loop_protos ? NELEMS(protos) : 1;
  for (int p = 0; p < np; p++) {
    if (k->loop_protos) {
      setenv("NCCL_PROTO", protos[p], 1);
      braid_param_reload();
    }
    for (int c = 0; c < NELEMS(counts); c++)
      if (run_patterns(r, comm, counts[c]) || (counts[c] > 65536 && run_inplace(r, comm, counts[c]))) return 1;
  }
  if (full_tier() && run_patterns(r, comm, (1 << 22) + 3)) return 1;
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

/* NET_CASE=i runs only loop case i of each TCase, NET_ONLY=<plugin> only that plugin's
 * collective cases (debugging). */
static int skip_case(int i) {
  const char* only = getenv("NET_CASE");
  return only != NULL && *only && atoi(only) != i;
}
static int skip_plugin(int p) {
  const char* only = getenv("NET_ONLY");
  return only != NULL && *only && strcasecmp(only, net_plugins[p].name) != 0;
}

/* (plugin, case) pairs of the colls TCase: every case over Socket, the every_net ones over the
 * other plugins too (filled by net_suite). */
static struct { int plugin, kase; } coll_runs[NELEMS(coll_cases) * NPLUGINS];
static int ncoll_runs;

START_TEST(test_colls) {
  const struct coll_case* k = &coll_cases[coll_runs[_i].kase];
  if (skip_case(coll_runs[_i].kase) || skip_plugin(coll_runs[_i].plugin)) return;
  const struct net_plugin_case* p = use_plugin(coll_runs[_i].plugin);
  if (k->mode == HARNESS_THREADS) apply_env(k->env), braid_param_reload();
  int failed = harness_run(k->nranks, k->mode, body_colls, (void*)k, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%s over %s: %d ranks failed", k->name, p->name, failed);
}
END_TEST

/* After ncclCommAbort: wait (up to 5 s) until the process holds no more descriptors and threads
 * than before its communicator; 0, or 1 with a failure line naming what was left. */
static int released_since(struct harness_rank* r, int fds0, int threads0) {
  int fds = 0, threads = 0;
  for (int i = 0; i < 500; i++) {
    fds = harness_count_fds();
    threads = harness_count_threads();
    if (fds <= fds0 && threads <= threads0) return 0;
    usleep(10000);
  }
  return harness_fail(r, "after abort: %d descriptors (were %d), %d threads (were %d)", fds, fds0, threads, threads0);
}

/* ---- kill -9 during an all-reduce ------------------------------------------------------------ */

struct kill_case {
  int victim;
  const char* env;
  int per_node; /* ranks per fake node */
};

static void* suicide(void* arg) {
  usleep(*(int*)arg * 1000);
  raise(SIGKILL);
  return NULL;
}

static int body_kill(struct harness_rank* r) {
  const struct kill_case* k = r->arg;
  size_t count = (full_tier() ? 256u << 20 : 64u << 20) / sizeof(float);
  ncclComm_t comm;
  char name[32];
  apply_env(k->env);
  fake_node(r, k->per_node);
  int fds0 = harness_count_fds(), threads0 = harness_count_threads();
  float* buf = malloc(count * sizeof(float)); /* untouched pages read as zeros: no fill needed */
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL)); /* everyone is up */
  if (r->rank == k->victim) {
    static int delay_ms = 30;
    pthread_t t;
    pthread_create(&t, NULL, suicide, &delay_ms);
  }
  double t0 = now_s();
  ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  double took = now_s() - t0;
  const char* msg = ncclGetLastError(comm);
  if (r->rank == k->victim) pause(); /* finished before the kill: wait for it */
  REXPECT(r, res == ncclRemoteError || res == ncclSystemError,
          "all-reduce with rank %d killed returned %d (%s), expected a remote or system error", k->victim, (int)res,
          ncclGetErrorString(res));
  REXPECT(r, took < 30.0, "the all-reduce took %.1f s to fail", took);
  snprintf(name, sizeof(name), "rank %d (host", k->victim);
  REXPECT(r, strstr(msg, name) != NULL, "the error does not name the dead %s ...): %s", name, msg);
  ncclResult_t async = ncclSuccess;
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  REXPECT(r, async == ncclRemoteError || async == ncclSystemError, "ncclCommGetAsyncError gave %d", (int)async);
  RCHECK(r, ncclCommAbort(comm));
  free(buf);
  if (released_since(r, fds0, threads0)) return 1;
  /* Stay alive a while: a survivor that exits at once is itself a dead peer to a slower
   * survivor on another node, which may then blame it instead of the victim. */
  sleep(3);
  return 0;
}

static const struct kill_case kill_cases[] = {
    {0, "NCCL_SHM_DISABLE=1", 2},
    {1, "NCCL_SHM_DISABLE=1", 2},
    {2, "NCCL_SHM_DISABLE=1", 2},
    {3, "NCCL_SHM_DISABLE=1", 2},
    {1, NULL, 2}, /* shared memory inside the nodes: rank 0 learns of rank 1 from the watchdog */
    {2, NULL, 4}, /* one node, shared memory only: the watchdog alone */
};

/* The plugins whose kill cases this tier registers (filled by net_suite): a case that does not
 * run is not registered, so it is never counted as passed. */
static int kill_plugins[NPLUGINS];
static int nkill_plugins;

START_TEST(test_kill) {
  const struct kill_case* k = &kill_cases[_i % NELEMS(kill_cases)];
  if (skip_case(_i % NELEMS(kill_cases))) return;
  const struct net_plugin_case* p = use_plugin(kill_plugins[_i / NELEMS(kill_cases)]);
  int shm0 = harness_count_shm();
  int failed = harness_run(4, HARNESS_PROCS, body_kill, (void*)k, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 1,
                "kill of rank %d over %s (%s, %d ranks per node): %d processes failed (only the victim should)",
                k->victim, p->name, k->env ? k->env : "shared memory inside nodes", k->per_node, failed);
  ck_assert_int_le(harness_count_shm(), shm0);
}
END_TEST

/* ---- abort from another thread -------------------------------------------------------------- */

struct aborter {
  ncclComm_t comm;
};

static void* abort_later(void* arg) {
  struct aborter* a = arg;
  usleep(300000);
  ncclCommAbort(a->comm);
  return NULL;
}

/* Rank 1 stays in the communicator, without joining the collective, until rank 0's
 * all-reduce has returned (a flag in memory both processes share), so only rank 0's own
 * ncclCommAbort can have ended it; rank 1 gives up after 60 s, which fails the case. */
static int body_abort(struct harness_rank* r) {
  volatile int* returned = r->arg;
  size_t count = 4 << 20;
  ncclComm_t comm;
  fake_node(r, 1);
  int fds0 = harness_count_fds(), threads0 = harness_count_threads();
  float* buf = calloc(count, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 1) {
    for (int i = 0; i < 6000 && !__atomic_load_n(returned, __ATOMIC_ACQUIRE); i++) usleep(10000);
    REXPECT(r, __atomic_load_n(returned, __ATOMIC_ACQUIRE), "rank 0's all-reduce did not return after its abort");
    RCHECK(r, ncclCommAbort(comm));
  } else {
    struct aborter a = {comm};
    pthread_t t;
    pthread_create(&t, NULL, abort_later, &a);
    ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    __atomic_store_n(returned, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    REXPECT(r, res != ncclSuccess, "the all-reduce succeeded without its peer");
  }
  free(buf);
  if (released_since(r, fds0, threads0)) return 1;
  return 0;
}

START_TEST(test_abort) {
  use_plugin(_i);
  int* returned = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(returned, MAP_FAILED);
  *returned = 0;
  int failed = harness_run(2, HARNESS_PROCS, body_abort, returned, HARNESS_TIMEOUT_S);
  munmap(returned, sizeof(int));
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- BRAID_TIMEOUT ------------------------------------------------------------------------------ */

static int body_timeout(struct harness_rank* r) {
  ncclComm_t comm;
  int32_t x = 1;
  setenv("BRAID_TIMEOUT", "2", 1);
  /* The wait under test is the data path's (a FIFO step). The tuner may pick the tree for one
   * element, whose connections are made at first use over the bootstrap: a wait there fails
   * with ncclInvalidUsage from the bootstrap, not with this message (reported, connect.c). */
  setenv("NCCL_ALGO", "Ring", 1);
  fake_node(r, *(const int*)r->arg); /* 1: two nodes (sockets); 2: one node (shared memory) */
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 1) {
    usleep(5000000);
    RCHECK(r, ncclCommAbort(comm));
    return 0;
  }
  double t0 = now_s();
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  double took = now_s() - t0;
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, res == ncclSystemError, "the all-reduce returned %d (%s), expected ncclSystemError", (int)res,
          ncclGetErrorString(res));
  REXPECT(r, took >= 1.5 && took < 30.0, "it failed after %.1f s with BRAID_TIMEOUT=2", took);
  REXPECT(r, strstr(msg, "BRAID_TIMEOUT=2") && strstr(msg, "channel 0 waits for step 0 from rank 1 (host"),
          "the message does not say what it waited for: %s", msg);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

static const int timeout_per_node[] = {1, 2};

/* BRAID_TIMEOUT while a tree's connections are being made at first use (3 ranks, 3 fake nodes,
 * rank 2 never calls): the call fails as a data-path timeout would, ncclSystemError and the
 * BRAID_TIMEOUT message, not as an "aborted" bootstrap receive. */
static int body_timeout_connect(struct harness_rank* r) {
  ncclComm_t comm;
  int32_t x = 1;
  setenv("BRAID_TIMEOUT", "2", 1);
  setenv("NCCL_ALGO", "allreduce:Tree", 1);
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 2) {
    usleep(6000000);
    RCHECK(r, ncclCommAbort(comm));
    return 0;
  }
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, res == ncclSystemError || res == ncclRemoteError,
          "the all-reduce returned %d (%s), expected a system or remote error", (int)res, ncclGetErrorString(res));
  REXPECT(r, strstr(msg, "BRAID_TIMEOUT") != NULL || strstr(msg, "rank 2") != NULL,
          "the message names neither the timeout nor the missing rank: %s", msg);
  /* Neither of the two leaves before both have failed: a rank that exits after its timeout
   * would otherwise be seen dying by the other (which then rightly names it, not rank 2). */
  int* failed = r->arg;
  __atomic_add_fetch(failed, 1, __ATOMIC_ACQ_REL);
  for (int i = 0; i < 6000 && __atomic_load_n(failed, __ATOMIC_ACQUIRE) < 2; i++) usleep(10000);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

START_TEST(test_timeout_connect) {
  use_plugin(_i);
  int* failed = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(failed, MAP_FAILED);
  *failed = 0;
  int res = harness_run(3, HARNESS_PROCS, body_timeout_connect, failed, HARNESS_TIMEOUT_S);
  munmap(failed, sizeof(int));
  ck_assert_int_eq(res, 0);
}
END_TEST

START_TEST(test_timeout) {
  use_plugin(_i / NELEMS(timeout_per_node));
  const int* per_node = &timeout_per_node[_i % NELEMS(timeout_per_node)];
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_timeout, (void*)per_node, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- a receive into user memory outlived by its call --------------------------------------- */

/* Rank 0's ncclRecv (large: it lands straight in the user's buffer, kernels/direct.h) fails on
 * BRAID_TIMEOUT while rank 1 has not sent yet. Rank 0 then fills its buffer with a marker, and
 * only then (a flag file) rank 1 sends after all; its bytes reach rank 0's socket, and once
 * rank 1's send has given up (a second flag) rank 0's buffer must still hold the marker: a
 * receive still posted there would have taken them. Rank 1's own result does not matter. */
static void abandon_flag_path(char* path, size_t len, const char* what) {
  snprintf(path, len, "/tmp/braid-test-abandon-%d-%s", (int)getppid(), what); /* the ranks share a parent */
}
static void abandon_flag_set(const char* what) {
  char path[96];
  abandon_flag_path(path, sizeof(path), what);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) close(fd);
}
static int abandon_flag_wait(const char* what) {
  char path[96];
  abandon_flag_path(path, sizeof(path), what);
  for (int i = 0; i < 6000; i++) { /* 60 s: a hang guard, not a timing condition */
    if (access(path, F_OK) == 0) return 0;
    usleep(10000);
  }
  return -1;
}

static int body_abandon(struct harness_rank* r) {
  size_t bytes = 4 << 20;
  ncclComm_t comm;
  char path[96];
  setenv("BRAID_TIMEOUT", "1", 1);
  fake_node(r, 1);
  unsigned char* buf = malloc(bytes);
  REXPECT(r, buf != NULL, "out of memory");
  memset(buf, 0x11, bytes);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  /* p2p connections are made at first use: make them now, so the receive under test is posted */
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(buf, 1, ncclUint8, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclRecv(buf + 1, 1, ncclUint8, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  if (r->rank == 1) {
    int waited = abandon_flag_wait("marked");
    if (waited == 0) (void)ncclSend(buf, bytes, ncclUint8, 0, comm, NULL); /* fails on BRAID_TIMEOUT */
    abandon_flag_set("sent");
    ncclCommAbort(comm);
    free(buf);
    REXPECT(r, waited == 0, "rank 0 never marked its buffer");
    return 0;
  }
  ncclResult_t res = ncclRecv(buf, bytes, ncclUint8, 1, comm, NULL);
  memset(buf, 0xA5, bytes);
  abandon_flag_set("marked");
  int waited = abandon_flag_wait("sent");
  usleep(200000); /* a receive still posted would be served by the proxy thread by now */
  size_t changed = 0, first = 0;
  for (size_t i = 0; i < bytes; i++)
    if (buf[i] != 0xA5 && changed++ == 0) first = i;
  ncclCommAbort(comm);
  free(buf);
  abandon_flag_path(path, sizeof(path), "marked");
  unlink(path);
  abandon_flag_path(path, sizeof(path), "sent");
  unlink(path);
  REXPECT(r, res != ncclSuccess, "the receive succeeded before its peer sent");
  REXPECT(r, waited == 0, "rank 1 never said it sent");
  REXPECT(r, changed == 0, "%zu bytes of the buffer changed after the failed receive returned (first at %zu)", changed,
          first);
  return 0;
}

START_TEST(test_abandon) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_abandon, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- garbage on a data socket -------------------------------------------------------------- */

/* Rank 0 writes garbage straight onto the byte stream of its channel-0 ring send connection
 * (white box: through the communicator's internals and the plugin's stream_fd); rank 1 must
 * fail its next call naming rank 0 and the garbage, and rank 0 must fail too (rank 1 aborts),
 * neither hangs nor crashes. */
struct garbage_arg {
  const struct net_plugin_case* plugin;
  int* warm; /* shared: ranks whose first all-reduce returned */
};

static int body_garbage(struct harness_rank* r) {
  const struct garbage_arg* g = r->arg;
  const struct net_plugin_case* p = g->plugin;
  ncclComm_t comm;
  int32_t x = 1;
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  /* Garbage only once both ranks are done with the first call: a plugin whose data and control
   * travel apart (UCX) does not order the garbage after data that was sent before it. */
  __atomic_add_fetch(g->warm, 1, __ATOMIC_ACQ_REL);
  for (int i = 0; i < 6000 && __atomic_load_n(g->warm, __ATOMIC_ACQUIRE) < 2; i++) usleep(10000);
  if (r->rank == 0) {
    struct braid_connector* c = &braid_comm_of(comm)->channels[0].ring_send;
    REXPECT(r, c->transport != NULL && strcmp(c->transport->name, "NET") == 0,
            "the ring connection is not a network one");
    struct net_res* res = c->res;
    static const char junk[64] = "GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE";
    REXPECT(r, strcmp(res->net->name, p->name) == 0, "the connection uses %s, not %s", res->net->name, p->name);
    REXPECT(r, write(p->stream_fd(res->net_comm), junk, sizeof(junk)) == (ssize_t)sizeof(junk),
            "cannot write the garbage");
  }
  double t0 = now_s();
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  /* Rank 0 sent the garbage, not received it: with a one-hop algorithm (2-rank exchange) its
   * own call can complete on rank 1's intact data. Its next call must fail then, since rank 1
   * aborts. */
  if (res == ncclSuccess && r->rank == 0) res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  REXPECT(r, res != ncclSuccess, "the all-reduce after garbage succeeded");
  REXPECT(r, now_s() - t0 < 30, "it took %.1f s to fail", now_s() - t0);
  /* Rank 1's proxy may see the garbage before the call starts (the call then fails at once):
   * the reason stays with the communicator, as its asynchronous error. */
  ncclResult_t async = ncclSuccess;
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  REXPECT(r, async == ncclRemoteError, "ncclCommGetAsyncError gave %d", (int)async);
  const char* why = braid_comm_of(comm)->abort_reason;
  if (r->rank == 1)
    REXPECT(r, strstr(why, "rank 0 (host") && strstr(why, "garbage"),
            "the reason does not name rank 0 and the garbage: %s", why);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

START_TEST(test_garbage) {
  const struct net_plugin_case* p = use_plugin(_i);
  if (p->stream_fd == NULL) {
    fprintf(stderr, "net garbage over %s: SKIPPED: the plugin has no byte stream to write garbage onto\n", p->name);
    return;
  }
  int* warm = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(warm, MAP_FAILED);
  *warm = 0;
  struct garbage_arg g = {p, warm};
  int res = harness_run(2, HARNESS_PROCS, body_garbage, &g, HARNESS_TIMEOUT_S);
  munmap(warm, sizeof(int));
  ck_assert_int_eq(res, 0);
}
END_TEST

/* ---- configuration errors -------------------------------------------------------------------- */

struct env_case {
  const char* env;
  int must_fail;
  const char* message; /* in the last error when it fails */
};

static const struct env_case env_cases[] = {
    {"NCCL_SOCKET_IFNAME=braid_no_such_if", 1, "NCCL_SOCKET_IFNAME=braid_no_such_if matches no usable interface"},
    {"NCCL_NET=Bogus", 1, "NCCL_NET=Bogus: no network of that name"},
    {"NCCL_NET_PLUGIN=braid_missing", 0, NULL},
    {"NCCL_NET=socket NCCL_NET_PLUGIN=none", 0, NULL},
};

static int body_env(struct harness_rank* r) {
  const struct env_case* k = r->arg;
  ncclComm_t comm = NULL;
  fake_node(r, 1);
  apply_env(k->env); /* after fake_node: it may override NCCL_SOCKET_IFNAME */
  braid_param_reload();
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (!k->must_fail) {
    RCHECK(r, res);
    int32_t x = r->rank;
    RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
    REXPECT(r, x == 1, "all-reduce gave %d", (int)x);
    RCHECK(r, ncclCommDestroy(comm));
    return 0;
  }
  REXPECT(r, res != ncclSuccess, "init succeeded with %s", k->env);
  const char* msg = ncclGetLastError(NULL);
  REXPECT(r, strstr(msg, k->message) != NULL, "init failed (%s) but the last error does not say why: %s",
          ncclGetErrorString(res), msg);
  return 0;
}

START_TEST(test_env) {
  const struct env_case* k = &env_cases[_i];
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_env, (void*)k, 60), 0);
}
END_TEST

/* ---- idle cost -------------------------------------------------------------------------------- */

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int body_idle(struct harness_rank* r) {
  ncclComm_t comm;
  int32_t x = 1;
  fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  usleep(200000);
  double c0 = cpu_s(), t0 = now_s();
  usleep(1000000);
  double used = cpu_s() - c0, wall = now_s() - t0;
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  RCHECK(r, ncclCommDestroy(comm));
  REXPECT(r, used < 0.2 * wall, "an idle rank used %.3f s of CPU in %.3f s", used, wall);
  return 0;
}

START_TEST(test_idle) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_idle, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- device communicators (fake GPU) ---------------------------------------------------------- */

/* One fake GPU per process, each rank on its own fake node: the FIFOs are pinned host memory
 * mapped for the device, the kernels (the fake GPU's stream thread) never kick, so the proxy
 * thread alone moves every step. A communicator that still comes up in host mode (no device
 * binding in init.c yet) marks "host-mode" and stops. */
static int body_device(struct harness_rank* r) {
  static const size_t counts[] = {1, 1023, 65537, (1 << 20) + 3};
  ncclComm_t comm;
  int dev = -1, bad = 0;
  setenv("BRAID_FAKE_GPU", "1", 1);
  unsetenv("BRAID_HOST_MODE");
  fake_node(r, 1);
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  if (d == NULL) return harness_fail(r, "BRAID_FAKE_GPU=1 but no device layer");
  RCHECK(r, d->set_current(0));
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclCommCuDevice(comm, &dev));
  if (dev < 0) {
    fprintf(stderr, "net device: NOT RUN: with BRAID_FAKE_GPU=1 the communicator came up in host mode\n");
    RCHECK(r, ncclCommDestroy(comm));
    return 0;
  }
  size_t max = counts[NELEMS(counts) - 1];
  int32_t* host = ibuf(max);
  int32_t* buf = NULL;
  if (host == NULL) return harness_fail(r, "out of memory");
  RCHECK(r, ncclMemAlloc((void**)&buf, max * sizeof(int32_t)));
  for (int c = 0; c < NELEMS(counts) && !bad; c++) {
    size_t n = counts[c];
    for (size_t i = 0; i < n; i++) host[i] = val(r->rank, i);
    RCHECK(r, d->memcpy_sync(buf, host, n * sizeof(int32_t)));
    RCHECK(r, ncclAllReduce(buf, buf, n, ncclInt32, ncclSum, comm, NULL));
    RCHECK(r, d->stream_sync(NULL));
    RCHECK(r, d->memcpy_sync(host, buf, n * sizeof(int32_t)));
    bad = check_vals(r, "device AllReduce", n, host, n, ex_sum, r->rank);
  }
  ncclMemFree(buf);
  free(host);
  RCHECK(r, ncclCommDestroy(comm));
  return bad;
}

START_TEST(test_device) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_device, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- capabilities: a plugin gets the zero-copy host paths by declaring them ----------------- */

/* The Socket plugin under other names (another table, as an external plugin would be): one
 * declaring no zero-copy capability (no BRAID_NET_PTR_HOST_ANY, no recvInline), one declaring
 * what Socket declares. */
static struct braid_net_v1 plain_net, declared_net;
static ncclResult_t plain_props(int dev, struct braid_net_props* props) {
  ncclResult_t res = braid_net_socket.getProperties(dev, props);
  props->ptrSupport &= ~BRAID_NET_PTR_HOST_ANY;
  return res;
}

/* Host mode, 2 ranks on 2 fake nodes: with the plain plugin every connection stages through
 * its FIFO (conn.direct and conn.rdirect 0); a plugin declaring Socket's capabilities gets
 * ring connections that send from and receive into user memory, though it is not
 * braid_net_socket; the all-reduce is right either way. */
static int body_caps(struct harness_rank* r) {
  int declared = *(const int*)r->arg, bad = 0;
  const size_t count = 65537;
  ncclComm_t comm;
  plain_net = braid_net_socket;
  plain_net.name = "Plain";
  plain_net.getProperties = plain_props;
  plain_net.recvInline = NULL;
  declared_net = braid_net_socket;
  declared_net.name = "Declared";
  fake_node(r, 1);
  setenv("NCCL_PROTO", "Simple", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  braid_param_reload();
  RCHECK(r, braid_net_plugin_use(declared ? &declared_net : &plain_net));
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int32_t* buf = ibuf(count);
  REXPECT(r, buf != NULL, "out of memory");
  for (size_t i = 0; i < count; i++) buf[i] = val(r->rank, i);
  RCHECK(r, ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL));
  bad = check_vals(r, declared ? "AllReduce (Declared)" : "AllReduce (Plain)", count, buf, count, ex_sum, r->rank);
  const struct braid_channel* ch = &braid_comm_of(comm)->channels[0];
  /* BRAID_NET_DIRECT=0 (tests/run.sh's second net run) turns the zero-copy paths off for all */
  int want = declared && braid_param_int(BRAID_PARAM_NET_DIRECT) != 0;
  if (!bad && (ch->ring_send.conn.direct != want || ch->ring_recv.conn.rdirect != want))
    bad = harness_fail(r, "%s plugin: ring send direct %d, ring receive rdirect %d, expected %d",
                       declared ? "Declared" : "Plain", ch->ring_send.conn.direct, ch->ring_recv.conn.rdirect, want);
  free(buf);
  RCHECK(r, ncclCommDestroy(comm));
  return bad;
}

START_TEST(test_caps) {
  static const int declared[] = {0, 1};
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_caps, (void*)&declared[_i], HARNESS_TIMEOUT_S), 0);
}
END_TEST

static TCase* tcase(const char* name, int timeout_s) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  return tc;
}

Suite* net_suite(void) {
  Suite* s = suite_create("net");
  ncoll_runs = 0;
  for (int p = 0; p < NPLUGINS; p++)
    for (int k = 0; k < NELEMS(coll_cases); k++)
      if (p == 0 || coll_cases[k].every_net) coll_runs[ncoll_runs].plugin = p, coll_runs[ncoll_runs++].kase = k;
  TCase* tc = tcase("colls", TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_colls, 0, ncoll_runs);
  suite_add_tcase(s, tc);
  tc = tcase("kill", TCASE_TIMEOUT_S);
  nkill_plugins = 0;
  for (int p = 0; p < NPLUGINS; p++) {
    if (net_plugins[p].kill_full_only == NULL || full_tier())
      kill_plugins[nkill_plugins++] = p;
    else
      fprintf(stderr, "net: %d kill cases over %s not run in this tier (BRAID_TEST_TIER=full runs them): %s\n",
              (int)NELEMS(kill_cases), net_plugins[p].name, net_plugins[p].kill_full_only);
  }
  tcase_add_loop_test(tc, test_kill, 0, NELEMS(kill_cases) * nkill_plugins);
  suite_add_tcase(s, tc);
  tc = tcase("abort", 60);
  tcase_add_loop_test(tc, test_abort, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  tc = tcase("timeout", 60);
  tcase_add_loop_test(tc, test_timeout, 0, NELEMS(timeout_per_node) * NPLUGINS);
  tcase_add_loop_test(tc, test_timeout_connect, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  tc = tcase("abandon", 60);
  tcase_add_test(tc, test_abandon);
  suite_add_tcase(s, tc);
  tc = tcase("garbage", 60);
  tcase_add_loop_test(tc, test_garbage, 0, NPLUGINS);
  suite_add_tcase(s, tc);
  tc = tcase("env", 90);
  tcase_add_loop_test(tc, test_env, 0, NELEMS(env_cases));
  suite_add_tcase(s, tc);
  tc = tcase("idle", 60);
  tcase_add_test(tc, test_idle);
  suite_add_tcase(s, tc);
  tc = tcase("device", 120);
  tcase_add_test(tc, test_device);
  suite_add_tcase(s, tc);
  tc = tcase("caps", 60);
  tcase_add_loop_test(tc, test_caps, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}
