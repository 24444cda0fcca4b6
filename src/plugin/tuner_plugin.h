/*
 * tuner_plugin.h - NCCL's tuner plugins (NCCL_TUNER_PLUGIN, ncclTunerPlugin_v6 .. _v2;
 * tuner_abi.h) for braid's cost model (topo/tuner.c). The library is found once per process
 * with NCCL's search rules (base/plugin_open.h, prefix libnccl-tuner; "none" disables) and
 * stays loaded; each communicator gets its own plugin context.
 *
 * Per call the model fills NCCL's cost table (float[7][3], microseconds, -1 where braid cannot
 * run the pair: CollNet, NVLS, PAT, or excluded by NCCL_ALGO/NCCL_PROTO) and hands it to the
 * plugin, which may change costs (v3+) or name an algorithm and protocol (v2, made cost 0 as
 * NCCL does) and a channel count. braid_tuner_plugin_apply then validates: a cost the plugin
 * set on a pair braid cannot run is ignored with one INFO per pair and communicator ("ignored"),
 * a channel count above what the communicator has is capped (INFO), a negative one ignored.
 * v6's getChunkSize sets the bytes per step of a call (braid_tuner_plugin_chunk, core/plan.c).
 */
#ifndef BRAID_TUNER_PLUGIN_H
#define BRAID_TUNER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define BRAID_TUNER_PLUGIN_ALGOS 7
#define BRAID_TUNER_PLUGIN_PROTOS 3

struct braid_tuner_plugin; /* one communicator's context */

/* What v5's init gets to see and may change: braid's latency tables (in microseconds), in
 * NCCL's dimensions; the other v5 constants are zero (braid's model has no such tables). */
struct braid_tuner_plugin_shape {
  uint64_t comm_id;
  int nranks, nnodes;
  int nvl_domains, min_ranks_per_nvl_domain, max_ranks_per_nvl_domain;
  float base_lat[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS];
  float hw_lat[3][BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS]; /* NVLink, PCI, network */
};

/* The communicator's plugin context, *p = NULL when there is no plugin (not an error). A
 * plugin whose init fails is not used by this communicator (WARN); the call still succeeds. */
ncclResult_t braid_tuner_plugin_open(const struct braid_tuner_plugin_shape* shape, struct braid_tuner_plugin** p);
void braid_tuner_plugin_close(struct braid_tuner_plugin* p);

/* Ask the plugin about one call: cost[a][p] (in/out, -1 = cannot run), *nchannels (in: what
 * the model chose; out: what to use, at most max_channels). Returns 1 when the plugin changed
 * anything, 0 otherwise; a failed getCollInfo is a WARN and leaves everything as it was. */
int braid_tuner_plugin_apply(struct braid_tuner_plugin* p, int func, size_t bytes,
                             float cost[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS], int* nchannels,
                             int max_channels);
/* v6's getChunkSize for a call braid runs (algo, proto, nch chosen): the bytes per step to use,
 * given braid's `chunk` (one FIFO slot's payload, the most a step carries): the plugin's value
 * rounded down to whole `unit`s (at least one) and capped at `chunk` (the first change is one
 * INFO per communicator); `chunk` without a v6 plugin, a NULL slot or a failed call (WARN). */
size_t braid_tuner_plugin_chunk(struct braid_tuner_plugin* p, int func, size_t bytes, int algo, int proto, int nch,
                                size_t chunk, size_t unit);
/* The plugin's name and ABI version, for logs; NULL / 0 without one. */
const char* braid_tuner_plugin_name(const struct braid_tuner_plugin* p);
int braid_tuner_plugin_version(const struct braid_tuner_plugin* p);

#endif /* BRAID_TUNER_PLUGIN_H */
