/*
 * fork.c - braid's -P N launch (see fork.h).
 *
 * Shared region: a header (abort flag, barrier generation and arrival count, the unique id)
 * followed by two result slots per process (double-buffered by exchange count, so a fast
 * process can write the next round while a slow one still reads this one) and one
 * BENCH_LINES_MAX block per process for the "#  Rank" lines.
 *
 * Waiting children poll the abort flag and their parent's pid, so a failure anywhere ends the
 * whole run instead of hanging it; the parent SIGKILLs whoever is stuck inside the library.
 */
#include "fork.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fail.h"
#include "report.h"

/* Seconds the parent lets the others wind down after a failure before SIGKILL. */
#define GRACE_SECONDS 5.0

struct bench_shm {
  int nprocs;
  pid_t parent;
  atomic_int abort;   /* set by the supervisor: stop now */
  atomic_ullong gen;  /* barrier generation */
  atomic_int arrived; /* processes in the current barrier */
  ncclUniqueId id;    /* written by process 0 before a barrier */
  double* dval;       /* [2][nprocs] */
  int64_t* ival;      /* [2][nprocs] */
  char* lines;        /* [nprocs][BENCH_LINES_MAX] */
};

static unsigned long exchange_count; /* this process's exchanges so far (slot parity) */

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A child that must stop because another process failed. */
static void abort_exit(struct bench_world* w) {
  fprintf(stderr, "process %d (pid %d): stopping, another process failed\n", w->proc, (int)getpid());
  fflush(stdout);
  fflush(stderr);
  _exit(BENCH_INTERNAL_ERROR);
}

static void wait_tick(struct bench_world* w, unsigned* spins) {
  if (atomic_load(&w->shm->abort) || getppid() != w->shm->parent) abort_exit(w);
  if (++*spins < 2000)
    sched_yield();
  else
    usleep(100);
}

void bench_shm_barrier(struct bench_world* w) {
  struct bench_shm* s = w->shm;
  unsigned long long gen = atomic_load(&s->gen);
  if (atomic_fetch_add(&s->arrived, 1) == s->nprocs - 1) {
    atomic_store(&s->arrived, 0); /* reset before release: the next barrier counts afresh */
    atomic_store(&s->gen, gen + 1);
    return;
  }
  unsigned spins = 0;
  while (atomic_load(&s->gen) == gen) wait_tick(w, &spins);
}

void bench_shm_exchange(struct bench_world* w, double* d, int64_t* i, enum bench_red red) {
  struct bench_shm* s = w->shm;
  int n = s->nprocs;
  double* dv = s->dval + (exchange_count & 1) * (unsigned long)n;
  int64_t* iv = s->ival + (exchange_count & 1) * (unsigned long)n;
  exchange_count++;
  dv[w->proc] = *d;
  iv[w->proc] = *i;
  bench_shm_barrier(w);
  double dacc = dv[0]; /* RANK0 keeps process 0's value */
  int64_t iacc = iv[0];
  for (int p = 1; p < n; p++) {
    iacc += iv[p];
    if (red == BENCH_RED_MIN)
      dacc = dv[p] < dacc ? dv[p] : dacc;
    else if (red == BENCH_RED_MAX)
      dacc = dv[p] > dacc ? dv[p] : dacc;
    else if (red != BENCH_RED_RANK0)
      dacc += dv[p];
  }
  *d = dacc;
  *i = iacc;
}

void bench_shm_bcast_id(struct bench_world* w, ncclUniqueId* id) {
  if (w->proc == 0) memcpy(&w->shm->id, id, sizeof(*id));
  bench_shm_barrier(w);
  if (w->proc != 0) memcpy(id, &w->shm->id, sizeof(*id));
  bench_shm_barrier(w); /* nobody reuses the region before everyone has read it */
}

void bench_shm_gather_lines(struct bench_world* w, const char* mine, char* all) {
  snprintf(w->shm->lines + (size_t)w->proc * BENCH_LINES_MAX, BENCH_LINES_MAX, "%s", mine);
  bench_shm_barrier(w);
  if (w->proc == 0) memcpy(all, w->shm->lines, (size_t)w->shm->nprocs * BENCH_LINES_MAX);
  bench_shm_barrier(w);
}

/* ---- the supervisor ---------------------------------------------------------------- */

static pid_t* children;
static int nchildren;

static void forward_signal(int sig) {
  for (int i = 0; i < nchildren; i++)
    if (children[i] > 0) kill(children[i], SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

static int child_index(pid_t pid) {
  for (int i = 0; i < nchildren; i++)
    if (children[i] == pid) return i;
  return -1;
}

/* Wait for every child; returns the exit status of the run. */
static int supervise(struct bench_shm* s) {
  int remaining = nchildren, status = 0, failed = -1, killed = 0;
  double fail_time = 0;
  while (remaining > 0) {
    int st;
    pid_t pid = waitpid(-1, &st, failed >= 0 ? WNOHANG : 0);
    if (pid == 0) { /* someone is still running after a failure */
      if (!killed && now_sec() - fail_time > GRACE_SECONDS) {
        fprintf(stderr, "%s: %d process(es) still running %.0f s after process %d failed; killing them\n",
                program_invocation_short_name, remaining, GRACE_SECONDS, failed);
        for (int i = 0; i < nchildren; i++)
          if (children[i] > 0) kill(children[i], SIGKILL);
        killed = 1;
      }
      usleep(20000);
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int idx = child_index(pid);
    if (idx < 0) continue;
    children[idx] = -1;
    remaining--;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
    if (failed >= 0) continue; /* report the first failure only */
    failed = idx;
    fail_time = now_sec();
    atomic_store(&s->abort, 1);
    if (WIFSIGNALED(st)) {
      status = 128 + WTERMSIG(st);
      fprintf(stderr, "%s: process %d (pid %d) was killed by signal %d (%s)\n", program_invocation_short_name, idx,
              (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else {
      status = WEXITSTATUS(st);
    }
  }
  fflush(stderr);
  return status;
}

/* Pin process p of nprocs to one CPU of those we may use (round robin), as mpirun does by
 * default for a few ranks: two ranks time-sharing a core would measure the scheduler, not the
 * library. With more ranks than CPUs (mpirun --oversubscribe binds nothing either) or
 * BENCH_NO_BIND=1 it leaves the scheduler free to place them. */
static void bind_to_core(int p, int nprocs) {
  cpu_set_t allowed, one;
  const char* nobind = getenv("BENCH_NO_BIND");
  if ((nobind != NULL && strcmp(nobind, "1") == 0) || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int n = CPU_COUNT(&allowed);
  if (n < 2 || n < nprocs) return;
  for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (k++ == p % n) {
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof(one), &one);
      return;
    }
  }
}

int bench_fork_start(struct bench_world* w, int nprocs) {
  if (nprocs > BENCH_FORK_MAX) {
    fprintf(stderr, "invalid value '%d' for 'nprocs' (at most %d)\n", nprocs, BENCH_FORK_MAX);
    return 255;
  }
  size_t n = (size_t)nprocs;
  size_t bytes = sizeof(struct bench_shm) + 2 * n * (sizeof(double) + sizeof(int64_t)) + n * BENCH_LINES_MAX;
  void* mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    fprintf(stderr, "%s: mmap of %zu shared bytes failed: %s\n", program_invocation_short_name, bytes, strerror(errno));
    return BENCH_INTERNAL_ERROR;
  }
  struct bench_shm* s = mem;
  s->nprocs = nprocs;
  s->parent = getpid();
  s->dval = (double*)(s + 1);
  s->ival = (int64_t*)(s->dval + 2 * n);
  s->lines = (char*)(s->ival + 2 * n);
  children = calloc(n, sizeof(pid_t));
  if (!children) return BENCH_INTERNAL_ERROR;
  nchildren = nprocs;
  fflush(stdout);
  fflush(stderr);
  for (int p = 0; p < nprocs; p++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "%s: fork failed: %s\n", program_invocation_short_name, strerror(errno));
      atomic_store(&s->abort, 1);
      nchildren = p;
      supervise(s);
      return BENCH_INTERNAL_ERROR;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM); /* the supervisor gone: stop too */
      bind_to_core(p, nprocs);
      if (getppid() != s->parent) _exit(BENCH_INTERNAL_ERROR);
      free(children);
      children = NULL;
      nchildren = 0;
      w->kind = BENCH_WORLD_FORK;
      w->shm = s;
      w->nprocs = w->total_procs = nprocs;
      w->proc = w->world_proc = w->local_rank = p;
      return 0;
    }
    children[p] = pid;
  }
  signal(SIGINT, forward_signal);
  signal(SIGTERM, forward_signal);
  signal(SIGHUP, forward_signal);
  exit(supervise(s));
}
