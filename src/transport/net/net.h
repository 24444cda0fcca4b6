/*
 * net.h - the net plugin interface of the network transport.
 *
 * The net plugin ABI, version 1 (struct braid_net_v1). A plugin moves messages between two
 * processes over some network; the transport (net.c) and its progress-engine side
 * (net_proxy.c) drive it. The table is shaped like NCCL's net plugin (ncclNet_v8..v11, same
 * slot names and meanings) so IB verbs and UCX fit the same mould later:
 *   - devices are numbered 0..ndev-1; getProperties describes one (speed, latency, what
 *     memory it can reach: BRAID_NET_PTR_*);
 *   - a receiver listens and publishes a handle (at most BRAID_NET_HANDLE_MAXSIZE bytes,
 *     exchanged out of band by the bootstrap); the sender connects to it. connect and
 *     accept never block: they return with *comm == NULL until the connection is ready,
 *     and are called again with the same handle / listen comm;
 *   - memory is registered once per buffer (regMr) and every request names its handle;
 *   - isend / irecv post requests (NULL request: no room now, retry later; at most
 *     BRAID_NET_MAX_REQUESTS in flight per comm); requests of one comm complete in the
 *     order they were posted; test polls one; irecv may group several receives (up to
 *     maxRecvs); iflush makes received data visible to a GPU (NULL request: nothing to do);
 *   - results: ncclSuccess; ncclRemoteError when the peer is the cause (the plugin does
 *     not WARN, the transport names the peer); ncclSystemError / ncclInternalError for
 *     local failures (the plugin WARNs).
 * braid's additions, all optional (NULL): waitFds gives descriptors an idle proxy can
 * sleep on in poll(); finishSend tells the receiver that this sender is done (its
 * communicator is being destroyed normally), so that the receiver can tell a peer that
 * left from one that died; abortSend tells it that this sender gives up, with a code (the
 * transport passes the rank it blames, + 1), so a failure seen by one rank reaches the
 * others with its cause; getStatus says why a comm failed, whether its peer finished
 * (closedByPeer) or aborted (peerAborted, abortCode) rather than vanished; recvInline says
 * whether a receive comm writes received data only inside test().
 *
 * Capabilities a plugin declares, and what each turns on (transport/README.md):
 *   - props.ptrSupport & BRAID_NET_PTR_HOST_ANY: isend / irecv accept any host address,
 *     inside the registered buffer or not (the request's mhandle is the FIFO's). Host-mode
 *     sends then go from the user's buffer (braid_conn.direct, kernels/direct.h);
 *   - that, and recvInline saying 1 for a receive comm: host-mode receives land in the
 *     user's buffer (braid_conn.rdirect): a receive the transport stops testing when a call
 *     fails must write nothing more into memory the user got back.
 * A plugin that declares neither still carries everything, through the FIFO's slots.
 *
 * A plugin library is `libnccl-net-<name>.so` (NCCL_NET_PLUGIN=<name>, NCCL's search rules:
 * net_plugin.c), or `libnccl-net.so` when NCCL_NET_PLUGIN is unset, exporting
 * `braidNetPlugin_v1`, or NCCL's `ncclNetPlugin_v6`..`_v11` (plugin/nccl_adapt.h). NCCL_NET
 * picks a network by name; the built-in one is "Socket" (net_socket.c).
 *
 * The rest of braid reaches the network transport only through its vtable
 * (braid_transport_net, transport/registry.h) and the progress engine (transport/progress.h).
 */
#ifndef BRAID_NET_H
#define BRAID_NET_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define BRAID_NET_PLUGIN_VERSION 1
#define BRAID_NET_PLUGIN_SYMBOL "braidNetPlugin_v1"
#define BRAID_NET_HANDLE_MAXSIZE 128
#define BRAID_NET_MAX_REQUESTS 32

/* What memory a device can send from and receive into (props.ptrSupport, regMr's type). */
#define BRAID_NET_PTR_HOST 0x1
#define BRAID_NET_PTR_CUDA 0x2
#define BRAID_NET_PTR_DMABUF 0x4
/* Any host address, registered or not: the zero-copy host paths (see above). */
#define BRAID_NET_PTR_HOST_ANY 0x8

/* The logger a plugin should use: level and subsystem as in debug.h (BRAID_LOG_*). */
typedef void (*braid_net_log_fn)(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...);

struct braid_net_props {
  const char* name;    /* for logs: "eth0", "mlx5_0" */
  const char* pciPath; /* sysfs path of the PCI device; NULL when there is none */
  uint64_t guid;       /* tells ports of one NIC apart */
  int ptrSupport;      /* BRAID_NET_PTR_* */
  int regIsGlobal;     /* 1: a registration is valid on every comm of the device */
  int speed;           /* Mb/s */
  int port;
  float latency; /* us */
  int maxComms;  /* connections the device can hold */
  int maxRecvs;  /* receives one irecv may group */
};

/* Per communicator: what a plugin needs to tell its connections from strangers'. */
struct braid_net_config {
  uint64_t secret;  /* the communicator's secret (braid_bootstrap_secret) */
  int trafficClass; /* config.trafficClass, -1 when unset */
};

/* Why a comm failed (getStatus). */
struct braid_net_status {
  int failed;       /* requests on this comm will not complete */
  int closedByPeer; /* the peer finished (finishSend) and closed it: it left, it did not die */
  int peerAborted;  /* the peer gave up (abortSend) */
  int abortCode;    /* its code */
  char reason[160]; /* "closed the connection", "reset the connection", "sent ..." */
};

struct braid_net_v1 {
  const char* name; /* "Socket" */
  /* Once per process, before anything else; 0 devices is not an error. */
  ncclResult_t (*init)(braid_net_log_fn log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct braid_net_props* props);
  /* Per communicator. */
  ncclResult_t (*openContext)(uint64_t commId, const struct braid_net_config* config, void** ctx);
  ncclResult_t (*closeContext)(void* ctx); /* frees connects left unfinished */
  /* Receiver: listen on `dev`, fill `handle` for the sender. */
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  /* Sender: *sendComm stays NULL until connected; keep calling with the same handle. */
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm);
  /* Receiver: *recvComm stays NULL until the sender is in; keep calling. */
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  /* n buffers of sizes[i] bytes at most; the sender's messages must fit. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, size_t* sizes, void** mhandles, void** request);
  /* *done = 1 once complete (the request is then freed); sizes (may be NULL): bytes received. */
  ncclResult_t (*test)(void* request, int* done, size_t* sizes);
  /* Close with requests in flight is allowed: they are dropped. */
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* braid extensions, may be NULL. waitFds: descriptors (with events) that become ready when
   * this comm's requests may progress; resets any internal wake-up descriptors, so the caller
   * must test its requests once more after calling it and before sleeping. */
  ncclResult_t (*waitFds)(void* comm, struct pollfd* fds, int maxFds, int* nFds);
  /* Before closeSend, when every request completed and the communicator is healthy. */
  ncclResult_t (*finishSend)(void* sendComm);
  /* Before closeSend of a communicator that aborts: best effort, bounded, never blocks long. */
  ncclResult_t (*abortSend)(void* sendComm, int code);
  ncclResult_t (*getStatus)(void* comm, struct braid_net_status* status);
  /* *yes = 1 when this receive comm moves received bytes only inside test() calls (no helper
   * threads or DMA of its own): once the transport stops testing a request, nothing more is
   * written into its buffer. */
  ncclResult_t (*recvInline)(void* recvComm, int* yes);
};

/* The built-in plugins: Socket (socket/), and UCX (ucx/, built when UCX's headers were found:
 * BRAID_UCX_BUILT; libucp is dlopened at run time). */
extern const struct braid_net_v1 braid_net_socket;
#if BRAID_UCX_BUILT
extern const struct braid_net_v1 braid_net_ucx;
#endif
/* IB verbs (ib/, built when libibverbs' headers were found: BRAID_IB_BUILT; dlopened). */
#if BRAID_IB_BUILT
extern const struct braid_net_v1 braid_net_ib;
#endif

#endif /* BRAID_NET_H */
