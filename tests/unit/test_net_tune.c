/*
 * test_net_tune.c - the network plugin's properties in the topology, the channels' NICs and
 * the tuner's network rows (transport/net/net_topo.h, topo_detect.c, topo_merge.c, tuner.c):
 *   props   detection with a plugin's device list: one NET node per device, the plugin's
 *           name, dev, speed, latency, port, guid, maxconn and gdr, sys->net_plugin set;
 *   file    NCCL_TOPO_FILE with a plugin's devices: a file <net> is matched by name (its own
 *           attributes win, dev becomes the plugin's), a file <net> no device names is
 *           dropped, a device the file lacks joins it; without latency in the file the
 *           plugin's latency is taken;
 *   tuner   the tuner's inter-node rows follow the plugin: host mode over 4 nodes, a ring's
 *           latency grows by 6 x the plugin's latency (at 8 B and at 4 MiB, where more channel
 *           threads slow the steps but not the wire) and a tree's by 4 x, so the
 *           ring/tree crossover moves (at the L=0 crossover size the tree now wins), and a
 *           slower NIC makes large sizes slower; GPUs (dgx-h100 over 2 nodes): Simple pays the
 *           latency twice per network step (NCCL's flush term), LL once;
 *   ringnic 2 ranks on 2 fake nodes over a plugin ("Tuned", Socket underneath) with a slow
 *           device 0 and a fast device 1: the topology's NICs are the plugin's, the ring
 *           search puts channel 0 on the fast NIC, the ring's connections use that device
 *           (before this, channel 0 used device 0), the graph's latency is the plugin's, and
 *           the all-reduce is right;
 *   select  the same choice end to end (init chooses before detection): 2 fake nodes with an
 *           emulated HCA, NCCL_NET unset: the topology's NICs and the ring connections are
 *           IB's; NCCL_IB_DISABLE=1: Socket's.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "fixture.h"
#include "harness.h"
#include "ibemu_fixture.h"
#include "net_fixture.h"
#include "topo/graph.h"
#include "topo/topo.h"
#include "topo/tuner.h"
#include "transport/net/net.h"
#include "transport/net/net_internal.h"

static const struct braid_topo_node* nic_named(const struct braid_topo_system* s, const char* name) {
  for (int i = 0; i < s->nnics; i++)
    if (strcmp(s->nodes[s->nics[i]].name, name) == 0) return &s->nodes[s->nics[i]];
  return NULL;
}

static struct braid_topo_net_dev mkdev(const char* name, int speed, float lat, int port, uint64_t guid) {
  struct braid_topo_net_dev d = {.speed = speed, .latency = lat, .port = port, .guid = guid, .max_comms = 1024};
  snprintf(d.name, sizeof(d.name), "%s", name);
  return d;
}

/* The local machine (no GPU, no NVML) with the plugin's devices as its NICs. */
static struct braid_topo_system* detect_with(const struct braid_topo_net_dev* devs, int n) {
  struct braid_topo_nets nets = {"Tuned", n, devs};
  struct braid_topo_detect_opts o = {.ngpus = 0, .no_nvml = 1, .nets = &nets};
  struct braid_topo_system* s = NULL;
  ck_assert_int_eq(braid_topo_detect_ex(&o, &s), ncclSuccess);
  return s;
}

START_TEST(test_props) {
  struct braid_topo_net_dev devs[2] = {mkdev("tn0", 100000, 7.5f, 1, 0x10), mkdev("tn1", -1, 0, 2, 0x10)};
  devs[0].gdr = 1;
  struct braid_topo_system* s = detect_with(devs, 2);
  ck_assert_str_eq(s->net_plugin, "Tuned");
  ck_assert_int_eq(s->nnics, 2);
  const struct braid_topo_node *a = nic_named(s, "tn0"), *b = nic_named(s, "tn1");
  ck_assert(a != NULL && b != NULL);
  ck_assert_int_eq(a->dev, 0);
  ck_assert_int_eq(b->dev, 1);
  ck_assert_int_eq(a->speed, 100000);
  ck_assert_int_eq(b->speed, BRAID_TOPO_NET_SPEED_DEFAULT); /* -1: NCCL's 10 Gb/s */
  ck_assert(a->latency == 7.5f && b->latency == 0);
  ck_assert_int_eq(a->port, 1);
  ck_assert_int_eq(b->port, 2);
  ck_assert(a->guid == 0x10 && b->guid == 0x10);
  ck_assert_int_eq(a->maxconn, 1024);
  ck_assert_int_eq(a->gdr, 1);
  ck_assert_int_eq(b->gdr, 0);
  braid_topo_free(s);
  /* no network given: sysfs's guess, no plugin name */
  struct braid_topo_detect_opts o = {.ngpus = 0, .no_nvml = 1};
  ck_assert_int_eq(braid_topo_detect_ex(&o, &s), ncclSuccess);
  ck_assert_str_eq(s->net_plugin, "");
  braid_topo_free(s);
  /* a bad description is refused */
  struct braid_topo_nets bad = {"Tuned", 2, NULL};
  ck_assert_int_eq(braid_topo_detect_nets(&bad, &s), ncclInvalidArgument);
}
END_TEST

/* dgx-h100.xml, or a copy of it without latency attributes, as NCCL_TOPO_FILE. */
static const char* topo_file(int strip_latency) {
  static char path[128];
  if (!strip_latency) return test_fixture("dgx-h100.xml");
  snprintf(path, sizeof(path), "/tmp/braid-nettune-%d.xml", (int)getpid());
  FILE *in = fopen(test_fixture("dgx-h100.xml"), "r"), *out = fopen(path, "w");
  ck_assert(in != NULL && out != NULL);
  char line[1024];
  while (fgets(line, sizeof(line), in) != NULL) {
    char* l = strstr(line, " latency=\"0\"");
    if (l != NULL) memmove(l, l + 12, strlen(l + 12) + 1);
    fputs(line, out);
  }
  fclose(in);
  fclose(out);
  return path;
}

START_TEST(test_file) {
  struct braid_topo_net_dev devs[3] = {mkdev("mlx5_1", 200000, 3, 1, 0x1), mkdev("mlx5_0", 200000, 4, 1, 0x2),
                                       mkdev("extra0", 25000, 9, 1, 0x3)};
  struct braid_topo_nets nets = {"Tuned", 3, devs};
  struct braid_topo_system* s = NULL;
  setenv("NCCL_TOPO_FILE", topo_file(_i), 1);
  braid_param_reload();
  ck_assert_int_eq(braid_topo_detect_nets(&nets, &s), ncclSuccess);
  unsetenv("NCCL_TOPO_FILE");
  braid_param_reload();
  if (_i) unlink(topo_file(1));
  ck_assert_str_eq(s->net_plugin, "Tuned");
  ck_assert_int_eq(s->ngpus, 8);
  ck_assert_int_eq(s->nnics, 3); /* mlx5_2 .. mlx5_7: no device of the plugin, dropped */
  const struct braid_topo_node *m1 = nic_named(s, "mlx5_1"), *m0 = nic_named(s, "mlx5_0"), *x = nic_named(s, "extra0");
  ck_assert(m1 != NULL && m0 != NULL && x != NULL);
  ck_assert(nic_named(s, "mlx5_2") == NULL && nic_named(s, "mlx5_7") == NULL);
  ck_assert_int_eq(m1->dev, 0); /* the plugin's index, not the file's */
  ck_assert_int_eq(m0->dev, 1);
  ck_assert_int_eq(x->dev, 2);
  ck_assert_int_eq(m1->speed, 400000); /* the file's attributes win */
  ck_assert(m1->latency == (_i ? 3.0f : 0.0f));
  ck_assert(m0->latency == (_i ? 4.0f : 0.0f));
  ck_assert(x->speed == 25000 && x->latency == 9.0f); /* not in the file: all the plugin's */
  /* the file's place in the PCI tree is kept: GPU 0 sees mlx5_0 as in the file alone */
  struct braid_topo_system* f = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &f), ncclSuccess);
  const struct braid_topo_node* fm0 = nic_named(f, "mlx5_0");
  ck_assert(fm0 != NULL);
  ck_assert_int_eq(braid_topo_path(s, s->gpus[0], (int)(m0 - s->nodes))->type,
                   braid_topo_path(f, f->gpus[0], (int)(fm0 - f->nodes))->type);
  braid_topo_free(f);
  braid_topo_free(s);
}
END_TEST

/* A tuner over `nodes` x `ppn` ranks of system s (host mode when it has no GPU). */
static struct braid_tuner* tuner_for(const struct braid_topo_system* s, int nodes, int ppn,
                                     struct braid_channel_graph** g_p) {
  struct braid_topo_rank r[64];
  struct braid_channel_graph* g = NULL;
  struct braid_tuner* t = NULL;
  for (int i = 0; i < nodes * ppn; i++) {
    r[i] = (struct braid_topo_rank){i, (uint64_t)(i / ppn + 1), i / ppn, i % ppn, -1, -1};
    if (s->ngpus > 0) {
      r[i].cuda_dev = i % ppn;
      r[i].bus_id = s->nodes[s->gpus[i % ppn]].id;
    }
  }
  ck_assert_int_eq(braid_graph_compute(s, nodes * ppn, r, &g), ncclSuccess);
  ck_assert_int_eq(braid_tuner_init(g, nodes * ppn, nodes, &t), ncclSuccess);
  braid_tuner_set_log(t, 0);
  *g_p = g;
  return t;
}

static int choose_algo(const struct braid_tuner* t, size_t bytes) {
  struct braid_tuner_choice c;
  ck_assert_int_eq(braid_tuner_choose(t, BRAID_FUNC_AllReduce, bytes, &c), ncclSuccess);
  return c.algo;
}

START_TEST(test_tuner_host) {
  const int F = BRAID_FUNC_AllReduce, R = BRAID_ALGO_RING, T = BRAID_ALGO_TREE, S = BRAID_PROTO_SIMPLE;
  const float L = 200;
  struct braid_topo_net_dev d0 = mkdev("tn0", 10000, 0, 1, 1), dl = mkdev("tn0", 10000, L, 1, 1),
                            slow = mkdev("tn0", 1000, 0, 1, 1);
  struct braid_topo_system *s0 = detect_with(&d0, 1), *sl = detect_with(&dl, 1), *ss = detect_with(&slow, 1);
  struct braid_channel_graph *g0, *gl, *gs;
  struct braid_tuner *t0 = tuner_for(s0, 4, 1, &g0), *tl = tuner_for(sl, 4, 1, &gl), *ts = tuner_for(ss, 4, 1, &gs);
  ck_assert(g0->latency_inter == 0 && gl->latency_inter == L && gl->tree_latency_inter == L);
  /* 8 B: ring 2(nodes-1) = 6 network steps, tree 2 log2(nodes) = 4, each L more (host: once) */
  float dr = braid_tuner_predict(tl, F, R, S, 8) - braid_tuner_predict(t0, F, R, S, 8);
  float dt = braid_tuner_predict(tl, F, T, S, 8) - braid_tuner_predict(t0, F, T, S, 8);
  ck_assert_msg(dr > 6 * L - 0.5f && dr < 6 * L + 0.5f, "ring +%g us", (double)dr);
  ck_assert_msg(dt > 4 * L - 0.5f && dt < 4 * L + 0.5f, "tree +%g us", (double)dt);
  /* with more channel threads (host mode's steps slow down sharing cores) the wire's latency
   * stays the same */
  dr = braid_tuner_predict(tl, F, R, S, 4u << 20) - braid_tuner_predict(t0, F, R, S, 4u << 20);
  ck_assert_msg(dr > 6 * L - 0.5f && dr < 6 * L + 0.5f, "ring at 4 MiB +%g us", (double)dr);
  /* the crossover moves: where the ring starts winning with L = 0, the tree wins with L */
  size_t cross = 0;
  for (size_t b = 8; b <= (1u << 30) && cross == 0; b *= 2)
    if (choose_algo(t0, b) == R) cross = b;
  ck_assert(cross > 8);
  ck_assert_int_eq(choose_algo(tl, cross), T);
  /* bandwidth: a 1 Gb/s NIC is slower than a 10 Gb/s one for large sizes */
  ck_assert(gs->bw_inter < g0->bw_inter);
  ck_assert(braid_tuner_predict(ts, F, R, S, 64u << 20) > braid_tuner_predict(t0, F, R, S, 64u << 20));
  braid_tuner_free(t0), braid_tuner_free(tl), braid_tuner_free(ts);
  braid_graph_free(g0), braid_graph_free(gl), braid_graph_free(gs);
  braid_topo_free(s0), braid_topo_free(sl), braid_topo_free(ss);
}
END_TEST

/* GPUs: dgx-h100 without latency attributes, 4 of its 8 HCAs (the plugin's) reporting L, 2 nodes of 8 GPUs. */
START_TEST(test_tuner_gpu) {
  const int F = BRAID_FUNC_AllReduce, R = BRAID_ALGO_RING;
  const float L = 5;
  struct braid_topo_system* s[2];
  struct braid_channel_graph* g[2];
  struct braid_tuner* t[2];
  const char* path = topo_file(1);
  for (int k = 0; k < 2; k++) {
    struct braid_topo_net_dev devs[4];
    for (int i = 0; i < 4; i++) {
      char name[16];
      snprintf(name, sizeof(name), "mlx5_%d", i);
      devs[i] = mkdev(name, 400000, k ? L : 0, 1, 0x100 + (uint64_t)i);
    }
    struct braid_topo_nets nets = {"Tuned", 4, devs};
    setenv("NCCL_TOPO_FILE", path, 1);
    braid_param_reload();
    ck_assert_int_eq(braid_topo_detect_nets(&nets, &s[k]), ncclSuccess);
    t[k] = tuner_for(s[k], 2, 8, &g[k]);
  }
  unsetenv("NCCL_TOPO_FILE");
  braid_param_reload();
  unlink(path);
  ck_assert(g[1]->latency_inter == L);
  /* 2 network steps (all-reduce over 2 nodes): Simple +2 x 2L (the flush), LL +2L */
  float ds =
      braid_tuner_predict(t[1], F, R, BRAID_PROTO_SIMPLE, 8) - braid_tuner_predict(t[0], F, R, BRAID_PROTO_SIMPLE, 8);
  float dl = braid_tuner_predict(t[1], F, R, BRAID_PROTO_LL, 8) - braid_tuner_predict(t[0], F, R, BRAID_PROTO_LL, 8);
  ck_assert_msg(ds > 4 * L - 0.1f && ds < 4 * L + 0.1f, "Simple +%g us", (double)ds);
  ck_assert_msg(dl > 2 * L - 0.1f && dl < 2 * L + 0.1f, "LL +%g us", (double)dl);
  for (int k = 0; k < 2; k++) {
    braid_tuner_free(t[k]);
    braid_graph_free(g[k]);
    braid_topo_free(s[k]);
  }
}
END_TEST

/* ---- ringnic: a plugin with a slow and a fast device, Socket's device 0 underneath ---------- */

static struct braid_net_v1 tuned_net;
static ncclResult_t tuned_devices(int* ndev) {
  *ndev = 2;
  return ncclSuccess;
}
static ncclResult_t tuned_props(int dev, struct braid_net_props* p) {
  static const char* names[2] = {"tuned_slow", "tuned_fast"};
  if (dev < 0 || dev > 1) return ncclInvalidArgument;
  ncclResult_t res = braid_net_socket.getProperties(0, p);
  p->name = names[dev];
  p->pciPath = NULL;
  p->speed = dev ? 100000 : 1000;
  p->latency = dev ? 5.0f : 0;
  p->guid = 0x700 + (uint64_t)dev; /* two NICs: no shared bandwidth */
  return res;
}
static ncclResult_t tuned_listen(void* ctx, int dev, void* handle, void** comm) {
  (void)dev;
  return braid_net_socket.listen(ctx, 0, handle, comm);
}
static ncclResult_t tuned_connect(void* ctx, int dev, void* handle, void** comm) {
  (void)dev;
  return braid_net_socket.connect(ctx, 0, handle, comm);
}

static int body_ringnic(struct harness_rank* r) {
  ncclComm_t comm;
  int bad = 0;
  const size_t count = 4099;
  tuned_net = braid_net_socket;
  tuned_net.name = "Tuned";
  tuned_net.devices = tuned_devices;
  tuned_net.getProperties = tuned_props;
  tuned_net.listen = tuned_listen;
  tuned_net.connect = tuned_connect;
  net_fake_node(r, 1);
  RCHECK(r, braid_net_plugin_use(&tuned_net));
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  const struct braid_comm* c = braid_comm_of(comm);
  const struct braid_topo_system* s = c->topo;
  const struct braid_channel_graph* g = c->graph;
  REXPECT(r, strcmp(s->net_plugin, "Tuned") == 0 && s->nnics == 2, "topology NICs: %d of '%s'", s->nnics,
          s->net_plugin);
  int nic = g->net_send[r->rank];
  REXPECT(r, nic >= 0 && nic < s->nnics, "channel 0: no send NIC (%d)", nic);
  const struct braid_topo_node* n = &s->nodes[s->nics[nic]];
  REXPECT(r, strcmp(n->name, "tuned_fast") == 0 && n->dev == 1, "channel 0 sends through %s (dev %d)", n->name, n->dev);
  REXPECT(r, g->latency_inter == 5.0f, "graph latency %g", (double)g->latency_inter);
  const struct braid_connector* send = &c->channels[0].ring_send;
  const struct braid_connector* recv = &c->channels[0].ring_recv;
  REXPECT(r, send->res != NULL && recv->res != NULL, "ring connections not made");
  int sdev = ((const struct net_res*)send->res)->dev, rdev = ((const struct net_res*)recv->res)->dev;
  REXPECT(r, sdev == 1, "ring send uses device %d, the graph says 1", sdev);
  REXPECT(r, rdev == s->nodes[s->nics[g->net_recv[r->rank]]].dev, "ring receive uses device %d", rdev);
  int32_t* buf = net_ibuf(count);
  REXPECT(r, buf != NULL, "out of memory");
  for (size_t i = 0; i < count; i++) buf[i] = net_val(r->rank, i);
  RCHECK(r, ncclAllReduce(buf, buf, count, ncclInt32, ncclSum, comm, NULL));
  bad = net_check_vals(r, "AllReduce (Tuned)", count, buf, count, net_ex_sum, r->rank);
  free(buf);
  RCHECK(r, ncclCommDestroy(comm));
  return bad;
}

START_TEST(test_ringnic) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_ringnic, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

#if BRAID_IB_BUILT
static int body_select(struct harness_rank* r) {
  const char* want = r->arg;
  ncclComm_t comm;
  net_fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  const struct braid_comm* c = braid_comm_of(comm);
  const struct net_res* send = c->channels[0].ring_send.res;
  REXPECT(r, strcmp(c->topo->net_plugin, want) == 0, "topology NICs from '%s', expected %s", c->topo->net_plugin, want);
  REXPECT(r, want[0] != 'I' || (c->topo->nnics == 1 && strcmp(c->topo->nodes[c->topo->nics[0]].name, "mlx5_0") == 0),
          "IB topology: %d NICs", c->topo->nnics);
  REXPECT(r, send != NULL && strcmp(send->net->name, want) == 0, "ring send over %s, expected %s",
          send ? send->net->name : "nothing", want);
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_select) {
  ibemu_fixture_env("mlx5_0:1:ib", NULL);
  unsetenv("NCCL_NET");
  setenv("NCCL_IB_DISABLE", _i ? "1" : "0", 1);
  braid_param_reload();
  int failed = harness_run(2, HARNESS_PROCS, body_select, _i ? "Socket" : "IB", HARNESS_TIMEOUT_S);
  unsetenv("NCCL_IB_DISABLE");
  braid_param_reload();
  ck_assert_int_eq(failed, 0);
}
END_TEST
#endif

Suite* net_tune_suite(void) {
  Suite* s = suite_create("net_tune");
  TCase* tc = tcase_create("props");
  tcase_add_test(tc, test_props);
  tcase_add_loop_test(tc, test_file, 0, 2);
  suite_add_tcase(s, tc);
  tc = tcase_create("tuner");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_tuner_host);
  tcase_add_test(tc, test_tuner_gpu);
  suite_add_tcase(s, tc);
  tc = tcase_create("ringnic");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_test(tc, test_ringnic);
  suite_add_tcase(s, tc);
#if BRAID_IB_BUILT
  tc = tcase_create("select");
  tcase_set_timeout(tc, HARNESS_TIMEOUT_S + 10);
  tcase_add_loop_test(tc, test_select, 0, 2);
  suite_add_tcase(s, tc);
#else
  fprintf(stderr, "net_tune: select not built (no libibverbs headers): skipped\n");
#endif
  return s;
}
