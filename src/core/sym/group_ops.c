/*
 * group_ops.c - one-sided calls and window registrations inside ncclGroupStart/End, run at the
 * outermost ncclGroupEnd as NCCL does (a group that posts a wait before its signal must not
 * block at the wait).
 *
 * Each call is checked when it is made (a bad argument fails the call, nothing is queued) and
 * queued per thread. At the group's end: registrations first, in call order (window ids are
 * agreed by that order; the registrations of several communicators run on one thread per
 * communicator, so one thread holding every rank of a communicator can register on all of
 * them in one group), then every put and signal in call order (a put still lands before its
 * signal), then the group's collectives, then the waits. Within a group NCCL gives its calls no
 * order among themselves; this order is the one in which no call waits for another of the same
 * group.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "core/sym/sym.h"

static __thread struct braid_sym_op *ops_head, *ops_tail;

ncclResult_t braid_sym_defer(const struct braid_sym_op* op) {
  struct braid_sym_op* q = malloc(sizeof(*q));
  ncclWaitSignalDesc_t* descs = NULL;
  if (q != NULL && op->kind == BRAID_SYM_OP_WAIT) descs = malloc((size_t)op->ndesc * sizeof(*descs));
  if (q == NULL || (op->kind == BRAID_SYM_OP_WAIT && descs == NULL)) {
    BRAID_WARN("ncclGroupEnd: out of memory queueing a one-sided call of the group");
    free(q);
    return ncclSystemError;
  }
  *q = *op;
  if (descs != NULL) q->descs = memcpy(descs, op->descs, (size_t)op->ndesc * sizeof(*descs));
  q->comm_gen = op->comm->handle_gen;
  q->next = NULL;
  if (ops_tail != NULL)
    ops_tail->next = q;
  else
    ops_head = q;
  ops_tail = q;
  return ncclSuccess;
}

static void op_free(struct braid_sym_op* op) {
  if (op->kind == BRAID_SYM_OP_WAIT) free(op->descs);
  free(op);
}

void braid_sym_group_drop(void) {
  while (ops_head != NULL) {
    struct braid_sym_op* op = ops_head;
    ops_head = op->next;
    op_free(op);
  }
  ops_tail = NULL;
}

int braid_sym_group_holds(const struct braid_comm* comm) {
  int n = 0;
  for (const struct braid_sym_op* op = ops_head; op != NULL; op = op->next) n += op->comm == comm;
  return n;
}

int braid_sym_group_holds_win(const struct ncclWindow_vidmem* win) {
  for (const struct braid_sym_op* op = ops_head; op != NULL; op = op->next)
    if (op->kind == BRAID_SYM_OP_PUT && op->win == win) return 1;
  return 0;
}

/* Every queued call's communicator is still the one it was queued on. */
static ncclResult_t check_comms(void) {
  for (const struct braid_sym_op* op = ops_head; op != NULL; op = op->next) {
    if (braid_comm_registry_valid(op->comm, op->comm_gen)) continue;
    BRAID_WARN(
        "ncclGroupEnd: comm %p, which a one-sided call or registration of this group was queued on, was "
        "destroyed or aborted before ncclGroupEnd",
        (void*)op->comm);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

/* One communicator's registrations, in call order (a thread of its own when there are several
 * communicators: their allgathers must progress together). */
struct reg_job {
  struct braid_comm* comm;
  struct braid_sym_op* head; /* the group's list; this job takes the ops of `comm` */
  pthread_t thread;
  int started;
};

static void* reg_job_run(void* arg) {
  struct reg_job* j = arg;
  for (struct braid_sym_op* op = j->head; op != NULL; op = op->next)
    if (op->kind == BRAID_SYM_OP_REGISTER && op->comm == j->comm) op->result = braid_sym_op_run(op);
  return NULL;
}

static ncclResult_t run_registrations(void) {
  struct reg_job* jobs = NULL;
  int njobs = 0, cap = 0;
  ncclResult_t res = ncclSuccess;
  for (struct braid_sym_op* op = ops_head; op != NULL; op = op->next) {
    if (op->kind != BRAID_SYM_OP_REGISTER) continue;
    int k = 0;
    while (k < njobs && jobs[k].comm != op->comm) k++;
    if (k < njobs) continue;
    if (njobs == cap) {
      struct reg_job* grown = realloc(jobs, (size_t)(cap = cap ? 2 * cap : 4) * sizeof(*jobs));
      if (grown == NULL) {
        free(jobs);
        BRAID_WARN("ncclGroupEnd: out of memory running the group's window registrations");
        return ncclSystemError;
      }
      jobs = grown;
    }
    jobs[njobs++] = (struct reg_job){op->comm, ops_head, 0, 0};
  }
  if (njobs == 1) reg_job_run(&jobs[0]);
  for (int k = 0; njobs > 1 && k < njobs; k++) {
    jobs[k].started = pthread_create(&jobs[k].thread, NULL, reg_job_run, &jobs[k]) == 0;
    if (!jobs[k].started) {
      BRAID_WARN("ncclGroupEnd: cannot start a thread for comm %p's window registrations", (void*)jobs[k].comm);
      for (struct braid_sym_op* op = ops_head; op != NULL; op = op->next)
        if (op->kind == BRAID_SYM_OP_REGISTER && op->comm == jobs[k].comm) op->result = ncclSystemError;
    }
  }
  for (int k = 0; njobs > 1 && k < njobs; k++)
    if (jobs[k].started) pthread_join(jobs[k].thread, NULL);
  free(jobs);
  for (struct braid_sym_op* op = ops_head; op != NULL; op = op->next)
    if (op->kind == BRAID_SYM_OP_REGISTER && op->result != ncclSuccess && res == ncclSuccess) res = op->result;
  return res;
}

ncclResult_t braid_sym_group_begin(void) {
  if (ops_head == NULL) return ncclSuccess;
  ncclResult_t res = check_comms();
  if (res == ncclSuccess) res = run_registrations();
  for (struct braid_sym_op* op = ops_head; res == ncclSuccess && op != NULL; op = op->next)
    if (op->kind == BRAID_SYM_OP_PUT || op->kind == BRAID_SYM_OP_SIGNAL) res = braid_sym_op_run(op);
  if (res != ncclSuccess) braid_sym_group_drop();
  return res;
}

ncclResult_t braid_sym_group_finish(void) {
  ncclResult_t res = ncclSuccess;
  for (struct braid_sym_op* op = ops_head; res == ncclSuccess && op != NULL; op = op->next)
    if (op->kind == BRAID_SYM_OP_WAIT) res = braid_sym_op_run(op);
  braid_sym_group_drop();
  return res;
}
