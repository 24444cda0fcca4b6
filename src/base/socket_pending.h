/*
 * socket_pending.h - the accepted connections of a network plugin's listener (Socket, UCX, an
 * out-of-band socket) that have not yet said who they are. A stranger can hold little: the
 * list is capped (braid_socket_max_pending: the oldest goes first), each handshake must
 * complete within the plugin's timeout, accepting backs off when descriptors run out, and
 * every drop is a rate-limited WARN (braid_socket_warn_drop). The bootstrap has its own
 * (larger hello, rank table) but the same rules.
 */
#ifndef BRAID_BASE_SOCKET_PENDING_H
#define BRAID_BASE_SOCKET_PENDING_H

#include "base/socket.h"

/* A listener's cap on connections waiting for their handshake: a quarter of the descriptor
 * limit, between 16 and 1024. */
int braid_socket_max_pending(void);

struct braid_socket_pending {
  struct braid_socket_pending* next;
  struct braid_socket sock;
  struct braid_socket_handshake hs;
  size_t off;       /* handshake bytes read */
  int64_t deadline; /* braid_socket_clock_ns() by which the handshake must be in */
};

struct braid_socket_pending_list {
  struct braid_socket_pending* head; /* newest first */
  int n, max;
  int64_t accept_after; /* nonzero: backing off after running out of descriptors */
  const char* ctx;      /* "NET/Socket": the WARNs' prefix */
  uint64_t secret;
  int type; /* enum braid_socket_type the handshake must carry */
  int timeout_ms;
};

/* What the listener says of a connection whose handshake is complete and valid. */
enum braid_socket_pending_verdict {
  BRAID_PENDING_DROP = -1, /* not one of ours after all (the callback said why): closed */
  BRAID_PENDING_LATER = 0, /* keep it pending; ask again at the next poll */
  BRAID_PENDING_TAKEN = 1, /* the callback owns the socket now */
};
typedef int (*braid_socket_pending_fn)(void* arg, struct braid_socket* s, const struct braid_socket_handshake* hs);

void braid_socket_pending_init(struct braid_socket_pending_list* l, const char* ctx, uint64_t secret, int type,
                               int timeout_ms);
/* Accepts what waits on the listener (without blocking), then steps every pending handshake:
 * a complete, valid one is handed to fn; a failed or late one is dropped. Fails only when the
 * listener itself fails or memory runs out. */
ncclResult_t braid_socket_pending_poll(struct braid_socket_pending_list* l, struct braid_socket* listener,
                                       braid_socket_pending_fn fn, void* arg);
/* Closes and frees every pending connection. */
void braid_socket_pending_close(struct braid_socket_pending_list* l);

#endif /* BRAID_BASE_SOCKET_PENDING_H */
