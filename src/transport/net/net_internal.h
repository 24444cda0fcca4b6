/*
 * net_internal.h - shared by the network transport's files: net.c (the transport vtable:
 * setup, connect, free), net_proxy.c (the proxy thread, moving steps), net_watch.c (the
 * watchdog), net_plugin.c (which net plugin: NCCL_NET, NCCL_NET_PLUGIN).
 *
 * Each end of a network connection owns a local FIFO (DESIGN.md section 4) laid out as
 * usual (control block, then buffers), except that one buffer of NSTEPS equal slots serves
 * every protocol: the receiving end cannot know which protocol the next step uses, so a step
 * must land where the executor will look whatever it is. The executor fills and drains that
 * FIFO as for any connection; the proxy mirrors it over the net plugin:
 *   send end: steps [posted, tail) are isend (sizes[slot] bytes, from ctrl->ptrs[slot] when
 *             the executor published a direct step, kernels/direct.h, else from the slot);
 *             when a send completes, ptrs[slot] = 0 and head = done, which hands the slot
 *             back to the executor and tells it the source is no longer read;
 *   recv end: irecvs are posted into the free slots [posted, head + NSTEPS); when one
 *             completes, sizes[slot] = the bytes received and tail = done. On an rdirect
 *             connection (host mode) only up to ctrl->want, the steps the executor declared,
 *             each into ptrs[slot] (sizes[slot] bytes: user memory) or, where that is 0, its
 *             slot (kernels/direct.h).
 * "The proxy" is whoever holds the connection's lock: the proxy thread, or in host mode the
 * executor itself, which moves its own connections from braid_conn.host_kick when it
 * publishes, releases or waits (no thread hand-off on the critical path).
 */
#ifndef BRAID_NET_INTERNAL_H
#define BRAID_NET_INTERNAL_H

#include "core/comm.h"
#include "transport/net/net.h"
#include "transport/transport.h"

enum net_state {
  NET_STATE_SETUP = 0,   /* not connected yet: the proxy does not know it */
  NET_STATE_ACTIVE,      /* moved by the proxy */
  NET_STATE_PEER_CLOSED, /* the peer finished and closed it (not an error by itself) */
  NET_STATE_FAILED,      /* broken; the communicator's abort flag is (being) raised */
};

struct net_ctx; /* a communicator's plugin context (net.c) */

/* One end of a network connection: the connector's `res`. */
struct net_res {
  struct net_res* next; /* the proxy's list (proxy lock) */
  struct braid_comm* comm;
  struct net_ctx* ctx;
  const struct braid_net_v1* net;
  int is_send, peer, channel, conn_index, dev;
  char desc[40]; /* "Socket/0" */
  char* mem;     /* control block + buffer, page aligned; the host's address */
  int device;    /* a device communicator's: pinned and mapped (host_alloc), moved
                    by the proxy thread alone (kernels cannot kick) */
  int rdirect;   /* receive end: receives are posted only for the steps the
                    executor declared (ctrl->want), where it said (braid_conn.rdirect) */
  size_t mem_bytes;
  struct braid_conn_ctrl* ctrl;
  char* buff; /* NSTEPS slots of `stride` bytes */
  size_t stride;
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE]; /* recv: ours; send: the receiver's */
  void* listen_comm;
  void* net_comm;
  void* mhandle;
  /* Moved by whoever holds `lock`: the proxy thread, or the executor through host_kick. */
  pthread_mutex_t lock;
  uint64_t posted, done;
  void* reqs[BRAID_NSTEPS];
  ncclResult_t err; /* a request failed: reported outside the lock */
  const char* err_doing;
  int state;                /* enum net_state (atomic) */
  int64_t kicked;           /* (atomic) when the executor last moved it */
  int polled;               /* (atomic) the sleeping proxy polls its descriptors */
  int quiet;                /* (atomic) host receive connection whose last test by the proxy
                               found nothing: the proxy leaves it alone until poll() sees its
                               descriptors ready or an executor moves it (net_proxy.c) */
  int pfd_first, pfd_count; /* its entries in the proxy's poll set (proxy lock) */
  char reason[160];         /* why it failed or closed */
};

/* net_watch.c: the watchdog's view of one communicator (all under the proxy lock). */
struct braid_watch_peer {
  int local; /* a process of this machine and pid namespace: liveness is checkable */
  int pid;
  unsigned long long start; /* its start time (/proc), to notice a reused pid; 0 unknown */
  int64_t dead_seen;        /* when first seen dead (0: alive): the earliest death is the cause */
};
struct braid_watch {
  struct braid_watch* next;
  struct braid_comm* comm;
  struct braid_watch_peer* peers;  /* [nranks] */
  int busy;                        /* a collective was in flight at the last tick */
  uint64_t sig;                    /* progress signature (sum of FIFO counters) at the last tick */
  int64_t still_since;             /* when it last changed, or the collective was first seen */
  int64_t busy_since;              /* when the current collective was first seen */
  struct braid_watch_track* track; /* per connection, in visit order: when it last moved */
  int ntrack, captrack;
};
struct braid_watch_track {
  const struct braid_conn* conn;
  uint64_t counters; /* tail + head at the last tick */
  int64_t moved;     /* when they last changed (0: not seen to change) */
};
ncclResult_t braid_watch_new(struct braid_comm* comm, struct braid_watch** w_p);
void braid_watch_free(struct braid_watch* w);
/* Every WATCH_TICK_MS: stalls, dead peers, BRAID_TIMEOUT. */
void braid_watch_tick(struct braid_watch* list, int64_t now);
/* The peer of `comm` on this machine seen dead first (checked again now), or -1. */
int braid_watch_dead_peer(struct braid_watch* list, const struct braid_comm* comm);

/* net_plugin.c: the network every connection of this process uses, chosen once (logs
 * `NET/Plugin: ...` and `Using network Socket`). */
ncclResult_t braid_net_plugin_get(const struct braid_net_v1** net_p);

/* net_proxy.c: the proxy thread serves every active connection of the process. */
ncclResult_t braid_proxy_add(struct net_res* r); /* starts the thread for the first user */
void braid_proxy_remove(struct net_res* r);      /* after return the proxy never touches r */
/* braid_conn.host_kick of net connections: move this connection now if nobody else is, and
 * wake a sleeping proxy thread that must take over what is left. */
void braid_proxy_kick_conn(struct braid_conn* c);
/* braid_conn.host_abandon: the executor gave up while a receive into user memory may be in
 * flight; stop the connection for good (after return nothing moves it). */
void braid_proxy_abandon_conn(struct braid_conn* c);
/* Fail a communicator: the first caller's message becomes comm->abort_reason and a WARN;
 * the abort flag carries `status` (enum braid_exec_status), async_error `res`. */
void braid_proxy_raise(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* "rank 3 (host node1, pid 1234)": how messages name a peer. buf: at least 160 bytes. */
const char* braid_proxy_peer_name(const struct braid_comm* comm, int peer, char* buf, size_t len);

#endif /* BRAID_NET_INTERNAL_H */
