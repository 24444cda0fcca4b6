/*
 * test_plan_model.c - the layout model behind braid-plan (tools/lib/plan_model.c): the textbook
 * cases computed by the model's own functions (a 100 MB TP all-reduce on 8 GPUs over
 * NVLink 5 and over InfiniBand NDR, ring vs tree for N = 32, TP placement on 8 x 8 and the
 * TP 16 vs TP 8 ranking on 128 GPUs), MoE and pipeline warnings, the tuner path on the
 * DGX H100 fixture, and bad input.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "plan_coll.h"
#include "plan_model.h"

/* A 70B-class dense model (Llama 2/3 70B shape). */
static struct braid_plan_model dense70b(void) {
  struct braid_plan_model m = {80, 8192, 4096, 1, 8, 2, 70e9, 0, 0, 28672, 0, 400, 80};
  return m;
}

static int find(const struct braid_plan_result* r, const char* what) {
  for (int i = 0; i < r->nitems; i++)
    if (strcmp(r->items[i].what, what) == 0) return i;
  return -1;
}

/* 100 MB all-reduce on 8 GPUs: 175 MB per GPU; 0.097 ms at 1,800 GB/s, 3.5 ms at 50 GB/s;
 * x 80 layers 7.8 ms vs 280 ms. Through the formulas and through the cluster model. */
START_TEST(textbook_tp_allreduce) {
  double S = 100e6, b = braid_plan_model_ring_bytes(BRAID_PLAN_ALLREDUCE, 8, S);
  ck_assert_double_eq_tol(b, 175e6, 1e-3);
  double nvl = braid_plan_model_time_us(0, 0, b, 1800), ib = braid_plan_model_time_us(0, 0, b, 50);
  ck_assert_double_eq_tol(nvl / 1e3, 0.0972, 1e-4);
  ck_assert_double_eq_tol(ib / 1e3, 3.5, 1e-9);
  ck_assert_double_eq_tol(80 * nvl / 1e3, 7.78, 0.01);
  ck_assert_double_eq_tol(80 * ib / 1e3, 280, 1e-6);

  struct braid_plan_cluster one, eight;
  struct braid_plan_item it;
  ck_assert_int_eq(braid_plan_model_cluster_init(1, 8, 8, 1800, 50, &one), ncclSuccess);
  ck_assert_int_eq(braid_plan_model_cluster_init(8, 1, 1, 1800, 50, &eight), ncclSuccess);
  one.nvl_lat_us = eight.net_lat_us = 0; /* the textbook figures are bandwidth only */
  memset(&it, 0, sizeof(it));
  ck_assert_int_eq(braid_plan_model_coll(&one, BRAID_PLAN_ALLREDUCE, 8, 1, S, &it), ncclSuccess);
  ck_assert_int_eq(it.network, 0);
  ck_assert_str_eq(it.algo, "Ring");
  ck_assert_double_eq_tol(it.bytes, 175e6, 1e-3);
  ck_assert_double_eq_tol(it.time_us, nvl, 1e-6);
  ck_assert_int_eq(braid_plan_model_coll(&eight, BRAID_PLAN_ALLREDUCE, 8, 1, S, &it), ncclSuccess);
  ck_assert_int_eq(it.network, 1);
  ck_assert_double_eq_tol(it.time_us, ib, 1e-6);
}
END_TEST

/* N = 32: ring 62 steps, tree 10; at 2 us per step 124 vs 20 us; 64 KB -> tree, 1 GB -> ring. */
START_TEST(textbook_ring_vs_tree) {
  ck_assert_int_eq(braid_plan_model_ring_steps(BRAID_PLAN_ALLREDUCE, 32), 62);
  ck_assert_int_eq(braid_plan_model_tree_steps(32), 10);
  ck_assert_double_eq_tol(braid_plan_model_time_us(62, 2, 0, 50), 124, 1e-9);
  ck_assert_double_eq_tol(braid_plan_model_time_us(10, 2, 0, 50), 20, 1e-9);
  double sizes[2] = {64 * 1024.0, 1024.0 * 1024 * 1024};
  const char* want[2] = {"Tree", "Ring"};
  struct braid_plan_cluster c;
  ck_assert_int_eq(braid_plan_model_cluster_init(32, 1, 1, 450, 50, &c), ncclSuccess);
  c.net_lat_us = 2;
  for (int i = 0; i < 2; i++) {
    double ring = braid_plan_model_time_us(62, 2, braid_plan_model_ring_bytes(BRAID_PLAN_ALLREDUCE, 32, sizes[i]), 50);
    double tree = braid_plan_model_time_us(10, 2, braid_plan_model_tree_bytes(32, sizes[i]), 50);
    ck_assert(i == 0 ? tree < ring : ring < tree);
    struct braid_plan_item it;
    memset(&it, 0, sizeof(it));
    ck_assert_int_eq(braid_plan_model_coll(&c, BRAID_PLAN_ALLREDUCE, 32, 1, sizes[i], &it), ncclSuccess);
    ck_assert_str_eq(it.algo, want[i]);
    ck_assert_double_eq_tol(it.time_us, fmin(ring, tree), 1e-6);
  }
}
END_TEST

/* 64 GPUs as 8 x 8: TP 8 x PP 4 x DP 2 keeps TP in the node; DP and PP cross the network. */
START_TEST(tp_inside_nodes) {
  struct braid_plan_cluster c;
  struct braid_plan_model m = dense70b();
  struct braid_plan_layout l = {8, 4, 2, 1};
  struct braid_plan_result r;
  ck_assert_int_eq(braid_plan_model_cluster_init(8, 8, 8, 450, 50, &c), ncclSuccess);
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &l, &r), ncclSuccess);
  int tp = find(&r, "TP"), pp = find(&r, "PP"), dp = find(&r, "DP");
  ck_assert(tp >= 0 && pp >= 0 && dp >= 0);
  ck_assert_int_eq(r.items[tp].network, 0);
  ck_assert_int_eq(r.items[tp].ppn, 8);
  ck_assert_int_eq(r.items[dp].network, 1);
  ck_assert_int_eq(r.items[pp].network, 1);
  ck_assert_int_eq(r.warn & BRAID_PLAN_WARN_TP_DOMAIN, 0);
  /* 4 all-reduces per layer per micro-batch, 20 layers per stage, 8 micro-batches. */
  ck_assert_double_eq_tol(r.items[tp].count, 4.0 * 20 * 8, 1e-9);
  ck_assert_double_eq_tol(r.bubble, 3.0 / 11.0, 1e-12);
  ck_assert(r.warn & BRAID_PLAN_WARN_BUBBLE);
  /* TP 16 on the same cluster leaves the node and says so. */
  struct braid_plan_layout l16 = {16, 4, 1, 1};
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &l16, &r), ncclSuccess);
  ck_assert_int_eq(r.items[find(&r, "TP")].network, 1);
  ck_assert(r.warn & BRAID_PLAN_WARN_TP_DOMAIN);
}
END_TEST

/* 128 GPUs (16 x 8): the search ranks the best TP 16 layout below the best TP 8 one. */
START_TEST(search_tp16_slower) {
  struct braid_plan_cluster c;
  struct braid_plan_model m = dense70b();
  struct braid_plan_result* rs = NULL;
  int n = 0, best8 = -1, best16 = -1;
  ck_assert_int_eq(braid_plan_model_cluster_init(16, 8, 8, 450, 50, &c), ncclSuccess);
  ck_assert_int_eq(braid_plan_model_search(&c, &m, &rs, &n), ncclSuccess);
  ck_assert_int_gt(n, 0);
  for (int i = 0; i < n; i++) {
    if (rs[i].layout.tp == 8 && best8 < 0) best8 = i;
    if (rs[i].layout.tp == 16 && best16 < 0) best16 = i;
    ck_assert_int_eq(rs[i].layout.tp * rs[i].layout.pp * rs[i].layout.dp, 128);
    if (i > 0 && !(rs[i].warn & BRAID_PLAN_WARN_MEMORY) == !(rs[i - 1].warn & BRAID_PLAN_WARN_MEMORY))
      ck_assert(rs[i - 1].total_us <= rs[i].total_us);
  }
  ck_assert(best8 >= 0 && best16 >= 0);
  ck_assert_int_lt(best8, best16);
  ck_assert(rs[best8].total_us < rs[best16].total_us);
  /* The same pipeline depth, the TP part alone: TP 16 costs more per layer. */
  struct braid_plan_layout a = {8, 8, 2, 1}, b = {16, 8, 1, 1};
  struct braid_plan_result ra, rb;
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &a, &ra), ncclSuccess);
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &b, &rb), ncclSuccess);
  ck_assert(rb.items[find(&rb, "TP")].time_us > ra.items[find(&ra, "TP")].time_us);
  free(rs);
}
END_TEST

/* MoE: EP within a node is NVLink, EP 16 crosses nodes and warns; expert gradients reduce
 * over DP / EP. */
START_TEST(moe_expert_parallel) {
  struct braid_plan_cluster c;
  struct braid_plan_model m = {56, 6144, 4096, 1, 8, 2, 141e9, 16, 2, 16384, 0, 400, 80};
  struct braid_plan_result r;
  ck_assert_int_eq(braid_plan_model_cluster_init(16, 8, 8, 450, 50, &c), ncclSuccess);
  struct braid_plan_layout in = {1, 8, 16, 8}, out = {1, 8, 16, 16};
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &in, &r), ncclSuccess);
  int ep = find(&r, "EP"), dx = find(&r, "DP-expert");
  ck_assert(ep >= 0 && dx >= 0);
  ck_assert_int_eq(r.items[ep].network, 0);
  ck_assert_int_eq(r.items[ep].coll, BRAID_PLAN_ALLTOALL);
  ck_assert_double_eq_tol(r.items[ep].bytes, 7.0 / 8 * r.items[ep].size, 1e-3);
  ck_assert_int_eq(r.items[dx].group, 2);
  ck_assert_int_eq(r.warn & BRAID_PLAN_WARN_EP_NETWORK, 0);
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &out, &r), ncclSuccess);
  ck_assert_int_eq(r.items[find(&r, "EP")].network, 1);
  ck_assert(r.warn & BRAID_PLAN_WARN_EP_NETWORK);
  ck_assert_int_eq(find(&r, "DP-expert"), -1); /* DP / EP = 1: nothing to reduce */
}
END_TEST

/* DP that cannot hide: a tiny compute window; ZeRO 1 replaces the all-reduce by RS + AG. */
START_TEST(dp_overlap_and_zero) {
  struct braid_plan_cluster c;
  struct braid_plan_model m = dense70b();
  struct braid_plan_layout l = {8, 1, 16, 1};
  struct braid_plan_result r;
  ck_assert_int_eq(braid_plan_model_cluster_init(16, 8, 8, 450, 50, &c), ncclSuccess);
  m.tflops = 1e6;
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &l, &r), ncclSuccess);
  ck_assert(r.warn & BRAID_PLAN_WARN_DP_EXPOSED);
  ck_assert_int_eq(r.items[find(&r, "DP")].coll, BRAID_PLAN_ALLREDUCE);
  double ar = r.dp_us;
  m.tflops = 1;
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &l, &r), ncclSuccess);
  ck_assert_int_eq(r.warn & BRAID_PLAN_WARN_DP_EXPOSED, 0);
  m.zero = 1;
  ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &l, &r), ncclSuccess);
  int rs = find(&r, "DP");
  ck_assert_int_eq(r.items[rs].coll, BRAID_PLAN_REDUCESCATTER);
  ck_assert_int_eq(r.items[rs + 1].coll, BRAID_PLAN_ALLGATHER);
  /* RS + AG move what one ring all-reduce moves. */
  ck_assert_double_eq_tol(r.items[rs].bytes + r.items[rs + 1].bytes, 2.0 * 15 / 16 * r.items[rs].size, 1.0);
  ck_assert_double_eq_tol(r.dp_us, ar, ar * 0.01);
}
END_TEST

/* The tuner path: DGX H100 x 2; TP 8 inside the node priced by braid's tuner, TP 16 slower. */
START_TEST(xml_tuner) {
  struct braid_plan_cluster c;
  struct braid_plan_item a, b;
  ck_assert_int_eq(braid_plan_model_cluster_xml(test_fixture("dgx-h100.xml"), 2, &c), ncclSuccess);
  ck_assert_int_eq(c.gpus_per_node, 8);
  ck_assert_int_eq(c.nvl_domain, 8);
  ck_assert(c.nvl_bw > c.nic_bw);
  ck_assert_double_eq_tol(c.nic_bw, 50, 1e-6); /* 8 x 400 Gb/s over 8 GPUs */
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  ck_assert_int_eq(braid_plan_model_coll(&c, BRAID_PLAN_ALLREDUCE, 8, 1, 64e6, &a), ncclSuccess);
  ck_assert_int_eq(braid_plan_model_coll(&c, BRAID_PLAN_ALLREDUCE, 16, 1, 64e6, &b), ncclSuccess);
  ck_assert_int_eq(a.network, 0);
  ck_assert_int_eq(b.network, 1);
  ck_assert_ptr_nonnull(strchr(a.algo, '/')); /* "Ring/Simple": the tuner's choice */
  ck_assert(a.time_us > 0 && b.time_us > a.time_us);
  braid_plan_model_cluster_free(&c);
}
END_TEST

START_TEST(bad_input) {
  struct braid_plan_cluster c;
  struct braid_plan_model m = dense70b();
  struct braid_plan_result r;
  struct braid_plan_item it;
  const char* why = NULL;
  ck_assert_int_eq(braid_plan_model_cluster_init(0, 8, 8, 450, 50, &c), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_model_cluster_init(2, 8, 3, 450, 50, &c), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_model_cluster_init(2, 8, 8, 0, 50, &c), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_model_cluster_xml("/nonexistent.xml", 1, &c), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_model_cluster_init(2, 8, 8, 450, 50, &c), ncclSuccess);
  ck_assert_int_eq(braid_plan_model_coll(&c, BRAID_PLAN_ALLREDUCE, 0, 1, 1e6, &it), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_model_coll(&c, 99, 2, 1, 1e6, &it), ncclInvalidArgument);
  struct braid_plan_layout bad[] = {{8, 1, 1, 1}, {3, 1, 5, 1}, {1, 3, 5, 1}, {1, 1, 16, 2}, {0, 1, 16, 1}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ck_assert_int_eq(braid_plan_model_layout_valid(&c, &m, &bad[i], &why), 0);
    ck_assert_ptr_nonnull(why);
    ck_assert_int_eq(braid_plan_model_evaluate(&c, &m, &bad[i], &r), ncclInvalidArgument);
  }
  m.topk = 3;
  m.experts = 2;
  ck_assert_int_eq(braid_plan_model_check(&m), ncclInvalidArgument);
  m = dense70b();
  m.zero = 4;
  ck_assert_int_eq(braid_plan_model_check(&m), ncclInvalidArgument);
}
END_TEST

/* braid-plan --coll: issue 15's worked examples. */
START_TEST(coll_mode_examples) {
  struct braid_plan_coll_result r;
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 8, 100e6, 1800, 0, &r), ncclSuccess);
  ck_assert_double_eq_tol(r.ring.bytes, 175e6, 1);
  ck_assert_double_eq_tol(r.ring.transfer_us, 97.22, 0.01); /* 0.097 ms */
  ck_assert_double_eq_tol(r.ring.time_us * 80 / 1e3, 7.78, 0.01);
  ck_assert_double_eq_tol(r.ring.busbw, 1800, 1e-6); /* busbw is the link's, algbw less */
  ck_assert_double_eq_tol(r.ring.algbw, 1800 / 1.75, 1e-6);
  ck_assert_int_eq(r.pick_tree, 0);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 8, 100e6, 50, 0, &r), ncclSuccess);
  ck_assert_double_eq_tol(r.ring.transfer_us, 3500, 1e-6);
  ck_assert_double_eq_tol(r.ring.time_us * 80 / 1e3, 280, 1e-6);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 32, 64e3, 50, 2, &r), ncclSuccess);
  ck_assert_int_eq(r.ring.steps, 62);
  ck_assert_int_eq(r.tree.steps, 10);
  ck_assert_double_eq_tol(r.ring.step_us, 124, 1e-9);
  ck_assert_double_eq_tol(r.tree.step_us, 20, 1e-9);
  ck_assert_int_eq(r.pick_tree, 1); /* small: the steps decide */
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 32, 1e9, 50, 2, &r), ncclSuccess);
  ck_assert_int_eq(r.pick_tree, 0); /* large: the bytes decide */
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLGATHER, 8, 100e6, 50, 2, &r), ncclSuccess);
  ck_assert(!r.tree.valid);
  ck_assert_double_eq_tol(r.ring.bytes, 87.5e6, 1);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 8, 1e6, 0, 2, &r), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 0, 1e6, 50, 2, &r), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 8, 1e6, 50, -1, &r), ncclInvalidArgument);
  ck_assert_int_eq(braid_plan_coll_price(99, 8, 1e6, 50, 2, &r), ncclInvalidArgument);
}
END_TEST

/* The pieces the worked examples rest on, and the printers braid-plan --coll uses: NCCL's
 * bus-bandwidth factors, tree depth for a rank count that is no power of two, one rank, and
 * the step-vs-transfer table's rows (tests/plan/run.sh checks the same through the tool). */
START_TEST(coll_mode_parts) {
  ck_assert_double_eq_tol(braid_plan_coll_busbw_factor(BRAID_PLAN_ALLREDUCE, 8), 1.75, 1e-12);
  ck_assert_double_eq_tol(braid_plan_coll_busbw_factor(BRAID_PLAN_ALLGATHER, 8), 0.875, 1e-12);
  ck_assert_double_eq_tol(braid_plan_coll_busbw_factor(BRAID_PLAN_REDUCESCATTER, 4), 0.75, 1e-12);
  ck_assert_double_eq_tol(braid_plan_coll_busbw_factor(BRAID_PLAN_SENDRECV, 8), 1.0, 1e-12);
  ck_assert_double_eq_tol(braid_plan_coll_busbw_factor(BRAID_PLAN_ALLREDUCE, 1), 1.0, 1e-12);
  struct braid_plan_coll_result r;
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 24, 1e6, 100, 1, &r), ncclSuccess);
  ck_assert_int_eq(r.tree.steps, 10); /* ceil(log2 24) = 5 levels, up and down */
  ck_assert_int_eq(r.ring.steps, 46);
  ck_assert_double_eq_tol(r.tree.bytes, 2e6, 1e-6);
  ck_assert_double_eq_tol(r.ring.time_us, 46 + 2e6 * 23 / 24 / 1e5, 1e-9);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 1, 1e6, 100, 1, &r), ncclSuccess);
  ck_assert_int_eq(r.ring.steps, 0); /* one rank moves nothing */
  ck_assert_double_eq(r.ring.bytes, 0);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_SENDRECV, 8, 1e6, 50, 2, &r), ncclSuccess);
  ck_assert_int_eq(r.ring.steps, 1);
  ck_assert_double_eq_tol(r.ring.time_us, 2 + 20, 1e-9);
  ck_assert_double_eq_tol(r.ring.busbw, r.ring.algbw, 1e-12);
  ck_assert_int_eq(braid_plan_coll_price(BRAID_PLAN_ALLREDUCE, 8, NAN, 50, 2, &r), ncclInvalidArgument);

  char* buf = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  const double sizes[] = {64e3, 1e9};
  ck_assert_int_eq(braid_plan_coll_table(f, BRAID_PLAN_ALLREDUCE, 32, sizes, 2, 50, 2), ncclSuccess);
  ck_assert_int_eq(braid_plan_coll_table(f, BRAID_PLAN_ALLREDUCE, 32, sizes, 2, -1, 2), ncclInvalidArgument);
  fclose(f);
  ck_assert_ptr_nonnull(strstr(buf, "Tree  steps\n"));    /* 64 KB: the steps decide */
  ck_assert_ptr_nonnull(strstr(buf, "Ring  transfer\n")); /* 1 GB: the bytes decide */
  ck_assert_ptr_null(strstr(buf, "-1 GB/s"));             /* a refused table prints nothing */
  free(buf);
}
END_TEST

Suite* plan_model_suite(void) {
  Suite* s = suite_create("plan_model");
  TCase* tc = tcase_create("textbook");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, textbook_tp_allreduce);
  tcase_add_test(tc, textbook_ring_vs_tree);
  tcase_add_test(tc, coll_mode_examples);
  tcase_add_test(tc, coll_mode_parts);
  tcase_add_test(tc, tp_inside_nodes);
  tcase_add_test(tc, search_tp16_slower);
  suite_add_tcase(s, tc);
  tc = tcase_create("model");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, moe_expert_parallel);
  tcase_add_test(tc, dp_overlap_and_zero);
  tcase_add_test(tc, bad_input);
  suite_add_tcase(s, tc);
  tc = tcase_create("tuner");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, xml_tuner);
  suite_add_tcase(s, tc);
  return s;
}
