/*
 * ibemu_devices.c - the emulated verbs provider (test-only; built into
 * BUILD/lib/libbraid-ibemu.so, never part of libnccl.so.2; braid loads it in place of
 * libibverbs when a test sets BRAID_IB_VERBS_LIBRARY): devices and ports so far.
 *
 * IBEMU_DEVICES="name:ports:link[:down],..." (link: ib | eth; "down": every port of the device
 * is DOWN), e.g. "mlx5_0:2:ib,mlx5_1:1:eth,mlx4_0:1:ib:down". Ports are 4x HDR (active_speed
 * 64, active_width 2), active MTU 4096, GID table of 16 (gid_of: types for _ibv_query_gid_ex). IBEMU_FAIL="call:device"
 * makes that verbs call fail for that device (open_device, query_device, query_port). IBEMU_FAIL also takes
 * reg_mr:<device>. PDs, CQs and QPs: ibemu_qp.c; MRs and the QP registry: ibemu_mr.c; the data path: ibemu_data.c
 * (ibemu.h: how RDMA crosses processes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"

#undef ibv_query_port

#define EMU_MAX 16

struct emu_dev {
  struct ibv_device dev; /* first: ibv_device* <-> emu_dev* */
  int ports, eth, down;
};

static struct emu_dev emu[EMU_MAX];
static struct ibv_device* emu_list[EMU_MAX + 1];

/* IBEMU_FAIL names this call and device (or transition: ibemu_qp.c). */
int ibemu_fails(const char* call, const char* dev) {
  const char* f = getenv("IBEMU_FAIL");
  char want[160];
  snprintf(want, sizeof(want), "%s:%s", call, dev);
  return f != NULL && strcmp(f, want) == 0;
}

struct ibv_device** ibv_get_device_list(int* num) {
  const char* cfg = getenv("IBEMU_DEVICES");
  char buf[1024], *save = NULL;
  int n = 0;
  snprintf(buf, sizeof(buf), "%s", cfg ? cfg : "");
  for (char* e = strtok_r(buf, ",", &save); e != NULL && n < EMU_MAX; e = strtok_r(NULL, ",", &save)) {
    char* f[4] = {NULL, NULL, NULL, NULL};
    char* rest = e;
    for (int i = 0; i < 4 && rest != NULL; i++) f[i] = strsep(&rest, ":");
    struct emu_dev* d = &emu[n];
    memset(d, 0, sizeof(*d));
    snprintf(d->dev.name, sizeof(d->dev.name), "%s", f[0]);
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    d->ports = f[1] ? atoi(f[1]) : 1;
    d->eth = f[2] && strcmp(f[2], "eth") == 0;
    d->down = f[3] && strcmp(f[3], "down") == 0;
    emu_list[n++] = &d->dev;
  }
  emu_list[n] = NULL;
  if (num) *num = n;
  return emu_list;
}

void ibv_free_device_list(struct ibv_device** list) {}

const char* ibv_get_device_name(struct ibv_device* d) {
  return d->name;
}

struct ibv_context* ibv_open_device(struct ibv_device* d) {
  if (ibemu_fails("open_device", d->name)) {
    errno = ENODEV;
    return NULL;
  }
  struct ibv_context* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return NULL;
  ctx->device = d;
  ctx->ops.post_send = ibemu_post_send;
  ctx->ops.post_recv = ibemu_post_recv;
  ctx->ops.poll_cq = ibemu_poll_cq;
  ctx->ops.req_notify_cq = ibemu_req_notify_cq;
  return ctx;
}

int ibv_close_device(struct ibv_context* ctx) {
  free(ctx);
  return 0;
}

int ibv_query_device(struct ibv_context* ctx, struct ibv_device_attr* a) {
  const struct emu_dev* d = (const struct emu_dev*)ctx->device;
  if (ibemu_fails("query_device", d->dev.name)) return EIO;
  memset(a, 0, sizeof(*a));
  a->phys_port_cnt = (uint8_t)d->ports;
  a->node_guid = 0x1000 + (uint64_t)(d - emu);
  a->max_qp = 1024;
  return 0;
}

/* verbs.h declares the exported symbol with the compat struct; braid (ib_verbs.c) passes a
 * whole struct ibv_port_attr, as verbs.h's inline wrapper does. */
int ibv_query_port(struct ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* compat) {
  struct ibv_port_attr* a = (struct ibv_port_attr*)compat;
  const struct emu_dev* d = (const struct emu_dev*)ctx->device;
  if (ibemu_fails("query_port", d->dev.name)) return EIO;
  if (port < 1 || port > d->ports) return EINVAL;
  memset(a, 0, sizeof(*a)); /* braid passes a whole struct ibv_port_attr */
  a->state = d->down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a->link_layer = d->eth ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  a->active_speed = 64; /* HDR */
  a->active_width = 2;  /* 4x */
  a->gid_tbl_len = 16;
  a->active_mtu = IBV_MTU_4096;
  a->max_mtu = IBV_MTU_4096;
  a->lid = d->eth ? 0 : (uint16_t)(1 + (d - emu) * 8 + port);
  return 0;
}

int ibemu_port_is_eth(struct ibv_context* ctx, int port) {
  const struct emu_dev* d = (const struct emu_dev*)ctx->device;
  return port >= 1 && port <= d->ports && d->eth;
}

/* GIDs as an mlx5 port shows them. InfiniBand: fe80::<guid> at every index. Ethernet (RoCE),
 * each address as RoCE v1 then v2: 0-1 fe80::<dev>:<port>:1 (link-local), 2-3
 * ::ffff:10.<dev>.<port>.1, 4-5 fd00::<dev>:<port>:1 (IPv6), 6-7 ::ffff:192.168.<dev>.<port>,
 * then zeros (unused entries). */
static int gid_of(struct ibv_context* ctx, int port, int index, union ibv_gid* gid, uint32_t* type) {
  const struct emu_dev* d = (const struct emu_dev*)ctx->device;
  if (port < 1 || port > d->ports || index < 0 || index >= 16) return EINVAL;
  memset(gid, 0, sizeof(*gid));
  *type = IBV_GID_TYPE_IB;
  uint8_t dev = (uint8_t)(d - emu);
  if (!d->eth || index < 2) {
    gid->raw[0] = 0xfe, gid->raw[1] = 0x80;
    gid->raw[13] = dev, gid->raw[14] = (uint8_t)port, gid->raw[15] = 1;
  } else if (index < 4 || (index >= 6 && index < 8)) {
    gid->raw[10] = gid->raw[11] = 0xff;
    if (index < 4)
      gid->raw[12] = 10, gid->raw[13] = dev, gid->raw[14] = (uint8_t)port, gid->raw[15] = 1;
    else
      gid->raw[12] = 192, gid->raw[13] = 168, gid->raw[14] = dev, gid->raw[15] = (uint8_t)port;
  } else if (index < 6) {
    gid->raw[0] = 0xfd;
    gid->raw[13] = dev, gid->raw[14] = (uint8_t)port, gid->raw[15] = 1;
  } else {
    return 0;
  }
  if (d->eth) *type = index % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  return 0;
}

int ibv_query_gid(struct ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid) {
  uint32_t type;
  return gid_of(ctx, port, index, gid, &type);
}

int _ibv_query_gid_ex(struct ibv_context* ctx, uint32_t port, uint32_t index, struct ibv_gid_entry* e, uint32_t flags,
                      size_t size) {
  if (size < sizeof(*e) || flags != 0) return EINVAL;
  memset(e, 0, sizeof(*e));
  e->gid_index = index, e->port_num = port;
  return gid_of(ctx, (int)port, (int)index, &e->gid, &e->gid_type);
}
