/*
 * ib_devices.h - InfiniBand / RoCE device and port discovery for net_ib: every ACTIVE port
 * of every verbs device whose link layer is InfiniBand or Ethernet (RoCE), kept or dropped by
 * an NCCL_IB_HCA value (ib_hca.h), with its speed as NCCL computes it (per-lane rate x width).
 */
#ifndef BRAID_IB_DEVICES_H
#define BRAID_IB_DEVICES_H

#include <stdint.h>

#include "transport/net/ib/ib_verbs.h"

#define BRAID_IB_MAX_PORTS 64

struct braid_ib_port {
  char dev[64]; /* "mlx5_0" */
  int port;     /* 1-based */
  int roce;     /* link layer Ethernet */
  int speed;    /* Mb/s */
  uint64_t guid;
  int gid_tbl_len;
};

/* Discover through `ibv`; hca: NCCL_IB_HCA's value (NULL: every port). ncclInvalidArgument
 * for a bad hca value; a device that cannot be opened or queried is skipped with a WARN
 * naming it and the call. *n may be 0 (INFO `NET/IB : No device found.`); the plugin logs the
 * ports it uses (`NET/IB : Using [0]mlx5_0:1/IB ...`, ib_plugin.c). */
ncclResult_t braid_ib_discover(const struct braid_ibv* ibv, const char* hca, struct braid_ib_port* ports, int max,
                               int* n);
/* Mb/s of one port from ibv_port_attr's active_speed and active_width codes (NCCL's tables). */
int braid_ib_port_speed(int active_speed, int active_width);

#endif /* BRAID_IB_DEVICES_H */
