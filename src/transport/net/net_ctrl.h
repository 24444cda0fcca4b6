/*
 * net_ctrl.h - the control socket's end-of-connection protocol, shared by the net plugins that
 * move data elsewhere (UCX, IB): once connected, the socket carries (besides IB's "ready": the
 * sender's QPs take RDMA writes, {magic, BRAID_NET_CTRL_READY, 0}, sets `ready`) only the
 * sender's last word,
 *   - a goodbye {magic, BRAID_NET_CTRL_BYE, messages sent}: the receiver reports closedByPeer
 *     once it has received that many messages;
 *   - an abort notice {magic, BRAID_NET_CTRL_ABORT, code}: peerAborted with the code;
 *   - EOF or a reset without either: the peer died; anything else: garbage.
 * A sender watches for its receiver's EOF. The first failure's reason is kept (getStatus). The
 * caller serialises the calls on one struct (its comm's lock).
 */
#ifndef BRAID_NET_CTRL_H
#define BRAID_NET_CTRL_H

#include <stddef.h>
#include <stdint.h>

#include "base/socket.h"
#include "transport/net/net.h"

#define BRAID_NET_CTRL_BYE 1
#define BRAID_NET_CTRL_ABORT 2
#define BRAID_NET_CTRL_READY 3
#define BRAID_NET_CTRL_CHECK_NS 1000000LL /* how often a busy comm looks at its socket */

struct braid_net_ctrl_msg {
  uint32_t magic;
  int32_t tag;
  uint64_t value; /* goodbye: messages sent; abort: the code */
};

struct braid_net_ctrl {
  struct braid_socket sock;
  int is_send;
  uint32_t magic;               /* the plugin's: messages with another are garbage */
  struct braid_net_ctrl_msg in; /* receiver: the message being read */
  size_t in_off;
  int64_t checked;      /* when the socket was last looked at */
  uint64_t posted_msgs; /* sender: messages posted; receiver: received */
  int ready;            /* receiver: the sender said it is ready (IB) */
  int bye;              /* receiver: the sender said goodbye ... */
  uint64_t bye_msgs;    /* ... after this many messages */
  int failed, closed_by_peer, peer_aborted, abort_code;
  char reason[160];
};

/* An unconnected end (sock closed); the plugin sets sock once connected. */
void braid_net_ctrl_init(struct braid_net_ctrl* c, int is_send, uint32_t magic);
/* Record why the comm failed (the first reason wins); returns ncclRemoteError. */
ncclResult_t braid_net_ctrl_fail(struct braid_net_ctrl* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Receiver: read what the sender said so far (goodbye, abort notice, EOF, garbage). */
void braid_net_ctrl_read(struct braid_net_ctrl* c);
/* Look at the socket (at most every BRAID_NET_CTRL_CHECK_NS unless now_too): a sender for its
 * receiver's EOF, a receiver for the last word; a goodbye whose messages all arrived closes. */
void braid_net_ctrl_check(struct braid_net_ctrl* c, int now_too);
/* Sender: the last word (best effort, at most ms milliseconds). */
void braid_net_ctrl_say(struct braid_net_ctrl* c, int tag, uint64_t value, int ms);
void braid_net_ctrl_status(const struct braid_net_ctrl* c, struct braid_net_status* st);

#endif /* BRAID_NET_CTRL_H */
