/*
 * test_p2p_transport.c - the intra-node transports on devices (src/transport/p2p.c, shm.c on
 * devices, the choice in connect.c), run on the fake GPU (BRAID_FAKE_GPU=N, src/device/device_fake.c:
 * device memory is host memory in shared segments, IPC handles work across processes):
 *   - who may use P2P: both ranks on devices of one node, NCCL_P2P_DISABLE, NCCL_P2P_LEVEL,
 *     the same GPU, host-mode and mixed pairs;
 *   - one connection built with the transports' own entry points by two ranks, as threads of
 *     one process (P2P/direct pointer) and as two processes (P2P/IPC), NCCL_P2P_DISABLE=1
 *     (SHM registered with the device: "direct/direct"), host mode (plain SHM): the sender's
 *     bytes and tail land in the receiver's FIFO;
 *   - failures: an IPC import that fails (WARN naming both ranks), a peer that chose another
 *     transport, frees of half-built connectors, frees after kill -9 of the peer;
 *   - through the public API: ring connections of device communicators log via P2P/IPC and
 *     via P2P/direct pointer, an all-reduce over them is right, and a communicator mixing a
 *     host-mode rank and a device rank fails with a clear error. These need the device binding
 *     of init.c; where a communicator still comes up in host mode they print "NOT RUN" and why.
 *
 * Rank bodies never call ck_assert (they may be threads or forked processes): they report
 * with harness_fail and return non-zero.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/comm.h"
#include "device/device.h"
#include "harness.h"
#include "nccl.h"
#include "topo/topo.h"
#include "transport/registry.h"

void braid_param_reload(void); /* src/base/param.c: re-read the environment (test hook) */
void braid_device_reset(void); /* src/device/device.c: decide the device layer again (test hook) */

#define HARNESS_TIMEOUT_S 30
#define TCASE_TIMEOUT_S 90
#define FIFO_BYTES (64 * 1024) /* per protocol: a multiple of NSTEPS * 4096 */

/* A fresh environment for the transports: fake GPUs (0: host mode), P2P settings. */
static void set_env(int fake_gpus, const char* p2p_disable, const char* p2p_level) {
  char n[16];
  snprintf(n, sizeof(n), "%d", fake_gpus);
  if (fake_gpus > 0)
    setenv("BRAID_FAKE_GPU", n, 1);
  else
    unsetenv("BRAID_FAKE_GPU");
  unsetenv("BRAID_HOST_MODE");
  unsetenv("NCCL_TOPO_FILE");
  unsetenv("NCCL_SHM_DISABLE");
  if (p2p_disable)
    setenv("NCCL_P2P_DISABLE", p2p_disable, 1);
  else
    unsetenv("NCCL_P2P_DISABLE");
  if (p2p_level)
    setenv("NCCL_P2P_LEVEL", p2p_level, 1);
  else
    unsetenv("NCCL_P2P_LEVEL");
  braid_device_reset(); /* re-reads the parameters too */
}

/* A two-rank communicator as the transports see it (what connect.c builds): peers, device,
 * FIFO sizes; no topology (the fake GPUs are in none), no failure service. */
static void ctx_make(struct braid_transport_ctx* t, const struct braid_peer_info* peers, int rank) {
  static const volatile uint32_t no_abort;
  memset(t, 0, sizeof(*t));
  t->rank = rank;
  t->nranks = 2;
  t->peers = peers;
  t->cuda_dev = peers[rank].cuda_dev;
  t->device = peers[rank].host_mode ? NULL : braid_device();
  t->comm_hash = 0x7e57;
  t->abort_flag = &no_abort;
  for (int p = 0; p < BRAID_NUM_PROTOS; p++) t->buff_bytes[p] = FIFO_BYTES;
}

/* A two-rank communicator for the core's connect.c (test_mixed_refused). */
static void comm_make(struct braid_comm* comm, struct braid_peer_info* peers, int rank) {
  memset(comm, 0, sizeof(*comm));
  comm->rank = rank;
  comm->nranks = 2;
  comm->peers = peers;
  comm->cuda_dev = peers[rank].cuda_dev;
  comm->host_mode = peers[rank].host_mode;
  comm->comm_hash = 0x7e57;
  for (int p = 0; p < BRAID_NUM_PROTOS; p++) comm->buff_bytes[p] = FIFO_BYTES;
}

/* What a rank says about itself; dev -1: host mode. */
static void peer_make(struct braid_peer_info* p, int rank, int dev) {
  memset(p, 0, sizeof(*p));
  p->rank = rank;
  p->pid = getpid();
  p->host_hash = 0x40057;
  p->pid_hash = (uint64_t)getpid();
  p->shm_dev = 1;
  p->cuda_dev = dev;
  p->host_mode = dev < 0;
  p->bus_id = -1;
  snprintf(p->hostname, sizeof(p->hostname), "testhost");
  const struct braid_device_ops* d = braid_device();
  char s[32];
  if (dev >= 0 && d != NULL) d->bus_id(dev, &p->bus_id, s, sizeof(s));
}

/* The transport connect.c would pick (the first of the registry that can connect). */
static const struct braid_transport* pick(const struct braid_transport_ctx* t, int peer) {
  int n = 0;
  const struct braid_transport* const* order = braid_transport_registry(&n);
  for (int i = 0; i < n; i++)
    if (order[i]->can_connect(t, peer)) return order[i];
  return NULL;
}

/* ---- who may use P2P ------------------------------------------------------------------------- */

/* P2P's answer for rank 0 (device dev0, or host) to rank 1 (dev1) in another process, on
 * the node's topology as init detects it (NCCL_TOPO_FILE when set). */
static int p2p_for(int dev0, int dev1, int same_process, uint64_t host1) {
  struct braid_peer_info peers[2];
  struct braid_transport_ctx t;
  struct braid_topo_system* sys = NULL;
  peer_make(&peers[0], 0, dev0);
  peer_make(&peers[1], 1, dev1);
  if (!same_process) peers[1].pid_hash ^= 0x5a5a, peers[1].pid += 1;
  peers[1].host_hash = host1;
  ctx_make(&t, peers, 0);
  if (braid_topo_detect(&sys) != ncclSuccess) sys = NULL;
  t.topo = sys;
  int yes = braid_transport_p2p.can_connect(&t, 1);
  braid_topo_free(sys);
  return yes;
}

START_TEST(test_can_connect) {
  const uint64_t here = 0x40057, elsewhere = 0x1234;
  set_env(2, NULL, NULL);
  ck_assert_ptr_nonnull(braid_device());
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 1);      /* two devices, two processes */
  ck_assert_int_eq(p2p_for(0, 1, 1, here), 1);      /* one process */
  ck_assert_int_eq(p2p_for(0, 0, 0, here), 1);      /* one GPU, two processes (BRAID_GPU_SHARING) */
  ck_assert_int_eq(p2p_for(0, 1, 0, elsewhere), 0); /* other node */
  ck_assert_int_eq(p2p_for(-1, -1, 0, here), 0);    /* host mode */
  ck_assert_int_eq(p2p_for(-1, 1, 0, here), 0);     /* mixed */
  ck_assert_int_eq(p2p_for(0, -1, 0, here), 0);

  set_env(2, "1", NULL);
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 0);
  ck_assert_int_eq(p2p_for(0, 0, 0, here), 0);

  /* The fake GPUs are not in the topology: one PCIe switch away (PIX). */
  set_env(2, NULL, "PIX");
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 1);
  set_env(2, NULL, "SYS");
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 1);
  set_env(2, NULL, "NVL");
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 0);
  set_env(2, NULL, "LOC");
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 0);
  ck_assert_int_eq(p2p_for(0, 0, 0, here), 1); /* the same GPU is always within reach */
  set_env(2, NULL, "0");                       /* legacy numbers: 0 = LOC */
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 0);
  set_env(2, NULL, "bogus"); /* WARNed by topo; no P2P rather than a guess */
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 0);

  /* No device layer: never. */
  set_env(0, NULL, NULL);
  ck_assert_ptr_null(braid_device());
  ck_assert_int_eq(p2p_for(-1, -1, 0, here), 0);
}
END_TEST

/* connect.c refuses a host-mode/device pair before any transport or the bootstrap is
 * involved (init refuses such communicators earlier still: graph_build.c). */
START_TEST(test_mixed_refused) {
  struct braid_peer_info peers[2];
  struct braid_comm comm;
  struct braid_connector send[2];
  int peer = 1;
  set_env(2, NULL, NULL);
  peer_make(&peers[0], 0, -1);
  peer_make(&peers[1], 1, 1);
  peers[1].pid_hash ^= 1;
  comm_make(&comm, peers, 0);
  comm.nchannels = 1;
  memset(send, 0, sizeof(send));
  comm.channels[0].p2p_send = send;
  ck_assert_int_eq(braid_connect_p2p(&comm, 0, BRAID_CONNECT_POST, &peer, 1, NULL, 0), ncclInvalidUsage);
  const char* warn = ncclGetLastError(NULL);
  ck_assert_msg(strstr(warn, "Rank 0 (pid") && strstr(warn, "runs in host mode but rank 1") &&
                    strstr(warn, "is on CUDA device 1") && strstr(warn, "cannot mix host-mode and GPU ranks"),
                "WARN was: %s", warn);
  ck_assert_ptr_null(send[1].transport);
}
END_TEST

/* A node whose GPUs have the fake GPUs' bus ids (0000:1b:00.0 + dev): devices 0 and 1 under
 * one PCIe switch of CPU 0 (PIX), device 2 on CPU 1 (SYS from both); `nvlink` joins 0 and 2. */
static void topo_write(const char* dir, int nvlink, char* path, size_t path_len) {
  const char* pci =
      "class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"";
  const char* sw =
      "class=\"0x060400\" vendor=\"0x10b5\" device=\"0x8747\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"";
  const char* cpu = "arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\"";
  snprintf(path, path_len, "%s/topo-%d.xml", dir, nvlink);
  FILE* f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "<system version=\"1\">\n <cpu numaid=\"0\" affinity=\"0000ffff\" %s>\n", cpu);
  fprintf(f, "  <pci busid=\"0000:1a:00.0\" %s>\n", sw);
  fprintf(f,
          "   <pci busid=\"0000:1b:00.0\" %s>\n    <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"0\">%s</gpu>\n   </pci>\n",
          pci, nvlink ? "<nvlink target=\"0000:1d:00.0\" count=\"4\" tclass=\"0x030200\"/>" : "");
  fprintf(f, "   <pci busid=\"0000:1c:00.0\" %s>\n    <gpu dev=\"1\" sm=\"90\" rank=\"1\" gdr=\"0\"/>\n   </pci>\n",
          pci);
  fprintf(f, "  </pci>\n </cpu>\n <cpu numaid=\"1\" affinity=\"ffff0000\" %s>\n", cpu);
  fprintf(f,
          "  <pci busid=\"0000:1d:00.0\" %s>\n    <gpu dev=\"2\" sm=\"90\" rank=\"2\" gdr=\"0\">%s</gpu>\n  </pci>\n",
          pci, nvlink ? "<nvlink target=\"0000:1b:00.0\" count=\"4\" tclass=\"0x030200\"/>" : "");
  fprintf(f, " </cpu>\n</system>\n");
  fclose(f);
}

/* NCCL_P2P_LEVEL against the paths of a real topology (NCCL_TOPO_FILE naming the fake GPUs). */
START_TEST(test_can_connect_topo) {
  const uint64_t here = 0x40057;
  char dir[] = "/tmp/braid-p2pt-topo-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char pcie[512], nvl[512];
  topo_write(dir, 0, pcie, sizeof(pcie));
  topo_write(dir, 1, nvl, sizeof(nvl));
  set_env(3, NULL, NULL);
  setenv("NCCL_TOPO_FILE", pcie, 1);
  braid_param_reload();
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 1); /* PIX: within the default PXB */
  ck_assert_int_eq(p2p_for(0, 2, 0, here), 0); /* SYS: beyond it */
  ck_assert_int_eq(p2p_for(2, 0, 0, here), 0); /* the same from the other end */
  setenv("NCCL_P2P_LEVEL", "SYS", 1);
  braid_param_reload();
  ck_assert_int_eq(p2p_for(0, 2, 0, here), 1);
  setenv("NCCL_P2P_LEVEL", "LOC", 1);
  braid_param_reload();
  ck_assert_int_eq(p2p_for(0, 1, 0, here), 0);
  unsetenv("NCCL_P2P_LEVEL");
  setenv("NCCL_TOPO_FILE", nvl, 1); /* a new file: detected again */
  braid_param_reload();
  ck_assert_int_eq(p2p_for(0, 2, 0, here), 1); /* NVLink: always */
  ck_assert_int_eq(p2p_for(2, 0, 0, here), 1);
  setenv("NCCL_P2P_LEVEL", "PIX", 1);
  braid_param_reload();
  ck_assert_int_eq(p2p_for(0, 2, 0, here), 1);
  unsetenv("NCCL_P2P_LEVEL");
  unsetenv("NCCL_TOPO_FILE");
  unlink(pcie);
  unlink(nvl);
  rmdir(dir);
}
END_TEST

/* ---- one connection between two ranks ------------------------------------------------------- */

struct pair {
  int fds[2][2];          /* fds[r]: the pipe into rank r */
  int fake_gpus;          /* 0: host mode */
  int shared_gpu;         /* both ranks on device 0 */
  const char* transport;  /* expected: "P2P" or "SHM" */
  const char* desc_same;  /* expected sender desc, ranks in one process */
  const char* desc_other; /* ... in two processes */
};

static int pipe_send(struct pair* p, int to, const void* buf, size_t n) {
  const char* b = buf;
  while (n > 0) {
    ssize_t k = write(p->fds[to][1], b, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

static int pipe_recv(struct pair* p, int me, void* buf, size_t n) {
  char* b = buf;
  while (n > 0) {
    ssize_t k = read(p->fds[me][0], b, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Copy between the test and FIFO memory, wherever the FIFO lives. */
static void fifo_copy(int on_device, void* dst, const void* src, size_t n) {
  if (on_device)
    braid_device()->memcpy_sync(dst, src, n);
  else
    memcpy(dst, src, n);
}

#define PATTERN_BYTES 4096
static unsigned char pattern_byte(size_t i) {
  return (unsigned char)(i * 7 + 3);
}

/* One end of the test connection, as connect.c would build it. */
struct end {
  struct braid_peer_info peers[2];
  struct braid_transport_ctx ctx;
  struct braid_connector c;
  const struct braid_transport* t;
};

/* Rank `me` (device dev, -1 host) builds its end of the rank 0 -> rank 1 connection: peer
 * infos, pick (must be p->transport), setup, blobs, connect, and connect.c's acknowledgement.
 * NULL on success, else what failed (the library's last error is in ncclGetLastError). */
static const char* end_connect(struct pair* p, int me, int dev, struct end* e) {
  int other = 1 - me, is_send = me == 0;
  struct braid_connect_blob mine, theirs;
  char ack = 1;
  memset(e, 0, sizeof(*e));
  if (dev >= 0) braid_device()->set_current(dev);
  peer_make(&e->peers[me], me, dev);
  if (pipe_send(p, other, &e->peers[me], sizeof(e->peers[me])) ||
      pipe_recv(p, me, &e->peers[other], sizeof(e->peers[other])))
    return "peer info exchange";
  ctx_make(&e->ctx, e->peers, me);
  e->t = pick(&e->ctx, other);
  if (e->t == NULL || strcmp(e->t->name, p->transport) != 0) return "pick (another transport than expected)";
  if ((is_send ? e->t->send_setup(&e->ctx, other, 3, &e->c, &mine)
               : e->t->recv_setup(&e->ctx, other, 3, &e->c, &mine)) != ncclSuccess)
    return "setup";
  if (pipe_send(p, other, &mine, sizeof(mine)) || pipe_recv(p, me, &theirs, sizeof(theirs))) return "blob exchange";
  if ((is_send ? e->t->send_connect(&e->ctx, &e->c, &theirs) : e->t->recv_connect(&e->ctx, &e->c, &theirs)) !=
      ncclSuccess)
    return "connect";
  e->c.connected = 1;
  if (is_send ? pipe_send(p, other, &ack, 1) : pipe_recv(p, me, &ack, 1)) return "acknowledgement";
  return NULL;
}

static void end_free(struct end* e) {
  if (e->ctx.rank == 0)
    e->t->send_free(&e->c);
  else
    e->t->recv_free(&e->c);
}

/* Rank 0 sends to rank 1 over one connection: pick, setup, blobs, connect, one slot of data
 * and tail = 1, which the receiver must find in its own FIFO. */
static int pair_body(struct harness_rank* r) {
  struct pair* p = r->arg;
  int me = r->rank, other = 1 - me, on_device = p->fake_gpus > 0, bad = 0;
  struct end e;
  char ack = 1;
  unsigned char buf[PATTERN_BYTES];
  if (on_device && braid_device() == NULL)
    return harness_fail(r, "BRAID_FAKE_GPU=%d but no device layer", p->fake_gpus);
  const char* failed = end_connect(p, me, on_device ? (p->shared_gpu ? 0 : me) : -1, &e);
  if (failed) return harness_fail(r, "%s failed (%s)", failed, ncclGetLastError(NULL));
  struct braid_conn* conn = &e.c.conn;
  if (me == 0) {
    const char* want = e.peers[0].pid_hash == e.peers[1].pid_hash ? p->desc_same : p->desc_other;
    if (strcmp(e.t->desc(&e.c), want) != 0) bad = harness_fail(r, "sender desc %s, expected %s", e.t->desc(&e.c), want);
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = pattern_byte(i);
    uint64_t one = 1, size = sizeof(buf);
    fifo_copy(on_device, conn->buff[BRAID_PROTO_SIMPLE], buf, sizeof(buf));
    fifo_copy(on_device, (void*)&conn->sizes[0], &size, sizeof(size));
    fifo_copy(on_device, (void*)conn->tail, &one, sizeof(one));
    if (pipe_send(p, other, &ack, 1) || pipe_recv(p, me, &ack, 1)) bad = harness_fail(r, "handshake failed");
  } else {
    uint64_t tail = 0, size = 0;
    if (pipe_recv(p, me, &ack, 1)) return harness_fail(r, "no word from the sender");
    fifo_copy(on_device, &tail, (const void*)conn->tail, sizeof(tail));
    fifo_copy(on_device, &size, (const void*)&conn->sizes[0], sizeof(size));
    fifo_copy(on_device, buf, conn->buff[BRAID_PROTO_SIMPLE], sizeof(buf));
    if (tail != 1 || size != sizeof(buf))
      bad = harness_fail(r, "tail %llu size %llu, expected 1 and %zu", (unsigned long long)tail,
                         (unsigned long long)size, sizeof(buf));
    for (size_t i = 0; i < sizeof(buf) && !bad; i++)
      if (buf[i] != pattern_byte(i)) bad = harness_fail(r, "byte %zu is %u, expected %u", i, buf[i], pattern_byte(i));
    if (conn->slot_bytes[BRAID_PROTO_SIMPLE] != FIFO_BYTES / BRAID_NSTEPS)
      bad = harness_fail(r, "slot bytes %u", conn->slot_bytes[BRAID_PROTO_SIMPLE]);
  }
  end_free(&e); /* the receiver first: the sender still holds its mapping */
  if (me == 1 && pipe_send(p, other, &ack, 1)) bad = harness_fail(r, "handshake failed");
  if (e.c.res != NULL) bad = harness_fail(r, "free left the connector's state");
  return bad;
}

static const struct pair pairs[] = {
    {.fake_gpus = 2, .transport = "P2P", .desc_same = "direct pointer", .desc_other = "IPC"},
    {.fake_gpus = 2, .shared_gpu = 1, .transport = "P2P", .desc_same = "direct pointer", .desc_other = "IPC"},
    /* host mode, one process: the receiver reads the sender's steps by pointer (BRAID_SHM_DIRECT
     * AUTO, transport/shm.c); two processes: these peer infos carry no probe word, so no CMA */
    {.fake_gpus = 0, .transport = "SHM", .desc_same = "direct pointer/read", .desc_other = "shared memory"},
};
static const char* const pair_names[] = {"two fake GPUs", "one fake GPU shared", "host mode"};

static void run_pair(struct pair* p, enum harness_mode mode) {
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pipe(p->fds[i]), 0);
  int failed = harness_run(2, mode, pair_body, p, HARNESS_TIMEOUT_S);
  for (int i = 0; i < 2; i++) close(p->fds[i][0]), close(p->fds[i][1]);
  ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
}

/* _i: pairs[i / 2], threads (even) or processes (odd). */
START_TEST(test_pair) {
  struct pair p = pairs[_i / 2];
  enum harness_mode mode = _i % 2 ? HARNESS_PROCS : HARNESS_THREADS;
  fprintf(stderr, "p2p_transport pair: %s, %s\n", pair_names[_i / 2], harness_mode_name(mode));
  set_env(p.fake_gpus, NULL, NULL);
  run_pair(&p, mode);
}
END_TEST

/* NCCL_P2P_DISABLE=1 (and a level that excludes the pair) leaves GPU pairs to shared memory,
 * registered with the device: both ends' pointers are the device's view ("direct/direct"). */
START_TEST(test_shm_on_device) {
  struct pair p = {.fake_gpus = 2, .transport = "SHM", .desc_same = "direct/direct", .desc_other = "direct/direct"};
  enum harness_mode mode = _i % 2 ? HARNESS_PROCS : HARNESS_THREADS;
  set_env(2, _i < 2 ? "1" : NULL, _i < 2 ? NULL : "NVB");
  run_pair(&p, mode);
}
END_TEST

/* ---- failures ------------------------------------------------------------------------------- */

/* A sender whose IPC import fails: an error (no crash), a WARN naming both ranks, nothing held. */
START_TEST(test_import_fails) {
  struct braid_peer_info peers[2];
  struct braid_transport_ctx t;
  struct braid_connector c;
  struct braid_connect_blob blob;
  set_env(2, NULL, NULL);
  peer_make(&peers[0], 0, 0);
  peer_make(&peers[1], 1, 1);
  peers[1].pid_hash ^= 1;
  ctx_make(&t, peers, 1);
  /* a real receiver's blob, its handle then spoiled, read by a sender in "another process" */
  memset(&c, 0, sizeof(c));
  ck_assert_int_eq(braid_transport_p2p.recv_setup(&t, 0, 0, &c, &blob), ncclSuccess);
  braid_transport_p2p.recv_free(&c); /* the allocation behind the handle is gone */
  ck_assert_ptr_null(c.res);
  struct braid_connector s;
  memset(&s, 0, sizeof(s));
  ctx_make(&t, peers, 0);
  ncclResult_t res = braid_transport_p2p.send_connect(&t, &s, &blob);
  ck_assert_int_ne(res, ncclSuccess);
  ck_assert_ptr_null(s.res);
  const char* warn = ncclGetLastError(NULL);
  ck_assert_msg(strstr(warn, "Rank 0 (CUDA device 0") && strstr(warn, "receive buffer of rank 1 (CUDA device 1") &&
                    strstr(warn, "NCCL_P2P_DISABLE=1"),
                "WARN was: %s", warn);
  braid_transport_p2p.send_free(&s); /* nothing held: no-op */
}
END_TEST

/* The peer chose another transport (different settings on two processes): refused, clearly. */
START_TEST(test_peer_chose_other) {
  struct braid_peer_info peers[2];
  struct braid_transport_ctx t;
  struct braid_connector c;
  struct braid_connect_blob blob;
  set_env(2, NULL, NULL);
  peer_make(&peers[0], 0, 0);
  peer_make(&peers[1], 1, 1);
  ctx_make(&t, peers, 0);
  memset(&blob, 0, sizeof(blob));
  memset(&c, 0, sizeof(c));
  ck_assert_int_eq(braid_transport_p2p.send_connect(&t, &c, &blob), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "chose another transport"));
  ck_assert_int_eq(braid_transport_p2p.recv_connect(&t, &c, &blob), ncclInvalidUsage);
  ck_assert_ptr_null(c.res);
}
END_TEST

/* Frees of connectors that never got far: zeroed, set up but never connected. */
START_TEST(test_free_half_built) {
  struct braid_peer_info peers[2];
  struct braid_transport_ctx t;
  struct braid_connector c;
  struct braid_connect_blob blob;
  set_env(2, _i ? "1" : NULL, NULL); /* P2P, then SHM on the device */
  const struct braid_transport* tr = _i ? &braid_transport_shm : &braid_transport_p2p;
  peer_make(&peers[0], 0, 0);
  peer_make(&peers[1], 1, 1);
  ctx_make(&t, peers, 1);
  memset(&c, 0, sizeof(c));
  tr->send_free(&c);
  tr->recv_free(&c);
  for (int same = 0; same < 2; same++) {
    peers[0].pid_hash = same ? peers[1].pid_hash : peers[1].pid_hash ^ 1;
    ck_assert_int_eq(tr->recv_setup(&t, 0, same, &c, &blob), ncclSuccess);
    ck_assert_ptr_nonnull(c.res);
    tr->recv_free(&c);
    ck_assert_ptr_null(c.res);
    ck_assert_int_eq(tr->send_setup(&t, 0, same, &c, &blob), ncclSuccess);
    tr->send_free(&c);
    ck_assert_ptr_null(c.res);
  }
}
END_TEST

/* kill -9 of one end once the connection is up: the survivor frees its end without harm. */
struct kill_arg {
  struct pair p;
  int victim; /* rank killed once connected */
};

/* A killed process's fake device memory stays in /dev/shm (a real GPU frees it with the
 * process): the test removes it, so runs leave nothing behind. */
static void fake_segments_remove(pid_t pid) {
  char prefix[64], path[512];
  snprintf(prefix, sizeof(prefix), "braid-fakegpu-%d-", (int)pid);
  DIR* dir = opendir("/dev/shm");
  if (dir == NULL) return;
  for (struct dirent* e; (e = readdir(dir)) != NULL;) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
    unlink(path);
  }
  closedir(dir);
}

/* One end, up to connected. The victim then says so and waits to be killed; the survivor
 * kills it (`victim_pid`), reaps it and frees its own end. Returns 0, or the step that failed. */
static int kill_end(struct kill_arg* k, int me, pid_t victim_pid) {
  struct end e;
  char ack = 1;
  int status;
  if (end_connect(&k->p, me, me, &e) != NULL) return 1;
  if (me == k->victim) {
    pipe_send(&k->p, 1 - me, &ack, 1); /* connected: kill me */
    for (;;) pause();
  }
  if (pipe_recv(&k->p, me, &ack, 1)) return 2;
  kill(victim_pid, SIGKILL);
  if (waitpid(victim_pid, &status, 0) != victim_pid || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) return 3;
  fake_segments_remove(victim_pid);
  end_free(&e);
  return e.c.res != NULL ? 4 : 0;
}

/* _i: P2P (0, 1) or SHM on the device (2, 3); the receiver (even) or the sender (odd) dies. */
START_TEST(test_kill_peer) {
  struct kill_arg k = {.p = {.fake_gpus = 2, .transport = _i < 2 ? "P2P" : "SHM"}, .victim = _i % 2 ? 0 : 1};
  set_env(2, _i < 2 ? NULL : "1", NULL);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pipe(k.p.fds[i]), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(HARNESS_TIMEOUT_S);
    _exit(kill_end(&k, k.victim, 0));
  }
  int step = kill_end(&k, 1 - k.victim, pid);
  if (step != 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
  ck_assert_msg(step == 0, "the survivor failed at step %d (%s)", step, ncclGetLastError(NULL));
  for (int i = 0; i < 2; i++) close(k.p.fds[i][0]), close(k.p.fds[i][1]);
}
END_TEST

/* ---- through the public API ----------------------------------------------------------------- */

static char tmpdir[256];

static int rm_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void tmp_make(void) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/braid-p2pt-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmp_remove(void) {
  nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* All log files of the ranks (NCCL_DEBUG_FILE=<tmpdir>/log.%p), concatenated. */
static char* logs_read(void) {
  size_t cap = 1 << 20, len = 0;
  char* text = calloc(1, cap);
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "cat %s/log.* 2>/dev/null", tmpdir);
  FILE* f = popen(cmd, "r");
  if (f != NULL) {
    len = fread(text, 1, cap - 1, f);
    pclose(f);
  }
  text[len] = '\0';
  return text;
}

static int flag_exists(const char* name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  return access(path, F_OK) == 0;
}

static void flag_set(const char* name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
}

#define COUNT 4096

/* A device communicator per rank (fake GPU `rank`), an all-reduce of float sums. A rank whose
 * communicator comes up in host mode marks "host-mode" and stops: the binding is not there. */
static int api_body(struct harness_rank* r) {
  const struct braid_device_ops* d = braid_device();
  ncclComm_t comm;
  int dev = -1, bad = 0;
  if (d == NULL) return harness_fail(r, "no device layer with BRAID_FAKE_GPU set");
  d->set_current(r->rank);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclCommCuDevice(comm, &dev));
  if (dev < 0) {
    flag_set("host-mode");
    ncclCommDestroy(comm);
    return 0;
  }
  if (dev != r->rank) bad = harness_fail(r, "communicator on device %d, expected %d", dev, r->rank);
  float *buf = NULL, host[COUNT];
  RCHECK(r, ncclMemAlloc((void**)&buf, COUNT * sizeof(float)));
  for (int i = 0; i < COUNT; i++) host[i] = (float)(r->rank + 1) * (float)(i % 97);
  d->memcpy_sync(buf, host, sizeof(host));
  RCHECK(r, ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL));
  RCHECK(r, d->stream_sync(NULL));
  d->memcpy_sync(host, buf, sizeof(host));
  float scale = (float)(r->nranks * (r->nranks + 1) / 2);
  for (int i = 0; i < COUNT && !bad; i++)
    if (host[i] != scale * (float)(i % 97))
      bad = harness_fail(r, "element %d is %g, expected %g", i, host[i], scale * (float)(i % 97));
  ncclMemFree(buf);
  RCHECK(r, ncclCommDestroy(comm));
  return bad;
}

/* Ring connections of device communicators (one fake GPU per rank) and an all-reduce over
 * them: the INFO lines each case must show. */
struct api_case {
  int nranks;
  enum harness_mode mode;
  const char* p2p_disable;
  const char* want[2];
};
static const struct api_case api_cases[] = {
    {2, HARNESS_THREADS, NULL, {"via P2P/direct pointer", NULL}},
    {2, HARNESS_PROCS, NULL, {"via P2P/IPC", NULL}},
    {2, HARNESS_THREADS, "1", {"via SHM/direct/direct", NULL}},
    {2, HARNESS_PROCS, "1", {"via SHM/direct/direct", NULL}},
    {4, HARNESS_PAIRS, NULL, {"via P2P/direct pointer", "via P2P/IPC"}},
};

START_TEST(test_api_ring) {
  const struct api_case* k = &api_cases[_i];
  tmp_make();
  char log[512];
  snprintf(log, sizeof(log), "%s/log.%%p", tmpdir);
  set_env(k->nranks, k->p2p_disable, NULL);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  ncclResetDebugInit();
  braid_device_reset();
  int failed = harness_run(k->nranks, k->mode, api_body, NULL, HARNESS_TIMEOUT_S);
  char* text = logs_read();
  if (flag_exists("host-mode")) {
    fprintf(stderr,
            "p2p_transport api_ring (%d ranks, %s): NOT RUN: with BRAID_FAKE_GPU=%d the communicator came "
            "up in host mode (init.c binds no device); P2P through the API unchecked\n",
            k->nranks, harness_mode_name(k->mode), k->nranks);
  } else {
    ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
    for (int w = 0; w < 2 && k->want[w]; w++)
      ck_assert_msg(strstr(text, k->want[w]) != NULL, "no \"%s\" in the logs:\n%s", k->want[w], text);
    const char* line = strstr(text, "Channel 00/0 : 0[0] -> ");
    ck_assert_msg(line != NULL, "no \"Channel 00/0 : 0[0] -> \" in the logs:\n%s", text);
    fprintf(stderr, "p2p_transport api_ring (%d ranks, %s%s): %.*s\n", k->nranks, harness_mode_name(k->mode),
            k->p2p_disable ? ", NCCL_P2P_DISABLE=1" : "", (int)strcspn(line, "\n"), line);
  }
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG");
  free(text);
  tmp_remove();
}
END_TEST

/* Rank 0 in host mode, rank 1 on a fake GPU (processes): init fails on both with an error
 * that says so, instead of a hang or a corrupt FIFO. */
static int mixed_body(struct harness_rank* r) {
  ncclComm_t comm;
  if (r->rank == 0) setenv("BRAID_HOST_MODE", "1", 1);
  braid_device_reset();
  const struct braid_device_ops* d = braid_device();
  if (d != NULL) d->set_current(0);
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (res == ncclSuccess) {
    int dev = -1;
    ncclCommCuDevice(comm, &dev);
    if (r->rank == 1 && dev < 0) flag_set("host-mode");
    ncclCommDestroy(comm);
    return flag_exists("host-mode") ? 0 : harness_fail(r, "init of a mixed host/device communicator succeeded");
  }
  const char* why = ncclGetLastError(NULL);
  if (strstr(why, "host mode") == NULL && strstr(why, "host-mode") == NULL)
    return harness_fail(r, "init failed (%s) but the error does not say why: %s", ncclGetErrorString(res), why);
  return 0;
}

START_TEST(test_api_mixed) {
  tmp_make();
  set_env(1, NULL, NULL);
  setenv("BRAID_TIMEOUT", "20", 1);
  int failed = harness_run(2, HARNESS_PROCS, mixed_body, NULL, HARNESS_TIMEOUT_S);
  if (flag_exists("host-mode"))
    fprintf(stderr,
            "p2p_transport api_mixed: NOT RUN: the fake-GPU rank came up in host mode (init.c binds no "
            "device yet)\n");
  else
    ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
  unsetenv("BRAID_TIMEOUT");
  tmp_remove();
}
END_TEST

Suite* p2p_transport_suite(void) {
  Suite* s = suite_create("p2p_transport");
  TCase* tc = tcase_create("can_connect");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_can_connect);
  tcase_add_test(tc, test_can_connect_topo);
  tcase_add_test(tc, test_mixed_refused);
  suite_add_tcase(s, tc);

  tc = tcase_create("pair");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_pair, 0, 2 * (int)(sizeof(pairs) / sizeof(pairs[0])));
  tcase_add_loop_test(tc, test_shm_on_device, 0, 4);
  suite_add_tcase(s, tc);

  tc = tcase_create("failures");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_import_fails);
  tcase_add_test(tc, test_peer_chose_other);
  tcase_add_loop_test(tc, test_free_half_built, 0, 2);
  tcase_add_loop_test(tc, test_kill_peer, 0, 4);
  suite_add_tcase(s, tc);

  tc = tcase_create("api");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_loop_test(tc, test_api_ring, 0, (int)(sizeof(api_cases) / sizeof(api_cases[0])));
  tcase_add_test(tc, test_api_mixed);
  suite_add_tcase(s, tc);
  return s;
}
