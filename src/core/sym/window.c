/*
 * window.c - ncclCommWindowRegister / ncclCommWindowDeregister / ncclWinGetUserPtr.
 *
 * Registration is collective: every rank allgathers what its buffer is (address, size, how
 * another process maps it), then maps the buffers of its local peers (sym.h): the same
 * process uses the peer's pointer, another process of the node maps the peer's ncclMemAlloc
 * segment (host mode) or imports its IPC handle (device mode, the fake GPU included). Remote
 * peers are reached through remote.c and need nothing mapped. A second allgather agrees on
 * success, so a rank that cannot map a peer fails the registration everywhere, with the same
 * result. What issue 19's device API needs is here: peer_ptr[] holds, per rank, the pointer
 * to its window that this rank can load from and store to (LSA peers). Windows of cuMem memory
 * on every rank are also bound to a multicast object where the node has one (win_mc.c).
 */
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "core/group.h"
#include "core/sym/sym.h"

#define WIN_FLAGS_KNOWN (NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING)

struct ncclWindow_vidmem* braid_win_lookup(struct braid_comm* comm, ncclWindow_t win, const char* fn) {
  struct braid_sym* s = comm->sym;
  struct ncclWindow_vidmem* w = NULL;
  if (win == NULL) {
    BRAID_WARN("%s: window argument is NULL", fn);
    return NULL;
  }
  if (s == NULL) return NULL;
  pthread_mutex_lock(&s->lock);
  for (w = s->windows; w != NULL && w != win; w = w->next) {
  }
  pthread_mutex_unlock(&s->lock);
  if (w == NULL || w->magic != BRAID_WIN_MAGIC)
    BRAID_WARN("%s: window %p is not a registered window of comm %p (rank %d)", fn, (void*)win, (void*)comm,
               comm->rank);
  return w != NULL && w->magic == BRAID_WIN_MAGIC ? w : NULL;
}

static void win_unmap(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  for (int r = 0; r < comm->nranks; r++) {
    if (w->unmap[r] != NULL) braid_mem_unmap(&w->infos[r].share, w->unmap[r], w->infos[r].size);
    w->unmap[r] = NULL;
    if (r != comm->rank) w->peer_ptr[r] = NULL;
  }
  for (int i = 0; i < w->view.lsaSize; i++) w->view.lsaPtrs[i] = NULL;
  w->mapped_bytes = 0;
  w->mapped = 0;
}

/* The device's view (nccl_device.h): the LSA team's buffers, in LSA rank order. */
static void win_view_fill(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  w->view.localPtr = w->user_ptr;
  w->view.size = w->size;
  for (int i = 0; i < w->view.lsaSize; i++) w->view.lsaPtrs[i] = w->peer_ptr[w->view.worldLsa0 + i];
}

/* The handle is read by device code: on a device, pinned mapped memory whose device address is
 * its host address (UVA); elsewhere (host mode) plain memory. view.lsaPtrs follows the struct. */
static ncclResult_t win_alloc(struct braid_comm* comm, struct ncclWindow_vidmem** w_p) {
  const struct braid_sym* s = comm->sym;
  size_t bytes = sizeof(struct ncclWindow_vidmem) + (size_t)s->lsa_size * sizeof(void*);
  struct ncclWindow_vidmem* w = NULL;
  int pinned = 0;
  if (comm->device != NULL) {
    void *h = NULL, *d = NULL;
    if (comm->device->host_alloc(&h, &d, bytes) == ncclSuccess) {
      if (h == d) {
        w = h;
        pinned = 1;
      } else {
        comm->device->host_free(h); /* no UVA: device code cannot use the handle (ncclDevCommCreate says so) */
      }
    }
  }
  if (w == NULL) w = calloc(1, bytes);
  if (w == NULL) {
    BRAID_WARN("ncclCommWindowRegister: out of memory (%zu bytes)", bytes);
    return ncclSystemError;
  }
  w->pinned = pinned;
  w->view.lsaPtrs = (void**)(w + 1);
  w->view.lsaSize = s->lsa_size;
  w->view.lsaRank = comm->rank - s->lsa0;
  w->view.worldLsa0 = s->lsa0;
  *w_p = w;
  return ncclSuccess;
}

static void win_struct_free(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  free(w->infos);
  free(w->peer_ptr);
  free(w->unmap);
  if (w->pinned)
    comm->device->host_free(w);
  else
    free(w);
}

/* Peer mappings: same process -> its pointer; local other process -> map its share. */
static ncclResult_t win_map(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  const struct braid_win_info* me = &w->infos[comm->rank];
  w->peer_ptr[comm->rank] = w->user_ptr;
  for (int r = 0; r < comm->nranks; r++) {
    const struct braid_win_info* p = &w->infos[r];
    if (r == comm->rank || !comm->sym->peer_local[r]) continue;
    if (p->pid_hash == me->pid_hash) {
      w->peer_ptr[r] = p->ptr;
      continue;
    }
    ncclResult_t res = braid_mem_map(&p->share, p->size, &w->peer_ptr[r], &w->unmap[r]);
    if (res != ncclSuccess) {
      win_unmap(comm, w);
      return res;
    }
    w->mapped_bytes +=
        p->share.kind == BRAID_SHARE_SHM || p->share.kind == BRAID_SHARE_VMM ? p->share.seg_bytes : p->size;
  }
  win_view_fill(comm, w);
  w->mapped = 1;
  return ncclSuccess;
}

/* Every rank checks the same facts, so all refuse together. */
static ncclResult_t win_check_infos(struct braid_comm* comm, const struct braid_win_info* infos, int flags) {
  for (int r = 0; r < comm->nranks; r++) {
    const struct braid_win_info* p = &infos[r];
    if (p->size == 0) return ncclInvalidArgument; /* that rank warned already; its allgather slot says so */
    if (p->flags != flags) {
      BRAID_WARN("ncclCommWindowRegister: rank %d registers with winFlags 0x%x, rank %d with 0x%x (must agree)",
                 comm->rank, flags, r, p->flags);
      return ncclInvalidUsage;
    }
    if ((flags & NCCL_WIN_COLL_SYMMETRIC) && p->size != infos[comm->rank].size) {
      BRAID_WARN(
          "ncclCommWindowRegister: NCCL_WIN_COLL_SYMMETRIC windows have one size: rank %d registers %zu bytes, "
          "rank %d %zu",
          comm->rank, infos[comm->rank].size, r, p->size);
      return ncclInvalidArgument;
    }
    for (int q = 0; q < comm->nranks; q++) {
      /* q must reach r's buffer by load/store: r's memory must be shareable with q's process. */
      if (q == r || !comm->sym->peer_local[q] || !comm->sym->peer_local[r]) continue;
      if (infos[q].pid_hash == p->pid_hash || p->share.kind != BRAID_SHARE_NONE) continue;
      BRAID_WARN(
          "ncclCommWindowRegister: rank %d's buffer %p cannot be mapped by rank %d (another process of its node): "
          "allocate window memory with ncclMemAlloc",
          r, p->ptr, q);
      return ncclInvalidArgument;
    }
  }
  return ncclSuccess;
}

static ncclResult_t win_args(struct braid_comm* comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  const char* fn = "ncclCommWindowRegister";
  if (win == NULL) {
    BRAID_WARN("%s: win argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (buff == NULL || size == 0) {
    BRAID_WARN("%s: invalid buffer %p of size %zu", fn, buff, size);
    return ncclInvalidArgument;
  }
  if (flags & ~WIN_FLAGS_KNOWN) {
    BRAID_WARN("%s: invalid winFlags 0x%x (known: NCCL_WIN_COLL_SYMMETRIC 0x1, NCCL_WIN_STRICT_ORDERING 0x2)", fn,
               flags);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t my_info(struct braid_comm* comm, void* buff, size_t size, int flags, struct braid_win_info* me) {
  memset(me, 0, sizeof(*me));
  me->pid_hash = comm->peers[comm->rank].pid_hash;
  me->host_hash = comm->peers[comm->rank].host_hash;
  me->shm_dev = comm->peers[comm->rank].shm_dev;
  me->ptr = buff;
  me->size = size;
  me->flags = flags;
  if (comm->device != NULL) {
    int kind = BRAID_MEM_HOST, dev = -1;
    if (comm->device->pointer_kind(buff, &kind, &dev) == ncclSuccess)
      me->on_device = kind == BRAID_MEM_DEVICE || kind == BRAID_MEM_MANAGED;
  }
  return braid_mem_share(buff, size, me->on_device, &me->share);
}

ncclResult_t braid_win_register(struct braid_comm* comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  const char* fn = "ncclCommWindowRegister";
  ncclResult_t res = ncclSuccess, mine;
  struct ncclWindow_vidmem* w = NULL;
  int *oks = NULL, n = comm->nranks;
  int64_t deadline = braid_sym_deadline(); /* both allgathers: a rank that never comes fails the call */
  /* Bad arguments on one rank still take part in the allgathers (size 0 tells the others). */
  mine = win_args(comm, buff, size, win, winFlags);
  BRAID_CHECK_GOTO(braid_remote_connect(comm, deadline, fn), res, out); /* the first one (collective) */
  BRAID_CHECK_GOTO(win_alloc(comm, &w), res, out);
  BRAID_CALLOC_GOTO(w->infos, n, res, out);
  BRAID_CALLOC_GOTO(w->peer_ptr, n, res, out);
  BRAID_CALLOC_GOTO(w->unmap, n, res, out);
  BRAID_CALLOC_GOTO(oks, n, res, out);
  if (mine == ncclSuccess) mine = my_info(comm, buff, size, winFlags, &w->infos[comm->rank]);
  if (mine != ncclSuccess) w->infos[comm->rank].size = 0;
  BRAID_CHECK_GOTO(braid_sym_allgather(comm, w->infos, sizeof(*w->infos), deadline, fn), res, out);
  if (mine == ncclSuccess) mine = win_check_infos(comm, w->infos, winFlags);
  w->comm = comm;
  w->user_ptr = buff;
  w->size = size;
  w->flags = winFlags;
  if (mine == ncclSuccess) mine = win_map(comm, w);
  /* Listed (not yet valid for the API: no magic) before this rank's last allgather slot
   * leaves: a peer that returns first may put into it at once, and remote puts land by id. */
  pthread_mutex_lock(&comm->sym->lock);
  w->id = comm->sym->next_win_id;
  w->next = comm->sym->windows;
  comm->sym->windows = w;
  pthread_mutex_unlock(&comm->sym->lock);
  oks[comm->rank] = mine;
  res = braid_sym_allgather(comm, oks, sizeof(*oks), deadline, fn);
  for (int r = 0; r < n && res == ncclSuccess; r++) res = oks[r] != ncclSuccess ? (ncclResult_t)oks[r] : res;
  if (res == ncclSuccess) res = braid_win_mc_bind(comm, w); /* collective; an error only when the bootstrap failed */
  pthread_mutex_lock(&comm->sym->lock);
  if (res != ncclSuccess) {
    comm->sym->windows = w->next; /* nothing else registers on comm meanwhile (collective, ordered) */
  } else {
    comm->sym->next_win_id++;
    comm->sym->win_gen++;
    w->magic = BRAID_WIN_MAGIC;
  }
  pthread_mutex_unlock(&comm->sym->lock);
  if (res != ncclSuccess) {
    if (mine == ncclSuccess && oks[comm->rank] == ncclSuccess)
      BRAID_WARN("%s: rank %d: the registration failed on another rank (%s)", fn, comm->rank, ncclGetErrorString(res));
    win_unmap(comm, w);
    goto out;
  }
  BRAID_INFO(BRAID_LOG_REG, "rank %d registered window %p (%p, %zu bytes, flags 0x%x)", comm->rank, (void*)w, buff,
             size, winFlags);
  *win = w;
  w = NULL;
out:
  free(oks);
  if (w != NULL) win_struct_free(comm, w);
  return res != ncclSuccess ? res : mine;
}

BRAID_API ncclResult_t ncclCommWindowRegister(ncclComm_t handle, void* buff, size_t size, ncclWindow_t* win,
                                              int winFlags) {
  BRAID_CHECK(braid_comm_check(handle, "ncclCommWindowRegister"));
  struct braid_sym_op op = {.kind = BRAID_SYM_OP_REGISTER,
                            .comm = braid_comm_of(handle),
                            .src = buff,
                            .bytes = size,
                            .out_win = win,
                            .flags = winFlags};
  /* In a group: at its end, with the group's other registrations (window ids in call order) */
  return braid_group_depth() > 0 ? braid_sym_defer(&op) : braid_sym_op_run(&op);
}
BRAID_PROFILE_ALIAS(ncclCommWindowRegister)

static void win_destroy(struct braid_comm* comm, struct ncclWindow_vidmem* w) {
  braid_win_mc_unbind(comm, w);
  win_unmap(comm, w);
  w->magic = 0;
  win_struct_free(comm, w);
}

BRAID_API ncclResult_t ncclCommWindowDeregister(ncclComm_t handle, ncclWindow_t win) {
  const char* fn = "ncclCommWindowDeregister";
  BRAID_CHECK(braid_comm_check(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (braid_win_lookup(comm, win, fn) == NULL) return ncclInvalidArgument;
  if (braid_sym_group_holds_win(win)) {
    BRAID_WARN("%s: rank %d: window %p has puts queued in this thread's open group; call ncclGroupEnd first", fn,
               comm->rank, (void*)win);
    return ncclInvalidUsage;
  }
  BRAID_CHECK(braid_remote_win_quiesce(comm, win)); /* remote puts landing in it directly */
  pthread_mutex_lock(&comm->sym->lock);
  for (struct ncclWindow_vidmem** p = &comm->sym->windows; *p != NULL; p = &(*p)->next) {
    if (*p == win) {
      *p = win->next;
      comm->sym->win_gen++;
      break;
    }
  }
  pthread_mutex_unlock(&comm->sym->lock);
  win_destroy(comm, win);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommWindowDeregister)

BRAID_API ncclResult_t ncclWinGetUserPtr(ncclComm_t handle, ncclWindow_t win, void** outUserPtr) {
  const char* fn = "ncclWinGetUserPtr";
  BRAID_CHECK(braid_comm_check(handle, fn));
  if (outUserPtr == NULL) {
    BRAID_WARN("%s: outUserPtr argument is NULL", fn);
    return ncclInvalidArgument;
  }
  struct ncclWindow_vidmem* w = braid_win_lookup(braid_comm_of(handle), win, fn);
  if (w == NULL) return ncclInvalidArgument;
  *outUserPtr = w->user_ptr;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclWinGetUserPtr)

static void win_gen_bump(struct braid_comm* comm) {
  pthread_mutex_lock(&comm->sym->lock);
  comm->sym->win_gen++;
  pthread_mutex_unlock(&comm->sym->lock);
}

void braid_win_unmap_all(struct braid_comm* comm) {
  for (struct ncclWindow_vidmem* w = comm->sym->windows; w != NULL; w = w->next) win_unmap(comm, w);
  win_gen_bump(comm);
}

ncclResult_t braid_win_map_all(struct braid_comm* comm) {
  for (struct ncclWindow_vidmem* w = comm->sym->windows; w != NULL; w = w->next)
    if (!w->mapped) {
      ncclResult_t res = win_map(comm, w);
      win_gen_bump(comm);
      if (res != ncclSuccess) return res;
    }
  return ncclSuccess;
}

void braid_win_free_all(struct braid_comm* comm) {
  while (comm->sym->windows != NULL) {
    struct ncclWindow_vidmem* w = comm->sym->windows;
    comm->sym->windows = w->next;
    win_destroy(comm, w);
  }
}
