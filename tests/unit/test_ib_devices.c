/*
 * test_ib_devices.c - net_ib's device and port discovery (src/transport/net/ib/ib_devices.c,
 * ib_verbs.c) against the emulated verbs provider (tests/ibemu/, BUILD/lib/libbraid-ibemu.so
 * through BRAID_IB_VERBS_LIBRARY): no real HCA or rdma-core device has been involved.
 *   discover  ACTIVE IB and RoCE ports, DOWN ones dropped, NCCL_IB_HCA filters, speed
 *             (4x HDR = 200000 Mb/s), the plugin's `NET/IB : Using [0]mlx5_0:1/IB ... [RO]; OOB
 *             lo:...` INFO line, once per process;
 *   fail      a verbs call that fails for one device skips it with a WARN naming the device,
 *             the port and the call; a bad NCCL_IB_HCA value is ncclInvalidArgument;
 *   missing   a verbs library that is not there: ncclSystemError, no crash;
 *   qp        RC QPs through INIT, RTR and RTS (src/transport/net/ib/ib_qp.c) on an IB and a
 *             RoCE port; a transition out of order, a GID index past the table and an injected
 *             failure fail with a WARN naming HCA, port, link layer, GID index, the call, the
 *             target state and the attributes (and the remote QP for RTR).
 * Built only with the verbs headers (BRAID_IB_BUILT); otherwise the suite says SKIPPED.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "harness.h"
#include "ibemu_fixture.h"
#include "nccl.h"

#if BRAID_IB_BUILT
#include "transport/net/ib/ib_devices.h"
#include "transport/net/ib/ib_qp.h"
#include "transport/net/net.h"

/* Load the emulator (next to the runner: BUILD/bin/../lib) with these devices. */
static const struct braid_ibv* emu_load(const char* devices, const char* fail) {
  ibemu_fixture_env(devices, fail);
  const struct braid_ibv* ibv = NULL;
  const char* tried = NULL;
  ck_assert_msg(braid_ibv_load(&ibv, &tried) == ncclSuccess, "cannot load the emulator %s", tried);
  return ibv;
}

static const char* const devs = "mlx5_0:2:ib,mlx5_1:1:eth,mlx4_0:1:ib:down,mlx5_10:1:ib";

/* The ports as "dev:port/IB ..." */
static void names(const struct braid_ib_port* p, int n, char* out, size_t len) {
  out[0] = '\0';
  for (int i = 0; i < n; i++)
    snprintf(out + strlen(out), len - strlen(out), "%s%s:%d/%s", i ? " " : "", p[i].dev, p[i].port,
             p[i].roce ? "RoCE" : "IB");
}

struct disc_row {
  const char* hca;
  const char* want;
};
static const struct disc_row disc_rows[] = {
    {NULL, "mlx5_0:1/IB mlx5_0:2/IB mlx5_1:1/RoCE mlx5_10:1/IB"},
    {"mlx5_1", "mlx5_1:1/RoCE mlx5_10:1/IB"},
    {"=mlx5_1", "mlx5_1:1/RoCE"},
    {"mlx5_0:2", "mlx5_0:2/IB"},
    {"^mlx5_0", "mlx5_1:1/RoCE mlx5_10:1/IB"},
    {"mlx4", ""}, /* its only port is DOWN */
};

START_TEST(test_discover) {
  const struct disc_row* row = &disc_rows[_i];
  const struct braid_ibv* ibv = emu_load(devs, NULL);
  struct braid_ib_port ports[BRAID_IB_MAX_PORTS];
  char got[512];
  int n = -1;
  ck_assert_int_eq(braid_ib_discover(ibv, row->hca, ports, BRAID_IB_MAX_PORTS, &n), ncclSuccess);
  names(ports, n, got, sizeof(got));
  ck_assert_msg(strcmp(got, row->want) == 0, "NCCL_IB_HCA=%s: found '%s', expected '%s'",
                row->hca ? row->hca : "(unset)", got, row->want);
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(ports[i].speed, 200000); /* 4x HDR */
    ck_assert_int_eq(ports[i].gid_tbl_len, 16);
  }
}
END_TEST

/* The plugin's init in a fresh process: NCCL's line, once (discovery adds none), [RO] once at
 * its end (NCCL_IB_PCI_RELAXED_ORDERING's default 2) or not at all (0). */
static int body_discover_log(struct harness_rank* r) {
  int ro = *(const int*)r->arg;
  char path[] = "/tmp/braid-test-ibdev-XXXXXX";
  int fd = mkstemp(path);
  REXPECT(r, fd >= 0, "mkstemp");
  close(fd);
  setenv("NCCL_IB_HCA", "mlx5_0:1,mlx5_1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_IB_PCI_RELAXED_ORDERING", ro ? "2" : "0", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  braid_param_reload();
  ncclResetDebugInit();
  RCHECK(r, braid_net_ib.init(NULL));
  int ndev = 0;
  RCHECK(r, braid_net_ib.devices(&ndev));
  const char* want = ro ? "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [2]mlx5_10:1/IB [RO]; OOB lo:"
                        : "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [2]mlx5_10:1/IB ; OOB lo:";
  int lines = harness_count_lines(path, "NET/IB : Using"), exact = harness_count_lines(path, want);
  unlink(path);
  REXPECT(r, ndev == 3, "%d devices", ndev);
  REXPECT(r, lines == 1 && exact == 1, "%d 'NET/IB : Using' lines, %d of them '%s'", lines, exact, want);
  return 0;
}

START_TEST(test_discover_log) {
  emu_load(devs, NULL);
  ck_assert_int_eq(harness_run(1, HARNESS_PROCS, body_discover_log, &_i, 60), 0);
}
END_TEST

START_TEST(test_fail) {
  const struct braid_ibv* ibv = emu_load(devs, "query_port:mlx5_1");
  struct braid_ib_port ports[BRAID_IB_MAX_PORTS];
  char got[512];
  int n = 0;
  ck_assert_int_eq(braid_ib_discover(ibv, NULL, ports, BRAID_IB_MAX_PORTS, &n), ncclSuccess);
  names(ports, n, got, sizeof(got));
  ck_assert_str_eq(got, "mlx5_0:1/IB mlx5_0:2/IB mlx5_10:1/IB");
  ck_assert_msg(strstr(braid_debug_last_error(), "ibv_query_port(mlx5_1, port 1) failed") != NULL, "WARN: %s",
                braid_debug_last_error());
  ck_assert_int_eq(braid_ib_discover(ibv, "mlx5_0:one", ports, BRAID_IB_MAX_PORTS, &n), ncclInvalidArgument);
  ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(test_missing) {
  setenv("BRAID_IB_VERBS_LIBRARY", "/nonexistent/libibverbs-braid-missing.so", 1);
  braid_param_reload();
  braid_ibv_reset();
  const struct braid_ibv* ibv = (const void*)1;
  ck_assert_int_eq(braid_ibv_load(&ibv, NULL), ncclSystemError);
  ck_assert_ptr_null(ibv);
}
END_TEST

/* Two QPs on one port of the emulator, in INIT. */
struct qp_pair {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp[2];
};

static void qp_pair_open(const struct braid_ibv* ibv, const char* dev, const struct braid_ib_qp_cfg* cfg,
                         struct qp_pair* p) {
  int n = 0;
  struct ibv_device** list = ibv->get_device_list(&n);
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < n && p->ctx == NULL; i++)
    if (strcmp(ibv->get_device_name(list[i]), dev) == 0) p->ctx = ibv->open_device(list[i]);
  ck_assert_ptr_nonnull(p->ctx);
  ck_assert_ptr_nonnull(p->pd = ibv->alloc_pd(p->ctx));
  ck_assert_ptr_nonnull(p->cq = ibv->create_cq(p->ctx, 64, NULL, NULL, 0));
  for (int i = 0; i < 2; i++) ck_assert_int_eq(braid_ib_qp_create(ibv, p->pd, p->cq, cfg, 32, &p->qp[i]), ncclSuccess);
  ck_assert_int_eq(p->qp[0]->state, IBV_QPS_INIT);
}

static struct braid_ib_qp_info qp_info(const struct ibv_qp* qp) {
  struct braid_ib_qp_info in;
  memset(&in, 0, sizeof(in));
  in.qpn = qp->qp_num;
  in.psn = 0;
  in.lid = 7;
  in.gid.raw[15] = 1;
  in.mtu = IBV_MTU_4096;
  return in;
}

START_TEST(test_qp_connect) {
  static const struct braid_ib_qp_cfg cfgs[] = {{"mlx5_0", 1, 0, -1, 20, 7, -1, -1},
                                                {"mlx5_1", 1, 1, 3, 20, 7, 0, 106}};
  const struct braid_ib_qp_cfg* cfg = &cfgs[_i];
  const struct braid_ibv* ibv = emu_load(devs, NULL);
  struct qp_pair p;
  qp_pair_open(ibv, cfg->dev, cfg, &p);
  for (int i = 0; i < 2; i++) {
    struct braid_ib_qp_info peer = qp_info(p.qp[1 - i]);
    ck_assert_int_eq(braid_ib_qp_rtr(ibv, p.qp[i], cfg, &peer), ncclSuccess);
    ck_assert_int_eq(braid_ib_qp_rts(ibv, p.qp[i], cfg, 0), ncclSuccess);
    ck_assert_int_eq(p.qp[i]->state, IBV_QPS_RTS);
  }
}
END_TEST

START_TEST(test_qp_errors) {
  const struct braid_ibv* ibv = emu_load(devs, NULL);
  struct braid_ib_qp_cfg roce = {"mlx5_1", 1, 1, 20, 20, 7, -1, -1}; /* GID index past the table of 16 */
  struct braid_ib_qp_cfg ib = {"mlx5_0", 2, 0, -1, 20, 7, -1, -1};
  struct qp_pair p;
  qp_pair_open(ibv, roce.dev, &roce, &p);
  struct braid_ib_qp_info peer = qp_info(p.qp[1]);
  ck_assert_int_eq(braid_ib_qp_rtr(ibv, p.qp[0], &roce, &peer), ncclSystemError);
  const char* w = braid_debug_last_error();
  ck_assert_msg(strstr(w, "ibv_modify_qp to RTR failed on mlx5_1:1 (RoCE, GID index 20): Invalid argument") &&
                    strstr(w, "attributes STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN") &&
                    strstr(w, "remote QPN 0x"),
                "WARN: %s", w);
  qp_pair_open(ibv, ib.dev, &ib, &p);
  ck_assert_int_eq(braid_ib_qp_rts(ibv, p.qp[0], &ib, 0), ncclSystemError); /* RTS before RTR */
  w = braid_debug_last_error();
  ck_assert_msg(strstr(w, "ibv_modify_qp to RTS failed on mlx5_0:2 (IB, GID index -1)") != NULL, "WARN: %s", w);
}
END_TEST

START_TEST(test_qp_injected) {
  const struct braid_ibv* ibv = emu_load(devs, "modify_qp:RTR");
  struct braid_ib_qp_cfg ib = {"mlx5_10", 1, 0, -1, 20, 7, -1, -1};
  struct qp_pair p;
  qp_pair_open(ibv, ib.dev, &ib, &p);
  struct braid_ib_qp_info peer = qp_info(p.qp[1]);
  ck_assert_int_eq(braid_ib_qp_rtr(ibv, p.qp[0], &ib, &peer), ncclSystemError);
  ck_assert_msg(strstr(braid_debug_last_error(), "to RTR failed on mlx5_10:1 (IB, GID index -1)") != NULL, "WARN: %s",
                braid_debug_last_error());
  ck_assert_int_eq(p.qp[0]->state, IBV_QPS_INIT);
}
END_TEST
#else
START_TEST(test_skipped) {
  fprintf(stderr, "ib_devices: SKIPPED: built without the verbs headers (IB=0 or no libibverbs-dev)\n");
}
END_TEST
#endif

Suite* ib_devices_suite(void) {
  Suite* s = suite_create("ib_devices");
  TCase* tc = tcase_create("discover");
  tcase_set_timeout(tc, 20);
#if BRAID_IB_BUILT
  tcase_add_loop_test(tc, test_discover, 0, (int)(sizeof(disc_rows) / sizeof(disc_rows[0])));
  tcase_add_loop_test(tc, test_discover_log, 0, 2);
  tcase_add_test(tc, test_fail);
  tcase_add_test(tc, test_missing);
  suite_add_tcase(s, tc);
  tc = tcase_create("qp");
  tcase_set_timeout(tc, 20);
  tcase_add_loop_test(tc, test_qp_connect, 0, 2);
  tcase_add_test(tc, test_qp_errors);
  tcase_add_test(tc, test_qp_injected);
#else
  tcase_add_test(tc, test_skipped);
#endif
  suite_add_tcase(s, tc);
  return s;
}
