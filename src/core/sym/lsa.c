/*
 * lsa.c - the per-communicator scratch of the NVLS-style all-reduce (kernels/lsa.h): one
 * segment per rank (ncclMemAlloc memory, registered as a symmetric window so every local rank
 * maps every other's), in which calls stage their inputs and publish partial results. It is a
 * per-node resource, not a per-pair connection: it exists when the whole communicator is one
 * LSA team (every rank load/store reachable: one node), NCCL_NVLS_ENABLE is not 0 and
 * BRAID_LSA_MAX_BYTES is not 0; then the tuner may choose one-shot or two-shot all-reduces up
 * to BRAID_LSA_MAX_BYTES (tuner_tables.h, the LSA block).
 *
 * Host mode: the segments are shared memory. Device mode: device memory, which window
 * registration maps to every local rank (the peer's pointer within a process, its CUDA IPC
 * handle across processes); it is made only when every rank's GPU reaches every other's (the
 * same GPU, or peer access both ways as the driver says; NCCL_P2P_DISABLE=1: never), agreed
 * by an allgather so every rank decides the same. The kernels read the view (segment
 * pointers) from device memory: a host copy is kept, and pushed by a setup copy whenever the
 * window's mappings changed (the first call; after a suspend/resume remap).
 */
#include "kernels/reduce_isa.h"
#define BRAID_REDUCE_COPY braid_reduce_copy_host /* as the host executor's (kernels/host.c) */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/exec_status.h"
#include "core/flight.h"
#include "core/group.h"
#include "core/mismatch.h"
#include "core/sym/sym.h"
#include "device/device.h"
#include "kernels/coll.h" /* lsa.h, and braid_work_redop */
#include "kernels/multimem.h"
#include "topo/tuner.h"
#include "transport/nvls/nvls.h"
#include "transport/transport.h"

struct braid_lsa {
  void* mem;                   /* this rank's segment */
  ncclWindow_t win;            /* the window over it: peer_ptr[r] is rank r's segment as mapped here */
  struct braid_lsa_view* host; /* then seg[nranks], refreshed from the window at each call (suspend/resume remap) */
  char** seg;                  /* the host copy's seg[] */
  struct braid_lsa_view* view; /* what work items point to: host, or its device-memory copy (device mode) */
  int pushed;                  /* device mode: view holds what host holds */
  uint64_t seq;                /* calls planned on this communicator (their numbers: lsa.h) */
  struct braid_nvls* nvls;     /* the node's multicast object (transport/nvls), or NULL */
  size_t line_max;             /* host mode: one-shot calls up to this size go as lines (lsa.h) */
  /* The lone path's last yes from the tuner (braid_lsa_lone): all-reduces of lone_bytes go
   * one-line while braid_tuner_epoch is lone_epoch (0: none kept). */
  size_t lone_bytes;
  uint32_t lone_epoch;
  /* The flat calls' payload stores (BRAID_LSA_FLAT_NT): 0 plain, 1 non-temporal, 2 measured
   * (flat_pick), per size class (up to 512 B, 1, 2, 4 KiB). */
  int flat_nt;
  struct braid_lsa_flat_stat {
    uint32_t calls;  /* flat calls of this class on the lone path */
    uint8_t best;    /* the store kind taken outside the trials */
    uint64_t min[2]; /* this cycle's fastest trial call of each kind (clock ticks; 0: none yet) */
  } flat[4];
  /* The view's window table (work.h: an entry keeps its place while its window lives) */
  uint64_t* win_id;                                   /* the host copy's win_id[] */
  char** win_seg;                                     /* the host copy's win_seg[] */
  char** win_mc;                                      /* the host copy's win_mc[] */
  struct ncclWindow_vidmem* wins[BRAID_LSA_MAX_WINS]; /* entry k's window, or NULL */
  uint64_t win_gen;                                   /* sym->win_gen the table was made at */
};

/* Device mode: this process's device number of rank r's GPU, -1 when it cannot see it. */
static int local_dev(const struct braid_comm* comm, int r) {
  const struct braid_device_ops* d = comm->device;
  const struct braid_peer_info *me = &comm->peers[comm->rank], *p = &comm->peers[r];
  int n = 0;
  if (p->pid_hash == me->pid_hash) return p->cuda_dev;
  if (p->bus_id < 0 || d->count(&n) != ncclSuccess) return -1;
  for (int i = 0; i < n; i++) {
    int64_t id;
    char str[32];
    if (d->bus_id(i, &id, str, sizeof(str)) == ncclSuccess && id == p->bus_id) return i;
  }
  return -1;
}

/* Device mode: whether this rank's GPU loads from and stores to rank r's (transport/p2p.c's
 * driver rule: the same GPU, or peer access both ways; a GPU this process cannot see is left to
 * the IPC mapping, whose failure window registration reports on every rank alike). Enables
 * peer access to another GPU of this process (IPC imports enable it themselves). */
static int device_reaches(const struct braid_comm* comm, int r) {
  const struct braid_device_ops* d = comm->device;
  const struct braid_peer_info *me = &comm->peers[comm->rank], *p = &comm->peers[r];
  if (me->bus_id >= 0 && p->bus_id >= 0 ? me->bus_id == p->bus_id
                                        : me->pid_hash == p->pid_hash && me->cuda_dev == p->cuda_dev)
    return 1;
  int pd = local_dev(comm, r), ab = 0, ba = 0;
  if (pd < 0) return 1;
  if (pd == comm->cuda_dev) return 1;
  if (d->can_access_peer(comm->cuda_dev, pd, &ab) != ncclSuccess ||
      d->can_access_peer(pd, comm->cuda_dev, &ba) != ncclSuccess)
    return 0;
  if (!ab || !ba) return 0;
  return p->pid_hash != me->pid_hash || d->enable_peer_access(pd) == ncclSuccess;
}

/* Device mode: every rank's GPU reaches every other's (an allgather: the same answer on every
 * rank). *ok_p = 0 with an INFO line saying why when not. */
static ncclResult_t device_all_reach(struct braid_comm* comm, int* ok_p) {
  int* all = NULL;
  ncclResult_t res = ncclSuccess;
  *ok_p = 0;
  BRAID_CALLOC_GOTO(all, comm->nranks, res, out);
  int mine = braid_param_int(BRAID_PARAM_P2P_DISABLE) != 1;
  for (int r = 0; r < comm->nranks && mine; r++)
    if (r != comm->rank && !device_reaches(comm, r)) mine = 0;
  all[comm->rank] = mine;
  BRAID_CHECK_GOTO(braid_bootstrap_allgather(comm->bootstrap, all, sizeof(int)), res, out);
  *ok_p = 1;
  for (int r = 0; r < comm->nranks; r++)
    if (!all[r]) {
      BRAID_INFO(BRAID_LOG_INIT,
                 "rank %d: no one-/two-shot all-reduce: rank %d's GPU cannot reach every other's "
                 "(peer access%s)",
                 comm->rank, r, braid_param_int(BRAID_PARAM_P2P_DISABLE) == 1 ? ", NCCL_P2P_DISABLE=1" : "");
      *ok_p = 0;
      break;
    }
out:
  free(all);
  return res;
}

/* The view, then seg[nranks], win_id[MAX_WINS], win_seg[MAX_WINS * nranks], win_mc[MAX_WINS]. */
static size_t view_bytes(const struct braid_comm* comm) {
  return sizeof(struct braid_lsa_view) + (size_t)comm->nranks * sizeof(char*) + BRAID_LSA_MAX_WINS * sizeof(uint64_t) +
         (size_t)BRAID_LSA_MAX_WINS * (comm->nranks + 1) * sizeof(char*);
}
/* Where the arrays of the view at `base` lie (the host copy or the device's). */
static void view_point(const struct braid_comm* comm, struct braid_lsa_view* host, char* base) {
  char* seg = base + sizeof(struct braid_lsa_view);
  char* ids = seg + (size_t)comm->nranks * sizeof(char*);
  char* wseg = ids + BRAID_LSA_MAX_WINS * sizeof(uint64_t);
  host->seg = (char**)(void*)seg;
  host->win_id = (uint64_t*)(void*)ids;
  host->win_seg = (char**)(void*)wseg;
  host->win_mc = (char**)(void*)(wseg + (size_t)BRAID_LSA_MAX_WINS * comm->nranks * sizeof(char*));
}
/* The view and seg[] (host memory), and in device mode their device-memory copy. */
static ncclResult_t view_alloc(struct braid_comm* comm, struct braid_lsa* l) {
  l->host = calloc(1, view_bytes(comm));
  if (l->host == NULL) {
    BRAID_WARN("rank %d: out of memory (%zu bytes) for the one-/two-shot all-reduce", comm->rank, view_bytes(comm));
    return ncclSystemError;
  }
  view_point(comm, l->host, (char*)l->host);
  l->seg = (char**)l->host->seg;
  l->win_id = (uint64_t*)l->host->win_id;
  l->win_seg = (char**)l->host->win_seg;
  l->win_mc = (char**)l->host->win_mc;
  l->win_gen = UINT64_MAX; /* the first call makes the table */
  l->view = l->host;
  if (comm->device == NULL) return ncclSuccess;
  void* d = NULL;
  ncclResult_t res = comm->device->alloc(&d, view_bytes(comm));
  if (res != ncclSuccess) {
    BRAID_WARN("rank %d: cannot allocate %zu bytes of device memory for the one-/two-shot all-reduce", comm->rank,
               view_bytes(comm));
    free(l->host);
    return res;
  }
  l->view = d;
  view_point(comm, l->host, (char*)d); /* the device copy's arrays */
  return ncclSuccess;
}
static void view_free(struct braid_comm* comm, struct braid_lsa* l) {
  if (l->view != l->host) comm->device->free(l->view);
  free(l->host);
}

/* Device mode: the multicast object over every rank's GPU (transport/nvls), in the view when
 * made; one INFO line says which all-reduce NCCL_ALGO=NVLS runs, and why. */
static ncclResult_t multicast_init(struct braid_comm* comm, struct braid_lsa* l) {
  char why[160] = "host mode";
  if (comm->device != NULL) {
    struct braid_nvls_args a = {.dev = comm->device,
                                .cuda_dev = comm->cuda_dev,
                                .rank = comm->rank,
                                .nranks = comm->nranks,
                                .peers = comm->peers,
                                .bs = comm->bootstrap,
                                .bytes = BRAID_MC_BYTES(l->host->slot_bytes)};
    BRAID_CHECK(braid_nvls_setup(&a, &l->nvls, why, sizeof(why)));
  }
  comm->sym->mc_capable = l->nvls != NULL; /* the same on every rank (nvls.c agrees every step) */
  snprintf(comm->sym->mc_why, sizeof(comm->sym->mc_why), "%s", l->nvls != NULL ? "" : why);
  if (l->nvls == NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_TUNING, "rank %d: NVLS all-reduce is unicast one-/two-shot: %s", comm->rank,
               why);
    return ncclSuccess;
  }
  l->host->mc = l->nvls->mcptr;
  l->host->mc_local = l->nvls->local;
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_TUNING,
             "rank %d: NVLS all-reduce through a multicast object of %d GPUs (%zu bytes each, granularity %zu) for "
             "sum of 32/64-bit integers and floats and min/max of integers; unicast one-/two-shot for the rest",
             comm->rank, comm->nranks, l->nvls->bytes, l->nvls->gran);
  return ncclSuccess;
}

const struct braid_nvls* braid_lsa_nvls(const struct braid_comm* comm) {
  return comm->sym != NULL && comm->sym->lsa != NULL ? comm->sym->lsa->nvls : NULL;
}

ncclResult_t braid_lsa_init(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  struct braid_sym* s = comm->sym;
  int64_t max = braid_param_int(BRAID_PARAM_LSA_MAX_BYTES);
  /* The same decision on every rank: from shared facts and the (shared) environment. */
  if (comm->nranks < 2 || s->lsa_size != comm->nranks || comm->nranks > BRAID_LSA_MAX_RANKS || max <= 0 ||
      braid_param_int(BRAID_PARAM_NVLS_ENABLE) == 0 || s->peer_local == NULL /* numRmaCtx 0 */)
    return ncclSuccess;
  if (comm->device != NULL) {
    int ok = 0;
    BRAID_CHECK(device_all_reach(comm, &ok));
    if (!ok) return ncclSuccess;
  }
  size_t slot = ((size_t)max + 4095) & ~(size_t)4095, bytes = BRAID_LSA_SEG_BYTES(slot);
  struct braid_lsa* l = NULL;
  BRAID_CALLOC_GOTO(l, 1, res, out);
  BRAID_CHECK_GOTO(view_alloc(comm, l), res, err_l);
  BRAID_CHECK_GOTO(ncclMemAlloc(&l->mem, bytes), res, err_free);
  BRAID_CHECK_GOTO(braid_win_register(comm, l->mem, bytes, &l->win, NCCL_WIN_COLL_SYMMETRIC), res, err_mem);
  l->host->nranks = comm->nranks;
  l->host->slot_bytes = slot;
  l->line_max = comm->device == NULL ? (size_t)braid_param_int(BRAID_PARAM_LSA_LINE_BYTES) : 0;
  if (l->line_max > slot) l->line_max = slot;
  /* Flat line calls (lsa.h): from BRAID_LSA_FLAT_BYTES, and never at or under one line's payload. */
  int64_t flat = comm->device == NULL ? braid_param_int(BRAID_PARAM_LSA_FLAT_BYTES) : 0;
  l->host->flat_min = (uint16_t)(flat == 0                        ? BRAID_LSA_LINE_MAX_BYTES + 1
                                 : flat <= BRAID_LSA_LINE_PAYLOAD ? BRAID_LSA_LINE_PAYLOAD + 1
                                                                  : flat);
  l->flat_nt = (int)braid_param_int(BRAID_PARAM_LSA_FLAT_NT);
#if !defined(__x86_64__)
  l->flat_nt = 0; /* braid_lsa_copy_nt is a plain copy there: nothing to choose */
#endif
  l->host->flat_nt = l->flat_nt != 0;
  for (int c = 0; c < 4; c++) l->flat[c].best = l->flat_nt != 0; /* AUTO starts non-temporal, then measures */
  s->lsa = l;
  BRAID_CHECK_GOTO(multicast_init(comm, l), res, err_win);
  if (comm->device != NULL)
    braid_tuner_enable_lsa_device(comm->tuner, slot);
  else
    braid_tuner_enable_lsa(comm->tuner, slot, (int)sysconf(_SC_NPROCESSORS_ONLN));
  BRAID_INFO(BRAID_LOG_INIT, "rank %d: one-/two-shot all-reduce scratch (%s memory): %zu bytes (calls up to %zu bytes)",
             comm->rank, comm->device != NULL ? "device" : "shared", bytes, slot);
  return ncclSuccess;
err_win:
  s->lsa = NULL; /* the window goes with the others (braid_win_free_all) */
err_mem:
  ncclMemFree(l->mem);
err_free:
  view_free(comm, l);
err_l:
  free(l);
out:
  return res;
}

/* A word of this rank's segment: read directly (host mode) or by a setup copy (device
 * memory); *ok = 0 when the copy failed (WARNed). */
static uint32_t seg_word(struct braid_comm* comm, struct braid_lsa* l, size_t off, int* ok) {
  const volatile uint64_t* p = (const volatile uint64_t*)((char*)l->mem + off);
  uint64_t v = 0;
  if (comm->device == NULL) return (uint32_t)simt_ld_acquire_u64(p);
  if (comm->device->setup_copy(&v, (const void*)p, sizeof(v)) != ncclSuccess) *ok = 0;
  return (uint32_t)v;
}

/* Peers of this process read its segment through its own mapping, and in device mode every
 * peer through its IPC import of it: before that goes, wait (bounded: a peer may have died or
 * left mid-call) until each finished the calls this rank ran (its count in the segment: graph
 * replays run calls that were planned once). */
static void wait_peers_done(struct braid_comm* comm, struct braid_lsa* l) {
  int ok = 1;
  const uint32_t seq = seg_word(comm, l, BRAID_LSA_CALLS_OFF, &ok);
  double deadline = braid_time_now() + 5.0;
  for (int r = 0; r < comm->nranks && ok; r++) {
    if (r == comm->rank || (comm->device == NULL && comm->peers[r].pid_hash != comm->peers[comm->rank].pid_hash))
      continue;
    while (ok && (int32_t)(seg_word(comm, l, BRAID_LSA_DONE_AT(l->host->slot_bytes, r), &ok) - seq) < 0 &&
           !comm->abort_flag) {
      if (braid_time_now() > deadline) {
        BRAID_INFO(BRAID_LOG_INIT, "rank %d: rank %d never finished one-/two-shot call %u; freeing its scratch anyway",
                   comm->rank, r, seq);
        return;
      }
      sched_yield();
    }
  }
}

void braid_lsa_free(struct braid_comm* comm) {
  struct braid_lsa* l = comm->sym->lsa;
  if (l == NULL) return;
  if (l->seq > 0) wait_peers_done(comm, l);
  comm->sym->lsa = NULL;
  braid_nvls_free(comm->device, l->nvls, comm->nranks, BRAID_MC_DONE_OFF, BRAID_MC_CALLS_OFF, &comm->abort_flag);
  ncclMemFree(l->mem); /* the window goes with the others (braid_win_free_all) */
  view_free(comm, l);
  free(l);
}

/* Whether w is (still) a registered, mapped window of comm other than the scratch's (lock held). */
static int win_listed(const struct braid_comm* comm, const struct braid_lsa* l, const struct ncclWindow_vidmem* w) {
  for (const struct ncclWindow_vidmem* x = comm->sym->windows; x != NULL; x = x->next)
    if (x == w) return w->magic == BRAID_WIN_MAGIC && w->mapped && w != l->win;
  return 0;
}

/* The window table after windows came, went or were remapped (sym->win_gen moved): entries of
 * windows that are gone are freed, new windows take the first free entries (past
 * BRAID_LSA_MAX_WINS their inputs are staged), every entry's pointers are refreshed. An entry
 * keeps its place: a device kernel of an earlier call may be looking its id up meanwhile. */
static void wins_refresh(struct braid_comm* comm, struct braid_lsa* l) {
  struct braid_sym* s = comm->sym;
  const int n = comm->nranks;
  pthread_mutex_lock(&s->lock);
  if (s->win_gen != l->win_gen) {
    for (int k = 0; k < BRAID_LSA_MAX_WINS; k++)
      if (l->wins[k] != NULL && !win_listed(comm, l, l->wins[k])) l->wins[k] = NULL, l->win_id[k] = 0;
    for (struct ncclWindow_vidmem* w = s->windows; w != NULL; w = w->next) {
      int k, free_k = -1;
      if (!win_listed(comm, l, w)) continue;
      for (k = 0; k < BRAID_LSA_MAX_WINS && l->wins[k] != w; k++)
        if (free_k < 0 && l->wins[k] == NULL) free_k = k;
      if (k == BRAID_LSA_MAX_WINS && free_k >= 0) l->wins[free_k] = w, l->win_id[free_k] = w->id + 1; /* 0: free */
    }
    for (int k = 0; k < BRAID_LSA_MAX_WINS; k++) {
      for (int r = 0; r < n; r++) l->win_seg[(size_t)k * n + r] = l->wins[k] != NULL ? l->wins[k]->peer_ptr[r] : NULL;
      l->win_mc[k] = l->wins[k] != NULL ? (char*)l->wins[k]->view.multimem : NULL; /* bound before win_gen moved */
    }
    l->win_gen = s->win_gen;
    l->pushed = 0;
  }
  pthread_mutex_unlock(&s->lock);
}

/* 1 + the entry whose window holds [ptr, ptr + bytes) (with a multicast object of its own when
 * `mc`), its offset there; 0: none. */
static int win_entry(const struct braid_comm* comm, const void* ptr, size_t bytes, int mc, size_t* off_p) {
  const struct braid_lsa* l = comm->sym != NULL ? comm->sym->lsa : NULL;
  if (l == NULL || ptr == NULL) return 0;
  for (int k = 0; k < BRAID_LSA_MAX_WINS; k++) {
    const struct ncclWindow_vidmem* w = l->wins[k];
    if (w == NULL || (comm->device != NULL && !w->infos[comm->rank].on_device) || (mc && l->win_mc[k] == NULL))
      continue;
    const char *p = ptr, *base = w->user_ptr;
    if (p >= base && bytes <= w->size && (size_t)(p - base) <= w->size - bytes) {
      *off_p = (size_t)(p - base);
      return k + 1;
    }
  }
  return 0;
}

int braid_lsa_win_of(const struct braid_comm* comm, const void* ptr, size_t bytes, size_t* off_p) {
  return win_entry(comm, ptr, bytes, 0, off_p);
}

int braid_lsa_mc_direct(const struct braid_comm* comm, int mode, const void* sendbuff, void* recvbuff, size_t bytes,
                        size_t* send_off, uint8_t* recv_win) {
  const char *s = sendbuff, *r = recvbuff;
  size_t roff = 0;
  *recv_win = 0;
  /* whole 4-byte words (multimem.h's loops: an odd count of 2-byte elements would store past the
   * buffer); one input and one output, or one buffer for both (two-shot: a chunk's ld_reduce
   * precedes its stores, and only its owner touches it) */
  if (bytes == 0 || bytes % 4 != 0) return 0;
  if (s == r ? mode != BRAID_LSA_TWOSHOT : s < r + bytes && r < s + bytes) return 0;
  int k = win_entry(comm, sendbuff, bytes, 1, send_off);
  if (k == 0 || *send_off % 16 != 0) return 0;
  if (mode == BRAID_LSA_TWOSHOT) {
    int rk = win_entry(comm, recvbuff, bytes, 1, &roff);
    if (rk == 0 || roff % 16 != 0) return 0;
    *recv_win = (uint8_t)rk;
  } else if ((uintptr_t)recvbuff % 16 != 0) {
    return 0;
  }
  return k;
}

ncclResult_t braid_lsa_counts(struct braid_comm* comm, uint64_t* staged_p, uint64_t* in_place_p) {
  struct braid_lsa* l = comm->sym != NULL ? comm->sym->lsa : NULL;
  int ok = 1;
  if (l == NULL) return ncclInternalError;
  uint32_t staged = seg_word(comm, l, BRAID_LSA_STAGED_OFF, &ok),
           in_place = seg_word(comm, l, BRAID_LSA_INPLACE_OFF, &ok);
  if (!ok) return ncclInternalError;
  *staged_p = staged;
  *in_place_p = in_place;
  return ncclSuccess;
}

const struct braid_lsa_view* braid_lsa_next(struct braid_comm* comm, uint64_t* seq_p) {
  struct braid_lsa* l = comm->sym != NULL ? comm->sym->lsa : NULL;
  if (l == NULL || !l->win->mapped) return NULL;
  if (l->win_gen != __atomic_load_n(&comm->sym->win_gen, __ATOMIC_RELAXED)) wins_refresh(comm, l);
  /* Written only when a mapping moved: a call reads the line, it does not dirty it. */
  char** seg = l->seg;
  void* const* peer = l->win->peer_ptr;
  for (int r = 0; r < comm->nranks; r++)
    if (seg[r] != (char*)peer[r]) {
      seg[r] = peer[r];
      l->pushed = 0;
    }
  /* Device mode: no kernel reads the view while the mappings change (suspended), so the copy
   * lands before any launch that reads it (setup_copy: not the legacy stream, no device sync). */
  if (l->view != l->host && !l->pushed) {
    if (comm->device->setup_copy(l->view, l->host, view_bytes(comm)) != ncclSuccess) return NULL; /* WARNed */
    l->pushed = 1;
  }
  *seq_p = ++l->seq;
  return l->view;
}

int braid_lsa_mode_of(const struct braid_comm* comm, int variant, size_t bytes) {
  const struct braid_lsa* l = comm->sym != NULL ? comm->sym->lsa : NULL;
  return variant == BRAID_LSA_ONESHOT && l != NULL && bytes <= l->line_max ? BRAID_LSA_ONELINE : variant;
}

/* Does the tuner send an all-reduce of `bytes` to the one-line one-shot? The last yes is kept
 * while the tuner's answers stand (braid_tuner_epoch): a call of the same size asks nothing. */
static int lone_oneline(struct braid_comm* comm, struct braid_lsa* l, size_t bytes) {
  uint32_t epoch = braid_tuner_epoch(comm->tuner);
  if (epoch != 0 && epoch == l->lone_epoch && bytes == l->lone_bytes) return 1;
  struct braid_tuner_choice c;
  if (braid_tuner_choose(comm->tuner, BRAID_FUNC_AllReduce, bytes, &c) != ncclSuccess || c.algo != BRAID_ALGO_NVLS ||
      braid_lsa_mode_of(comm, c.variant, bytes) != BRAID_LSA_ONELINE)
    return 0;
  l->lone_bytes = bytes;
  l->lone_epoch = epoch;
  return 1;
}

/* BRAID_LSA_FLAT_NT=2: which stores a flat call of `bytes` uses, chosen per rank by measuring
 * (the readers cannot tell them apart). Between far CPUs non-temporal stores publish 2-4 KiB
 * ~2x faster; between near ones (a shared L3) plain stores win, as the peers' loads then hit
 * that cache, not memory; and this machine's pair of CPUs changes between the two at run time.
 * Each 1024 calls of a size class start with 16 trial calls, runs of 4 of each kind in turn
 * (plain, non-temporal, plain, non-temporal; the first of a run, which finds the lines as the
 * other kind left them, is not counted); the faster kind by its fastest counted call (a
 * minimum: a call the scheduler interrupted says nothing) is used for the other 1008, a change
 * only for a margin of 1/16. Every rank runs the same calls, so the ranks try the same kinds
 * at once and measure them together. */
static uint64_t flat_clock(void) {
#if defined(__x86_64__)
  return __rdtsc();
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}
static struct braid_lsa_flat_stat* flat_class(struct braid_lsa* l, size_t bytes) {
  return &l->flat[(bytes > 512) + (bytes > 1024) + (bytes > 2048)];
}
static int flat_pick(struct braid_lsa* l, size_t bytes) {
  if (l->flat_nt != 2) return l->flat_nt;
  const struct braid_lsa_flat_stat* c = flat_class(l, bytes);
  uint32_t k = c->calls & 1023;
  return k < 16 ? (int)((k >> 2) & 1) : c->best;
}
static void flat_learn(struct braid_lsa* l, size_t bytes, int nt, uint64_t ticks) {
  if (l->flat_nt != 2) return;
  struct braid_lsa_flat_stat* c = flat_class(l, bytes);
  uint32_t k = c->calls++ & 1023;
  if (k >= 16) return;
  if ((k & 3) != 0 && (c->min[nt] == 0 || ticks < c->min[nt])) c->min[nt] = ticks;
  if (k < 15) return;
  const uint64_t now = c->min[c->best], other = c->min[!c->best];
  if (other + other / 16 < now) c->best = !c->best;
  l->host->flat_nt = c->best; /* grouped flat calls (the executor) follow the lone path's last choice */
  c->min[0] = c->min[1] = 0;
}

/* The lone call's path (see sym.h): what enqueue.c and plan.c would do for it, minus the plan
 * and the executor's hand-off; the flight recorder sees the same states. */
int braid_lsa_lone(struct braid_task* t, ncclResult_t* res_p) {
  struct braid_comm* comm = t->comm;
  if (t->kind != BRAID_TASK_COLL || t->func != BRAID_FUNC_AllReduce || t->count == 0 || comm->device != NULL) return 0;
  /* From here on as the plan's path: in flight before anything of the communicator is read,
   * so an abort from another thread waits for this call before it frees the scratch. */
  __atomic_add_fetch(&comm->inflight, 1, __ATOMIC_ACQ_REL);
  struct braid_lsa* l = comm->sym != NULL ? comm->sym->lsa : NULL;
  size_t bytes = t->count * (size_t)braid_dtype_size(t->dtype);
  const struct braid_lsa_view* v = NULL;
  uint64_t seq;
  if (l != NULL && bytes <= l->line_max && !braid_mismatch_enabled() && lone_oneline(comm, l, bytes))
    v = braid_lsa_next(comm, &seq); /* NULL when suspended: the plan's path says why */
  if (v == NULL) {
    __atomic_sub_fetch(&comm->inflight, 1, __ATOMIC_ACQ_REL);
    return 0;
  }
  struct braid_redop op;
  braid_work_redop(&t->redop, &op);
  int st;
  if (bytes <= BRAID_LSA_WORD_MAX) { /* publish first: the peers wait for it, the bookkeeping can wait */
    uint32_t call = braid_lsa_next_seq(v, comm->rank);
    uint64_t mine = braid_lsa_word_publish(&op, v, comm->rank, call, t->sendbuff, bytes);
    braid_flight_set_direct(comm, t->flight_id, BRAID_FLIGHT_RUNNING);
    st = braid_lsa_word_finish(&op, v, comm->rank, call, mine, t->recvbuff, bytes, &comm->abort_flag);
  } else if (bytes >= v->flat_min) {
    const int nt = flat_pick(l, bytes);
    const uint64_t t0 = flat_clock();
    braid_flight_set_direct(comm, t->flight_id, BRAID_FLIGHT_RUNNING);
    st = braid_lsa_flat_allreduce(&op, v, comm->rank, t->sendbuff, t->recvbuff, t->count, braid_dtype_size(t->dtype),
                                  nt, &comm->abort_flag);
    if (st == BRAID_EXEC_OK) flat_learn(l, bytes, nt, flat_clock() - t0);
  } else {
    braid_flight_set_direct(comm, t->flight_id, BRAID_FLIGHT_RUNNING);
    st = braid_lsa_line_allreduce(&op, v, comm->rank, t->sendbuff, t->recvbuff, t->count, braid_dtype_size(t->dtype),
                                  &comm->abort_flag);
  }
  ncclResult_t res = st == BRAID_EXEC_OK ? ncclSuccess : braid_exec_status_error(comm, st, "operation", -1);
  braid_flight_set_direct(comm, t->flight_id, res == ncclSuccess ? BRAID_FLIGHT_DONE : BRAID_FLIGHT_FAILED);
  __atomic_sub_fetch(&comm->inflight, 1, __ATOMIC_ACQ_REL); /* last touch: abort may free it now */
  *res_p = res;
  return 1;
}
