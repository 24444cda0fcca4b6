/*
 * ib_devices.c - device and port discovery (ib_devices.h).
 */
#include "transport/net/ib/ib_devices.h"

#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "transport/net/ib/ib_hca.h"

int braid_ib_port_speed(int active_speed, int active_width) {
  /* IBV_SPEED_* bits: SDR DDR QDR FDR10 FDR EDR HDR NDR XDR; IBV_WIDTH_*: 1x 4x 8x 12x 2x */
  static const int speeds[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  static const int widths[] = {1, 4, 8, 12, 2};
  int s = 0, w = 0;
  while (s < 8 && !(active_speed & (1 << s))) s++;
  while (w < 4 && !(active_width & (1 << w))) w++;
  return speeds[s] * widths[w];
}

static void scan_device(const struct braid_ibv* ibv, struct ibv_device* d, const struct braid_ib_hca_filter* f,
                        struct braid_ib_port* ports, int max, int* n) {
  const char* name = ibv->get_device_name(d);
  struct ibv_context* ctx = ibv->open_device(d);
  struct ibv_device_attr attr;
  if (ctx == NULL) {
    BRAID_WARN("NET/IB : ibv_open_device(%s) failed: skipping the device", name);
    return;
  }
  memset(&attr, 0, sizeof(attr));
  if (ibv->query_device(ctx, &attr) != 0) {
    BRAID_WARN("NET/IB : ibv_query_device(%s) failed: skipping the device", name);
    ibv->close_device(ctx);
    return;
  }
  for (int p = 1; p <= attr.phys_port_cnt && *n < max; p++) {
    struct ibv_port_attr pa;
    memset(&pa, 0, sizeof(pa));
    if (ibv->query_port(ctx, (uint8_t)p, &pa) != 0) {
      BRAID_WARN("NET/IB : ibv_query_port(%s, port %d) failed: skipping the port", name, p);
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) continue;
    if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
    if (!braid_ib_hca_match(f, name, p, NULL)) continue;
    struct braid_ib_port* o = &ports[(*n)++];
    memset(o, 0, sizeof(*o));
    snprintf(o->dev, sizeof(o->dev), "%s", name);
    o->port = p;
    o->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    o->speed = braid_ib_port_speed(pa.active_speed, pa.active_width);
    o->guid = attr.node_guid;
    o->gid_tbl_len = pa.gid_tbl_len;
  }
  ibv->close_device(ctx);
}

ncclResult_t braid_ib_discover(const struct braid_ibv* ibv, const char* hca, struct braid_ib_port* ports, int max,
                               int* n) {
  struct braid_ib_hca_filter f;
  int ndev = 0;
  *n = 0;
  BRAID_CHECK(braid_ib_hca_parse(hca, "NCCL_IB_HCA", &f));
  struct ibv_device** list = ibv->get_device_list(&ndev);
  if (list == NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB : No device found (ibv_get_device_list failed).");
    return ncclSuccess;
  }
  for (int i = 0; i < ndev && *n < max; i++) scan_device(ibv, list[i], &f, ports, max, n);
  ibv->free_device_list(list);
  if (*n == 0) BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB : No device found.");
  return ncclSuccess;
}
