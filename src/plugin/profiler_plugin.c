/*
 * profiler_plugin.c - NCCL's profiler plugins behind braid's event interface
 * (profiler_plugin.h): loading with NCCL's search rules, the newest table first (v6 .. v1),
 * one context per communicator, each event described in the layout of the version loaded.
 * Strings are NCCL's (ncclFuncToString, ncclDatatypeToString, ncclAlgoToString,
 * ncclProtoToString of 2.30.7), so a plugin written for NCCL parses braid's events unchanged.
 */
#include "plugin/profiler_plugin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "base/plugin_open.h"
#include "kernels/axes.h"
#include "plugin/profiler_abi.h"

#define PROF_SUBSYS BRAID_LOG_INIT

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int lib_tried;
static int lib_version;                          /* 1..6, 0: none */
static const struct nccl_profiler_v5* lib_table; /* every version's slots after init: see abi */

struct braid_prof {
  void* ctx;
  int mask;
  int rank;
  struct braid_prof* next; /* the open contexts (ctx_lock), for ProxyCtrl */
  void* ctrl_sleep;        /* the ProxyCtrl event of the progress thread's sleep, if any */
  uint64_t comm_id;        /* v1-v3 carry the communicator's name and hash in every event */
  char comm_name[128];
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_prof* ctx_list;

static void prof_log(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  braid_debug_vlog(level, (uint64_t)flags, file, line, fmt, ap);
  va_end(ap);
}

static const char* func_name(int func) {
  switch (func) {
#define BRAID_X(id, name) \
  case id:                \
    return #name;
    BRAID_FUNCS(BRAID_X)
#undef BRAID_X
    default:
      return "Invalid";
  }
}
static const char* p2p_func_name(int is_send) {
  return is_send ? "Send" : "Recv";
}
static const char* dtype_name(int dtype) {
  static const char* names[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return dtype >= 0 && dtype < (int)(sizeof(names) / sizeof(names[0])) ? names[dtype] : "Unknown";
}
static const char* algo_name(int algo) {
  static const char* names[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  return algo >= 0 && algo < 7 ? names[algo] : "Unknown";
}
static const char* proto_name(int proto) {
  static const char* names[] = {"LL", "LL128", "SIMPLE"};
  return proto >= 0 && proto < 3 ? names[proto] : "Unknown";
}
/* NCCL's ncclFunc_t for v1: braid's collective ids are NCCL's; Send 6, Recv 7. */
static uint8_t func_id_v1(const struct braid_prof_event* e) {
  return e->type == NCCL_PROF_P2P ? (uint8_t)(e->is_send ? 6 : 7) : (uint8_t)e->func;
}

static const char* table_name(void) {
  return lib_table->name;
}

static int find_table(void* dl, const char* path) {
  for (int v = 6; v >= 1; v--) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclProfiler_v%d", v);
    const struct nccl_profiler_v5* t = dlsym(dl, sym); /* the slots sit alike in every version */
    if (t == NULL) continue;
    if (t->name == NULL || t->init == NULL || t->startEvent == NULL || t->stopEvent == NULL ||
        t->recordEventState == NULL || t->finalize == NULL) {
      BRAID_WARN("PROFILER/Plugin: %s: %s has empty slots: not used, the run continues without a profiler", path, sym);
      return 0;
    }
    lib_table = t;
    return v;
  }
  const char* newer = dlsym(dl, "ncclProfiler_v7") ? " (it exports ncclProfiler_v7, newer than braid's v6)" : "";
  BRAID_WARN(
      "External profiler plugin %s is unsupported: it exports no ncclProfiler_v6 .. _v1%s; the run continues "
      "without a profiler",
      path, newer);
  return 0;
}

static void load_once(void) {
  char lib[512];
  pthread_mutex_lock(&lib_lock);
  if (lib_tried) goto out;
  lib_tried = 1;
  const char* v = braid_param_str(BRAID_PARAM_PROFILER_PLUGIN);
  if (v == NULL || v[0] == '\0' || strcasecmp(v, "none") == 0) goto out; /* NCCL: unset = none */
  void* dl = braid_plugin_open("PROFILER", "libnccl-profiler", PROF_SUBSYS, v, lib, sizeof(lib));
  if (dl == NULL) {
    BRAID_WARN(
        "PROFILER/Plugin: NCCL_PROFILER_PLUGIN=%s could not be loaded (the PROFILER/Plugin line before says "
        "why); the run continues without a profiler",
        v);
    goto out;
  }
  const char* path = braid_plugin_path(dl, lib);
  lib_version = find_table(dl, path);
  if (lib_version == 0) {
    dlclose(dl);
    goto out;
  }
  BRAID_INFO(PROF_SUBSYS, "PROFILER/Plugin: Loaded %s (v%d)", table_name(), lib_version);
  BRAID_INFO(PROF_SUBSYS, "Successfully loaded external profiler plugin %s", path);
out:
  pthread_mutex_unlock(&lib_lock);
}

static void say_mask(int mask) {
  static const char* names[] = {"Group",     "Coll",         "P2p",       "ProxyOp",  "ProxyStep",
                                "ProxyCtrl", "KernelCh",     "NetPlugin", "GroupApi", "CollApi",
                                "P2pApi",    "KernelLaunch", "CeColl",    "CeSync",   "CeBatch"};
  char buf[256];
  size_t n = 0;
  buf[0] = '\0';
  for (int b = 0; b < 15; b++)
    if ((mask & (1 << b)) && n < sizeof(buf)) n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s ", names[b]);
  BRAID_INFO(PROF_SUBSYS, "Profiler event mask: 0x%x (%d) - Enabled: %s", mask, mask, buf);
}

ncclResult_t braid_prof_open(const struct braid_prof_shape* s, struct braid_prof** p_out) {
  *p_out = NULL;
  load_once();
  if (lib_version == 0) return ncclSuccess;
  struct braid_prof* p = calloc(1, sizeof(*p));
  if (p == NULL) {
    BRAID_WARN("PROFILER/Plugin: failed to allocate a context");
    return ncclSystemError;
  }
  ncclResult_t res;
  const char* name = s->comm_name != NULL ? s->comm_name : "";
  p->comm_id = s->comm_id;
  snprintf(p->comm_name, sizeof(p->comm_name), "%s", name);
  if (lib_version >= 5)
    res = lib_table->init(&p->ctx, s->comm_id, &p->mask, name, s->nnodes, s->nranks, s->rank, prof_log);
  else if (lib_version == 4)
    res = ((const struct nccl_profiler_v4*)lib_table)
              ->init(&p->ctx, &p->mask, name, s->comm_id, s->nnodes, s->nranks, s->rank, prof_log);
  else
    res = ((const struct nccl_profiler_v1*)lib_table)->init(&p->ctx, &p->mask);
  if (res != ncclSuccess) {
    BRAID_WARN("Profiler init failed with error '%d' (%s): rank %d continues without profiler", (int)res,
               ncclGetErrorString(res), s->rank);
    free(p);
    return ncclSuccess;
  }
  say_mask(p->mask);
  p->rank = s->rank;
  pthread_mutex_lock(&ctx_lock);
  p->next = ctx_list, ctx_list = p;
  pthread_mutex_unlock(&ctx_lock);
  *p_out = p;
  return ncclSuccess;
}

void braid_prof_close(struct braid_prof* p) {
  if (p == NULL) return;
  pthread_mutex_lock(&ctx_lock);
  for (struct braid_prof** q = &ctx_list; *q != NULL; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  if (p->ctrl_sleep != NULL) lib_table->stopEvent(p->ctrl_sleep); /* the thread still sleeps */
  pthread_mutex_unlock(&ctx_lock);
  if (p->ctx != NULL) lib_table->finalize(p->ctx);
  free(p);
}

/* Read at every group: a plugin may change the mask later through the pointer init got
 * (NVIDIA's example does, from exampleProfilerStart/Stop). */
int braid_prof_mask(const struct braid_prof* p) {
  return p != NULL ? __atomic_load_n(&p->mask, __ATOMIC_RELAXED) : 0;
}
const char* braid_prof_name(void) {
  return lib_version ? table_name() : NULL;
}
int braid_prof_version(void) {
  return lib_version;
}

/* ---- descriptors per version --------------------------------------------------------------- */

/* The proxy descriptors are alike in every version (v3+ add netPlugin); parentObj is the
 * parent event whatever the version. */
#define FILL_PROXY(d, e)                              \
  do {                                                \
    (d)->parentObj = (e)->parent_obj;                 \
    if ((e)->type == NCCL_PROF_PROXY_OP) {            \
      (d)->proxyOp.pid = (pid_t)(e)->pid;             \
      (d)->proxyOp.channelId = (uint8_t)(e)->channel; \
      (d)->proxyOp.peer = (e)->peer;                  \
      (d)->proxyOp.nSteps = (e)->nsteps;              \
      (d)->proxyOp.chunkSize = (e)->chunk;            \
      (d)->proxyOp.isSend = (e)->is_send;             \
    } else if ((e)->type == NCCL_PROF_PROXY_STEP) {   \
      (d)->proxyStep.step = (e)->step;                \
    }                                                 \
  } while (0)
#define FILL_NET(d, e)                       \
  do {                                       \
    if ((e)->type == NCCL_PROF_NET_PLUGIN) { \
      (d)->netPlugin.id = (e)->net_id;       \
      (d)->netPlugin.data = (e)->net_data;   \
    }                                        \
  } while (0)
#define PROXY_TYPES (NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP | NCCL_PROF_PROXY_CTRL | NCCL_PROF_NET_PLUGIN)

static void fill_v5(const struct braid_prof_event* e, struct nccl_prof_descr_v5* d) {
  d->type = (uint64_t)e->type;
  d->rank = e->rank;
  d->parentObj = e->parent_obj;
  if (e->type == NCCL_PROF_GROUP_API) {
    d->groupApi.groupDepth = e->group_depth;
  } else if (e->type == NCCL_PROF_COLL_API) {
    d->collApi.func = func_name(e->func);
    d->collApi.count = e->count;
    d->collApi.datatype = dtype_name(e->dtype);
    d->collApi.root = e->root;
    d->collApi.stream = e->stream;
  } else if (e->type == NCCL_PROF_P2P_API) {
    d->p2pApi.func = p2p_func_name(e->is_send);
    d->p2pApi.count = e->count;
    d->p2pApi.datatype = dtype_name(e->dtype);
    d->p2pApi.stream = e->stream;
  } else if (e->type == NCCL_PROF_COLL) {
    d->coll.seqNumber = e->seq;
    d->coll.func = func_name(e->func);
    d->coll.sendBuff = e->sendbuff;
    d->coll.recvBuff = e->recvbuff;
    d->coll.count = e->count;
    d->coll.root = e->root;
    d->coll.datatype = dtype_name(e->dtype);
    d->coll.nChannels = (uint8_t)e->nchannels;
    d->coll.nWarps = (uint8_t)e->nwarps;
    d->coll.algo = algo_name(e->algo);
    d->coll.proto = proto_name(e->proto);
    d->coll.parentGroup = e->parent_group;
  } else if (e->type == NCCL_PROF_P2P) {
    d->p2p.func = p2p_func_name(e->is_send);
    d->p2p.buff = e->recvbuff;
    d->p2p.datatype = dtype_name(e->dtype);
    d->p2p.count = e->count;
    d->p2p.peer = e->peer;
    d->p2p.nChannels = (uint8_t)e->nchannels;
    d->p2p.parentGroup = e->parent_group;
  }
}

static void fill_v4(const struct braid_prof_event* e, struct nccl_prof_descr_v4* d) {
  d->type = (uint8_t)e->type;
  d->rank = e->rank;
  d->parentObj = e->parent_group;
  if (e->type == NCCL_PROF_COLL) {
    d->coll.seqNumber = e->seq;
    d->coll.func = func_name(e->func);
    d->coll.sendBuff = e->sendbuff;
    d->coll.recvBuff = e->recvbuff;
    d->coll.count = e->count;
    d->coll.root = e->root;
    d->coll.datatype = dtype_name(e->dtype);
    d->coll.nChannels = (uint8_t)e->nchannels;
    d->coll.nWarps = (uint8_t)e->nwarps;
    d->coll.algo = algo_name(e->algo);
    d->coll.proto = proto_name(e->proto);
  } else if (e->type == NCCL_PROF_P2P) {
    d->p2p.func = p2p_func_name(e->is_send);
    d->p2p.buff = e->recvbuff;
    d->p2p.datatype = dtype_name(e->dtype);
    d->p2p.count = e->count;
    d->p2p.peer = e->peer;
    d->p2p.nChannels = (uint8_t)e->nchannels;
  }
}

/* v2 and v3 share every field up to nMaxChannels except v2's trafficBytes. */
#define FILL_V23(p, d, e)                               \
  do {                                                  \
    (d)->type = (uint8_t)(e)->type;                     \
    (d)->rank = (e)->rank;                              \
    (d)->parentObj = (e)->parent_group;                 \
    if ((e)->type == NCCL_PROF_COLL) {                  \
      (d)->coll.name = (p)->comm_name;                  \
      (d)->coll.commHash = (p)->comm_id;                \
      (d)->coll.seqNumber = (e)->seq;                   \
      (d)->coll.func = func_name((e)->func);            \
      (d)->coll.sendBuff = (e)->sendbuff;               \
      (d)->coll.recvBuff = (e)->recvbuff;               \
      (d)->coll.count = (e)->count;                     \
      (d)->coll.root = (e)->root;                       \
      (d)->coll.datatype = dtype_name((e)->dtype);      \
      (d)->coll.nMaxChannels = (uint8_t)(e)->nchannels; \
      (d)->coll.nWarps = (uint8_t)(e)->nwarps;          \
      (d)->coll.algo = algo_name((e)->algo);            \
      (d)->coll.proto = proto_name((e)->proto);         \
    } else if ((e)->type == NCCL_PROF_P2P) {            \
      (d)->p2p.name = (p)->comm_name;                   \
      (d)->p2p.commHash = (p)->comm_id;                 \
      (d)->p2p.func = p2p_func_name((e)->is_send);      \
      (d)->p2p.buff = (e)->recvbuff;                    \
      (d)->p2p.datatype = dtype_name((e)->dtype);       \
      (d)->p2p.count = (e)->count;                      \
      (d)->p2p.peer = (e)->peer;                        \
    }                                                   \
  } while (0)

static void fill_v1(const struct braid_prof* p, const struct braid_prof_event* e, struct nccl_prof_descr_v1* d) {
  d->type = (uint8_t)e->type;
  d->rank = e->rank;
  d->parentObj = e->parent_group;
  if (e->type == NCCL_PROF_COLL) {
    d->coll.name = p->comm_name;
    d->coll.commHash = p->comm_id;
    d->coll.seqNumber = e->seq;
    d->coll.func = func_id_v1(e);
    d->coll.sendBuff = e->sendbuff;
    d->coll.recvBuff = e->recvbuff;
    d->coll.count = e->count;
    d->coll.root = e->root;
    d->coll.datatype = (uint8_t)e->dtype;
    d->coll.nMaxChannels = (uint8_t)e->nchannels;
    d->coll.nWarps = (uint8_t)e->nwarps;
    d->coll.algo = (uint8_t)e->algo;
    d->coll.proto = (uint8_t)e->proto;
    d->coll.isNvls = e->algo == BRAID_ALGO_NVLS || e->algo == BRAID_ALGO_NVLS_TREE;
  } else if (e->type == NCCL_PROF_P2P) {
    d->p2p.name = p->comm_name;
    d->p2p.commHash = p->comm_id;
    d->p2p.func = func_id_v1(e);
    d->p2p.buff = e->recvbuff;
    d->p2p.datatype = (uint8_t)e->dtype;
    d->p2p.count = e->count;
    d->p2p.peer = e->peer;
  }
}

void* braid_prof_start(struct braid_prof* p, const struct braid_prof_event* e) {
  void* handle = NULL;
  ncclResult_t res;
  if (lib_version < 5 && e->type >= NCCL_PROF_GROUP_API) return NULL;  /* v5's API events: older ABIs lack them */
  if (lib_version < 3 && e->type == NCCL_PROF_NET_PLUGIN) return NULL; /* v3's: v1, v2 lack it */
  int proxy = (e->type & PROXY_TYPES) != 0;
  if (lib_version >= 5) {
    struct nccl_prof_descr_v5 d;
    memset(&d, 0, sizeof(d));
    fill_v5(e, &d);
    if (proxy) {
      FILL_PROXY(&d, e);
      FILL_NET(&d, e);
    }
    res = lib_table->startEvent(p->ctx, &handle, &d);
  } else if (lib_version == 4) {
    struct nccl_prof_descr_v4 d;
    memset(&d, 0, sizeof(d));
    fill_v4(e, &d);
    if (proxy) {
      FILL_PROXY(&d, e);
      FILL_NET(&d, e);
    }
    res = lib_table->startEvent(p->ctx, &handle, &d);
  } else if (lib_version == 3) {
    struct nccl_prof_descr_v3 d;
    memset(&d, 0, sizeof(d));
    FILL_V23(p, &d, e);
    if (proxy) {
      FILL_PROXY(&d, e);
      FILL_NET(&d, e);
    }
    res = lib_table->startEvent(p->ctx, &handle, &d);
  } else if (lib_version == 2) {
    struct nccl_prof_descr_v2 d;
    memset(&d, 0, sizeof(d));
    FILL_V23(p, &d, e);
    if (proxy) FILL_PROXY(&d, e);
    res = lib_table->startEvent(p->ctx, &handle, &d);
  } else {
    struct nccl_prof_descr_v1 d;
    memset(&d, 0, sizeof(d));
    fill_v1(p, e, &d);
    if (proxy) FILL_PROXY(&d, e);
    res = lib_table->startEvent(p->ctx, &handle, &d);
  }
  return res == ncclSuccess ? handle : NULL; /* a failing start is the plugin's business (NCCL: ignored) */
}

void braid_prof_stop(struct braid_prof* p, void* handle) {
  (void)p;
  if (handle != NULL) lib_table->stopEvent(handle);
}

void braid_prof_record(void* handle, int state, size_t trans_size, int steps, void* data) {
  if (handle == NULL) return;
  union nccl_prof_state_args a;
  memset(&a, 0, sizeof(a));
  if (state == BRAID_PROF_NET_PLUGIN_UPDATE) {
    a.data = data;
  } else {
    a.proxy.transSize = trans_size; /* v4+: proxyStep.transSize, the same place */
    a.proxy.steps = steps;
  }
  lib_table->recordEventState(handle, state, &a);
}

void braid_prof_ctrl(int what) {
  static const int states[] = {BRAID_PROF_CTRL_IDLE, BRAID_PROF_CTRL_ACTIVE, BRAID_PROF_CTRL_SLEEP,
                               BRAID_PROF_CTRL_WAKEUP};
  pthread_mutex_lock(&ctx_lock);
  for (struct braid_prof* p = ctx_list; p != NULL; p = p->next) {
    if (what == 3) { /* wake-up: the sleep's event, if one started */
      if (p->ctrl_sleep != NULL) {
        braid_prof_record(p->ctrl_sleep, states[what], 0, 0, NULL);
        lib_table->stopEvent(p->ctrl_sleep);
        p->ctrl_sleep = NULL;
      }
      continue;
    }
    if (!(braid_prof_mask(p) & NCCL_PROF_PROXY_CTRL) || what < 0 || what > 2) continue;
    struct braid_prof_event e = {.type = NCCL_PROF_PROXY_CTRL, .rank = p->rank};
    void* h = braid_prof_start(p, &e);
    braid_prof_record(h, states[what], 0, 0, NULL);
    if (what == 2)
      p->ctrl_sleep = h;
    else if (h != NULL)
      lib_table->stopEvent(h);
  }
  pthread_mutex_unlock(&ctx_lock);
}
