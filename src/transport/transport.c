/*
 * transport.c - what all transports share: the layout of a connection's FIFO memory (control
 * block, then one buffer per protocol) and, for device communicators, running device-layer
 * calls with the communicator's device current. The order in which transports are tried is
 * in connect.c.
 */
#include "transport/transport.h"

#include "base/check.h"
#include "device/device.h"

/* Round up to a multiple of `a` (a power of two). */
static size_t align_up(size_t x, size_t a) {
  return (x + a - 1) & ~(a - 1);
}

size_t braid_transport_fifo_bytes(const struct braid_comm* comm) {
  size_t bytes = align_up(sizeof(struct braid_conn_ctrl), 4096);
  for (int p = 0; p < BRAID_NUM_PROTOS; p++) bytes += align_up(comm->buff_bytes[p], 4096);
  return bytes;
}

void braid_transport_fifo_layout(const struct braid_comm* comm, char* base, struct braid_conn* conn) {
  struct braid_conn_ctrl* ctrl = (struct braid_conn_ctrl*)base;
  char* p = base + align_up(sizeof(struct braid_conn_ctrl), 4096);
  conn->tail = &ctrl->tail;
  conn->head = &ctrl->head;
  conn->sizes = ctrl->sizes;
  for (int proto = 0; proto < BRAID_NUM_PROTOS; proto++) {
    conn->buff[proto] = p;
    conn->slot_bytes[proto] = (uint32_t)(comm->buff_bytes[proto] / BRAID_NSTEPS);
    p += align_up(comm->buff_bytes[proto], 4096);
  }
  conn->step = 0;
}

ncclResult_t braid_transport_device_enter(int dev, int* saved_p) {
  const struct braid_device_ops* d = braid_device();
  int cur = -1;
  *saved_p = -1;
  if (d == NULL || dev < 0) return ncclSuccess;
  BRAID_CHECK(d->get_current(&cur));
  if (cur == dev) return ncclSuccess;
  BRAID_CHECK(d->set_current(dev));
  *saved_p = cur;
  return ncclSuccess;
}

void braid_transport_device_leave(int saved) {
  const struct braid_device_ops* d = braid_device();
  if (d != NULL && saved >= 0) (void)d->set_current(saved);
}
