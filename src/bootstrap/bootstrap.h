/*
 * bootstrap.h - rendezvous of the ranks of a communicator from an ncclUniqueId, and the
 * out-of-band operations among them (allgather, barrier, tagged send/recv) that init and the
 * transports use before, and beside, the data path. TCP only (socket.h).
 *
 * bootstrap_root.c: the unique id, the root thread, and a rank's exchange with its root.
 * bootstrap.c: init, split, and the connections among ranks. The protocol is described at
 * the top of each.
 *
 * Threads: send, recv, peer_host, secret and abort may be called from several threads at
 * once; allgather and barrier by one thread at a time (each call is matched by sequence
 * number with the same call on the other ranks); close by one thread when no other call runs.
 */
#ifndef BRAID_BOOTSTRAP_H
#define BRAID_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/socket.h"
#include "nccl.h"

struct braid_bootstrap; /* opaque */

/* The id's secret when it came from NCCL_COMM_ID (no random secret can be agreed on). */
#define BRAID_BOOTSTRAP_COMM_ID_MAGIC 0x0280028002800280ULL

/* ncclGetUniqueId's work: start a detached root thread in this process listening on the
 * bootstrap interface, or with NCCL_COMM_ID only encode that address (rank 0 hosts the root
 * inside braid_bootstrap_init). Layout: bytes 0-7 the secret (random, or the magic above),
 * then the root's sockaddr_in / sockaddr_in6, the rest zero. */
ncclResult_t braid_bootstrap_get_unique_id(ncclUniqueId* id);

/* Rendezvous of nranks ranks; returns once every rank's address is known and the ring is
 * connected. ids/nids: the roots (nids == 1 usually; ncclCommInitRankScalable passes several:
 * rank r talks to root floor(r * nids / nranks)). abort_flag (may be NULL): when it becomes
 * non-zero, ncclInvalidUsage. After BRAID_INIT_TIMEOUT seconds without all ranks: every
 * waiting rank fails with ncclRemoteError and a WARN naming the ranks that never came. */
ncclResult_t braid_bootstrap_init(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                  volatile uint32_t* abort_flag, struct braid_bootstrap** bs_p);
/* A communicator made from an existing one (split, shrink): called by the parent ranks that
 * take part, and only them. parent_ranks[i]: the parent rank of new rank i; `tag` tells
 * concurrent splits of one parent apart. Addresses travel over the parent's send/recv. The
 * child watches no external abort flag until braid_bootstrap_set_abort_flag. */
ncclResult_t braid_bootstrap_split(struct braid_bootstrap* parent, int rank, int nranks, const int* parent_ranks,
                                   uint64_t tag, struct braid_bootstrap** bs_p);
/* all: nranks * size bytes, this rank's slot filled; on return every slot is. */
ncclResult_t braid_bootstrap_allgather(struct braid_bootstrap* bs, void* all, size_t size);
ncclResult_t braid_bootstrap_barrier(struct braid_bootstrap* bs);
/* The same, every wait bounded by this CLOCK_MONOTONIC deadline (ns; 0: the bootstrap's, see
 * braid_bootstrap_set_deadline) instead of the bootstrap-wide one, so that a collective step
 * after init (window registration, suspend) is bounded without bounding other threads' waits.
 * A peer whose connection closes fails the wait at once; a failed allgather WARNs, after the
 * wait's own WARN, the ranks whose data never came, prefixed with `what` (NULL: "Bootstrap"). */
ncclResult_t braid_bootstrap_allgather_until(struct braid_bootstrap* bs, void* all, size_t size, int64_t deadline,
                                             const char* what);
ncclResult_t braid_bootstrap_barrier_until(struct braid_bootstrap* bs, int64_t deadline);
/* Tagged messages to any rank (itself included). A recv takes the oldest message of that peer
 * and tag; messages of other tags wait in a queue. The sizes of a send and its recv must agree
 * (else ncclInvalidUsage). A peer that dies: ncclRemoteError naming its rank and host. */
ncclResult_t braid_bootstrap_send(struct braid_bootstrap* bs, int peer, uint64_t tag, const void* data, size_t size);
ncclResult_t braid_bootstrap_recv(struct braid_bootstrap* bs, int peer, uint64_t tag, void* data, size_t size);
/* The same, bounded by deadline (ns; 0: the bootstrap's) as the _until collectives above. */
ncclResult_t braid_bootstrap_send_until(struct braid_bootstrap* bs, int peer, uint64_t tag, const void* data,
                                        size_t size, int64_t deadline);
ncclResult_t braid_bootstrap_recv_until(struct braid_bootstrap* bs, int peer, uint64_t tag, void* data, size_t size,
                                        int64_t deadline);

int braid_bootstrap_rank(const struct braid_bootstrap* bs);
int braid_bootstrap_nranks(const struct braid_bootstrap* bs);
/* Hostname and bootstrap address of a rank, for messages ("unknown" / NULL out of range). */
const char* braid_bootstrap_peer_host(struct braid_bootstrap* bs, int rank);
const union braid_sockaddr* braid_bootstrap_peer_addr(struct braid_bootstrap* bs, int rank);
/* The secret of the id (split: chosen by the new rank 0); later handshakes use it. */
uint64_t braid_bootstrap_secret(struct braid_bootstrap* bs);
/* Replace the external abort flag watched by every wait (NULL: none). */
void braid_bootstrap_set_abort_flag(struct braid_bootstrap* bs, volatile uint32_t* abort_flag);
/* Wake and fail every waiter, from any thread (ncclInvalidUsage). The external flag is not
 * written. */
void braid_bootstrap_abort(struct braid_bootstrap* bs);
/* Every wait of every operation fails (ncclRemoteError, a WARN naming the rank waited for)
 * once this CLOCK_MONOTONIC deadline (ns) has passed; 0: no deadline. Init bounds its
 * allgathers and its last barrier with BRAID_INIT_TIMEOUT this way. */
void braid_bootstrap_set_deadline(struct braid_bootstrap* bs, int64_t deadline);
/* Death watch: until called again with fn NULL, the process's bootstrap service thread calls
 * fn(arg, rank) once, from that thread, when a rank this one has a connection with closes or
 * resets it, or was found refusing connections: it died or gave up. Meant for phases in which
 * no rank may leave (init's connections: a rank waiting there on another transport learns in
 * milliseconds). fn must not call back into the bootstrap. After a call with NULL returns, fn
 * is not running and will not be called. */
typedef void (*braid_bootstrap_death_fn)(void* arg, int rank);
void braid_bootstrap_watch(struct braid_bootstrap* bs, braid_bootstrap_death_fn fn, void* arg);
/* The watch's test, run now by the caller: a rank whose connection with this one closed or
 * broke, or -1 when none is known. */
int braid_bootstrap_dead_peer(struct braid_bootstrap* bs);
/* The last peer a wait of this bootstrap timed out on (its deadline or BRAID_INIT_TIMEOUT), or
 * -1 when none did. */
int braid_bootstrap_timeout_peer(struct braid_bootstrap* bs);
/* Failure notices (bootstrap_notice.c): a rank whose communicator failed tells every other
 * rank why, before it may leave, so that a rank that sees it go can tell "it failed because of
 * someone else" from "it died". tell sends `size` bytes to every peer not known gone, within
 * budget_ms in all, although the abort flags are up; 1 when it reached every peer tried. notice
 * takes peer's notice into data (size bytes): 1 when there is one, waiting up to wait_ms for
 * it while peer's connection to this rank stays open, 0 when none came. */
int braid_bootstrap_tell(struct braid_bootstrap* bs, const void* data, size_t size, int budget_ms);
int braid_bootstrap_notice(struct braid_bootstrap* bs, int peer, void* data, size_t size, int wait_ms);
/* Free everything: sockets, memory. No thread of the bootstrap outlives it. */
void braid_bootstrap_close(struct braid_bootstrap* bs);

#ifdef BRAID_BOOTSTRAP_INTERNAL
/* ---- shared by bootstrap.c and bootstrap_root.c only: the wire format ------------------- */

#define BS_HOST_MAX 64
#define BS_TEXT_MAX 512
#define BS_HANDSHAKE_MS 2000 /* a connection must complete its handshake within this */

/* handshake.arg: what the connecting side is */
enum bs_conn_kind {
  BS_CONN_RANK = 1,  /* a rank, to its root: one bs_up HELLO, then waits for bs_down */
  BS_CONN_RELAY = 2, /* root i > 0, to root 0: a stream of bs_up, then waits for bs_down */
  BS_CONN_PEER = 3,  /* a rank, to another rank: bs_peer_hello, then messages */
};

/* What every rank tells the others about itself. */
struct bs_entry {
  union braid_sockaddr addr; /* its listening socket */
  char host[BS_HOST_MAX];    /* its hostname, for messages */
  uint64_t nonce;            /* random, its connections to other ranks carry it */
};

struct bs_hello {
  int32_t rank, nranks, nroots, iroot;
  uint64_t root0_secret; /* ids[0]: where a relay root sends what it collects */
  union braid_sockaddr root0_addr;
  struct bs_entry entry;
};

enum { BS_UP_HELLO = 1, BS_UP_ERROR = 2 };
/* Toward root 0. */
struct bs_up {
  int32_t what;   /* BS_UP_HELLO or BS_UP_ERROR */
  int32_t result; /* ERROR: the ncclResult_t every rank returns */
  struct bs_hello hello;
  char text[BS_TEXT_MAX]; /* ERROR: the message every rank prints */
};
/* From a root to its ranks (and from root 0 to relays): followed by nranks bs_entry on success. */
struct bs_down {
  int32_t result;
  int32_t nranks;
  char text[BS_TEXT_MAX];
};

/* The first bytes of a connection between ranks. The secret is the communicator's; the nonce
 * the claimed rank's own (its table entry), so a peer that holds the secret but is not that
 * rank (another communicator's rank reusing an NCCL_COMM_ID, a stale process) cannot take its
 * place. */
struct bs_peer_hello {
  struct braid_socket_handshake hs;
  int32_t rank;
  int32_t nranks;
  uint64_t nonce;
};
/* Tests and fuzzers: the hello `bs` sends when it connects to a peer. */
void braid_bootstrap_test_hello(struct braid_bootstrap* bs, struct bs_peer_hello* h);

/* Extra seconds a rank waits past BRAID_INIT_TIMEOUT for its root's verdict. */
static inline int64_t bs_grace_s(int64_t timeout_s) {
  return 1 + timeout_s / 10;
}

void braid_bootstrap_id_decode(const ncclUniqueId* id, uint64_t* secret_p, union braid_sockaddr* addr_p);
ncclResult_t braid_bootstrap_random_secret(uint64_t* secret_p);
void braid_bootstrap_hostname(char* host /* BS_HOST_MAX */);
/* Listen on addr and serve one communicator from a detached thread. */
ncclResult_t braid_bootstrap_root_start(const union braid_sockaddr* addr, uint64_t secret,
                                        union braid_sockaddr* bound_p);
/* A rank's side: hello to its root, the table back (nranks entries). */
ncclResult_t braid_bootstrap_root_exchange(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                           const struct bs_entry* me, volatile uint32_t* abort_flag,
                                           struct bs_entry* table);
#endif /* BRAID_BOOTSTRAP_INTERNAL */

#endif /* BRAID_BOOTSTRAP_H */
