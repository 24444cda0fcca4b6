/*
 * test_profiler_proxy.c - ProxyOp / ProxyStep events over the network (core/profile_proxy.c,
 * transport/net/net_prof.c): 2 ranks on 2 fake nodes (Socket over loopback, one channel, Ring,
 * Simple), each running a 1 MiB AllReduce and a group of a 1 MiB Send and Recv with the test
 * profiler of tests/plugins/test_profiler.c asking for Group, Coll, P2p, ProxyOp, ProxyStep,
 * ProxyCtrl (Append once per group; the progress thread's idle / active, sleep / wake-up as they happen).
 *
 * Per rank: one send and one receive ProxyOp under the AllReduce's Coll event, one of each
 * under the Send / Recv P2p events, peer the other rank, channel 0; nSteps as the schedules
 * move them (the ring all-reduce: 2(n-1) steps per loop of n chunks; p2p: one per chunk);
 * every step started and stopped under its op, numbered 0 .. nSteps-1, with the states its
 * ABI version defines (the test profiler checks them); v4+: the bytes the steps' states
 * report add up to what moved on the wire (Simple: payload only): 4 MiB per rank. Versions
 * 6, 4 (step states) and 3, 1 (op states); and v6 over tests/plugins/test_netprof.c, a v10
 * net plugin that reports a NetPlugin event per request through the adapter's callback:
 * each nests under its ProxyStep (one per send step at least). A ProxyOp never outlives its task: the profiler
 * frees a task's event at its stop and would see a stopped parent.
 */
#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../plugins/test_profiler.h"
#include "base/param.h"
#include "device/device.h"
#include "harness.h"
#include "nccl.h"
#include "net_fixture.h"
#include "plugin/profiler_abi.h"
#include "plugin/profiler_plugin.h"

#define COUNT (256 * 1024) /* floats: 1 MiB, above the pair exchange's 64 KiB */
#define BYTES ((size_t)COUNT * sizeof(float))

static char lib[PATH_MAX];
static int version;

static int proxy_result(struct harness_rank* r, struct braid_test_profiler_result* res) {
  void* dl = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  REXPECT(r, dl != NULL, "%s is not loaded: %s", lib, dlerror());
  braid_test_profiler_result_fn fn = (braid_test_profiler_result_fn)dlsym(dl, "braid_test_profiler_result");
  REXPECT(r, fn != NULL && fn(r->rank, res) == 0, "no finalized result for rank %d", r->rank);
  dlclose(dl);
  return 0;
}

static size_t div_up(size_t a, size_t b) {
  return (a + b - 1) / b;
}

/* ops: AllReduce's send, receive (either order), then the p2p send and receive. */
static int check_ops(struct harness_rank* r, const struct braid_test_profiler_result* res) {
  int peer = 1 - r->rank, n = r->nranks;
  REXPECT(r, res->nops == 4, "v%d: %d ProxyOps, expected 4 (AllReduce and p2p, each way)", version, res->nops);
  long long steps = 0;
  for (int k = 0; k < 4; k++) {
    int coll = k < 2;
    REXPECT(r, res->ops[k].peer == peer && res->ops[k].channel == 0 && res->ops[k].chunk > 0,
            "v%d op %d: peer %d channel %d chunk %d", version, k, res->ops[k].peer, res->ops[k].channel,
            res->ops[k].chunk);
    REXPECT(r, res->ops[k].parent_type == (coll ? NCCL_PROF_COLL : NCCL_PROF_P2P), "v%d op %d: parent type %d", version,
            k, res->ops[k].parent_type);
    size_t want =
        coll ? 2 * (n - 1) * div_up(BYTES, (size_t)n * res->ops[k].chunk) : div_up(BYTES, (size_t)res->ops[k].chunk);
    REXPECT(r, res->ops[k].nsteps == (int)want, "v%d op %d (%s): nSteps %d, expected %zu for %d-byte chunks", version,
            k, res->ops[k].is_send ? "send" : "recv", res->ops[k].nsteps, want, res->ops[k].chunk);
    steps += res->ops[k].nsteps;
  }
  REXPECT(r, res->ops[0].is_send != res->ops[1].is_send && res->ops[2].is_send != res->ops[3].is_send,
          "v%d: not one op each way per call", version);
  REXPECT(r, res->starts[4] == steps && res->stops[4] == steps, "v%d: %d / %d ProxySteps, expected %lld", version,
          res->starts[4], res->stops[4], steps);
  if (version >= 4)
    REXPECT(r, res->step_bytes == 4 * (long long)BYTES, "v%d: the steps' states report %lld bytes, expected %lld",
            version, res->step_bytes, 4 * (long long)BYTES);
  return 0;
}

static int netplugin; /* the case over tests/plugins/test_netprof.c (NetPlugin events) */

static int body(struct harness_rank* r) {
  net_fake_node(r, 1);
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  float* in = malloc(BYTES);
  float* out = malloc(BYTES);
  REXPECT(r, in != NULL && out != NULL, "out of memory");
  for (int i = 0; i < COUNT; i++) in[i] = (float)(r->rank + 1);
  RCHECK(r, ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
  REXPECT(r, out[COUNT - 1] == 3.0f, "AllReduce gave %g", out[COUNT - 1]);
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(in, COUNT, ncclFloat32, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclRecv(out, COUNT, ncclFloat32, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  REXPECT(r, out[COUNT - 1] == (float)(2 - r->rank), "Recv gave %g", out[COUNT - 1]);
  RCHECK(r, ncclCommDestroy(comm));
  free(in);
  free(out);
  struct braid_test_profiler_result res;
  if (proxy_result(r, &res)) return 1;
  REXPECT(r, res.errors == 0, "v%d: the plugin found %d errors, the first: %s", version, res.errors, res.first_error);
  REXPECT(r, res.open == 0, "v%d: %d events never stopped", version, res.open);
  REXPECT(r, res.starts[1] == 1 && res.starts[2] == 2 && res.starts[3] == 4 && res.stops[3] == 4,
          "v%d: Coll %d P2p %d ProxyOp %d/%d, expected 1, 2, 4", version, res.starts[1], res.starts[2], res.starts[3],
          res.stops[3]);
  /* ProxyCtrl: the Appends below, plus the progress thread's sleeps, whose states the profiler
   * checked. How often it sleeps is timing (it spins while a posted receive is pending: a
   * fresh-clone run saw none), so no count of sleeps is asserted. */
  REXPECT(r, res.starts[5] >= res.ctrl_appends && res.starts[5] == res.stops[5],
          "v%d: ProxyCtrl %d started (%d Append), %d stopped", version, res.starts[5], res.ctrl_appends, res.stops[5]);
  /* ProxyCtrl Append ... AppendEnd: once per group whose ops were handed to the proxies. */
  REXPECT(r, res.ctrl_appends == 2, "v%d: %d ProxyCtrl Append events, expected 2", version, res.ctrl_appends);
  if (check_ops(r, &res)) return 1;
  if (!netplugin) return 0;
  /* Every isend carried its step's handle (the op was queued before the step was published);
   * a receive only when its op was queued before the irecv (they are pre-posted). */
  int send_steps = 0;
  for (int k = 0; k < res.nops; k++) send_steps += res.ops[k].is_send ? res.ops[k].nsteps : 0;
  REXPECT(r, res.net_under_sends == send_steps, "NetPlugin events under send steps: %d, expected %d",
          res.net_under_sends, send_steps);
  REXPECT(r, res.starts[7] == res.stops[7] && res.starts[7] >= send_steps && res.starts[7] <= res.starts[4],
          "NetPlugin events: %d started, %d stopped, for %d send steps of %d", res.starts[7], res.stops[7], send_steps,
          res.starts[4]);
  return 0;
}

/* The profiler of `version`, the mask, one channel, Ring, Simple; the v10 wrapper net plugin
 * when `netplugin`. */
static void set_env(void) {
  char rel[64], net[PATH_MAX + 64], mask[16];
  snprintf(rel, sizeof(rel), "../lib/libnccl-profiler-braidtest-v%d.so", version);
  harness_runner_path(lib, sizeof(lib), rel);
  harness_runner_path(net, sizeof(net), "../lib/libnccl-net-braidtest-prof.so");
  snprintf(mask, sizeof(mask), "%d",
           NCCL_PROF_GROUP | NCCL_PROF_COLL | NCCL_PROF_P2P | NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP |
               NCCL_PROF_PROXY_CTRL | (netplugin ? NCCL_PROF_NET_PLUGIN : 0));
  if (netplugin) setenv("NCCL_NET_PLUGIN", net, 1), setenv("NCCL_NET", "BraidProfProbe", 1);
  setenv("NCCL_PROFILER_PLUGIN", lib, 1);
  setenv("BRAID_TEST_PROFILER_MASK", mask, 1);
  setenv("NCCL_MAX_NCHANNELS", "1", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  setenv("NCCL_PROTO", "Simple", 1);
  braid_param_reload();
}

static void clear_env(void) {
  unsetenv("NCCL_MAX_NCHANNELS");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  unsetenv("BRAID_TEST_PROFILER_MASK");
  unsetenv("NCCL_PROFILER_PLUGIN");
  unsetenv("NCCL_NET_PLUGIN");
  unsetenv("NCCL_NET");
  braid_param_reload();
}

START_TEST(test_proxy) {
  static const int versions[] = {6, 4, 3, 1, 6};
  version = versions[_i];
  netplugin = _i == 4;
  set_env();
  int failed = harness_run(2, HARNESS_PROCS, body, NULL, 120);
  clear_env();
  ck_assert_msg(failed == 0, "v%d%s: %d of 2 ranks failed", version, netplugin ? " over a v10 net plugin" : "", failed);
}
END_TEST

/* ---- device mode (the fake GPU: the kernels' logic on stream threads) ------------------------- */

/* Rank 0 holds its stream, so that every launch below is queued before the first runs: a
 * group of 3 AllReduces of 1 MiB, 512 KiB and 256 KiB (one launch of two kernels: float32,
 * then int32, so the steps move in the order 1st, 3rd, 2nd), 2 AllReduces back to back, a
 * group of a Send and a Recv. The host counts each launch's steps per connection
 * (profile_proxy.c); the ProxyOps must be exactly the schedule's: per AllReduce one send and
 * one receive op under its Coll event, per p2p one under its P2p event, each numbered from
 * step 0, and (v4+) each op's steps carry its own task's bytes (Simple, 2 ranks: a ring
 * all-reduce moves its whole buffer each way), which a step given to the wrong op breaks. */
#define DEV_COLLS 5
#define DEV_REGIONS (DEV_COLLS + 1)

static int live_result(struct harness_rank* r, struct braid_test_profiler_result* res) {
  void* dl = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  REXPECT(r, dl != NULL, "%s is not loaded: %s", lib, dlerror());
  braid_test_profiler_result_fn fn = (braid_test_profiler_result_fn)dlsym(dl, "braid_test_profiler_live");
  REXPECT(r, fn != NULL && fn(r->rank, res) == 0, "no live context for rank %d", r->rank);
  dlclose(dl);
  return 0;
}

static int dev_calls(struct harness_rank* r, ncclComm_t comm, float* buf) {
  RCHECK(r, ncclGroupStart()); /* two kernels: the floats' items (regions 0, 2), then region 1's */
  RCHECK(r, ncclAllReduce(buf, buf, COUNT, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclAllReduce(buf + COUNT, buf + COUNT, COUNT / 2, ncclInt32, ncclSum, comm, NULL));
  RCHECK(r, ncclAllReduce(buf + 2 * COUNT, buf + 2 * COUNT, COUNT / 4, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  for (int k = 3; k < DEV_COLLS; k++)
    RCHECK(r, ncclAllReduce(buf + k * COUNT, buf + k * COUNT, COUNT, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(buf, COUNT, ncclFloat32, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclRecv(buf + DEV_COLLS * COUNT, COUNT, ncclFloat32, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  return 0;
}

/* The ops: DEV_COLLS of each direction under Coll events, one of each under P2p events. */
static int dev_check_ops(struct harness_rank* r, const struct braid_test_profiler_result* res) {
  int n = r->nranks, by[2][2] = {{0, 0}, {0, 0}}; /* [coll][is_send] */
  long long steps = 0, total = 0;
  REXPECT(r, res->nops == 2 * DEV_COLLS + 2, "v%d device: %d ProxyOps, expected %d", version, res->nops,
          2 * DEV_COLLS + 2);
  for (int k = 0; k < res->nops; k++) {
    int coll = res->ops[k].parent_type == NCCL_PROF_COLL;
    REXPECT(r, coll || res->ops[k].parent_type == NCCL_PROF_P2P, "v%d device op %d: parent type %d", version, k,
            res->ops[k].parent_type);
    REXPECT(r, res->ops[k].peer == 1 - r->rank && res->ops[k].channel == 0 && res->ops[k].chunk > 0,
            "v%d device op %d: peer %d channel %d chunk %d", version, k, res->ops[k].peer, res->ops[k].channel,
            res->ops[k].chunk);
    size_t bytes = (size_t)res->ops[k].parent_bytes, chunk = (size_t)res->ops[k].chunk;
    size_t want = coll ? 2 * (n - 1) * div_up(bytes, n * chunk) : div_up(bytes, chunk);
    REXPECT(r, bytes > 0 && res->ops[k].nsteps == (int)want,
            "v%d device op %d (%s %s, %zu bytes): nSteps %d, expected %zu", version, k, coll ? "coll" : "p2p",
            res->ops[k].is_send ? "send" : "recv", bytes, res->ops[k].nsteps, want);
    if (version >= 4)
      REXPECT(r, res->ops[k].bytes == res->ops[k].parent_bytes,
              "v%d device op %d (%s %s): its steps moved %lld bytes, its task %lld", version, k, coll ? "coll" : "p2p",
              res->ops[k].is_send ? "send" : "recv", res->ops[k].bytes, res->ops[k].parent_bytes);
    total += res->ops[k].parent_bytes;
    by[coll][res->ops[k].is_send]++;
    steps += res->ops[k].nsteps;
  }
  REXPECT(r, by[1][0] == DEV_COLLS && by[1][1] == DEV_COLLS && by[0][0] == 1 && by[0][1] == 1,
          "v%d device: coll ops %d recv %d send, p2p ops %d recv %d send", version, by[1][0], by[1][1], by[0][0],
          by[0][1]);
  REXPECT(r, res->starts[4] == steps && res->stops[4] == steps, "v%d device: %d / %d ProxySteps, expected %lld",
          version, res->starts[4], res->stops[4], steps);
  if (version >= 4) /* each way: the AllReduces 1 + 1/2 + 1/4 + 1 + 1 MiB, the p2p 1 MiB */
    REXPECT(r, res->step_bytes == total && total == 19 * (long long)BYTES / 2,
            "v%d device: the steps' states report %lld bytes, the tasks %lld", version, res->step_bytes, total);
  return 0;
}

static int dev_body(struct harness_rank* r) {
  setenv("BRAID_FAKE_GPU", "1", 1);
  unsetenv("BRAID_HOST_MODE");
  net_fake_node(r, 1);
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  REXPECT(r, d != NULL && d == braid_device_fake, "BRAID_FAKE_GPU=1 but not the fake GPU");
  RCHECK(r, d->set_current(0));
  ncclComm_t comm;
  int dev = -1;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclCommCuDevice(comm, &dev));
  REXPECT(r, dev == 0, "the communicator is not on the fake GPU (device %d)", dev);
  size_t total = (size_t)DEV_REGIONS * COUNT;
  float *buf = NULL, *host = malloc(total * sizeof(float));
  REXPECT(r, host != NULL, "out of memory");
  RCHECK(r, ncclMemAlloc((void**)&buf, total * sizeof(float)));
  for (size_t i = 0; i < total; i++) host[i] = (float)(r->rank + 1);
  for (size_t i = 0; i < COUNT / 2; i++) ((int32_t*)host)[COUNT + i] = r->rank + 1; /* region 1: int32 */
  RCHECK(r, d->memcpy_sync(buf, host, total * sizeof(float)));
  if (r->rank == 0) RCHECK(r, braid_device_fake_hold(NULL, 1));
  if (dev_calls(r, comm, buf)) return 1;
  if (r->rank == 0) { /* nothing ran: no task stopped, no send step was published */
    struct braid_test_profiler_result live;
    if (live_result(r, &live)) return 1;
    int sends = 0;
    for (int k = 0; k < live.nops; k++) sends += live.ops[k].is_send;
    RCHECK(r, braid_device_fake_hold(NULL, 0));
    REXPECT(r, live.starts[1] == DEV_COLLS && live.stops[1] == 0 && live.stops[2] == 0 && sends == 0,
            "v%d device, stream held: Coll %d started %d stopped, P2p %d stopped, %d send ProxyOps", version,
            live.starts[1], live.stops[1], live.stops[2], sends);
  }
  RCHECK(r, d->stream_sync(NULL));
  RCHECK(r, d->memcpy_sync(host, buf, total * sizeof(float)));
  REXPECT(r,
          host[0] == 3.0f && ((int32_t*)host)[COUNT + COUNT / 2 - 1] == 3 && host[DEV_COLLS * COUNT - 1] == 3.0f &&
              host[total - 1] == 3.0f,
          "device: AllReduce %g, %d (int32), %g, Recv %g", host[0], ((int32_t*)host)[COUNT + COUNT / 2 - 1],
          host[DEV_COLLS * COUNT - 1], host[total - 1]);
  RCHECK(r, ncclMemFree(buf));
  free(host);
  RCHECK(r, ncclCommDestroy(comm));
  struct braid_test_profiler_result res;
  if (proxy_result(r, &res)) return 1;
  REXPECT(r, res.errors == 0, "v%d device: the plugin found %d errors, the first: %s", version, res.errors,
          res.first_error);
  REXPECT(r, res.open == 0, "v%d device: %d events never stopped", version, res.open);
  REXPECT(r, res.starts[0] == 4 && res.starts[1] == DEV_COLLS && res.starts[2] == 2 && res.stops[3] == res.starts[3],
          "v%d device: Group %d Coll %d P2p %d ProxyOp %d/%d, expected 4, %d, 2", version, res.starts[0], res.starts[1],
          res.starts[2], res.starts[3], res.stops[3], DEV_COLLS);
  REXPECT(r, res.ctrl_appends == 4, "v%d device: %d ProxyCtrl Append events, expected one per launch (4)", version,
          res.ctrl_appends);
  if (dev_check_ops(r, &res)) return 1;
  if (!netplugin) return 0;
  int send_steps = 0;
  for (int k = 0; k < res.nops; k++) send_steps += res.ops[k].is_send ? res.ops[k].nsteps : 0;
  REXPECT(r, res.net_under_sends == send_steps, "device: NetPlugin events under send steps: %d, expected %d",
          res.net_under_sends, send_steps);
  return 0;
}

START_TEST(test_device) {
  static const int versions[] = {6, 3, 6};
  version = versions[_i];
  netplugin = _i == 2;
  set_env();
  int failed = harness_run(2, HARNESS_PROCS, dev_body, NULL, 120);
  clear_env();
  ck_assert_msg(failed == 0, "device v%d%s: %d of 2 ranks failed", version, netplugin ? " over a v10 net plugin" : "",
                failed);
}
END_TEST

/* A sweep on 3 ranks, each on its own fake node, 2 channels: every collective and a p2p
 * exchange, groups that mix datatypes (one kernel per datatype: the steps move kernel by
 * kernel, not in call order) and sizes, one protocol per case (Tree for the all-reduce in the
 * last). Whatever the schedules, every step must land in its op, numbered in order, no op
 * outliving its task, none left open: the test profiler checks each event. */
static const char* const sweep_protos[] = {"Simple", "LL", "LL128", "Simple"};
static int sweep_case; /* the case: its protocol */

static int sweep_calls(struct harness_rank* r, ncclComm_t comm, float* f, int32_t* i32) {
  size_t big = COUNT, small = 3000 + 17;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclAllReduce(f, f, big, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclAllReduce(i32, i32, small, ncclInt32, ncclSum, comm, NULL));
  RCHECK(r, ncclAllReduce(f + big, f + big, small, ncclFloat32, ncclSum, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  RCHECK(r, ncclBroadcast(f, f, big / 3, ncclFloat32, 1, comm, NULL));
  RCHECK(r, ncclReduce(i32, i32 + small, small, ncclInt32, ncclSum, 2, comm, NULL));
  RCHECK(r, ncclAllGather(f, f + big, big / 8, ncclFloat32, comm, NULL));
  RCHECK(r, ncclReduceScatter(f, f + 2 * big, big / 8, ncclFloat32, ncclSum, comm, NULL));
  int next = (r->rank + 1) % r->nranks, prev = (r->rank + r->nranks - 1) % r->nranks;
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(f, big / 2, ncclFloat32, next, comm, NULL));
  RCHECK(r, ncclRecv(f + 2 * big, big / 2, ncclFloat32, prev, comm, NULL));
  RCHECK(r, ncclSend(i32, small, ncclInt32, prev, comm, NULL));
  RCHECK(r, ncclRecv(i32 + small, small, ncclInt32, next, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  return 0;
}

static int sweep_body(struct harness_rank* r) {
  setenv("BRAID_FAKE_GPU", "1", 1);
  unsetenv("BRAID_HOST_MODE");
  net_fake_node(r, 1);
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  REXPECT(r, d != NULL && d == braid_device_fake, "BRAID_FAKE_GPU=1 but not the fake GPU");
  RCHECK(r, d->set_current(0));
  ncclComm_t comm;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  float* f = NULL;
  int32_t* i32 = NULL;
  RCHECK(r, ncclMemAlloc((void**)&f, 4 * BYTES));
  RCHECK(r, ncclMemAlloc((void**)&i32, 2 * BYTES));
  for (int k = 0; k < 2; k++)
    if (sweep_calls(r, comm, f, i32)) return 1;
  RCHECK(r, d->stream_sync(NULL));
  RCHECK(r, ncclMemFree(f));
  RCHECK(r, ncclMemFree(i32));
  RCHECK(r, ncclCommDestroy(comm));
  struct braid_test_profiler_result res;
  if (proxy_result(r, &res)) return 1;
  REXPECT(r, res.errors == 0, "sweep %s: the plugin found %d errors, the first: %s", sweep_protos[sweep_case],
          res.errors, res.first_error);
  REXPECT(r, res.open == 0, "sweep %s: %d events never stopped", sweep_protos[sweep_case], res.open);
  REXPECT(r,
          res.starts[3] >= 2 * 2 && res.starts[3] == res.stops[3] && res.starts[4] == res.stops[4] &&
              res.starts[4] >= res.starts[3],
          "sweep %s: ProxyOp %d/%d, ProxyStep %d/%d", sweep_protos[sweep_case], res.starts[3], res.stops[3],
          res.starts[4], res.stops[4]);
  return 0;
}

START_TEST(testsweep_case) {
  version = 6;
  netplugin = 0;
  sweep_case = _i;
  set_env();
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  setenv("NCCL_MIN_NCHANNELS", "2", 1);
  setenv("NCCL_PROTO", sweep_protos[_i], 1);
  if (_i == 3)
    setenv("NCCL_ALGO", "allreduce:Tree", 1);
  else
    unsetenv("NCCL_ALGO");
  braid_param_reload();
  int failed = harness_run(3, HARNESS_PROCS, sweep_body, NULL, 180);
  unsetenv("NCCL_MIN_NCHANNELS");
  clear_env();
  ck_assert_msg(failed == 0, "device sweep (%s%s): %d of 3 ranks failed", sweep_protos[_i], _i == 3 ? ", Tree" : "",
                failed);
}
END_TEST

Suite* profiler_proxy_suite(void) {
  Suite* s = suite_create("profiler_proxy");
  TCase* tc = tcase_create("net");
  tcase_set_timeout(tc, 240);
  tcase_add_loop_test(tc, test_proxy, 0, 5);
  suite_add_tcase(s, tc);
  TCase* dv = tcase_create("device");
  tcase_set_timeout(dv, 240);
  tcase_add_loop_test(dv, test_device, 0, 3);
  tcase_add_loop_test(dv, testsweep_case, 0, 4);
  suite_add_tcase(s, dv);
  return s;
}
