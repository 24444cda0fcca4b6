/*
 * test_net.c - the network transport (src/transport/net*.c), suite "net": every collective and
 * point-to-point pattern between fake nodes (NCCL_HOSTID per process), mixed shared memory +
 * network, helper threads; the failure cases (net_cases_fail.c) and the rest (net_cases_misc.c)
 * join the same suite. What they share: net_fixture.h.
 *
 * TCases (default tier; BRAID_TEST_TIER=full adds larger counts and the 256 MiB kill):
 *   colls    AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, a SendRecv ring and an
 *            all-to-all, int32, counts 1..262147, protocols LL, LL128 and Simple, checked
 *            exactly: 2, 3 and 4 ranks each on its own node (all sockets); 4 ranks two per node
 *            and 3 ranks as 2+1 (shared memory inside, sockets between); 2 and 3 ranks as
 *            threads with NCCL_SHM_DISABLE=1 (one proxy serves both ends); 2 ranks with
 *            NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2 (pieces over data sockets). From
 *            65537 elements also in place (AllReduce, ReduceScatter, AllGather) and AllReduce
 *            with Avg and PreMulSum (sends from user memory: kernels/direct.h);
 *   kill, abort, timeout, abandon, garbage: net_cases_fail.c;
 *   env, idle, device, caps: net_cases_misc.c.
 * Plugins: colls (the cases marked every_net), kill, abort, timeout and garbage run over every
 * net plugin of net_plugins[] (net_fixture.c: Socket, UCX and IB over the emulator when built),
 * NCCL_NET naming it; adding a plugin is one line there. NET_CASE=i / NET_ONLY=<plugin> narrow
 * a run (debugging). The Socket plugin on its own: test_net_socket.c.
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
#include "net_fixture.h"
#include "transport/net/net_internal.h"
#include "transport/net/socket/net_socket.h"
#if BRAID_UCX_BUILT
#include "transport/net/ucx/ucx.h"
#endif
#if BRAID_IB_BUILT
#include <limits.h>

#include "transport/net/ib/ib_net.h"
#endif

/* ---- collectives ------------------------------------------------------------------------------ */

static int ex_rs(int n, int rank, size_t count, size_t i, int32_t* v) {
  int32_t s = 0;
  for (int q = 0; q < n; q++) s += net_val(q, (size_t)rank * count + i);
  *v = s;
  return 0;
}
static int ex_ag(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = net_val((int)(i / count), i % count);
  return 0;
}
static int ex_bcast(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = net_val(1 % n, i);
  return 0;
}
static int ex_ring(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = net_val((rank + n - 1) % n, i);
  return 0;
}
static int ex_a2a(int n, int rank, size_t count, size_t i, int32_t* v) {
  *v = net_val((int)(i / count), (size_t)rank * count + i % count);
  return 0;
}

/* Every pattern once at `count` elements per rank. */
static int run_patterns(struct harness_rank* r, ncclComm_t comm, size_t count) {
  int n = r->nranks, me = r->rank, root = n - 1, bad = 0;
  size_t big = (size_t)n * count;
  int32_t* in = net_ibuf(big);
  int32_t* out = net_ibuf(big);
  if (in == NULL || out == NULL) return harness_fail(r, "out of memory for %zu elements", big);
  for (size_t i = 0; i < big; i++) in[i] = net_val(me, i);

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
  if ((bad = net_check_vals(r, "AllReduce", count, out, count, net_ex_sum, me))) goto out;
  memset(out, 0, count * sizeof(int32_t));
  RUN(ncclReduce(in, out, count, ncclInt32, ncclSum, root, comm, NULL));
  if (me == root && (bad = net_check_vals(r, "Reduce", count, out, count, net_ex_sum, me))) goto out;
  RUN(ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = net_check_vals(r, "ReduceScatter", count, out, count, ex_rs, me))) goto out;
  RUN(ncclAllGather(in, out, count, ncclInt32, comm, NULL));
  if ((bad = net_check_vals(r, "AllGather", count, out, big, ex_ag, me))) goto out;
  RUN(ncclBroadcast(in, out, count, ncclInt32, 1 % n, comm, NULL));
  if ((bad = net_check_vals(r, "Broadcast", count, out, count, ex_bcast, me))) goto out;
  RUN(ncclGroupStart());
  RUN(ncclSend(in, count, ncclInt32, (me + 1) % n, comm, NULL));
  RUN(ncclRecv(out, count, ncclInt32, (me + n - 1) % n, comm, NULL));
  RUN(ncclGroupEnd());
  if ((bad = net_check_vals(r, "SendRecv ring", count, out, count, ex_ring, me))) goto out;
  RUN(ncclGroupStart());
  for (int q = 0; q < n; q++) {
    RUN(ncclSend(in + (size_t)q * count, count, ncclInt32, q, comm, NULL));
    RUN(ncclRecv(out + (size_t)q * count, count, ncclInt32, q, comm, NULL));
  }
  RUN(ncclGroupEnd());
  if ((bad = net_check_vals(r, "AllToAll", count, out, big, ex_a2a, me))) goto out;
#undef RUN
out:
  free(in);
  free(out);
  return bad;
}

static int ex_avg(int n, int rank, size_t count, size_t i, int32_t* v) {
  net_ex_sum(n, rank, count, i, v);
  *v /= n;
  return 0;
}
static int ex_pms3(int n, int rank, size_t count, size_t i, int32_t* v) {
  net_ex_sum(n, rank, count, i, v);
  *v *= 3;
  return 0;
}

/* In place, and the operators with a pre- or post-operation: a sender that sends from user
 * memory (kernels/direct.h) must neither overwrite what is still being sent nor send a value
 * that misses its pre-op or carries a post-op too early. */
static int run_inplace(struct harness_rank* r, ncclComm_t comm, size_t count) {
  int n = r->nranks, me = r->rank, bad = 0;
  size_t big = (size_t)n * count;
  int32_t* buf = net_ibuf(big);
  int32_t* out = net_ibuf(count);
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
  for (size_t i = 0; i < count; i++) buf[i] = net_val(me, i);
  RUN(ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = net_check_vals(r, "AllReduce in place", count, buf, count, net_ex_sum, me))) goto out;
  for (size_t i = 0; i < big; i++) buf[i] = net_val(me, i);
  RUN(ncclReduceScatter(buf, buf + (size_t)me * count, count, ncclInt32, ncclSum, comm, NULL));
  if ((bad = net_check_vals(r, "ReduceScatter in place", count, buf + (size_t)me * count, count, ex_rs, me))) goto out;
  for (size_t i = 0; i < count; i++) buf[(size_t)me * count + i] = net_val(me, i);
  RUN(ncclAllGather(buf + (size_t)me * count, buf, count, ncclInt32, comm, NULL));
  if ((bad = net_check_vals(r, "AllGather in place", count, buf, big, ex_ag, me))) goto out;
  for (size_t i = 0; i < count; i++) buf[i] = net_val(me, i);
  RUN(ncclAllReduce(buf, out, count, ncclInt32, ncclAvg, comm, NULL));
  if ((bad = net_check_vals(r, "AllReduce avg", count, out, count, ex_avg, me))) goto out;
  RUN(ncclRedOpCreatePreMulSum(&pms, &three, ncclInt32, ncclScalarHostImmediate, comm));
  have_pms = 1;
  RUN(ncclAllReduce(buf, out, count, ncclInt32, pms, comm, NULL));
  if ((bad = net_check_vals(r, "AllReduce PreMulSum 3", count, out, count, ex_pms3, me))) goto out;
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
    net_apply_env(k->env);
    net_fake_node(r, k->per_node);
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
  if (net_full_tier() && run_patterns(r, comm, (1 << 22) + 3)) return 1;
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

/* (plugin, case) pairs of the colls TCase: every case over Socket, the every_net ones over the
 * other plugins too (filled by net_suite). */
static struct { int plugin, kase; } coll_runs[NELEMS(coll_cases) * NET_MAX_PLUGINS];
static int ncoll_runs;

START_TEST(test_colls) {
  const struct coll_case* k = &coll_cases[coll_runs[_i].kase];
  if (net_skip_case(coll_runs[_i].kase) || net_skip_plugin(coll_runs[_i].plugin)) return;
  const struct net_plugin_case* p = net_use_plugin(coll_runs[_i].plugin);
  if (k->mode == HARNESS_THREADS) net_apply_env(k->env), braid_param_reload();
  int failed = harness_run(k->nranks, k->mode, body_colls, (void*)k, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%s over %s: %d ranks failed", k->name, p->name, failed);
}
END_TEST

Suite* net_suite(void) {
  Suite* s = suite_create("net");
  ncoll_runs = 0;
  for (int p = 0; p < net_nplugins; p++)
    for (int k = 0; k < NELEMS(coll_cases); k++)
      if (p == 0 || coll_cases[k].every_net) coll_runs[ncoll_runs].plugin = p, coll_runs[ncoll_runs++].kase = k;
  TCase* tc = net_tcase("colls", TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_colls, 0, ncoll_runs);
  suite_add_tcase(s, tc);
  net_fail_tcases(s);
  net_misc_tcases(s);
  return s;
}
