/*
 * ibemu_data.c - the emulated verbs provider's data path: post_send (RDMA WRITE,
 * WRITE_WITH_IMM, READ), post_recv and poll_cq, reached through ibv_context.ops as verbs.h's
 * inline wrappers do.
 *
 * A send WR is carried out inside ibv_post_send: the local SGE is checked against this
 * process's MR table (LOC_PROT_ERR), the rkey and bounds against the peer's (read with
 * process_vm_readv: REM_ACCESS_ERR, and the peer QP is told to go to ERR too), then the bytes
 * move with process_vm_writev / readv. A write lands in address order as far as a reader can
 * tell: everything but its last 8 bytes, then those (a FIFO entry whose last word is its
 * sequence number is whole once that word is). WRITE_WITH_IMM then appends {imm, length} to
 * the peer QP's incoming ring; the peer's poll_cq turns each into a RECV_RDMA_WITH_IMM
 * completion once a receive is posted (an RNR wait that never gives up, as rnr_retry 7). A peer
 * process that is gone (any failing process_vm_* call, or a QP number nobody registered) is
 * RETRY_EXC_ERR. The peer QP's registry lock is held while bytes move (ibemu_mr.c). After an error completion the QP is
 * in ERR: every further WR is flushed (WR_FLUSH_ERR), as are its posted receives. The responder QP must be in RTR or
 * RTS (else RETRY_EXC_ERR after a bounded wait) and opened with the access the request needs
 * (else REM_ACCESS_ERR), besides the MR's key, bounds and access. Not emulated: SEND /
 * atomics, several SGEs, completion channels (req_notify_cq says ENOSYS).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ibemu.h"

static int pvm(int pid, int write, void* local, uint64_t remote, size_t len) {
  while (len > 0) {
    struct iovec l = {local, len}, r = {(void*)(uintptr_t)remote, len};
    ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) return n < 0 ? errno : EIO;
    local = (char*)local + n, remote += (uint64_t)n, len -= (size_t)n;
  }
  return 0;
}

void ibemu_cq_push(struct emu_cq* c, const struct ibv_wc* wc) {
  if (c->tail - c->head < EMU_CQ) c->wc[c->tail++ % EMU_CQ] = *wc; /* a full CQ drops, as an overrun */
}

/* The local SGE is inside its MR with `need`: 1, and *host = where its bytes are here (a
 * dma-buf region's mapping, ibemu_mr.c). */
static int local_ok(const struct ibv_sge* s, int need, uint64_t* host) {
  *host = s->addr;
  if (s->length == 0) return 1;
  pthread_mutex_lock(&ibemu_lock);
  const struct emu_mr_slot* m = &ibemu_mrs[EMU_MR_IDX(s->lkey)];
  int ok = m->valid && m->key == s->lkey && s->addr >= m->addr && s->addr + s->length <= m->addr + m->len &&
           (m->access & need) == need;
  if (ok) *host = m->host + (s->addr - m->addr);
  pthread_mutex_unlock(&ibemu_lock);
  return ok;
}

/* The responder QP takes requests: in RTR or RTS (an HCA drops packets to a QP in RESET, INIT
 * or ERR, and the requester retries until RETRY_EXC_ERR: a QP still being brought up gets a
 * bounded wait, as the retries give it), and opened at INIT for `need` (REM_ACCESS_ERR: the
 * responder NAKs and goes to ERR). 0, or a WC status. */
static int responder_check(struct emu_qp* q, int need) {
  enum ibv_qp_state st = IBV_QPS_RESET;
  int access = 0;
  for (int waited_ms = 0;; waited_ms++) {
    if (pvm(q->peer_pid, 0, &st, q->peer_qp + offsetof(struct emu_qp, qp.state), sizeof(st)))
      return IBV_WC_RETRY_EXC_ERR;
    if (st == IBV_QPS_RTR || st == IBV_QPS_RTS) break;
    if (st == IBV_QPS_ERR || waited_ms >= EMU_RETRY_MS) return IBV_WC_RETRY_EXC_ERR;
    usleep(1000);
  }
  if (pvm(q->peer_pid, 0, &access, q->peer_qp + offsetof(struct emu_qp, access), sizeof(access)))
    return IBV_WC_RETRY_EXC_ERR;
  return (access & need) == need ? 0 : IBV_WC_REM_ACCESS_ERR;
}

/* The peer's MR behind rkey covers [addr, addr+len) with `need`, and the responder QP takes it:
 * 0 and *host = where those bytes are in the peer process, else a WC status. */
static int remote_check(struct emu_qp* q, uint32_t rkey, uint64_t addr, uint32_t len, int need, uint64_t* host) {
  struct emu_mr_slot m;
  *host = addr;
  int st = responder_check(q, need);
  if (st != 0) return st;
  if (pvm(q->peer_pid, 0, &m, q->peer_mrt + EMU_MR_IDX(rkey) * sizeof(m), sizeof(m)) != 0) return IBV_WC_RETRY_EXC_ERR;
  if (len == 0) return 0;
  if (!m.valid || m.key != rkey || addr < m.addr || addr + len > m.addr + m.len || !(m.access & need))
    return IBV_WC_REM_ACCESS_ERR;
  *host = m.host + (addr - m.addr);
  return 0;
}

static int do_write(struct emu_qp* q, const struct ibv_send_wr* wr, uint64_t local) {
  const struct ibv_sge* s = &wr->sg_list[0];
  uint32_t len = wr->num_sge ? s->length : 0;
  uint64_t dst;
  int st = remote_check(q, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_WRITE, &dst);
  if (st != 0) return st;
  char* src = (char*)(uintptr_t)local;
  size_t first = len > 8 ? len - 8 : 0;
  if ((first && pvm(q->peer_pid, 1, src, dst, first)) ||
      (len > first && pvm(q->peer_pid, 1, src + first, dst + first, len - first)))
    return IBV_WC_RETRY_EXC_ERR;
  if (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) return 0;
  uint64_t tail = 0;
  struct emu_in in = {wr->imm_data, len};
  uint64_t base = q->peer_qp;
  if (pvm(q->peer_pid, 0, &tail, base + offsetof(struct emu_qp, in_tail), sizeof(tail))) return IBV_WC_RETRY_EXC_ERR;
  if (q->peer_head - tail >= EMU_RING) return IBV_WC_RNR_RETRY_EXC_ERR;
  uint64_t slot = base + offsetof(struct emu_qp, in) + (q->peer_head % EMU_RING) * sizeof(in);
  uint64_t head = q->peer_head + 1;
  if (pvm(q->peer_pid, 1, &in, slot, sizeof(in)) ||
      pvm(q->peer_pid, 1, &head, base + offsetof(struct emu_qp, in_head), sizeof(head)))
    return IBV_WC_RETRY_EXC_ERR;
  q->peer_head = head;
  return 0;
}

static int do_read(struct emu_qp* q, const struct ibv_send_wr* wr, uint64_t local) {
  const struct ibv_sge* s = &wr->sg_list[0];
  uint32_t len = wr->num_sge ? s->length : 0;
  uint64_t src;
  int st = remote_check(q, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_READ, &src);
  if (st != 0) return st;
  if (len && pvm(q->peer_pid, 0, (void*)(uintptr_t)local, src, len)) return IBV_WC_RETRY_EXC_ERR;
  return 0;
}

/* Is the peer QP the one the registry named (not freed, not another process's)? */
static int peer_alive(struct emu_qp* q) {
  uint64_t magic = 0;
  uint32_t qpn = 0;
  if (q->peer_pid == 0) return 0;
  if (pvm(q->peer_pid, 0, &magic, q->peer_qp + offsetof(struct emu_qp, magic), sizeof(magic)) ||
      pvm(q->peer_pid, 0, &qpn, q->peer_qp + offsetof(struct emu_qp, qp.qp_num), sizeof(qpn)))
    return 0;
  return magic == EMU_QP_MAGIC && qpn == q->peer_qpn;
}

static void collect(struct emu_cq* c, struct emu_qp* q);

static void flush_error(struct emu_qp* q, int peer_too) {
  q->qp.state = IBV_QPS_ERR;
  if (peer_too && q->peer_pid != 0) {
    uint64_t one = 1;
    (void)pvm(q->peer_pid, 1, &one, q->peer_qp + offsetof(struct emu_qp, in_error), sizeof(one));
  }
}

int ibemu_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  struct emu_qp* q = (struct emu_qp*)qp;
  struct emu_cq* c = (struct emu_cq*)qp->send_cq;
  for (; wr != NULL; wr = wr->next) {
    if ((qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) || wr->num_sge > 1 ||
        (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
         wr->opcode != IBV_WR_RDMA_READ)) {
      *bad = wr;
      return EINVAL;
    }
    int read = wr->opcode == IBV_WR_RDMA_READ;
    int st = IBV_WC_WR_FLUSH_ERR;
    uint64_t local = 0;
    if (qp->state == IBV_QPS_RTS) {
      if (wr->num_sge && !local_ok(&wr->sg_list[0], read ? IBV_ACCESS_LOCAL_WRITE : 0, &local))
        st = IBV_WC_LOC_PROT_ERR;
      else if (q->peer_pid == 0 || ibemu_peer_lock(q->peer_qpn, q->peer_pid, q->peer_qp) != 0)
        st = IBV_WC_RETRY_EXC_ERR;
      else {
        st = !peer_alive(q) ? IBV_WC_RETRY_EXC_ERR : read ? do_read(q, wr, local) : do_write(q, wr, local);
        ibemu_peer_unlock(q->peer_qpn);
      }
      if (st != IBV_WC_SUCCESS) {
        struct emu_cq* rc = (struct emu_cq*)qp->recv_cq; /* what arrived before the error completes first */
        pthread_mutex_lock(&rc->lock);
        collect(rc, q);
        flush_error(q, st == IBV_WC_REM_ACCESS_ERR);
        pthread_mutex_unlock(&rc->lock);
      }
    }
    if (st == IBV_WC_SUCCESS && !(wr->send_flags & IBV_SEND_SIGNALED)) continue;
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr->wr_id;
    wc.status = (enum ibv_wc_status)st;
    wc.opcode = read ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
    wc.qp_num = qp->qp_num;
    wc.byte_len = read && wr->num_sge ? wr->sg_list[0].length : 0;
    pthread_mutex_lock(&c->lock);
    ibemu_cq_push(c, &wc);
    pthread_mutex_unlock(&c->lock);
  }
  return 0;
}

int ibemu_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  struct emu_qp* q = (struct emu_qp*)qp;
  struct emu_cq* c = (struct emu_cq*)qp->recv_cq;
  pthread_mutex_lock(&c->lock);
  for (; wr != NULL; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || wr->num_sge > 1 || q->rq_tail - q->rq_head >= EMU_RQ) {
      *bad = wr;
      pthread_mutex_unlock(&c->lock);
      return qp->state == IBV_QPS_RESET || wr->num_sge > 1 ? EINVAL : ENOMEM;
    }
    q->rq[q->rq_tail++ % EMU_RQ] = wr->wr_id;
  }
  pthread_mutex_unlock(&c->lock);
  return 0;
}

/* Turn the notices that arrived on q into receive completions (under the CQ's lock). */
static void collect(struct emu_cq* c, struct emu_qp* q) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  wc.qp_num = q->qp.qp_num;
  int peer_error = __atomic_load_n(&q->in_error, __ATOMIC_ACQUIRE); /* before the ring: it was set after */
  while (q->qp.state != IBV_QPS_ERR && q->rq_head < q->rq_tail &&
         q->in_tail < __atomic_load_n(&q->in_head, __ATOMIC_ACQUIRE) && c->tail - c->head < EMU_CQ) {
    struct emu_in in = q->in[q->in_tail % EMU_RING];
    __atomic_store_n(&q->in_tail, q->in_tail + 1, __ATOMIC_RELEASE);
    wc.wr_id = q->rq[q->rq_head++ % EMU_RQ];
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = in.imm;
    wc.byte_len = in.len;
    ibemu_cq_push(c, &wc);
  }
  if (peer_error) q->qp.state = IBV_QPS_ERR;
  while (q->qp.state == IBV_QPS_ERR && q->rq_head < q->rq_tail && c->tail - c->head < EMU_CQ) {
    wc.wr_id = q->rq[q->rq_head++ % EMU_RQ];
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.wc_flags = 0;
    ibemu_cq_push(c, &wc);
  }
}

int ibemu_poll_cq(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
  struct emu_cq* c = (struct emu_cq*)cq;
  int got = 0;
  pthread_mutex_lock(&c->lock);
  for (struct emu_qp* q = c->qps; q != NULL; q = q->next_on_cq) collect(c, q);
  while (got < n && c->head < c->tail) wc[got++] = c->wc[c->head++ % EMU_CQ];
  pthread_mutex_unlock(&c->lock);
  return got;
}

int ibemu_req_notify_cq(struct ibv_cq* cq, int solicited) {
  return ENOSYS;
}
