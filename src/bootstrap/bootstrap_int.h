/*
 * bootstrap_int.h - what bootstrap.c (init, split, the operations, the outgoing side),
 * bootstrap_conn.c (the incoming side) and bootstrap_service.c (the thread that serves
 * listeners nobody waits on) share: the state of a rank's bootstrap.
 *
 * Locks: bs->lock guards the incoming side (pending, active, peers[].in/watch, the queue,
 * nwaiters); peers[r].out_lock one writer of peers[r].out. The service thread takes the
 * service lock, then tries bs->lock (never waits for it: a waiter holding it serves the
 * bootstrap itself).
 */
#ifndef BRAID_BOOTSTRAP_INT_H
#define BRAID_BOOTSTRAP_INT_H

#define BRAID_BOOTSTRAP_INTERNAL
#include <poll.h>
#include <pthread.h>

#include "bootstrap/bootstrap.h"

#define NS_PER_MS 1000000LL
/* The largest payload of one message: the senders' limit, and past it a header is malformed
 * and its connection dropped (the payload buffer grows with the bytes that really come). */
#define BS_MSG_MAX (1ULL << 30)

enum bs_kind {
  BS_KIND_USER = 1,   /* braid_bootstrap_send/recv */
  BS_KIND_RING,       /* init's ring token */
  BS_KIND_ALLGATHER,  /* tag: sequence number */
  BS_KIND_BARRIER,    /* tag: sequence number << 6 | round */
  BS_KIND_SPLIT_UP,   /* split: entries to the new rank 0; tag: the split's */
  BS_KIND_SPLIT_DOWN, /* split: secret + table from the new rank 0 */
  BS_KIND_NOTICE,     /* why a rank's communicator failed (bootstrap_notice.c); tag 0 */
};

struct bs_hdr {
  uint32_t kind;
  uint32_t pad;
  uint64_t tag;
  uint64_t size; /* payload bytes that follow */
};

/* A message received before anyone asked for it. */
struct bs_msg {
  struct bs_msg* next;
  int peer;
  uint32_t kind;
  uint64_t tag;
  uint64_t size;
  char* data;
};

/* A connection accepted on our listener. */
struct bs_in {
  struct bs_in* next; /* in bs->pending, then in bs->active */
  struct braid_socket sock;
  int peer;            /* -1 until the handshake is read */
  int64_t hs_deadline; /* the handshake must be complete by then */
  struct bs_peer_hello hello;
  struct bs_hdr hdr; /* the message being read */
  char* payload;     /* its payload: cap bytes so far, growing to hdr.size as bytes come */
  size_t cap;
  int in_payload; /* the header is complete */
  size_t off;     /* bytes of the current part read */
  int closed;     /* EOF or error: nothing more will come */
  enum braid_socket_fail fail;
};

struct bs_peer {
  pthread_mutex_t out_lock;  /* one writer (and connect) at a time */
  struct braid_socket out;   /* ours to it (out_lock); out.fail: why it broke */
  int out_broken;            /* connect failed or a send broke the stream (out_lock) */
  struct braid_socket watch; /* copy of out once connected, not owned (bs->lock) */
  int out_dead;              /* it refused us or closed `out` (bs->lock) */
  int64_t out_dead_ns;
  enum braid_socket_fail out_fail;
  struct bs_in* in;     /* its connection to us (bs->lock) */
  int64_t gone_seen_ns; /* when a death check first found it gone, 0: not yet (bs->lock) */
};

struct braid_bootstrap {
  int rank, nranks;
  uint64_t secret;
  uint64_t nonce;         /* this bootstrap's, in its table entry: proves a connection is this rank's */
  struct bs_entry* table; /* every rank's address, host and nonce */
  int ready;              /* table filled: handshakes can be checked (bs->lock) */
  struct braid_socket listener;
  int64_t accept_after;          /* out of descriptors: accept again from then on (bs->lock) */
  volatile uint32_t* abort_flag; /* the caller's, may be NULL */
  volatile uint32_t abort;       /* braid_bootstrap_abort */
  int64_t deadline;              /* braid_bootstrap_set_deadline, 0: none */
  int timeout_peer;              /* the last peer a wait timed out on, -1: none (atomic) */
  pthread_mutex_t lock;
  struct bs_in* pending; /* accepted, handshake not complete; newest first */
  int npending, max_pending;
  struct bs_in* active; /* identified incoming connections */
  struct bs_peer* peers;
  struct bs_msg* queue;
  struct bs_msg** queue_tail;
  int nwaiters;                   /* threads polling its sockets now: the service leaves it to them */
  braid_bootstrap_death_fn watch; /* braid_bootstrap_watch (service lock) */
  void* watch_arg;
  uint64_t ag_seq, bar_seq; /* collective sequence numbers */
};

/* bootstrap.c */
int bs_aborted(const struct braid_bootstrap* bs);
extern __thread int bs_ignore_abort; /* this thread's sends and waits ignore the abort flags */
/* One message to peer (deadline 0: the bootstrap's); connects on first use. */
ncclResult_t bs_send(struct braid_bootstrap* bs, int peer, uint32_t kind, uint64_t tag, const void* data, size_t size,
                     int64_t deadline);

/* bootstrap_conn.c: the incoming side, bs->lock held unless said otherwise. */
void bs_in_free(struct bs_in* in);
/* Accept, handshakes, reads of identified connections. Never blocks. */
ncclResult_t bs_progress(struct braid_bootstrap* bs);
/* What a waiter polls: the listener (unless backing off), pending and active connections,
 * and one extra fd (-1: none). Returns the count, -1 when out of memory. */
int bs_pollset(struct braid_bootstrap* bs, struct pollfd** fds_p, int* cap_p, int extra_fd, short extra_events);
struct bs_msg* bs_queue_take(struct braid_bootstrap* bs, int peer, uint32_t kind, uint64_t tag);

/* For the service thread (service lock held, bs->lock not): serve a bootstrap nobody waits on
 * (accept, handshakes, their deadlines) and, while watched, return a rank whose connection
 * closed (-1: none); append the descriptors to poll for it, earliest deadline in *wake_ns. */
int bs_service_pass(struct braid_bootstrap* bs);
int bs_service_fds(struct braid_bootstrap* bs, struct pollfd** fds_p, int* cap_p, int n, int64_t* wake_ns);

/* bootstrap_service.c: the process's service thread, started with the first bootstrap. */
ncclResult_t bs_service_add(struct braid_bootstrap* bs);
void bs_service_remove(struct braid_bootstrap* bs); /* after return the thread never touches bs */
void bs_service_watch(struct braid_bootstrap* bs, braid_bootstrap_death_fn fn, void* arg);

#endif /* BRAID_BOOTSTRAP_INT_H */
