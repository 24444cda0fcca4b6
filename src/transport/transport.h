/*
 * transport.h - the transport boundary (src/transport/README.md). A transport knows how to
 * build one direction of a connection between two ranks: the receiver owns the FIFO memory
 * (control block + one buffer per protocol), the sender gets access to it. Each side runs
 * setup (produces a blob for the peer), the blobs cross over the bootstrap, then connect
 * (consumes the peer's blob). Per peer pair the first transport of the registry
 * (transport/registry.h) whose can_connect says yes wins.
 *
 * Transports see the communicator only through `struct braid_transport_ctx`, which the core
 * (src/core/connect.c) builds: they never include "core/comm.h".
 */
#ifndef BRAID_TRANSPORT_H
#define BRAID_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/work.h"
#include "nccl.h"
#include "transport/progress.h"

struct braid_device_ops;
struct braid_topo_system;
struct braid_channel_graph;
struct braid_transport;

#define BRAID_CONNECT_BLOB_BYTES 256
#define BRAID_HOSTNAME_MAX 64
#define BRAID_CPU_WORDS 16 /* CPUs 0..1023 */

/* What each rank tells the others at init (allgathered by the core). */
struct braid_peer_info {
  int rank;
  int pid;
  uint64_t host_hash;             /* hostname + boot id, or NCCL_HOSTID: equal -> same node */
  uint64_t pid_hash;              /* pid + pid namespace + host: equal -> same process */
  uint64_t shm_dev;               /* st_dev of /dev/shm: equal -> shared memory can connect */
  uint64_t kernel_hash;           /* the running kernel (boot id, else hostname), whatever NCCL_HOSTID
                                     says: equal -> the same machine's cores */
  uint64_t cpus[BRAID_CPU_WORDS]; /* the CPUs this process may run on (sched_getaffinity) */
  uint64_t cma_probe;             /* address of a word holding pid_hash in this process, which a
                                     local peer reads with process_vm_readv (transport/cma.h) */
  int cuda_dev;                   /* -1 in host mode */
  int64_t bus_id;                 /* -1 in host mode */
  int host_mode;
  int version;    /* NCCL_VERSION_CODE */
  int must_agree; /* settings every rank must share (core: BRAID_PEER_AGREE_*), checked at init */
  char hostname[BRAID_HOSTNAME_MAX];
};

struct braid_prof_op; /* transport/prof_op.h */

/* One end of a connection on the host side: the data path's view plus the transport's state. */
struct braid_connector {
  struct braid_conn conn; /* first: a host_kick finds its connector from &conn */
  const struct braid_transport* transport;
  void* res; /* owned by the transport */
  int connected;
  struct braid_progress_item item; /* its place in the progress engine (transports with `progress`) */
  /* Device mode, with a profiler: the steps the launches so far will have moved on this end
   * (the kernels advance conn.step on the device copy only); core/profile_proxy.c. */
  uint64_t prof_next;
  int prof_counted; /* prof_next is set (from conn.step at the first launch counted) */
};

/* Everything a transport may know about the communicator it connects, and nothing more.
 * Built once by the core before the first connection; valid until the last connector of the
 * communicator is freed (transports may keep the pointer in their state). */
struct braid_transport_ctx {
  int rank, nranks;
  int cuda_dev;                          /* this rank's device; -1 in host mode */
  const struct braid_device_ops* device; /* NULL in host mode */
  const struct braid_peer_info* peers;   /* [nranks]: node, process, device of every rank */
  const int* rank_to_node;               /* [nranks]: node index of every rank */
  const struct braid_topo_system* topo;  /* this node's topology; NULL when it is unknown */
  size_t buff_bytes[BRAID_NUM_PROTOS];   /* FIFO bytes per protocol (NCCL_BUFFSIZE, host mode's sizes) */
  uint64_t comm_hash;                    /* the communicator's id in logs and segment names */
  uint64_t secret;                       /* the bootstrap's secret (net plugins tell strangers apart) */
  int traffic_class;                     /* config.trafficClass, -1 when unset */
  const volatile uint32_t* abort_flag;   /* non-zero: stop waiting (connect loops, flushes) */
  /* The core's failure service (core/watchdog.c), for failures a transport detects itself (a
   * broken network connection). `owner` is opaque: pass it back. */
  void* owner;
  /* Fail the communicator: raise the abort flag with `status` (enum braid_exec_status),
   * async error `res`, blaming `peer` (-1: nobody). The first caller's message is the one
   * every later call reports; later ones are dropped. */
  void (*fail)(void* owner, int status, ncclResult_t res, int peer, const char* msg);
  /* The rank on this machine seen dead first (checked again now), or -1. */
  int (*dead_peer)(void* owner);
  /* The rank braid blamed when it failed the communicator, or -1. */
  int (*blamed_peer)(void* owner);
  /* The channels (the NIC each ring uses, transport/net/net_dev.c); NULL when unknown. */
  const struct braid_channel_graph* graph;
};

/* Capabilities of a transport (braid_transport.caps): what the core may rely on. */
enum {
  /* Each end owns its own FIFO and the progress engine moves steps between the two: the
   * transport has `progress`, registers every connected end with the engine and sets
   * conn.wait_tail on both ends; both ends log their connection (NCCL's "[send] via NET/..."
   * and "[receive]" lines, core/connect.c). */
  BRAID_TRANSPORT_CAP_PROXIED = 0x1,
};

/* What one side tells the other to complete a connection. */
struct braid_connect_blob {
  unsigned char data[BRAID_CONNECT_BLOB_BYTES];
};

/* A transport. Every slot is set unless it says "may be NULL". `channel` in setup is the
 * connection's id: channel + connection index * BRAID_MAX_CHANNELS. */
struct braid_transport {
  const char* name;    /* in logs: "via NAME/desc" ("P2P", "SHM", "NET") */
  unsigned caps;       /* BRAID_TRANSPORT_CAP_* */
  uint64_t log_subsys; /* debug subsystem its connection lines add to INIT/P2P (BRAID_LOG_*), or 0 */
  /* 1 when this transport can connect the context's rank to `peer`. Both ends decide alone,
   * so the test must be symmetric. */
  int (*can_connect)(const struct braid_transport_ctx* ctx, int peer);
  /* Sender side: prepare, describe yourself to the receiver. */
  ncclResult_t (*send_setup)(const struct braid_transport_ctx* ctx, int peer, int channel, struct braid_connector* c,
                             struct braid_connect_blob* out);
  /* Receiver side: allocate the FIFO, describe it to the sender. */
  ncclResult_t (*recv_setup)(const struct braid_transport_ctx* ctx, int peer, int channel, struct braid_connector* c,
                             struct braid_connect_blob* out);
  /* Sender side: map the receiver's FIFO; fills c->conn. */
  ncclResult_t (*send_connect)(const struct braid_transport_ctx* ctx, struct braid_connector* c,
                               const struct braid_connect_blob* peer);
  /* Receiver side: finish with the sender's blob; fills c->conn. */
  ncclResult_t (*recv_connect)(const struct braid_transport_ctx* ctx, struct braid_connector* c,
                               const struct braid_connect_blob* peer);
  /* Release everything of one side; safe on a half-built connector. */
  void (*send_free)(struct braid_connector* c);
  void (*recv_free)(struct braid_connector* c);
  /* May be NULL: how a connected end reaches its peer, the text after "via NAME/" in the
   * connection's INFO line ("IPC", "direct pointer", "Socket/0", ...). */
  const char* (*desc)(const struct braid_connector* c);
  /* The host's view of a connected end's control block (tail, head: struct braid_conn_ctrl),
   * for the watchdog on any communicator, host or device; NULL when the host cannot read it
   * (a P2P FIFO in a real GPU's memory). */
  const volatile struct braid_conn_ctrl* (*host_ctrl)(const struct braid_connector* c);
  /* May be NULL (connections that the data path's own loads and stores move: shm, p2p).
   * Proxied transports (BRAID_TRANSPORT_CAP_PROXIED): move this end's steps now if nobody else
   * is, never blocking; the progress engine calls it for every connector the transport
   * registered (braid_progress_add_conn). `flags`: BRAID_PROGRESS_WOKEN when poll() reported
   * one of its descriptors since the last call. Returns BRAID_PROGRESS_MOVED / _BUSY bits. */
  int (*progress)(struct braid_connector* c, int64_t now, unsigned flags);
  /* May be NULL (with progress: the engine only polls it). Before the engine sleeps: the
   * descriptors that become ready when this end can move, and when to look again
   * (struct braid_progress_wait, progress.h). */
  void (*wait)(struct braid_connector* c, int64_t now, struct braid_progress_wait* w);
  /* May be NULL (nothing outlives a process). A rank of this machine, `peer` (pid `peer_pid`),
   * died during the init of the communicator `comm_hash`: remove what it made for it that
   * its death leaves behind (shm: receive segments whose sender never mapped them). The
   * survivors call it (core/init.c); it may find nothing. */
  void (*forget_dead)(uint64_t comm_hash, int peer, int peer_pid);
  /* May be NULL (no proxy: no ProxyOp events). The profiler (transport/prof_op.h): queue a
   * task's steps on this end, before they move; its proxy emits the events as they do. */
  void (*prof_push)(struct braid_connector* c, struct braid_prof_op* op);
  /* With prof_push: move this end now; `cancel`: stop what is still open (the call failed).
   * Returns the ops not finished yet. */
  int (*prof_drain)(struct braid_connector* c, int cancel);
};

/* Size of the FIFO memory a receiver allocates for one connection. */
size_t braid_transport_fifo_bytes(const struct braid_transport_ctx* ctx);
/* Lay out ctrl + buffers in `base` (the receiver's memory) into a braid_conn. */
void braid_transport_fifo_layout(const struct braid_transport_ctx* ctx, char* base, struct braid_conn* conn);

/* "rank 3 (host node1, pid 1234)": how messages name a peer. */
const char* braid_transport_peer_name(const struct braid_transport_ctx* ctx, int peer, char* buf, size_t len);
/* Format a message and fail the communicator with it (ctx->fail). */
void braid_transport_fail(const struct braid_transport_ctx* ctx, int status, ncclResult_t res, int peer,
                          const char* fmt, ...) __attribute__((format(printf, 5, 6)));

/* Device communicators: run a device-layer call with `dev` current on this thread and put
 * the previous device back afterwards (connections are made on init threads, group threads
 * and the caller's thread, whose current device need not be the communicator's). enter
 * returns the device to restore in *saved_p (-1: nothing to restore). */
ncclResult_t braid_transport_device_enter(const struct braid_device_ops* d, int dev, int* saved_p);
void braid_transport_device_leave(const struct braid_device_ops* d, int saved);

#endif /* BRAID_TRANSPORT_H */
