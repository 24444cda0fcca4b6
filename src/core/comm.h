/*
 * comm.h - the communicator: what every host-side module knows about a communicator, its
 * peers and its channels. ncclComm_t handles are `struct braid_comm*` (cast at the API).
 */
#ifndef BRAID_COMM_H
#define BRAID_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "core/blame.h" /* BRAID_REASON_MAX */
#include "kernels/work.h"
#include "nccl.h"
#include "transport/transport.h" /* peers, connectors, the transports' context */

struct braid_bootstrap;
struct braid_channel_graph;
struct braid_topo_system;
struct braid_watchdog;
struct braid_tuner;
struct braid_device_ops;
struct braid_launch_state;
struct braid_sym;

/* A channel on the host side. */
struct braid_channel {
  int id;
  int* ring_ranks;              /* ring order, nranks entries */
  struct braid_dev_channel dev; /* what the executors run on */
  struct braid_connector ring_send, ring_recv;
  struct braid_connector tree_up_send, tree_up_recv; /* to/from tree.up (connected with the trees) */
  struct braid_connector tree_down_send[BRAID_MAX_TREE_ARITY], tree_down_recv[BRAID_MAX_TREE_ARITY];
  struct braid_connector* p2p_send; /* [nranks], connected on first use */
  struct braid_connector* p2p_recv; /* [nranks] */
  struct braid_conn** p2p_send_dev; /* [nranks] -> p2p_send[i].conn or NULL */
  struct braid_conn** p2p_recv_dev; /* [nranks] */
};

/* A PreMulSum operator created by ncclRedOpCreatePreMulSum. */
struct braid_user_redop {
  int in_use;
  int dtype;
  int residence;          /* ncclScalarResidence_t */
  uint64_t scalar;        /* HostImmediate: value bits in dtype's format */
  const void* scalar_ptr; /* Device residence: read at each call */
};

/* Registered buffers (ncclCommRegister). */
struct braid_reg {
  struct braid_reg* next;
  void* buff;
  size_t size;
};

enum braid_comm_state {
  BRAID_COMM_INITIALIZING = 0,
  BRAID_COMM_READY,
  BRAID_COMM_FINALIZED,
  BRAID_COMM_FAILED,
};

struct braid_comm {
  uint64_t magic;      /* BRAID_COMM_MAGIC while alive */
  uint32_t handle_gen; /* the generation its handles carry (1..BRAID_HANDLE_GEN_MASK) */
  void* alloc_base;    /* what the allocator returned (the struct is aligned inside it) */
  int rank, nranks;
  int node, nnodes, local_rank, local_nranks;
  int* rank_to_node; /* [nranks] */
  int cuda_dev;      /* -1: host mode */
  int host_mode;
  int64_t bus_id;                        /* PCI bus id of cuda_dev (NCCL's encoding); -1 in host mode */
  const struct braid_device_ops* device; /* device.h; NULL in host mode */
  void* dev_self;                        /* device mode: this struct lives in pinned, mapped memory and
                                            this is its device address (kernels poll abort_flag there) */
  struct braid_launch_state* launch;     /* device mode: channel mirror, launch buffers (launch.c) */
  uint64_t comm_hash;                    /* commId in logs */
  ncclConfig_t config;                   /* resolved copy */
  struct braid_bootstrap* bootstrap;
  struct braid_peer_info* peers; /* [nranks] */

  volatile uint32_t abort_flag; /* braid_exec_status value when raised; polled everywhere */
  volatile int state;           /* enum braid_comm_state */
  volatile ncclResult_t async_error;
  int claimed;                         /* someone (abort, or a failed init) frees it: under the registry lock */
  char abort_reason[BRAID_REASON_MAX]; /* why braid itself raised abort_flag (braid_comm_raise:
                                          a transport, the watchdog): what the failed call repeats */
  int failed_peer;                     /* once abort_reason is set: the rank blamed, or -1 */
  int failure_told;                    /* its peers were told why it failed (core/blame.c) */
  pthread_t init_thread;               /* non-blocking init */
  int init_thread_running;
  int blocking_init_active; /* a blocking init runs on the caller's thread (under mutex) */
  pthread_cond_t init_cond; /* signalled when it returns: an aborting thread waits on it */

  int nchannels;
  int cores_per_rank;  /* host executor: cores per rank on the busiest machine (0: ranks outnumber
                          cores there); -1 on a GPU or when unknown (core/init.c) */
  int p2p_round_group; /* p2p rounds a rank progresses together (braid_p2p_round_group of
                          BRAID_P2P_ROUND_GROUP and cores_per_rank, at init; core/plan.c) */
  struct braid_channel channels[BRAID_MAX_CHANNELS];
  struct braid_topo_system* topo;      /* this node's topology (topo.h), kept for the transports */
  struct braid_channel_graph* graph;   /* rings and trees from the topology (graph.h) */
  struct braid_tuner* tuner;           /* algorithm/protocol/channels per call (tuner.h) */
  int trees_connected;                 /* tree connections are made the first time a call uses a tree */
  size_t buff_bytes[BRAID_NUM_PROTOS]; /* per-connection FIFO bytes, each protocol */
  uint8_t* locality;                   /* [nranks] enum braid_locality of each local peer (core/locality.h) */
  struct braid_transport_ctx tctx;     /* what the transports see of this communicator (connect.c) */
  struct braid_watchdog* watchdog;     /* dead peers, BRAID_TIMEOUT (core/watchdog.c) */
  struct braid_flight* flight;         /* its last calls (core/flight.c), from its first call */
  uint32_t conn_gen;                   /* bumped when a connection is made or freed (connect.c) */
  struct braid_prof* prof;             /* NCCL_PROFILER_PLUGIN's context (core/profile.c), NULL: none */
  uint64_t prof_seq[BRAID_NUM_FUNCS];  /* collectives per function: the profiler's seqNumber */
  struct braid_prof_done* prof_done;   /* device mode: events waiting for kernels (core/profile_done.c) */
  int prof_proxy_off;                  /* device mode: no more proxy events (counts lost; profile_proxy.c) */

  uint64_t op_count;     /* collectives issued (logs) */
  uint64_t mismatch_seq; /* groups run on it: tags BRAID_CHECK_MISMATCH's messages (mismatch.c) */
  volatile int inflight; /* group runs using this comm now: abort waits for them */
  pthread_mutex_t mutex; /* redops, registrations */
  struct braid_user_redop* redops;
  int nredops;
  struct braid_reg* regs;
  struct braid_sym* sym; /* windows, one-sided signals, suspend, grow (src/core/sym/) */

  /* Split bookkeeping for logs. */
  struct braid_comm* parent;
  int split_color, split_key;
  uint64_t split_count; /* splits/shrinks made from this comm: tags their bootstraps */
  double init_start;    /* seconds, for Init timings */
};

#define BRAID_COMM_MAGIC 0x62726169645f636dULL /* "braid_cm" */

/* Handles. An ncclComm_t is the communicator's address (aligned to BRAID_COMM_ALIGN) with a
 * generation in its low bits, new for every communicator: when a destroyed communicator's
 * memory comes back for a new one, the old handle still differs from the new one and the
 * registry refuses it instead of running on the new communicator. Every handle given to a
 * caller is made by braid_comm_handle; braid_comm_of undoes it (checked handles only). */
#define BRAID_COMM_ALIGN 4096
#define BRAID_HANDLE_GEN_MASK ((uintptr_t)BRAID_COMM_ALIGN - 1)
static inline struct braid_comm* braid_comm_of(ncclComm_t c) {
  return (struct braid_comm*)((uintptr_t)c & ~BRAID_HANDLE_GEN_MASK);
}
static inline ncclComm_t braid_comm_handle(const struct braid_comm* comm) {
  return (ncclComm_t)((uintptr_t)comm | comm->handle_gen);
}
/* A generation for a new communicator. */
uint32_t braid_comm_new_gen(void);
/* comm (of generation gen) is still registered: a task queued on it may run. */
int braid_comm_registry_valid(const struct braid_comm* comm, uint32_t gen);

/* The registry of live communicators: catches use after destroy and garbage handles. */
void braid_comm_registry_add(struct braid_comm* comm);
void braid_comm_registry_remove(struct braid_comm* comm);
/* fn(comm, arg) for every live communicator, under the registry lock (none is freed meanwhile). */
void braid_comm_registry_foreach(void (*fn)(struct braid_comm* comm, void* arg), void* arg);
/* ncclCommAbort: 1 if comm is live and now ours to free (raises its abort flag), else 0. */
int braid_comm_registry_claim(struct braid_comm* comm);
/* A failed blocking init: 1 if nobody claimed comm (it is unregistered; caller frees). */
int braid_comm_registry_take(struct braid_comm* comm);
/* ncclInvalidArgument with a WARN naming `fn` when comm is NULL, destroyed or garbage;
 * ncclInvalidUsage when it failed or was aborted; ncclSuccess when ready for calls. */
ncclResult_t braid_comm_check(ncclComm_t comm, const char* fn);
/* braid_comm_check, but a suspended communicator passes (ncclCommResume, ncclCommMemStats). */
ncclResult_t braid_comm_check_resumable(ncclComm_t comm, const char* fn);

/* Fail a communicator from inside braid (a watch that saw a peer die, the watchdog, a
 * transport through its context): the first caller's message becomes comm->abort_reason,
 * `peer` comm->failed_peer, `res` (unless ncclSuccess) comm->async_error, and the abort flag
 * carries `status` (enum braid_exec_status), so every wait of the communicator ends and every
 * later call repeats the reason. Later callers change nothing. 1 when this call raised it. */
int braid_comm_raise(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Blame (core/blame.h): before raising BRAID_EXEC_PEER_FAILED, braid_comm_raise looks for
 * `peer`'s failure notice (up to BRAID_BLAME_WAIT_MS) and blames the rank that made it fail
 * instead, and once raised it tells every peer (up to BRAID_BLAME_TELL_MS): the caller must be
 * able to wait that long and use the bootstrap. A thread that cannot (the bootstrap's service
 * thread) calls braid_comm_raise_nowait, and the thread that reports the failure calls
 * braid_blame_settle later. */
int braid_comm_raise_nowait(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* If comm still blames `peer`: blame `blamed` instead, the reason saying why (blame.c). */
void braid_comm_reblame(struct braid_comm* comm, int peer, int blamed, const char* why);
/* A process of this machine that no longer runs (gone, or a zombie). */
int braid_comm_pid_gone(int pid);

/* Connection management (src/core/connect.c). The rings' bootstrap waits end at deadline (ns;
 * 0: the bootstrap's own, i.e. init's): ncclCommResume bounds its reconnection this way. */
ncclResult_t braid_connect_rings(struct braid_comm* comm, int64_t deadline);
/* Connections are made in three phases, each over every communicator of a group before the
 * next, so that one thread can connect several (an ncclCommInitAll clique): POST (setup, blobs
 * to the peers), SENDS (senders connect and acknowledge), RECVS (receivers connect and wait
 * for the acknowledgement). */
enum braid_connect_phase { BRAID_CONNECT_POST = 0, BRAID_CONNECT_SENDS = 1, BRAID_CONNECT_RECVS = 2 };
ncclResult_t braid_connect_p2p(struct braid_comm* comm, int channel, int phase, const int* send_peers, int nsend,
                               const int* recv_peers, int nrecv);
ncclResult_t braid_connect_trees(struct braid_comm* comm, int phase);
void braid_connect_free(struct braid_comm* comm);

double braid_time_now(void);

#endif /* BRAID_COMM_H */
