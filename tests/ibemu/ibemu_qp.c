/*
 * ibemu_qp.c - the emulated verbs provider: protection domains, completion queues and RC queue
 * pairs with their state machine (RESET -> INIT -> RTR -> RTS, each transition needing the
 * attribute mask a real HCA requires; anything else fails with EINVAL, as on an HCA). On an
 * Ethernet (RoCE) port RTR needs a GRH (ah_attr.is_global) with a GID index inside the table.
 * IBEMU_FAIL="modify_qp:RTR" (or INIT, RTS) fails that transition with EINVAL.
 * No data movement yet (no post_send / poll_cq).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

struct ibv_pd* ibv_alloc_pd(struct ibv_context* ctx) {
  struct ibv_pd* pd = calloc(1, sizeof(*pd));
  if (pd) pd->context = ctx;
  return pd;
}

int ibv_dealloc_pd(struct ibv_pd* pd) {
  free(pd);
  return 0;
}

struct ibv_cq* ibv_create_cq(struct ibv_context* ctx, int cqe, void* user, struct ibv_comp_channel* ch, int vec) {
  struct ibv_cq* cq = calloc(1, sizeof(*cq));
  if (cq) cq->context = ctx, cq->cqe = cqe, cq->cq_context = user, cq->channel = ch;
  return cq;
}

int ibv_destroy_cq(struct ibv_cq* cq) {
  free(cq);
  return 0;
}

static unsigned emu_next_qpn = 0x100;

struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* a) {
  if (a->qp_type != IBV_QPT_RC || a->send_cq == NULL || a->recv_cq == NULL) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_qp* qp = calloc(1, sizeof(*qp));
  if (qp == NULL) return NULL;
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = a->send_cq;
  qp->recv_cq = a->recv_cq;
  qp->qp_type = IBV_QPT_RC;
  qp->qp_num = __atomic_fetch_add(&emu_next_qpn, 1, __ATOMIC_RELAXED);
  qp->state = IBV_QPS_RESET;
  return qp;
}

int ibv_destroy_qp(struct ibv_qp* qp) {
  free(qp);
  return 0;
}

/* ibemu_devices.c: is this port Ethernet? */
int ibemu_port_is_eth(struct ibv_context* ctx, int port);
int ibemu_fails(const char* call, const char* what);

int ibv_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask) {
  static const int need_init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  static const int need_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  static const int need_rts =
      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  static const char* const names[] = {"RESET", "INIT", "RTR", "RTS"};
  if (a->qp_state <= IBV_QPS_RTS && ibemu_fails("modify_qp", names[a->qp_state])) return EINVAL;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (qp->state != IBV_QPS_RESET || (mask & need_init) != need_init) return EINVAL;
      break;
    case IBV_QPS_RTR:
      if (qp->state != IBV_QPS_INIT || (mask & need_rtr) != need_rtr) return EINVAL;
      if (ibemu_port_is_eth(qp->context, a->ah_attr.port_num) &&
          (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= 16))
        return EINVAL;
      break;
    case IBV_QPS_RTS:
      if (qp->state != IBV_QPS_RTR || (mask & need_rts) != need_rts) return EINVAL;
      break;
    case IBV_QPS_RESET:
    case IBV_QPS_ERR:
      break;
    default:
      return EINVAL;
  }
  qp->state = a->qp_state;
  return 0;
}
