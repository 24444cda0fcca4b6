/*
 * tuner.h - the cost model that picks algorithm, protocol, channels and threads for each
 * collective call, from the channel graph (graph.h): time = latency + bytes / bandwidth per
 * function x algorithm x protocol (reference section 7; constants in tuner_tables.h).
 *
 * Which algorithms braid's data path runs is the last column of BRAID_ALGOS (kernels/axes.h;
 * today Ring and Tree); in host mode on one node also NVLS, as one-shot / two-shot all-reduces
 * over shared memory, once braid_tuner_enable_lsa said so (its column stays 0: it runs only
 * there). The model also prices NVLS, NVLSTree and PAT where the machine would support them
 * (CollNet never, there is no CollNet plugin), so tools can show them, clearly marked;
 * braid_tuner_choose never picks an algorithm the data path lacks.
 *
 * NCCL_ALGO / NCCL_PROTO restrict the choice with NCCL's syntax (tuner_env.c): a list
 * ("Ring,Tree"), an exclusion ("^Tree"), and per-function entries after the first
 * ("ring;allreduce:tree"), case-insensitive; a bad token is a WARN naming it and
 * ncclInvalidUsage from braid_tuner_init.
 *
 * ncclGroupSimulateEnd (group.c) reports the sum of braid_tuner_choose's time_us over a group's
 * collectives: the prediction (braid_tuner_predict) of each chosen algorithm and protocol.
 */
#ifndef BRAID_TUNER_H
#define BRAID_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/axes.h"
#include "nccl.h"
#include "topo/graph.h"

struct braid_tuner;

struct braid_tuner_choice {
  int algo, proto; /* enum braid_algo / braid_proto */
  int nchannels;   /* channels 0..nchannels-1 of the graph */
  int nthreads;    /* threads per channel (1 in host mode) */
  float time_us;   /* predicted */
  int variant;     /* algo NVLS: enum braid_lsa_mode (one-shot / two-shot); Reduce, Ring,
                      Simple: BRAID_TUNER_REDUCE_SPLIT or 0 (the chain); else 0 */
};
/* Reduce's split schedule (algo/ring.h; BRAID_REDUCE_SPLIT_BYTES and up, two ranks in host
 * mode on one node): each rank reduces half, where the connections allow (kernels/coll.h). */
#define BRAID_TUNER_REDUCE_SPLIT 1

ncclResult_t braid_tuner_init(const struct braid_channel_graph* g, int nranks, int nnodes, struct braid_tuner** t_p);
void braid_tuner_free(struct braid_tuner* t);
/* NCCL_TUNER_PLUGIN (plugin/tuner_plugin.h): this communicator's plugin context, when a plugin
 * is loaded; from then on braid_tuner_choose hands each call's cost table to it. */
ncclResult_t braid_tuner_attach_plugin(struct braid_tuner* t, uint64_t comm_id);
struct braid_tuner_plugin;
/* That context (NULL: none), for the per-call questions the plan asks (v6's chunk size). */
struct braid_tuner_plugin* braid_tuner_plugin_of(const struct braid_tuner* t);

/* The fastest allowed and implemented choice for `bytes` (max of send and receive size) of
 * function `func` (enum braid_func, not SendRecv). Logs NCCL's TUNING line
 * "AllReduce: 1048576 Bytes -> Algo Ring proto LL128 channel{Lo..Hi}={0..15}" unless
 * logging was turned off. None allowed: WARN and ncclInvalidUsage. */
ncclResult_t braid_tuner_choose(const struct braid_tuner* t, int func, size_t bytes, struct braid_tuner_choice* out);
/* For a caller that keeps an answer of braid_tuner_choose per call shape (the lone all-reduce,
 * core/sym/lsa.c): an answer got while this returns a value stands while it returns the same;
 * 0: ask every time (a tuner plugin is asked on every call; TUNING lines are printed for every
 * call while logged). Changes with whatever changes choices (tuner_memo.h). */
uint32_t braid_tuner_epoch(const struct braid_tuner* t);
/* Predicted microseconds, -1 when the model has no value (unsupported here, or excluded by
 * NCCL_ALGO/NCCL_PROTO). Model-only algorithms (NVLS, PAT) do get a value. */
float braid_tuner_predict(const struct braid_tuner* t, int func, int algo, int proto, size_t bytes);
/* The fastest choice over everything the model prices, implemented or not (for tools). */
ncclResult_t braid_tuner_model_best(const struct braid_tuner* t, int func, size_t bytes,
                                    struct braid_tuner_choice* out);

/* TUNING lines from braid_tuner_choose: init turns them off on ranks other than 0. */
void braid_tuner_set_log(struct braid_tuner* t, int enabled);
/* NCCL's init table of the model (TUNING, INFO): latency/bandwidth per function, algorithm and
 * protocol; the network rows show the plugin's speed and latency. */
void braid_tuner_log_model(const struct braid_tuner* t);
/* The communicator runs at most `n` channels (host mode: fewer than the graph offers when
 * cores are few): choices and TUNING lines never name more. */
void braid_tuner_cap_channels(struct braid_tuner* t, int n);
/* Does the data path run this algorithm (BRAID_ALGOS' last column)? NVLS in host mode: only
 * where braid_tuner_enable_lsa said so, for all-reduces up to its size (tuner.c). */
int braid_tuner_implemented(int algo);
/* Host mode, one node: the communicator has the one-/two-shot scratch (core/sym/lsa.c), so NVLS
 * all-reduces up to max_bytes are offered, priced by the LSA rows of tuner_tables.h (ncores:
 * the CPUs the ranks share; more ranks than that wait in turns). */
void braid_tuner_enable_lsa(struct braid_tuner* t, size_t max_bytes, int ncores);
/* Device mode, one node, every GPU reaching every other (core/sym/lsa.c): the same over device
 * memory, priced by the LSA block's device row. */
void braid_tuner_enable_lsa_device(struct braid_tuner* t, size_t max_bytes);

/* Names: NCCL's spelling ("AllReduce", "Ring", "LL128"); "?" out of range. */
const char* braid_tuner_func_name(int func);
const char* braid_tuner_algo_name(int algo);
const char* braid_tuner_proto_name(int proto);

/* ---- NCCL_ALGO / NCCL_PROTO (tuner_env.c) ---- */
enum braid_tuner_list_kind { BRAID_TUNER_LIST_ALGO = 0, BRAID_TUNER_LIST_PROTO = 1 };
#define BRAID_TUNER_LIST_MAX 8
/* Parse `str` (NULL or "" = everything). on[f][x]: allowed for function f; named[f][x]: named
 * in a positive list (enables what is off by default, like LL128 over PCIe). `var` names the
 * variable in messages. Bad syntax: WARN naming the token, ncclInvalidUsage. */
ncclResult_t braid_tuner_parse_list(const char* str, int kind, const char* var,
                                    uint8_t on[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX],
                                    uint8_t named[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX]);

#endif /* BRAID_TUNER_H */
