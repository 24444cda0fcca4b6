/*
 * nccl_adapt.c - NCCL's net plugins v6..v12 behind struct braid_net_v1 (nccl_adapt.h).
 */
#include "transport/net/plugin/nccl_adapt.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "device/device.h"
#include "transport/net/net_prof.h"
#include "transport/net/plugin/nccl_net_abi.h"

#define NCCL_PTR_BITS 0x7   /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
#define MAX_GROUPED_RECVS 8 /* the most receives braid groups into one irecv */

/* The library in use. */
static struct {
  int version;
  const void* tab;
  const struct braid_net_ext_v1* ext;
  struct braid_net_v1 net; /* what braid calls */
  int inited;              /* init once per process (v11: the context devices() needs before any comm) */
  int dmabuf;              /* some device declared NCCL_PTR_DMABUF: device memory goes through regMrDmaBuf */
  void* probe_ctx;
} A;

#define T(v) ((const struct nccl_net_v##v*)A.tab)

/* A per-communicator context: v11's own, v10's config for connect. */
struct actx {
  struct nccl_net_comm_config cfg;
  void* pctx;
};

/* A request: test() reports one int per grouped receive. */
struct areq {
  void* req;
  int n;
};

/* NCCL's logger over braid's (same level and subsystem numbers). */
static void nccl_log(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  braid_debug_vlog(level, (uint64_t)flags, file, line, fmt, ap);
  va_end(ap);
}

/* The profiler callback a v10+ plugin reports its network events to: NetPlugin events under
 * the ProxyStep whose handle the plugin got with the request (transport/net/net_prof.c). */
static ncclResult_t nccl_prof(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  return braid_net_prof_callback(eHandle, type, pHandle, pluginId, extData);
}

/* braid's logger has NCCL's signature modulo names; the plugin gets nccl_log instead. */
static ncclResult_t a_init(braid_net_log_fn log) {
  ncclResult_t res;
  struct nccl_net_comm_config cfg = {NCCL_ABI_NET_TRAFFIC_CLASS_UNDEF};
  (void)log;
  if (A.inited) return ncclSuccess;
  switch (A.version) {
    case 12:
    case 11: /* same slot and signature */
      res = T(11)->init(&A.probe_ctx, 0, &cfg, nccl_log, nccl_prof);
      break;
    case 10:
      res = T(10)->init(nccl_log, nccl_prof);
      break;
    default:
      res = T(6)->init(nccl_log);
      break; /* v6..v9: same slot, same signature */
  }
  if (res == ncclSuccess) A.inited = 1;
  return res;
}

/* name .. listen sit at the same place in every version */
static ncclResult_t a_devices(int* ndev) {
  return T(6)->devices(ndev);
}

static ncclResult_t a_props(int dev, struct braid_net_props* p) {
  union {
    struct nccl_net_props_v6 v6;
    struct nccl_net_props_v7 v7;
    struct nccl_net_props_v8 v8;
    struct nccl_net_props_v9 v9;
    struct nccl_net_props_v11 v11;
    struct nccl_net_props_v12 v12;
  } u;
  int dev_type = NCCL_ABI_NET_DEVICE_HOST;
  memset(&u, 0, sizeof(u));
  memset(p, 0, sizeof(*p));
  /* getProperties sits at the same place in every version; only the struct differs */
  BRAID_CHECK(((ncclResult_t(*)(int, void*))T(6)->getProperties)(dev, &u));
#define COMMON(s)                                                                                   \
  p->name = (s).name, p->pciPath = (s).pciPath, p->guid = (s).guid, p->ptrSupport = (s).ptrSupport, \
  p->speed = (s).speed, p->port = (s).port, p->latency = (s).latency, p->maxComms = (s).maxComms,   \
  p->maxRecvs = (s).maxRecvs
  switch (A.version) {
    case 6:
      COMMON(u.v6);
      break;
    case 7:
      COMMON(u.v7), dev_type = u.v7.netDeviceType;
      break;
    case 8:
      COMMON(u.v8), p->regIsGlobal = u.v8.regIsGlobal, dev_type = u.v8.netDeviceType;
      break;
    case 9:
    case 10:
      COMMON(u.v9), p->regIsGlobal = u.v9.regIsGlobal, dev_type = u.v9.netDeviceType;
      break;
    case 11:
      COMMON(u.v11), p->regIsGlobal = u.v11.regIsGlobal, dev_type = u.v11.netDeviceType;
      break;
    default: /* v12: vProps is longer, railId / planeId are topology hints braid does not use */
      COMMON(u.v12), p->regIsGlobal = u.v12.regIsGlobal, dev_type = u.v12.netDeviceType;
      break;
  }
#undef COMMON
  if (A.ext == NULL) p->ptrSupport &= NCCL_PTR_BITS; /* braid's bits mean something only with its extension */
  if (p->ptrSupport & BRAID_NET_PTR_DMABUF) A.dmabuf = 1;
  if (p->maxRecvs > MAX_GROUPED_RECVS) p->maxRecvs = MAX_GROUPED_RECVS;
  if (dev_type != NCCL_ABI_NET_DEVICE_HOST) {
    BRAID_WARN("NET/%s : device %d needs device offload (netDeviceType %d), which braid does not support", A.net.name,
               dev, dev_type);
    return ncclInternalError;
  }
  return ncclSuccess;
}

static ncclResult_t a_open_context(uint64_t comm_id, const struct braid_net_config* config, void** ctx_p) {
  struct actx* x = calloc(1, sizeof(*x));
  if (x == NULL) {
    BRAID_WARN("NET/%s : failed to allocate a context", A.net.name);
    return ncclSystemError;
  }
  x->cfg.trafficClass = config->trafficClass < 0 ? NCCL_ABI_NET_TRAFFIC_CLASS_UNDEF : config->trafficClass;
  if (A.version >= 11) {
    ncclResult_t res = T(11)->init(&x->pctx, comm_id, &x->cfg, nccl_log, nccl_prof);
    if (res != ncclSuccess) {
      free(x);
      return res;
    }
  }
  *ctx_p = x;
  return ncclSuccess;
}

static ncclResult_t a_close_context(void* p) {
  struct actx* x = p;
  ncclResult_t res = ncclSuccess;
  if (x == NULL) return ncclSuccess;
  if (A.version >= 11 && T(11)->finalize != NULL) res = T(11)->finalize(x->pctx);
  free(x);
  return res;
}

static ncclResult_t a_listen(void* ctx, int dev, void* handle, void** listen_p) {
  if (A.version >= 11) return T(11)->listen(((struct actx*)ctx)->pctx, dev, handle, listen_p);
  return T(6)->listen(dev, handle, listen_p);
}

static ncclResult_t a_connect(void* ctx, int dev, void* handle, void** send_p) {
  struct actx* x = ctx;
  struct nccl_net_dev_handle* dh = NULL; /* NULL: no device offload wanted */
  switch (A.version) {
    case 6:
      return T(6)->connect(dev, handle, send_p);
    case 10:
      return T(10)->connect(dev, &x->cfg, handle, send_p, &dh);
    case 11:
    case 12: /* same slot and signature */
      return T(11)->connect(x->pctx, dev, handle, send_p, &dh);
    default:
      return T(7)->connect(dev, handle, send_p, &dh); /* v7..v9 */
  }
}

static ncclResult_t a_accept(void* listen_comm, void** recv_p) {
  struct nccl_net_dev_handle* dh = NULL;
  if (A.version == 6) return T(6)->accept(listen_comm, recv_p);
  return T(7)->accept(listen_comm, recv_p, &dh); /* same slot and signature v7..v11 */
}

static ncclResult_t too_big(const char* what, size_t size) {
  BRAID_WARN("NET/%s : %s of %zu bytes does not fit the plugin's ABI (v%d sizes are int)", A.net.name, what, size,
             A.version);
  return ncclInternalError;
}

/* Device memory of a plugin that takes dma-bufs, as NCCL registers it: a dma-buf of the pages
 * (the device layer's dmabuf_get) handed to regMrDmaBuf with type CUDA. 0: registered; 1: no
 * dma-buf from the device (the caller tries regMr, which a peer-memory plugin takes). */
static int reg_dmabuf(void* comm, void* data, size_t size, void** mhandle, ncclResult_t* res) {
  const struct braid_device_ops* dev = braid_device();
  int fd = -1;
  uint64_t offset = 0;
  if (dev == NULL || dev->dmabuf_get == NULL || dev->dmabuf_get(data, size, &fd, &offset) != ncclSuccess) return 1;
  /* regMrDmaBuf sits at the same place with the same signature v6..v12 */
  *res = T(6)->regMrDmaBuf(comm, data, size, BRAID_NET_PTR_CUDA, offset, fd, mhandle);
  close(fd);
  if (*res != ncclSuccess)
    BRAID_WARN("NET/%s : regMrDmaBuf of %zu bytes of device memory at %p (dma-buf fd, offset %llu) failed: %d",
               A.net.name, size, data, (unsigned long long)offset, (int)*res);
  return 0;
}

static ncclResult_t a_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  ncclResult_t res;
  if (type == BRAID_NET_PTR_CUDA && A.dmabuf && T(6)->regMrDmaBuf != NULL &&
      reg_dmabuf(comm, data, size, mhandle, &res) == 0)
    return res;
  if (A.version <= 7) {
    if (size > INT_MAX) return too_big("a registration", size);
    return T(6)->regMr(comm, data, (int)size, type, mhandle);
  }
  return T(8)->regMr(comm, data, size, type, mhandle); /* same slot v8..v11 */
}

static ncclResult_t a_dereg_mr(void* comm, void* mhandle) {
  return T(6)->deregMr(comm, mhandle);
}

static ncclResult_t wrap(void* req, int n, void** request) {
  if (req == NULL) {
    *request = NULL;
    return ncclSuccess;
  }
  struct areq* w = malloc(sizeof(*w));
  if (w == NULL) {
    BRAID_WARN("NET/%s : failed to allocate a request", A.net.name);
    return ncclSystemError; /* the plugin's request is lost with its comm, which fails now */
  }
  w->req = req;
  w->n = n;
  *request = w;
  return ncclSuccess;
}

static ncclResult_t a_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  void* req = NULL;
  if (A.version <= 8) {
    if (size > INT_MAX) return too_big("a send", size);
    BRAID_CHECK(T(6)->isend(comm, data, (int)size, tag, mhandle, &req));
  } else if (A.version == 9) {
    BRAID_CHECK(T(9)->isend(comm, data, size, tag, mhandle, &req));
  } else {
    BRAID_CHECK(T(10)->isend(comm, data, size, tag, mhandle, braid_net_prof_phandle, &req)); /* v10, v11 */
  }
  return wrap(req, 1, request);
}

static ncclResult_t a_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  void* req = NULL;
  if (n < 1 || n > MAX_GROUPED_RECVS) {
    BRAID_WARN("NET/%s : irecv of %d receives (1..%d)", A.net.name, n, MAX_GROUPED_RECVS);
    return ncclInternalError;
  }
  if (A.version <= 8) {
    int isizes[MAX_GROUPED_RECVS];
    for (int i = 0; i < n; i++) {
      if (sizes[i] > INT_MAX) return too_big("a receive", sizes[i]);
      isizes[i] = (int)sizes[i];
    }
    BRAID_CHECK(T(6)->irecv(comm, n, data, isizes, tags, mhandles, &req));
  } else if (A.version == 9) {
    BRAID_CHECK(T(9)->irecv(comm, n, data, sizes, tags, mhandles, &req));
  } else {
    void* phandles[MAX_GROUPED_RECVS] = {braid_net_prof_phandle}; /* the profiler's step (net_prof.h) */
    BRAID_CHECK(T(10)->irecv(comm, n, data, sizes, tags, mhandles, phandles, &req));
  }
  return wrap(req, n, request);
}

static ncclResult_t a_iflush(void* comm, int n, void** data, size_t* sizes, void** mhandles, void** request) {
  int isizes[MAX_GROUPED_RECVS];
  void* req = NULL;
  if (n < 1 || n > MAX_GROUPED_RECVS) {
    BRAID_WARN("NET/%s : iflush of %d receives (1..%d)", A.net.name, n, MAX_GROUPED_RECVS);
    return ncclInternalError;
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] > INT_MAX) return too_big("a flush", sizes[i]);
    isizes[i] = (int)sizes[i];
  }
  BRAID_CHECK(T(6)->iflush(comm, n, data, isizes, mhandles, &req)); /* same slot and signature in all */
  return wrap(req, n, request);
}

static ncclResult_t a_test(void* request, int* done, size_t* sizes) {
  struct areq* w = request;
  int isizes[MAX_GROUPED_RECVS] = {0};
  *done = 0;
  BRAID_CHECK(T(6)->test(w->req, done, isizes)); /* same slot and signature in all */
  if (!*done) return ncclSuccess;
  if (sizes != NULL)
    for (int i = 0; i < w->n; i++) sizes[i] = (size_t)(isizes[i] < 0 ? 0 : isizes[i]);
  free(w);
  return ncclSuccess;
}

static ncclResult_t a_close_send(void* comm) {
  return T(6)->closeSend(comm);
}
static ncclResult_t a_close_recv(void* comm) {
  return T(6)->closeRecv(comm);
}
static ncclResult_t a_close_listen(void* comm) {
  return T(6)->closeListen(comm);
}

/* braid's extension, when the library has it: the same comms, passed through. */
static ncclResult_t a_wait_fds(void* comm, struct pollfd* fds, int max_fds, int* n_fds) {
  return A.ext->waitFds(comm, fds, max_fds, n_fds);
}
static ncclResult_t a_finish_send(void* comm) {
  return A.ext->finishSend(comm);
}
static ncclResult_t a_abort_send(void* comm, int code) {
  return A.ext->abortSend(comm, code);
}
static ncclResult_t a_get_status(void* comm, struct braid_net_status* st) {
  return A.ext->getStatus(comm, st);
}
static ncclResult_t a_recv_inline(void* comm, int* yes) {
  return A.ext->recvInline(comm, yes);
}

/* Every slot braid calls must be there; a NULL one would crash at the first connection. */
static int table_complete(const void* tab, int version) {
  const struct nccl_net_v6* t = tab;
  if (t->name == NULL || t->init == NULL || t->devices == NULL || t->getProperties == NULL || t->listen == NULL ||
      t->connect == NULL || t->accept == NULL || t->regMr == NULL || t->deregMr == NULL || t->isend == NULL ||
      t->irecv == NULL || t->iflush == NULL || t->test == NULL || t->closeSend == NULL || t->closeRecv == NULL ||
      t->closeListen == NULL)
    return 0;
  return 1;
}

static const char* const collnet_symbols[] = {"ncclCollNetPlugin_v12", "ncclCollNetPlugin_v11", "ncclCollNetPlugin_v10",
                                              "ncclCollNetPlugin_v9",  "ncclCollNetPlugin_v8",  "ncclCollNetPlugin_v7",
                                              "ncclCollNetPlugin_v6"};

const struct braid_net_v1* braid_net_nccl_adapt(void* dl, const char* lib, int max_version, int* version_p) {
  char sym[32];
  const void* tab = NULL;
  int v;
  for (v = max_version < BRAID_NCCL_NET_MAX_VERSION ? max_version : BRAID_NCCL_NET_MAX_VERSION;
       v >= BRAID_NCCL_NET_MIN_VERSION && tab == NULL; v--) {
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    tab = dlsym(dl, sym);
  }
  v++;
  if (tab == NULL) {
    const char* newer = dlsym(dl, "ncclNetPlugin_v13") ? " (it exports ncclNetPlugin_v13, newer than braid's v12)" : "";
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "External network plugin %s is unsupported%s", lib, newer);
    return NULL;
  }
  if (!table_complete(tab, v)) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET,
               "External network plugin %s: ncclNetPlugin_v%d has empty slots, not used", lib, v);
    return NULL;
  }
  memset(&A, 0, sizeof(A));
  A.version = v;
  A.tab = tab;
  A.ext = dlsym(dl, BRAID_NET_EXT_SYMBOL);
  if (A.ext != NULL && (A.ext->size < (int)sizeof(*A.ext) || A.ext->waitFds == NULL || A.ext->finishSend == NULL ||
                        A.ext->abortSend == NULL || A.ext->getStatus == NULL || A.ext->recvInline == NULL))
    A.ext = NULL;
  A.net = (struct braid_net_v1){
      .name = T(6)->name,
      .init = a_init,
      .devices = a_devices,
      .getProperties = a_props,
      .openContext = a_open_context,
      .closeContext = a_close_context,
      .listen = a_listen,
      .connect = a_connect,
      .accept = a_accept,
      .regMr = a_reg_mr,
      .deregMr = a_dereg_mr,
      .isend = a_isend,
      .irecv = a_irecv,
      .iflush = a_iflush,
      .test = a_test,
      .closeSend = a_close_send,
      .closeRecv = a_close_recv,
      .closeListen = a_close_listen,
  };
  if (A.ext != NULL) {
    A.net.waitFds = a_wait_fds;
    A.net.finishSend = a_finish_send;
    A.net.abortSend = a_abort_send;
    A.net.getStatus = a_get_status;
    A.net.recvInline = a_recv_inline;
  }
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: Loaded net plugin %s (v%d)%s", A.net.name, v,
             A.ext != NULL ? " with braid's extensions (braidNetExt_v1)" : "");
  for (size_t i = 0; i < sizeof(collnet_symbols) / sizeof(collnet_symbols[0]); i++)
    if (dlsym(dl, collnet_symbols[i]) != NULL) {
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET,
                 "NET/Plugin: %s also exports %s; braid has no collNet algorithm, so it is not used", lib,
                 collnet_symbols[i]);
      break;
    }
  if (version_p != NULL) *version_p = v;
  return &A.net;
}

int braid_net_nccl_version(void) {
  return A.version;
}
