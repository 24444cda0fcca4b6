/*
 * ib_qp.c - RC queue pairs and their transitions (ib_qp.h).
 */
#include "transport/net/ib/ib_qp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"

static const char* state_name(enum ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    default:
      return "?";
  }
}

/* "STATE|AV|..." for the bits of an attribute mask. */
static void mask_str(int mask, char* out, size_t len) {
  static const struct {
    int bit;
    const char* name;
  } bits[] = {{IBV_QP_STATE, "STATE"},
              {IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS"},
              {IBV_QP_PKEY_INDEX, "PKEY_INDEX"},
              {IBV_QP_PORT, "PORT"},
              {IBV_QP_AV, "AV"},
              {IBV_QP_PATH_MTU, "PATH_MTU"},
              {IBV_QP_TIMEOUT, "TIMEOUT"},
              {IBV_QP_RETRY_CNT, "RETRY_CNT"},
              {IBV_QP_RNR_RETRY, "RNR_RETRY"},
              {IBV_QP_RQ_PSN, "RQ_PSN"},
              {IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"},
              {IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER"},
              {IBV_QP_SQ_PSN, "SQ_PSN"},
              {IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"},
              {IBV_QP_DEST_QPN, "DEST_QPN"}};
  size_t n = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]) && n < len; i++)
    if (mask & bits[i].bit) n += snprintf(out + n, len - n, "%s%s", n ? "|" : "", bits[i].name);
}

static void gid_str(const union ibv_gid* g, char* out, size_t len) {
  if (inet_ntop(AF_INET6, g->raw, out, (socklen_t)len) == NULL) snprintf(out, len, "?");
}

/* The one place a transition failure is told. */
static ncclResult_t modify(const struct braid_ibv* ibv, struct ibv_qp* qp, struct ibv_qp_attr* a, int mask,
                           const struct braid_ib_qp_cfg* cfg, const struct braid_ib_qp_info* remote) {
  int rc = ibv->modify_qp(qp, a, mask);
  if (rc == 0) return ncclSuccess;
  char m[256], rgid[64], rem[160] = "";
  mask_str(mask, m, sizeof(m));
  if (remote != NULL) {
    gid_str(&remote->gid, rgid, sizeof(rgid));
    snprintf(rem, sizeof(rem), "; remote QPN 0x%x, LID %u, GID %s, MTU %d", remote->qpn, remote->lid, rgid,
             128 << remote->mtu);
  }
  BRAID_WARN("NET/IB : ibv_modify_qp to %s failed on %s:%d (%s, GID index %d): %s (errno %d; attributes %s%s)",
             state_name(a->qp_state), cfg->dev, cfg->port, cfg->roce ? "RoCE" : "IB", cfg->gid_index, strerror(rc), rc,
             m, rem);
  return ncclSystemError;
}

ncclResult_t braid_ib_qp_create(const struct braid_ibv* ibv, struct ibv_pd* pd, struct ibv_cq* cq,
                                const struct braid_ib_qp_cfg* cfg, int max_wr, struct ibv_qp** qp_p) {
  struct ibv_qp_init_attr init;
  memset(&init, 0, sizeof(init));
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = (uint32_t)max_wr;
  init.cap.max_recv_wr = (uint32_t)max_wr;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  struct ibv_qp* qp = ibv->create_qp(pd, &init);
  if (qp == NULL) {
    BRAID_WARN("NET/IB : ibv_create_qp (RC, %d work requests) failed on %s:%d: %s", max_wr, cfg->dev, cfg->port,
               strerror(errno));
    return ncclSystemError;
  }
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)cfg->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ncclResult_t res =
      modify(ibv, qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, cfg, NULL);
  if (res != ncclSuccess) {
    ibv->destroy_qp(qp);
    return res;
  }
  *qp_p = qp;
  return ncclSuccess;
}

ncclResult_t braid_ib_qp_rtr(const struct braid_ibv* ibv, struct ibv_qp* qp, const struct braid_ib_qp_cfg* cfg,
                             const struct braid_ib_qp_info* remote) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)remote->mtu;
  a.dest_qp_num = remote->qpn;
  a.rq_psn = remote->psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = (uint8_t)cfg->port;
  a.ah_attr.sl = (uint8_t)(cfg->sl >= 0 ? cfg->sl : 0);
  if (cfg->roce) { /* RoCE: routed by GID, every packet carries a GRH */
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = remote->gid;
    a.ah_attr.grh.sgid_index = (uint8_t)cfg->gid_index;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = (uint8_t)(cfg->tc >= 0 ? cfg->tc : 0);
  } else {
    a.ah_attr.dlid = remote->lid;
  }
  return modify(ibv, qp, &a,
                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                cfg, remote);
}

ncclResult_t braid_ib_qp_rts(const struct braid_ibv* ibv, struct ibv_qp* qp, const struct braid_ib_qp_cfg* cfg,
                             uint32_t psn) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)cfg->timeout;
  a.retry_cnt = (uint8_t)cfg->retry_cnt;
  a.rnr_retry = 7;
  a.sq_psn = psn;
  a.max_rd_atomic = 1;
  return modify(
      ibv, qp, &a,
      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
      cfg, NULL);
}
