/*
 * net.c - the network transport (docs/ARCHITECTURE.md 3 step 5, and 5): connections between
 * ranks that share no memory, i.e. ranks on different nodes (NCCL_HOSTID or hostname + boot
 * id differ), or any pair when NCCL_SHM_DISABLE=1. Tried after shm, it connects everything.
 *
 * Each end allocates its own FIFO (net_internal.h); the receiver listens on a device of the
 * net plugin and sends the plugin's handle in its blob; the sender connects to it; both
 * register their buffer and hand the connection to the progress engine (net_proxy.c:
 * the transport's `progress` and `wait` slots), which moves steps between the two FIFOs from
 * then on. The executor sees an ordinary connection with `wait_tail` set and a `host_kick`
 * that moves it in place. On a device communicator the FIFO is pinned host memory mapped for
 * the device, `conn` holds the device's pointers, and the engine's thread alone moves it
 * (net_fifo_alloc; net_proxy.c: device connections). What the plugin declares decides the
 * zero-copy host paths (net.h: BRAID_NET_PTR_HOST_ANY, recvInline); no plugin is special.
 *
 * Teardown: a sender that is not aborting first waits (bounded) until the proxy has handed
 * every published step to the plugin, so a rank can destroy its communicator right after its
 * last collective returns and its peers still get their data; then it says goodbye
 * (finishSend), so its receiver knows it left rather than died. An aborting communicator
 * sends an abort notice instead (abortSend) naming the rank it blames, so its peers fail
 * too and name the same culprit. Per communicator the plugin has
 * one context (the communicator's secret), shared by its connections and closed with the last.
 */
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket.h"
#include "device/device.h"
#include "transport/net/net_gdr.h"
#include "transport/net/net_internal.h"
#include "transport/net/net_topo.h"

/* A communicator's plugin context. */
struct net_ctx {
  struct net_ctx* next;
  const struct braid_transport_ctx* tctx; /* whose: one per communicator */
  const struct braid_net_v1* net;
  void* ctx;
  int refs;
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_ctx* ctx_list;

/* What the receiver tells the sender. */
struct net_blob {
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE];
  int32_t dev;
};

#define NET_FLUSH_IDLE_S 30 /* a closing sender gives up when its peer took nothing for this long */

ncclResult_t braid_net_ctx_get(const struct braid_transport_ctx* t, const struct braid_net_v1* net,
                               struct net_ctx** ctx_p) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&ctx_lock);
  struct net_ctx* x = ctx_list;
  while (x != NULL && x->tctx != t) x = x->next;
  if (x == NULL) {
    struct braid_net_config cfg = {t->secret, t->traffic_class};
    BRAID_CALLOC_GOTO(x, 1, res, out);
    x->tctx = t;
    x->net = net;
    res = net->openContext(t->comm_hash, &cfg, &x->ctx);
    if (res != ncclSuccess) {
      free(x);
      goto out;
    }
    x->next = ctx_list;
    ctx_list = x;
  }
  x->refs++;
  *ctx_p = x;
out:
  pthread_mutex_unlock(&ctx_lock);
  return res;
}

void braid_net_ctx_put(struct net_ctx* x) {
  if (x == NULL) return;
  pthread_mutex_lock(&ctx_lock);
  if (--x->refs > 0) {
    pthread_mutex_unlock(&ctx_lock);
    return;
  }
  struct net_ctx** pp = &ctx_list;
  while (*pp != x) pp = &(*pp)->next;
  *pp = x->next;
  pthread_mutex_unlock(&ctx_lock);
  x->net->closeContext(x->ctx);
  free(x);
}

void* braid_net_ctx_plugin(const struct net_ctx* x) {
  return x->ctx;
}

static int net_can_connect(const struct braid_transport_ctx* t, int peer) {
  return 1;
}

/* host_kick finds the connection from the executor's braid_conn. */
_Static_assert(offsetof(struct braid_connector, conn) == 0, "braid_conn must open braid_connector");

static size_t align_up(size_t x, size_t a) {
  return (x + a - 1) & ~(a - 1);
}

/* The FIFO (r->mem_bytes, zeroed): plain memory in host mode. A device communicator's kernels
 * fill and drain it in place, so there it is pinned host memory mapped for the device
 * (host_alloc): the proxy uses the host address (r->mem), the kernels the device's (*dctrl_p,
 * *dbuf_p). With GPUDirect RDMA (r->gdr) the buffer is device memory the NIC reaches itself
 * (r->buff is then the device's address, never read by the host); the control block stays
 * pinned, since the proxy reads and writes it. */
static ncclResult_t net_fifo_alloc(struct net_res* r, char** dctrl_p, char** dbuf_p) {
  const struct braid_transport_ctx* t = r->tctx;
  if (t->device == NULL) {
    if (posix_memalign((void**)&r->mem, 4096, r->mem_bytes) != 0) {
      BRAID_WARN("Failed to allocate %zu bytes for a network connection's FIFO", r->mem_bytes);
      return ncclSystemError;
    }
    memset(r->mem, 0, 4096);
    r->buff = r->mem + 4096;
    *dctrl_p = r->mem;
    *dbuf_p = r->buff;
    return ncclSuccess;
  }
  void* host = NULL;
  void* dev = NULL;
  void* dbuf = NULL;
  size_t bytes = r->gdr ? 4096 : r->mem_bytes;
  int saved;
  BRAID_CHECK(braid_transport_device_enter(t->device, t->cuda_dev, &saved));
  ncclResult_t res = t->device->host_alloc(&host, &dev, bytes);
  if (res == ncclSuccess && r->gdr) {
    res = t->device->alloc(&dbuf, r->mem_bytes - 4096);
    if (res != ncclSuccess) t->device->host_free(host);
  }
  braid_transport_device_leave(t->device, saved);
  if (res != ncclSuccess) {
    BRAID_WARN(
        "NET/%s : rank %d could not allocate %zu bytes of %s memory for CUDA device %d (channel %d, peer %d): %s",
        r->desc, t->rank, r->gdr ? r->mem_bytes - 4096 : bytes, r->gdr ? "device" : "pinned host", t->cuda_dev,
        r->channel, r->peer, ncclGetErrorString(res));
    return res;
  }
  r->mem = host;
  r->device = 1;
  r->buff = r->gdr ? (char*)dbuf : r->mem + 4096;
  *dctrl_p = dev;
  *dbuf_p = r->gdr ? (char*)dbuf : (char*)dev + 4096;
  return ncclSuccess;
}

static void net_fifo_free(struct net_res* r) {
  if (r->mem == NULL) return;
  if (!r->device) {
    free(r->mem);
  } else {
    const struct braid_transport_ctx* t = r->tctx;
    int saved;
    if (braid_transport_device_enter(t->device, t->cuda_dev, &saved) != ncclSuccess) saved = -1; /* free anyway */
    if (r->gdr) t->device->free(r->buff);
    t->device->host_free(r->mem);
    braid_transport_device_leave(t->device, saved);
  }
  r->mem = NULL;
  r->buff = NULL;
}

/* One end: plugin, context, device and the local FIFO laid out for the executor. */
static ncclResult_t net_res_new(const struct braid_transport_ctx* t, int peer, int channel, int is_send,
                                struct braid_connector* c, struct net_res** r_p) {
  ncclResult_t res = ncclSuccess;
  const struct braid_net_v1* net;
  struct braid_net_props props;
  struct net_res* r;
  int ndev = 0;
  BRAID_CHECK(braid_net_plugin_get(&net));
  BRAID_CHECK(net->devices(&ndev));
  if (ndev < 1) {
    BRAID_WARN("NET/%s : no network device to connect rank %d to rank %d (host %s)", net->name, t->rank, peer,
               t->peers[peer].hostname);
    return ncclSystemError;
  }
  BRAID_CALLOC_GOTO(r, 1, res, err);
  pthread_mutex_init(&r->lock, NULL);
  r->tctx = t;
  r->connector = c;
  r->net = net;
  r->is_send = is_send;
  r->peer = peer;
  r->channel = channel % BRAID_MAX_CHANNELS;
  r->conn_index = channel / BRAID_MAX_CHANNELS;
  r->dev = braid_net_dev_pick(t, net->name, peer, r->channel, is_send, ndev);
  snprintf(r->desc, sizeof(r->desc), "%s/%d", net->name, r->dev);
  memset(&props, 0, sizeof(props)); /* a plugin that fills fewer fields declares nothing more */
  BRAID_CHECK_GOTO(net->getProperties(r->dev, &props), res, err_free);
  r->ptr_support = props.ptrSupport;
  BRAID_CHECK_GOTO(braid_net_gdr_choose(t, net->name, r->dev, &props, is_send, &r->gdr, &r->flush), res, err_free);
  if (r->gdr) snprintf(r->desc, sizeof(r->desc), "%s/%d/GDRDMA", net->name, r->dev); /* NCCL's channel lines */
  BRAID_CHECK_GOTO(braid_net_ctx_get(t, net, &r->ctx), res, err_free);
  for (int p = 0; p < BRAID_NUM_PROTOS; p++)
    if (t->buff_bytes[p] / BRAID_NSTEPS > r->stride) r->stride = t->buff_bytes[p] / BRAID_NSTEPS;
  r->stride = align_up(r->stride, 4096);
  r->mem_bytes = 4096 + BRAID_NSTEPS * r->stride;
  char *dbase = NULL, *dbuf = NULL; /* the FIFO as the executor (host) or the kernels (device) address it */
  BRAID_CHECK_GOTO(net_fifo_alloc(r, &dbase, &dbuf), res, err_ctx);
  r->ctrl = (struct braid_conn_ctrl*)r->mem;
  struct braid_conn* conn = &c->conn;
  struct braid_conn_ctrl* dctrl = (struct braid_conn_ctrl*)dbase;
  conn->tail = &dctrl->tail;
  conn->head = &dctrl->head;
  conn->sizes = dctrl->sizes;
  for (int p = 0; p < BRAID_NUM_PROTOS; p++) {
    conn->buff[p] = dbuf; /* one buffer for every protocol (net_internal.h) */
    conn->slot_bytes[p] = (uint32_t)r->stride;
  }
  conn->step = 0;
  conn->ptrs = dctrl->ptrs;
  conn->want = &dctrl->want;
  conn->wait_tail = 1;
  conn->host_kick = braid_net_kick_conn; /* host mode only: kernels never call it */
  /* Host mode, send end: the executor may send from user memory (kernels/direct.h) when the
   * plugin sends from any host address without registration (a declared capability). */
  conn->direct = is_send && !r->device && (r->ptr_support & BRAID_NET_PTR_HOST_ANY) &&
                 braid_param_int(BRAID_PARAM_NET_DIRECT) != 0;
  *r_p = r;
  return ncclSuccess;
err_ctx:
  braid_net_ctx_put(r->ctx);
err_free:
  pthread_mutex_destroy(&r->lock);
  free(r);
err:
  return res;
}

static void net_res_free(struct braid_connector* c) {
  struct net_res* r = c->res;
  if (r == NULL) return;
  braid_net_proxy_remove(r);
  if (r->mhandle != NULL) r->net->deregMr(r->net_comm, r->mhandle);
  if (r->net_comm != NULL) (r->is_send ? r->net->closeSend : r->net->closeRecv)(r->net_comm);
  if (r->listen_comm != NULL) r->net->closeListen(r->listen_comm);
  braid_net_ctx_put(r->ctx);
  net_fifo_free(r);
  pthread_mutex_destroy(&r->lock);
  free(r);
  c->res = NULL;
}

static ncclResult_t net_send_setup(const struct braid_transport_ctx* t, int peer, int channel,
                                   struct braid_connector* c, struct braid_connect_blob* out) {
  struct net_res* r;
  memset(out, 0, sizeof(*out)); /* the receiver needs nothing from the sender */
  BRAID_CHECK(net_res_new(t, peer, channel, 1, c, &r));
  c->res = r;
  return ncclSuccess;
}

static ncclResult_t net_recv_setup(const struct braid_transport_ctx* t, int peer, int channel,
                                   struct braid_connector* c, struct braid_connect_blob* out) {
  ncclResult_t res = ncclSuccess;
  struct net_res* r;
  struct net_blob* blob = (struct net_blob*)out->data;
  _Static_assert(sizeof(struct net_blob) <= BRAID_CONNECT_BLOB_BYTES, "net blob too large");
  BRAID_CHECK(net_res_new(t, peer, channel, 0, c, &r));
  c->res = r;
  memset(out, 0, sizeof(*out));
  BRAID_CHECK_GOTO(r->net->listen(r->ctx->ctx, r->dev, r->handle, &r->listen_comm), res, err);
  memcpy(blob->handle, r->handle, sizeof(blob->handle));
  blob->dev = r->dev;
  return ncclSuccess;
err:
  net_res_free(c);
  return res;
}

/* One wait between two tries of a non-blocking connect / accept: yield first, then sleep.
 * Fails when the communicator is aborted or BRAID_INIT_TIMEOUT passes. */
static ncclResult_t net_connect_wait(struct net_res* r, const char* doing, int64_t deadline, unsigned* tries) {
  const struct braid_transport_ctx* t = r->tctx;
  char who[160];
  if (__atomic_load_n(t->abort_flag, __ATOMIC_ACQUIRE)) {
    BRAID_WARN("NET/%s : rank %d: %s %s was aborted", r->desc, t->rank, doing,
               braid_transport_peer_name(t, r->peer, who, sizeof(who)));
    return ncclInvalidUsage;
  }
  if (braid_socket_clock_ns() > deadline) {
    BRAID_WARN("NET/%s : rank %d: %s %s did not complete within BRAID_INIT_TIMEOUT=%lld s (channel %d)", r->desc,
               t->rank, doing, braid_transport_peer_name(t, r->peer, who, sizeof(who)),
               (long long)braid_param_int(BRAID_PARAM_INIT_TIMEOUT), r->channel);
    return ncclRemoteError;
  }
  if ((*tries)++ < 200)
    sched_yield();
  else
    usleep(*tries < 2000 ? 100 : 1000);
  return ncclSuccess;
}

static int64_t net_connect_deadline(void) {
  int64_t s = braid_param_int(BRAID_PARAM_INIT_TIMEOUT);
  return braid_socket_clock_ns() + (s > 0 ? s : 300) * 1000000000LL;
}

/* Both ends, once connected: register the buffer, start moving. */
static ncclResult_t net_start(struct net_res* r) {
  int type = r->gdr ? BRAID_NET_PTR_CUDA : BRAID_NET_PTR_HOST;
  BRAID_CHECK(r->net->regMr(r->net_comm, r->buff, BRAID_NSTEPS * r->stride, type, &r->mhandle));
  return braid_net_proxy_add(r);
}

static ncclResult_t net_send_connect(const struct braid_transport_ctx* t, struct braid_connector* c,
                                     const struct braid_connect_blob* peer) {
  struct net_res* r = c->res;
  const struct net_blob* blob = (const struct net_blob*)peer->data;
  char who[160];
  int64_t deadline = net_connect_deadline();
  unsigned tries = 0;
  memcpy(r->handle, blob->handle, sizeof(r->handle));
  for (;;) {
    ncclResult_t res = r->net->connect(r->ctx->ctx, r->dev, r->handle, &r->net_comm);
    if (res != ncclSuccess) {
      BRAID_WARN("NET/%s : rank %d could not connect to %s on channel %d: %s", r->desc, t->rank,
                 braid_transport_peer_name(t, r->peer, who, sizeof(who)), r->channel, ncclGetErrorString(res));
      return res;
    }
    if (r->net_comm != NULL) break;
    BRAID_CHECK(net_connect_wait(r, "connecting to", deadline, &tries));
  }
  return net_start(r);
}

static ncclResult_t net_recv_connect(const struct braid_transport_ctx* t, struct braid_connector* c,
                                     const struct braid_connect_blob* peer) {
  struct net_res* r = c->res;
  int64_t deadline = net_connect_deadline();
  unsigned tries = 0;
  for (;;) {
    BRAID_CHECK(r->net->accept(r->listen_comm, &r->net_comm));
    if (r->net_comm != NULL) break;
    BRAID_CHECK(net_connect_wait(r, "accepting the connection of", deadline, &tries));
  }
  r->net->closeListen(r->listen_comm);
  r->listen_comm = NULL;
  /* Host mode: Simple steps that become my output unchanged land there (kernels/direct.h),
   * when the plugin receives into any host address and this comm writes only inside test():
   * a receive the executor abandons must stop writing at once (declared capabilities). */
  struct braid_conn* conn = &c->conn;
  int inline_recv = 0;
  if (r->net->recvInline != NULL && r->net->recvInline(r->net_comm, &inline_recv) != ncclSuccess) inline_recv = 0;
  r->rdirect = !r->device && (r->ptr_support & BRAID_NET_PTR_HOST_ANY) && inline_recv &&
               braid_param_int(BRAID_PARAM_NET_DIRECT) != 0;
  conn->rdirect = r->rdirect;
  conn->host_abandon = braid_net_abandon_conn;
  return net_start(r);
}

/* A sender that is not aborting lets the proxy hand over what the executor published. */
static void net_flush(struct net_res* r) {
  uint64_t last = __atomic_load_n(&r->ctrl->head, __ATOMIC_ACQUIRE);
  int64_t idle_since = braid_socket_clock_ns();
  unsigned tries = 0;
  for (;;) {
    uint64_t head = __atomic_load_n(&r->ctrl->head, __ATOMIC_ACQUIRE);
    if (head >= __atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE)) return;
    if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) return;
    if (__atomic_load_n(r->tctx->abort_flag, __ATOMIC_ACQUIRE)) return;
    int64_t now = braid_socket_clock_ns();
    if (head != last) {
      last = head;
      idle_since = now;
    } else if (now - idle_since > NET_FLUSH_IDLE_S * 1000000000LL) {
      char who[160];
      BRAID_WARN("NET/%s : rank %d: closing with %llu steps not taken by %s for %d s (channel %d); dropping them",
                 r->desc, r->tctx->rank, (unsigned long long)(r->ctrl->tail - head),
                 braid_transport_peer_name(r->tctx, r->peer, who, sizeof(who)), NET_FLUSH_IDLE_S, r->channel);
      return;
    }
    if (tries++ < 100)
      sched_yield();
    else
      usleep(200);
  }
}

static void net_send_free(struct braid_connector* c) {
  struct net_res* r = c->res;
  if (r != NULL && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == NET_STATE_ACTIVE) {
    const struct braid_transport_ctx* t = r->tctx;
    net_flush(r);
    braid_net_proxy_remove(r); /* the plugin comm is ours alone from here */
    uint32_t aborted = __atomic_load_n(t->abort_flag, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != NET_STATE_ACTIVE) {
      /* broken: nothing to say on it */
    } else if (aborted) {
      /* Tell the receiver whom this rank blames, so it need not guess (code: rank + 1). A
       * failure braid raised keeps its culprit (a later ncclCommAbort overwrites the flag). */
      int blamed = t->blamed_peer != NULL ? t->blamed_peer(t->owner) : -1;
      int code = blamed >= 0 ? blamed + 1 : 0;
      if (r->net->abortSend != NULL) r->net->abortSend(r->net_comm, code);
    } else if (r->net->finishSend != NULL &&
               __atomic_load_n(&r->ctrl->head, __ATOMIC_ACQUIRE) >= __atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE)) {
      r->net->finishSend(r->net_comm);
    }
  }
  net_res_free(c);
}

static void net_recv_free(struct braid_connector* c) {
  net_res_free(c);
}

/* "Socket/0": the text after "via NET/" in the connection's INFO lines. */
static const char* net_desc(const struct braid_connector* c) {
  const struct net_res* r = c->res;
  return r != NULL ? r->desc : "?";
}

/* Each end's own FIFO in host memory (plain, or pinned and mapped on a device). */
static const volatile struct braid_conn_ctrl* net_host_ctrl(const struct braid_connector* c) {
  const struct net_res* r = c->res;
  return r != NULL ? r->ctrl : NULL;
}

const struct braid_transport braid_transport_net = {
    .name = "NET",
    .caps = BRAID_TRANSPORT_CAP_PROXIED,
    .log_subsys = BRAID_LOG_NET,
    .can_connect = net_can_connect,
    .send_setup = net_send_setup,
    .recv_setup = net_recv_setup,
    .send_connect = net_send_connect,
    .recv_connect = net_recv_connect,
    .send_free = net_send_free,
    .recv_free = net_recv_free,
    .desc = net_desc,
    .host_ctrl = net_host_ctrl,
    .progress = braid_net_progress,
    .wait = braid_net_wait,
    .prof_push = braid_net_prof_push,
    .prof_drain = braid_net_prof_drain,
};
