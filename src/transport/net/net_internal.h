/*
 * net_internal.h - shared by the network transport's files: net.c (the transport vtable:
 * setup, connect, free), net_proxy.c (moving steps: the transport's `progress` and `wait` on
 * the progress engine, the executor's kicks, failure reports), net_plugin.c (which net
 * plugin: NCCL_NET, NCCL_NET_PLUGIN).
 *
 * Each end of a network connection owns a local FIFO laid out as usual (control block, then
 * buffers), except that one buffer of NSTEPS equal slots serves every protocol: the
 * receiving end cannot know which protocol the next step uses, so a step must land where the
 * executor will look whatever it is. The executor fills and drains that FIFO as for any
 * connection; the proxy mirrors it over the net plugin:
 *   send end: steps [posted, tail) are isend (sizes[slot] bytes, from ctrl->ptrs[slot] when
 *             the executor published a direct step, kernels/direct.h, else from the slot);
 *             when a send completes, ptrs[slot] = 0 and head = done, which hands the slot
 *             back to the executor and tells it the source is no longer read;
 *   recv end: irecvs are posted into the free slots [posted, head + NSTEPS); when one
 *             completes, sizes[slot] = the bytes received and tail = done. On an rdirect
 *             connection (host mode) only up to ctrl->want, the steps the executor declared,
 *             each into ptrs[slot] (sizes[slot] bytes: user memory) or, where that is 0, its
 *             slot (kernels/direct.h).
 * "The proxy" is whoever holds the connection's lock: the progress engine's thread, or in
 * host mode the executor itself, which moves its own connections from braid_conn.host_kick
 * when it publishes, releases or waits (no thread hand-off on the critical path).
 */
#ifndef BRAID_NET_INTERNAL_H
#define BRAID_NET_INTERNAL_H

#include <pthread.h>

#include "transport/net/net.h"
#include "transport/net/net_prof.h"
#include "transport/transport.h"

enum net_state {
  NET_STATE_SETUP = 0,   /* not connected yet: the engine does not know it */
  NET_STATE_ACTIVE,      /* moved by the proxy */
  NET_STATE_PEER_CLOSED, /* the peer finished and closed it (not an error by itself) */
  NET_STATE_FAILED,      /* broken; the communicator's abort flag is (being) raised */
};

struct net_ctx; /* a communicator's plugin context (net.c) */

/* One end of a network connection: the connector's `res`. */
struct net_res {
  const struct braid_transport_ctx* tctx; /* the communicator, as transports see it */
  struct braid_connector* connector;      /* whose res this is */
  struct net_ctx* ctx;
  const struct braid_net_v1* net;
  int is_send, peer, channel, conn_index, dev;
  int ptr_support; /* the device's BRAID_NET_PTR_* (getProperties) */
  char desc[40];   /* "Socket/0" */
  char* mem;       /* control block + buffer, page aligned; the host's address */
  int device;      /* a device communicator's: pinned and mapped (host_alloc), moved
                      by the engine thread alone (kernels cannot kick) */
  int rdirect;     /* receive end: receives are posted only for the steps the
                      executor declared (ctrl->want), where it said (braid_conn.rdirect) */
  int gdr;         /* GPUDirect RDMA (net_gdr.h): the buffer is device memory (`buff`, the
                      device's address), registered as BRAID_NET_PTR_CUDA; ctrl stays pinned */
  int flush;       /* receive end with gdr: each step is flushed (iflush) before tail moves */
  size_t mem_bytes;
  struct braid_conn_ctrl* ctrl;
  char* buff; /* NSTEPS slots of `stride` bytes */
  size_t stride;
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE]; /* recv: ours; send: the receiver's */
  void* listen_comm;
  void* net_comm;
  void* mhandle;
  /* Moved by whoever holds `lock`: the engine thread, or the executor through host_kick. */
  pthread_mutex_t lock;
  uint64_t posted, done;
  void* reqs[BRAID_NSTEPS];
  void* flush_req; /* the flush of step `done`, in flight */
  size_t flush_got;
  ncclResult_t err; /* a request failed: reported outside the lock */
  const char* err_doing;
  int state;        /* enum net_state (atomic) */
  int reported;     /* (atomic) the failure was reported (once, by whoever saw it first) */
  int64_t kicked;   /* (atomic) when the executor last moved it */
  int polled;       /* (atomic) the sleeping engine polls its descriptors */
  int quiet;        /* (atomic) host receive connection whose last test by the engine found
                       nothing: the engine leaves it alone until poll() sees its descriptors
                       ready or an executor moves it (net_proxy.c) */
  char reason[160]; /* why it failed or closed */
  /* Profiler (net_prof.c), under `lock`: the tasks' shares queued by the core, in step order
   * (NULL without a profiler: one branch per step), and the open ProxyStep of each slot. */
  struct braid_prof_op* prof_head;
  struct braid_prof_op* prof_step_op[BRAID_NSTEPS];
  uint64_t prof_step_no[BRAID_NSTEPS];
  struct braid_net_prof_step prof_step[BRAID_NSTEPS];
};

/* net_plugin.c: the network every connection of this process uses, chosen once (logs
 * `NET/Plugin: ...` and `Using network Socket`). */
ncclResult_t braid_net_plugin_get(const struct braid_net_v1** net_p);
/* Test hook (tests/unit/test_net.c, caps): this process's later connections use `net`
 * (initialised here), as if it had been chosen; NULL forgets the choice. */
ncclResult_t braid_net_plugin_use(const struct braid_net_v1* net);

/* net.c: a communicator's plugin context, shared by its connections and its one-sided
 * channels (net_rma.c); opened by the first get, closed by the last put. */
ncclResult_t braid_net_ctx_get(const struct braid_transport_ctx* t, const struct braid_net_v1* net,
                               struct net_ctx** ctx_p);
void braid_net_ctx_put(struct net_ctx* x);
void* braid_net_ctx_plugin(const struct net_ctx* x);

/* net_proxy.c: moving a connection. */
/* Hand a connected end to the progress engine (state ACTIVE) / take it back: after remove
 * nothing moves it any more. */
ncclResult_t braid_net_proxy_add(struct net_res* r);
void braid_net_proxy_remove(struct net_res* r);
/* The transport's `progress` and `wait` slots. */
int braid_net_progress(struct braid_connector* c, int64_t now, unsigned flags);
void braid_net_wait(struct braid_connector* c, int64_t now, struct braid_progress_wait* w);
/* braid_conn.host_kick of net connections: move this connection now if nobody else is, and
 * wake a sleeping engine thread that must take over what is left. */
void braid_net_kick_conn(struct braid_conn* c);
/* braid_conn.host_abandon: the executor gave up while a receive into user memory may be in
 * flight; stop the connection for good (after return nothing moves it). */
void braid_net_abandon_conn(struct braid_conn* c);
/* The transport's prof_drain slot (net_prof.h has prof_push). */
int braid_net_prof_drain(struct braid_connector* c, int cancel);

#endif /* BRAID_NET_INTERNAL_H */
