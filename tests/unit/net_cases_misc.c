/*
 * net_cases_misc.c - the network suite's other TCases (the suite: test_net.c):
 *   env      NCCL_SOCKET_IFNAME matching nothing, NCCL_NET naming no network, a missing
 *            NCCL_NET_PLUGIN library: clear errors (or the internal plugin), never a hang;
 *   idle     two connected communicators cost (almost) no CPU while idle;
 *   device   an all-reduce of device communicators (fake GPU) over sockets: pinned, mapped
 *            FIFOs that only the progress engine moves (kernels never kick);
 *   caps     the zero-copy host paths follow what a net plugin declares, not which table it
 *            is: Socket's functions under another name without BRAID_NET_PTR_HOST_ANY and
 *            recvInline stage every step through the FIFO; under another name with them,
 *            they send from and receive into user memory.
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
  net_fake_node(r, 1);
  net_apply_env(k->env); /* after fake_node: it may override NCCL_SOCKET_IFNAME */
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
  net_fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  usleep(200000);
  double c0 = cpu_s(), t0 = net_now_s();
  usleep(1000000);
  double used = cpu_s() - c0, wall = net_now_s() - t0;
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
  net_fake_node(r, 1);
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
  int32_t* host = net_ibuf(max);
  int32_t* buf = NULL;
  if (host == NULL) return harness_fail(r, "out of memory");
  RCHECK(r, ncclMemAlloc((void**)&buf, max * sizeof(int32_t)));
  for (int c = 0; c < NELEMS(counts) && !bad; c++) {
    size_t n = counts[c];
    for (size_t i = 0; i < n; i++) host[i] = net_val(r->rank, i);
    RCHECK(r, d->memcpy_sync(buf, host, n * sizeof(int32_t)));
    RCHECK(r, ncclAllReduce(buf, buf, n, ncclInt32, ncclSum, comm, NULL));
    RCHECK(r, d->stream_sync(NULL));
    RCHECK(r, d->memcpy_sync(host, buf, n * sizeof(int32_t)));
    bad = net_check_vals(r, "device AllReduce", n, host, n, net_ex_sum, r->rank);
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
  net_fake_node(r, 1);
  setenv("NCCL_PROTO", "Simple", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  braid_param_reload();
  RCHECK(r, braid_net_plugin_use(declared ? &declared_net : &plain_net));
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  int32_t* buf = net_ibuf(count);
  REXPECT(r, buf != NULL, "out of memory");
  for (size_t i = 0; i < count; i++) buf[i] = net_val(r->rank, i);
  RCHECK(r, ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL));
  bad = net_check_vals(r, declared ? "AllReduce (Declared)" : "AllReduce (Plain)", count, buf, count, net_ex_sum,
                       r->rank);
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

void net_misc_tcases(Suite* s) {
  TCase* tc = net_tcase("env", 90);
  tcase_add_loop_test(tc, test_env, 0, NELEMS(env_cases));
  suite_add_tcase(s, tc);
  tc = net_tcase("idle", 60);
  tcase_add_test(tc, test_idle);
  suite_add_tcase(s, tc);
  tc = net_tcase("device", 120);
  tcase_add_test(tc, test_device);
  suite_add_tcase(s, tc);
  tc = net_tcase("caps", 60);
  tcase_add_loop_test(tc, test_caps, 0, 2);
  suite_add_tcase(s, tc);
}
