/*
 * sym.h - symmetric memory and what NCCL 2.30 builds on it: braid-allocated shareable memory
 * (ncclMemAlloc), windows (ncclCommWindowRegister), one-sided put/signal/wait, and the
 * communicator-wide operations that manage memory (suspend/resume, memory statistics) or
 * make a new communicator from one (grow). See README.md in this folder.
 *
 * Who reaches whom: a peer is "local" when its window memory is load/store reachable from
 * this rank - the same process (a plain pointer), or the same host and /dev/shm (a mapping of
 * its segment; on a device, of its IPC handle). Everything else is "remote" and goes through
 * remote.c. Every rank decides from the same allgathered facts, so both ends of a pair agree.
 */
#ifndef BRAID_SYM_H
#define BRAID_SYM_H

#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"
#include "device/device.h"
#include "nccl_device.h"

#define BRAID_SYM_NSIGNALS 8 /* signal indices per context (NCCL 2.30 itself accepts only 0) */
#define BRAID_SYM_NAME_MAX 64
#define BRAID_WIN_MAGIC 0x6272616964776e64ULL /* "braidwnd" */

/* ---- shareable memory (mem.c) ------------------------------------------------------------ */

/* How another process reaches an allocation: what it maps. */
enum braid_share_kind {
  BRAID_SHARE_NONE = 0,   /* only this process (plain host memory) */
  BRAID_SHARE_SHM = 1,    /* host mode: an ncclMemAlloc memfd, opened as /proc/<pid>/fd/<fd> */
  BRAID_SHARE_DEVICE = 2, /* device memory: an IPC handle of the device layer */
  BRAID_SHARE_VMM = 3,    /* device memory of ncclMemAlloc through cuMem: the allocation's handle (vmm_export) */
};

struct braid_share {
  int kind;                      /* enum braid_share_kind */
  size_t offset;                 /* of the pointer inside the segment / allocation */
  size_t seg_bytes;              /* BRAID_SHARE_SHM, BRAID_SHARE_VMM: the segment's / allocation's size */
  char name[BRAID_SYM_NAME_MAX]; /* BRAID_SHARE_SHM: the path that opens it */
  struct braid_ipc_handle ipc;   /* BRAID_SHARE_DEVICE, BRAID_SHARE_VMM */
};

/* How `ptr` (size bytes) can be shared: the ncclMemAlloc segment that holds it, the device
 * layer's IPC handle, or BRAID_SHARE_NONE. */
ncclResult_t braid_mem_share(const void* ptr, size_t size, int on_device, struct braid_share* out);
/* Map a peer's share; *ptr_p is the peer's pointer as seen here. Undone by braid_mem_unmap. */
ncclResult_t braid_mem_map(const struct braid_share* s, size_t size, void** ptr_p, void** unmap_cookie_p);
void braid_mem_unmap(const struct braid_share* s, void* cookie, size_t size);
/* Bytes of ncclMemAlloc memory live in this process. */
uint64_t braid_mem_live_bytes(void);

/* ---- windows (window.c) ------------------------------------------------------------------ */

/* What each rank tells the others about its buffer at registration (allgathered). */
struct braid_win_info {
  uint64_t pid_hash, host_hash, shm_dev;
  void* ptr; /* in its own address space (same process: usable as is) */
  size_t size;
  int flags;
  int on_device;
  struct braid_share share;
};

/* The window handle (ncclWindow_t). Every rank holds its own for the same registration;
 * registrations are collective and ordered, so `id` is the same on every rank. */
struct ncclWindow_vidmem {
  ncclWindow_vidmem_view_t view; /* first: what device code reads through the handle (nccl_device.h) */
  uint64_t magic;                /* BRAID_WIN_MAGIC while registered */
  struct braid_comm* comm;
  struct ncclWindow_vidmem* next; /* the communicator's windows */
  uint64_t id;
  void* user_ptr;
  size_t size;
  int flags;
  struct braid_win_info* infos; /* [nranks] */
  void** peer_ptr;              /* [nranks] local peers: their buffer as seen here (self: user_ptr); remote: NULL */
  void** unmap;                 /* [nranks] cookies of the mappings this rank made */
  size_t mapped_bytes;          /* bytes of peer mappings this window holds (memory statistics) */
  int mapped;                   /* peer mappings present (0 while suspended) */
  int pinned;                   /* this struct (and view.lsaPtrs after it) is device-layer pinned memory */
  int rma_busy, rma_closing;    /* remote puts landing in it directly; deregistration began (sym->lock) */
  struct braid_nvls* nvls;      /* the multicast object this rank's buffer is bound to, or NULL (win_mc.c) */
  char mc_why[160];             /* without one: why not (the multimem pointer queries' WARN) */
};

/* ncclCommWindowRegister without the communicator check (collective; init uses it too). */
ncclResult_t braid_win_register(struct braid_comm* comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
/* The window of comm whose handle is `win`, or NULL (with a WARN naming fn). */
struct ncclWindow_vidmem* braid_win_lookup(struct braid_comm* comm, ncclWindow_t win, const char* fn);
/* Drop / re-make every window's peer mappings (suspend / resume). */
void braid_win_unmap_all(struct braid_comm* comm);
ncclResult_t braid_win_map_all(struct braid_comm* comm);
void braid_win_free_all(struct braid_comm* comm);

/* Collective, after every rank mapped its peers (win_mc.c): when the communicator has multicast
 * (mc_capable) and every rank's window is cuMem memory of one size at a granule boundary of its
 * allocation, bind each rank's window at offset 0 of a new multicast object, map it and set
 * view.multimem; otherwise (or when a step fails on some rank) w->mc_why says why not, at
 * INFO. Every rank ends the same way. An error only when the bootstrap failed. */
struct braid_nvls;
ncclResult_t braid_win_mc_bind(struct braid_comm* comm, struct ncclWindow_vidmem* w);
/* Unbind this rank's window and release the object (deregistration; no-op without one). */
void braid_win_mc_unbind(struct braid_comm* comm, struct ncclWindow_vidmem* w);

/* ---- one-sided signals (signal.c, remote.c) ----------------------------------------------- */

/* Per communicator: the signal inbox every origin writes into, and the bookkeeping of waits. */
struct braid_sym {
  int suspended;   /* ncclCommSuspend(NCCL_SUSPEND_MEM) .. ncclCommResume */
  int nctx;        /* config.numRmaCtx */
  uint64_t* inbox; /* [nranks][nctx][NSIGNALS]: signals received from each origin */
  size_t inbox_bytes;
  int inbox_shm;                          /* a named segment (some local peer is another process) */
  char inbox_name[BRAID_SYM_NAME_MAX];    /* unlinked once every local peer mapped it */
  char (*peer_names)[BRAID_SYM_NAME_MAX]; /* [nranks] local inbox names, from sym_init to sym_ready */
  uint64_t** peer_inbox;                  /* [nranks] local peers' inboxes (self: inbox); remote: NULL */
  int* peer_local;                        /* [nranks] 1: load/store reachable (same decision on both ends) */
  uint64_t* waited;                       /* [nranks][nctx][NSIGNALS]: signals consumed by ncclWaitSignal */
  struct ncclWindow_vidmem* windows;
  uint64_t next_win_id;
  uint64_t win_gen;   /* bumped (under lock) whenever a window comes, goes or is (un)mapped (lsa.c's table) */
  int lsa0, lsa_size; /* the LSA team: world ranks lsa0 .. lsa0 + lsa_size - 1 (devcomm.c) */
  struct braid_devcomm* devcomms; /* ncclDevCommCreate's resources (devcomm.c) */
  struct braid_lsa* lsa;          /* the NVLS-style all-reduce scratch, or NULL (lsa.c) */
  int mc_capable;                 /* lsa.c made its multicast object: windows may be bound (win_mc.c) */
  char mc_why[160];               /* when not: why (lsa.c; empty: no NVLS set-up was tried) */
  pthread_mutex_t lock;           /* windows list (remote puts land under it) */
  struct braid_rma* rma;          /* one-sided connections to remote ranks, or NULL (remote.c) */
  int rma_wanted;                 /* they were made: ncclCommResume makes them again */
  /* ncclCommGrow */
  int grow_pending; /* ncclCommGetUniqueId made an id no grow has used yet */
  ncclUniqueId grow_id;
};

/* Init hooks (init.c): sym_init after the connections (collective: inbox names are
 * allgathered and mapped), sym_ready after init's final barrier (every peer mapped: names go).
 * The inbox is a named segment, not a memfd like ncclMemAlloc's, so that init works between
 * processes of one node in different pid namespaces (as the shm transport does). */
ncclResult_t braid_sym_init(struct braid_comm* comm);
void braid_sym_ready(struct braid_comm* comm);
/* Teardown (braid_comm_free): windows, mappings, inbox. Safe on a half-built communicator. */
void braid_sym_free(struct braid_comm* comm);
/* ncclInvalidUsage with a WARN naming fn when comm is suspended (braid_comm_check calls it). */
ncclResult_t braid_sym_check_active(const struct braid_comm* comm, const char* fn);

uint64_t* braid_sym_slot(uint64_t* table, const struct braid_comm* comm, int origin, int ctx, int sig);

/* Remote path (remote.c): puts and signals to ranks that are not load/store reachable, over
 * the network transport's one-sided channels (transport/rma.h). connect is collective (the
 * first window registration, resume; nothing to do without remote peers or once made); the
 * target applies what arrives in order, from the progress engine or its own waits. */
ncclResult_t braid_remote_connect(struct braid_comm* comm, int64_t deadline, const char* fn);
void braid_remote_free(struct braid_comm* comm);
size_t braid_remote_bytes(const struct braid_comm* comm); /* buffers the connections hold */
ncclResult_t braid_remote_put(struct braid_comm* comm, int peer, uint64_t win_id, size_t offset, const void* src,
                              size_t bytes, int src_on_device, int dst_on_device, int ctx, int sig);
/* Deregistration: refuse new direct puts into and from w, wait for those in flight, drop its
 * registrations (remote.c). */
ncclResult_t braid_remote_win_quiesce(struct braid_comm* comm, struct ncclWindow_vidmem* w);
/* One-sided connections made (send + receive sides; tests, logs). */
int braid_remote_connections(const struct braid_comm* comm);
/* What the one-sided channels' direct path did (transport/rma.h; tests). */
struct braid_rma_stats;
void braid_remote_rma_stats(const struct braid_comm* comm, struct braid_rma_stats* st);
ncclResult_t braid_remote_signal(struct braid_comm* comm, int peer, int ctx, int sig);
/* Apply what has arrived from `peer`; sleep_us > 0: when nothing had, sleep on the
 * connection's descriptors up to that long (microseconds). An error, not WARNed, when its
 * connection failed or closed: what arrived before still counts (a peer that sent its last
 * signal and destroyed its communicator), so the waiter decides, and braid_remote_fail WARNs
 * the reason, naming the peer, and returns the error. */
ncclResult_t braid_remote_progress(struct braid_comm* comm, int peer, int sleep_us);
ncclResult_t braid_remote_fail(struct braid_comm* comm, int peer);

/* ---- device communicators (devcomm.c) ----------------------------------------------------- */

/* The LSA team of every rank: the largest block size d dividing nranks such that each block of
 * d consecutive ranks is mutually load/store reachable (the same answer on every rank: it is
 * computed from the allgathered peer facts). Sets s->lsa0 / s->lsa_size. */
void braid_sym_lsa_team(struct braid_comm* comm);
/* Destroy what ncclDevCommCreate made and ncclDevCommDestroy did not (communicator teardown). */
void braid_devcomm_free_all(struct braid_comm* comm);

/* ---- the NVLS-style all-reduce's scratch (lsa.c) ----------------------------------------- */

/* Host mode, when every rank is in one LSA team (one node) and NCCL_NVLS_ENABLE allows: a
 * scratch window of BRAID_LSA_SEG_BYTES(BRAID_LSA_MAX_BYTES rounded up to 4 KiB) per rank, and the tuner told it
 * may pick one-shot / two-shot all-reduces up to that size. Collective (init). */
ncclResult_t braid_lsa_init(struct braid_comm* comm);
/* Whether the communicator's NVLS all-reduce has a multicast object (transport/nvls). */
struct braid_nvls;
const struct braid_nvls* braid_lsa_nvls(const struct braid_comm* comm);
void braid_lsa_free(struct braid_comm* comm);
struct braid_lsa_view;
/* The view a work item of this call uses (peer mappings as they are now), and the call's
 * number; NULL when the communicator has no scratch. */
const struct braid_lsa_view* braid_lsa_next(struct braid_comm* comm, uint64_t* seq_p);
/* The work item's enum braid_lsa_mode for the tuner's variant of a `bytes` all-reduce: host
 * mode's one-shots up to BRAID_LSA_LINE_BYTES go as lines (BRAID_LSA_ONELINE). The same on
 * every rank (shared arguments and environment), in a group or alone. */
int braid_lsa_mode_of(const struct braid_comm* comm, int variant, size_t bytes);
/* 1 + the entry of the current view's window table (the view braid_lsa_next returned last)
 * whose window holds this rank's [ptr, ptr + bytes), and its offset in *off_p; 0 when none does
 * (the input is staged). Device mode: only windows of device memory. */
int braid_lsa_win_of(const struct braid_comm* comm, const void* ptr, size_t bytes, size_t* off_p);
/* The multicast all-reduce (kernels/multimem.h) of `bytes` in `mode` (BRAID_LSA_ONESHOT or
 * TWOSHOT) can reduce straight from sendbuff's window through that window's own multicast
 * object (core/sym/win_mc.c) and, two-shot, store through recvbuff's: 1 + sendbuff's entry of
 * the view's window table, *send_off its offset there, *recv_win 1 + recvbuff's entry (two-shot;
 * 0 for a one-shot, which writes recvbuff where it is); 0: stage. This rank's own facts: the
 * kernel checks at run time that every rank's are the same (a mismatch stages). */
int braid_lsa_mc_direct(const struct braid_comm* comm, int mode, const void* sendbuff, void* recvbuff, size_t bytes,
                        size_t* send_off, uint8_t* recv_win);
/* One-/two-shot calls of this rank so far that staged their input and that were read in place
 * (the counters in its segment, kernels/lsa.h; tests). ncclInternalError without a scratch. */
ncclResult_t braid_lsa_counts(struct braid_comm* comm, uint64_t* staged_p, uint64_t* in_place_p);
struct braid_task;
/* A task outside any group that the tuner sends to a one-line one-shot: runs it on the calling
 * thread without a plan (enqueue.c's fast path), *res_p its result, and returns 1; 0 when the
 * task is not such a call (nothing done). */
int braid_lsa_lone(struct braid_task* t, ncclResult_t* res_p);

/* ---- one-sided calls and registrations inside a group (signal.c, group_ops.c) ------------- */

enum braid_sym_op_kind { BRAID_SYM_OP_REGISTER = 1, BRAID_SYM_OP_PUT, BRAID_SYM_OP_SIGNAL, BRAID_SYM_OP_WAIT };

/* One checked call: what it runs, now or at its group's end. */
struct braid_sym_op {
  struct braid_sym_op* next;
  int kind; /* enum braid_sym_op_kind */
  struct braid_comm* comm;
  uint32_t comm_gen; /* the communicator's handle generation at the call (braid_sym_defer) */
  int peer, ctx, sig;
  cudaStream_t stream;
  const void* src;               /* PUT: the local buffer; REGISTER: the buffer */
  size_t bytes;                  /* PUT: the payload; REGISTER: the size */
  struct ncclWindow_vidmem* win; /* PUT: the target window */
  size_t offset;                 /* PUT: in the peer's window */
  ncclWindow_t* out_win;         /* REGISTER */
  int flags;                     /* REGISTER */
  int ndesc;                     /* WAIT */
  ncclWaitSignalDesc_t* descs;   /* WAIT: the caller's; braid_sym_defer keeps a copy */
  ncclResult_t result;           /* REGISTER at a group's end: this one's result */
};

ncclResult_t braid_sym_op_run(const struct braid_sym_op* op);
/* Inside ncclGroupStart/End: queue a copy of op for the outermost ncclGroupEnd. */
ncclResult_t braid_sym_defer(const struct braid_sym_op* op);
/* The outermost ncclGroupEnd: braid_sym_group_begin before the group's collectives run
 * (registrations, then puts and signals, in call order), braid_sym_group_finish after them
 * (waits). braid_sym_group_drop discards what is queued (a failed or simulated group). */
ncclResult_t braid_sym_group_begin(void);
ncclResult_t braid_sym_group_finish(void);
void braid_sym_group_drop(void);
/* Number of queued calls on comm (destroying it with calls pending is refused by the caller). */
int braid_sym_group_holds(const struct braid_comm* comm);
/* 1 when a put queued in this thread's group targets win (deregistering it is refused). */
int braid_sym_group_holds_win(const struct ncclWindow_vidmem* win);

/* ---- bounded bootstrap steps of post-init collective calls (sync.c) ----------------------- */

/* BRAID_INIT_TIMEOUT seconds from now (0: none): one deadline for all steps of one call. */
int64_t braid_sym_deadline(void);
/* An allgather / barrier on comm's bootstrap bounded by deadline; a failure WARNs fn. */
ncclResult_t braid_sym_allgather(struct braid_comm* comm, void* all, size_t size, int64_t deadline, const char* fn);
ncclResult_t braid_sym_barrier(struct braid_comm* comm, int64_t deadline, const char* fn);

/* Memory statistics (suspend.c). */
void braid_sym_mem_bytes(const struct braid_comm* comm, uint64_t* suspendable_p, uint64_t* persistent_p);

#endif /* BRAID_SYM_H */
