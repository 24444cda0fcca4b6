/*
 * net_fixture.c - the network suite's shared helpers (net_fixture.h).
 */
#include "net_fixture.h"

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

int net_full_tier(void) {
  const char* t = getenv("BRAID_TEST_TIER");
  return t != NULL && strcmp(t, "full") == 0;
}

double net_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the net plugins every failure case runs over ------------------------------------------ */

static int socket_stream_fd(void* c) {
  return ((struct sock_comm*)c)->ctrl.fd;
}
#if BRAID_UCX_BUILT
static int ucx_stream_fd(void* c) {
  return ((struct ucx_comm*)c)->ctl.sock.fd; /* the control socket: UCX's own data path has no stream */
}
#endif

#if BRAID_IB_BUILT
static int ib_stream_fd(void* c) {
  return ((struct ib_comm*)c)->ctl.sock.fd; /* the control socket: RDMA writes have no stream */
}
/* Emulated IB (tests/ibemu/, next to the runner: BUILD/bin/../lib): two ports per fake node
 * process, InfiniBand and RoCE, all of them reachable from each other. */
static void ib_setup(void) {
  ibemu_fixture_env("mlx5_0:1:ib", NULL);
}
#endif

const struct net_plugin_case net_plugins[] = {
    {"Socket", socket_stream_fd, NULL, NULL},
#if BRAID_UCX_BUILT
    {"UCX", ucx_stream_fd, NULL, NULL},
#endif
#if BRAID_IB_BUILT
    {"IB", ib_stream_fd, NULL, ib_setup},
#endif
};
const int net_nplugins = NELEMS(net_plugins);
_Static_assert(NELEMS(net_plugins) <= NET_MAX_PLUGINS, "NET_MAX_PLUGINS");

const struct net_plugin_case* net_use_plugin(int p) {
  setenv("NCCL_NET", net_plugins[p].name, 1);
  if (net_plugins[p].setup != NULL) net_plugins[p].setup();
  braid_param_reload();
  return &net_plugins[p];
}

void net_fake_node(const struct harness_rank* r, int per_node) {
  char id[48];
  snprintf(id, sizeof(id), "braid-test-node-%d", per_node > 0 ? r->rank / per_node : 0);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  braid_param_reload();
}

void net_apply_env(const char* env) {
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

/* NET_CASE=i runs only loop case i of each TCase, NET_ONLY=<plugin> only that plugin's
 * collective and kill cases (debugging). */
int net_skip_case(int i) {
  const char* only = getenv("NET_CASE");
  return only != NULL && *only && atoi(only) != i;
}

int net_skip_plugin(int p) {
  const char* only = getenv("NET_ONLY");
  return only != NULL && *only && strcasecmp(only, net_plugins[p].name) != 0;
}

int32_t net_val(int rank, size_t i) {
  return (rank + 1) * 131 + (int32_t)(i % 977);
}

int32_t* net_ibuf(size_t n) {
  int32_t* p = malloc((n ? n : 1) * sizeof(int32_t));
  return p;
}

/* Compare n values with expected(q, i); q is given by the caller's lambda-like switch. */
int net_check_vals(struct harness_rank* r, const char* what, size_t count, const int32_t* got, size_t n,
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

int net_ex_sum(int n, int rank, size_t count, size_t i, int32_t* v) {
  int32_t s = 0;
  for (int q = 0; q < n; q++) s += net_val(q, i);
  *v = s;
  return 0;
}

/* After ncclCommAbort: wait (up to 5 s) until the process holds no more descriptors and threads
 * than before its communicator; 0, or 1 with a failure line naming what was left. */
int net_released_since(struct harness_rank* r, int fds0, int threads0) {
  int fds = 0, threads = 0;
  for (int i = 0; i < 500; i++) {
    fds = harness_count_fds();
    threads = harness_count_threads();
    if (fds <= fds0 && threads <= threads0) return 0;
    usleep(10000);
  }
  return harness_fail(r, "after abort: %d descriptors (were %d), %d threads (were %d)", fds, fds0, threads, threads0);
}

TCase* net_tcase(const char* name, int timeout_s) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  return tc;
}
