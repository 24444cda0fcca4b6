/*
 * ib_io.c - requests of the IB net plugin: the clear-to-send FIFO (irecv writes a slot into the
 * sender, isend waits for it), RDMA WRITE_WITH_IMM for data, completions polled in test(), the
 * control socket (the peer's last word or death), memory registration with a per-device cache,
 * goodbye / abort notices and status. The protocol: ib_net.h. A comm is used by one thread at a
 * time (the transport holds its lock); the cache has the device's lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "transport/net/ib/ib_net.h"

#define WR_CTS (1ull << 32) /* a clear-to-send write (wr_id: flag | request slot) */

/* ---- completions --------------------------------------------------------------------------- */

static const char* wc_status_str(int s) {
  switch (s) {
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:
      return "work request flushed (the QP is in error)";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "RNR retry counter exceeded";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote invalid request";
    case IBV_WC_REM_OP_ERR:
      return "remote operation error";
    default:
      return "error";
  }
}

/* One error completion: the comm fails. The peer's doing (gone, flushed): quietly; a key or
 * bounds fault is a bug here or there: WARN. */
static ncclResult_t wc_error(struct ib_comm* c, const struct ibv_wc* wc) {
  int peer =
      wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR || wc->status == IBV_WC_WR_FLUSH_ERR;
  if (!peer)
    BRAID_WARN("NET/IB : %s:%d: completion error on QP 0x%x: %s (status %d, vendor error 0x%x, %s)", c->cfg.dev,
               c->cfg.port, wc->qp_num, wc_status_str(wc->status), wc->status, wc->vendor_err,
               wc->wr_id & WR_CTS               ? "clear-to-send write"
               : wc->opcode == IBV_WC_RDMA_READ ? "flush read"
               : c->is_send                     ? "data write"
                                                : "receive");
  ib_fail(c, "%s (status %d on %s:%d, QP 0x%x)", wc_status_str(wc->status), wc->status, c->cfg.dev, c->cfg.port,
          wc->qp_num);
  return peer ? ncclRemoteError : ncclSystemError;
}

static ncclResult_t cq_poll(struct ib_comm* c) {
  struct ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(c->cq, 16, wc);
    if (n < 0) {
      BRAID_WARN("NET/IB : ibv_poll_cq failed on %s:%d (%d)", c->cfg.dev, c->cfg.port, n);
      ib_fail(c, "ibv_poll_cq failed");
      return ncclSystemError;
    }
    for (int i = 0; i < n; i++) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        /* A receiver whose sender said goodbye: its QP is gone, rightly; this request will never
         * be filled, the others still complete, and ctrl_check reports the end once every
         * message the sender counted is in. */
        if (!c->is_send) braid_net_ctrl_read(&c->ctl);
        if (!c->is_send && c->ctl.bye && !c->ctl.failed) continue;
        return wc_error(c, &wc[i]);
      }
      struct ib_req* r = &c->reqs[(uint32_t)wc[i].wr_id % IB_NREQ];
      if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) r->size += ntohl(wc[i].imm_data);
      r->pending--;
    }
    if (n < 16) return ncclSuccess;
  }
}

/* ---- requests ------------------------------------------------------------------------------ */

static ncclResult_t post_write(struct ib_comm* c, struct ibv_qp* qp, uint64_t id, int op, void* src, uint32_t len,
                               uint32_t lkey, uint64_t dst, uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)src, len, lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = id;
  wr.sg_list = len ? &sge : NULL;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = (enum ibv_wr_opcode)op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = dst;
  wr.wr.rdma.rkey = rkey;
  int rc = ibv_post_send(qp, &wr, &bad);
  if (rc == 0) return ncclSuccess;
  BRAID_WARN("NET/IB : ibv_post_send (%s, %u bytes) failed on %s:%d QP 0x%x: %s",
             op == IBV_WR_RDMA_WRITE ? "RDMA write" : "RDMA write with immediate", len, c->cfg.dev, c->cfg.port,
             qp->qp_num, strerror(rc));
  ib_fail(c, "ibv_post_send failed: %s", strerror(rc));
  return ncclSystemError;
}

struct ib_req* ib_req_new(struct ib_comm* c) {
  if (c->req_tail - c->req_head >= IB_NREQ) return NULL;
  struct ib_req* r = &c->reqs[c->req_tail % IB_NREQ];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = 1;
  return r;
}

/* The data of request `i` (slot s of the FIFO says where): one write per QP it uses. */
static ncclResult_t send_data(struct ib_comm* c, uint64_t i, const struct ib_fifo_slot* s, char* data, size_t size,
                              const struct ib_mr* mr, struct ib_req* r) {
  uint64_t id = i % IB_NREQ;
  uint32_t lkey = mr != NULL ? mr->mr->lkey : 0;
  int first = c->split ? 0 : (int)(i % (uint64_t)c->nqps), nq = c->split ? c->nqps : 1;
  size_t chunk = (size + (size_t)nq - 1) / (size_t)nq;
  chunk = (chunk + 127) & ~(size_t)127;
  for (int k = 0; k < nq; k++) {
    size_t off = (size_t)k * chunk < size ? (size_t)k * chunk : size;
    uint32_t len = (uint32_t)(size - off < chunk ? size - off : chunk);
    struct ibv_qp* qp = c->qp[first + k];
    if (c->dev->ar && len > 0) { /* adaptive routing: the data, then a 0-byte notice */
      BRAID_CHECK(post_write(c, qp, id, IBV_WR_RDMA_WRITE, data + off, len, lkey, s->addr + off, s->rkey, 0));
      r->pending++;
      BRAID_CHECK(post_write(c, qp, id, IBV_WR_RDMA_WRITE_WITH_IMM, NULL, 0, 0, s->addr + off, s->rkey, len));
    } else {
      BRAID_CHECK(
          post_write(c, qp, id, IBV_WR_RDMA_WRITE_WITH_IMM, data + off, len, lkey, s->addr + off, s->rkey, len));
    }
    r->pending++;
  }
  return ncclSuccess;
}

ncclResult_t ib_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  struct ib_comm* c = comm;
  const struct ib_mr* mr = mhandle;
  *request = NULL;
  if (c->ctl.failed || ib_sender_ready(c) < 0) return ncclRemoteError;
  if (!c->ready || c->req_tail - c->req_head >= IB_NREQ) return ncclSuccess;
  uint64_t i = c->req_tail;
  struct ib_fifo_slot* s = &c->fifo[i % IB_NREQ];
  if (__atomic_load_n(&s->idx, __ATOMIC_ACQUIRE) != i + 1) { /* no clear-to-send yet */
    braid_net_ctrl_check(&c->ctl, 0);
    return c->ctl.failed ? ncclRemoteError : ncclSuccess;
  }
  if (s->tag != tag || size > s->size) {
    BRAID_WARN("NET/IB : %s:%d: send %llu of %zu bytes, tag %d: the receiver posted %u bytes, tag %d", c->cfg.dev,
               c->cfg.port, (unsigned long long)i, size, tag, s->size, s->tag);
    ib_fail(c, "the receiver's buffer does not match this send");
    return ncclInternalError;
  }
  if (size > 0 && (mr == NULL || (uintptr_t)data < mr->base || (uintptr_t)data + size > mr->base + mr->len)) {
    BRAID_WARN("NET/IB : isend of %zu bytes at %p outside its registration", size, data);
    return ncclInvalidArgument;
  }
  struct ib_req* r = ib_req_new(c);
  BRAID_CHECK(send_data(c, i, s, data, size, mr, r));
  r->size = size;
  c->req_tail++;
  c->ctl.posted_msgs++;
  *request = r;
  return ncclSuccess;
}

/* Receiver: write the clear-to-sends kept while the sender's QPs were not ready (ib_net.h). */
static ncclResult_t cts_flush(struct ib_comm* c) {
  if (!c->ctl.ready) braid_net_ctrl_read(&c->ctl);
  if (c->ctl.failed) return ncclRemoteError;
  for (; c->ctl.ready && c->cts_sent < c->recv_msgs; c->cts_sent++) {
    uint64_t i = c->cts_sent;
    int first = c->split ? 0 : (int)(i % (uint64_t)c->nqps);
    struct ib_fifo_slot* s = &c->fifo[i % IB_NREQ]; /* staged by irecv */
    BRAID_CHECK(post_write(c, c->qp[first], WR_CTS | c->cts_req[i % IB_NREQ], IBV_WR_RDMA_WRITE, s, sizeof(*s),
                           c->fifo_mr->lkey, c->peer.fifo_addr + (i % IB_NREQ) * sizeof(*s), c->peer.fifo_rkey, 0));
  }
  return ncclSuccess;
}

ncclResult_t ib_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  struct ib_comm* c = comm;
  *request = NULL;
  if (n != 1) {
    BRAID_WARN("NET/IB : irecv of %d buffers (maxRecvs is 1)", n);
    return ncclInvalidArgument;
  }
  const struct ib_mr* mr = mhandles != NULL ? mhandles[0] : NULL;
  if (sizes[0] > UINT32_MAX || (sizes[0] > 0 && (mr == NULL || (uintptr_t)data[0] < mr->base ||
                                                 (uintptr_t)data[0] + sizes[0] > mr->base + mr->len))) {
    BRAID_WARN("NET/IB : irecv of %zu bytes at %p outside its registration", sizes[0], data[0]);
    return ncclInvalidArgument;
  }
  if (c->ctl.failed) return ncclRemoteError;
  struct ib_req* r = ib_req_new(c);
  if (r == NULL) return ncclSuccess;
  uint64_t i = c->recv_msgs, slot = c->req_tail % IB_NREQ; /* message i, in request slot `slot` */
  int first = c->split ? 0 : (int)(i % (uint64_t)c->nqps), nq = c->split ? c->nqps : 1;
  for (int k = 0; k < nq; k++) {
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = slot;
    int rc = ibv_post_recv(c->qp[first + k], &wr, &bad);
    if (rc != 0) {
      BRAID_WARN("NET/IB : ibv_post_recv failed on %s:%d QP 0x%x: %s", c->cfg.dev, c->cfg.port,
                 c->qp[first + k]->qp_num, strerror(rc));
      ib_fail(c, "ibv_post_recv failed: %s", strerror(rc));
      return ncclSystemError;
    }
    r->pending++;
  }
  struct ib_fifo_slot* s = &c->fifo[i % IB_NREQ]; /* staging: what the sender's slot becomes */
  *s = (struct ib_fifo_slot){(uint64_t)(uintptr_t)data[0],
                             mr != NULL ? mr->mr->rkey : 0,
                             (uint32_t)sizes[0],
                             tags != NULL ? tags[0] : 0,
                             0,
                             i + 1};
  c->cts_req[i % IB_NREQ] = (uint32_t)slot;
  r->pending++; /* its clear-to-send's completion */
  c->req_tail++;
  c->recv_msgs++;
  *request = r;
  return cts_flush(c);
}

ncclResult_t ib_test(void* request, int* done, size_t* sizes) {
  struct ib_req* r = request;
  struct ib_comm* c = r->comm;
  *done = 0;
  if (c->is_send && !c->ready && ib_sender_ready(c) < 0) return ncclRemoteError;
  if (!c->is_send && c->cts_sent < c->recv_msgs && cts_flush(c) != ncclSuccess) return ncclRemoteError;
  ncclResult_t res = c->ctl.failed ? ncclRemoteError : cq_poll(c);
  if (res != ncclSuccess) return res;
  if (r->pending > 0) {
    braid_net_ctrl_check(&c->ctl, 0);
    return c->ctl.failed ? ncclRemoteError : ncclSuccess;
  }
  /* A receiver reads the control socket with every message too: garbage or an abort notice
   * written before this message fails it. */
  if (!c->is_send) {
    braid_net_ctrl_read(&c->ctl);
    if (c->ctl.failed) return ncclRemoteError;
    if (!r->flush) c->ctl.posted_msgs++;
  }
  r->used = 0;
  while (c->req_head < c->req_tail && !c->reqs[c->req_head % IB_NREQ].used) c->req_head++;
  *done = 1;
  if (sizes != NULL) sizes[0] = r->size;
  return ncclSuccess;
}

/* RDMA writes wake no descriptor: with requests in flight the engine polls (ncclInProgress);
 * otherwise only the control socket can say anything. */
ncclResult_t ib_wait_fds(void* comm, struct pollfd* fds, int max, int* n_p) {
  struct ib_comm* c = comm;
  *n_p = 0;
  if (c->ctl.failed) return ncclSuccess;
  int unready = c->is_send ? !c->ready : !c->ctl.ready; /* only the control socket can speak */
  if (c->req_tail != c->req_head || (c->is_send && !c->ready)) {
    if (unready && max >= 1) {
      fds[0] = (struct pollfd){.fd = c->ctl.sock.fd, .events = POLLIN}; /* the peer's QP numbers / its ready */
      *n_p = 1;
      return ncclSuccess;
    }
    return ncclInProgress;
  }
  if (max >= 1) fds[0] = (struct pollfd){.fd = c->ctl.sock.fd, .events = POLLIN}, *n_p = 1;
  return ncclSuccess;
}

ncclResult_t ib_get_status(void* comm, struct braid_net_status* st) {
  braid_net_ctrl_status(&((struct ib_comm*)comm)->ctl, st);
  return ncclSuccess;
}

/* ---- the sender's last word ---------------------------------------------------------------- */

ncclResult_t ib_finish_send(void* comm) {
  struct ib_comm* c = comm;
  if (!c->ctl.failed) braid_net_ctrl_say(&c->ctl, BRAID_NET_CTRL_BYE, c->ctl.posted_msgs, 2000);
  return ncclSuccess;
}

ncclResult_t ib_abort_send(void* comm, int code) {
  braid_net_ctrl_say(&((struct ib_comm*)comm)->ctl, BRAID_NET_CTRL_ABORT, (uint64_t)(code > 0 ? code : 0), 200);
  return ncclSuccess;
}

/* ---- memory: a per-device cache of page-aligned registrations ------------------------------ */

ncclResult_t ib_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  struct ib_comm* c = comm;
  struct ib_dev* d = c->dev;
  int cuda = type == BRAID_NET_PTR_CUDA;
  if (type != BRAID_NET_PTR_HOST && !(cuda && ib_gdr_ptr_support(d) != 0)) {
    BRAID_WARN("NET/IB : regMr: memory type %d on %s:%d, which registers %s", type, d->port.dev, d->port.port,
               ib_gdr_ptr_support(d) ? "host and GPU memory only" : "host memory only (no GPUDirect RDMA)");
    return ncclInvalidArgument;
  }
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)data & ~(page - 1), end = ((uintptr_t)data + size + page - 1) & ~(page - 1);
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&d->lock);
  struct ib_mr* m = d->cache;
  while (m != NULL && !(m->cuda == cuda && m->base <= (uintptr_t)data && (uintptr_t)data + size <= m->base + m->len))
    m = m->next;
  if (m == NULL) {
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ib.ro) access |= IBV_ACCESS_RELAXED_ORDERING;
    struct ibv_mr* mr =
        cuda ? ib_gdr_reg(d, base, end - base, access) : ib.ibv->reg_mr(d->pd, (void*)base, end - base, access);
    if (mr == NULL || (m = calloc(1, sizeof(*m))) == NULL) {
      if (!cuda || mr != NULL)
        BRAID_WARN("NET/IB : ibv_reg_mr of %zu bytes at %p failed on %s:%d: %s", (size_t)(end - base), (void*)base,
                   d->port.dev, d->port.port, strerror(errno));
      if (mr != NULL) ib.ibv->dereg_mr(mr);
      res = ncclSystemError;
      goto out;
    }
    *m = (struct ib_mr){d->cache, d, mr, base, end - base, 0, cuda};
    d->cache = m;
  }
  m->refs++;
  *mhandle = m;
out:
  pthread_mutex_unlock(&d->lock);
  return res;
}

ncclResult_t ib_dereg_mr(void* comm, void* mhandle) {
  struct ib_mr* m = mhandle;
  if (m == NULL) return ncclSuccess;
  struct ib_dev* d = m->dev;
  pthread_mutex_lock(&d->lock);
  if (--m->refs == 0) {
    for (struct ib_mr** pp = &d->cache; *pp != NULL; pp = &(*pp)->next)
      if (*pp == m) {
        *pp = m->next;
        break;
      }
    ib.ibv->dereg_mr(m->mr);
    free(m);
  }
  pthread_mutex_unlock(&d->lock);
  return ncclSuccess;
}
