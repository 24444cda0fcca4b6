/*
 * host.c - the host executor: runs work items on host threads with the very code the CUDA
 * kernels run (coll.h -> algo/ + prims.h -> reduce.h, compiled here by gcc through simt.h).
 *
 * A call with one job (one communicator, one channel) runs on the calling thread: no
 * hand-off, so a small collective costs only its own steps. More jobs go to pool workers,
 * one each, since every job may spin on its peers and must make progress independently; the
 * caller runs the first job itself, then waits for the rest. Workers park on a condition
 * variable between calls; the pool lives while any communicator does.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "base/check.h"
#include "base/param.h"
#include "kernels/reduce_isa.h"
/* Slot-sized reductions and copies go through the loops chosen for this CPU (SSE2 or AVX2,
 * bit-identical); one indirect call per chunk, as HD_NOFORCE already costs a call. */
#define BRAID_REDUCE_COPY braid_reduce_copy_host
#include "kernels/coll.h"
#include "kernels/executor.h"

struct worker {
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  struct braid_host_job* job; /* assigned work, NULL while idle (under mutex) */
  int stop;
  struct worker* next; /* idle list / all-workers list */
};

int braid_spin_before_yield = BRAID_SPIN_BEFORE_YIELD;
int braid_spin_before_sleep = BRAID_SPIN_BEFORE_HOST_SLEEP;

static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct worker* idle; /* workers ready for a job */
static int pool_refs;

struct worker_link {
  struct worker* w;
  struct worker_link* next;
};
static struct worker_link* all_workers;

/* A collective's whole output (not a p2p op's: those are copied by host_fetch or the FIFO):
 * written with streaming stores when large (reduce_stream.c). */
static void stream_open(const struct braid_work* w) {
  int es = braid_dtype_size(w->dtype);
  if (w->func == BRAID_FUNC_SendRecv || w->recvbuff == NULL || es <= 0) return;
  size_t parts = w->func == BRAID_FUNC_AllGather ? (size_t)w->nranks : 1, bytes = w->count * parts * (size_t)es;
  const char *out = w->recvbuff, *in = w->sendbuff;
  size_t in_bytes = w->count * (w->func == BRAID_FUNC_ReduceScatter ? (size_t)w->nranks : 1) * (size_t)es;
  /* In place the output's lines were just read as input: streaming them was slower in every
   * round measured (docs/notes/2026-12-01-perf4.md), so only out-of-place outputs stream. */
  if (in != NULL && in < out + bytes && out < in + in_bytes) return;
  braid_reduce_stream_open(w->recvbuff, bytes, es);
}

/* A work item ends when its last direct send completed (kernels/direct.h): the call must not
 * return while the net plugin may still read the user's buffers, nor, when it failed, while
 * a receive may still write into them (braid_direct_abandon). */
static void run_job(struct braid_host_job* job) {
  struct braid_prims prims;
  struct braid_direct direct;
  direct.npend = 0;
  direct.nrpend = 0;
  prims.direct = &direct;
  prims.ops = NULL; /* p2p ops are in host memory already: used in place */
  prims.ops_cap = 0;
  prims.variant = 0;
  struct braid_idle_copies idle = {job->copies, job->ncopies, 0, 0, job->copies_any_wait};
  prims.idle = job->ncopies > 0 ? &idle : NULL;
  job->status = BRAID_EXEC_OK;
  for (int i = 0; i < job->nworks && job->status == BRAID_EXEC_OK; i++) {
    /* AllReduce overwrites every output chunk after its reduce phase: partials may go there. */
    direct.scratch_out = job->works[i].func == BRAID_FUNC_AllReduce;
    /* The 2-rank ring all-reduce: each rank may write its reduced chunks into the peer's output
     * too (kernels/direct.h, pushed all-reduce), which then skips its all-gather copy. */
    direct.pair_push = direct.scratch_out && job->works[i].nranks == 2 && job->works[i].algo == BRAID_ALGO_RING &&
                       !job->works[i].exchange && braid_param_int(BRAID_PARAM_SHM_PUSH) != 0;
    direct.gather_store = braid_param_int(BRAID_PARAM_GATHER_STORE) != 0;
    /* A Reduce's chain over shm sends through the slot (kernels/direct.h, slot_sends). */
    direct.slot_sends = job->works[i].func == BRAID_FUNC_Reduce && !job->works[i].split &&
                        braid_param_int(BRAID_PARAM_SHM_DIRECT_REDUCE) == 0;
    direct.gather_op = 0; /* set per step by the p2p ops (braid_direct_p2p_op) */
    stream_open(&job->works[i]);
    job->status = braid_run_work(&prims, &job->works[i], job->ch, job->abort_flag);
    braid_reduce_stream_close();
    if (job->status == BRAID_EXEC_OK) {
      braid_idle_copy_finish(prims.idle); /* before the drain: the peers may still be reading */
      job->status = braid_direct_drain(&direct, job->abort_flag);
    } else {
      direct.npend = 0;
      braid_direct_abandon(&direct);
    }
  }
  __atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
}

static void* worker_main(void* arg) {
  struct worker* w = arg;
  pthread_mutex_lock(&w->mutex);
  for (;;) {
    while (w->job == NULL && !w->stop) pthread_cond_wait(&w->cond, &w->mutex);
    if (w->stop) break;
    struct braid_host_job* job = w->job;
    pthread_mutex_unlock(&w->mutex);
    run_job(job);
    pthread_mutex_lock(&w->mutex);
    w->job = NULL;
  }
  pthread_mutex_unlock(&w->mutex);
  return NULL;
}

/* An idle worker, or a new one. Called with pool_mutex held. */
static ncclResult_t take_worker(struct worker** w_p) {
  ncclResult_t res = ncclSuccess;
  struct worker* w = idle;
  struct worker_link* link = NULL;
  if (w != NULL) {
    idle = w->next;
    *w_p = w;
    return ncclSuccess;
  }
  BRAID_CALLOC_GOTO(w, 1, res, err);
  BRAID_CALLOC_GOTO(link, 1, res, err_free);
  pthread_mutex_init(&w->mutex, NULL);
  pthread_cond_init(&w->cond, NULL);
  BRAID_PTHREADCHECK_GOTO(pthread_create(&w->thread, NULL, worker_main, w), "pthread_create", res, err_link);
  link->w = w;
  link->next = all_workers;
  all_workers = link;
  *w_p = w;
  return ncclSuccess;
err_link:
  free(link);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->mutex);
err_free:
  free(w);
err:
  return res;
}

static void give_job(struct worker* w, struct braid_host_job* job) {
  pthread_mutex_lock(&w->mutex);
  w->job = job;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->mutex);
}

/* Spin briefly, then yield: the job may be waiting on this very core's other threads. */
static void wait_done(struct braid_host_job* job) {
  uint32_t spins = 0;
  while (!__atomic_load_n(&job->done, __ATOMIC_ACQUIRE)) simt_spin_pause(&spins);
}

ncclResult_t braid_host_run(struct braid_host_job* jobs, int njobs) {
  ncclResult_t res = ncclSuccess;
  struct worker* stack_workers[16];
  struct worker** workers = njobs <= 16 ? stack_workers : calloc(njobs, sizeof(*workers));
  if (workers == NULL) {
    BRAID_WARN("Failed to allocate %d worker slots", njobs);
    return ncclSystemError;
  }
  if (njobs == 1) { /* the common small case: no pool, no lock */
    run_job(&jobs[0]);
    return ncclSuccess;
  }
  for (int i = 0; i < njobs; i++) jobs[i].done = 0;
  int started = 1;
  pthread_mutex_lock(&pool_mutex);
  for (; started < njobs; started++)
    if ((res = take_worker(&workers[started])) != ncclSuccess) break;
  pthread_mutex_unlock(&pool_mutex);
  if (res != ncclSuccess) {
    /* Could not start them all: run nothing (a partial run could wait forever on a peer). */
    pthread_mutex_lock(&pool_mutex);
    for (int i = 1; i < started; i++) {
      workers[i]->next = idle;
      idle = workers[i];
    }
    pthread_mutex_unlock(&pool_mutex);
    goto out;
  }
  for (int i = 1; i < njobs; i++) give_job(workers[i], &jobs[i]);
  run_job(&jobs[0]);
  for (int i = 1; i < njobs; i++) wait_done(&jobs[i]);
  pthread_mutex_lock(&pool_mutex);
  for (int i = 1; i < njobs; i++) {
    /* The worker clears its job under its own mutex right after `done`; wait for that. */
    pthread_mutex_lock(&workers[i]->mutex);
    while (workers[i]->job != NULL) {
      pthread_mutex_unlock(&workers[i]->mutex);
      sched_yield();
      pthread_mutex_lock(&workers[i]->mutex);
    }
    pthread_mutex_unlock(&workers[i]->mutex);
    workers[i]->next = idle;
    idle = workers[i];
  }
  pthread_mutex_unlock(&pool_mutex);
out:
  if (workers != stack_workers) free(workers);
  return res;
}

void braid_host_pool_retain(void) {
  int64_t spins = braid_param_int(BRAID_PARAM_SPIN_COUNT);
  pthread_mutex_lock(&pool_mutex);
  int64_t sleep_after = braid_param_int(BRAID_PARAM_SPIN_SLEEP_AFTER);
  if (spins >= 0 && spins <= 1 << 30) braid_spin_before_yield = (int)spins;
  if (sleep_after >= 0 && sleep_after <= 1 << 30) braid_spin_before_sleep = (int)sleep_after;
  pool_refs++;
  pthread_mutex_unlock(&pool_mutex);
}

void braid_host_pool_release(void) {
  pthread_mutex_lock(&pool_mutex);
  if (--pool_refs > 0) {
    pthread_mutex_unlock(&pool_mutex);
    return;
  }
  struct worker_link* list = all_workers;
  all_workers = NULL;
  idle = NULL;
  pthread_mutex_unlock(&pool_mutex);
  while (list != NULL) {
    struct worker_link* link = list;
    struct worker* w = link->w;
    list = link->next;
    pthread_mutex_lock(&w->mutex);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mutex);
    free(w);
    free(link);
  }
}
