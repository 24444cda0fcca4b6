/*
 * test_net_gdr.c - GPUDirect RDMA over the network transport (net_gdr.h, ib/ib_gdr.c), on the
 * fake GPU (BRAID_FAKE_GPU: device memory is a shared-memory segment, its dma-buf a descriptor
 * of it) and the emulated verbs provider (tests/ibemu/: maps the dma-buf, keys by iova). No
 * GPU, HCA or rdma-core device is involved.
 *   table   the decision rules as NCCL's ncclTopoCheckGdr / ncclTopoNeedFlush, row by row;
 *   plugin  the IB plugin in one process: ptrSupport says DMABUF (not with IBEMU_DMABUF=0),
 *           regMr of fake-GPU memory as BRAID_NET_PTR_CUDA, a message into it, iflush returns
 *           a read that completes (NULL with NCCL_GDR_FLUSH_DISABLE=1), host memory as CUDA and
 *           CUDA without dma-buf refused;
 *   run     device all-reduces over IB between 2 fake nodes, GDR forced on (flushed or not),
 *           read off, off by level, off without dma-buf: the same, right bytes each time, and
 *           the connection lines (`via NET/IB/0/GDRDMA`) and NCCL's per-HCA line say which.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "device/device.h"
#include "harness.h"
#include "ibemu_fixture.h"
#include "nccl.h"
#include "topo/topo.h"
#include "transport/net/net.h"
#include "transport/net/net_gdr.h"

/* ---- the rule table ------------------------------------------------------------------------ */

struct gdr_row {
  struct braid_net_gdr_in in;
  int want;
  const char* why; /* a word of the reason */
};

#define U BRAID_PARAM_UNSET
#define CUDA BRAID_NET_PTR_CUDA
#define DMABUF BRAID_NET_PTR_DMABUF
#define HOST BRAID_NET_PTR_HOST
static const struct gdr_row gdr_rows[] = {
    /* nic_ptr, gpu_dmabuf, sm, read, nvlink_peer, distance, level, gdr_read */
    {{HOST, 1, 90, 0, 1, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 0, "host memory only"},
    {{HOST | DMABUF, 0, 90, 0, 1, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 0, "no dma-buf"},
    {{HOST | DMABUF, 1, 90, 0, 1, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 1, "PIX <= PXB"},
    {{HOST | CUDA, 0, 90, 0, 1, BRAID_PATH_PXB, BRAID_PATH_PXB, U}, 1, "PXB <= PXB"}, /* peer memory */
    {{HOST | CUDA, 0, 90, 0, 1, BRAID_PATH_PHB, BRAID_PATH_PXB, U}, 0, "PHB > PXB"},
    {{HOST | CUDA, 0, 90, 1, 1, BRAID_PATH_PHB, BRAID_PATH_SYS, U}, 1, "PHB <= SYS"},
    {{HOST | CUDA, 0, 90, 1, 1, BRAID_PATH_PIX, BRAID_PATH_LOC, U}, 0, "PIX > LOC"},
    {{HOST | CUDA, 0, 90, 1, 1, BRAID_PATH_PIX, BRAID_PATH_PXB, 0}, 0, "NCCL_NET_GDR_READ=0"},
    {{HOST | CUDA, 0, 90, 0, 1, BRAID_PATH_PIX, BRAID_PATH_PXB, 0}, 1, "read 0"}, /* receives: not a read */
    {{HOST | CUDA, 0, 70, 1, 0, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 0, "before sm_80"},
    {{HOST | CUDA, 0, 70, 1, 1, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 1, "read 1"}, /* NVLink peer */
    {{HOST | CUDA, 0, 70, 1, 0, BRAID_PATH_PIX, BRAID_PATH_PXB, 1}, 1, "read 1"}, /* forced */
    {{HOST | CUDA, 0, 70, 0, 0, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 1, "read 0"}, /* receives on Volta */
    {{HOST | CUDA, 0, 80, 1, 0, BRAID_PATH_PIX, BRAID_PATH_PXB, U}, 1, "read 1"}, /* Ampere */
    {{HOST | CUDA, 0, 90, 0, 1, BRAID_PATH_C2C, BRAID_PATH_PXB, U}, 1, "C2C <= PXB"},
};

START_TEST(test_table) {
  const struct gdr_row* row = &gdr_rows[_i];
  char why[96] = "";
  int got = braid_net_gdr_decide(&row->in, why, sizeof(why));
  ck_assert_msg(got == row->want, "row %d: %d (%s), expected %d", _i, got, why, row->want);
  ck_assert_msg(strstr(why, row->why) != NULL, "row %d: reason '%s' lacks '%s'", _i, why, row->why);
}
END_TEST

START_TEST(test_flush_rule) {
  ck_assert_int_eq(braid_net_gdr_need_flush(80, 0, 0), 1);  /* Ampere and before */
  ck_assert_int_eq(braid_net_gdr_need_flush(90, 0, 0), 0);  /* Hopper: not needed */
  ck_assert_int_eq(braid_net_gdr_need_flush(90, 1, 0), 1);  /* NCCL_NET_FORCE_FLUSH=1 */
  ck_assert_int_eq(braid_net_gdr_need_flush(70, 1, 1), 0);  /* NCCL_GDR_FLUSH_DISABLE=1 wins */
  ck_assert_int_eq(braid_net_gdr_need_flush(100, 0, 0), 0); /* Blackwell */
}
END_TEST

#if BRAID_IB_BUILT

static void use_fake_gpu(void) {
  setenv("BRAID_FAKE_GPU", "1", 1);
  unsetenv("BRAID_HOST_MODE");
  braid_param_reload();
  braid_device_reset();
}

/* ---- the plugin in one process ------------------------------------------------------------- */

static int wait_req(const struct braid_net_v1* n, void* req, size_t* got) {
  int done = 0;
  for (long i = 0; !done && i < 20000000; i++)
    if (n->test(req, &done, got) != ncclSuccess) return -1;
  return done ? 0 : -1;
}

static int body_plugin(struct harness_rank* r) {
  int dmabuf = *(const int*)r->arg;
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  use_fake_gpu();
  const struct braid_device_ops* d = braid_device();
  REXPECT(r, d != NULL && d->dmabuf_get != NULL, "no fake GPU with dma-bufs");
  const struct braid_net_v1* n = &braid_net_ib;
  struct braid_net_config cfg = {0x99, -1};
  struct braid_net_props props;
  char handle[BRAID_NET_HANDLE_MAXSIZE];
  void *ctx = NULL, *lis = NULL, *snd = NULL, *rcv = NULL, *ms = NULL, *md = NULL, *bad = NULL;
  RCHECK(r, n->init(NULL));
  RCHECK(r, n->getProperties(0, &props));
  REXPECT(r, !!(props.ptrSupport & BRAID_NET_PTR_DMABUF) == dmabuf, "ptrSupport 0x%x with IBEMU_DMABUF %d",
          props.ptrSupport, dmabuf);
  RCHECK(r, n->openContext(1, &cfg, &ctx));
  RCHECK(r, n->listen(ctx, 0, handle, &lis));
  for (long i = 0; (snd == NULL || rcv == NULL) && i < 10000000; i++) {
    if (snd == NULL) RCHECK(r, n->connect(ctx, 0, handle, &snd));
    if (rcv == NULL) RCHECK(r, n->accept(lis, &rcv));
  }
  REXPECT(r, snd != NULL && rcv != NULL, "connect / accept did not finish");
  enum { LEN = 3 * 4096 };
  char* gpu = NULL;
  char src[LEN];
  for (int i = 0; i < LEN; i++) src[i] = (char)(i * 3 + 1);
  RCHECK(r, d->alloc((void**)&gpu, 4 * 4096));
  RCHECK(r, n->regMr(snd, src, LEN, BRAID_NET_PTR_HOST, &ms));
  ncclResult_t res = n->regMr(rcv, gpu + 4096, LEN, BRAID_NET_PTR_CUDA, &md);
  if (!dmabuf) { /* no dma-buf and no peer memory on this machine: refused, naming why */
    REXPECT(r, res == ncclInvalidArgument && strstr(braid_debug_last_error(), "no GPUDirect RDMA") != NULL,
            "regMr of GPU memory without dma-buf: %d, %s", res, braid_debug_last_error());
    goto out;
  }
  RCHECK(r, res);
  res = n->regMr(rcv, src, LEN, BRAID_NET_PTR_CUDA, &bad); /* host memory posing as device memory */
  REXPECT(r, res != ncclSuccess && strstr(braid_debug_last_error(), "GPUDirect RDMA") != NULL,
          "regMr of host memory as CUDA: %d, %s", res, braid_debug_last_error());
  void *rq = NULL, *sq = NULL, *fq = NULL, *dst = gpu + 4096 + 8;
  size_t cap = LEN - 8, got = 0;
  int tag = 1;
  int rdone = 0;
  RCHECK(r, n->irecv(rcv, 1, &dst, &cap, &tag, &md, &rq));
  for (long i = 0; sq == NULL && i < 10000000; i++) { /* the receiver progresses too (ib_net.h: "ready") */
    RCHECK(r, n->isend(snd, src, 9000, 1, ms, &sq));
    if (!rdone) RCHECK(r, n->test(rq, &rdone, &got));
  }
  REXPECT(r, sq != NULL && (rdone || wait_req(n, rq, &got) == 0) && wait_req(n, sq, NULL) == 0,
          "the message did not complete");
  REXPECT(r, got == 9000 && memcmp(gpu + 4096 + 8, src, 9000) == 0, "%zu bytes, wrong or short in GPU memory", got);
  RCHECK(r, n->iflush(rcv, 1, &dst, &got, &md, &fq));
  REXPECT(r, fq != NULL, "iflush of a GDR receive returned no request");
  REXPECT(r, wait_req(n, fq, NULL) == 0, "the flush read did not complete");
  size_t zero = 0;
  RCHECK(r, n->iflush(rcv, 1, &dst, &zero, &md, &fq));
  REXPECT(r, fq == NULL, "iflush of nothing received returned a request");
  RCHECK(r, n->deregMr(rcv, md));
out:
  RCHECK(r, n->deregMr(snd, ms));
  n->closeSend(snd);
  n->closeRecv(rcv);
  n->closeListen(lis);
  n->closeContext(ctx);
  d->free(gpu);
  return 0;
}

/* NCCL_GDR_FLUSH_DISABLE=1: the receive comm has no flush QP, iflush says there is nothing. */
static int body_noflush(struct harness_rank* r) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_GDR_FLUSH_DISABLE", "1", 1);
  use_fake_gpu();
  const struct braid_net_v1* n = &braid_net_ib;
  struct braid_net_config cfg = {0x98, -1};
  char handle[BRAID_NET_HANDLE_MAXSIZE];
  void *ctx = NULL, *lis = NULL, *snd = NULL, *rcv = NULL, *fq = NULL;
  RCHECK(r, n->init(NULL));
  RCHECK(r, n->openContext(1, &cfg, &ctx));
  RCHECK(r, n->listen(ctx, 0, handle, &lis));
  for (long i = 0; (snd == NULL || rcv == NULL) && i < 10000000; i++) {
    if (snd == NULL) RCHECK(r, n->connect(ctx, 0, handle, &snd));
    if (rcv == NULL) RCHECK(r, n->accept(lis, &rcv));
  }
  REXPECT(r, snd != NULL && rcv != NULL, "connect / accept did not finish");
  char buf[64];
  void* p = buf;
  size_t sz = sizeof(buf);
  void* mh = (void*)1; /* never read: there is no flush QP */
  RCHECK(r, n->iflush(rcv, 1, &p, &sz, &mh, &fq));
  REXPECT(r, fq == NULL, "iflush with NCCL_GDR_FLUSH_DISABLE=1 returned a request");
  n->closeSend(snd);
  n->closeRecv(rcv);
  n->closeListen(lis);
  n->closeContext(ctx);
  return 0;
}

START_TEST(test_plugin) {
  int dmabuf = _i == 0;
  ibemu_fixture_env("mlx5_0:1:ib", NULL);
  if (!dmabuf) setenv("IBEMU_DMABUF", "0", 1);
  int failed = harness_run(1, HARNESS_PROCS, body_plugin, &dmabuf, 60);
  unsetenv("IBEMU_DMABUF");
  ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_noflush) {
  ibemu_fixture_env("mlx5_0:1:ib", NULL);
  ck_assert_int_eq(harness_run(1, HARNESS_PROCS, body_noflush, NULL, 60), 0);
}
END_TEST

/* ---- device all-reduces over IB ------------------------------------------------------------ */

struct run_case {
  const char* env; /* space-separated NAME=VALUE */
  int send_gdr;    /* the [send] connection lines say /GDRDMA */
  int recv_gdr;    /* the [receive] ones */
  const char* hca; /* NCCL's per-HCA line */
};
static const struct run_case run_cases[] = {
    {"NCCL_NET_GDR_LEVEL=SYS NCCL_NET_FORCE_FLUSH=1", 1, 1, "GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"},
    {"NCCL_NET_GDR_LEVEL=PHB", 1, 1, "GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"}, /* sm_90: no flush */
    {"NCCL_NET_GDR_LEVEL=SYS NCCL_NET_GDR_READ=0", 0, 1, "GPU Direct RDMA Enabled"},
    {"", 0, 0, "GPU Direct RDMA Enabled"}, /* default PXB: the emulated HCA is not placed, PHB */
    {"NCCL_NET_GDR_LEVEL=SYS IBEMU_DMABUF=0", 0, 0, "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"},
};

static int set_env_list(const char* list) {
  char env[256], *save = NULL;
  snprintf(env, sizeof(env), "%s", list);
  for (char* e = strtok_r(env, " ", &save); e != NULL; e = strtok_r(NULL, " ", &save)) {
    char* eq = strchr(e, '=');
    if (eq == NULL) return -1;
    *eq = '\0';
    setenv(e, eq + 1, 1);
  }
  return 0;
}

static int32_t val(int rank, size_t i) {
  return (int32_t)((i * 31 + (size_t)rank * 7) % 1000);
}

static int body_run(struct harness_rank* r) {
  const struct run_case* k = r->arg;
  static const size_t counts[] = {1, 1023, 65537, (1 << 20) + 3};
  char log[96], id[48];
  snprintf(log, sizeof(log), "/tmp/braid-test-gdr-%d-%d.log", (int)getppid(), r->rank);
  snprintf(id, sizeof(id), "braid-test-node-%d", r->rank);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_NET", "IB", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  REXPECT(r, set_env_list(k->env) == 0, "bad case");
  use_fake_gpu();
  ncclResetDebugInit();
  const struct braid_device_ops* d = braid_device();
  REXPECT(r, d != NULL, "BRAID_FAKE_GPU=1 but no device layer");
  RCHECK(r, d->set_current(0));
  ncclComm_t comm;
  int dev = -1, bad = 0;
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclCommCuDevice(comm, &dev));
  REXPECT(r, dev == 0, "the communicator came up in host mode");
  size_t max = counts[3];
  int32_t* host = malloc(max * sizeof(int32_t));
  int32_t* buf = NULL;
  REXPECT(r, host != NULL, "out of memory");
  RCHECK(r, ncclMemAlloc((void**)&buf, max * sizeof(int32_t)));
  for (int c = 0; c < 4 && !bad; c++) {
    size_t n = counts[c];
    for (size_t i = 0; i < n; i++) host[i] = val(r->rank, i);
    RCHECK(r, d->memcpy_sync(buf, host, n * sizeof(int32_t)));
    RCHECK(r, ncclAllReduce(buf, buf, n, ncclInt32, ncclSum, comm, NULL));
    RCHECK(r, d->stream_sync(NULL));
    RCHECK(r, d->memcpy_sync(host, buf, n * sizeof(int32_t)));
    for (size_t i = 0; i < n && !bad; i++)
      if (host[i] != val(0, i) + val(1, i))
        bad = harness_fail(r, "count %zu: [%zu] = %d, expected %d", n, i, host[i], val(0, i) + val(1, i));
  }
  ncclMemFree(buf);
  free(host);
  RCHECK(r, ncclCommDestroy(comm));
  int sends = harness_count_lines(log, "[send] via NET/IB/0/GDRDMA");
  int recvs = harness_count_lines(log, "[receive] via NET/IB/0/GDRDMA");
  int plain = harness_count_lines(log, "via NET/IB/") - sends - recvs;
  int hca = harness_count_lines(log, k->hca);
  unlink(log);
  if (bad) return bad;
  REXPECT(r, (sends > 0) == k->send_gdr && (recvs > 0) == k->recv_gdr,
          "%d [send] and %d [receive] GDRDMA lines, expected send %d receive %d", sends, recvs, k->send_gdr,
          k->recv_gdr);
  REXPECT(r, hca == 1, "%d lines '%s'", hca, k->hca);
  REXPECT(r, k->send_gdr && k->recv_gdr ? plain == 0 : 1, "%d connections without GDR", plain);
  return 0;
}

START_TEST(test_run) {
  ibemu_fixture_env("mlx5_0:1:ib", NULL);
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_run, (void*)&run_cases[_i], 120), 0);
}
END_TEST
#endif /* BRAID_IB_BUILT */

Suite* net_gdr_suite(void);
Suite* net_gdr_suite(void) {
  Suite* s = suite_create("net_gdr");
  TCase* tc = tcase_create("table");
  tcase_add_loop_test(tc, test_table, 0, (int)(sizeof(gdr_rows) / sizeof(gdr_rows[0])));
  tcase_add_test(tc, test_flush_rule);
  suite_add_tcase(s, tc);
#if BRAID_IB_BUILT
  tc = tcase_create("plugin");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_plugin, 0, 2);
  tcase_add_test(tc, test_noflush);
  suite_add_tcase(s, tc);
  tc = tcase_create("run");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_run, 0, (int)(sizeof(run_cases) / sizeof(run_cases[0])));
  suite_add_tcase(s, tc);
#endif
  return s;
}
