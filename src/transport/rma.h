/*
 * rma.h - one-sided message channels over the network transport's plugin, for the core's
 * ncclPutSignal / ncclSignal to ranks that cannot load/store each other's memory
 * (core/sym/remote.c). Implemented in transport/net/net_rma.c.
 *
 * A communicator opens one `struct braid_rma` with a send and a receive connection of the
 * net plugin (the one the collectives use) to every remote peer. Setup is collective and in
 * two steps: open (listen; fills one address per peer, which the core exchanges over the
 * bootstrap), then connect (connect + accept to every remote peer, bounded by a deadline).
 *
 * A message is a fixed header of BRAID_RMA_HDR_BYTES (the core's) and a payload of any size,
 * sent as fragments of at most BRAID_RMA_FRAG_BYTES; the receiving side hands every fragment,
 * in the order sent, to the core's deliver callback, from the progress engine's thread or
 * from a thread that polls the peer (braid_rma_poll). Messages from one peer are delivered in
 * the order they were sent (one plugin connection, whose requests complete in order).
 * braid_rma_send returns once the plugin has completed every fragment's send (the payload
 * is no longer read). A peer whose connection breaks is failed: its sends and polls return
 * ncclRemoteError and braid_rma_peer_error says why.
 */
#ifndef BRAID_RMA_H
#define BRAID_RMA_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define BRAID_RMA_HDR_BYTES 48
#define BRAID_RMA_ADDR_BYTES 136

struct braid_rma;

/* What a receiver tells one sender (allgathered by the core). */
struct braid_rma_addr {
  unsigned char data[BRAID_RMA_ADDR_BYTES];
};

/* One fragment of a message from `peer`: its header, where the fragment starts in the
 * payload, the fragment, and whether it is the message's last. An error fails the peer. */
typedef ncclResult_t (*braid_rma_deliver_fn)(void* arg, int peer, const void* hdr, uint64_t frag_off, const void* data,
                                             size_t len, int last);

/* remote[r] != 0: rank r gets connections. mine[r]: the address rank r connects to. */
ncclResult_t braid_rma_open(const struct braid_transport_ctx* t, const int* remote, braid_rma_deliver_fn deliver,
                            void* arg, struct braid_rma** rma_p, struct braid_rma_addr* mine);
/* theirs[r]: the address rank r made for this rank. deadline: braid_socket_clock_ns() time. */
ncclResult_t braid_rma_connect(struct braid_rma* rma, const struct braid_rma_addr* theirs, int64_t deadline_ns);
/* Send header + payload (host memory) to peer; blocking (BRAID_TIMEOUT, abort flag). */
ncclResult_t braid_rma_send(struct braid_rma* rma, int peer, const void* hdr, const void* data, size_t bytes);
/* Deliver what has arrived from peer, if nobody else is doing so now. ncclRemoteError when
 * the peer's connection failed or closed. */
ncclResult_t braid_rma_poll(struct braid_rma* rma, int peer);
/* The same, but when nothing has arrived sleep until the plugin's descriptors say something
 * may have (at most timeout_us): a waiter that spins loses its CPU on a loaded machine. */
ncclResult_t braid_rma_wait(struct braid_rma* rma, int peer, int timeout_us);
/* ncclSuccess, or why peer's connections are unusable (*why: a sentence). */
ncclResult_t braid_rma_peer_error(struct braid_rma* rma, int peer, const char** why);
/* Bytes of buffers the channels hold (memory statistics); the plugin's name. */
size_t braid_rma_bytes(const struct braid_rma* rma);
const char* braid_rma_net_name(const struct braid_rma* rma);
/* Tear down (after this no callback runs). Safe on a half-built one and NULL. */
void braid_rma_close(struct braid_rma* rma);

#endif /* BRAID_RMA_H */
