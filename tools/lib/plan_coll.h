/*
 * plan_coll.h - braid-plan's collective mode: the questions a textbook asks of one
 * collective of S bytes over N GPUs on a link of B GB/s with L us per step.
 *
 *   ring  bytes per GPU 2(N-1)/N S (all-reduce; (N-1)/N S all-gather, reduce-scatter,
 *         all-to-all; S send/recv), steps 2(N-1) (else N-1; 1)
 *   tree  (all-reduce only, pipelined double binary tree) 2 S per GPU in 2 ceil(log2 N) steps
 *   time  = step cost (steps x L) + transfer cost (bytes per GPU / B)
 *   algbw = S / time;  busbw = algbw x 2(N-1)/N (all-reduce), (N-1)/N (AG, RS, A2A), 1 (P2P):
 *         NCCL's bus bandwidth, comparable with the link's
 *
 * e.g. 8 GPUs, 100 MB: 175 MB per GPU by ring, 0.097 ms at 1,800 GB/s, 3.5 ms at 50 GB/s;
 * N = 32: ring 62 steps, tree 10 (124 us vs 20 us at 2 us per step).
 */
#ifndef BRAID_TOOL_PLAN_COLL_H
#define BRAID_TOOL_PLAN_COLL_H

#include <stdio.h>

#include "plan_model.h"

struct braid_plan_coll_algo {
  int valid; /* the tree: all-reduce only */
  double bytes;
  int steps;
  double step_us, transfer_us, time_us;
  double algbw, busbw; /* GB/s */
};

struct braid_plan_coll_result {
  int coll, n;
  double size, bw, lat_us;
  struct braid_plan_coll_algo ring, tree;
  int pick_tree; /* the tree is faster */
};

/* Bus-bandwidth factor of NCCL's tests: 2(n-1)/n, (n-1)/n or 1. */
double braid_plan_coll_busbw_factor(int coll, int n);
/* Both algorithms' figures. Bad input (n < 1, S < 0, bw <= 0, lat < 0, unknown coll):
 * ncclInvalidArgument with a WARN naming it. */
ncclResult_t braid_plan_coll_price(int coll, int n, double S, double bw_GBps, double lat_us,
                                   struct braid_plan_coll_result* r);

/* What braid's tuner picks (a cluster from a topology XML), for the printers. */
struct braid_plan_coll_tuner {
  int valid;
  char algo[24];
  double time_us;
  const char* xml;
  int nodes, ppn;
};

/* The report of one collective, `repeat` calls (e.g. one per layer); tuner may be NULL. */
void braid_plan_coll_print(FILE* out, const struct braid_plan_coll_result* r, int repeat,
                           const struct braid_plan_coll_tuner* tuner);
void braid_plan_coll_json(FILE* out, const struct braid_plan_coll_result* r, int repeat,
                          const struct braid_plan_coll_tuner* tuner);
/* Step cost vs transfer cost over sizes (e.g. 64 KB, 1 MB, 100 MB, 1 GB). */
ncclResult_t braid_plan_coll_table(FILE* out, int coll, int n, const double* sizes, int nsizes, double bw_GBps,
                                   double lat_us);

#endif /* BRAID_TOOL_PLAN_COLL_H */
