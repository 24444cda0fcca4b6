/*
 * work.h - the structures the data path runs on, shared by the host executor and the CUDA
 * kernels (valid C and CUDA C, includes nothing host-only).
 *
 * A connection is one direction between two ranks on one channel (docs/ARCHITECTURE.md 4): a
 * FIFO of BRAID_NSTEPS slots per protocol in memory both sides can reach, and two monotonic
 * counters: `tail` (written by the sender: steps filled) and `head` (written by the receiver:
 * steps freed). Both ends keep their own step counter; because every rank runs the same
 * schedule, the counters of the two ends advance in lock-step across calls, whatever the
 * protocol of each call.
 */
#ifndef BRAID_WORK_H
#define BRAID_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/axes.h"
#include "kernels/reduce.h"
#include "kernels/simt.h"

#define BRAID_NSTEPS 8
#define BRAID_MAX_CHANNELS 64
#define BRAID_MAX_TREE_ARITY 3
/* LL: 16-byte lines {data lo, flag, data hi, flag}; 8 payload bytes per line. */
#define BRAID_LL_LINE_BYTES 16
#define BRAID_LL_PAYLOAD 8
/* LL128: 128-byte lines of 16 words; word 15 is the flag; 120 payload bytes per line. */
#define BRAID_LL128_LINE_BYTES 128
#define BRAID_LL128_PAYLOAD 120
#define BRAID_LL128_WORDS 16

/* The control block of a connection; it lives in memory both ends map (the receiver owns it).
 * Counters sit on their own 128-byte lines so the two writers never share a cache line. */
struct braid_conn_ctrl {
  volatile uint64_t tail; /* sender: number of steps published */
  char pad0[120];
  volatile uint64_t head; /* receiver: number of steps consumed */
  char pad1[120];
  volatile uint64_t sizes[BRAID_NSTEPS]; /* bytes in each slot as they travel (LL/LL128: whole lines):
                                          * the net proxy sends this many; its receiver sets them */
  volatile uint64_t ptrs[BRAID_NSTEPS];  /* direct connections, user memory instead of the slot:
                                          * send end (braid_conn.direct): non-zero: the step's
                                          * payload lies at this address; the proxy sends it from
                                          * there. Written before tail like sizes[].
                                          * receive end (braid_conn.rdirect): where the step lands
                                          * (0: its slot), with sizes[] the bytes expected there;
                                          * written before `want` */
  volatile uint64_t want;                /* receive end of an rdirect connection: steps whose destination the
                                          * executor has declared; the proxy posts no receive beyond it */
  volatile uint64_t fetched;             /* receive end with host_fetch: the last step copied out of the
                                          * sender's memory, plus one (its source is free again) */
  /* Host executor only (struct braid_conn.dest; kernels/direct.h): the receiver declares where
   * one future step's reduced payload lands in its own output (addr, bytes; then step = that
   * step + 1, release), a sender that can write there does so instead of filling the slot and
   * says it did (stored = step + 1, before tail). Both are only ever compared for equality with
   * the step at hand, so a stale declaration is never taken. */
  volatile uint64_t dest_addr, dest_bytes, dest_step, stored;
  volatile uint64_t odelta; /* shm direct, host only (kernels/direct.h, pushed all-reduce): the
                             * sender's output address minus its input address in the
                             * work item of its SEND steps; written before tail */
  volatile uint64_t ostep;  /* the last such SEND step that wrote odelta, plus one */
};

/* One end of a connection as the data path sees it. */
struct braid_conn {
  volatile uint64_t* tail;               /* ctrl->tail of the shared block */
  volatile uint64_t* head;               /* ctrl->head */
  volatile uint64_t* sizes;              /* ctrl->sizes */
  volatile uint64_t* ptrs;               /* ctrl->ptrs */
  volatile uint64_t* want;               /* ctrl->want */
  volatile uint64_t* fetched;            /* ctrl->fetched where the receiver copies direct steps itself
                                            (shm, host_fetch; both ends), else NULL */
  char* buff[BRAID_NUM_PROTOS];          /* slot 0 of each protocol's FIFO */
  uint32_t slot_bytes[BRAID_NUM_PROTOS]; /* bytes of one slot (lines included for LL/LL128) */
  uint64_t step;                         /* this end's step counter */
  int wait_tail;                         /* LL/LL128 receive: wait for tail before reading lines
                                            (their bytes arrive through a proxy, not as flagged
                                            stores). Set on both ends of a proxied (net)
                                            connection: its sender publishes tail with release
                                            semantics for every protocol. */
  /* Host executor only (device code never reads it): the sender may publish a Simple step by
   * pointer (ctrl->ptrs) instead of copying it into the slot; set by the net transport on the
   * send end of host-mode connections whose plugin sends from any host memory, and by the shm
   * transport where the receiver can read this process (host_fetch). Either way `head` past a
   * step means nobody reads its source any more (net: this end's own proxy counting completed
   * sends; shm: the receiver copied it out): kernels/direct.h relies on it. */
  int direct;
  /* Host executor only: the receive end of such a connection. Before it waits for a step the
   * executor declares where the step lands (ctrl->ptrs/sizes, then ctrl->want): a Simple step
   * whose payload goes to my output unchanged (RECV, RECV_COPY_SEND, a p2p receive) lands
   * there, anything else in its slot; the proxy posts a receive only for declared steps. */
  int rdirect;
  /* Host executor only, send end with `direct` and shm receive end with `host_fetch`: the
   * smallest step sent by pointer, or written by a Gather's sender (0: the default of
   * kernels/direct.h). */
  uint32_t direct_min;
  /* Host executor only, may be NULL: called after this end published or released a step, so
   * the proxy thread moving this FIFO wakes up if it sleeps. Device code never calls it. */
  void (*host_kick)(struct braid_conn* c);
  /* Host executor only, set with rdirect: the executor gives up (abort) with a receive into
   * user memory still in flight; after return nothing writes there any more. */
  void (*host_abandon)(struct braid_conn* c);
  /* Host executor only, may be NULL: the receive end of a connection whose sender publishes
   * steps by pointer (shm between local processes or threads: no proxy). A Simple step whose
   * ctrl->ptrs[slot] is set lies at that address in the sender's process: copy `bytes` of it
   * to `dst`. 0, or an exec status (the transport failed the communicator and said why). */
  int (*host_fetch)(struct braid_conn* c, void* dst, uint64_t src, size_t bytes);
  /* Host executor only, with host_fetch: the sender's step addresses are valid in this process
   * (shm between threads of one process), so a reducing step loads them in place (one pass:
   * kernels/direct.h) instead of copying them first; 0: only host_fetch can read them. */
  int host_load;
  /* Host executor only, with host_fetch and not host_load: bytes a one-pass reduction copies
   * out of the sender's memory at a time (0: kernels/direct.h's default). */
  uint32_t fetch_piece;
  /* Host executor only, both ends of a shm connection whose sender sends by pointer: bytes per
   * send/recv step on it (0: the work item's p2p_chunk_bytes). The receiver chooses it and tells
   * the sender at connect, so both ends cut a message alike (coll.h braid_p2p_chunk). */
  uint32_t p2p_step;
  /* Host executor only, shm between processes (both ends): the two ranks' cores were found far
   * apart at init (core/locality.h), where a line written in one core's cache crosses to the
   * other slower than from memory: large all-reduce outputs go to memory (kernels/direct.h). */
  int far;
  /* Host executor only, both ends of a shm connection with the direct path (else NULL): the
   * control block itself (this end's view), for the declared destination of a reduced step
   * (dest_addr .. stored above; the split Reduce: kernels/direct.h). */
  volatile struct braid_conn_ctrl* dest;
  /* Host executor only, send end with `dest`: write `bytes` at `src` (here) to `dst` in the
   * receiver's process (process_vm_writev between processes, memcpy between threads). 0, or
   * an exec status. NULL: this end cannot write the receiver's memory (the slot is used). */
  int (*host_store)(struct braid_conn* c, uint64_t dst, const void* src, size_t bytes);
  /* Host executor only, with host_store: the receiver's addresses are valid here (threads of
   * one process), so a reduction stores straight into them. */
  int store_load;
  /* Host executor only, shm direct (both ends): ctrl->odelta and ctrl->ostep (NULL elsewhere). */
  volatile uint64_t* odelta;
  volatile uint64_t* ostep;
  /* Host executor only, may be NULL, the receive end with host_fetch (the pushed all-reduce): write `bytes` from `src`
   * here to `dst` in the sender's process (process_vm_writev between processes, memcpy
   * between threads). 0, or an errno; it never fails the communicator (the caller falls back). */
  int (*host_push)(struct braid_conn* c, uint64_t dst, const void* src, size_t bytes);
};

/* Per channel: where this rank sits in the ring and the trees, and its connections. */
struct braid_dev_ring {
  int prev, next;   /* ranks */
  int index;        /* my position in ring order */
  const int* ranks; /* ring order: ranks[i] is the rank at position i (nranks entries) */
};
struct braid_dev_tree {
  int up;                         /* -1 at the root */
  int down[BRAID_MAX_TREE_ARITY]; /* -1 when absent */
};
struct braid_dev_channel {
  int id;
  struct braid_dev_ring ring;
  struct braid_dev_tree tree;
  struct braid_conn* ring_send;    /* to ring.next */
  struct braid_conn* ring_recv;    /* from ring.prev */
  struct braid_conn* tree_up_send; /* to tree.up */
  struct braid_conn* tree_up_recv; /* from tree.up */
  struct braid_conn* tree_down_send[BRAID_MAX_TREE_ARITY];
  struct braid_conn* tree_down_recv[BRAID_MAX_TREE_ARITY];
  struct braid_conn** p2p_send; /* [nranks], NULL where not connected */
  struct braid_conn** p2p_recv; /* [nranks] */
};

/* One piece of point-to-point work in a channel: a send or a receive of a byte range. Ops
 * come sorted by round; the sends and receives of one round progress together, so a rank
 * never waits on a send while its own receive of the same round could drain a peer. */
struct braid_p2p_op {
  int round;
  int peer;
  int is_send;
  char* buff; /* recv: destination; send: source */
  size_t bytes;
  size_t done;       /* progress, kept by the executor (reset when the op starts) */
  int gather;        /* an ncclGather's: on a direct shm connection the sender writes (kernels/direct.h) */
  int slot;          /* host mode, a send: a receive of the batch overwrites its source (in place): it goes
                      * through the slot on shm connections (kernels/direct.h, slot sends) */
  uint32_t a2a_step; /* host mode, an ncclAlltoAll's message of at most BRAID_SHM_A2A_MAX bytes: bytes per
                      * step on a shm connection that would send whole slots by pointer (coll.h
                      * braid_p2p_chunk); both ends of the message set it alike; 0: none */
};

/* One collective (or p2p batch) for one channel. The host fills it; both executors run it. */
/* The NVLS-style all-reduce's view of the LSA scratch (kernels/lsa.h, core/sym/lsa.c): every
 * rank's segment as this rank maps it (device mode: a copy in device memory, core/sym/lsa.c). */
#define BRAID_LSA_MAX_RANKS 64
struct braid_lsa_view {
  int nranks;
  uint16_t flat_min; /* host mode: lsa.h's line calls of at least this many bytes go flat (over 4096: none) */
  uint8_t flat_nt; /* host mode: a grouped flat call stores its payload non-temporally (the lone path's last choice) */
  size_t slot_bytes; /* one input or result slot (the largest call it takes) */
  char* const* seg;  /* [nranks] */
  /* Multicast (transport/nvls): the object's address (multimem.h; on the fake GPU a struct
   * braid_mc_emul) and this rank's bound memory as it maps it; NULL without multicast. */
  char* mc;
  char* mc_local;
  /* The communicator's windows (core/sym/lsa.c), for inputs read in place (lsa.h): win_id[k]
   * the id of table entry k (the same id on every rank: registration is collective and ordered;
   * 0: a free entry), win_seg[k * nranks + r] rank r's buffer of that window as this rank maps it.
   * An entry keeps its place while its window lives (a kernel in flight looks it up by id). */
  const uint64_t* win_id; /* [BRAID_LSA_MAX_WINS] */
  char* const* win_seg;   /* [BRAID_LSA_MAX_WINS * nranks] */
  /* win_mc[k]: entry k's own multicast address (a window of ncclMemAlloc memory bound to an object
   * of its own, core/sym/win_mc.c; on the fake GPU a struct braid_mc_emul), NULL without one:
   * the multicast all-reduce then reduces from and stores to it directly (multimem.h). */
  char* const* win_mc; /* [BRAID_LSA_MAX_WINS] */
};
#define BRAID_LSA_MAX_WINS 16 /* windows a call's input may be read in place from (the first ones) */
enum braid_lsa_mode {
  BRAID_LSA_ONESHOT = 1, /* every rank loads every input and reduces all of it */
  BRAID_LSA_TWOSHOT = 2, /* reduce-scatter by loads, then all-gather by loads */
  BRAID_LSA_ONELINE = 3, /* host mode, small: one-shot over lines that carry their call number */
  BRAID_LSA_MC = 4,      /* flag: through the multicast object (multimem.h), not the peers' segments */
};
/* The fake GPU's multicast address (device/fake_mc.c): what a multimem access reaches, every
 * bound member's memory as this process maps it, in the object's member order. */
#define BRAID_MC_EMUL_MAGIC 0x6d63656du /* "mcem" */
struct braid_mc_emul {
  uint32_t magic;
  int n;
  char* member[BRAID_LSA_MAX_RANKS];
};

struct braid_work {
  uint8_t func;     /* enum braid_func */
  uint8_t algo;     /* enum braid_algo */
  uint8_t proto;    /* enum braid_proto */
  uint8_t dtype;    /* ncclDataType_t */
  uint8_t lsa_rwin; /* algo NVLS through multicast, two-shot: 1 + the view's window entry that holds
                       recvbuff (stored to through its object), 0: none (a one-shot writes recvbuff where it is) */
  struct braid_redop redop;
  int nranks, rank, root;
  const void* sendbuff;
  void* recvbuff;
  size_t count; /* elements per rank as the API counts them */
  /* This channel's share: elements [chan_off, chan_off + chan_count) of the per-chunk range. */
  size_t chan_off, chan_count;
  uint32_t chunk_elems; /* elements per step (at most one FIFO slot of payload) */
  uint8_t exchange;     /* AllReduce of 2 ranks, small: swap whole inputs and reduce locally
                           (one hop instead of the ring's two; the same bytes on the wire) */
  uint8_t lsa_mode;     /* algo NVLS: enum braid_lsa_mode */
  uint8_t lsa_win;      /* algo NVLS: 1 + the view's window entry that holds sendbuff (read in place), 0: staged */
  uint8_t split;        /* Reduce of 2 ranks: the tuner chose the split schedule (algo/ring.h),
                           run where both ring connections are direct (kernels/direct.h
                           braid_direct_pair), else the chain */
  union {               /* the kernel arguments hold many items in 4 KiB: the two never meet */
    struct {
      uint32_t p2p_chunk_bytes; /* SendRecv: bytes per step */
      /* SendRecv: the channel's p2p ops, run in order (sends and receives interleaved per round). */
      int nops;
      struct braid_p2p_op* ops;
    };
    struct {
      const struct braid_lsa_view* lsa; /* algo NVLS (its call number is in the segment: lsa.h) */
      size_t lsa_off;                   /* lsa_win != 0: sendbuff's offset in this rank's buffer of that window */
    };
  };
};

/* Bytes per element of an ncclDataType_t. */
HD int braid_dtype_size(int dtype) {
  switch (dtype) {
#define BRAID_X(id, short_name, type, size, str) \
  case id:                                       \
    return size;
    BRAID_DTYPES(BRAID_X)
#undef BRAID_X
  }
  return 0;
}

/* Status the executors return: 0 ok, else why the work stopped. */
enum braid_exec_status {
  BRAID_EXEC_OK = 0,
  BRAID_EXEC_ABORTED = 1,      /* the communicator's abort flag was raised */
  BRAID_EXEC_TIMEOUT = 2,      /* BRAID_TIMEOUT elapsed waiting for a peer */
  BRAID_EXEC_PEER_FAILED = 3,  /* a peer died or its connection broke (comm->abort_reason says which) */
  BRAID_EXEC_BAD_SCHEDULE = 4, /* a schedule refused a step (position, root, step, primitive out of
                                  range) or a work item the executor cannot run: an internal
                                  error, reported instead of skipping the step (its peers would
                                  wait forever) */
  BRAID_EXEC_MISMATCH = 5,     /* a peer called the same collective with another size (seen where the
                                  data path can tell: host mode's one-line all-reduce) */
};

#endif /* BRAID_WORK_H */
