/*
 * plan_model.h - the communication model behind tools/braid-plan: given a cluster, a
 * transformer model and a layout TP x PP x DP (x EP), which collectives each parallelism
 * issues per training step, how many bytes each GPU moves, which link they cross (the
 * NVLink domain or the network) and how long they take; and a search over every valid
 * layout of a GPU count, ranked by communication time per step.
 *
 * Two ways to price a collective:
 *   - analytic (a cluster given by numbers): time = steps x latency + bytes per GPU /
 *     bandwidth, with ring all-reduce moving 2(N-1)/N x S per GPU in 2(N-1) steps,
 *     all-gather / reduce-scatter / all-to-all (N-1)/N x S in N-1 steps, a (pipelined)
 *     tree all-reduce 2 S in 2 log2 N steps; the faster of ring and tree is taken.
 *   - braid's tuner (a cluster given by a topology XML, replicated over nodes): all-reduce,
 *     all-gather and reduce-scatter come from braid_tuner_choose on the channels of a
 *     communicator shaped like the group (ranks per node x nodes); all-to-all and
 *     send/recv, which the tuner does not price, use the analytic formulas with bandwidths
 *     taken from the system graph.
 *
 * Rank order (Megatron's): TP innermost (consecutive ranks), then EP inside DP, then DP,
 * PP outermost. A group of size n with stride s spans the NVLink domains its members fall
 * in. Pure functions except braid_plan_model_cluster_xml / _free (allocation) and the
 * tuner's own logging; no printing.
 */
#ifndef BRAID_PLAN_MODEL_H
#define BRAID_PLAN_MODEL_H

#include <stddef.h>

#include "nccl.h"

/* ---- primitive formulas (textbook, used by both pricings) ---- */

enum braid_plan_coll {
  BRAID_PLAN_ALLREDUCE = 0,
  BRAID_PLAN_ALLGATHER = 1,
  BRAID_PLAN_REDUCESCATTER = 2,
  BRAID_PLAN_ALLTOALL = 3,
  BRAID_PLAN_SENDRECV = 4,
  BRAID_PLAN_NUM_COLLS
};
const char* braid_plan_model_coll_name(int coll);

/* Bytes one GPU sends for a collective of S bytes (the full buffer) over n GPUs by ring:
 * all-reduce 2(n-1)/n S, all-gather / reduce-scatter / all-to-all (n-1)/n S, send/recv S.
 * n <= 1: 0 (send/recv: S). */
double braid_plan_model_ring_bytes(int coll, int n, double S);
/* Latency steps of a ring: all-reduce 2(n-1), the others n-1, send/recv 1. */
int braid_plan_model_ring_steps(int coll, int n);
/* Steps of a double binary tree all-reduce: 2 ceil(log2 n) (0 for n <= 1). */
int braid_plan_model_tree_steps(int n);
/* Bytes per GPU of a pipelined tree all-reduce: 2 S (0 for n <= 1). */
double braid_plan_model_tree_bytes(int n, double S);
/* steps x lat_us + bytes / (bw_GBps * 1e3), in microseconds. */
double braid_plan_model_time_us(int steps, double lat_us, double bytes, double bw_GBps);

/* ---- cluster ---- */

struct braid_tuner;
struct braid_topo_system;

#define BRAID_PLAN_TUNER_CACHE 64

struct braid_plan_cluster {
  int nodes, gpus_per_node;
  int nvl_domain;         /* GPUs joined by NVLink (a multiple or divisor of gpus_per_node) */
  double nvl_bw;          /* GB/s per GPU inside the domain */
  double nic_bw;          /* GB/s per GPU over the network */
  double nvl_lat_us;      /* per step inside the domain */
  double net_lat_us;      /* per step over the network */
  const char* intra_name; /* link label inside the domain ("NVLink", or the path type) */
  /* XML: the system and tuners per group shape (ranks per node x nodes); NULL: analytic. */
  struct braid_topo_system* sys;
  int ncache;
  struct {
    int ppn, nnodes;
    struct braid_tuner* t; /* NULL when the shape failed (priced analytically) */
  } cache[BRAID_PLAN_TUNER_CACHE];
};

/* The analytic cluster. Bad numbers: ncclInvalidArgument naming the field. */
ncclResult_t braid_plan_model_cluster_init(int nodes, int gpus_per_node, int nvl_domain, double nvl_bw, double nic_bw,
                                           struct braid_plan_cluster* c);
/* A cluster of `nodes` copies of the system in `xml` (every GPU of it used); bandwidths
 * from its graph. Release with braid_plan_model_cluster_free. */
ncclResult_t braid_plan_model_cluster_xml(const char* xml, int nodes, struct braid_plan_cluster* c);
void braid_plan_model_cluster_free(struct braid_plan_cluster* c);

/* ---- model and layout ---- */

struct braid_plan_model {
  int layers;
  int hidden;
  int seq;
  int micro_batch;    /* sequences per micro-batch */
  int micro_batches;  /* micro-batches per step (per pipeline) */
  int bytes_per_elem; /* activations and gradients */
  double params;      /* total parameters */
  int experts, topk;  /* MoE (experts 0: dense) */
  int ffn;            /* MLP width (expert MLP for MoE); 0: 4 x hidden */
  int zero;           /* ZeRO stage 0..3 */
  double tflops;      /* sustained TFLOP/s per GPU, for the overlap warning */
  double gpu_mem_gb;  /* memory per GPU for the fit check (0: no check) */
};

struct braid_plan_layout {
  int tp, pp, dp, ep; /* ep divides dp; 1: none */
};

/* One line of the plan: a parallelism's collective. */
struct braid_plan_item {
  const char* what; /* "TP", "EP", "PP", "DP", "DP-expert", "ZeRO" */
  int coll;         /* enum braid_plan_coll */
  int group;        /* GPUs in the group */
  double count;     /* calls per step per GPU */
  double size;      /* S: bytes of the buffer per call */
  double bytes;     /* bytes each GPU sends per call */
  int network;      /* crosses the network (else inside the NVLink domain) */
  int ppn;          /* group members per NVLink domain */
  char algo[24];    /* "Ring", "Tree", "Ring/LL128" (tuner), "Direct" ... */
  double time_us;   /* per call */
  double total_us;  /* count x time */
};

#define BRAID_PLAN_MAX_ITEMS 8
enum braid_plan_warn_bits {
  BRAID_PLAN_WARN_TP_DOMAIN = 1,  /* TP larger than the NVLink domain */
  BRAID_PLAN_WARN_EP_NETWORK = 2, /* EP all-to-all crosses nodes */
  BRAID_PLAN_WARN_DP_EXPOSED = 4, /* DP reduction longer than the backward it hides behind */
  BRAID_PLAN_WARN_BUBBLE = 8,     /* pipeline bubble above 10% */
  BRAID_PLAN_WARN_MEMORY = 16     /* model states do not fit gpu_mem_gb */
};

struct braid_plan_result {
  struct braid_plan_layout layout;
  int nitems;
  struct braid_plan_item items[BRAID_PLAN_MAX_ITEMS];
  double total_us;    /* communication per step */
  double bubble;      /* (pp-1)/(m+pp-1) */
  double backward_us; /* compute of one micro-batch's backward (the window DP hides in) */
  double dp_us;       /* DP (and ZeRO) time per step */
  double mem_gb;      /* weights + grads + Adam states per GPU (16 B/param, ZeRO-divided) */
  int warn;           /* enum braid_plan_warn_bits */
};

/* Check the model (ncclInvalidArgument naming the field). */
ncclResult_t braid_plan_model_check(const struct braid_plan_model* m);
/* Is the layout valid for the cluster and model? 0/1; why (static text) when not. */
int braid_plan_model_layout_valid(const struct braid_plan_cluster* c, const struct braid_plan_model* m,
                                  const struct braid_plan_layout* l, const char** why);
/* Placement of a group of n GPUs whose members are `stride` ranks apart: members per
 * NVLink domain and domains spanned. */
void braid_plan_model_placement(const struct braid_plan_cluster* c, int n, int stride, int* ppn_p, int* ndomains_p);
/* Price one collective of S bytes over a group of n GPUs, stride apart. */
ncclResult_t braid_plan_model_coll(struct braid_plan_cluster* c, int coll, int n, int stride, double S,
                                   struct braid_plan_item* it);
/* The plan of one layout. Invalid layout: ncclInvalidArgument with the reason. */
ncclResult_t braid_plan_model_evaluate(struct braid_plan_cluster* c, const struct braid_plan_model* m,
                                       const struct braid_plan_layout* l, struct braid_plan_result* r);
/* Every valid layout for the cluster's GPUs (EP only for MoE), ranked: layouts that fit in
 * memory first, then by communication time per step. *out_p malloc'd (caller frees). */
ncclResult_t braid_plan_model_search(struct braid_plan_cluster* c, const struct braid_plan_model* m,
                                     struct braid_plan_result** out_p, int* n_p);

#endif /* BRAID_PLAN_MODEL_H */
