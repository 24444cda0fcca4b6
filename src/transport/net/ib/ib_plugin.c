/*
 * ib_plugin.c - the "IB" net plugin (net.h): its devices (every ACTIVE port NCCL_IB_HCA keeps,
 * ib_devices.c), per-communicator contexts, listen / connect / accept over a control socket
 * (never blocking; the handshake carries the communicator's secret), QP setup, closing, and the
 * table. Requests: ib_io.c. The design: ib_net.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "base/socket_pending.h"
#include "transport/net/ib/ib_gid.h"
#include "transport/net/ib/ib_net.h"

struct ib_global ib;
static pthread_mutex_t ib_init_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- devices ------------------------------------------------------------------------------- */

/* The GID index (ib_gid.h: NCCL's rules). RoCE: NCCL_IB_GID_INDEX, or the table's choice for
 * NCCL_IB_ADDR_FAMILY / _ROCE_VERSION_NUM / _ADDR_RANGE (versions from ibv_query_gid_ex; a
 * library without it: not known). InfiniBand: the routable-FLID index when its GID has one. */
static int gid_pick(struct ib_dev* d) {
  const struct braid_ibv* v = ib.ibv;
  uint8_t port = (uint8_t)d->port.port;
  union ibv_gid g;
  if (!d->port.roce) {
    int flid = (int)braid_param_int(BRAID_PARAM_IB_ROUTABLE_FLID_GID_INDEX);
    int routable = flid < d->port.gid_tbl_len && v->query_gid(d->ctx, port, flid, &g) == 0 && (g.raw[4] | g.raw[5]);
    return routable ? flid : 0;
  }
  int want = (int)braid_param_int(BRAID_PARAM_IB_GID_INDEX);
  if (want >= 0) return want;
  struct braid_ib_gid tbl[256];
  int n = d->port.gid_tbl_len < 256 ? d->port.gid_tbl_len : 256;
  for (int i = 0; i < n; i++) {
    struct ibv_gid_entry e;
    memset(&tbl[i], 0, sizeof(tbl[i]));
    if (v->query_gid(d->ctx, port, i, &g) == 0) memcpy(tbl[i].raw, g.raw, 16);
    if (v->query_gid_ex != NULL && v->query_gid_ex(d->ctx, port, (uint32_t)i, &e, 0, sizeof(e)) == 0)
      tbl[i].version = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2 : 1; /* IB/RoCE v1 counts as v1, as NCCL */
  }
  struct braid_ib_gid_want w;
  braid_ib_gid_want_env(&w);
  return n > 0 ? braid_ib_gid_select(tbl, n, &w) : 0;
}

static ncclResult_t dev_open(const struct braid_ib_port* p, struct ib_dev* d) {
  const struct braid_ibv* v = ib.ibv;
  memset(d, 0, sizeof(*d));
  d->port = *p;
  pthread_mutex_init(&d->lock, NULL);
  int n = 0;
  struct ibv_device** list = v->get_device_list(&n);
  for (int i = 0; list != NULL && i < n && d->ctx == NULL; i++)
    if (strcmp(v->get_device_name(list[i]), p->dev) == 0) d->ctx = v->open_device(list[i]);
  if (list != NULL) v->free_device_list(list);
  struct ibv_port_attr pa;
  memset(&pa, 0, sizeof(pa));
  if (d->ctx == NULL || v->query_port(d->ctx, (uint8_t)p->port, &pa) != 0 || (d->pd = v->alloc_pd(d->ctx)) == NULL) {
    BRAID_WARN("NET/IB : %s:%d: %s failed", p->dev, p->port,
               d->ctx == NULL              ? "ibv_open_device"
               : d->pd == NULL && pa.state ? "ibv_alloc_pd"
                                           : "ibv_query_port");
    if (d->ctx != NULL) v->close_device(d->ctx);
    return ncclSystemError;
  }
  d->lid = pa.lid;
  d->mtu = (uint8_t)pa.active_mtu;
  d->gid_index = gid_pick(d);
  if (v->query_gid(d->ctx, (uint8_t)p->port, d->gid_index, &d->gid) != 0) memset(&d->gid, 0, sizeof(d->gid));
  ib_gdr_probe(d);
  int64_t ar = braid_param_int(BRAID_PARAM_IB_ADAPTIVE_ROUTING);
  d->ar = ar == BRAID_PARAM_UNSET ? !p->roce : ar != 0; /* NCCL: on for InfiniBand, off for RoCE */
  return ncclSuccess;
}

static void params_read(void) {
  ib.nqps = (int)braid_param_int(BRAID_PARAM_IB_QPS_PER_CONNECTION);
  ib.split = (int)braid_param_int(BRAID_PARAM_IB_SPLIT_DATA_ON_QPS);
  ib.timeout = (int)braid_param_int(BRAID_PARAM_IB_TIMEOUT);
  ib.retry_cnt = (int)braid_param_int(BRAID_PARAM_IB_RETRY_CNT);
  ib.sl = (int)braid_param_int(BRAID_PARAM_IB_SL);
  ib.tc = (int)braid_param_int(BRAID_PARAM_IB_TC);
  ib.ro = (int)braid_param_int(BRAID_PARAM_IB_PCI_RELAXED_ORDERING) != 0; /* 2 (auto): use it */
}

static ncclResult_t ib_init(braid_net_log_fn log) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&ib_init_lock);
  if (ib.inited) goto out;
  if (braid_param_int(BRAID_PARAM_IB_DISABLE)) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB : disabled by NCCL_IB_DISABLE=1");
    ib.inited = 1; /* no device */
    goto out;
  }
  BRAID_CHECK_GOTO(braid_ibv_load(&ib.ibv, NULL), res, out);
  struct braid_ib_port ports[BRAID_IB_MAX_PORTS];
  int n = 0, nif = 0;
  BRAID_CHECK_GOTO(braid_ib_discover(ib.ibv, braid_param_str(BRAID_PARAM_IB_HCA), ports, BRAID_IB_MAX_PORTS, &n), res,
                   out);
  if (n > 0) BRAID_CHECK_GOTO(braid_socket_find_interfaces(NULL, ib.ifname, &ib.ifaddr, 1, &nif), res, out);
  params_read();
  char line[1024] = "", a[BRAID_SOCKET_ADDR_STR_MAX];
  int len = 0;
  for (int i = 0; i < n && nif > 0; i++) {
    if (dev_open(&ports[i], &ib.dev[ib.ndev]) != ncclSuccess) continue;
    len += snprintf(line + len, sizeof(line) - (size_t)len, " [%d]%s:%d/%s", ib.ndev, ports[i].dev, ports[i].port,
                    ports[i].roce ? "RoCE" : "IB");
    ib.ndev++;
  }
  /* NCCL's line, once per process (discovery itself says nothing when it found ports) */
  if (ib.ndev > 0)
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB : Using%s %s; OOB %s:%s", line, ib.ro ? "[RO]" : "", ib.ifname,
               braid_socket_addr_str(&ib.ifaddr, a));
  ib.inited = 1;
out:
  pthread_mutex_unlock(&ib_init_lock);
  return res;
}

static ncclResult_t ib_devices(int* ndev) {
  *ndev = ib.ndev;
  return ncclSuccess;
}

/* The HCA's PCI device as NCCL's IB plugin reports it (ncclIbGetPciPath): the realpath of
 * /sys/class/infiniband/<dev>/device with the function (last digit) and, NCCL's default
 * NCCL_IB_MERGE_VFS=1, the virtual function (the device's last two digits) zeroed, so ports
 * and VFs of one NIC share its place in the topology; NULL when sysfs has no such device (the
 * emulated HCAs). Computed once per device. */
static const char* ib_pci_path(int dev) {
  static char paths[BRAID_IB_MAX_PORTS][PATH_MAX];
  static int done[BRAID_IB_MAX_PORTS];
  if (!__atomic_load_n(&done[dev], __ATOMIC_ACQUIRE)) {
    char link[PATH_MAX], real[PATH_MAX];
    snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", ib.dev[dev].port.dev);
    paths[dev][0] = '\0';
    if (realpath(link, real) != NULL && strlen(real) >= 5) {
      size_t n = strlen(real);
      real[n - 1] = '0';
      real[n - 3] = real[n - 4] = '0';
      snprintf(paths[dev], sizeof(paths[dev]), "%s", real);
    }
    __atomic_store_n(&done[dev], 1, __ATOMIC_RELEASE);
  }
  return paths[dev][0] ? paths[dev] : NULL;
}

static ncclResult_t ib_get_properties(int dev, struct braid_net_props* props) {
  if (dev < 0 || dev >= ib.ndev) {
    BRAID_WARN("NET/IB : getProperties: invalid device %d (%d devices)", dev, ib.ndev);
    return ncclInvalidArgument;
  }
  const struct ib_dev* d = &ib.dev[dev];
  memset(props, 0, sizeof(*props));
  props->name = d->port.dev;
  props->pciPath = ib_pci_path(dev);
  props->guid = d->port.guid;
  props->ptrSupport = BRAID_NET_PTR_HOST | ib_gdr_ptr_support(d); /* GPUDirect RDMA: ib_gdr.c */
  props->regIsGlobal = 1; /* one PD per port: a registration serves every comm */
  props->speed = d->port.speed;
  props->port = d->port.port;
  props->latency = 0; /* as NCCL's IB plugin */
  props->maxComms = 65536;
  props->maxRecvs = 1;
  return ncclSuccess;
}

/* ---- contexts ------------------------------------------------------------------------------ */

/* A connect under way, keyed by the caller's handle (net.h: called again with the same one). */
struct ib_connecting {
  struct ib_connecting* next;
  const void* key;
  struct braid_socket sock;
  int stage; /* 0 connecting, 1 handshake + info */
  struct braid_socket_handshake hs;
  struct ib_comm* comm; /* its QPs (INIT) and FIFO, made at the first call */
  size_t off;
};

struct ib_ctx {
  uint64_t secret;
  int tc; /* config.trafficClass, else NCCL_IB_TC */
  struct ib_connecting* connecting;
};

/* A listener: accepted sockets wait in `pending` until their handshake says IB sender; `ours`
 * is the one this accept call takes (its QP numbers follow the handshake at once). */
struct ib_listen {
  struct braid_socket sock;
  struct braid_socket_pending_list pending;
  struct braid_socket ours;
  struct ib_ctx* ctx;
  int dev;
};

static ncclResult_t ib_open_context(uint64_t comm_id, const struct braid_net_config* config, void** ctx_p) {
  struct ib_ctx* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    BRAID_WARN("NET/IB : failed to allocate a context");
    return ncclSystemError;
  }
  ctx->secret = config->secret;
  ctx->tc = config->trafficClass >= 0 ? config->trafficClass : ib.tc;
  *ctx_p = ctx;
  return ncclSuccess;
}

static void comm_free(struct ib_comm* c) {
  if (c == NULL) return;
  const struct braid_ibv* v = ib.ibv;
  for (int i = 0; i < c->nqps; i++)
    if (c->qp[i] != NULL) v->destroy_qp(c->qp[i]);
  ib_gdr_flush_close(c);
  if (c->fifo_mr != NULL) v->dereg_mr(c->fifo_mr);
  if (c->cq != NULL) v->destroy_cq(c->cq);
  braid_socket_close(&c->ctl.sock);
  free(c);
}

static void connecting_free(struct ib_connecting* k) {
  braid_socket_close(&k->sock);
  comm_free(k->comm);
  free(k);
}

static ncclResult_t ib_close_context(void* p) {
  struct ib_ctx* ctx = p;
  if (ctx == NULL) return ncclSuccess;
  while (ctx->connecting != NULL) {
    struct ib_connecting* k = ctx->connecting;
    ctx->connecting = k->next;
    connecting_free(k);
  }
  free(ctx);
  return ncclSuccess;
}

/* ---- QPs ----------------------------------------------------------------------------------- */

/* A comm on device `dev`: CQ, nqps QPs in INIT, the FIFO registered; `mine` filled. */
static ncclResult_t comm_new(int is_send, int dev, const struct ib_ctx* ctx, int nqps, int split,
                             struct ib_comm** c_p) {
  const struct braid_ibv* v = ib.ibv;
  struct ib_dev* d = &ib.dev[dev];
  struct ib_comm* c = aligned_alloc(64, (sizeof(*c) + 63) & ~(size_t)63); /* the FIFO's alignment */
  if (c == NULL) {
    BRAID_WARN("NET/IB : failed to allocate a connection");
    return ncclSystemError;
  }
  memset(c, 0, sizeof(*c));
  ncclResult_t res = ncclSuccess;
  braid_net_ctrl_init(&c->ctl, is_send, IB_MSG_MAGIC);
  c->is_send = is_send;
  c->dev = d;
  c->nqps = nqps;
  c->split = split;
  c->cfg = (struct braid_ib_qp_cfg){d->port.dev, d->port.port, d->port.roce, d->gid_index,
                                    ib.timeout,  ib.retry_cnt, ib.sl,        ctx->tc};
  int cqe = 2 * IB_NREQ * (nqps + 1);
  if ((c->cq = v->create_cq(d->ctx, cqe, NULL, NULL, 0)) == NULL) {
    BRAID_WARN("NET/IB : ibv_create_cq (%d entries) failed on %s:%d: %s", cqe, d->port.dev, d->port.port,
               strerror(errno));
    res = ncclSystemError;
    goto err;
  }
  for (int i = 0; i < nqps; i++)
    BRAID_CHECK_GOTO(braid_ib_qp_create(v, d->pd, c->cq, &c->cfg, 2 * IB_NREQ, &c->qp[i]), res, err);
  c->fifo_mr = v->reg_mr(d->pd, c->fifo, sizeof(c->fifo),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (c->fifo_mr == NULL) {
    BRAID_WARN("NET/IB : ibv_reg_mr of the %zu-byte FIFO failed on %s:%d: %s", sizeof(c->fifo), d->port.dev,
               d->port.port, strerror(errno));
    res = ncclSystemError;
    goto err;
  }
  struct ib_info* m = &c->mine;
  m->magic = IB_MSG_MAGIC;
  m->nqps = (uint32_t)nqps;
  m->split = (uint8_t)split;
  m->lid = d->lid;
  m->mtu = d->mtu;
  m->gid = d->gid;
  m->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
  m->fifo_rkey = c->fifo_mr->rkey;
  for (int i = 0; i < nqps; i++) m->qpn[i] = c->qp[i]->qp_num, m->psn[i] = (uint32_t)(rand() & 0xffffff);
  *c_p = c;
  return ncclSuccess;
err:
  comm_free(c);
  return res;
}

ncclResult_t ib_comm_rts(struct ib_comm* c, const struct ib_info* peer) {
  const struct braid_ibv* v = ib.ibv;
  for (int i = 0; i < c->nqps; i++) {
    struct braid_ib_qp_info r = {peer->qpn[i], peer->psn[i], peer->lid, peer->gid, peer->mtu};
    if (r.mtu > c->dev->mtu) r.mtu = c->dev->mtu; /* the smaller of the two ports' MTUs */
    BRAID_CHECK(braid_ib_qp_rtr(v, c->qp[i], &c->cfg, &r));
    BRAID_CHECK(braid_ib_qp_rts(v, c->qp[i], &c->cfg, c->mine.psn[i]));
  }
  c->ready = 1;
  return ncclSuccess;
}

static int info_bad(const struct ib_info* in, int nqps) {
  return in->magic != IB_MSG_MAGIC || (int)in->nqps != nqps;
}

int ib_sender_ready(struct ib_comm* c) {
  if (c->ready) return 1;
  if (c->ctl.failed) return -1;
  if (braid_socket_recv_try(&c->ctl.sock, &c->peer, sizeof(c->peer), &c->peer_off) != ncclSuccess) {
    ib_fail(c, "%s before sending its QP numbers", braid_socket_fail_str(c->ctl.sock.fail));
    return -1;
  }
  if (c->peer_off < sizeof(c->peer)) return 0;
  if (info_bad(&c->peer, c->nqps)) {
    ib_fail(c, "sent garbage instead of its QP numbers (magic 0x%08x, %u QPs)", c->peer.magic, c->peer.nqps);
    return -1;
  }
  if (ib_comm_rts(c, &c->peer) != ncclSuccess) {
    ib_fail(c, "its QPs did not reach RTS");
    return -1;
  }
  braid_net_ctrl_say(&c->ctl, BRAID_NET_CTRL_READY, 0, IB_HANDSHAKE_MS); /* its writes may come now */
  return 1;
}

/* ---- listen / connect / accept ------------------------------------------------------------- */

static ncclResult_t ib_listen(void* p, int dev, void* handle, void** listen_p) {
  struct ib_handle* h = handle;
  *listen_p = NULL;
  if (dev < 0 || dev >= ib.ndev) {
    BRAID_WARN("NET/IB : listen: invalid device %d (%d devices)", dev, ib.ndev);
    return ncclInvalidArgument;
  }
  struct ib_listen* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    BRAID_WARN("NET/IB : failed to allocate a listener");
    return ncclSystemError;
  }
  union braid_sockaddr addr = ib.ifaddr;
  braid_socket_addr_set_port(&addr, 0);
  ncclResult_t res = braid_socket_listen(&l->sock, &addr);
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  l->ctx = p;
  l->dev = dev;
  braid_socket_init(&l->ours);
  braid_socket_pending_init(&l->pending, "NET/IB", l->ctx->secret, BRAID_SOCKET_TYPE_NET, IB_HANDSHAKE_MS);
  memset(h, 0, BRAID_NET_HANDLE_MAXSIZE);
  h->magic = IB_HANDLE_MAGIC;
  h->addr = l->sock.addr;
  *listen_p = l;
  return ncclSuccess;
}

static ncclResult_t connect_step(struct ib_connecting* k, int* done_p) {
  *done_p = 0;
  if (k->stage == 0) {
    int done = 0;
    BRAID_CHECK(braid_socket_connect_finish(&k->sock, &done));
    if (!done) return ncclSuccess;
    k->stage = 1;
  }
  struct iovec iov[2] = {{&k->hs, sizeof(k->hs)}, {&k->comm->mine, sizeof(k->comm->mine)}};
  BRAID_CHECK(braid_socket_sendv_try(&k->sock, iov, 2, &k->off));
  *done_p = k->off == sizeof(k->hs) + sizeof(k->comm->mine);
  return ncclSuccess;
}

static ncclResult_t ib_connect(void* p, int dev, void* handle, void** send_p) {
  ncclResult_t res = ncclSuccess;
  struct ib_ctx* ctx = p;
  const struct ib_handle* h = handle;
  struct ib_connecting** pp = &ctx->connecting;
  *send_p = NULL;
  while (*pp != NULL && (*pp)->key != handle) pp = &(*pp)->next;
  struct ib_connecting* k = *pp;
  if (k == NULL) {
    if (h->magic != IB_HANDLE_MAGIC || !braid_socket_addr_valid(&h->addr)) {
      BRAID_WARN("NET/IB : connect: the handle is not an IB network handle (magic 0x%llx)",
                 (unsigned long long)h->magic);
      return ncclInvalidArgument;
    }
    if (dev < 0 || dev >= ib.ndev) {
      BRAID_WARN("NET/IB : connect: invalid device %d (%d devices)", dev, ib.ndev);
      return ncclInvalidArgument;
    }
    BRAID_CALLOC_GOTO(k, 1, res, out);
    k->key = handle;
    braid_socket_init(&k->sock);
    k->hs = (struct braid_socket_handshake){ctx->secret, BRAID_SOCKET_TYPE_NET, IB_HS_ARG};
    k->next = ctx->connecting;
    ctx->connecting = k;
    pp = &ctx->connecting;
    BRAID_CHECK_GOTO(comm_new(1, dev, ctx, ib.nqps, ib.split, &k->comm), res, err);
    int done = 0;
    BRAID_CHECK_GOTO(braid_socket_connect_start(&k->sock, &h->addr, &done), res, err);
  }
  int done = 0;
  BRAID_CHECK_GOTO(connect_step(k, &done), res, err);
  if (!done) return ncclSuccess;
  *pp = k->next;
  struct ib_comm* c = k->comm;
  c->ctl.sock = k->sock;
  braid_socket_init(&k->sock);
  k->comm = NULL;
  connecting_free(k);
  *send_p = c;
  return ncclSuccess;
err:
  *pp = k->next;
  connecting_free(k);
out:
  return res;
}

/* A connection with a valid handshake: our sender (one per accept call; more wait), or dropped. */
static int ib_take(void* arg, struct braid_socket* s, const struct braid_socket_handshake* hs) {
  struct ib_listen* l = arg;
  if (hs->arg != IB_HS_ARG) {
    braid_socket_warn_drop("NET/IB", &s->addr, "it is not an IB connection (handshake arg %d)", hs->arg);
    return BRAID_PENDING_DROP;
  }
  if (l->ours.fd >= 0) return BRAID_PENDING_LATER;
  l->ours = *s;
  return BRAID_PENDING_TAKEN;
}

/* Our sender is in (it knew the secret): its QP numbers (sent with the handshake), our QPs (as
 * many as it has) to RTS, and ours back. */
static ncclResult_t accept_finish(struct ib_listen* l, struct braid_socket* sock, struct ib_comm** c_p) {
  char a[BRAID_SOCKET_ADDR_STR_MAX];
  struct ib_info info;
  struct ib_comm* c = NULL;
  int64_t deadline = braid_socket_deadline_ms(IB_HANDSHAKE_MS);
  ncclResult_t res = braid_socket_recv(sock, &info, sizeof(info), NULL, deadline);
  if (res == ncclSuccess && (info.magic != IB_MSG_MAGIC || info.nqps < 1 || info.nqps > IB_MAX_QPS)) {
    BRAID_WARN("NET/IB : the sender at %s sent garbage instead of its QP numbers (magic 0x%08x, %u QPs)",
               braid_socket_addr_str(&sock->addr, a), info.magic, info.nqps);
    res = ncclRemoteError;
  }
  if (res == ncclSuccess) res = comm_new(0, l->dev, l->ctx, (int)info.nqps, info.split, &c);
  if (res != ncclSuccess) {
    braid_socket_close(sock);
    return res;
  }
  c->ctl.sock = *sock;
  braid_socket_init(sock);
  c->peer = info;
  res = ib_gdr_flush_open(c);
  if (res == ncclSuccess) res = ib_comm_rts(c, &info);
  if (res == ncclSuccess) res = braid_socket_send(&c->ctl.sock, &c->mine, sizeof(c->mine), NULL, deadline);
  if (res != ncclSuccess) {
    comm_free(c);
    return res;
  }
  *c_p = c;
  return ncclSuccess;
}

static ncclResult_t ib_accept(void* p, void** recv_p) {
  struct ib_listen* l = p;
  *recv_p = NULL;
  braid_socket_init(&l->ours);
  BRAID_CHECK(braid_socket_pending_poll(&l->pending, &l->sock, ib_take, l));
  struct braid_socket ours = l->ours;
  if (ours.fd < 0) return ncclSuccess;
  struct ib_comm* c = NULL;
  BRAID_CHECK(accept_finish(l, &ours, &c));
  *recv_p = c;
  return ncclSuccess;
}

static ncclResult_t ib_close_listen(void* p) {
  struct ib_listen* l = p;
  if (l == NULL) return ncclSuccess;
  braid_socket_pending_close(&l->pending);
  braid_socket_close(&l->sock);
  free(l);
  return ncclSuccess;
}

static ncclResult_t ib_close(void* comm) {
  comm_free(comm); /* requests in flight are dropped with the QPs */
  return ncclSuccess;
}

const struct braid_net_v1 braid_net_ib = {
    .name = "IB",
    .init = ib_init,
    .devices = ib_devices,
    .getProperties = ib_get_properties,
    .openContext = ib_open_context,
    .closeContext = ib_close_context,
    .listen = ib_listen,
    .connect = ib_connect,
    .accept = ib_accept,
    .regMr = ib_reg_mr,
    .deregMr = ib_dereg_mr,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .iflush = ib_iflush,
    .test = ib_test,
    .closeSend = ib_close,
    .closeRecv = ib_close,
    .closeListen = ib_close_listen,
    .waitFds = ib_wait_fds,
    .finishSend = ib_finish_send,
    .abortSend = ib_abort_send,
    .getStatus = ib_get_status,
    .recvInline = NULL,
};
