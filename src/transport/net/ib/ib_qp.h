/*
 * ib_qp.h - RC queue pairs for net_ib: creation (RESET -> INIT) and the RTR / RTS transitions,
 * with NCCL's attributes (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_SL, NCCL_IB_TC as the
 * caller passes them; RNR retry 7, one outstanding read). A failed transition is the most common
 * IB support question, so its WARN names the HCA and port, the link layer, the GID index, the
 * verbs call and the target state, the attribute mask it passed, errno, and the remote QP.
 */
#ifndef BRAID_IB_QP_H
#define BRAID_IB_QP_H

#include <stdint.h>

#include "transport/net/ib/ib_verbs.h"

/* This end of a connection, as the peer needs it (exchanged out of band). */
struct braid_ib_qp_info {
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;      /* InfiniBand */
  union ibv_gid gid; /* RoCE (and IB with a GRH) */
  uint8_t mtu;       /* enum ibv_mtu */
};

struct braid_ib_qp_cfg {
  const char* dev; /* for messages: "mlx5_0" */
  int port;
  int roce;      /* the link layer is Ethernet: every packet carries a GRH */
  int gid_index; /* the local GID used on RoCE */
  int timeout, retry_cnt, sl, tc;
};

/* A QP on pd with both completions on cq, moved to INIT (remote write and read allowed). */
ncclResult_t braid_ib_qp_create(const struct braid_ibv* ibv, struct ibv_pd* pd, struct ibv_cq* cq,
                                const struct braid_ib_qp_cfg* cfg, int max_wr, struct ibv_qp** qp_p);
ncclResult_t braid_ib_qp_rtr(const struct braid_ibv* ibv, struct ibv_qp* qp, const struct braid_ib_qp_cfg* cfg,
                             const struct braid_ib_qp_info* remote);
ncclResult_t braid_ib_qp_rts(const struct braid_ibv* ibv, struct ibv_qp* qp, const struct braid_ib_qp_cfg* cfg,
                             uint32_t psn);

#endif /* BRAID_IB_QP_H */
