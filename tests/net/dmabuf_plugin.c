/*
 * dmabuf_plugin.c - a test-only NCCL net plugin (ncclNetPlugin_v8, "DmaBufProbe") for the
 * adapter's device-memory registration (tests/unit/test_net_dmabuf.c): one device that declares
 * NCCL_PTR_HOST | NCCL_PTR_DMABUF. regMr and regMrDmaBuf record what they were given; the
 * dma-buf is mapped at the offset given and its first bytes copied, so the test can check the
 * descriptor really covers the memory being registered. It never moves data: the other slots
 * fail. The Makefile builds it as build/lib/libnccl-net-braidtest-dmabuf.so.
 */
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/net/plugin/nccl_net_abi.h"

#define PTR_HOST 0x1
#define PTR_DMABUF 0x4

/* What the last registration saw (read by the test through dlsym). */
struct dmabuf_probe_record {
  int calls_reg_mr, calls_reg_dmabuf, type, fd_valid;
  unsigned long long offset;
  size_t size;
  unsigned char head[16]; /* the first bytes of the dma-buf at `offset` */
};
__attribute__((visibility("default"))) struct dmabuf_probe_record dmabufProbeRecord;

static int handle_token;

static ncclResult_t p_init(nccl_abi_logger_t log) {
  return ncclSuccess;
}
static ncclResult_t p_devices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}
static ncclResult_t p_props(int dev, struct nccl_net_props_v8* p) {
  memset(p, 0, sizeof(*p));
  p->name = "probe0";
  p->pciPath = NULL;
  p->ptrSupport = PTR_HOST | PTR_DMABUF;
  p->speed = 100000;
  p->latency = 0;
  p->maxComms = 1;
  p->maxRecvs = 1;
  return ncclSuccess;
}
static ncclResult_t p_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  dmabufProbeRecord.calls_reg_mr++;
  dmabufProbeRecord.type = type;
  dmabufProbeRecord.size = size;
  *mhandle = &handle_token;
  return ncclSuccess;
}
static ncclResult_t p_reg_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                 void** mhandle) {
  struct dmabuf_probe_record* r = &dmabufProbeRecord;
  r->calls_reg_dmabuf++;
  r->type = type;
  r->size = size;
  r->offset = offset;
  r->fd_valid = fd >= 0 && lseek(fd, 0, SEEK_END) >= (off_t)(offset + size);
  if (r->fd_valid) {
    long page = sysconf(_SC_PAGESIZE);
    off_t base = (off_t)(offset / page) * page;
    size_t len = (size_t)(offset - base) + sizeof(r->head);
    void* m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, base);
    if (m == MAP_FAILED) {
      r->fd_valid = 0;
    } else {
      memcpy(r->head, (char*)m + (offset - base), sizeof(r->head));
      munmap(m, len);
    }
  }
  *mhandle = &handle_token;
  return ncclSuccess;
}
static ncclResult_t p_dereg_mr(void* comm, void* mhandle) {
  return mhandle == &handle_token ? ncclSuccess : ncclInternalError;
}
static ncclResult_t p_fail(void) {
  return ncclInternalError; /* never called by the test */
}
#define F (void*)p_fail

__attribute__((visibility("default"))) const struct nccl_net_v8 ncclNetPlugin_v8 = {
    .name = "DmaBufProbe",
    .init = p_init,
    .devices = p_devices,
    .getProperties = p_props,
    .listen = F,
    .connect = F,
    .accept = F,
    .regMr = p_reg_mr,
    .regMrDmaBuf = p_reg_dmabuf,
    .deregMr = p_dereg_mr,
    .isend = F,
    .irecv = F,
    .iflush = F,
    .test = F,
    .closeSend = F,
    .closeRecv = F,
    .closeListen = F,
    .getDeviceMr = F,
    .irecvConsumed = F,
};
