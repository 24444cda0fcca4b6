/*
 * net_ctrl.c - the control socket's end-of-connection protocol of the UCX and IB plugins
 * (net_ctrl.h).
 */
#include "transport/net/net_ctrl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void braid_net_ctrl_init(struct braid_net_ctrl* c, int is_send, uint32_t magic) {
  memset(c, 0, sizeof(*c));
  braid_socket_init(&c->sock);
  c->is_send = is_send;
  c->magic = magic;
}

ncclResult_t braid_net_ctrl_fail(struct braid_net_ctrl* c, const char* fmt, ...) {
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
    va_end(ap);
    c->failed = 1;
  }
  return ncclRemoteError;
}

void braid_net_ctrl_read(struct braid_net_ctrl* c) {
  while (!c->failed && !c->bye) {
    if (braid_socket_recv_try(&c->sock, &c->in, sizeof(c->in), &c->in_off) != ncclSuccess) {
      braid_net_ctrl_fail(c, "%s", braid_socket_fail_str(c->sock.fail));
      return;
    }
    if (c->in_off < sizeof(c->in)) return;
    c->in_off = 0;
    if (c->in.magic == c->magic && c->in.tag == BRAID_NET_CTRL_READY && !c->ready) {
      c->ready = 1;
      continue;
    }
    if (c->in.magic != c->magic || (c->in.tag != BRAID_NET_CTRL_BYE && c->in.tag != BRAID_NET_CTRL_ABORT)) {
      braid_net_ctrl_fail(c, "sent garbage on the control socket (0x%08x %d, expected magic 0x%08x)", c->in.magic,
                          c->in.tag, c->magic);
      return;
    }
    if (c->in.tag == BRAID_NET_CTRL_ABORT) {
      c->peer_aborted = 1;
      c->abort_code = (int)c->in.value;
      braid_net_ctrl_fail(c, "sent an abort notice (code %d)", c->abort_code);
      return;
    }
    c->bye = 1;
    c->bye_msgs = c->in.value;
  }
}

void braid_net_ctrl_check(struct braid_net_ctrl* c, int now_too) {
  int64_t now = braid_socket_clock_ns();
  if (!now_too && now - c->checked < BRAID_NET_CTRL_CHECK_NS) return;
  c->checked = now;
  if (c->is_send) {
    int closed = 0;
    if (braid_socket_peer_closed(&c->sock, &closed) == ncclSuccess && closed)
      braid_net_ctrl_fail(c, "closed the connection (the receiver is gone)");
    return;
  }
  braid_net_ctrl_read(c);
  if (!c->failed && c->bye && c->posted_msgs >= c->bye_msgs) {
    c->closed_by_peer = 1;
    braid_net_ctrl_fail(c, "closed the connection");
  }
}

void braid_net_ctrl_say(struct braid_net_ctrl* c, int tag, uint64_t value, int ms) {
  struct braid_net_ctrl_msg m = {c->magic, tag, value};
  (void)braid_socket_send(&c->sock, &m, sizeof(m), NULL, braid_socket_deadline_ms(ms));
}

void braid_net_ctrl_status(const struct braid_net_ctrl* c, struct braid_net_status* st) {
  memset(st, 0, sizeof(*st));
  st->failed = c->failed;
  st->closedByPeer = c->closed_by_peer;
  st->peerAborted = c->peer_aborted;
  st->abortCode = c->abort_code;
  snprintf(st->reason, sizeof(st->reason), "%s", c->reason);
}
