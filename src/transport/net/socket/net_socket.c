/*
 * net_socket.c - the built-in "Socket" net plugin (net.h): TCP over the interfaces the
 * bootstrap would use (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY; socket.h picks them), one
 * device per interface. This file: devices and their properties, per-communicator contexts,
 * listen / connect / accept (never blocking; handshakes carry the communicator's secret), and
 * the table. The wire format and data movement: net_socket.h, net_socket_io.c.
 *
 * NCCL_SOCKET_NTHREADS (0..16, default 0) helper threads per connection, each owning
 * NCCL_NSOCKS_PERTHREAD (default 1) data sockets, at most 64 sockets: large messages are then
 * spread over the data sockets. With no helper threads everything travels on one socket,
 * moved by whoever tests the requests (the progress engine or a host executor). The receiver
 * decides and puts the counts in its handle.
 */
#include "transport/net/socket/net_socket.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket_pending.h"

static pthread_mutex_t sock_init_lock = PTHREAD_MUTEX_INITIALIZER;
static int sock_ndevs = -1; /* -1: not initialised */
static char sock_dev_names[SOCK_MAX_DEVS][BRAID_SOCKET_NAME_MAX];
static union braid_sockaddr sock_dev_addrs[SOCK_MAX_DEVS];
static char sock_dev_pci[SOCK_MAX_DEVS][PATH_MAX];

/* A connect under way, keyed by the caller's handle (net.h: called again with the same one). */
struct sock_connecting {
  struct sock_connecting* next;
  const void* key;
  int nsocks, nthreads;
  struct braid_socket socks[SOCK_MAX_SOCKS + 1]; /* 0: control */
  int stage[SOCK_MAX_SOCKS + 1];                 /* 0 connecting, 1 handshake, 2 done */
  struct braid_socket_handshake hs[SOCK_MAX_SOCKS + 1];
  size_t off[SOCK_MAX_SOCKS + 1];
};

struct sock_ctx {
  uint64_t secret;
  struct sock_connecting* connecting;
};

/* A listener: accepted sockets wait in `pending` until their handshake names a data socket. */
struct sock_listen {
  struct braid_socket sock;
  int nsocks, nthreads;
  struct braid_socket_pending_list pending;
  struct braid_socket got[SOCK_MAX_SOCKS + 1]; /* identified, by index */
  int ngot;
};

/* ---- devices ------------------------------------------------------------------------------- */

static ncclResult_t sock_init(braid_net_log_fn log) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&sock_init_lock);
  if (sock_ndevs < 0) {
    int n = 0;
    BRAID_CHECK_GOTO(braid_socket_find_interfaces(NULL, &sock_dev_names[0][0], sock_dev_addrs, SOCK_MAX_DEVS, &n), res,
                     out);
    char line[1024], addr[BRAID_SOCKET_ADDR_STR_MAX];
    int len = 0;
    for (int i = 0; i < n; i++) {
      char path[PATH_MAX];
      snprintf(path, sizeof(path), "/sys/class/net/%s/device", sock_dev_names[i]);
      if (realpath(path, sock_dev_pci[i]) == NULL) sock_dev_pci[i][0] = '\0';
      len += snprintf(line + len, sizeof(line) - len, " [%d]%s:%s", i, sock_dev_names[i],
                      braid_socket_addr_str(&sock_dev_addrs[i], addr));
      if (len >= (int)sizeof(line)) len = (int)sizeof(line) - 1;
    }
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Socket : Using%s", line);
    sock_ndevs = n;
  }
out:
  pthread_mutex_unlock(&sock_init_lock);
  return res;
}

static ncclResult_t sock_devices(int* ndev) {
  *ndev = sock_ndevs < 0 ? 0 : sock_ndevs;
  return ncclSuccess;
}

static ncclResult_t sock_check_dev(int dev, const char* fn) {
  if (dev >= 0 && dev < sock_ndevs) return ncclSuccess;
  BRAID_WARN("NET/Socket : %s: invalid device %d (%d devices)", fn, dev, sock_ndevs < 0 ? 0 : sock_ndevs);
  return ncclInvalidArgument;
}

static ncclResult_t sock_get_properties(int dev, struct braid_net_props* props) {
  BRAID_CHECK(sock_check_dev(dev, "getProperties"));
  memset(props, 0, sizeof(*props));
  props->name = sock_dev_names[dev];
  props->pciPath = sock_dev_pci[dev][0] ? sock_dev_pci[dev] : NULL;
  props->guid = (uint64_t)dev;
  props->ptrSupport = BRAID_NET_PTR_HOST | BRAID_NET_PTR_HOST_ANY; /* plain send()/recv() on any address */
  props->regIsGlobal = 1;
  props->speed = braid_socket_if_speed(sock_dev_names[dev]);
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  return ncclSuccess;
}

/* Helper threads and data sockets per connection, from the environment (NCCL's limits). */
static void sock_counts(int* nthreads_p, int* nsocks_p) {
  int64_t nt = braid_param_int(BRAID_PARAM_SOCKET_NTHREADS), ns = braid_param_int(BRAID_PARAM_NSOCKS_PERTHREAD);
  if (nt == BRAID_PARAM_UNSET) nt = ns == BRAID_PARAM_UNSET ? 0 : 1;
  if (ns == BRAID_PARAM_UNSET) ns = 1;
  if (nt < 0 || nt > SOCK_MAX_THREADS) {
    BRAID_WARN("NET/Socket : NCCL_SOCKET_NTHREADS=%lld is out of range (0..%d), using %d", (long long)nt,
               SOCK_MAX_THREADS, nt < 0 ? 0 : SOCK_MAX_THREADS);
    nt = nt < 0 ? 0 : SOCK_MAX_THREADS;
  }
  if (ns < 1) {
    BRAID_WARN("NET/Socket : NCCL_NSOCKS_PERTHREAD=%lld is out of range (at least 1), using 1", (long long)ns);
    ns = 1;
  }
  if (nt * ns > SOCK_MAX_SOCKS) {
    BRAID_WARN(
        "NET/Socket : NCCL_SOCKET_NTHREADS=%lld x NCCL_NSOCKS_PERTHREAD=%lld is more than %d sockets, using %lld "
        "per thread",
        (long long)nt, (long long)ns, SOCK_MAX_SOCKS, (long long)(SOCK_MAX_SOCKS / nt));
    ns = SOCK_MAX_SOCKS / nt;
  }
  *nthreads_p = (int)nt;
  *nsocks_p = (int)(nt * ns);
}

/* ---- contexts ------------------------------------------------------------------------------ */

static ncclResult_t sock_open_context(uint64_t comm_id, const struct braid_net_config* config, void** ctx_p) {
  struct sock_ctx* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    BRAID_WARN("NET/Socket : failed to allocate a context");
    return ncclSystemError;
  }
  ctx->secret = config->secret;
  *ctx_p = ctx;
  return ncclSuccess;
}

static void sock_connecting_free(struct sock_connecting* k) {
  for (int i = 0; i <= k->nsocks; i++) braid_socket_close(&k->socks[i]);
  free(k);
}

static ncclResult_t sock_close_context(void* p) {
  struct sock_ctx* ctx = p;
  if (ctx == NULL) return ncclSuccess;
  while (ctx->connecting != NULL) {
    struct sock_connecting* k = ctx->connecting;
    ctx->connecting = k->next;
    sock_connecting_free(k);
  }
  free(ctx);
  return ncclSuccess;
}

/* ---- comms --------------------------------------------------------------------------------- */

/* A comm over connected sockets (0: control, then the data sockets); takes them over. */
static ncclResult_t sock_comm_new(int is_send, int nsocks, int nthreads, struct braid_socket* socks,
                                  struct sock_comm** c_p) {
  struct sock_comm* c = calloc(1, sizeof(*c));
  if (c != NULL && nsocks > 0) {
    c->data = calloc((size_t)nsocks, sizeof(*c->data));
    c->helpers = calloc((size_t)nthreads, sizeof(*c->helpers));
  }
  if (c == NULL || (nsocks > 0 && (c->data == NULL || c->helpers == NULL))) {
    BRAID_WARN("NET/Socket : failed to allocate a connection of %d sockets", nsocks + 1);
    for (int i = 0; i <= nsocks; i++) braid_socket_close(&socks[i]);
    if (c != NULL) {
      free(c->data);
      free(c->helpers);
    }
    free(c);
    return ncclSystemError;
  }
  pthread_mutex_init(&c->fail_lock, NULL);
  c->is_send = is_send;
  c->nsocks = nsocks;
  c->nthreads = nsocks > 0 ? nthreads : 0;
  c->efd = -1;
  if (!is_send && (c->stage = malloc(SOCK_STAGE)) == NULL) {
    BRAID_WARN("NET/Socket : failed to allocate %d bytes for a connection", SOCK_STAGE);
    for (int i = 0; i <= nsocks; i++) braid_socket_close(&socks[i]);
    pthread_mutex_destroy(&c->fail_lock);
    free(c->data);
    free(c->helpers);
    free(c);
    return ncclSystemError;
  }
  c->ctrl = socks[0];
  braid_socket_init(&socks[0]);
  for (int i = 0; i < nsocks; i++) {
    c->data[i].sock = socks[1 + i];
    braid_socket_init(&socks[1 + i]);
  }
  for (int i = 0; i < c->nthreads; i++) {
    pthread_mutex_init(&c->helpers[i].mutex, NULL);
    pthread_cond_init(&c->helpers[i].cond, NULL);
  }
  ncclResult_t res = sock_comm_start(c);
  if (res != ncclSuccess) {
    sock_comm_free(c);
    return res;
  }
  *c_p = c;
  return ncclSuccess;
}

static ncclResult_t sock_listen(void* p, int dev, void* handle, void** listen_p) {
  ncclResult_t res = ncclSuccess;
  struct sock_ctx* ctx = p;
  struct sock_handle* h = handle;
  *listen_p = NULL;
  BRAID_CHECK(sock_check_dev(dev, "listen"));
  struct sock_listen* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    BRAID_WARN("NET/Socket : failed to allocate a listener");
    return ncclSystemError;
  }
  union braid_sockaddr addr = sock_dev_addrs[dev];
  braid_socket_addr_set_port(&addr, 0);
  BRAID_CHECK_GOTO(braid_socket_listen(&l->sock, &addr), res, err);
  for (int i = 0; i <= SOCK_MAX_SOCKS; i++) braid_socket_init(&l->got[i]);
  braid_socket_pending_init(&l->pending, "NET/Socket", ctx->secret, BRAID_SOCKET_TYPE_NET, SOCK_HANDSHAKE_MS);
  sock_counts(&l->nthreads, &l->nsocks);
  memset(h, 0, BRAID_NET_HANDLE_MAXSIZE);
  h->magic = SOCK_HANDLE_MAGIC;
  h->addr = l->sock.addr;
  h->nsocks = (uint32_t)l->nsocks;
  h->nthreads = (uint32_t)l->nthreads;
  *listen_p = l;
  return ncclSuccess;
err:
  free(l);
  return res;
}

/* Move every socket of a connect one stage on. 1 when all are done. */
static ncclResult_t sock_connect_step(struct sock_connecting* k, int* done_p) {
  int all = 1;
  for (int i = 0; i <= k->nsocks; i++) {
    struct braid_socket* s = &k->socks[i];
    if (k->stage[i] == 0) {
      int done = 0;
      BRAID_CHECK(braid_socket_connect_finish(s, &done));
      if (done) k->stage[i] = 1;
    }
    if (k->stage[i] == 1) {
      BRAID_CHECK(braid_socket_send_try(s, &k->hs[i], sizeof(k->hs[i]), &k->off[i]));
      if (k->off[i] == sizeof(k->hs[i])) k->stage[i] = 2;
    }
    all &= k->stage[i] == 2;
  }
  *done_p = all;
  return ncclSuccess;
}

static ncclResult_t sock_connect(void* p, int dev, void* handle, void** send_p) {
  ncclResult_t res = ncclSuccess;
  struct sock_ctx* ctx = p;
  const struct sock_handle* h = handle;
  struct sock_connecting** pp = &ctx->connecting;
  *send_p = NULL;
  while (*pp != NULL && (*pp)->key != handle) pp = &(*pp)->next;
  struct sock_connecting* k = *pp;
  if (k == NULL) {
    if (h->magic != SOCK_HANDLE_MAGIC || h->nsocks > SOCK_MAX_SOCKS || h->nthreads > SOCK_MAX_THREADS ||
        (h->nsocks > 0) != (h->nthreads > 0) || !braid_socket_addr_valid(&h->addr)) {
      BRAID_WARN("NET/Socket : connect: the handle is not a Socket network handle (magic 0x%llx)",
                 (unsigned long long)h->magic);
      return ncclInvalidArgument;
    }
    BRAID_CALLOC_GOTO(k, 1, res, out);
    k->key = handle;
    k->nsocks = (int)h->nsocks;
    k->nthreads = (int)h->nthreads;
    for (int i = 0; i <= k->nsocks; i++) braid_socket_init(&k->socks[i]);
    k->next = ctx->connecting;
    ctx->connecting = k;
    pp = &ctx->connecting;
    for (int i = 0; i <= k->nsocks; i++) {
      int done = 0;
      k->hs[i] = (struct braid_socket_handshake){ctx->secret, BRAID_SOCKET_TYPE_NET, i};
      BRAID_CHECK_GOTO(braid_socket_connect_start(&k->socks[i], &h->addr, &done), res, err);
    }
  }
  int done = 0;
  BRAID_CHECK_GOTO(sock_connect_step(k, &done), res, err);
  if (!done) return ncclSuccess;
  *pp = k->next;
  struct sock_comm* c = NULL;
  res = sock_comm_new(1, k->nsocks, k->nthreads, k->socks, &c);
  free(k);
  if (res == ncclSuccess) *send_p = c;
  return res;
err:
  *pp = k->next;
  sock_connecting_free(k);
out:
  return res;
}

/* A connection with a valid handshake: one of our data sockets, by index, or dropped. */
static int sock_take(void* arg, struct braid_socket* s, const struct braid_socket_handshake* hs) {
  struct sock_listen* l = arg;
  int i = hs->arg;
  if (i < 0 || i > l->nsocks || l->got[i].fd >= 0) {
    braid_socket_warn_drop("NET/Socket", &s->addr, "socket index %d is not expected (%d data sockets%s)", i, l->nsocks,
                           i >= 0 && i <= l->nsocks ? ", and that one is already connected" : "");
    return BRAID_PENDING_DROP;
  }
  l->got[i] = *s;
  l->ngot++;
  return BRAID_PENDING_TAKEN;
}

static ncclResult_t sock_accept(void* p, void** recv_p) {
  struct sock_listen* l = p;
  *recv_p = NULL;
  BRAID_CHECK(braid_socket_pending_poll(&l->pending, &l->sock, sock_take, l));
  if (l->ngot < l->nsocks + 1) return ncclSuccess;
  struct sock_comm* c = NULL;
  BRAID_CHECK(sock_comm_new(0, l->nsocks, l->nthreads, l->got, &c));
  l->ngot = 0;
  *recv_p = c;
  return ncclSuccess;
}

static ncclResult_t sock_close_listen(void* p) {
  struct sock_listen* l = p;
  if (l == NULL) return ncclSuccess;
  braid_socket_pending_close(&l->pending);
  for (int i = 0; i <= SOCK_MAX_SOCKS; i++) braid_socket_close(&l->got[i]);
  braid_socket_close(&l->sock);
  free(l);
  return ncclSuccess;
}

static ncclResult_t sock_close(void* comm) {
  sock_comm_free(comm);
  return ncclSuccess;
}

/* Host memory needs no registration; the handle only has to be non-NULL. */
static ncclResult_t sock_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != BRAID_NET_PTR_HOST) {
    BRAID_WARN("NET/Socket : regMr: memory type %d is not host memory (the Socket network reaches host memory only)",
               type);
    return ncclInvalidArgument;
  }
  *mhandle = comm;
  return ncclSuccess;
}

static ncclResult_t sock_dereg_mr(void* comm, void* mhandle) {
  return ncclSuccess;
}

static ncclResult_t sock_iflush(void* comm, int n, void** data, size_t* sizes, void** mhandles, void** request) {
  *request = NULL; /* host memory: nothing to flush */
  return ncclSuccess;
}

/* Without helper threads a receive moves bytes only inside sock_test(): one the transport
 * stops testing writes nothing more. */
static ncclResult_t sock_recv_inline(void* recv_comm, int* yes) {
  const struct sock_comm* c = recv_comm;
  *yes = c != NULL && !c->is_send && c->nthreads == 0;
  return ncclSuccess;
}

const struct braid_net_v1 braid_net_socket = {
    .name = "Socket",
    .init = sock_init,
    .devices = sock_devices,
    .getProperties = sock_get_properties,
    .openContext = sock_open_context,
    .closeContext = sock_close_context,
    .listen = sock_listen,
    .connect = sock_connect,
    .accept = sock_accept,
    .regMr = sock_reg_mr,
    .deregMr = sock_dereg_mr,
    .isend = sock_isend,
    .irecv = sock_irecv,
    .iflush = sock_iflush,
    .test = sock_test,
    .closeSend = sock_close,
    .closeRecv = sock_close,
    .closeListen = sock_close_listen,
    .waitFds = sock_wait_fds,
    .finishSend = sock_finish_send,
    .abortSend = sock_abort_send,
    .getStatus = sock_get_status,
    .recvInline = sock_recv_inline,
};
