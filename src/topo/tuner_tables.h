/*
 * tuner_tables.h - the constants of the cost model (tuner.c), as tables with named indices
 * (docs/CONVENTIONS.md 12). GPU values are NCCL's (reference section 7) unless marked "braid"; host-mode
 * rows (shared memory inside a node, sockets between nodes) are braid's, sized from what a
 * host-mode channel worker does per step: one copy through a shared segment and a flag
 * handoff between two cores (SHM), or a send()/recv() pair over TCP (SOCKET).
 *
 * Units: latencies in microseconds, bandwidths in GB/s. Included by tuner.c only.
 */
#ifndef BRAID_TUNER_TABLES_H
#define BRAID_TUNER_TABLES_H

#include "kernels/axes.h"

/* The link classes the per-step latency depends on. */
enum braid_tuner_hw {
  BRAID_HW_NVLINK = 0, /* GPUs of a node joined by NVLink (path NVL/NVB) */
  BRAID_HW_PCI = 1,    /* GPUs of a node joined by PCIe or through host memory */
  BRAID_HW_NET = 2,    /* GPU nodes over the network (IB, RoCE) */
  BRAID_HW_SHM = 3,    /* host mode: ranks of a node through shared memory */
  BRAID_HW_SOCKET = 4, /* host mode: nodes over TCP sockets */
  BRAID_NUM_HW
};

/* GPU generations the bandwidth caps depend on; HOST for host mode. */
enum braid_tuner_arch {
  BRAID_ARCH_VOLTA = 0,     /* sm70-sm75 (and older) */
  BRAID_ARCH_AMPERE = 1,    /* sm80-sm89 */
  BRAID_ARCH_HOPPER = 2,    /* sm90 */
  BRAID_ARCH_BLACKWELL = 3, /* sm100 and later */
  BRAID_ARCH_HOST = 4,
  BRAID_NUM_ARCH
};

/* Node-count classes of the caps: one node, two nodes, more. */
enum { BRAID_NODES_1 = 0, BRAID_NODES_2 = 1, BRAID_NODES_MANY = 2, BRAID_NUM_NODE_CLASSES };

/* Launch and setup latency of one collective, per algorithm and protocol. */
static const float braid_tuner_base_lat[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS] = {
    [BRAID_ALGO_TREE] = {[BRAID_PROTO_LL] = 6.8f, [BRAID_PROTO_LL128] = 14.0f, [BRAID_PROTO_SIMPLE] = 8.4f},
    [BRAID_ALGO_RING] = {[BRAID_PROTO_LL] = 6.6f, [BRAID_PROTO_LL128] = 14.0f, [BRAID_PROTO_SIMPLE] = 8.4f},
    [BRAID_ALGO_COLLNET_DIRECT] = {0, 0, 0}, /* the hardware row carries it */
    [BRAID_ALGO_COLLNET_CHAIN] = {0, 0, 0},
    [BRAID_ALGO_NVLS] = {0, 0, 0},
    [BRAID_ALGO_NVLS_TREE] = {0, 0, 0},
    [BRAID_ALGO_PAT] = {[BRAID_PROTO_LL] = 8.0f, [BRAID_PROTO_LL128] = 8.0f, [BRAID_PROTO_SIMPLE] = 8.0f},
};

/* Host mode: no kernel launch; the call hands work items to the channel workers and waits
 * for them (a wake-up and a completion flag). braid. */
static const float braid_tuner_base_lat_host[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS] = {
    [BRAID_ALGO_TREE] = {[BRAID_PROTO_LL] = 4.0f, [BRAID_PROTO_LL128] = 4.0f, [BRAID_PROTO_SIMPLE] = 4.0f},
    [BRAID_ALGO_RING] = {[BRAID_PROTO_LL] = 4.0f, [BRAID_PROTO_LL128] = 4.0f, [BRAID_PROTO_SIMPLE] = 4.0f},
};

/* Host mode over sockets, one step of one channel (us): a ring step is a send to the next rank
 * and a receive from the previous one; a tree step one level of the reduce or the broadcast
 * (a tree of 4 nodes has 2 levels each way, both phases pipelined). Measured, see the SOCKET
 * row below. braid */
#define BRAID_TUNER_SOCKET_RING_STEP_US 15.8f
#define BRAID_TUNER_SOCKET_TREE_STEP_US 10.25f

/* Latency of one step over a link class, per algorithm and protocol. Algorithms that only run
 * Simple have only that column. */
static const float braid_tuner_hw_lat[BRAID_NUM_HW][BRAID_NUM_ALGOS][BRAID_NUM_PROTOS] =
    {
        /* NVLink inside a node */
        [BRAID_HW_NVLINK] =
            {
                [BRAID_ALGO_TREE] = {.6f, 1.25f, 4.0f},
                [BRAID_ALGO_RING] = {.6f, 1.9f, 3.4f},
                [BRAID_ALGO_COLLNET_DIRECT] = {0, 0, 3.7f},
                [BRAID_ALGO_COLLNET_CHAIN] = {0, 0, 2.8f},
                [BRAID_ALGO_NVLS] = {0, 0, 25.0f},
                [BRAID_ALGO_NVLS_TREE] = {0, 0, 25.0f},
                [BRAID_ALGO_PAT] = {0, 0, 4.0f},
            },
        /* PCIe (or host memory) inside a node */
        [BRAID_HW_PCI] =
            {
                [BRAID_ALGO_TREE] = {1.0f, 1.9f, 4.0f},
                [BRAID_ALGO_RING] = {1.0f, 2.5f, 5.7f},
                [BRAID_ALGO_COLLNET_DIRECT] = {0, 0, 3.7f}, /* braid: NCCL's NVLink value */
                [BRAID_ALGO_COLLNET_CHAIN] = {0, 0, 2.8f},  /* braid: NCCL's NVLink value */
                [BRAID_ALGO_NVLS] = {0, 0, 0},
                [BRAID_ALGO_NVLS_TREE] = {0, 0, 0},
                [BRAID_ALGO_PAT] = {0, 0, 4.0f},
            },
        /* network between GPU nodes */
        [BRAID_HW_NET] =
            {
                [BRAID_ALGO_TREE] = {5.0f, 8.5f, 14.0f},
                [BRAID_ALGO_RING] = {2.7f, 4.0f, 14.0f},
                [BRAID_ALGO_COLLNET_DIRECT] = {0, 0, 31.0f},
                [BRAID_ALGO_COLLNET_CHAIN] = {0, 0, 30.0f},
                [BRAID_ALGO_NVLS] = {0, 0, 18.0f},
                [BRAID_ALGO_NVLS_TREE] = {0, 0, 20.9f},
                [BRAID_ALGO_PAT] = {0, 0, 14.0f},
            },
        /* host mode, shared memory: a fenced slot (Simple) costs no more than a flagged line on x86
         * (a release store is a plain store), and LL/LL128 waits line by line: measured with
         * all_reduce_perf -P 2 and NCCL_PROTO forced, Simple is as fast at 8 B and far faster from
         * 512 B. braid */
        [BRAID_HW_SHM] =
            {
                [BRAID_ALGO_TREE] = {1.0f, 1.0f, 0.5f},
                [BRAID_ALGO_RING] = {1.0f, 1.0f, 0.5f},
            },
        /* host mode, TCP sockets through the proxy: one step of one channel, a send/recv round. Line
         * protocols also wait for the proxy's tail, so they save nothing (same value in all three).
         * Measured (bench/tree-vs-ring.sh: 4 fake nodes, one rank each, on this 2-core machine,
         * 11 rounds, least disturbed round): one channel at 8 B - 32 KiB, ring ~98 us = 4 + 6 steps
         * x 15.8, tree ~45-55 us = 4 + 4 steps x 10.25; two channels (64 KiB on) cost twice per
         * step (BRAID_TUNER_HOST_CHANNEL_STEP_SHARE). braid */
        [BRAID_HW_SOCKET] =
            {
                [BRAID_ALGO_TREE] = {BRAID_TUNER_SOCKET_TREE_STEP_US, BRAID_TUNER_SOCKET_TREE_STEP_US,
                                     BRAID_TUNER_SOCKET_TREE_STEP_US},
                [BRAID_ALGO_RING] = {BRAID_TUNER_SOCKET_RING_STEP_US, BRAID_TUNER_SOCKET_RING_STEP_US,
                                     BRAID_TUNER_SOCKET_RING_STEP_US},
            },
};

/* Software overhead of a network step on the GPU side (us); x3 for Simple. */
static const float braid_tuner_net_overhead[2] = {1.0f /* Intel and others */, 2.0f /* AMD */};

/* LL bandwidth ceiling of one communicator (bus bandwidth), by generation and node count. */
static const float braid_tuner_ll_max_bw[BRAID_NUM_ARCH][BRAID_NUM_NODE_CLASSES] = {
    [BRAID_ARCH_VOLTA] = {39.0f, 39.0f, 20.4f},
    [BRAID_ARCH_AMPERE] = {87.7f, 22.5f, 19.0f},
    [BRAID_ARCH_HOPPER] = {141.0f, 45.0f, 35.0f},
    [BRAID_ARCH_BLACKWELL] = {282.0f, 90.0f, 70.0f}, /* braid: twice Hopper */
    [BRAID_ARCH_HOST] = {1e9f, 1e9f, 1e9f},          /* no ceiling: the link speed decides */
};

/* Ring LL128 bandwidth one channel can drive. */
static const float braid_tuner_ring_ll128_per_ch[BRAID_NUM_ARCH] = {[BRAID_ARCH_VOLTA] = 20.0f,
                                                                    [BRAID_ARCH_AMPERE] = 20.0f,
                                                                    [BRAID_ARCH_HOPPER] = 36.7f,
                                                                    [BRAID_ARCH_BLACKWELL] = 40.0f /* braid */,
                                                                    [BRAID_ARCH_HOST] = 1e9f};

/* Tree bandwidth one channel can drive, by node count. */
static const float braid_tuner_tree_per_ch[BRAID_NUM_ARCH][BRAID_NUM_NODE_CLASSES] = {
    [BRAID_ARCH_VOLTA] = {26.5f, 18.5f, 10.0f},  [BRAID_ARCH_AMPERE] = {24.0f, 23.6f, 17.8f},
    [BRAID_ARCH_HOPPER] = {38.7f, 41.4f, 36.0f}, [BRAID_ARCH_BLACKWELL] = {70.0f, 42.8f, 40.0f}, /* braid */
    [BRAID_ARCH_HOST] = {1e9f, 1e9f, 1e9f},
};

/* NVLink SHARP: share of the NVLink bandwidth an NVLS AllReduce reaches. */
static const float braid_tuner_nvls_eff[BRAID_NUM_ARCH] = {[BRAID_ARCH_HOPPER] = 0.85f, [BRAID_ARCH_BLACKWELL] = 0.74f};

/*
 * Tree AllReduce efficiency by message size (bucket b covers 64 << b bytes; the last bucket
 * also covers everything larger): the pipeline of a tree fills badly in the middle sizes. GPUs
 * only: in host mode the tree's cost per byte shows no such dip (measured, 4 fake nodes: 0.52 GB/s
 * from 64 KiB to 1 MiB, 0.40 above; the ring 0.91 and 0.54), so host mode applies none.
 * braid's calibration, after the shape NCCL describes (dips to .4-.5 around 128 KiB-1 MiB),
 * with the largest sizes held lower than a ring, whose pipeline is longer and steadier.
 */
#define BRAID_TUNER_TREE_BUCKETS 23
static const float braid_tuner_tree_corr[BRAID_NUM_PROTOS][BRAID_TUNER_TREE_BUCKETS] = {
    [BRAID_PROTO_LL] = {1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .7f, .7f,  .7f,  .7f,  .6f, .5f,
                        .4f,  .4f,  .5f,  .6f,  .7f, .8f, .9f, 1.0f, 1.0f, 1.0f, 1.0f},
    [BRAID_PROTO_LL128] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,
                           .8f,  .7f,  .6f,  .6f,  .6f,  .6f,  .6f,  .6f,  .6f,  .6f,  .6f},
    [BRAID_PROTO_SIMPLE] = {.9f, .9f, .9f, .9f, .9f, .9f, .9f, .8f, .7f, .6f, .6f, .5f,
                            .5f, .5f, .5f, .6f, .7f, .8f, .8f, .8f, .8f, .8f, .8f},
};

/* Most threads per block, and the bytes per thread below which an op gives up channels,
 * then threads (NCCL: LL 8, LL128 8, Simple 64; Ring LL x nranks). */
static const int braid_tuner_max_threads[BRAID_NUM_ALGOS][BRAID_NUM_PROTOS] = {
    [BRAID_ALGO_TREE] = {512, 640, 640},
    [BRAID_ALGO_RING] = {512, 640, 512},
    [BRAID_ALGO_COLLNET_DIRECT] = {0, 0, 640},
    [BRAID_ALGO_COLLNET_CHAIN] = {0, 0, 640},
    [BRAID_ALGO_NVLS] = {0, 0, 640},
    [BRAID_ALGO_NVLS_TREE] = {0, 0, 640},
    [BRAID_ALGO_PAT] = {0, 0, 640},
};
static const int braid_tuner_thread_threshold[BRAID_NUM_PROTOS] = {
    [BRAID_PROTO_LL] = 8, [BRAID_PROTO_LL128] = 8, [BRAID_PROTO_SIMPLE] = 64};
/* Host mode: the share of the bus bandwidth a tree all-reduce gets (GPUs: 0.5, NCCL's). Measured
 * with 4 ranks on 4 fake nodes (bench/tree-vs-ring.sh, least disturbed of 11 rounds, 64 KiB -
 * 1 MiB, two channels): ring 0.91 GB/s, tree 0.52 GB/s per extra byte; the model's ring gets
 * busBw x 4/6 = 0.8 GB/s from the graph (1.2 GB/s, the 10 Gb/s NIC), so the tree keeps the
 * measured ratio 0.57 of it with 0.42: tree = 0.92 busBw x 0.42 = 0.46 GB/s. The inner node of
 * a 4-node tree moves 2x the message each way against the ring's 1.5x, on cores the four
 * processes share. That first fit (0.42) put the crossover at ~116 KiB. Once idle tree
 * connections stopped costing the proxy a recv() per pass (net_proxy.c, quiet receives), 12
 * rounds measured the tree ahead at 128 KiB (322 vs 401 us, medians), level at 256 KiB (531 vs
 * 555; minima equal) and behind from 512 KiB (986 vs 845) with other work on the machine, and
 * on a quiet machine (16 rounds) ahead at 256 KiB (454 vs 472) and behind from 512 KiB (772 vs
 * 728): 0.55 puts the model's crossover between 256 and 512 KiB. (1.0 with the GPU size
 * correction had the ring from 64 KiB, where the tree measured faster, and the tree again from
 * 8 MiB, where the ring did.) Then host mode ran one channel per core of the machine (init.c):
 * 4 fake nodes on 2 cores went from two channels to one, and the ring gained most (6 rounds,
 * medians: 64 KiB ring 144 vs tree 197 us, 128 KiB 188 vs 277, 256 KiB 280 vs 450; 32 KiB still
 * tree, 95 vs 123): 0.39 puts the crossover between 32 and 64 KiB. braid */
#define BRAID_TUNER_TREE_BW_HOST 0.39f

/* Host mode: each channel is a worker thread per rank; with more of them than cores the steps
 * of the channels take turns, so a step costs this much more per extra channel. Measured when
 * 4 fake nodes on 2 cores still ran 2 channels (init.c now gives them one): from one channel
 * (32 KiB) to two (64 KiB) the ring's fixed cost went from ~98 to ~194 us, the tree's from ~50
 * to ~86 us. braid */
#define BRAID_TUNER_HOST_CHANNEL_STEP_SHARE 1.0f

/* Host mode: a channel worker is one thread; it is worth it above this many bytes. braid */
#define BRAID_TUNER_HOST_BYTES_PER_CHANNEL 32768

/* ---- NVLS-style one-shot / two-shot all-reduce, host mode on one node (issue 19) ----------
 * kernels/lsa.h over core/sym/lsa.c's shared scratch, on the calling thread: one-shot = one
 * arrival handshake, then n loads reduced (bytes x (1 + n) through the core: the staging copy
 * and n inputs); two-shot = two handshakes, bytes x 3 (staging, the chunk's n loads, the gather).
 * Latencies are per call with no more ranks than cores (more: x ranks / cores, they spin in
 * turns). Measured: see docs/notes/2026-12-01-nvls.md. braid */
#define BRAID_TUNER_LSA_ONESHOT_LAT_US 1.0f
#define BRAID_TUNER_LSA_TWOSHOT_LAT_US 2.0f
#define BRAID_TUNER_LSA_BW 8.0f /* GB/s one core copies or reduces, from and to shared memory */
/* The same in device mode (GPUs with P2P, no switch): one block of the rank's kernel does the
 * call over the peers' device memory. First estimates, not measured (no GPU in the session that
 * wrote them; tests/gpu/run.sh's nvls case measures them): a launch plus one (one-shot) or two
 * (two-shot) flag round trips over NVLink / PCIe, and what one block of 512 threads moves.
 * braid */
#define BRAID_TUNER_LSA_DEV_ONESHOT_LAT_US 6.0f
#define BRAID_TUNER_LSA_DEV_TWOSHOT_LAT_US 9.0f
#define BRAID_TUNER_LSA_DEV_BW 40.0f

#endif /* BRAID_TUNER_TABLES_H */
