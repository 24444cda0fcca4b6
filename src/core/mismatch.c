/*
 * mismatch.c - the mismatch check (mismatch.h). Every group, with the check on, gives each
 * communicator it uses one fingerprint per rank (its collectives, their number, a hash, the
 * communicator's group number), and every rank learns every rank's before any data moves:
 *
 * - host mode, in band: a 112-byte ring all-gather on channel 0's ring connections (connected
 *   at init, whatever algorithm, protocol or channel count the group's calls would use), run
 *   as an ordinary Simple work item by the host executor right before the group's own work:
 *   nranks - 1 ring steps through the same FIFOs (shm, p2p, net proxies) as the data. One
 *   job per communicator, run together, so one thread driving a whole clique cannot wait on
 *   itself. Both ends of every ring connection run the same nranks - 1 steps whatever the
 *   verdict, so their step counters stay in lock-step and the communicator stays usable.
 * - device communicators: the bootstrap (tag "Mism" + the group number), nranks - 1 small
 *   messages each way in parallel; a device version of the ring step is a follow-up.
 *
 * A group with no collective still has one (count 0): a rank that runs a collective while its
 * peer runs only point-to-point calls is a mismatch too.
 */
#include "core/mismatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/exec_status.h"
#include "core/init_internal.h"
#include "kernels/executor.h"

#define BRAID_MISMATCH_CALLS 4
#define TAG_MISMATCH 0x4d69736d00000000ULL /* "Mism" */

struct fp_call {
  int32_t func, dtype, op, root; /* op and root -1 where the function has none */
  uint64_t count;
};

#define FP_MAGIC 0x4d69736dU /* "Mism": a fingerprint, not a data step of a rank without the check */

struct fp {
  uint32_t magic; /* FP_MAGIC */
  uint32_t ncoll; /* collectives of the group on this communicator */
  uint64_t seq;   /* the communicator's group number (every rank counts every group) */
  uint64_t hash;  /* of every call's fp_call, in order */
  struct fp_call calls[BRAID_MISMATCH_CALLS];
};

int braid_mismatch_enabled(void) {
  static __thread struct braid_param_memo memo; /* asked on every call (the lone path's too) */
  return braid_param_int_memo(BRAID_PARAM_CHECK_MISMATCH, &memo) == 1;
}

static struct fp_call fp_of(const struct braid_task* t) {
  int has_op = t->func == BRAID_FUNC_AllReduce || t->func == BRAID_FUNC_Reduce || t->func == BRAID_FUNC_ReduceScatter;
  int has_root = t->func == BRAID_FUNC_Broadcast || t->func == BRAID_FUNC_Reduce;
  struct fp_call c = {t->func, t->dtype, has_op ? t->op : -1, has_root ? t->root : -1, t->count};
  return c;
}

static void fp_build(struct braid_comm* comm, const struct braid_task* tasks, struct fp* f) {
  memset(f, 0, sizeof(*f));
  f->magic = FP_MAGIC;
  f->seq = comm->mismatch_seq;
  f->hash = 0xcbf29ce484222325ULL;
  for (const struct braid_task* t = tasks; t != NULL; t = t->next) {
    if (t->comm != comm || t->kind != BRAID_TASK_COLL) continue;
    struct fp_call c = fp_of(t);
    if (f->ncoll < BRAID_MISMATCH_CALLS) f->calls[f->ncoll] = c;
    f->ncoll++;
    f->hash = braid_hash(&c, sizeof(c), f->hash);
  }
}

const char* braid_func_name(int func) {
  switch (func) {
#define BRAID_X(id, name) \
  case id:                \
    return #name;
    BRAID_FUNCS(BRAID_X)
#undef BRAID_X
    default:
      return "?";
  }
}

const char* braid_dtype_name(int dtype) {
  switch (dtype) {
#define BRAID_X(id, short_name, type, size, name) \
  case id:                                        \
    return name;
    BRAID_DTYPES(BRAID_X)
#undef BRAID_X
    default:
      return "?";
  }
}

const char* braid_op_name(int op) {
  switch (op) {
#define BRAID_X(id, short_name, name) \
  case id:                            \
    return name;
    BRAID_REDOPS(BRAID_X)
#undef BRAID_X
    default:
      return "user op";
  }
}

/* "AllReduce(count 1000, float, sum)" or, for a group, its first differing call. */
static void call_str(const struct fp_call* c, char* buf, size_t len) {
  int n = snprintf(buf, len, "%s(count %llu, %s", braid_func_name(c->func), (unsigned long long)c->count,
                   braid_dtype_name(c->dtype));
  if (c->op >= 0 && (size_t)n < len) n += snprintf(buf + n, len - n, ", %s", braid_op_name(c->op));
  if (c->root >= 0 && (size_t)n < len) n += snprintf(buf + n, len - n, ", root %d", c->root);
  if ((size_t)n < len) snprintf(buf + n, len - n, ")");
}

/* The first call where a and b differ (index), or -1 when the shown calls agree. */
static int first_diff(const struct fp* a, const struct fp* b) {
  uint32_t n = a->ncoll < b->ncoll ? a->ncoll : b->ncoll;
  for (uint32_t i = 0; i < n && i < BRAID_MISMATCH_CALLS; i++)
    if (memcmp(&a->calls[i], &b->calls[i], sizeof(a->calls[i])) != 0) return (int)i;
  return -1;
}

static int fp_equal(const struct fp* a, const struct fp* b) {
  return a->magic == b->magic && a->seq == b->seq && a->ncoll == b->ncoll && a->hash == b->hash && first_diff(a, b) < 0;
}

/* What a group does, at call index i: "3 collectives, #2 AllReduce(...)" / "no collective". */
static void group_str(const struct fp* f, int i, char* buf, size_t len) {
  char call[128];
  if (f->magic != FP_MAGIC) {
    snprintf(buf, len, "something that is no fingerprint (BRAID_CHECK_MISMATCH unset there?)");
  } else if (f->ncoll == 0) {
    snprintf(buf, len, "no collective");
  } else if (i < 0 || (uint32_t)i >= f->ncoll || i >= BRAID_MISMATCH_CALLS) {
    call_str(&f->calls[0], call, sizeof(call));
    snprintf(buf, len, "%u collective%s (first %s)", f->ncoll, f->ncoll > 1 ? "s" : "", call);
  } else {
    call_str(&f->calls[i], call, sizeof(call));
    if (f->ncoll == 1)
      snprintf(buf, len, "%s", call);
    else
      snprintf(buf, len, "%u collectives, #%d %s", f->ncoll, i + 1, call);
  }
}

/* "0,2,3": the ranks whose fingerprint equals all[rank]. */
static void ranks_like(const struct fp* all, int nranks, int rank, char* buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  for (int r = 0; r < nranks && n + 12 < len; r++)
    if (fp_equal(&all[r], &all[rank])) n += snprintf(buf + n, len - n, "%s%d", n ? "," : "", r);
}

/* Every rank computes the same verdict from the same fingerprints: the first rank that
 * disagrees with rank 0, both calls and both sets of ranks. */
static ncclResult_t verdict(struct braid_comm* comm, const struct fp* all) {
  int other = -1;
  for (int r = 1; r < comm->nranks && other < 0; r++)
    if (!fp_equal(&all[r], &all[0])) other = r;
  if (other < 0) return ncclSuccess;
  char a[192], b[192], ra[96], rb[96];
  int i = first_diff(&all[0], &all[other]);
  if (i < 0 && all[0].ncoll != all[other].ncoll)
    i = (int)(all[0].ncoll < all[other].ncoll ? all[0].ncoll : all[other].ncoll);
  group_str(&all[0], i, a, sizeof(a));
  group_str(&all[other], i, b, sizeof(b));
  if (all[0].magic == FP_MAGIC && all[other].magic == FP_MAGIC && all[0].seq != all[other].seq) {
    size_t na = strlen(a), nb = strlen(b); /* one rank skipped or added a group before */
    snprintf(a + na, sizeof(a) - na, " as group #%llu", (unsigned long long)all[0].seq + 1);
    snprintf(b + nb, sizeof(b) - nb, " as group #%llu", (unsigned long long)all[other].seq + 1);
  }
  ranks_like(all, comm->nranks, 0, ra, sizeof(ra));
  ranks_like(all, comm->nranks, other, rb, sizeof(rb));
  int groups = 0;
  for (int r = 0; r < comm->nranks; r++) {
    int first = 1;
    for (int q = 0; q < r && first; q++) first = !fp_equal(&all[q], &all[r]);
    groups += first;
  }
  BRAID_WARN(
      "Mismatched collective detected (BRAID_CHECK_MISMATCH=1) on comm %p commId 0x%llx rank %d: rank%s %s "
      "call%s %s, rank%s %s call%s %s%s; nothing was run",
      (void*)comm, (unsigned long long)comm->comm_hash, comm->rank, strchr(ra, ',') ? "s" : "", ra,
      strchr(ra, ',') ? "" : "s", a, strchr(rb, ',') ? "s" : "", rb, strchr(rb, ',') ? "" : "s", b,
      groups > 2 ? " (and other ranks call still other things)" : "");
  return ncclInvalidUsage;
}

/* "0,2,3": the ranks whose BRAID_CHECK_MISMATCH setting is `on`. */
static void ranks_with(const struct braid_comm* comm, int on, char* buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  for (int r = 0; r < comm->nranks && n + 12 < len; r++)
    if (((comm->peers[r].must_agree & BRAID_PEER_AGREE_CHECK_MISMATCH) != 0) == on)
      n += snprintf(buf + n, len - n, "%s%d", n ? "," : "", r);
  if (n + 12 >= len) snprintf(buf + n, len - n, ",...");
}

ncclResult_t braid_mismatch_check_agree(const struct braid_comm* comm) {
  int on = 0, off = 0;
  for (int r = 0; r < comm->nranks; r++) {
    if (comm->peers[r].must_agree & BRAID_PEER_AGREE_CHECK_MISMATCH)
      on++;
    else
      off++;
  }
  if (on == 0 || off == 0) return ncclSuccess;
  char a[96], b[96];
  ranks_with(comm, 1, a, sizeof(a));
  ranks_with(comm, 0, b, sizeof(b));
  BRAID_WARN(
      "BRAID_CHECK_MISMATCH=1 is set on rank%s %s but not on rank%s %s of comm %p commId 0x%llx: set it alike "
      "on every rank (a rank without it would take the others' fingerprints for data)",
      on > 1 ? "s" : "", a, off > 1 ? "s" : "", b, (void*)comm, (unsigned long long)comm->comm_hash);
  return ncclInvalidUsage;
}

static uint64_t tag_of(struct braid_comm* comm) {
  return TAG_MISMATCH | (comm->mismatch_seq & 0xffffffffULL);
}

/* Device communicators: every rank posts its fingerprint to every peer, for every plan, then
 * reads theirs (one thread may drive every rank of a clique). */
static ncclResult_t swap_bootstrap(struct braid_plan* plans, int nplans, struct fp** all) {
  for (int i = 0; i < nplans; i++) {
    struct braid_comm* comm = plans[i].comm;
    for (int r = 0; r < comm->nranks; r++)
      if (r != comm->rank)
        BRAID_CHECK(braid_bootstrap_send(comm->bootstrap, r, tag_of(comm), &all[i][comm->rank], sizeof(struct fp)));
  }
  for (int i = 0; i < nplans; i++) {
    struct braid_comm* comm = plans[i].comm;
    for (int r = 0; r < comm->nranks; r++)
      if (r != comm->rank)
        BRAID_CHECK(braid_bootstrap_recv(comm->bootstrap, r, tag_of(comm), &all[i][r], sizeof(struct fp)));
  }
  return ncclSuccess;
}

/* Host mode, in band: the fingerprints travel as a ring all-gather of bytes on channel 0
 * (Simple, one step per hop) through the executor, every communicator's job at once. */
static ncclResult_t swap_inband(struct braid_plan* plans, int nplans, struct fp** all, struct fp* mine) {
  ncclResult_t res = ncclSuccess;
  struct braid_work* works = NULL;
  struct braid_host_job* jobs = NULL;
  int njobs = 0;
  BRAID_CALLOC_GOTO(works, nplans, res, out);
  BRAID_CALLOC_GOTO(jobs, nplans, res, out);
  for (int i = 0; i < nplans; i++) {
    struct braid_comm* comm = plans[i].comm;
    if (comm->nranks < 2) continue;
    struct braid_work* w = &works[njobs];
    mine[i] = all[i][comm->rank];
    w->func = BRAID_FUNC_AllGather;
    w->algo = BRAID_ALGO_RING;
    w->proto = BRAID_PROTO_SIMPLE;
    w->dtype = ncclInt8;
    w->redop.dtype = ncclInt8;
    w->nranks = comm->nranks;
    w->rank = comm->rank;
    w->sendbuff = &mine[i];
    w->recvbuff = all[i]; /* rank r's at all[i][r] */
    w->count = w->chan_count = w->chunk_elems = sizeof(struct fp);
    jobs[njobs].ch = &comm->channels[0].dev;
    jobs[njobs].works = w;
    jobs[njobs].nworks = 1;
    jobs[njobs].abort_flag = &comm->abort_flag;
    njobs++;
  }
  if (njobs > 0) BRAID_CHECK_GOTO(braid_host_run(jobs, njobs), res, out);
  for (int i = 0, k = 0; i < nplans; i++) {
    if (plans[i].comm->nranks < 2) continue;
    if (jobs[k].status != BRAID_EXEC_OK && res == ncclSuccess)
      res = braid_exec_status_error(plans[i].comm, jobs[k].status, "mismatch check", -1);
    k++;
  }
out:
  free(works);
  free(jobs);
  return res;
}

ncclResult_t braid_mismatch_check(struct braid_plan* plans, int nplans, struct braid_task* tasks) {
  ncclResult_t res = ncclSuccess;
  struct fp** all = NULL;
  struct fp* mine = NULL;
  BRAID_CALLOC_GOTO(all, nplans, res, out);
  BRAID_CALLOC_GOTO(mine, nplans, res, out);
  for (int i = 0; i < nplans; i++) {
    struct braid_comm* comm = plans[i].comm;
    BRAID_CALLOC_GOTO(all[i], comm->nranks, res, out);
    fp_build(comm, tasks, &all[i][comm->rank]);
  }
  /* any device communicator: the bootstrap for all (a group that mixes modes is refused
   * after the check, by enqueue.c's launch_plans; the host executor must not run on it) */
  int device = 0;
  for (int i = 0; i < nplans; i++) device |= plans[i].comm->device != NULL;
  if (device)
    BRAID_CHECK_GOTO(swap_bootstrap(plans, nplans, all), res, out);
  else
    BRAID_CHECK_GOTO(swap_inband(plans, nplans, all, mine), res, out);
  for (int i = 0; i < nplans; i++) {
    ncclResult_t v = verdict(plans[i].comm, all[i]);
    if (res == ncclSuccess) res = v;
  }
out:
  for (int i = 0; i < nplans; i++) {
    plans[i].comm->mismatch_seq++; /* every rank counts every group, checked or failed */
    if (all != NULL) free(all[i]);
  }
  free(all);
  free(mine);
  return res;
}
