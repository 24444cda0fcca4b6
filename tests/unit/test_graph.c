/*
 * test_graph.c - the channel search (src/graph*.c) on the fixtures of tests/topo, as one node
 * and as N copies of it, in GPU mode and host mode. For every channel: the ring is a
 * permutation that crosses each node boundary exactly once; no hop inside a node leaves
 * NVLink where the node has NVLink; each tree is a valid tree (one root, parents and children
 * agree, everything reachable) whose node-level part is binary, and every node is a leaf in
 * at least one of the two trees (but node 0 of an odd node count: NCCL's double tree then
 * shifts the second tree by one, and node 0 is inner in both); NICs are set where rings leave or enter a node. Plus the
 * channel-count variables, ranks sharing a GPU, and bad input.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "fixture.h"
#include "topo/graph.h"

static void env_reset(void) {
  const char* vars[] = {"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_CROSS_NIC",  "NCCL_P2P_LEVEL",
                        "NCCL_P2P_DISABLE",   "NCCL_PXN_DISABLE",   "NCCL_NVLS_ENABLE"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
  braid_param_reload();
}

/* nodes x ppn ranks, node-major; GPU mode uses the first ppn GPUs, host mode pseudo-GPUs. */
static struct braid_topo_rank* make_ranks(const struct braid_topo_system* sys, int nodes, int ppn, int host) {
  struct braid_topo_rank* r = calloc((size_t)(nodes * ppn), sizeof(*r));
  ck_assert_ptr_nonnull(r);
  for (int i = 0; i < nodes * ppn; i++) {
    r[i].rank = i;
    r[i].node = i / ppn;
    r[i].local_rank = i % ppn;
    r[i].host_hash = 0x100 + (uint64_t)(i / ppn);
    r[i].cuda_dev = host ? -1 : i % ppn;
    r[i].bus_id = host ? -1 : sys->nodes[sys->gpus[i % ppn]].id;
  }
  return r;
}

struct gcase {
  const char* xml;
  int nodes, ppn, host;
  int nvlink; /* the node has NVLink between all its GPUs */
};
static const struct gcase cases[] = {
    {"dgx-h100.xml", 1, 8, 0, 1},  {"dgx-h100.xml", 2, 8, 0, 1},  {"dgx-h100.xml", 16, 8, 0, 1},
    {"dgx-h100.xml", 3, 8, 0, 1},  {"dgx-h100.xml", 5, 1, 0, 1},  {"dgx-h100.xml", 4, 3, 0, 1},
    {"pcie-4gpu.xml", 1, 4, 0, 0}, {"pcie-4gpu.xml", 2, 4, 0, 0}, {"nvl72.xml", 1, 72, 0, 1},
    {"nvl72.xml", 2, 72, 0, 1},    {"cpu-only.xml", 1, 4, 1, 0},  {"cpu-only.xml", 3, 2, 1, 0},
    {"cpu-only.xml", 7, 1, 1, 0},  {"cpu-only.xml", 1, 1, 1, 0},  {"dgx-h100.xml", 2, 4, 1, 0},
};

/* Walk down from the root; returns how many ranks were reached. */
static int reach(const struct braid_channel_graph* g, int c, int r, int depth) {
  int n = 1;
  ck_assert_int_lt(depth, g->nranks + 1);
  for (int k = 0; k < 3; k++) {
    int d = braid_graph_tree(g, c, r)->down[k];
    if (d < 0) continue;
    ck_assert_int_eq(braid_graph_tree(g, c, d)->up, r);
    n += reach(g, c, d, depth + 1);
  }
  return n;
}

static void check_graph(const struct braid_topo_system* sys, const struct braid_topo_rank* ranks,
                        const struct braid_channel_graph* g, const struct gcase* k) {
  int n = g->nranks;
  ck_assert_int_eq(n, k->nodes * k->ppn);
  ck_assert_int_eq(g->nnodes, k->nodes);
  ck_assert_int_ge(g->nchannels, 1);
  ck_assert_int_le(g->nchannels, BRAID_MAX_CHANNELS);
  ck_assert_int_eq(g->host_mode, k->host);
  ck_assert(g->bw_intra > 0);
  int* seen = calloc((size_t)n, sizeof(int));
  int* leaf = calloc((size_t)k->nodes, sizeof(int));
  for (int c = 0; c < g->nchannels; c++) {
    const int* ring = &g->ring[c * n];
    memset(seen, 0, (size_t)n * sizeof(int));
    int crossings = 0;
    for (int i = 0; i < n; i++) {
      int a = ring[i], b = ring[(i + 1) % n];
      ck_assert(a >= 0 && a < n && !seen[a]);
      seen[a] = 1;
      ck_assert_int_eq(braid_graph_ring_next(g, c, a), b);
      ck_assert_int_eq(braid_graph_ring_prev(g, c, b), a);
      if (ranks[a].node != ranks[b].node) {
        crossings++;
        ck_assert_int_ge(g->net_dev[c * n + a], 0); /* the sender leaves through a NIC */
        ck_assert_int_ge(g->net_dev[c * n + b], 0); /* the receiver enters through one */
        ck_assert_int_lt(g->net_dev[c * n + a], g->nnics);
      } else if (k->nvlink && a != b) {
        int t = braid_topo_path(sys, sys->gpus[braid_topo_gpu_find(sys, ranks[a].bus_id)],
                                sys->gpus[braid_topo_gpu_find(sys, ranks[b].bus_id)])
                    ->type;
        ck_assert_int_le(t, BRAID_PATH_NVB);
      }
    }
    ck_assert_int_eq(crossings, k->nodes > 1 ? k->nodes : 0); /* one per node boundary */
    /* the tree */
    int root = -1, cross_children[64 * 16] = {0};
    for (int r = 0; r < n; r++) {
      const struct braid_tree_links* t = braid_graph_tree(g, c, r);
      if (t->up < 0) {
        ck_assert_int_eq(root, -1);
        root = r;
      }
      for (int d = 0; d < 3; d++) {
        int x = t->down[d];
        if (x < 0) continue;
        ck_assert_int_eq(braid_graph_tree(g, c, x)->up, r);
        if (ranks[x].node != ranks[r].node)
          cross_children[ranks[r].node]++;
        else if (k->nvlink) {
          int tt = braid_topo_path(sys, sys->gpus[braid_topo_gpu_find(sys, ranks[r].bus_id)],
                                   sys->gpus[braid_topo_gpu_find(sys, ranks[x].bus_id)])
                       ->type;
          ck_assert_int_le(tt, BRAID_PATH_NVB);
        }
      }
    }
    ck_assert_int_ge(root, 0);
    ck_assert_int_eq(reach(g, c, root, 0), n);
    for (int nd = 0; nd < k->nodes; nd++) {
      ck_assert_int_le(cross_children[nd], 2); /* binary over nodes */
      if (cross_children[nd] == 0) leaf[nd] |= 1 << g->tree_id[c];
    }
  }
  if (g->nchannels >= 2 * g->nrings && k->nodes > 1)
    for (int nd = (k->nodes & 1) ? 1 : 0; nd < k->nodes; nd++)
      ck_assert_msg(leaf[nd] != 0, "node %d is a leaf in no tree", nd);
  free(seen);
  free(leaf);
}

START_TEST(test_channels) {
  env_reset();
  const struct gcase* k = &cases[_i];
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture(k->xml), &sys), ncclSuccess);
  struct braid_topo_rank* ranks = make_ranks(sys, k->nodes, k->ppn, k->host);
  ck_assert_int_eq(braid_graph_compute(sys, k->nodes * k->ppn, ranks, &g), ncclSuccess);
  check_graph(sys, ranks, g, k);
  if (k->nvlink) ck_assert_int_le(g->type_intra, BRAID_PATH_NVB);
  braid_graph_log(g, 0, 0);
  braid_graph_free(g);
  free(ranks);
  braid_topo_free(sys);
}
END_TEST

/* Both trees over every node count: each node is a leaf in at least one. */
START_TEST(test_trees_all_sizes) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("cpu-only.xml"), &sys), ncclSuccess);
  for (int nodes = 1; nodes <= 40; nodes++) {
    struct gcase k = {"cpu-only.xml", nodes, 1, 1, 0};
    struct braid_channel_graph* g = NULL;
    struct braid_topo_rank* ranks = make_ranks(sys, nodes, 1, 1);
    ck_assert_int_eq(braid_graph_compute(sys, nodes, ranks, &g), ncclSuccess);
    check_graph(sys, ranks, g, &k);
    braid_graph_free(g);
    free(ranks);
  }
  braid_topo_free(sys);
}
END_TEST

START_TEST(test_expected_shapes) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  struct braid_topo_rank* ranks = make_ranks(sys, 2, 8, 0);
  ck_assert_int_eq(braid_graph_compute(sys, 16, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->type_intra, BRAID_PATH_NVL);
  /* NCCL's search on this box: PXN with one NIC per ring fits 7 channels at 48 GB/s (the
   * last GPU's hop to the first GPU's NIC is one more NVLink send), the crossNic retry (the
   * default NCCL_CROSS_NIC=2) 8, each ring leaving by its last GPU's own NIC */
  ck_assert_int_eq(g->cross_nic, 2);
  ck_assert_int_eq(g->type_inter, BRAID_PATH_PIX);
  ck_assert(g->nvls);
  ck_assert_int_eq(g->nchannels, 2 * g->nrings);
  for (int c = 0; c < g->nrings; c++) { /* the node's first GPU is next to the NIC it receives from */
    int head = g->ring[c * 16], nicd = g->net_dev[c * 16 + head];
    ck_assert_int_eq(braid_topo_path(sys, sys->gpus[head], sys->nics[nicd])->type, BRAID_PATH_PIX);
  }
  braid_graph_free(g);
  free(ranks);
  braid_topo_free(sys);
  /* the PCIe box: no NVLink; GPU pairs across sockets go through the CPUs */
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("pcie-4gpu.xml"), &sys), ncclSuccess);
  ranks = make_ranks(sys, 1, 4, 0);
  ck_assert_int_eq(braid_graph_compute(sys, 4, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->type_intra, BRAID_PATH_SYS);
  ck_assert(!g->nvls);
  braid_graph_free(g);
  free(ranks);
  braid_topo_free(sys);
}
END_TEST

START_TEST(test_channel_counts) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  struct braid_topo_rank* ranks = make_ranks(sys, 2, 8, 0);
  struct gcase k = {"dgx-h100.xml", 2, 8, 0, 1};
  setenv("NCCL_MAX_NCHANNELS", "4", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_graph_compute(sys, 16, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->nchannels, 4);
  check_graph(sys, ranks, g, &k);
  braid_graph_free(g);
  unsetenv("NCCL_MAX_NCHANNELS");
  setenv("NCCL_MIN_NCHANNELS", "64", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_graph_compute(sys, 16, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->nchannels, 64);
  check_graph(sys, ranks, g, &k);
  braid_graph_free(g);
  setenv("NCCL_MIN_NCHANNELS", "1000", 1); /* clamped */
  setenv("NCCL_MAX_NCHANNELS", "1", 1);    /* NCCL: max first, then min copies: channel 0, 64 times */
  braid_param_reload();
  ck_assert_int_eq(braid_graph_compute(sys, 16, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->nchannels, BRAID_MAX_CHANNELS);
  for (int c = 1; c < g->nchannels; c++) ck_assert_mem_eq(&g->ring[c * 16], &g->ring[0], 16 * sizeof(int));
  braid_graph_free(g);
  free(ranks);
  braid_topo_free(sys);
}
END_TEST

START_TEST(test_cross_nic) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  struct braid_topo_rank* ranks = make_ranks(sys, 2, 8, 0);
  struct gcase k = {"dgx-h100.xml", 2, 8, 0, 1};
  setenv("NCCL_CROSS_NIC", "1", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_graph_compute(sys, 16, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->cross_nic, 1);
  ck_assert_int_eq(g->type_inter, BRAID_PATH_PIX); /* both ends next to their own NIC */
  check_graph(sys, ranks, g, &k);
  braid_graph_free(g);
  setenv("NCCL_CROSS_NIC", "0", 1);
  setenv("NCCL_PXN_DISABLE", "1", 1); /* one NIC per ring, no PXN: the exit goes through the CPU */
  braid_param_reload();
  ck_assert_int_eq(braid_graph_compute(sys, 16, ranks, &g), ncclSuccess);
  ck_assert_int_eq(g->cross_nic, 0);
  ck_assert_int_ge(g->type_inter, BRAID_PATH_PHB);
  for (int c = 0; c < g->nrings; c++) {
    int head = g->ring[c * 16], last = g->ring[c * 16 + 7];
    ck_assert_int_eq(g->net_dev[c * 16 + head], g->net_dev[c * 16 + last]);
    ck_assert_int_eq(g->net_proxy[c * 16 + last], -1);
  }
  check_graph(sys, ranks, g, &k);
  braid_graph_free(g);
  free(ranks);
  braid_topo_free(sys);
}
END_TEST

START_TEST(test_bad_input) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  struct braid_topo_rank* r = make_ranks(sys, 2, 4, 0);
  ck_assert_int_eq(braid_graph_compute(NULL, 8, r, &g), ncclInvalidArgument);
  ck_assert_int_eq(braid_graph_compute(sys, 0, r, &g), ncclInvalidArgument);
  r[3].rank = 5;
  ck_assert_int_eq(braid_graph_compute(sys, 8, r, &g), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "ranks[3]"));
  r[3].rank = 3;
  r[2].local_rank = 1; /* taken twice */
  ck_assert_int_eq(braid_graph_compute(sys, 8, r, &g), ncclInvalidArgument);
  r[2].local_rank = 2;
  r[5].bus_id = -1; /* host mode mixed with GPUs */
  ck_assert_int_eq(braid_graph_compute(sys, 8, r, &g), ncclInvalidArgument);
  r[5].bus_id = r[4].bus_id;
  ck_assert_int_eq(braid_graph_compute(sys, 8, r, &g), ncclInvalidUsage); /* same GPU twice */
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "Duplicate GPU"));
  r[5].bus_id = r[1].bus_id;
  for (int i = 0; i < 8; i++) r[i].node = i < 4 ? 0 : 2; /* node 1 missing */
  ck_assert_int_eq(braid_graph_compute(sys, 8, r, &g), ncclInvalidArgument);
  ck_assert_ptr_null(g);
  free(r);
  braid_topo_free(sys);
}
END_TEST

/* Ranks sharing a GPU (BRAID_GPU_SHARING=1): the search's fallback channel, copied up to
 * 32 / (ranks per GPU) channels, under NCCL_MAX_NCHANNELS, priced as local memory at 20 GB/s a
 * channel; ranks on GPUs of their own keep the search's count. */
START_TEST(test_shared_gpu) {
  env_reset();
  setenv("BRAID_GPU_SHARING", "1", 1);
  braid_param_reload();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  static const int want[] = {0, 0, 16, 0, 8};
  for (int n = 2; n <= 4; n += 2) {
    struct braid_topo_rank* r = make_ranks(sys, 1, n, 0);
    struct gcase k = {"dgx-h100.xml", 1, n, 0, 0};
    for (int i = 1; i < n; i++) r[i].bus_id = r[0].bus_id;
    ck_assert_int_eq(braid_graph_compute(sys, n, r, &g), ncclSuccess);
    ck_assert_int_eq(g->nrings, 1);
    ck_assert_int_eq(g->nchannels, want[n]);
    ck_assert_int_eq(g->type_intra, BRAID_PATH_LOC); /* priced as the GPU's own memory, not SYS at 0.1 GB/s */
    ck_assert_float_eq_tol(g->bw_intra, 20.0f * (float)want[n], 1e-3f);
    check_graph(sys, r, g, &k);
    for (int c = 1; c < g->nchannels; c++) ck_assert_mem_eq(&g->ring[c * n], &g->ring[0], n * sizeof(int));
    braid_graph_free(g);
    setenv("NCCL_MAX_NCHANNELS", "4", 1);
    braid_param_reload();
    ck_assert_int_eq(braid_graph_compute(sys, n, r, &g), ncclSuccess);
    ck_assert_int_eq(g->nchannels, 4);
    braid_graph_free(g);
    unsetenv("NCCL_MAX_NCHANNELS");
    braid_param_reload();
    for (int i = 1; i < n; i++) r[i].bus_id = sys->nodes[sys->gpus[i]].id; /* a GPU each: the search's */
    ck_assert_int_eq(braid_graph_compute(sys, n, r, &g), ncclSuccess);
    ck_assert_int_eq(g->nchannels, 2 * g->nrings);
    ck_assert_int_gt(g->nrings, 1);
    braid_graph_free(g);
    free(r);
  }
  unsetenv("BRAID_GPU_SHARING");
  braid_param_reload();
  braid_topo_free(sys);
}
END_TEST

/* A node whose GPUs are not in the local system (heterogeneous cluster) still gets rings. */
START_TEST(test_unknown_gpus) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  struct braid_topo_rank* r = make_ranks(sys, 2, 2, 0);
  r[2].bus_id = 0x77000;
  r[3].bus_id = 0x78000;
  ck_assert_int_eq(braid_graph_compute(sys, 4, r, &g), ncclSuccess);
  ck_assert_int_eq(g->nrings, 1);
  ck_assert_float_eq_tol(g->bw_inter, 0.1f, 1e-6f);
  braid_graph_free(g);
  free(r);
  braid_topo_free(sys);
}
END_TEST

/* The two halves init uses across machines give what compute gives on one. */
START_TEST(test_node_search_and_build) {
  env_reset();
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph *a = NULL, *b = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("dgx-h100.xml"), &sys), ncclSuccess);
  struct braid_topo_rank* r = make_ranks(sys, 3, 8, 0);
  struct braid_graph_node_info* infos = calloc(3, sizeof(*infos));
  ck_assert_int_eq(braid_graph_compute(sys, 24, r, &a), ncclSuccess);
  for (int k = 0; k < 3; k++) ck_assert_int_eq(braid_graph_node_search(sys, 24, r, k, &infos[k]), ncclSuccess);
  ck_assert_int_eq(braid_graph_build(24, r, infos, &b), ncclSuccess);
  ck_assert_int_eq(a->nchannels, b->nchannels);
  ck_assert_mem_eq(a->ring, b->ring, (size_t)a->nchannels * 24 * sizeof(int));
  ck_assert_mem_eq(a->tree, b->tree, (size_t)a->nchannels * 24 * sizeof(struct braid_tree_links));
  ck_assert_mem_eq(a->net_dev, b->net_dev, (size_t)a->nchannels * 24 * sizeof(int));
  braid_graph_free(b);
  /* an info that came over the network damaged */
  infos[1].ring.order[0][3] = infos[1].ring.order[0][4];
  ck_assert_int_eq(braid_graph_build(24, r, infos, &b), ncclInvalidArgument);
  infos[1].ring.order[0][3] = 200;
  ck_assert_int_eq(braid_graph_build(24, r, infos, &b), ncclInvalidArgument);
  ck_assert_int_eq(braid_graph_node_search(sys, 24, r, 3, &infos[0]), ncclInvalidArgument);
  braid_graph_free(a);
  free(infos);
  free(r);
  braid_topo_free(sys);
}
END_TEST

/* Host mode across two different machines (one and two NUMA nodes): each node's rings come
 * from its own search, and the assembled channels are valid. */
START_TEST(test_heterogeneous_hosts) {
  env_reset();
  struct braid_topo_system *one = NULL, *two = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("cpu-only.xml"), &one), ncclSuccess);
  ck_assert_int_eq(braid_topo_load_xml(test_fixture("pcie-4gpu.xml"), &two), ncclSuccess);
  struct braid_topo_rank* r = make_ranks(one, 2, 4, 1);
  struct braid_graph_node_info infos[2];
  ck_assert_int_eq(braid_graph_node_search(one, 8, r, 0, &infos[0]), ncclSuccess);
  ck_assert_int_eq(braid_graph_node_search(two, 8, r, 1, &infos[1]), ncclSuccess);
  ck_assert_int_eq(braid_graph_build(8, r, infos, &g), ncclSuccess);
  struct gcase k = {"cpu-only.xml", 2, 4, 1, 0};
  check_graph(one, r, g, &k);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(g->ring[4 + i], 4 + infos[1].ring.order[0][i]);
  braid_graph_free(g);
  free(r);
  braid_topo_free(one);
  braid_topo_free(two);
}
END_TEST

Suite* graph_suite(void) {
  Suite* s = suite_create("graph");
  TCase* tc = tcase_create("channels");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_channels, 0, sizeof(cases) / sizeof(cases[0]));
  tcase_add_test(tc, test_trees_all_sizes);
  tcase_add_test(tc, test_expected_shapes);
  suite_add_tcase(s, tc);
  tc = tcase_create("settings");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_channel_counts);
  tcase_add_test(tc, test_cross_nic);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_unknown_gpus);
  tcase_add_test(tc, test_shared_gpu);
  tcase_add_test(tc, test_node_search_and_build);
  tcase_add_test(tc, test_heterogeneous_hosts);
  suite_add_tcase(s, tc);
  return s;
}
