/*
 * nccl_export.c - libnccl-net-braid.so: braid's Socket network under NCCL's net plugin ABI
 * (ncclNetPlugin_v12 for NCCL 2.30, _v11 and _v10, and the older v9 .. v6 for NCCL 2.12+;
 * nccl_net_abi.h), for
 * NCCL and for braid's own adapter
 * (nccl_adapt.c: loading this library is the adapter's end-to-end test). Built by the
 * Makefile from this file and libnccl_static.a, never into libnccl.so.2; exports only the
 * tables and braidNetExt_v1 (src/transport/net/plugin/export/exports.map).
 *
 * The network is named "BraidSocket" (not NCCL's "Socket": NCCL_NET can pick either).
 *   v12, v11: init makes one Socket context per communicator; its secret (the handshake every
 *        connection opens with) is the communicator's id, so strangers are dropped as in braid.
 *   v10 .. v6: no per-communicator context exists in those ABIs: one process-wide context
 *        whose secret is a constant, so such a connection is told apart by its handle only.
 * Sizes: test() and iflush() report int sizes (NCCL's ABI); the Socket network receives one
 * buffer per irecv (maxRecvs 1), so one size per request. Device offload, virtual devices
 * and DMA-BUF are refused with a WARN (Socket reaches host memory only).
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "base/check.h"
#include "transport/net/net.h"
#include "transport/net/plugin/nccl_net_abi.h"

#define EXPORT_NAME "BraidSocket"
#define GLOBAL_SECRET 0x62726169644e3130ULL /* "braidN10" */
#define MAX_P2P_BYTES (1ULL << 30)          /* NCCL's MAX_NET_SIZE */

static const struct braid_net_v1* const S = &braid_net_socket;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int socket_inited;
static void* global_ctx; /* v10: the one context */

static ncclResult_t socket_init(void) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&init_lock);
  if (!socket_inited && (res = S->init(braid_debug_log)) == ncclSuccess) socket_inited = 1;
  pthread_mutex_unlock(&init_lock);
  return res;
}

static ncclResult_t x_init_v11(void** ctx, uint64_t comm_id, struct nccl_net_comm_config* config, nccl_abi_logger_t log,
                               nccl_abi_prof_cb_t prof) {
  BRAID_CHECK(socket_init());
  struct braid_net_config cfg = {comm_id, config != NULL ? config->trafficClass : -1};
  return S->openContext(comm_id, &cfg, ctx);
}

static ncclResult_t x_finalize(void* ctx) {
  return ctx != NULL ? S->closeContext(ctx) : ncclSuccess;
}

static ncclResult_t x_init_global(void) {
  BRAID_CHECK(socket_init());
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&init_lock);
  if (global_ctx == NULL) {
    struct braid_net_config cfg = {GLOBAL_SECRET, -1};
    res = S->openContext(0, &cfg, &global_ctx);
  }
  pthread_mutex_unlock(&init_lock);
  return res;
}
static ncclResult_t x_init_v10(nccl_abi_logger_t log, nccl_abi_prof_cb_t prof) {
  return x_init_global();
}
static ncclResult_t x_init_v6(nccl_abi_logger_t log) {
  return x_init_global();
}

/* The fields v10 and v11 share (v11 adds maxMultiRequestSize at the end). */
#define FILL_PROPS(p, b, dev)                                                                     \
  do {                                                                                            \
    memset((p), 0, sizeof(*(p)));                                                                 \
    (p)->name = (char*)(b).name, (p)->pciPath = (char*)(b).pciPath, (p)->guid = (b).guid;         \
    (p)->ptrSupport = (b).ptrSupport, (p)->regIsGlobal = (b).regIsGlobal, (p)->speed = (b).speed; \
    (p)->port = (b).port, (p)->latency = (b).latency, (p)->maxComms = (b).maxComms;               \
    (p)->maxRecvs = (b).maxRecvs, (p)->netDeviceType = NCCL_ABI_NET_DEVICE_HOST;                  \
    (p)->vProps.ndevs = 1, (p)->vProps.devs[0] = (dev), (p)->maxP2pBytes = MAX_P2P_BYTES;         \
    (p)->maxCollBytes = MAX_P2P_BYTES;                                                            \
  } while (0)

static ncclResult_t x_props_v11(int dev, struct nccl_net_props_v11* p) {
  struct braid_net_props b;
  BRAID_CHECK(S->getProperties(dev, &b));
  FILL_PROPS(p, b, dev);
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

/* v12: a longer vProps; no rail or plane known (a socket's interface has neither). */
static ncclResult_t x_props_v12(int dev, struct nccl_net_props_v12* p) {
  struct braid_net_props b;
  BRAID_CHECK(S->getProperties(dev, &b));
  FILL_PROPS(p, b, dev);
  p->maxMultiRequestSize = 1;
  p->railId = p->planeId = NCCL_ABI_NET_ID_UNDEF;
  return ncclSuccess;
}

static ncclResult_t x_props_v10(int dev, struct nccl_net_props_v9* p) {
  struct braid_net_props b;
  BRAID_CHECK(S->getProperties(dev, &b));
  FILL_PROPS(p, b, dev);
  return ncclSuccess;
}

/* v8, v7 and v6: the same fields less the newer ones. */
#define FILL_OLD_PROPS(p, b)                                                                \
  do {                                                                                      \
    memset((p), 0, sizeof(*(p)));                                                           \
    (p)->name = (char*)(b).name, (p)->pciPath = (char*)(b).pciPath, (p)->guid = (b).guid;   \
    (p)->ptrSupport = (b).ptrSupport, (p)->speed = (b).speed, (p)->port = (b).port;         \
    (p)->latency = (b).latency, (p)->maxComms = (b).maxComms, (p)->maxRecvs = (b).maxRecvs; \
  } while (0)

static ncclResult_t x_props_v8(int dev, struct nccl_net_props_v8* p) {
  struct braid_net_props b;
  BRAID_CHECK(S->getProperties(dev, &b));
  FILL_OLD_PROPS(p, b);
  p->regIsGlobal = b.regIsGlobal;
  p->netDeviceType = NCCL_ABI_NET_DEVICE_HOST;
  return ncclSuccess;
}
static ncclResult_t x_props_v7(int dev, struct nccl_net_props_v7* p) {
  struct braid_net_props b;
  BRAID_CHECK(S->getProperties(dev, &b));
  FILL_OLD_PROPS(p, b);
  p->netDeviceType = NCCL_ABI_NET_DEVICE_HOST;
  return ncclSuccess;
}
static ncclResult_t x_props_v6(int dev, struct nccl_net_props_v6* p) {
  struct braid_net_props b;
  BRAID_CHECK(S->getProperties(dev, &b));
  FILL_OLD_PROPS(p, b);
  return ncclSuccess;
}

static ncclResult_t no_offload(struct nccl_net_dev_handle** dh, const char* fn) {
  if (dh != NULL && *dh != NULL) {
    BRAID_WARN("NET/" EXPORT_NAME " : %s: device offload was requested; this network has none", fn);
    return ncclInternalError;
  }
  return ncclSuccess;
}

static ncclResult_t x_listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  return S->listen(ctx, dev, handle, listen_comm);
}
static ncclResult_t x_listen_v10(int dev, void* handle, void** listen_comm) {
  return S->listen(global_ctx, dev, handle, listen_comm);
}
static ncclResult_t x_connect_v11(void* ctx, int dev, void* handle, void** send_comm, struct nccl_net_dev_handle** dh) {
  BRAID_CHECK(no_offload(dh, "connect"));
  return S->connect(ctx, dev, handle, send_comm);
}
static ncclResult_t x_connect_v10(int dev, struct nccl_net_comm_config* config, void* handle, void** send_comm,
                                  struct nccl_net_dev_handle** dh) {
  BRAID_CHECK(no_offload(dh, "connect"));
  return S->connect(global_ctx, dev, handle, send_comm);
}
static ncclResult_t x_connect_v7(int dev, void* handle, void** send_comm, struct nccl_net_dev_handle** dh) {
  BRAID_CHECK(no_offload(dh, "connect"));
  return S->connect(global_ctx, dev, handle, send_comm);
}
static ncclResult_t x_connect_v6(int dev, void* handle, void** send_comm) {
  return S->connect(global_ctx, dev, handle, send_comm);
}
static ncclResult_t x_accept_v6(void* listen_comm, void** recv_comm) {
  return S->accept(listen_comm, recv_comm);
}
static ncclResult_t x_accept(void* listen_comm, void** recv_comm, struct nccl_net_dev_handle** dh) {
  BRAID_CHECK(no_offload(dh, "accept"));
  return S->accept(listen_comm, recv_comm);
}

static ncclResult_t x_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                    void** mhandle) {
  if (type == BRAID_NET_PTR_HOST) return S->regMr(comm, data, size, type, mhandle);
  BRAID_WARN("NET/" EXPORT_NAME " : regMrDmaBuf: memory type %d (fd %d): this network reaches host memory only", type,
             fd);
  return ncclInternalError;
}

static ncclResult_t x_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                            void** request) {
  return S->isend(comm, data, size, tag, mhandle, request);
}
static ncclResult_t x_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                            void** request) {
  return S->irecv(comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t x_isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return S->isend(comm, data, size, tag, mhandle, request);
}
static ncclResult_t x_irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                               void** request) {
  return S->irecv(comm, n, data, sizes, tags, mhandles, request);
}
static ncclResult_t x_isend_v8(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) {
    BRAID_WARN("NET/" EXPORT_NAME " : isend of %d bytes", size);
    return ncclInvalidArgument;
  }
  return S->isend(comm, data, (size_t)size, tag, mhandle, request);
}
static ncclResult_t x_irecv_v8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (n != 1 || sizes[0] < 0) {
    BRAID_WARN("NET/" EXPORT_NAME " : irecv of %d buffers (%d bytes); this network receives one at a time", n,
               n > 0 ? sizes[0] : 0);
    return ncclInternalError;
  }
  size_t s = (size_t)sizes[0];
  return S->irecv(comm, n, data, &s, tags, mhandles, request);
}

static ncclResult_t x_iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  size_t s = n > 0 && sizes != NULL && sizes[0] > 0 ? (size_t)sizes[0] : 0;
  if (n != 1) {
    BRAID_WARN("NET/" EXPORT_NAME " : iflush of %d buffers; this network receives one at a time (maxRecvs 1)", n);
    return ncclInternalError;
  }
  return S->iflush(comm, n, data, &s, mhandles, request);
}

static ncclResult_t x_test(void* request, int* done, int* sizes) {
  size_t got = 0;
  BRAID_CHECK(S->test(request, done, &got));
  if (*done && sizes != NULL) sizes[0] = got > INT_MAX ? INT_MAX : (int)got;
  return ncclSuccess;
}

static ncclResult_t x_get_device_mr(void* comm, void* mhandle, void** dptr) {
  BRAID_WARN("NET/" EXPORT_NAME " : getDeviceMr: this network has no device offload");
  return ncclInternalError;
}
static ncclResult_t x_irecv_consumed(void* comm, int n, void* request) {
  BRAID_WARN("NET/" EXPORT_NAME " : irecvConsumed: this network has no device offload");
  return ncclInternalError;
}
static ncclResult_t x_make_vdevice(int* d, struct nccl_net_vprops* props) {
  BRAID_WARN("NET/" EXPORT_NAME " : makeVDevice: this network does not merge devices (NCCL_NET_MERGE_LEVEL=LOC)");
  return ncclInvalidUsage;
}
static ncclResult_t x_make_vdevice_v12(int* d, struct nccl_net_vprops_v12* props) {
  return x_make_vdevice(d, NULL);
}
/* Hints about the traffic to come: the Socket network has nothing to tune. */
static ncclResult_t x_set_net_attr(void* ctx, struct nccl_net_attr_v11* attr) {
  return ncclSuccess;
}

static ncclResult_t x_wait_fds(void* comm, struct pollfd* fds, int max_fds, int* n_fds) {
  return S->waitFds(comm, fds, max_fds, n_fds);
}
static ncclResult_t x_finish_send(void* comm) {
  return S->finishSend(comm);
}
static ncclResult_t x_abort_send(void* comm, int code) {
  return S->abortSend(comm, code);
}
static ncclResult_t x_get_status(void* comm, struct braid_net_status* st) {
  return S->getStatus(comm, st);
}
static ncclResult_t x_recv_inline(void* comm, int* yes) {
  return S->recvInline(comm, yes);
}

#define EXPORT __attribute__((visibility("default")))

static ncclResult_t x_devices(int* ndev) {
  return S->devices(ndev);
}
static ncclResult_t x_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return S->regMr(comm, data, size, type, mhandle);
}
static ncclResult_t x_reg_mr_int(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) {
    BRAID_WARN("NET/" EXPORT_NAME " : regMr of %d bytes", size);
    return ncclInvalidArgument;
  }
  return S->regMr(comm, data, (size_t)size, type, mhandle);
}
static ncclResult_t x_dereg_mr(void* comm, void* mhandle) {
  return S->deregMr(comm, mhandle);
}
static ncclResult_t x_close_send(void* comm) {
  return S->closeSend(comm);
}
static ncclResult_t x_close_recv(void* comm) {
  return S->closeRecv(comm);
}
static ncclResult_t x_close_listen(void* comm) {
  return S->closeListen(comm);
}

EXPORT const struct nccl_net_v12 ncclNetPlugin_v12 = {
    .name = EXPORT_NAME,
    .init = x_init_v11,
    .devices = x_devices,
    .getProperties = x_props_v12,
    .listen = x_listen_v11,
    .connect = x_connect_v11,
    .accept = x_accept,
    .regMr = x_reg_mr,
    .regMrDmaBuf = x_reg_mr_dmabuf,
    .deregMr = x_dereg_mr,
    .isend = x_isend,
    .irecv = x_irecv,
    .iflush = x_iflush,
    .test = x_test,
    .closeSend = x_close_send,
    .closeRecv = x_close_recv,
    .closeListen = x_close_listen,
    .getDeviceMr = x_get_device_mr,
    .irecvConsumed = x_irecv_consumed,
    .makeVDevice = x_make_vdevice_v12,
    .finalize = x_finalize,
    .setNetAttr = x_set_net_attr,
};

EXPORT const struct nccl_net_v11 ncclNetPlugin_v11 = {
    .name = EXPORT_NAME,
    .init = x_init_v11,
    .devices = x_devices,
    .getProperties = x_props_v11,
    .listen = x_listen_v11,
    .connect = x_connect_v11,
    .accept = x_accept,
    .regMr = x_reg_mr,
    .regMrDmaBuf = x_reg_mr_dmabuf,
    .deregMr = x_dereg_mr,
    .isend = x_isend,
    .irecv = x_irecv,
    .iflush = x_iflush,
    .test = x_test,
    .closeSend = x_close_send,
    .closeRecv = x_close_recv,
    .closeListen = x_close_listen,
    .getDeviceMr = x_get_device_mr,
    .irecvConsumed = x_irecv_consumed,
    .makeVDevice = x_make_vdevice,
    .finalize = x_finalize,
    .setNetAttr = x_set_net_attr,
};

EXPORT const struct nccl_net_v10 ncclNetPlugin_v10 = {
    .name = EXPORT_NAME,
    .init = x_init_v10,
    .devices = x_devices,
    .getProperties = x_props_v10,
    .listen = x_listen_v10,
    .connect = x_connect_v10,
    .accept = x_accept,
    .regMr = x_reg_mr,
    .regMrDmaBuf = x_reg_mr_dmabuf,
    .deregMr = x_dereg_mr,
    .isend = x_isend,
    .irecv = x_irecv,
    .iflush = x_iflush,
    .test = x_test,
    .closeSend = x_close_send,
    .closeRecv = x_close_recv,
    .closeListen = x_close_listen,
    .getDeviceMr = x_get_device_mr,
    .irecvConsumed = x_irecv_consumed,
    .makeVDevice = x_make_vdevice,
};

#define OLD_COMMON(v)                                                                                                 \
  .name = EXPORT_NAME, .init = x_init_v6, .devices = x_devices, .getProperties = x_props_##v, .listen = x_listen_v10, \
  .regMrDmaBuf = x_reg_mr_dmabuf, .deregMr = x_dereg_mr, .iflush = x_iflush, .test = x_test,                          \
  .closeSend = x_close_send, .closeRecv = x_close_recv, .closeListen = x_close_listen

EXPORT const struct nccl_net_v9 ncclNetPlugin_v9 = {
    .name = EXPORT_NAME,
    .init = x_init_v6,
    .devices = x_devices,
    .getProperties = x_props_v10, /* v9 and v10 share their properties */
    .listen = x_listen_v10,
    .connect = x_connect_v7,
    .accept = x_accept,
    .regMr = x_reg_mr,
    .regMrDmaBuf = x_reg_mr_dmabuf,
    .deregMr = x_dereg_mr,
    .isend = x_isend_v9,
    .irecv = x_irecv_v9,
    .iflush = x_iflush,
    .test = x_test,
    .closeSend = x_close_send,
    .closeRecv = x_close_recv,
    .closeListen = x_close_listen,
    .getDeviceMr = x_get_device_mr,
    .irecvConsumed = x_irecv_consumed,
    .makeVDevice = x_make_vdevice,
};

EXPORT const struct nccl_net_v8 ncclNetPlugin_v8 = {
    OLD_COMMON(v8),
    .connect = x_connect_v7,
    .accept = x_accept,
    .regMr = x_reg_mr,
    .isend = x_isend_v8,
    .irecv = x_irecv_v8,
    .getDeviceMr = x_get_device_mr,
    .irecvConsumed = x_irecv_consumed,
};

EXPORT const struct nccl_net_v7 ncclNetPlugin_v7 = {
    OLD_COMMON(v7),
    .connect = x_connect_v7,
    .accept = x_accept,
    .regMr = x_reg_mr_int,
    .isend = x_isend_v8,
    .irecv = x_irecv_v8,
    .getDeviceMr = x_get_device_mr,
    .irecvConsumed = x_irecv_consumed,
};

EXPORT const struct nccl_net_v6 ncclNetPlugin_v6 = {
    OLD_COMMON(v6),        .connect = x_connect_v6, .accept = x_accept_v6,
    .regMr = x_reg_mr_int, .isend = x_isend_v8,     .irecv = x_irecv_v8,
};

/* braid's optional slots on the same comms (nccl_net_abi.h); NCCL never looks them up. */
EXPORT const struct braid_net_ext_v1 braidNetExt_v1 = {
    .size = sizeof(struct braid_net_ext_v1),
    .waitFds = x_wait_fds,
    .finishSend = x_finish_send,
    .abortSend = x_abort_send,
    .getStatus = x_get_status,
    .recvInline = x_recv_inline,
};
