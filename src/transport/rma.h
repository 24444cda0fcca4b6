/*
 * rma.h - one-sided message channels over the network transport's plugin, for the core's
 * ncclPutSignal / ncclSignal to ranks that cannot load/store each other's memory
 * (core/sym/remote.c). Implemented in transport/net/net_rma.c.
 *
 * A communicator opens one `struct braid_rma` per communicator. Setup: open (collective: one
 * listen per remote peer; fills one address per peer, which the core allgathers over the
 * bootstrap), then connect (hands each peer's address over; nothing is connected yet). A
 * pair's connection is made on first use: the origin's first send connects (send buffers are
 * set up then), the target accepts it from the progress engine's thread or from a thread that
 * polls that origin (its receive buffers are set up then). A pair that never talks holds a
 * listen and nothing else.
 *
 * A message is a fixed header of BRAID_RMA_HDR_BYTES (the core's) and a payload of any size.
 * Bounce path: fragments of at most 256 KiB, copied into registered buffers on both sides; the
 * receiving side hands every fragment, in the order sent, to the sink's deliver callback.
 * Direct path (a put the core allows it for, at least RMA_DIRECT_MIN bytes, on a plugin with
 * BRAID_NET_PTR_HOST_ANY, or on one that registers host memory (IB) when the source lies in a
 * window the core named): the header goes alone, the sink's place callback says where the
 * payload lands (and holds that memory), the payload is sent from the caller's buffer and
 * received there, then landed is called. On a plugin without HOST_ANY both ends register the
 * window (per connection, once: a cache keyed by the window's span) and the core drops those
 * registrations with braid_rma_win_drop before the window's memory can go (deregistration);
 * any other source goes by the bounce path, so no registration outlives its memory. Messages from one peer are handled
 * in the order they were sent (one plugin connection, whose requests complete in order): a later message is not handled
 * before an earlier direct put's landed. braid_rma_send returns once the plugin has completed every send (the payload
 * is no longer read). A peer whose connection breaks is failed: its sends and polls return ncclRemoteError and
 * braid_rma_peer_error says why.
 */
#ifndef BRAID_RMA_H
#define BRAID_RMA_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define BRAID_RMA_HDR_BYTES 48
#define BRAID_RMA_ADDR_BYTES 136
#define BRAID_RMA_DIRECT_MIN (64u << 10) /* smaller puts go inline: one message */

struct braid_rma;

/* A registered window's memory: what a direct put's registrations are keyed by. */
struct braid_rma_span {
  void* base;
  size_t size;
};

/* What a receiver tells one sender (allgathered by the core). */
struct braid_rma_addr {
  unsigned char data[BRAID_RMA_ADDR_BYTES];
};

/* One fragment of a message from `peer`: its header, where the fragment starts in the
 * payload, the fragment, and whether it is the message's last. An error fails the peer. */
typedef ncclResult_t (*braid_rma_deliver_fn)(void* arg, int peer, const void* hdr, uint64_t frag_off, const void* data,
                                             size_t len, int last);

/* What the core does with what arrives (see above). place: where a direct put of `bytes`
 * lands (host memory) and the window that holds it (*win), held until landed (an error fails
 * the peer); landed: ok = 1 when every byte arrived, 0 when the peer failed first (release
 * only). */
struct braid_rma_sink {
  braid_rma_deliver_fn deliver;
  ncclResult_t (*place)(void* arg, int peer, const void* hdr, size_t bytes, void** dst, struct braid_rma_span* win);
  void (*landed)(void* arg, int peer, const void* hdr, int ok);
  void* arg;
};

/* remote[r] != 0: rank r may get a connection. mine[r]: the address rank r connects to. */
ncclResult_t braid_rma_open(const struct braid_transport_ctx* t, const int* remote, const struct braid_rma_sink* sink,
                            struct braid_rma** rma_p, struct braid_rma_addr* mine);
/* theirs[r]: the address rank r made for this rank; nothing connects until used. */
ncclResult_t braid_rma_connect(struct braid_rma* rma, const struct braid_rma_addr* theirs);
/* Send header + payload (host memory) to peer; blocking (BRAID_TIMEOUT, abort flag). direct:
 * the target's memory is host memory too, the payload may go by the direct path. src_win: NULL,
 * or a window of this communicator that holds the payload and stays until braid_rma_win_drop
 * (the caller keeps it from being dropped during the call). */
ncclResult_t braid_rma_send(struct braid_rma* rma, int peer, const void* hdr, const void* data, size_t bytes,
                            int direct, const struct braid_rma_span* src_win);
/* The window at `base` (`size` bytes) goes: drop every registration of it (both ends' caches),
 * after no put from or into it is in flight. NULL rma: nothing. */
void braid_rma_win_drop(struct braid_rma* rma, const void* base, size_t size);
/* What the direct path did (tests): puts sent / received direct, registrations made for
 * sources / targets, and sources served by the cache. */
struct braid_rma_stats {
  uint64_t direct_sent, direct_recv, src_regs, src_hits, dst_regs;
};
void braid_rma_get_stats(const struct braid_rma* rma, struct braid_rma_stats* st);
/* Deliver what has arrived from peer, if nobody else is doing so now. ncclRemoteError when
 * the peer's connection failed or closed. */
ncclResult_t braid_rma_poll(struct braid_rma* rma, int peer);
/* The same, but when nothing has arrived sleep until the plugin's descriptors say something
 * may have (at most timeout_us): a waiter that spins loses its CPU on a loaded machine. */
ncclResult_t braid_rma_wait(struct braid_rma* rma, int peer, int timeout_us);
/* ncclSuccess, or why peer's connections are unusable (*why: a sentence). */
ncclResult_t braid_rma_peer_error(struct braid_rma* rma, int peer, const char** why);
/* Bytes of buffers the channels hold (memory statistics); connections made (send and
 * receive sides); the plugin's name. */
size_t braid_rma_bytes(const struct braid_rma* rma);
int braid_rma_connections(const struct braid_rma* rma);
const char* braid_rma_net_name(const struct braid_rma* rma);
/* Tear down (after this no callback runs). Safe on a half-built one and NULL. */
void braid_rma_close(struct braid_rma* rma);

#endif /* BRAID_RMA_H */
