/*
 * ucx_conn.c - the "UCX" net plugin (net.h): its device, per-communicator contexts, listen /
 * connect / accept over a control socket (never blocking; the handshake carries the
 * communicator's secret), closing, and the table. Requests and waiting: ucx_io.c. The design
 * (one worker per process, tags per connection, the control socket): ucx.h.
 *
 * One device: whatever UCX picks underneath (UCX_TLS, UCX_NET_DEVICES: shared memory, TCP,
 * verbs), named after the interface the control sockets use.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/socket_pending.h"
#include "transport/net/ucx/ucx.h"

/* A connect under way, keyed by the caller's handle (net.h: called again with the same one). */
struct ucx_connecting {
  struct ucx_connecting* next;
  const void* key;
  struct braid_socket sock;
  int stage; /* 0 connecting, 1 handshake */
  struct braid_socket_handshake hs;
  size_t off;
};

struct ucx_ctx {
  uint64_t secret;
  struct ucx_connecting* connecting;
};

/* A listener: accepted sockets wait in `pending` until their handshake says UCX sender;
 * `ours` is the one this accept call takes. */
struct ucx_listen {
  struct braid_socket sock;
  struct braid_socket_pending_list pending;
  struct braid_socket ours;
};

/* ---- device -------------------------------------------------------------------------------- */

static ncclResult_t ucx_init(braid_net_log_fn log) {
  return ucx_load();
}

static ncclResult_t ucx_devices(int* ndev) {
  *ndev = ucx.loaded && ucx.ifname[0] ? 1 : 0;
  return ncclSuccess;
}

/* The interface's device in sysfs (as Socket reports it), NULL when it has none (lo). */
static const char* ucx_pci_path(void) {
  static char path[PATH_MAX];
  static int done;
  if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "/sys/class/net/%s/device", ucx.ifname);
    if (realpath(link, path) == NULL) path[0] = '\0';
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  }
  return path[0] ? path : NULL;
}

static ncclResult_t ucx_get_properties(int dev, struct braid_net_props* props) {
  if (dev != 0 || !ucx.loaded) {
    BRAID_WARN("NET/UCX : getProperties: invalid device %d (%d devices)", dev, ucx.loaded ? 1 : 0);
    return ncclInvalidArgument;
  }
  memset(props, 0, sizeof(*props));
  props->name = ucx.ifname;
  props->pciPath = ucx_pci_path();
  props->guid = 0;
  /* tagged sends from any host address; receives stay in the FIFO (no recvInline: another
   * connection's progress on the shared worker may complete a receive nobody tests) */
  props->ptrSupport = BRAID_NET_PTR_HOST | BRAID_NET_PTR_HOST_ANY;
  props->regIsGlobal = 1; /* ucp_mem_map is per context: valid on every endpoint */
  props->speed = braid_socket_if_speed(ucx.ifname);
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  return ncclSuccess;
}

/* ---- contexts ------------------------------------------------------------------------------ */

static ncclResult_t ucx_open_context(uint64_t comm_id, const struct braid_net_config* config, void** ctx_p) {
  struct ucx_ctx* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    BRAID_WARN("NET/UCX : failed to allocate a context");
    return ncclSystemError;
  }
  pthread_mutex_lock(&ucx_lock);
  ncclResult_t res = ucx_worker_get();
  pthread_mutex_unlock(&ucx_lock);
  if (res != ncclSuccess) {
    free(ctx);
    return res;
  }
  ctx->secret = config->secret;
  *ctx_p = ctx;
  return ncclSuccess;
}

static void connecting_free(struct ucx_connecting* k) {
  braid_socket_close(&k->sock);
  free(k);
}

static ncclResult_t ucx_close_context(void* p) {
  struct ucx_ctx* ctx = p;
  if (ctx == NULL) return ncclSuccess;
  while (ctx->connecting != NULL) {
    struct ucx_connecting* k = ctx->connecting;
    ctx->connecting = k->next;
    connecting_free(k);
  }
  free(ctx);
  pthread_mutex_lock(&ucx_lock);
  ucx_worker_put();
  pthread_mutex_unlock(&ucx_lock);
  return ncclSuccess;
}

/* ---- listen / connect / accept ------------------------------------------------------------- */

static ncclResult_t ucx_listen(void* p, int dev, void* handle, void** listen_p) {
  struct ucx_ctx* ctx = p;
  struct ucx_handle* h = handle;
  *listen_p = NULL;
  if (dev != 0) {
    BRAID_WARN("NET/UCX : listen: invalid device %d (1 device)", dev);
    return ncclInvalidArgument;
  }
  struct ucx_listen* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    BRAID_WARN("NET/UCX : failed to allocate a listener");
    return ncclSystemError;
  }
  union braid_sockaddr addr = ucx.ifaddr;
  braid_socket_addr_set_port(&addr, 0);
  ncclResult_t res = braid_socket_listen(&l->sock, &addr);
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  braid_socket_pending_init(&l->pending, "NET/UCX", ctx->secret, BRAID_SOCKET_TYPE_NET, UCX_HANDSHAKE_MS);
  memset(h, 0, BRAID_NET_HANDLE_MAXSIZE);
  h->magic = UCX_HANDLE_MAGIC;
  h->addr = l->sock.addr;
  *listen_p = l;
  return ncclSuccess;
}

static ncclResult_t comm_new(int is_send, struct braid_socket* sock, struct ucx_comm** c_p) {
  struct ucx_comm* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    BRAID_WARN("NET/UCX : failed to allocate a connection");
    braid_socket_close(sock);
    return ncclSystemError;
  }
  c->is_send = is_send;
  braid_net_ctrl_init(&c->ctl, is_send, UCX_MSG_MAGIC);
  c->ctl.sock = *sock;
  braid_socket_init(sock);
  *c_p = c;
  return ncclSuccess;
}

/* The receiver's address is in: the endpoint (under ucx_lock). */
static int sender_ep(struct ucx_comm* c) {
  char a[BRAID_SOCKET_ADDR_STR_MAX];
  ucp_ep_params_t ep;
  memset(&ep, 0, sizeof(ep));
  /* No UCX peer-failure handling: the control socket tells a dead peer at once, and UCX 1.13's
   * keepalive lanes (TCP beside shared memory) hit an assertion in wireup when a peer dies
   * (ucp_request.c:684 "got REP message", seen in the kill cases). Closing then flushes,
   * bounded (ucx_close). */
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = (const ucp_address_t*)c->addr;
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucs_status_t s = ucx.api.ep_create(ucx.worker, &ep, &c->ep);
  free(c->addr);
  c->addr = NULL;
  if (s == UCS_OK) return 1;
  c->ep = NULL;
  BRAID_WARN("NET/UCX : ucp_ep_create to the receiver at %s failed: %s", braid_socket_addr_str(&c->ctl.sock.addr, a),
             ucx_status_str(s));
  ucx_fail(c, "ucp_ep_create failed: %s", ucx_status_str(s));
  return -1;
}

int ucx_sender_ready(struct ucx_comm* c) {
  if (c->ep != NULL) return 1;
  if (c->ctl.failed) return -1;
  size_t hl = sizeof(c->hello);
  if (c->hello_off < hl) {
    if (braid_socket_recv_try(&c->ctl.sock, &c->hello, hl, &c->hello_off) != ncclSuccess) {
      ucx_fail(c, "%s before sending its UCX address", braid_socket_fail_str(c->ctl.sock.fail));
      return -1;
    }
    if (c->hello_off < hl) return 0;
    if (c->hello.magic != UCX_MSG_MAGIC || c->hello.addrlen == 0 || c->hello.addrlen > UCX_ADDR_MAX) {
      ucx_fail(c, "sent garbage instead of its UCX address (magic 0x%08x, %u bytes)", c->hello.magic, c->hello.addrlen);
      return -1;
    }
    if ((c->addr = malloc(c->hello.addrlen)) == NULL) {
      BRAID_WARN("NET/UCX : failed to allocate %u bytes for a worker address", c->hello.addrlen);
      ucx_fail(c, "out of memory");
      return -1;
    }
    c->tag = c->hello.tag;
  }
  size_t off = c->hello_off - hl;
  if (braid_socket_recv_try(&c->ctl.sock, c->addr, c->hello.addrlen, &off) != ncclSuccess) {
    ucx_fail(c, "%s before sending its UCX address", braid_socket_fail_str(c->ctl.sock.fail));
    return -1;
  }
  c->hello_off = hl + off;
  if (off < c->hello.addrlen) return 0;
  return sender_ep(c);
}

/* Move a connect one stage on; *done_p once the handshake is out. */
static ncclResult_t connect_step(struct ucx_connecting* k, int* done_p) {
  *done_p = 0;
  if (k->stage == 0) {
    int done = 0;
    BRAID_CHECK(braid_socket_connect_finish(&k->sock, &done));
    if (!done) return ncclSuccess;
    k->stage = 1;
  }
  BRAID_CHECK(braid_socket_send_try(&k->sock, &k->hs, sizeof(k->hs), &k->off));
  *done_p = k->off == sizeof(k->hs);
  return ncclSuccess;
}

static ncclResult_t ucx_connect(void* p, int dev, void* handle, void** send_p) {
  ncclResult_t res = ncclSuccess;
  struct ucx_ctx* ctx = p;
  const struct ucx_handle* h = handle;
  struct ucx_connecting** pp = &ctx->connecting;
  *send_p = NULL;
  while (*pp != NULL && (*pp)->key != handle) pp = &(*pp)->next;
  struct ucx_connecting* k = *pp;
  if (k == NULL) {
    if (h->magic != UCX_HANDLE_MAGIC || !braid_socket_addr_valid(&h->addr)) {
      BRAID_WARN("NET/UCX : connect: the handle is not a UCX network handle (magic 0x%llx)",
                 (unsigned long long)h->magic);
      return ncclInvalidArgument;
    }
    BRAID_CALLOC_GOTO(k, 1, res, out);
    k->key = handle;
    braid_socket_init(&k->sock);
    k->hs = (struct braid_socket_handshake){ctx->secret, BRAID_SOCKET_TYPE_NET, UCX_HS_ARG};
    k->next = ctx->connecting;
    ctx->connecting = k;
    pp = &ctx->connecting;
    int done = 0;
    BRAID_CHECK_GOTO(braid_socket_connect_start(&k->sock, &h->addr, &done), res, err);
  }
  int done = 0;
  BRAID_CHECK_GOTO(connect_step(k, &done), res, err);
  if (!done) return ncclSuccess;
  *pp = k->next;
  struct ucx_comm* c = NULL;
  res = comm_new(1, &k->sock, &c);
  connecting_free(k);
  if (res == ncclSuccess) *send_p = c;
  return res;
err:
  *pp = k->next;
  connecting_free(k);
out:
  return res;
}

/* A connection with a valid handshake: our sender (one per accept call; more wait), or dropped. */
static int ucx_take(void* arg, struct braid_socket* s, const struct braid_socket_handshake* hs) {
  struct ucx_listen* l = arg;
  if (hs->arg != UCX_HS_ARG) {
    braid_socket_warn_drop("NET/UCX", &s->addr, "it is not a UCX connection (handshake arg %d)", hs->arg);
    return BRAID_PENDING_DROP;
  }
  if (l->ours.fd >= 0) return BRAID_PENDING_LATER;
  l->ours = *s;
  return BRAID_PENDING_TAKEN;
}

/* Our sender is in: tell it our tag and address (small: the socket's buffer takes it at once,
 * bounded anyway). */
static ncclResult_t accept_finish(struct braid_socket* sock, struct ucx_comm** c_p) {
  struct ucx_comm* c = NULL;
  BRAID_CHECK(comm_new(0, sock, &c));
  pthread_mutex_lock(&ucx_lock);
  c->tag = ++ucx.next_tag;
  struct ucx_hello hello = {UCX_MSG_MAGIC, (uint32_t)ucx.address_len, c->tag};
  int64_t deadline = braid_socket_deadline_ms(UCX_HANDSHAKE_MS);
  ncclResult_t res = braid_socket_send(&c->ctl.sock, &hello, sizeof(hello), NULL, deadline);
  if (res == ncclSuccess) res = braid_socket_send(&c->ctl.sock, ucx.address, ucx.address_len, NULL, deadline);
  pthread_mutex_unlock(&ucx_lock);
  if (res != ncclSuccess) {
    char a[BRAID_SOCKET_ADDR_STR_MAX];
    BRAID_WARN("NET/UCX : the sender at %s %s before it got our address", braid_socket_addr_str(&c->ctl.sock.addr, a),
               braid_socket_fail_str(c->ctl.sock.fail));
    braid_socket_close(&c->ctl.sock);
    free(c);
    return res;
  }
  *c_p = c;
  return ncclSuccess;
}

static ncclResult_t ucx_accept(void* p, void** recv_p) {
  struct ucx_listen* l = p;
  *recv_p = NULL;
  braid_socket_init(&l->ours);
  BRAID_CHECK(braid_socket_pending_poll(&l->pending, &l->sock, ucx_take, l));
  struct braid_socket ours = l->ours;
  if (ours.fd < 0) return ncclSuccess;
  struct ucx_comm* c = NULL;
  BRAID_CHECK(accept_finish(&ours, &c));
  *recv_p = c;
  return ncclSuccess;
}

static ncclResult_t ucx_close_listen(void* p) {
  struct ucx_listen* l = p;
  if (l == NULL) return ncclSuccess;
  braid_socket_pending_close(&l->pending);
  braid_socket_close(&l->sock);
  free(l);
  return ncclSuccess;
}

/* ---- close --------------------------------------------------------------------------------- */

/* Wait (bounded) for a UCX request to finish, then free it (under ucx_lock). */
static void request_finish(void* req) {
  if (req == NULL || UCS_PTR_IS_ERR(req)) return;
  int64_t deadline = braid_socket_deadline_ms(UCX_CLOSE_MS);
  while (ucx.api.request_check_status(req) == UCS_INPROGRESS && braid_socket_clock_ns() < deadline)
    ucx.api.worker_progress(ucx.worker);
  ucx.api.request_free(req); /* still in flight: UCX frees it when it is done */
}

static ncclResult_t ucx_close(void* comm) {
  struct ucx_comm* c = comm;
  if (c == NULL) return ncclSuccess;
  pthread_mutex_lock(&ucx_lock);
  ucx_comm_drop_requests(c);
  if (c->ep != NULL) {
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = 0; /* flush what was sent first (FORCE needs UCP_ERR_HANDLING_MODE_PEER) */
    request_finish(ucx.api.ep_close_nbx(c->ep, &param));
  }
  pthread_mutex_unlock(&ucx_lock);
  braid_socket_close(&c->ctl.sock);
  free(c->addr);
  free(c);
  return ncclSuccess;
}

static ncclResult_t ucx_iflush(void* comm, int n, void** data, size_t* sizes, void** mhandles, void** request) {
  *request = NULL; /* host memory: nothing to flush */
  return ncclSuccess;
}

const struct braid_net_v1 braid_net_ucx = {
    .name = "UCX",
    .init = ucx_init,
    .devices = ucx_devices,
    .getProperties = ucx_get_properties,
    .openContext = ucx_open_context,
    .closeContext = ucx_close_context,
    .listen = ucx_listen,
    .connect = ucx_connect,
    .accept = ucx_accept,
    .regMr = ucx_reg_mr,
    .deregMr = ucx_dereg_mr,
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .iflush = ucx_iflush,
    .test = ucx_test,
    .closeSend = ucx_close,
    .closeRecv = ucx_close,
    .closeListen = ucx_close_listen,
    .waitFds = ucx_wait_fds,
    .finishSend = ucx_finish_send,
    .abortSend = ucx_abort_send,
    .getStatus = ucx_get_status,
    .recvInline = NULL,
};
