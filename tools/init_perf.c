/*
 * init_perf - how long N local ranks (processes) take to create a communicator, and to
 * destroy it. A benchmark, not a test: it reports what it measured.
 *
 *   build/bin/init_perf [-n NRANKS] [-r REPEATS] [-t]     (-t: ranks as threads of one process)
 *
 * Each repeat: the parent makes a unique id, starts the ranks, releases them at once and
 * measures from that moment to the last rank's return from ncclCommInitRank (init) and from
 * the start of ncclCommDestroy to the last rank's return (destroy). Prints every repeat and
 * the median.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define MAX_RANKS 256

struct shared {
  volatile int go;
  volatile int ready;
  double start;
  double init_done[MAX_RANKS];
  double destroy_start[MAX_RANKS];
  double destroy_done[MAX_RANKS];
  int failed;
  ncclUniqueId id;
  int nranks;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void run_rank(struct shared* sh, int rank) {
  ncclComm_t comm;
  __atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
  while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE)) { /* spin: released all at once */
  }
  ncclResult_t res = ncclCommInitRank(&comm, sh->nranks, sh->id, rank);
  sh->init_done[rank] = now();
  if (res != ncclSuccess) {
    fprintf(stderr, "init_perf: rank %d: ncclCommInitRank failed: %s\n", rank, ncclGetErrorString(res));
    sh->failed = 1;
    return;
  }
  sh->destroy_start[rank] = now();
  ncclCommDestroy(comm);
  sh->destroy_done[rank] = now();
}

struct thread_arg {
  struct shared* sh;
  int rank;
};
static void* thread_rank(void* p) {
  struct thread_arg* a = p;
  run_rank(a->sh, a->rank);
  return NULL;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int n = 8, repeats = 11, threads = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else if (strcmp(argv[i], "-t") == 0)
      threads = 1;
    else {
      fprintf(stderr, "usage: init_perf [-n NRANKS] [-r REPEATS] [-t]\n");
      return 2;
    }
  }
  if (n < 1 || n > MAX_RANKS || repeats < 1) {
    fprintf(stderr, "init_perf: -n must be 1..%d and -r >= 1\n", MAX_RANKS);
    return 2;
  }
  struct shared* sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  double* init_t = calloc(repeats, sizeof(double));
  double* destroy_t = calloc(repeats, sizeof(double));
  printf("# init_perf: %d ranks as %s, %d repeats (ms)\n", n, threads ? "threads" : "processes", repeats);
  printf("#  repeat      init   destroy\n");
  for (int r = 0; r < repeats; r++) {
    memset(sh, 0, sizeof(*sh));
    sh->nranks = n;
    if (ncclGetUniqueId(&sh->id) != ncclSuccess) {
      fprintf(stderr, "init_perf: ncclGetUniqueId failed\n");
      return 1;
    }
    pthread_t th[MAX_RANKS];
    struct thread_arg targ[MAX_RANKS];
    pid_t pids[MAX_RANKS];
    for (int k = 0; k < n; k++) {
      if (threads) {
        targ[k] = (struct thread_arg){sh, k};
        pthread_create(&th[k], NULL, thread_rank, &targ[k]);
      } else if ((pids[k] = fork()) == 0) {
        run_rank(sh, k);
        _exit(sh->failed);
      }
    }
    while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < n) usleep(100);
    usleep(1000);
    sh->start = now();
    __atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < n; k++) {
      if (threads)
        pthread_join(th[k], NULL);
      else
        waitpid(pids[k], NULL, 0);
    }
    if (sh->failed) return 1;
    double last_init = 0, first_destroy = 1e30, last_destroy = 0;
    for (int k = 0; k < n; k++) {
      if (sh->init_done[k] > last_init) last_init = sh->init_done[k];
      if (sh->destroy_start[k] < first_destroy) first_destroy = sh->destroy_start[k];
      if (sh->destroy_done[k] > last_destroy) last_destroy = sh->destroy_done[k];
    }
    init_t[r] = (last_init - sh->start) * 1e3;
    destroy_t[r] = (last_destroy - first_destroy) * 1e3;
    printf("  %7d  %8.2f  %8.2f\n", r, init_t[r], destroy_t[r]);
  }
  qsort(init_t, repeats, sizeof(double), cmp);
  qsort(destroy_t, repeats, sizeof(double), cmp);
  printf("# median: init %.2f ms, destroy %.2f ms (%d ranks, %s)\n", init_t[repeats / 2], destroy_t[repeats / 2], n,
         threads ? "threads" : "processes");
  return 0;
}
