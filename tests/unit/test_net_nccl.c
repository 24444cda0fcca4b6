/*
 * test_net_nccl.c - the NCCL net plugin adapter (src/transport/net/plugin/nccl_adapt.c) end to
 * end: braid's Socket network exported under NCCL's ABI (build/lib/libnccl-net-braid.so, the
 * Makefile builds it with the library) loaded back through the adapter, ranks on fake nodes
 * (NCCL_HOSTID per process) over loopback.
 *
 * TCases:
 *   colls    NCCL_NET_PLUGIN=<path> NCCL_NET=BraidSocket (the search rules, the newest ABI: v12):
 *            AllReduce, Reduce, ReduceScatter, AllGather, Broadcast, a SendRecv ring and an
 *            all-to-all, int32, checked exactly, across 2 nodes (LL, LL128, Simple) and 4 nodes;
 *            then every older ABI (v11 .. v6, the adapter told to stop at that version) across
 *            2 nodes. Each case checks that the adapter is in use at the version expected.
 *   kill     kill -9 of rank 1 during a large all-reduce, 4 ranks on 2 nodes over the plugin:
 *            every survivor fails within 30 s with a message naming the dead rank.
 *   timeout  BRAID_TIMEOUT=2 while the peer never calls: ncclSystemError naming the wait.
 *   search   the same library through a comma-separated list whose first names are missing.
 */
#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "harness.h"
#include "nccl.h"
#include "transport/net/net_internal.h"
#include "transport/net/plugin/nccl_adapt.h"

#define HARNESS_TIMEOUT_S 120
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define NET_NAME "BraidSocket"

/* build/lib/libnccl-net-braid.so next to this runner (build/bin/braid-tests). */
static const char* plugin_path(void) {
  static char path[PATH_MAX];
  return harness_runner_path(path, sizeof(path), "../lib/libnccl-net-braid.so");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank r on fake node r / per_node, over loopback, through the plugin: max_version 0 by the
 * environment's search (NCCL_NET_PLUGIN, NCCL_NET), else the adapter stops at that version. */
static int use_plugin(struct harness_rank* r, int per_node, int max_version, const char* list) {
  char id[48];
  snprintf(id, sizeof(id), "braid-nccl-node-%d", r->rank / per_node);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  if (max_version == 0) {
    setenv("NCCL_NET_PLUGIN", list != NULL ? list : plugin_path(), 1);
    setenv("NCCL_NET", NET_NAME, 1);
  }
  braid_param_reload();
  if (max_version == 0) return 0;
  void* dl = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
  REXPECT(r, dl != NULL, "cannot open %s: %s", plugin_path(), dlerror());
  int v = 0;
  const struct braid_net_v1* net = braid_net_nccl_adapt(dl, plugin_path(), max_version, &v);
  REXPECT(r, net != NULL && v == max_version, "the adapter found v%d, expected v%d", v, max_version);
  RCHECK(r, braid_net_plugin_use(net));
  return 0;
}

/* The network in use is the plugin, adapted at `version`, with the capabilities it declared. */
static int check_in_use(struct harness_rank* r, int version) {
  const struct braid_net_v1* net = NULL;
  struct braid_net_props props;
  RCHECK(r, braid_net_plugin_get(&net));
  REXPECT(r, strcmp(net->name, NET_NAME) == 0, "the network in use is %s, not %s", net->name, NET_NAME);
  REXPECT(r, braid_net_nccl_version() == version, "the adapter runs v%d, expected v%d", braid_net_nccl_version(),
          version);
  RCHECK(r, net->getProperties(0, &props));
  REXPECT(r, (props.ptrSupport & BRAID_NET_PTR_HOST_ANY) && net->getStatus != NULL && net->recvInline != NULL,
          "braid's extension did not come through (ptrSupport 0x%x)", props.ptrSupport);
  return 0;
}

/* ---- collectives ----------------------------------------------------------------------------- */

static int32_t val(int rank, size_t i) {
  return (rank + 1) * 131 + (int32_t)(i % 977);
}

enum pattern { P_ALLREDUCE, P_REDUCE, P_REDUCESCATTER, P_ALLGATHER, P_BCAST, P_RING, P_A2A, P_COUNT };
static const char* const pattern_names[] = {"AllReduce", "Reduce",        "ReduceScatter", "AllGather",
                                            "Broadcast", "SendRecv ring", "AllToAll"};

/* The value rank `me` must hold at out[i] after pattern p (count per rank); 0: not checked. */
static int expected(enum pattern p, int n, int me, size_t count, size_t i, int32_t* v) {
  int32_t s = 0;
  switch (p) {
    case P_ALLREDUCE:
    case P_REDUCE:
      if (p == P_REDUCE && me != n - 1) return 0;
      for (int q = 0; q < n; q++) s += val(q, i);
      break;
    case P_REDUCESCATTER:
      for (int q = 0; q < n; q++) s += val(q, (size_t)me * count + i);
      break;
    case P_ALLGATHER:
      s = val((int)(i / count), i % count);
      break;
    case P_BCAST:
      s = val(1 % n, i);
      break;
    case P_RING:
      s = val((me + n - 1) % n, i);
      break;
    default:
      s = val((int)(i / count), (size_t)me * count + i % count);
      break;
  }
  *v = s;
  return 1;
}

static ncclResult_t run_one(enum pattern p, const int32_t* in, int32_t* out, size_t count, int n, int me,
                            ncclComm_t comm) {
  switch (p) {
    case P_ALLREDUCE:
      return ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL);
    case P_REDUCE:
      return ncclReduce(in, out, count, ncclInt32, ncclSum, n - 1, comm, NULL);
    case P_REDUCESCATTER:
      return ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, NULL);
    case P_ALLGATHER:
      return ncclAllGather(in, out, count, ncclInt32, comm, NULL);
    case P_BCAST:
      return ncclBroadcast(in, out, count, ncclInt32, 1 % n, comm, NULL);
    default:
      break;
  }
  ncclGroupStart();
  for (int q = 0; q < n; q++) {
    if (p == P_RING && q != (me + 1) % n) continue;
    int from = p == P_RING ? (me + n - 1) % n : q;
    size_t off = p == P_RING ? 0 : (size_t)q * count;
    ncclSend(in + off, count, ncclInt32, q, comm, NULL);
    ncclRecv(out + off, count, ncclInt32, from, comm, NULL);
  }
  return ncclGroupEnd();
}

static int run_patterns(struct harness_rank* r, ncclComm_t comm, size_t count) {
  int n = r->nranks, me = r->rank, bad = 0;
  size_t big = (size_t)n * count;
  int32_t* in = malloc(big * sizeof(int32_t));
  int32_t* out = malloc(big * sizeof(int32_t));
  if (in == NULL || out == NULL) bad = harness_fail(r, "out of memory for %zu elements", big);
  for (size_t i = 0; !bad && i < big; i++) in[i] = val(me, i);
  for (int p = 0; p < P_COUNT && !bad; p++) {
    size_t nout = p == P_ALLGATHER || p == P_A2A ? big : count;
    memset(out, 0, big * sizeof(int32_t));
    ncclResult_t res = run_one(p, in, out, count, n, me, comm);
    if (res != ncclSuccess) {
      bad = harness_fail(r, "%s (count %zu) returned %s; last error: %s", pattern_names[p], count,
                         ncclGetErrorString(res), ncclGetLastError(NULL));
      break;
    }
    for (size_t i = 0; i < nout; i++) {
      int32_t v;
      if (!expected(p, n, me, count, i, &v)) break;
      if (out[i] != v) {
        bad = harness_fail(r, "%s count %zu: element %zu is %d, expected %d (NCCL_PROTO=%s)", pattern_names[p], count,
                           i, (int)out[i], (int)v, getenv("NCCL_PROTO") ? getenv("NCCL_PROTO") : "auto");
        break;
      }
    }
  }
  free(in);
  free(out);
  return bad;
}

struct coll_case {
  int nranks, per_node, version; /* version 0: by NCCL_NET_PLUGIN (v12 expected) */
  int loop_protos;
  const char* name;
};

static const struct coll_case coll_cases[] = {
    {2, 1, 0, 1, "2 nodes, by NCCL_NET_PLUGIN (v12)"},
    {4, 1, 0, 0, "4 nodes, by NCCL_NET_PLUGIN (v12)"},
    {4, 2, 0, 0, "4 ranks on 2 nodes, by NCCL_NET_PLUGIN (v12)"},
    {2, 1, 11, 0, "2 nodes, v11"},
    {2, 1, 10, 0, "2 nodes, v10"},
    {2, 1, 9, 0, "2 nodes, v9"},
    {2, 1, 8, 0, "2 nodes, v8"},
    {2, 1, 7, 0, "2 nodes, v7"},
    {2, 1, 6, 0, "2 nodes, v6"},
};

static const char* const protos[] = {"LL", "LL128", "Simple"};

static int body_colls(struct harness_rank* r) {
  const struct coll_case* k = r->arg;
  static const size_t counts[] = {1, 1023, 65537};
  ncclComm_t comm;
  if (use_plugin(r, k->per_node, k->version, NULL)) return 1;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (check_in_use(r, k->version ? k->version : BRAID_NCCL_NET_MAX_VERSION)) return 1;
  for (int p = 0; p < (k->loop_protos ? NELEMS(protos) : 1); p++) {
    if (k->loop_protos) {
      setenv("NCCL_PROTO", protos[p], 1);
      braid_param_reload();
    }
    for (int c = 0; c < NELEMS(counts); c++)
      if (run_patterns(r, comm, counts[c])) return 1;
  }
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_colls) {
  const struct coll_case* k = &coll_cases[_i];
  int failed = harness_run(k->nranks, HARNESS_PROCS, body_colls, (void*)k, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%s: %d ranks failed", k->name, failed);
}
END_TEST

/* ---- kill -9 --------------------------------------------------------------------------------- */

#define VICTIM 1

static void* suicide(void* arg) {
  usleep(30000);
  raise(SIGKILL);
  return NULL;
}

static int body_kill(struct harness_rank* r) {
  size_t count = (64u << 20) / sizeof(float);
  ncclComm_t comm;
  char name[32];
  if (use_plugin(r, 2, 0, NULL)) return 1;
  float* buf = malloc(count * sizeof(float)); /* untouched pages read as zeros */
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (check_in_use(r, BRAID_NCCL_NET_MAX_VERSION)) return 1;
  RCHECK(r, ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL)); /* everyone is up */
  if (r->rank == VICTIM) {
    pthread_t t;
    pthread_create(&t, NULL, suicide, NULL);
  }
  double t0 = now_s();
  ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  double took = now_s() - t0;
  const char* msg = ncclGetLastError(comm);
  if (r->rank == VICTIM) pause(); /* finished before the kill: wait for it */
  REXPECT(r, res == ncclRemoteError || res == ncclSystemError,
          "all-reduce with rank %d killed returned %d (%s), expected a remote or system error", VICTIM, (int)res,
          ncclGetErrorString(res));
  REXPECT(r, took < 30.0, "the all-reduce took %.1f s to fail", took);
  snprintf(name, sizeof(name), "rank %d (host", VICTIM);
  REXPECT(r, strstr(msg, name) != NULL, "the error does not name the dead %s ...): %s", name, msg);
  RCHECK(r, ncclCommAbort(comm));
  free(buf);
  sleep(3); /* a survivor leaving at once would look dead to a slower one */
  return 0;
}

START_TEST(test_kill) {
  int failed = harness_run(4, HARNESS_PROCS, body_kill, NULL, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 1, "kill of rank %d over " NET_NAME ": %d processes failed (only the victim should)", VICTIM,
                failed);
}
END_TEST

/* ---- BRAID_TIMEOUT --------------------------------------------------------------------------- */

static int body_timeout(struct harness_rank* r) {
  ncclComm_t comm;
  int32_t x = 1;
  setenv("BRAID_TIMEOUT", "2", 1);
  setenv("NCCL_ALGO", "Ring", 1); /* the data path's wait, not a tree connection's at first use */
  if (use_plugin(r, 1, 0, NULL)) return 1;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (check_in_use(r, BRAID_NCCL_NET_MAX_VERSION)) return 1;
  if (r->rank == 1) {
    usleep(5000000);
    RCHECK(r, ncclCommAbort(comm));
    return 0;
  }
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, res == ncclSystemError, "the all-reduce returned %d (%s), expected ncclSystemError", (int)res,
          ncclGetErrorString(res));
  REXPECT(r, strstr(msg, "BRAID_TIMEOUT=2") && strstr(msg, "from rank 1 (host"),
          "the message does not say what it waited for: %s", msg);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

START_TEST(test_timeout) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_timeout, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- the search list ------------------------------------------------------------------------- */

static int body_search(struct harness_rank* r) {
  char list[PATH_MAX + 64];
  ncclComm_t comm;
  int32_t x = r->rank + 1;
  snprintf(list, sizeof(list), "braid_missing_a,/nonexistent/libnccl-net-b.so,%s", plugin_path());
  if (use_plugin(r, 1, 0, list)) return 1;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (check_in_use(r, BRAID_NCCL_NET_MAX_VERSION)) return 1;
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  REXPECT(r, x == 3, "the all-reduce gave %d, expected 3", (int)x);
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_search) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_search, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

static TCase* tcase(const char* name, int timeout_s) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  return tc;
}

Suite* net_nccl_suite(void) {
  Suite* s = suite_create("net_nccl");
  TCase* tc = tcase("colls", 240);
  tcase_add_loop_test(tc, test_colls, 0, NELEMS(coll_cases));
  suite_add_tcase(s, tc);
  tc = tcase("kill", 120);
  tcase_add_test(tc, test_kill);
  suite_add_tcase(s, tc);
  tc = tcase("timeout", 60);
  tcase_add_test(tc, test_timeout);
  suite_add_tcase(s, tc);
  tc = tcase("search", 60);
  tcase_add_test(tc, test_search);
  suite_add_tcase(s, tc);
  return s;
}
