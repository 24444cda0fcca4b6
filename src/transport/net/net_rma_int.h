/*
 * net_rma_int.h - what the three parts of the one-sided channels share (transport/rma.h):
 * net_rma.c (setup on first use, failure, teardown), net_rma_recv.c (the receive side and its
 * progress-engine item), net_rma_send.c (the send side).
 *
 * Wire: every message of a pair's one connection is either a frame (a 64-byte header: where
 * it starts in its message's payload, its length, flags, the core's header; then up to
 * RMA_FRAG_PAYLOAD bytes) or a chunk of a direct put (raw bytes, at most RMA_CHUNK_BYTES).
 * A frame flagged RMA_F_DIRECT carries no payload: the put's `frag_off` bytes follow as
 * chunks, sent from the origin's buffer and received in the target's window. A bounce frame's
 * flags say how many frames of its message follow it (RMA_F_MORE_SHIFT): a receiver that
 * cannot tell a frame from a chunk in advance (onecopy) posts that many frame receives ahead.
 * Plugins without HOST_ANY (IB) send and receive chunks with a registration of the whole
 * window (struct rma_reg, RMA_NREGS per connection side, least recently used goes).
 */
#ifndef BRAID_NET_RMA_INT_H
#define BRAID_NET_RMA_INT_H

#include <pthread.h>

#include "transport/net/net_internal.h"
#include "transport/progress.h"
#include "transport/rma.h"

#define RMA_FRAG_BYTES (256u << 10)
#define RMA_NRECV 4 /* frames kept posted (bounce path) / chunks in flight (direct) */
#define RMA_NSEND 2 /* bounce slots of a sender */
#define RMA_NSEND_DIRECT 4
#define RMA_CHUNK_BYTES (4u << 20)
#define RMA_DIRECT_MIN BRAID_RMA_DIRECT_MIN
#define RMA_QMAX 8              /* receives one peer has posted */
#define RMA_ACCEPT_POLL_MS 5    /* how often the engine looks for a peer's first connect */
#define RMA_DRIVEN_NS 2000000LL /* a receive side a waiter moved this recently is the waiter's */

#define RMA_NREGS 8 /* window registrations a connection side keeps (plugins without HOST_ANY) */

enum { RMA_F_LAST = 1, RMA_F_DIRECT = 2 };
#define RMA_F_MORE_SHIFT 8 /* flags >> this: frames of the same message after this one */
#define RMA_F_MORE_MAX 0xffffffu

struct rma_frame {
  uint64_t frag_off; /* RMA_F_DIRECT: the put's bytes */
  uint32_t len, flags;
  unsigned char hdr[BRAID_RMA_HDR_BYTES];
};
#define RMA_FRAG_PAYLOAD (RMA_FRAG_BYTES - sizeof(struct rma_frame))

enum { PEER_OK = 0, PEER_FAILED, PEER_CLOSED };
enum { RQ_FRAME = 0, RQ_CHUNK = 1 };

struct rma_rq { /* one posted receive */
  void* req;
  int kind, last; /* RQ_*; RQ_CHUNK: the put's last chunk */
  int slot;       /* RQ_FRAME: its slot of recv_buf */
};

struct rma_reg { /* a window registered with one comm (send side: sources; receive side: targets) */
  char* base;
  size_t size;
  void* mh; /* NULL: free */
  uint64_t used;
};

struct rma_peer {
  int remote;
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE]; /* theirs: what our send comm connects to */
  int handle_dev, has_handle;
  void *listen_comm, *send_comm, *recv_comm;
  void *send_mh, *recv_mh;
  char *send_buf, *recv_buf;
  int nrslots; /* bounce frames of recv_buf: RMA_NRECV, or 1 on a HOST_ANY plugin */
  /* receive queue, in posting order (recv_lock) */
  struct rma_rq rq[RMA_QMAX];
  uint64_t rposted, rdone, frames_posted, frames_done;
  uint64_t known_end; /* onecopy: messages before this (posting sequence) are known to be frames */
  size_t dleft;       /* a direct put being received: bytes not yet posted, where they go */
  char* ddst;
  void* dmh;                                         /* and the registration its chunks are received with */
  struct rma_reg sregs[RMA_NREGS], dregs[RMA_NREGS]; /* send_lock / recv_lock; no HOST_ANY */
  uint64_t reg_clock;
  int dheld; /* place() holds its window until landed() */
  unsigned char dhdr[BRAID_RMA_HDR_BYTES];
  pthread_mutex_t send_lock, recv_lock;
  int state;      /* PEER_* (atomic) */
  int64_t driven; /* (atomic) when a waiter last moved it: the engine leaves it to the waiter */
  char why[400];
};

struct braid_rma {
  const struct braid_transport_ctx* t;
  const struct braid_net_v1* net;
  struct net_ctx* ctx;
  int dev, added;
  int direct;                   /* the plugin sends from / receives into any host address (HOST_ANY) */
  int onecopy;                  /* direct puts: HOST_ANY, or a plugin that registers host memory (windows) */
  struct braid_rma_stats stats; /* (atomic fields) */
  struct braid_rma_sink sink;
  struct rma_peer* peers; /* [nranks] */
  int64_t next_accept;    /* the engine's next look for connects (progress clock, ns) */
  struct braid_progress_item item;
};

void rma_peer_fail(struct braid_rma* rma, int r, void* comm, ncclResult_t res, const char* doing);
/* The receive side of peer r, accepted if its origin connected (caller holds recv_lock). 1 when
 * it exists. */
int rma_recv_ready(struct braid_rma* rma, int r);
/* The send side of peer r: connect and set up on first use (caller holds send_lock; bounded by
 * BRAID_TIMEOUT and the abort flag through rma_send_wait). */
ncclResult_t rma_send_ready(struct braid_rma* rma, int r, int64_t start);
/* Between two tries of a send: abort flag, peer failure, BRAID_TIMEOUT (0: none). */
ncclResult_t rma_send_wait(struct braid_rma* rma, int r, int64_t start, unsigned* tries);
/* The registration of window `win` with comm in regs (made on a miss, evicting the least
 * recently used); *hit: 1 when the cache had it. */
ncclResult_t rma_reg_get(struct braid_rma* rma, void* comm, struct rma_peer* p, struct rma_reg* regs,
                         const struct braid_rma_span* win, void** mh, int* hit);
/* Deregister regs' entries for [base, base + size) (size 0: all of them). */
void rma_reg_drop(struct braid_rma* rma, void* comm, struct rma_reg* regs, const void* base, size_t size);
/* Release what a direct put being received holds (a failed or closed peer). */
void rma_recv_drop(struct braid_rma* rma, int r);

extern const struct braid_progress_ops braid_rma_progress_ops;

#endif /* BRAID_NET_RMA_INT_H */
