/*
 * test_net_ib.c - net_ib and the emulated verbs provider (tests/ibemu/, loaded through
 * BRAID_IB_VERBS_LIBRARY): no real HCA or rdma-core device is involved.
 *   emu      the emulator's data path, through the verbs API in this process (two QPs
 *            connected to each other; process_vm_* to our own pid): WRITE_WITH_IMM lands and
 *            completes a receive with its imm and length, READ, a bad rkey or bounds is
 *            REM_ACCESS_ERR and flushes the peer's receives, a QP not in RTS refuses WRs, a
 *            peer process that exited is RETRY_EXC_ERR; a dma-buf region (keys by iova, bytes
 *            in the descriptor's pages);
 *   qpfail   NCCL_NET=IB with a QP transition failed by the emulator: init fails and the WARN
 *            names HCA:port, link layer, GID index (auto-selected 3 on RoCE: RoCE v2, IPv4) and
 *            the attributes;
 *   roundtrip the table in one process: sizes 0..1 MiB+3, 4 in flight, over IB with adaptive
 *            routing, RoCE with 3 QPs in turn, 3 QPs splitting each message; the MR cache;
 *   select   NCCL_NET unset: IB before Socket when a port exists; NCCL_IB_DISABLE=1: Socket.
 * Collectives and the failure cases over IB: test_net.c (its net_plugins[] has IB).
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "harness.h"
#include "ibemu_fixture.h"
#include "nccl.h"
#include "transport/net/net_internal.h"

#if BRAID_IB_BUILT
#include "transport/net/ib/ib_verbs.h"
#include "transport/net/net.h"

static void emu_env(const char* devices, const char* fail) {
  ibemu_fixture_env(devices, fail);
}

/* ---- the emulator through verbs ------------------------------------------------------------ */

struct emu {
  const struct braid_ibv* v;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* a;
  struct ibv_qp* b;
};

static struct ibv_qp* qp_new_access(struct emu* e, int access) {
  struct ibv_qp_init_attr init;
  memset(&init, 0, sizeof(init));
  init.send_cq = init.recv_cq = e->cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  struct ibv_qp* qp = e->v->create_qp(e->pd, &init);
  ck_assert_ptr_nonnull(qp);
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = (unsigned)access;
  ck_assert_int_eq(e->v->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  return qp;
}

static struct ibv_qp* qp_new(struct emu* e) {
  return qp_new_access(e, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

static void qp_rtr(struct emu* e, struct ibv_qp* qp, uint32_t dest) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest;
  a.ah_attr.port_num = 1;
  ck_assert_int_eq(e->v->modify_qp(qp, &a,
                                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
                   0);
}

static void qp_connect(struct emu* e, struct ibv_qp* qp, uint32_t dest) {
  qp_rtr(e, qp, dest);
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  ck_assert_int_eq(e->v->modify_qp(qp, &a,
                                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                       IBV_QP_MAX_QP_RD_ATOMIC),
                   0);
}

static void emu_open(struct emu* e) {
  emu_env("mlx5_0:1:ib", NULL);
  memset(e, 0, sizeof(*e));
  ck_assert_int_eq(braid_ibv_load(&e->v, NULL), ncclSuccess);
  int n = 0;
  struct ibv_device** list = e->v->get_device_list(&n);
  ck_assert_int_eq(n, 1);
  e->ctx = e->v->open_device(list[0]);
  e->pd = e->v->alloc_pd(e->ctx);
  e->cq = e->v->create_cq(e->ctx, 64, NULL, NULL, 0);
  ck_assert_ptr_nonnull(e->cq);
  e->a = qp_new(e);
  e->b = qp_new(e);
  qp_connect(e, e->a, e->b->qp_num);
  qp_connect(e, e->b, e->a->qp_num);
}

static int post(struct emu* e, struct ibv_qp* qp, int op, void* buf, uint32_t len, struct ibv_mr* mr, void* dst,
                uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)buf, len, mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = (enum ibv_wr_opcode)op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = imm;
  wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)dst;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

static int poll1(struct emu* e, struct ibv_wc* wc) {
  return ibv_poll_cq(e->cq, 1, wc);
}

START_TEST(test_emu_data) {
  struct emu e;
  emu_open(&e);
  static char src[8192], dst[8192], back[8192];
  for (int i = 0; i < (int)sizeof(src); i++) src[i] = (char)(i * 7 + 1);
  int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* ms = e.v->reg_mr(e.pd, src, sizeof(src), acc);
  struct ibv_mr* md = e.v->reg_mr(e.pd, dst, sizeof(dst), acc);
  struct ibv_mr* mb = e.v->reg_mr(e.pd, back, sizeof(back), acc);
  ck_assert(ms && md && mb && ms->rkey != md->rkey);
  struct ibv_recv_wr rwr, *rbad = NULL;
  memset(&rwr, 0, sizeof(rwr));
  rwr.wr_id = 42;
  ck_assert_int_eq(ibv_post_recv(e.b, &rwr, &rbad), 0);
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_WRITE_WITH_IMM, src, 5000, ms, dst + 100, md->rkey, 0x1234), 0);
  struct ibv_wc wc[4];
  int got = ibv_poll_cq(e.cq, 4, wc);
  ck_assert_int_eq(got, 2);
  int si = wc[0].opcode == IBV_WC_RDMA_WRITE ? 0 : 1;
  ck_assert_int_eq(wc[si].status, IBV_WC_SUCCESS);
  ck_assert_int_eq(wc[si].wr_id, 7);
  ck_assert_int_eq(wc[1 - si].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  ck_assert_int_eq(wc[1 - si].wr_id, 42);
  ck_assert_int_eq(wc[1 - si].imm_data, 0x1234);
  ck_assert_int_eq(wc[1 - si].byte_len, 5000);
  ck_assert_int_eq(memcmp(dst + 100, src, 5000), 0);
  ck_assert_int_eq(dst[99], 0);
  ck_assert_int_eq(dst[5100], 0);
  /* READ it back */
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_READ, back, 5000, mb, dst + 100, md->rkey, 0), 0);
  ck_assert_int_eq(poll1(&e, wc), 1);
  ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
  ck_assert_int_eq(wc[0].opcode, IBV_WC_RDMA_READ);
  ck_assert_int_eq(memcmp(back, src, 5000), 0);
  /* past the end of the remote MR: REM_ACCESS_ERR, the QP is in ERR, the next WR is flushed,
   * and the peer's posted receive is flushed */
  ck_assert_int_eq(ibv_post_recv(e.b, &rwr, &rbad), 0);
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_WRITE, src, 200, ms, dst + 8100, md->rkey, 0), 0);
  ck_assert_int_eq(poll1(&e, wc), 1);
  ck_assert_int_eq(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_WRITE, src, 8, ms, dst, md->rkey, 0), 0);
  ck_assert_int_eq(ibv_poll_cq(e.cq, 4, wc), 2);
  ck_assert(wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[1].status == IBV_WC_WR_FLUSH_ERR);
  ck_assert_int_eq(wc[0].wr_id + wc[1].wr_id, 7 + 42); /* our write and b's receive */
  ck_assert_int_eq(poll1(&e, wc), 0);
  /* b is in ERR too; a fresh pair: a deregistered key is a remote access error */
  struct ibv_qp* c = qp_new(&e);
  struct ibv_qp* d = qp_new(&e);
  ck_assert_int_eq(post(&e, c, IBV_WR_RDMA_WRITE, src, 8, ms, dst, md->rkey, 0), EINVAL); /* not in RTS */
  qp_connect(&e, c, d->qp_num);
  qp_connect(&e, d, c->qp_num);
  uint32_t old = md->rkey;
  ck_assert_int_eq(e.v->dereg_mr(md), 0);
  ck_assert_int_eq(post(&e, c, IBV_WR_RDMA_WRITE, src, 8, ms, dst, old, 0), 0);
  ck_assert_int_eq(poll1(&e, wc), 1);
  ck_assert_int_eq(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  ck_assert_int_eq(e.v->destroy_qp(c), 0);
  ck_assert_int_eq(e.v->destroy_qp(d), 0);
  ck_assert_int_eq(e.v->destroy_qp(e.a), 0);
  ck_assert_int_eq(e.v->destroy_qp(e.b), 0);
  e.v->dereg_mr(ms);
  e.v->dereg_mr(mb);
  ck_assert_int_eq(e.v->destroy_cq(e.cq), 0);
}
END_TEST

/* A peer QP in a process that exited: RETRY_EXC_ERR. */
START_TEST(test_emu_peer_gone) {
  struct emu e;
  emu_open(&e);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t child = fork();
  if (child == 0) {
    struct ibv_qp* qp = qp_new(&e);
    uint32_t n = qp->qp_num;
    _exit(write(p[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
  }
  uint32_t qpn = 0;
  ck_assert_int_eq(read(p[0], &qpn, sizeof(qpn)), sizeof(qpn));
  int st = 0;
  waitpid(child, &st, 0);
  close(p[0]), close(p[1]);
  struct ibv_qp* q = qp_new(&e);
  qp_connect(&e, q, qpn);
  static char buf[64];
  struct ibv_mr* m = e.v->reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  ck_assert_int_eq(post(&e, q, IBV_WR_RDMA_WRITE_WITH_IMM, buf, 64, m, (void*)0x1000, 1, 0), 0);
  struct ibv_wc wc;
  ck_assert_int_eq(poll1(&e, &wc), 1);
  ck_assert_int_eq(wc.status, IBV_WC_RETRY_EXC_ERR);
}
END_TEST

/* The responder QP's side, as an HCA checks it: the access it was opened with at INIT
 * (REM_ACCESS_ERR, even with an MR that allows it) and its state (a QP in RTR receives; one
 * left in INIT drops the packets: RETRY_EXC_ERR once the retries give up). */
static int one_write(struct emu* e, struct ibv_qp* from, int op, char* buf, struct ibv_mr* m) {
  struct ibv_wc wc;
  ck_assert_int_eq(post(e, from, op, buf, 64, m, buf + 64, m->rkey, 0), 0);
  ck_assert_int_eq(poll1(e, &wc), 1);
  return wc.status;
}

START_TEST(test_emu_responder) {
  struct emu e;
  emu_open(&e);
  static char buf[128];
  int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* m = e.v->reg_mr(e.pd, buf, sizeof(buf), acc);
  ck_assert_ptr_nonnull(m);
  const int only[2] = {IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ};
  const int refused[2] = {IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE_WITH_IMM};
  for (int i = 0; i < 2; i++) {
    struct ibv_qp* c = qp_new(&e);
    struct ibv_qp* d = qp_new_access(&e, only[i]);
    qp_connect(&e, c, d->qp_num);
    qp_connect(&e, d, c->qp_num);
    ck_assert_int_eq(one_write(&e, c, refused[i], buf, m), IBV_WC_REM_ACCESS_ERR);
    ck_assert_int_eq(e.v->destroy_qp(c), 0);
    ck_assert_int_eq(e.v->destroy_qp(d), 0);
  }
  struct ibv_qp* c = qp_new(&e);
  struct ibv_qp* d = qp_new(&e);
  qp_connect(&e, c, d->qp_num);
  ck_assert_int_eq(one_write(&e, c, IBV_WR_RDMA_WRITE, buf, m), IBV_WC_RETRY_EXC_ERR); /* d still in INIT */
  ck_assert_int_eq(e.v->destroy_qp(c), 0);
  c = qp_new(&e);
  qp_connect(&e, c, d->qp_num);
  qp_rtr(&e, d, c->qp_num); /* receives from RTR on */
  ck_assert_int_eq(one_write(&e, c, IBV_WR_RDMA_WRITE, buf, m), IBV_WC_SUCCESS);
  ck_assert_int_eq(e.v->destroy_qp(c), 0);
  ck_assert_int_eq(e.v->destroy_qp(d), 0);
  e.v->dereg_mr(m);
}
END_TEST

/* A dma-buf region (ibv_reg_dmabuf_mr, GPUDirect RDMA): keys address it by an iova mapped
 * nowhere in this process; the bytes land in the descriptor's pages (another mapping of the
 * memfd sees them), READ comes back from them, past its end is REM_ACCESS_ERR; fd -1 is EBADF
 * (NCCL's probe), IBEMU_DMABUF=0 is EOPNOTSUPP. */
START_TEST(test_emu_dmabuf) {
  struct emu e;
  emu_open(&e);
  enum { LEN = 3 * 4096 };
  int fd = memfd_create("braid-test-dmabuf", 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 4 * 4096), 0);
  char* view = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ck_assert_ptr_ne(view, MAP_FAILED);
  static char src[8192], back[8192];
  for (int i = 0; i < (int)sizeof(src); i++) src[i] = (char)(i * 5 + 2);
  int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ck_assert_ptr_nonnull(e.v->reg_dmabuf_mr);
  errno = 0;
  ck_assert_ptr_null(e.v->reg_dmabuf_mr(e.pd, 0, 0, 0, -1, 0));
  ck_assert_int_eq(errno, EBADF);
  const uint64_t iova = 0x7e5500000000ull;                                      /* nothing is mapped there */
  struct ibv_mr* mg = e.v->reg_dmabuf_mr(e.pd, 4096 + 100, LEN, iova, fd, acc); /* not page aligned */
  struct ibv_mr* ms = e.v->reg_mr(e.pd, src, sizeof(src), acc);
  struct ibv_mr* mb = e.v->reg_mr(e.pd, back, sizeof(back), acc);
  ck_assert(mg && ms && mb);
  struct ibv_wc wc;
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_WRITE, src, 5000, ms, (void*)(uintptr_t)(iova + 10), mg->rkey, 0), 0);
  ck_assert_int_eq(poll1(&e, &wc), 1);
  ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
  ck_assert_int_eq(memcmp(view + 4096 + 110, src, 5000), 0);
  ck_assert_int_eq(view[4096 + 109], 0);
  memset(view + 4096 + 100, 0x33, 64);
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_READ, back, 64, mb, (void*)(uintptr_t)iova, mg->rkey, 0), 0);
  ck_assert_int_eq(poll1(&e, &wc), 1);
  ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
  ck_assert_int_eq(back[0], 0x33);
  ck_assert_int_eq(back[63], 0x33);
  /* a dma-buf region as the local side of a write (a GDR send) */
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_WRITE, (void*)(uintptr_t)(iova + 10), 100, mg, back + 200, mb->rkey, 0),
                   0);
  ck_assert_int_eq(poll1(&e, &wc), 1);
  ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
  ck_assert_int_eq(back[200], 0x33); /* iova + 10..63 was overwritten above, the rest is src's */
  ck_assert_int_eq(memcmp(back + 254, src + 54, 46), 0);
  ck_assert_int_eq(post(&e, e.a, IBV_WR_RDMA_WRITE, src, 200, ms, (void*)(uintptr_t)(iova + LEN - 100), mg->rkey, 0),
                   0);
  ck_assert_int_eq(poll1(&e, &wc), 1);
  ck_assert_int_eq(wc.status, IBV_WC_REM_ACCESS_ERR);
  e.v->dereg_mr(mg);
  setenv("IBEMU_DMABUF", "0", 1);
  errno = 0;
  ck_assert_ptr_null(e.v->reg_dmabuf_mr(e.pd, 0, 4096, iova, fd, acc));
  ck_assert_int_eq(errno, EOPNOTSUPP);
  unsetenv("IBEMU_DMABUF");
  e.v->dereg_mr(ms);
  e.v->dereg_mr(mb);
  munmap(view, 4 * 4096);
  close(fd);
}
END_TEST

/* ---- the plugin ---------------------------------------------------------------------------- */

static void fake_node(const struct harness_rank* r) {
  char id[48];
  snprintf(id, sizeof(id), "braid-test-node-%d", r->rank);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  braid_param_reload();
}

struct qpfail_case {
  const char* devices;
  const char* env; /* NAME=VALUE or NULL */
  const char* want;
};

static const struct qpfail_case qpfail_cases[] = {
    {"mlx5_0:1:ib", NULL,
     "ibv_modify_qp to RTR failed on mlx5_0:1 (IB, GID index 0): Invalid argument (errno 22; attributes "
     "STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN; remote QPN 0x"},
    {"mlx5_1:1:eth", NULL, "ibv_modify_qp to RTR failed on mlx5_1:1 (RoCE, GID index 3)"}, /* RoCE v2, IPv4 */
    {"mlx5_1:1:eth", "NCCL_IB_GID_INDEX=1", "ibv_modify_qp to RTR failed on mlx5_1:1 (RoCE, GID index 1)"},
    {"mlx5_1:1:eth", "NCCL_IB_ROCE_VERSION_NUM=1", "ibv_modify_qp to RTR failed on mlx5_1:1 (RoCE, GID index 2)"},
    {"mlx5_1:1:eth", "NCCL_IB_ADDR_FAMILY=AF_INET6", "ibv_modify_qp to RTR failed on mlx5_1:1 (RoCE, GID index 5)"},
    {"mlx5_1:1:eth", "NCCL_IB_ADDR_RANGE=192.168.0.0/16",
     "ibv_modify_qp to RTR failed on mlx5_1:1 (RoCE, GID index 7)"},
};

static int body_qpfail(struct harness_rank* r) {
  const struct qpfail_case* k = r->arg;
  ncclComm_t comm = NULL;
  fake_node(r);
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  REXPECT(r, res != ncclSuccess, "init succeeded although every RTR transition fails");
  const char* w = braid_debug_last_error();
  /* the rank whose accept failed names the QP; its peer may only see the connection drop */
  if (strstr(w, "ibv_modify_qp") != NULL) REXPECT(r, strstr(w, k->want) != NULL, "WARN: %s (expected %s)", w, k->want);
  return 0;
}

START_TEST(test_qpfail) {
  const struct qpfail_case* k = &qpfail_cases[_i];
  emu_env(k->devices, "modify_qp:RTR");
  setenv("NCCL_NET", "IB", 1);
  unsetenv("NCCL_IB_GID_INDEX");
  unsetenv("NCCL_IB_ROCE_VERSION_NUM");
  unsetenv("NCCL_IB_ADDR_FAMILY");
  unsetenv("NCCL_IB_ADDR_RANGE");
  if (k->env != NULL) putenv((char*)k->env);
  braid_param_reload();
  int failed = harness_run(2, HARNESS_PROCS, body_qpfail, (void*)k, 60);
  unsetenv("NCCL_NET");
  unsetenv("IBEMU_FAIL");
  unsetenv("NCCL_IB_GID_INDEX");
  unsetenv("NCCL_IB_ROCE_VERSION_NUM");
  unsetenv("NCCL_IB_ADDR_FAMILY");
  unsetenv("NCCL_IB_ADDR_RANGE");
  braid_param_reload();
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* The table itself, both ends in one process (RDMA to our own pid): 8 sizes x 4 messages in
 * flight, receive buffers larger than the messages, sizes reported, bytes around untouched,
 * the registration cache sharing one MR between overlapping registrations. */
struct rt_case {
  const char* devices;
  const char* env; /* space-separated NAME=VALUE */
};
static const struct rt_case rt_cases[] = {
    {"mlx5_0:1:ib", ""},                              /* IB: adaptive routing (WRITE + 0-byte imm) */
    {"mlx5_1:1:eth", "NCCL_IB_QPS_PER_CONNECTION=3"}, /* RoCE: WRITE_WITH_IMM, QPs in turn */
    {"mlx5_0:1:ib", "NCCL_IB_QPS_PER_CONNECTION=3 NCCL_IB_SPLIT_DATA_ON_QPS=1 NCCL_IB_ADAPTIVE_ROUTING=0"},
};

static int rt_wait(const struct braid_net_v1* n, void* req, size_t* got) {
  int done = 0;
  for (long i = 0; !done && i < 20000000; i++)
    if (n->test(req, &done, got) != ncclSuccess) return -1;
  return done ? 0 : -1;
}

static int body_roundtrip(struct harness_rank* r) {
  const struct rt_case* k = r->arg;
  char env[256], *save = NULL;
  snprintf(env, sizeof(env), "%s", k->env);
  for (char* e = strtok_r(env, " ", &save); e != NULL; e = strtok_r(NULL, " ", &save)) {
    char* eq = strchr(e, '=');
    *eq = '\0';
    setenv(e, eq + 1, 1);
  }
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  braid_param_reload();
  const struct braid_net_v1* n = &braid_net_ib;
  struct braid_net_config cfg = {0x77, -1};
  char handle[BRAID_NET_HANDLE_MAXSIZE];
  void *ctx = NULL, *lis = NULL, *snd = NULL, *rcv = NULL;
  int ndev = 0;
  RCHECK(r, n->init(NULL));
  RCHECK(r, n->devices(&ndev));
  REXPECT(r, ndev == 1, "%d devices", ndev);
  RCHECK(r, n->openContext(1, &cfg, &ctx));
  RCHECK(r, n->listen(ctx, 0, handle, &lis));
  for (long i = 0; (snd == NULL || rcv == NULL) && i < 10000000; i++) {
    if (snd == NULL) RCHECK(r, n->connect(ctx, 0, handle, &snd));
    if (rcv == NULL) RCHECK(r, n->accept(lis, &rcv));
  }
  REXPECT(r, snd != NULL && rcv != NULL, "connect / accept did not finish");
  static const size_t sizes[] = {0, 1, 16, 4096, 65537, 300000, 1 << 20, (1 << 20) + 3};
  size_t max = (1 << 20) + 64;
  char* src = malloc(max);
  char* dst = malloc(4 * max);
  void *ms = NULL, *md = NULL, *md2 = NULL;
  REXPECT(r, src && dst, "out of memory");
  for (size_t i = 0; i < max; i++) src[i] = (char)(i * 7 + 3);
  RCHECK(r, n->regMr(snd, src, max, BRAID_NET_PTR_HOST, &ms));
  RCHECK(r, n->regMr(rcv, dst, 4 * max, BRAID_NET_PTR_HOST, &md));
  RCHECK(r, n->regMr(rcv, dst + max, max, BRAID_NET_PTR_HOST, &md2));
  REXPECT(r, md2 == md, "a registration inside a registered range was not served from the cache");
  for (int s = 0; s < (int)(sizeof(sizes) / sizeof(sizes[0])); s++) {
    void *rq[4], *sq[4];
    memset(dst, 0x55, 4 * max);
    for (int j = 0; j < 4; j++) {
      void* d = dst + (size_t)j * max;
      size_t cap = max - 32;
      int tag = 5;
      RCHECK(r, n->irecv(rcv, 1, &d, &cap, &tag, &md, &rq[j]));
      REXPECT(r, rq[j] != NULL, "irecv %d refused", j);
    }
    /* The receiver is tested while the sender waits, as a progress engine does: until the
     * sender's "ready" is read, its clear-to-sends wait in the receiver (ib_net.h). */
    int rdone[4] = {0, 0, 0, 0};
    size_t got[4] = {(size_t)-1, (size_t)-1, (size_t)-1, (size_t)-1};
    for (int j = 0; j < 4; j++) {
      sq[j] = NULL;
      for (long i = 0; sq[j] == NULL && i < 10000000; i++) {
        RCHECK(r, n->isend(snd, src, sizes[s], 5, ms, &sq[j]));
        if (!rdone[j]) RCHECK(r, n->test(rq[j], &rdone[j], &got[j]));
      }
      REXPECT(r, sq[j] != NULL, "isend %d never found its clear-to-send", j);
    }
    for (int j = 0; j < 4; j++) {
      REXPECT(r, (rdone[j] || rt_wait(n, rq[j], &got[j]) == 0) && rt_wait(n, sq[j], NULL) == 0,
              "message %d of %zu bytes", j, sizes[s]);
      REXPECT(r, got[j] == sizes[s], "received %zu bytes, sent %zu", got[j], sizes[s]);
      const char* d = dst + (size_t)j * max;
      REXPECT(r, memcmp(d, src, sizes[s]) == 0 && d[sizes[s]] == 0x55, "message %d of %zu bytes arrived wrong", j,
              sizes[s]);
    }
  }
  /* a message larger than the receive buffer it was cleared for: refused, the comm fails */
  void *rq = NULL, *sq = NULL, *d = dst;
  size_t cap = 16;
  int tag = 5;
  RCHECK(r, n->irecv(rcv, 1, &d, &cap, &tag, &md, &rq));
  ncclResult_t big = ncclSuccess;
  for (long i = 0; sq == NULL && big == ncclSuccess && i < 10000000; i++) big = n->isend(snd, src, 17, 5, ms, &sq);
  REXPECT(r, big == ncclInternalError && strstr(braid_debug_last_error(), "the receiver posted 16 bytes") != NULL,
          "a 17-byte send into a 16-byte receive: %d, %s", big, braid_debug_last_error());
  RCHECK(r, n->deregMr(rcv, md2));
  RCHECK(r, n->deregMr(rcv, md));
  RCHECK(r, n->deregMr(snd, ms));
  n->closeSend(snd);
  n->closeRecv(rcv);
  n->closeListen(lis);
  n->closeContext(ctx);
  free(src);
  free(dst);
  return 0;
}

START_TEST(test_roundtrip) {
  emu_env(rt_cases[_i].devices, NULL);
  int failed = harness_run(1, HARNESS_PROCS, body_roundtrip, (void*)&rt_cases[_i], 120);
  ck_assert_int_eq(failed, 0);
}
END_TEST

static int body_select(struct harness_rank* r) {
  const char* want = r->arg;
  const struct braid_net_v1* net = NULL;
  RCHECK(r, braid_net_plugin_get(&net));
  REXPECT(r, strcmp(net->name, want) == 0, "chose %s, expected %s", net->name, want);
  return 0;
}

START_TEST(test_select) {
  emu_env("mlx5_0:1:ib", NULL);
  unsetenv("NCCL_NET");
  setenv("NCCL_IB_DISABLE", _i ? "1" : "0", 1);
  braid_param_reload();
  int failed = harness_run(1, HARNESS_PROCS, body_select, _i ? "Socket" : "IB", 60);
  unsetenv("NCCL_IB_DISABLE");
  braid_param_reload();
  ck_assert_int_eq(failed, 0);
}
END_TEST
#endif /* BRAID_IB_BUILT */

Suite* net_ib_suite(void) {
  Suite* s = suite_create("net_ib");
#if BRAID_IB_BUILT
  TCase* tc = tcase_create("emu");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_emu_data);
  tcase_add_test(tc, test_emu_peer_gone);
  tcase_add_test(tc, test_emu_responder);
  tcase_add_test(tc, test_emu_dmabuf);
  suite_add_tcase(s, tc);
  tc = tcase_create("roundtrip");
  tcase_set_timeout(tc, 240);
  tcase_add_loop_test(tc, test_roundtrip, 0, (int)(sizeof(rt_cases) / sizeof(rt_cases[0])));
  suite_add_tcase(s, tc);
  tc = tcase_create("qpfail");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_qpfail, 0, (int)(sizeof(qpfail_cases) / sizeof(qpfail_cases[0])));
  suite_add_tcase(s, tc);
  tc = tcase_create("select");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_select, 0, 2);
  suite_add_tcase(s, tc);
#else
  fprintf(stderr, "net_ib: not built (no libibverbs headers): every case skipped\n");
#endif
  return s;
}
