/*
 * ibemu_qp.c - the emulated verbs provider: protection domains, completion queues and RC queue
 * pairs with their state machine (RESET -> INIT -> RTR -> RTS, each transition needing the
 * attribute mask a real HCA requires; anything else fails with EINVAL, as on an HCA). On an
 * Ethernet (RoCE) port RTR needs a GRH (ah_attr.is_global) with a GID index inside the table.
 * IBEMU_FAIL="modify_qp:RTR" (or INIT, RTS) fails that transition with EINVAL.
 * RTR looks the destination QP number up in the registry (ibemu_mr.c); data: ibemu_data.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"

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
  if (cqe <= 0 || cqe > EMU_CQ) {
    errno = EINVAL;
    return NULL;
  }
  struct emu_cq* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  pthread_mutex_init(&c->lock, NULL);
  c->cq.context = ctx, c->cq.cqe = cqe, c->cq.cq_context = user, c->cq.channel = ch;
  return &c->cq;
}

int ibv_destroy_cq(struct ibv_cq* cq) {
  struct emu_cq* c = (struct emu_cq*)cq;
  if (c->qps != NULL) return EBUSY; /* a QP still uses it, as on an HCA */
  pthread_mutex_destroy(&c->lock);
  free(c);
  return 0;
}

struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* a) {
  if (a->qp_type != IBV_QPT_RC || a->send_cq == NULL || a->recv_cq == NULL || a->cap.max_recv_wr > EMU_RQ ||
      a->cap.max_send_sge > 1 || a->cap.max_recv_sge > 1) {
    errno = EINVAL;
    return NULL;
  }
  struct emu_qp* q = calloc(1, sizeof(*q));
  if (q == NULL) return NULL;
  struct ibv_qp* qp = &q->qp;
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = a->send_cq;
  qp->recv_cq = a->recv_cq;
  qp->qp_type = IBV_QPT_RC;
  qp->qp_num = ibemu_next_qpn();
  qp->state = IBV_QPS_RESET;
  q->magic = EMU_QP_MAGIC;
  if (qp->qp_num == 0 || ibemu_registry_add(q) != 0) {
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  struct emu_cq* rc = (struct emu_cq*)a->recv_cq;
  pthread_mutex_lock(&rc->lock);
  q->next_on_cq = rc->qps;
  rc->qps = q;
  pthread_mutex_unlock(&rc->lock);
  return qp;
}

int ibv_destroy_qp(struct ibv_qp* qp) {
  struct emu_qp* q = (struct emu_qp*)qp;
  struct emu_cq* rc = (struct emu_cq*)qp->recv_cq;
  pthread_mutex_lock(&rc->lock);
  for (struct emu_qp** pp = &rc->qps; *pp != NULL; pp = &(*pp)->next_on_cq)
    if (*pp == q) {
      *pp = q->next_on_cq;
      break;
    }
  pthread_mutex_unlock(&rc->lock);
  ibemu_registry_del(q);
  __atomic_store_n(&q->magic, 0, __ATOMIC_RELEASE);
  free(q);
  return 0;
}

/* Where the peer QP lives. Not found: the QP still reaches RTR (an HCA cannot know), and its
 * first WR completes with RETRY_EXC_ERR. */
static void rtr_peer(struct emu_qp* q, uint32_t dest) {
  if (ibemu_registry_find(dest, &q->peer_pid, &q->peer_qp, &q->peer_mrt) != 0) q->peer_pid = 0;
  q->peer_head = 0;
  q->peer_qpn = dest;
}

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
      ((struct emu_qp*)qp)->access = (int)a->qp_access_flags;
      break;
    case IBV_QPS_RTR:
      if (qp->state != IBV_QPS_INIT || (mask & need_rtr) != need_rtr) return EINVAL;
      if (ibemu_port_is_eth(qp->context, a->ah_attr.port_num) &&
          (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= 16))
        return EINVAL;
      rtr_peer((struct emu_qp*)qp, a->dest_qp_num);
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
