/*
 * test_tuner.c - the cost model (src/topo/tuner.c) and NCCL_ALGO / NCCL_PROTO (src/topo/tuner_env.c)
 * on the fixtures of tests/topo: tree for small and ring for large all-reduces on 16 DGX
 * nodes (crossover between 64 KiB and 1 GiB), ring LL -> LL128 -> Simple inside one node,
 * forced algorithms and protocols obeyed and visible in TUNING lines, model-only algorithms
 * never chosen, host mode (and its measured ring/tree crossover over 4 fake nodes), and the
 * parser's syntax and errors.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "fixture.h"
#include "topo/tuner.h"

static void env_reset(void) {
  const char* vars[] = {"NCCL_ALGO",      "NCCL_PROTO",          "NCCL_MIN_NCHANNELS",      "NCCL_MAX_NCHANNELS",
                        "NCCL_NTHREADS",  "NCCL_LL128_NTHREADS", "NCCL_NVLS_ENABLE",        "NCCL_PAT_ENABLE",
                        "NCCL_CROSS_NIC", "BRAID_LSA_VARIANT",   "BRAID_REDUCE_SPLIT_BYTES"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
  braid_param_reload();
}

/* A tuner for nodes x ppn ranks of a fixture (host: pseudo-GPUs). */
static ncclResult_t make_tuner(const char* xml, int nodes, int ppn, int host, struct braid_tuner** t_p,
                               struct braid_channel_graph** g_p) {
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(braid_topo_load_xml(test_fixture(xml), &sys), ncclSuccess);
  struct braid_topo_rank* r = calloc((size_t)(nodes * ppn), sizeof(*r));
  for (int i = 0; i < nodes * ppn; i++) {
    r[i].rank = i;
    r[i].node = i / ppn;
    r[i].local_rank = i % ppn;
    r[i].cuda_dev = host ? -1 : i % ppn;
    r[i].bus_id = host ? -1 : sys->nodes[sys->gpus[i % ppn]].id;
  }
  ck_assert_int_eq(braid_graph_compute(sys, nodes * ppn, r, &g), ncclSuccess);
  ncclResult_t res = braid_tuner_init(g, nodes * ppn, nodes, t_p);
  free(r);
  braid_topo_free(sys);
  if (g_p && res == ncclSuccess)
    *g_p = g;
  else
    braid_graph_free(g);
  return res;
}

static struct braid_tuner_choice choose(const struct braid_tuner* t, int f, size_t b) {
  struct braid_tuner_choice c;
  ck_assert_int_eq(braid_tuner_choose(t, f, b, &c), ncclSuccess);
  ck_assert(c.time_us > 0);
  ck_assert(braid_tuner_implemented(c.algo));
  return c;
}

START_TEST(test_16_nodes_crossover) {
  env_reset();
  struct braid_tuner* t = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 16, 8, 0, &t, &g), ncclSuccess);
  braid_tuner_set_log(t, 0);
  size_t crossover = 0;
  for (size_t b = 8; b <= (8ull << 30); b *= 2) {
    struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, b);
    if (b <= 65536) ck_assert_msg(c.algo == BRAID_ALGO_TREE, "%zu B: %s", b, braid_tuner_algo_name(c.algo));
    if (b >= (1ull << 30)) ck_assert_msg(c.algo == BRAID_ALGO_RING, "%zu B: %s", b, braid_tuner_algo_name(c.algo));
    if (c.algo == BRAID_ALGO_RING && crossover == 0) crossover = b;
    if (crossover) ck_assert_int_eq(c.algo, BRAID_ALGO_RING); /* one crossover, no flapping */
    ck_assert_int_ge(c.nchannels, 1);
    ck_assert_int_le(c.nchannels, g->nchannels);
    ck_assert_int_ge(c.nthreads, 96);
  }
  ck_assert(crossover > 65536 && crossover <= (1ull << 30));
  /* bigger messages never take less time */
  float prev = 0;
  for (size_t b = 8; b <= (8ull << 30); b *= 2) {
    float tm = choose(t, BRAID_FUNC_AllReduce, b).time_us;
    ck_assert(tm >= prev);
    prev = tm;
  }
  braid_tuner_free(t);
  braid_graph_free(g);
}
END_TEST

START_TEST(test_one_node_protocols) {
  env_reset();
  struct braid_tuner* t = NULL;
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 1, 8, 0, &t, NULL), ncclSuccess);
  braid_tuner_set_log(t, 0);
  int last = BRAID_PROTO_LL, seen[BRAID_NUM_PROTOS] = {0};
  const int rank_of[BRAID_NUM_PROTOS] = {[BRAID_PROTO_LL] = 0, [BRAID_PROTO_LL128] = 1, [BRAID_PROTO_SIMPLE] = 2};
  for (size_t b = 8; b <= (8ull << 30); b *= 2) {
    struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, b);
    ck_assert_int_eq(c.algo, BRAID_ALGO_RING);
    ck_assert_int_ge(rank_of[c.proto], rank_of[last]); /* LL, then LL128, then Simple */
    last = c.proto;
    seen[c.proto] = 1;
  }
  ck_assert(seen[BRAID_PROTO_LL] && seen[BRAID_PROTO_LL128] && seen[BRAID_PROTO_SIMPLE]);
  ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 8).proto, BRAID_PROTO_LL);
  ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 1ull << 30).proto, BRAID_PROTO_SIMPLE);
  /* the other collectives are rings */
  for (int f = 0; f < BRAID_FUNC_AllReduce; f++) ck_assert_int_eq(choose(t, f, 1 << 20).algo, BRAID_ALGO_RING);
  /* NVLS is priced (NVSwitch, sm90) but never chosen */
  ck_assert(braid_tuner_predict(t, BRAID_FUNC_AllReduce, BRAID_ALGO_NVLS, BRAID_PROTO_SIMPLE, 1 << 30) > 0);
  struct braid_tuner_choice m;
  ck_assert_int_eq(braid_tuner_model_best(t, BRAID_FUNC_AllReduce, 1ull << 30, &m), ncclSuccess);
  ck_assert_int_eq(m.algo, BRAID_ALGO_NVLS);
  ck_assert(!braid_tuner_implemented(BRAID_ALGO_NVLS));
  ck_assert_float_eq(braid_tuner_predict(t, BRAID_FUNC_AllGather, BRAID_ALGO_TREE, BRAID_PROTO_SIMPLE, 1024), -1.0f);
  ck_assert_float_eq(braid_tuner_predict(t, BRAID_FUNC_AllReduce, BRAID_ALGO_COLLNET_DIRECT, BRAID_PROTO_SIMPLE, 1024),
                     -1.0f);
  ck_assert_float_eq(braid_tuner_predict(t, 99, BRAID_ALGO_RING, BRAID_PROTO_SIMPLE, 1024), -1.0f);
  struct braid_tuner_choice c;
  ck_assert_int_eq(braid_tuner_choose(t, BRAID_FUNC_SendRecv, 64, &c), ncclInvalidArgument);
  ck_assert_int_eq(braid_tuner_choose(t, -1, 64, &c), ncclInvalidArgument);
  braid_tuner_free(t);
}
END_TEST

START_TEST(test_pcie_no_ll128) {
  env_reset();
  struct braid_tuner* t = NULL;
  ck_assert_int_eq(make_tuner("pcie-4gpu.xml", 1, 4, 0, &t, NULL), ncclSuccess);
  braid_tuner_set_log(t, 0);
  for (size_t b = 8; b <= (1ull << 30); b *= 4)
    ck_assert_int_ne(choose(t, BRAID_FUNC_AllReduce, b).proto, BRAID_PROTO_LL128);
  ck_assert_float_eq(braid_tuner_predict(t, BRAID_FUNC_AllReduce, BRAID_ALGO_NVLS, BRAID_PROTO_SIMPLE, 1024), -1.0f);
  braid_tuner_free(t);
  setenv("NCCL_PROTO", "LL128", 1); /* named: enabled even here */
  braid_param_reload();
  ck_assert_int_eq(make_tuner("pcie-4gpu.xml", 1, 4, 0, &t, NULL), ncclSuccess);
  braid_tuner_set_log(t, 0);
  ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 1 << 20).proto, BRAID_PROTO_LL128);
  braid_tuner_free(t);
}
END_TEST

START_TEST(test_host_mode) {
  env_reset();
  struct braid_tuner* t = NULL;
  struct braid_channel_graph* g = NULL;
  for (int nodes = 1; nodes <= 3; nodes += 2) {
    ck_assert_int_eq(make_tuner("cpu-only.xml", nodes, 2, 1, &t, &g), ncclSuccess);
    braid_tuner_set_log(t, 0);
    ck_assert(g->host_mode);
    for (size_t b = 8; b <= (1ull << 30); b *= 2) {
      struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, b);
      ck_assert_int_eq(c.nthreads, 1);
      ck_assert_int_ne(c.proto, BRAID_PROTO_LL128); /* no 128-byte store atomicity promised */
      for (int a = 0; a < BRAID_NUM_ALGOS; a++)
        if (!braid_tuner_implemented(a))
          for (int p = 0; p < BRAID_NUM_PROTOS; p++)
            ck_assert_float_eq(braid_tuner_predict(t, BRAID_FUNC_AllReduce, a, p, b), -1.0f);
    }
    ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 8).nchannels, 1);
    /* Host mode: Simple at every size (measured: a fenced slot is as cheap as a flagged line
     * on x86, and LL waits line by line). */
    ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 8).proto, BRAID_PROTO_SIMPLE);
    ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 1 << 30).proto, BRAID_PROTO_SIMPLE);
    ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 1 << 30).nchannels, g->nchannels);
    braid_tuner_free(t);
    braid_graph_free(g);
  }
}
END_TEST

/* Reduce's split schedule (algo/ring.h): the variant of a Ring/Simple Reduce from
 * BRAID_REDUCE_SPLIT_BYTES (0 by default: never), two ranks in host mode on one node
 * only; NCCL_PROTO still obeyed (another protocol: no split), nothing else gets the variant. */
static struct braid_tuner_choice split_choice(int nodes, int ppn, int host, int func, size_t bytes) {
  struct braid_tuner* t = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(make_tuner(host ? "cpu-only.xml" : "dgx-h100.xml", nodes, ppn, host, &t, &g), ncclSuccess);
  braid_tuner_set_log(t, 0);
  struct braid_tuner_choice c = choose(t, func, bytes);
  braid_tuner_free(t);
  braid_graph_free(g);
  return c;
}

START_TEST(test_reduce_split) {
  env_reset();
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, 64 << 20).variant, 0); /* off by default */
  setenv("BRAID_REDUCE_SPLIT_BYTES", "1M", 1);
  braid_param_reload();
  struct braid_tuner_choice c = split_choice(1, 2, 1, BRAID_FUNC_Reduce, 1 << 20);
  ck_assert_int_eq(c.algo, BRAID_ALGO_RING);
  ck_assert_int_eq(c.proto, BRAID_PROTO_SIMPLE);
  ck_assert_int_eq(c.variant, BRAID_TUNER_REDUCE_SPLIT);
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, 64 << 20).variant, BRAID_TUNER_REDUCE_SPLIT);
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, (1 << 20) - 1).variant, 0);
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_AllReduce, 1 << 20).variant, 0);
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_ReduceScatter, 1 << 20).variant, 0);
  ck_assert_int_eq(split_choice(1, 3, 1, BRAID_FUNC_Reduce, 1 << 20).variant, 0);  /* 3 ranks: the chain */
  ck_assert_int_eq(split_choice(2, 1, 1, BRAID_FUNC_Reduce, 1 << 20).variant, 0);  /* 2 nodes */
  ck_assert_int_eq(split_choice(1, 2, 0, BRAID_FUNC_Reduce, 64 << 20).variant, 0); /* device mode */
  setenv("BRAID_REDUCE_SPLIT_BYTES", "4K", 1);
  braid_param_reload();
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, 4096).variant, BRAID_TUNER_REDUCE_SPLIT);
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, 4095).variant, 0);
  setenv("BRAID_REDUCE_SPLIT_BYTES", "0", 1);
  braid_param_reload();
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, 64 << 20).variant, 0);
  setenv("BRAID_REDUCE_SPLIT_BYTES", "1M", 1);
  setenv("NCCL_PROTO", "LL", 1);
  braid_param_reload();
  c = split_choice(1, 2, 1, BRAID_FUNC_Reduce, 64 << 20);
  ck_assert_int_eq(c.proto, BRAID_PROTO_LL);
  ck_assert_int_eq(c.variant, 0);
  setenv("NCCL_PROTO", "Simple", 1);
  setenv("NCCL_ALGO", "Ring", 1);
  braid_param_reload();
  ck_assert_int_eq(split_choice(1, 2, 1, BRAID_FUNC_Reduce, 64 << 20).variant, BRAID_TUNER_REDUCE_SPLIT);
  env_reset();
}
END_TEST

/* Host mode on one node with the one-/two-shot scratch (core/sym/lsa.c): NVLS all-reduces up
 * to its size, one-shot while latency dominates, two-shot once the n-fold loads cost more than
 * a second handshake (never at 2 ranks); nothing else, nothing bigger, NCCL_ALGO and
 * BRAID_LSA_VARIANT obeyed; without the scratch NVLS has no price in host mode. */
static struct braid_tuner_choice lsa_tuner_choice(int ppn, size_t bytes, int func) {
  struct braid_tuner* t = NULL;
  struct braid_channel_graph* g = NULL;
  struct braid_tuner_choice c;
  ck_assert_int_eq(make_tuner("cpu-only.xml", 1, ppn, 1, &t, &g), ncclSuccess);
  braid_tuner_set_log(t, 0);
  ck_assert_float_eq(braid_tuner_predict(t, BRAID_FUNC_AllReduce, BRAID_ALGO_NVLS, BRAID_PROTO_SIMPLE, 8), -1.0f);
  braid_tuner_enable_lsa(t, 512 << 10, 2);
  ck_assert_int_eq(braid_tuner_choose(t, func, bytes, &c), ncclSuccess);
  braid_tuner_free(t);
  braid_graph_free(g);
  return c;
}

START_TEST(test_host_lsa) {
  env_reset();
  struct braid_tuner_choice c = lsa_tuner_choice(2, 8, BRAID_FUNC_AllReduce);
  ck_assert_int_eq(c.algo, BRAID_ALGO_NVLS);
  ck_assert_int_eq(c.variant, 1); /* BRAID_LSA_ONESHOT */
  ck_assert_int_eq(c.nchannels, 1);
  for (size_t b = 8; b <= (512 << 10); b *= 4) {
    c = lsa_tuner_choice(2, b, BRAID_FUNC_AllReduce);
    ck_assert(c.algo != BRAID_ALGO_NVLS || c.variant == 1);
  }
  ck_assert_int_eq(lsa_tuner_choice(4, 8, BRAID_FUNC_AllReduce).variant, 1);
  int twoshot = 0; /* 4 ranks: one-shot, then two-shot (BRAID_LSA_TWOSHOT), never back */
  for (size_t b = 8; b <= (512 << 10); b *= 2) {
    c = lsa_tuner_choice(4, b, BRAID_FUNC_AllReduce);
    if (c.algo != BRAID_ALGO_NVLS) continue;
    ck_assert(c.variant == 2 || !twoshot);
    twoshot |= c.variant == 2;
  }
  ck_assert(twoshot);
  ck_assert_int_ne(lsa_tuner_choice(2, (512 << 10) + 1, BRAID_FUNC_AllReduce).algo, BRAID_ALGO_NVLS);
  ck_assert_int_ne(lsa_tuner_choice(2, 8, BRAID_FUNC_ReduceScatter).algo, BRAID_ALGO_NVLS);
  ck_assert_int_eq(lsa_tuner_choice(2, 8, BRAID_FUNC_AllReduce).variant, 1);
  setenv("NCCL_ALGO", "^NVLS", 1);
  braid_param_reload();
  ck_assert_int_ne(lsa_tuner_choice(2, 8, BRAID_FUNC_AllReduce).algo, BRAID_ALGO_NVLS);
  setenv("NCCL_ALGO", "allreduce:nvls", 1);
  setenv("BRAID_LSA_VARIANT", "twoshot", 1);
  braid_param_reload();
  c = lsa_tuner_choice(2, 8, BRAID_FUNC_AllReduce);
  ck_assert_int_eq(c.algo, BRAID_ALGO_NVLS);
  ck_assert_int_eq(c.variant, 2);
  env_reset();
}
END_TEST

/* braid_tuner_choose without choose()'s "implemented" check: NVLS runs only where enabled. */
static struct braid_tuner_choice lsa_choose(const struct braid_tuner* t, int f, size_t b) {
  struct braid_tuner_choice c;
  ck_assert_int_eq(braid_tuner_choose(t, f, b, &c), ncclSuccess);
  ck_assert(c.time_us > 0);
  return c;
}

/* Device mode, one node of GPUs with P2P (pcie-4gpu.xml, 4 ranks) and the one-/two-shot
 * scratch in device memory (core/sym/lsa.c): NVLS offered without a switch, one-shot at 8 B,
 * at most one crossover to two-shot, nothing past the scratch, one block; without the scratch
 * never chosen. */
START_TEST(test_device_lsa) {
  env_reset();
  struct braid_tuner* t = NULL;
  ck_assert_int_eq(make_tuner("pcie-4gpu.xml", 1, 4, 0, &t, NULL), ncclSuccess);
  braid_tuner_set_log(t, 0);
  ck_assert_int_ne(lsa_choose(t, BRAID_FUNC_AllReduce, 8).algo, BRAID_ALGO_NVLS);
  braid_tuner_enable_lsa(t, 512 << 10, 2); /* the host-mode call: ignored on a device */
  ck_assert_int_ne(lsa_choose(t, BRAID_FUNC_AllReduce, 8).algo, BRAID_ALGO_NVLS);
  braid_tuner_enable_lsa_device(t, 512 << 10);
  struct braid_tuner_choice c = lsa_choose(t, BRAID_FUNC_AllReduce, 8);
  ck_assert_int_eq(c.algo, BRAID_ALGO_NVLS);
  ck_assert_int_eq(c.variant, 1);
  ck_assert_int_eq(c.nchannels, 1);
  int twoshot = 0;
  for (size_t b = 8; b <= (512 << 10); b *= 2) {
    c = lsa_choose(t, BRAID_FUNC_AllReduce, b);
    if (c.algo != BRAID_ALGO_NVLS) continue;
    ck_assert(c.variant == 2 || !twoshot);
    twoshot |= c.variant == 2;
  }
  ck_assert_int_ne(lsa_choose(t, BRAID_FUNC_AllReduce, (512 << 10) + 1).algo, BRAID_ALGO_NVLS);
  ck_assert_int_ne(lsa_choose(t, BRAID_FUNC_AllGather, 8).algo, BRAID_ALGO_NVLS);
  braid_tuner_free(t);
}
END_TEST

/* The memo of choices (tuner_memo.c): a repeated call shape gets the same choice as its first
 * time, for every size and function, and what changes a choice after init is seen at once:
 * the LSA offer (8 B all-reduce: ring, then one-shot NVLS) and the channel cap; each of them
 * moves braid_tuner_epoch, which the lone all-reduce keeps its last answer under, and choices
 * do not. */
START_TEST(test_memo) {
  env_reset();
  struct braid_tuner* t = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(make_tuner("cpu-only.xml", 1, 2, 1, &t, &g), ncclSuccess);
  braid_tuner_set_log(t, 0);
  int funcs[] = {BRAID_FUNC_AllReduce, BRAID_FUNC_AllGather, BRAID_FUNC_Broadcast};
  for (int round = 0; round < 2; round++)
    for (int f = 0; f < 3; f++)
      for (size_t b = 1; b <= (1ull << 33); b = b * 3 + 1) { /* more shapes than memo slots */
        struct braid_tuner_choice first = choose(t, funcs[f], b), again = choose(t, funcs[f], b);
        ck_assert_int_eq(first.algo, again.algo);
        ck_assert_int_eq(first.proto, again.proto);
        ck_assert_int_eq(first.nchannels, again.nchannels);
        ck_assert_int_eq(first.nthreads, again.nthreads);
        ck_assert_int_eq(first.variant, again.variant);
        ck_assert_float_eq(first.time_us, again.time_us);
        ck_assert_float_eq(first.time_us, braid_tuner_predict(t, funcs[f], first.algo, first.proto, b));
      }
  ck_assert_int_ne(choose(t, BRAID_FUNC_AllReduce, 8).algo, BRAID_ALGO_NVLS);
  uint32_t e0 = braid_tuner_epoch(t);
  ck_assert_uint_ne(e0, 0);
  ck_assert_uint_eq(braid_tuner_epoch(t), e0); /* choosing changes nothing */
  braid_tuner_enable_lsa(t, 512 << 10, 2);
  uint32_t e1 = braid_tuner_epoch(t);
  ck_assert_uint_ne(e1, 0);
  ck_assert_uint_ne(e1, e0);
  struct braid_tuner_choice lsa;
  ck_assert_int_eq(braid_tuner_choose(t, BRAID_FUNC_AllReduce, 8, &lsa), ncclSuccess);
  ck_assert_int_eq(lsa.algo, BRAID_ALGO_NVLS);
  ck_assert_uint_eq(braid_tuner_epoch(t), e1);
  if (g->nchannels > 1) {
    ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 1 << 30).nchannels, g->nchannels);
    braid_tuner_cap_channels(t, 1);
    ck_assert_uint_ne(braid_tuner_epoch(t), e1);
    ck_assert_uint_ne(braid_tuner_epoch(t), 0);
    ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 1 << 30).nchannels, 1);
  }
  ck_assert_uint_eq(braid_tuner_epoch(NULL), 0);
  braid_tuner_free(t);
  braid_graph_free(g);
}
END_TEST

/* Host mode over 4 fake nodes of one rank (the bench/tree-vs-ring.sh setup): tree from 8 B to
 * 64 KiB, ring from 1 MiB on, one crossover between them (measured between 64 and 128 KiB;
 * tuner_tables.h), times growing with size, two channels past the first 64 KiB. */
START_TEST(test_host_fake_nodes) {
  env_reset();
  struct braid_tuner* t = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(make_tuner("cpu-only.xml", 4, 1, 1, &t, &g), ncclSuccess);
  braid_tuner_set_log(t, 0);
  size_t crossover = 0;
  float prev = 0;
  for (size_t b = 8; b <= (8ull << 30); b *= 2) {
    struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, b);
    if (b <= 65536) ck_assert_msg(c.algo == BRAID_ALGO_TREE, "%zu B: %s", b, braid_tuner_algo_name(c.algo));
    if (b >= (1u << 20)) ck_assert_msg(c.algo == BRAID_ALGO_RING, "%zu B: %s", b, braid_tuner_algo_name(c.algo));
    if (c.algo == BRAID_ALGO_RING && crossover == 0) crossover = b;
    if (crossover) ck_assert_int_eq(c.algo, BRAID_ALGO_RING); /* one crossover, no flapping */
    ck_assert_msg(c.time_us >= prev, "%zu B: %g us after %g", b, (double)c.time_us, (double)prev);
    prev = c.time_us;
    /* the prediction is the chosen pair's, and the other algorithm's is not better */
    ck_assert(c.time_us == braid_tuner_predict(t, BRAID_FUNC_AllReduce, c.algo, c.proto, b));
    int other = c.algo == BRAID_ALGO_RING ? BRAID_ALGO_TREE : BRAID_ALGO_RING;
    float o = braid_tuner_predict(t, BRAID_FUNC_AllReduce, other, c.proto, b);
    ck_assert(o < 0 || o >= c.time_us);
  }
  ck_assert(crossover > 65536 && crossover <= (1u << 20));
  ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 32768).nchannels, 1);
  ck_assert_int_eq(choose(t, BRAID_FUNC_AllReduce, 65536).nchannels, g->nchannels < 2 ? g->nchannels : 2);
  braid_tuner_free(t);
  braid_graph_free(g);
}
END_TEST

/* Forced choices are obeyed and visible in the TUNING lines. */
static char* read_file(const char* path) {
  FILE* f = fopen(path, "r");
  static char buf[1 << 16];
  size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
  return buf;
}

START_TEST(test_forced_and_logged) {
  char log[64];
  snprintf(log, sizeof(log), "/tmp/braid-tuning-%d.log", (int)getpid());
  unlink(log);
  env_reset();
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  setenv("NCCL_ALGO", "Tree", 1);
  setenv("NCCL_PROTO", "Simple", 1);
  braid_param_reload();
  struct braid_tuner* t = NULL;
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 16, 8, 0, &t, NULL), ncclSuccess);
  /* Every choice prints its line: nobody may keep an answer and skip asking. */
  ck_assert_uint_eq(braid_tuner_epoch(t), 0);
  for (size_t b = 8; b <= (1ull << 30); b *= 8) {
    struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, b);
    ck_assert_int_eq(c.algo, BRAID_ALGO_TREE);
    ck_assert_int_eq(c.proto, BRAID_PROTO_SIMPLE);
  }
  struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, 1048576);
  char want[128];
  snprintf(want, sizeof(want), "AllReduce: 1048576 Bytes -> Algo Tree proto Simple channel{Lo..Hi}={0..%d}\n",
           c.nchannels - 1);
  ck_assert_msg(strstr(read_file(log), want) != NULL, "no '%s' in the log", want);
  /* Tree does not do AllGather: nothing left, an error naming the setting */
  ck_assert_int_eq(braid_tuner_choose(t, BRAID_FUNC_AllGather, 1024, &c), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "no algorithm/protocol available for function AllGather"));
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "NCCL_ALGO was set to Tree"));
  braid_tuner_set_log(t, 0);
  ck_assert_uint_ne(braid_tuner_epoch(t), 0); /* this rank prints none */
  braid_tuner_free(t);
  unlink(log);
}
END_TEST

START_TEST(test_forced_per_function) {
  env_reset();
  setenv("NCCL_ALGO", "ring;allreduce:tree", 1);
  setenv("NCCL_PROTO", "^LL;allreduce:LL", 1);
  braid_param_reload();
  struct braid_tuner* t = NULL;
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 2, 8, 0, &t, NULL), ncclSuccess);
  braid_tuner_set_log(t, 0);
  for (size_t b = 8; b <= (1ull << 30); b *= 16) {
    struct braid_tuner_choice c = choose(t, BRAID_FUNC_AllReduce, b);
    ck_assert_int_eq(c.algo, BRAID_ALGO_TREE);
    ck_assert_int_eq(c.proto, BRAID_PROTO_LL);
    c = choose(t, BRAID_FUNC_Broadcast, b);
    ck_assert_int_eq(c.algo, BRAID_ALGO_RING);
    ck_assert_int_ne(c.proto, BRAID_PROTO_LL);
  }
  braid_tuner_free(t);
  setenv("NCCL_ALGO", "Rong", 1);
  braid_param_reload();
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 1, 8, 0, &t, NULL), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "Rong"));
}
END_TEST

/* ---- the parser ---- */

struct pcase {
  const char* text;
  int kind;
  ncclResult_t res;
  const char* allreduce; /* allowed for AllReduce, e.g. "10" = Tree yes, Ring no (algos) */
  const char* broadcast;
};
static const struct pcase pcases[] = {
    {NULL, BRAID_TUNER_LIST_ALGO, ncclSuccess, "1111111", "1111111"},
    {"", BRAID_TUNER_LIST_ALGO, ncclSuccess, "1111111", "1111111"},
    {"Ring", BRAID_TUNER_LIST_ALGO, ncclSuccess, "0100000", "0100000"},
    {"rInG", BRAID_TUNER_LIST_ALGO, ncclSuccess, "0100000", "0100000"},
    {" ring , tree ", BRAID_TUNER_LIST_ALGO, ncclSuccess, "1100000", "1100000"},
    {"^Tree", BRAID_TUNER_LIST_ALGO, ncclSuccess, "0111111", "0111111"},
    {"^tree,nvls", BRAID_TUNER_LIST_ALGO, ncclSuccess, "0111011", "0111011"},
    {"ring,collnetdirect;allreduce:tree;broadcast:ring", BRAID_TUNER_LIST_ALGO, ncclSuccess, "1000000", "0100000"},
    {"allreduce:^ring", BRAID_TUNER_LIST_ALGO, ncclSuccess, "1011111", "1111111"},
    {"AllReduce : NVLSTree , PAT ; ", BRAID_TUNER_LIST_ALGO, ncclSuccess, "0000011", "1111111"},
    {"^LL128;allreduce:LL128", BRAID_TUNER_LIST_PROTO, ncclSuccess, "010", "101"},
    {"simple", BRAID_TUNER_LIST_PROTO, ncclSuccess, "001", "001"},
    {"Rong", BRAID_TUNER_LIST_ALGO, ncclInvalidUsage, "Rong", NULL},
    {"ring;tree", BRAID_TUNER_LIST_ALGO, ncclInvalidUsage, "needs a function prefix", NULL},
    {"allreduce:rong", BRAID_TUNER_LIST_ALGO, ncclInvalidUsage, "rong", NULL},
    {"foo:ring", BRAID_TUNER_LIST_ALGO, ncclInvalidUsage, "foo", NULL},
    {"sendrecv:ring", BRAID_TUNER_LIST_ALGO, ncclInvalidUsage, "sendrecv", NULL},
    {"LL64", BRAID_TUNER_LIST_PROTO, ncclInvalidUsage, "LL64", NULL},
    {"ring", BRAID_TUNER_LIST_PROTO, ncclInvalidUsage, "protocol \"ring\"", NULL},
};

START_TEST(test_parse) {
  const struct pcase* p = &pcases[_i];
  uint8_t on[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX], named[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX];
  ncclResult_t res = braid_tuner_parse_list(p->text, p->kind, NULL, on, named);
  ck_assert_int_eq(res, p->res);
  if (res != ncclSuccess) {
    ck_assert_msg(strstr(braid_debug_last_error(), p->allreduce) != NULL, "'%s' not in '%s'", p->allreduce,
                  braid_debug_last_error());
    return;
  }
  int n = p->kind == BRAID_TUNER_LIST_ALGO ? BRAID_NUM_ALGOS : BRAID_NUM_PROTOS;
  for (int i = 0; i < n; i++) {
    ck_assert_msg(on[BRAID_FUNC_AllReduce][i] == (p->allreduce[i] == '1'), "%s: AllReduce %d", p->text, i);
    ck_assert_msg(on[BRAID_FUNC_Broadcast][i] == (p->broadcast[i] == '1'), "%s: Broadcast %d", p->text, i);
  }
  if (p->text && strcmp(p->text, "^LL128;allreduce:LL128") == 0) {
    ck_assert(named[BRAID_FUNC_AllReduce][BRAID_PROTO_LL128]);
    ck_assert(!named[BRAID_FUNC_Broadcast][BRAID_PROTO_SIMPLE]);
  }
}
END_TEST

START_TEST(test_names_and_bad_init) {
  ck_assert_str_eq(braid_tuner_func_name(BRAID_FUNC_ReduceScatter), "ReduceScatter");
  ck_assert_str_eq(braid_tuner_algo_name(BRAID_ALGO_NVLS_TREE), "NVLSTree");
  ck_assert_str_eq(braid_tuner_proto_name(BRAID_PROTO_LL128), "LL128");
  ck_assert_str_eq(braid_tuner_algo_name(42), "?");
  struct braid_tuner* t = NULL;
  struct braid_channel_graph g;
  memset(&g, 0, sizeof(g));
  ck_assert_int_eq(braid_tuner_init(NULL, 4, 1, &t), ncclInvalidArgument);
  ck_assert_int_eq(braid_tuner_init(&g, 4, 5, &t), ncclInvalidArgument);
  ck_assert_int_eq(braid_tuner_init(&g, 0, 1, &t), ncclInvalidArgument);
  ck_assert_ptr_null(t);
}
END_TEST

/* One list says which algorithms run (BRAID_ALGOS): the tuner never picks another. */
START_TEST(test_algo_list) {
  env_reset();
  struct braid_tuner* t = NULL;
  ck_assert(braid_tuner_implemented(BRAID_ALGO_RING) && braid_tuner_implemented(BRAID_ALGO_TREE));
  ck_assert(!braid_tuner_implemented(-1) && !braid_tuner_implemented(BRAID_NUM_ALGOS));
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 2, 8, 0, &t, NULL), ncclSuccess);
  braid_tuner_set_log(t, 0);
  for (int f = 0; f < BRAID_FUNC_SendRecv; f++)
    for (size_t b = 8; b <= (8ull << 30); b *= 4) ck_assert(braid_tuner_implemented(choose(t, f, b).algo));
  braid_tuner_free(t);
}
END_TEST

/* Tree rows are priced from the tree search's speed (NCCL: the intra-node one up to two
 * nodes), ring rows from the ring search's. */
START_TEST(test_tree_uses_tree_graph) {
  env_reset();
  struct braid_tuner *a = NULL, *b = NULL;
  struct braid_channel_graph* g = NULL;
  ck_assert_int_eq(make_tuner("dgx-h100.xml", 2, 8, 0, &a, &g), ncclSuccess);
  g->tree_bw_intra /= 2;
  ck_assert_int_eq(braid_tuner_init(g, g->nranks, g->nnodes, &b), ncclSuccess);
  size_t big = 1ull << 30;
  int ar = BRAID_FUNC_AllReduce, s = BRAID_PROTO_SIMPLE;
  ck_assert_float_eq(braid_tuner_predict(a, ar, BRAID_ALGO_RING, s, big),
                     braid_tuner_predict(b, ar, BRAID_ALGO_RING, s, big));
  ck_assert(braid_tuner_predict(b, ar, BRAID_ALGO_TREE, s, big) > braid_tuner_predict(a, ar, BRAID_ALGO_TREE, s, big));
  braid_tuner_free(a);
  braid_tuner_free(b);
  braid_graph_free(g);
}
END_TEST

Suite* tuner_suite(void) {
  Suite* s = suite_create("tuner");
  TCase* tc = tcase_create("model");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_16_nodes_crossover);
  tcase_add_test(tc, test_one_node_protocols);
  tcase_add_test(tc, test_pcie_no_ll128);
  tcase_add_test(tc, test_algo_list);
  tcase_add_test(tc, test_tree_uses_tree_graph);
  tcase_add_test(tc, test_host_mode);
  tcase_add_test(tc, test_host_fake_nodes);
  tcase_add_test(tc, test_host_lsa);
  tcase_add_test(tc, test_reduce_split);
  tcase_add_test(tc, test_device_lsa);
  tcase_add_test(tc, test_memo);
  suite_add_tcase(s, tc);
  tc = tcase_create("env");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_forced_and_logged);
  tcase_add_test(tc, test_forced_per_function);
  tcase_add_loop_test(tc, test_parse, 0, sizeof(pcases) / sizeof(pcases[0]));
  tcase_add_test(tc, test_names_and_bad_init);
  suite_add_tcase(s, tc);
  return s;
}
