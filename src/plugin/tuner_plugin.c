/*
 * tuner_plugin.c - NCCL's tuner plugins behind braid's cost model (tuner_plugin.h).
 */
#include "plugin/tuner_plugin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/check.h"
#include "base/param.h"
#include "base/plugin_open.h"
#include "plugin/tuner_abi.h"

#define TUNER_SUBSYS (BRAID_LOG_INIT | BRAID_LOG_TUNING)

/* The library, found once per process. */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int lib_tried;
static int lib_version; /* 2..6, 0: none */
static const void* lib_table;

struct braid_tuner_plugin {
  void* ctx;
  uint8_t warned[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS]; /* "ignored" said once */
  int warned_channels;
  int said_chunk; /* the first chunk size taken from the plugin, said once */
};

static void tuner_log(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  braid_debug_vlog(level, (uint64_t)flags, file, line, fmt, ap);
  va_end(ap);
}

static const char* table_name(void) {
  return ((const struct nccl_tuner_v2*)lib_table)->name; /* the first slot in every version */
}

/* The newest table the library exports with every slot set; 0 when none. */
static int find_table(void* dl, const char* path) {
  for (int v = 6; v >= 2; v--) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclTunerPlugin_v%d", v);
    const struct nccl_tuner_v2* t = dlsym(dl, sym); /* name, init, getCollInfo, destroy in every version */
    if (t == NULL) continue;
    if (t->name == NULL || t->init == NULL || t->getCollInfo == NULL || t->destroy == NULL) {
      BRAID_INFO(TUNER_SUBSYS, "TUNER/Plugin: %s: %s has empty slots, not used", path, sym);
      return 0;
    }
    lib_table = t;
    return v;
  }
  const char* newer = dlsym(dl, "ncclTunerPlugin_v7") ? " (it exports ncclTunerPlugin_v7, newer than braid's v6)" : "";
  BRAID_INFO(TUNER_SUBSYS, "External tuner plugin %s is unsupported%s", path, newer);
  return 0;
}

static void load_once(void) {
  char lib[512];
  pthread_mutex_lock(&lib_lock);
  if (lib_tried) goto out;
  lib_tried = 1;
  const char* v = braid_param_str(BRAID_PARAM_TUNER_PLUGIN);
  if (v != NULL && strcasecmp(v, "none") == 0) goto out;
  void* dl = braid_plugin_open("TUNER", "libnccl-tuner", TUNER_SUBSYS, v, lib, sizeof(lib));
  if (dl == NULL) goto out;
  const char* path = braid_plugin_path(dl, lib);
  lib_version = find_table(dl, path);
  if (lib_version == 0) {
    dlclose(dl);
    goto out;
  }
  BRAID_INFO(TUNER_SUBSYS, "Successfully loaded external tuner plugin %s", path);
  BRAID_INFO(TUNER_SUBSYS, "TUNER/Plugin: Using %s (v%d)", table_name(), lib_version);
out:
  pthread_mutex_unlock(&lib_lock);
}

static ncclResult_t init_v5(const struct braid_tuner_plugin_shape* s, void** ctx) {
  struct nccl_tuner_nvl_domain_v5 nvl = {s->nvl_domains, s->min_ranks_per_nvl_domain, s->max_ranks_per_nvl_domain};
  struct nccl_tuner_constants_v5 k, before;
  memset(&k, 0, sizeof(k));
  for (int a = 0; a < BRAID_TUNER_PLUGIN_ALGOS; a++)
    for (int p = 0; p < BRAID_TUNER_PLUGIN_PROTOS; p++) {
      k.baseLatencies[a][p] = s->base_lat[a][p];
      for (int h = 0; h < NCCL_ABI_NUM_HW_LINKS; h++) k.hwLatencies[h][a][p] = s->hw_lat[h][a][p];
    }
  before = k;
  const struct nccl_tuner_v5* t = lib_table; /* v6: the same init */
  BRAID_CHECK(t->init(ctx, s->comm_id, (size_t)s->nranks, (size_t)s->nnodes, tuner_log, &nvl, &k));
  if (memcmp(&k, &before, sizeof(k)) != 0)
    BRAID_INFO(BRAID_LOG_TUNING,
               "TUNER/Plugin: %s changed the tuning constants; braid's cost model does not take "
               "them (ignored); it may still change each call's costs",
               table_name());
  return ncclSuccess;
}

ncclResult_t braid_tuner_plugin_open(const struct braid_tuner_plugin_shape* s, struct braid_tuner_plugin** p_out) {
  *p_out = NULL;
  load_once();
  if (lib_version == 0) return ncclSuccess;
  struct braid_tuner_plugin* p = calloc(1, sizeof(*p));
  if (p == NULL) {
    BRAID_WARN("TUNER/Plugin: failed to allocate a context");
    return ncclSystemError;
  }
  ncclResult_t res;
  if (lib_version >= 5)
    res = init_v5(s, &p->ctx);
  else /* v2..v4: the same init */
    res = ((const struct nccl_tuner_v2*)lib_table)->init((size_t)s->nranks, (size_t)s->nnodes, tuner_log, &p->ctx);
  if (res != ncclSuccess) {
    BRAID_WARN("TUNER/Plugin: %s init failed (%s): this communicator uses braid's own choices", table_name(),
               ncclGetErrorString(res));
    free(p);
    return ncclSuccess;
  }
  *p_out = p;
  return ncclSuccess;
}

void braid_tuner_plugin_close(struct braid_tuner_plugin* p) {
  if (p == NULL) return;
  /* destroy (v2..v4) and finalize (v5, v6) sit in the same slot */
  ((const struct nccl_tuner_v2*)lib_table)->destroy(p->ctx);
  free(p);
}

/* v2: the plugin names a pair; made cost 0 (chosen) when braid can run it. */
static ncclResult_t ask_v2(struct braid_tuner_plugin* p, int func, size_t bytes,
                           float cost[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS], int* nch, int* named_a,
                           int* named_p) {
  const struct nccl_tuner_v2* t = lib_table;
  int algo = -1, proto = -1;
  BRAID_CHECK(t->getCollInfo(p->ctx, func, bytes, 0 /* collNet */, 0 /* NVLS */, 1, &algo, &proto, nch));
  *named_a = algo, *named_p = proto;
  if (algo >= 0 && algo < BRAID_TUNER_PLUGIN_ALGOS && proto >= 0 && proto < BRAID_TUNER_PLUGIN_PROTOS &&
      cost[algo][proto] != NCCL_ABI_ALGO_PROTO_IGNORE)
    cost[algo][proto] = 0.0f;
  return ncclSuccess;
}

static ncclResult_t ask(struct braid_tuner_plugin* p, int func, size_t bytes,
                        float cost[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS], int* nch, int* named_a,
                        int* named_p) {
  float** table = (float**)cost; /* NCCL passes its float[7][3] so */
  switch (lib_version) {
    case 2:
      return ask_v2(p, func, bytes, cost, nch, named_a, named_p);
    case 3:
      return ((const struct nccl_tuner_v3*)lib_table)
          ->getCollInfo(p->ctx, func, bytes, 1, table, BRAID_TUNER_PLUGIN_ALGOS, BRAID_TUNER_PLUGIN_PROTOS, nch);
    case 4:
      return ((const struct nccl_tuner_v4*)lib_table)
          ->getCollInfo(p->ctx, func, bytes, 1, table, BRAID_TUNER_PLUGIN_ALGOS, BRAID_TUNER_PLUGIN_PROTOS, 0, nch);
    default: /* v5, v6: the same getCollInfo */
      return ((const struct nccl_tuner_v5*)lib_table)
          ->getCollInfo(p->ctx, func, bytes, 1, table, BRAID_TUNER_PLUGIN_ALGOS, BRAID_TUNER_PLUGIN_PROTOS, 0, nch);
  }
}

static void say_ignored(struct braid_tuner_plugin* p, int a, int q, const char* how) {
  if (a < 0 || a >= BRAID_TUNER_PLUGIN_ALGOS || q < 0 || q >= BRAID_TUNER_PLUGIN_PROTOS) {
    BRAID_INFO(BRAID_LOG_TUNING, "TUNER/Plugin: %s %s algorithm %d protocol %d, which do not exist (ignored)",
               table_name(), how, a, q);
    return;
  }
  if (p->warned[a][q]) return;
  p->warned[a][q] = 1;
  BRAID_INFO(BRAID_LOG_TUNING,
             "TUNER/Plugin: %s %s algorithm %d protocol %d, which braid does not run here (ignored; the pairs "
             "it runs have a cost in the table)",
             table_name(), how, a, q);
}

int braid_tuner_plugin_apply(struct braid_tuner_plugin* p, int func, size_t bytes,
                             float cost[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS], int* nchannels,
                             int max_channels) {
  float before[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS],
      work[BRAID_TUNER_PLUGIN_ALGOS][BRAID_TUNER_PLUGIN_PROTOS];
  int nch = 0, named_a = -1, named_p = -1, changed = 0;
  if (p == NULL) return 0;
  memcpy(before, cost, sizeof(before));
  memcpy(work, cost, sizeof(work));
  ncclResult_t res = ask(p, func, bytes, work, &nch, &named_a, &named_p);
  if (res != ncclSuccess) {
    BRAID_WARN("TUNER/Plugin: %s getCollInfo failed (%s) for function %d, %zu bytes: braid's own choice is used",
               table_name(), ncclGetErrorString(res), func, bytes);
    return 0;
  }
  if (lib_version == 2 && named_a >= 0 &&
      (named_a >= BRAID_TUNER_PLUGIN_ALGOS || named_p < 0 || named_p >= BRAID_TUNER_PLUGIN_PROTOS ||
       cost[named_a][named_p] < 0))
    say_ignored(p, named_a, named_p, "chose");
  for (int a = 0; a < BRAID_TUNER_PLUGIN_ALGOS; a++)
    for (int q = 0; q < BRAID_TUNER_PLUGIN_PROTOS; q++) {
      if (work[a][q] == before[a][q]) continue;
      if (before[a][q] < 0) { /* braid cannot run it: the plugin's cost stays unused */
        say_ignored(p, a, q, "priced");
        continue;
      }
      cost[a][q] = work[a][q] < 0 ? NCCL_ABI_ALGO_PROTO_IGNORE : work[a][q]; /* it may also rule a pair out */
      changed = 1;
    }
  if (nch > 0) {
    if (nch > max_channels) {
      if (!p->warned_channels)
        BRAID_INFO(BRAID_LOG_TUNING, "TUNER/Plugin: %s asked for %d channels; this communicator has %d (capped)",
                   table_name(), nch, max_channels);
      p->warned_channels = 1;
      nch = max_channels;
    }
    if (nch != *nchannels) changed = 1;
    *nchannels = nch;
  } else if (nch < 0 && !p->warned_channels) {
    BRAID_INFO(BRAID_LOG_TUNING, "TUNER/Plugin: %s asked for %d channels (ignored)", table_name(), nch);
    p->warned_channels = 1;
  }
  return changed;
}

size_t braid_tuner_plugin_chunk(struct braid_tuner_plugin* p, int func, size_t bytes, int algo, int proto, int nch,
                                size_t chunk, size_t unit) {
  const struct nccl_tuner_v6* t = lib_table;
  if (p == NULL || lib_version < 6 || t->getChunkSize == NULL) return chunk;
  size_t want = chunk;
  ncclResult_t res = t->getChunkSize(p->ctx, func, bytes, algo, proto, nch, &want);
  if (res != ncclSuccess) {
    BRAID_WARN("TUNER/Plugin: %s getChunkSize failed (%s) for function %d, %zu bytes: braid's chunk is used",
               table_name(), ncclGetErrorString(res), func, bytes);
    return chunk;
  }
  if (want == chunk) return chunk;
  /* At most one FIFO slot (NCCL clamps to its buffer too), whole units, at least one unit. */
  size_t got = want > chunk ? chunk : want / unit * unit;
  if (got < unit) got = unit < chunk ? unit : chunk;
  if (!p->said_chunk) {
    p->said_chunk = 1;
    BRAID_INFO(BRAID_LOG_TUNING,
               "TUNER/Plugin: %s asked for %zu-byte chunks (function %d, %zu bytes, algorithm %d protocol %d, %d "
               "channels); braid uses %zu-byte steps (its own: %zu; whole %zu-byte units, at most one FIFO slot)",
               table_name(), want, func, bytes, algo, proto, nch, got, chunk, unit);
  }
  return got;
}

const char* braid_tuner_plugin_name(const struct braid_tuner_plugin* p) {
  return p != NULL ? table_name() : NULL;
}

int braid_tuner_plugin_version(const struct braid_tuner_plugin* p) {
  return p != NULL ? lib_version : 0;
}
