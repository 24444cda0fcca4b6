/*
 * transport.c - what all transports share: the layout of a connection's FIFO memory (control
 * block, then one buffer per protocol), how messages name a peer, failing the communicator
 * through the context, and, for device communicators, running device-layer calls with the
 * communicator's device current. The order in which transports are tried is the registry's
 * (registry.h).
 */
#include "transport/transport.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/check.h"
#include "device/device.h"

/* Round up to a multiple of `a` (a power of two). */
static size_t align_up(size_t x, size_t a) {
  return (x + a - 1) & ~(a - 1);
}

size_t braid_transport_fifo_bytes(const struct braid_transport_ctx* ctx) {
  size_t bytes = align_up(sizeof(struct braid_conn_ctrl), 4096);
  for (int p = 0; p < BRAID_NUM_PROTOS; p++) bytes += align_up(ctx->buff_bytes[p], 4096);
  return bytes;
}

void braid_transport_fifo_layout(const struct braid_transport_ctx* ctx, char* base, struct braid_conn* conn) {
  struct braid_conn_ctrl* ctrl = (struct braid_conn_ctrl*)base;
  char* p = base + align_up(sizeof(struct braid_conn_ctrl), 4096);
  conn->tail = &ctrl->tail;
  conn->head = &ctrl->head;
  conn->sizes = ctrl->sizes;
  conn->ptrs = ctrl->ptrs;
  conn->want = &ctrl->want;
  for (int proto = 0; proto < BRAID_NUM_PROTOS; proto++) {
    conn->buff[proto] = p;
    conn->slot_bytes[proto] = (uint32_t)(ctx->buff_bytes[proto] / BRAID_NSTEPS);
    p += align_up(ctx->buff_bytes[proto], 4096);
  }
  conn->step = 0;
}

const char* braid_transport_peer_name(const struct braid_transport_ctx* ctx, int peer, char* buf, size_t len) {
  if (ctx->peers == NULL || peer < 0 || peer >= ctx->nranks) {
    snprintf(buf, len, "rank %d", peer);
    return buf;
  }
  snprintf(buf, len, "rank %d (host %s, pid %d)", peer, ctx->peers[peer].hostname, ctx->peers[peer].pid);
  return buf;
}

void braid_transport_fail(const struct braid_transport_ctx* ctx, int status, ncclResult_t res, int peer,
                          const char* fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (ctx->fail != NULL)
    ctx->fail(ctx->owner, status, res, peer, msg);
  else
    BRAID_WARN("%s", msg); /* a context without a failure service (tests): say it at least */
}

ncclResult_t braid_transport_device_enter(const struct braid_device_ops* d, int dev, int* saved_p) {
  int cur = -1;
  *saved_p = -1;
  if (d == NULL || dev < 0) return ncclSuccess;
  BRAID_CHECK(d->get_current(&cur));
  if (cur == dev) return ncclSuccess;
  BRAID_CHECK(d->set_current(dev));
  *saved_p = cur;
  return ncclSuccess;
}

void braid_transport_device_leave(const struct braid_device_ops* d, int saved) {
  if (d != NULL && saved >= 0) (void)d->set_current(saved);
}
