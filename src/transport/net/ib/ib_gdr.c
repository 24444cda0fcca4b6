/*
 * ib_gdr.c - GPUDirect RDMA in the IB plugin, as NCCL's IB transport does it:
 *   - what a port can do with device memory (ptrSupport): BRAID_NET_PTR_CUDA when a peer-memory
 *     module is loaded (nvidia-peermem or the older nv_peer_mem: ibv_reg_mr takes a device
 *     address), BRAID_NET_PTR_DMABUF when the library and kernel register dma-bufs (probed as
 *     NCCL does: ibv_reg_dmabuf_mr with fd -1 fails with EBADF, not EOPNOTSUPP);
 *   - registering device memory (regMr of type BRAID_NET_PTR_CUDA): through a dma-buf of the
 *     pages (the device layer's dmabuf_get: cuMemGetHandleForAddressRange) when both the port
 *     and the GPU can, else ibv_reg_mr of the device address (peer memory);
 *   - the flush of GDR receives (iflush): a 1-byte RDMA READ of the received buffer through a QP
 *     of the receive comm connected to itself; the read completes only once the NIC's writes
 *     before it reached GPU memory. Made at accept when the port has GPUDirect RDMA and
 *     NCCL_GDR_FLUSH_DISABLE is not 1; the transport decides whether to call it (net_gdr.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "device/device.h"
#include "transport/net/ib/ib_net.h"

#define WR_FLUSH (1ull << 33) /* wr_id of a flush read: flag | request slot */

static int file_exists(const char* path) {
  return access(path, F_OK) == 0;
}

void ib_gdr_probe(struct ib_dev* d) {
  const struct braid_ibv* v = ib.ibv;
  d->peermem = file_exists("/sys/kernel/mm/memory_peers/nv_mem/version") ||
               file_exists("/sys/kernel/mm/memory_peers/nv_mem_nc/version") ||
               file_exists("/sys/module/nvidia_peermem/version");
  d->dmabuf = 0;
  if (v->reg_dmabuf_mr != NULL) {
    errno = 0;
    struct ibv_mr* mr = v->reg_dmabuf_mr(d->pd, 0, 0, 0, -1, 0);
    if (mr != NULL) v->dereg_mr(mr); /* not expected: fd -1 */
    d->dmabuf = errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
  }
}

int ib_gdr_ptr_support(const struct ib_dev* d) {
  return (d->peermem ? BRAID_NET_PTR_CUDA : 0) | (d->dmabuf ? BRAID_NET_PTR_DMABUF : 0);
}

/* Device memory [base, base + len): a dma-buf registration when the port and the GPU can, else
 * peer memory; NULL with a WARN naming the HCA and the calls tried. */
struct ibv_mr* ib_gdr_reg(struct ib_dev* d, uintptr_t base, size_t len, int access) {
  const struct braid_ibv* v = ib.ibv;
  const struct braid_device_ops* dev = braid_device();
  char why[160] = "";
  if (d->dmabuf && dev != NULL && dev->dmabuf_get != NULL) {
    int fd = -1;
    uint64_t off = 0;
    if (dev->dmabuf_get((void*)base, len, &fd, &off) == ncclSuccess) {
      struct ibv_mr* mr = v->reg_dmabuf_mr(d->pd, off, len, (uint64_t)base, fd, access);
      int err = errno;
      close(fd);
      if (mr != NULL) return mr;
      snprintf(why, sizeof(why), "ibv_reg_dmabuf_mr: %s; ", strerror(err));
    } else {
      snprintf(why, sizeof(why), "no dma-buf from the device; ");
    }
  }
  if (d->peermem) {
    struct ibv_mr* mr = v->reg_mr(d->pd, (void*)base, len, access);
    if (mr != NULL) return mr;
    snprintf(why + strlen(why), sizeof(why) - strlen(why), "ibv_reg_mr (peer memory): %s", strerror(errno));
  } else {
    snprintf(why + strlen(why), sizeof(why) - strlen(why), "no peer-memory module");
  }
  BRAID_WARN("NET/IB : %s:%d: cannot register %zu bytes of GPU memory at %p for GPUDirect RDMA (%s)", d->port.dev,
             d->port.port, len, (void*)base, why);
  return NULL;
}

/* ---- the flush ----------------------------------------------------------------------------- */

ncclResult_t ib_gdr_flush_open(struct ib_comm* c) {
  const struct braid_ibv* v = ib.ibv;
  struct ib_dev* d = c->dev;
  if (ib_gdr_ptr_support(d) == 0 || braid_param_int(BRAID_PARAM_GDR_FLUSH_DISABLE)) return ncclSuccess;
  c->flush_mr = v->reg_mr(d->pd, &c->flush_byte, sizeof(c->flush_byte), IBV_ACCESS_LOCAL_WRITE);
  if (c->flush_mr == NULL) {
    BRAID_WARN("NET/IB : %s:%d: ibv_reg_mr of the flush byte failed: %s", d->port.dev, d->port.port, strerror(errno));
    return ncclSystemError;
  }
  BRAID_CHECK(braid_ib_qp_create(v, d->pd, c->cq, &c->cfg, IB_NREQ, &c->flush_qp));
  struct braid_ib_qp_info self = {c->flush_qp->qp_num, 0, d->lid, d->gid, d->mtu};
  BRAID_CHECK(braid_ib_qp_rtr(v, c->flush_qp, &c->cfg, &self));
  return braid_ib_qp_rts(v, c->flush_qp, &c->cfg, 0);
}

void ib_gdr_flush_close(struct ib_comm* c) {
  if (c->flush_qp != NULL) ib.ibv->destroy_qp(c->flush_qp);
  if (c->flush_mr != NULL) ib.ibv->dereg_mr(c->flush_mr);
  c->flush_qp = NULL;
  c->flush_mr = NULL;
}

/* NCCL's: one read of the last non-empty receive (completions of one QP come in order, and the
 * NIC's writes before the read are in memory when it completes). NULL request: no flush QP
 * (no GDR on this port, or NCCL_GDR_FLUSH_DISABLE=1), or nothing received. */
ncclResult_t ib_iflush(void* comm, int n, void** data, size_t* sizes, void** mhandles, void** request) {
  struct ib_comm* c = comm;
  *request = NULL;
  int last = -1;
  for (int i = 0; i < n; i++)
    if (sizes[i] > 0) last = i;
  if (c->flush_qp == NULL || last < 0) return ncclSuccess;
  const struct ib_mr* mr = mhandles != NULL ? mhandles[last] : NULL;
  if (mr == NULL) {
    BRAID_WARN("NET/IB : iflush of %p without its registration", data[last]);
    return ncclInvalidArgument;
  }
  if (c->ctl.failed) return ncclRemoteError;
  struct ib_req* r = ib_req_new(c);
  if (r == NULL) return ncclSuccess; /* no room: try again */
  uint64_t i = c->req_tail;
  struct ibv_sge sge = {(uint64_t)(uintptr_t)&c->flush_byte, 1, c->flush_mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = WR_FLUSH | (i % IB_NREQ);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)data[last];
  wr.wr.rdma.rkey = mr->mr->rkey;
  int rc = ibv_post_send(c->flush_qp, &wr, &bad);
  if (rc != 0) {
    BRAID_WARN("NET/IB : ibv_post_send (flush read) failed on %s:%d QP 0x%x: %s", c->cfg.dev, c->cfg.port,
               c->flush_qp->qp_num, strerror(rc));
    ib_fail(c, "ibv_post_send (flush) failed: %s", strerror(rc));
    return ncclSystemError;
  }
  r->pending = 1;
  r->flush = 1;
  c->req_tail++;
  *request = r;
  return ncclSuccess;
}
