/*
 * world.h - how the ranks of one benchmark run find each other and combine their results.
 *
 * A run has P processes x T threads x G ranks; rank = (proc*T + thread)*G + g, as nccl-tests.
 * The processes come from one of four launches (bench_world_init picks):
 *   SINGLE  one process (no launcher, no -P);
 *   FORK    braid's -P N: this process forks N children that share a MAP_SHARED region
 *           (world_fork.c); the parent only supervises and exits with their status;
 *   MPI     `make MPI=1` builds: MPI_COMM_WORLD, ncclUniqueId by MPI_Bcast, results by
 *           MPI_Allreduce (as nccl-tests with MPI=1);
 *   COMM    a launcher's variables (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/
 *           NTASKS, RANK/WORLD_SIZE) with NCCL_COMM_ID: every process gets the same id from
 *           ncclGetUniqueId, and results travel through the benchmark's own communicators.
 *
 * Results are combined in two steps, like nccl-tests: the threads of a process meet under a
 * mutex, then one of them exchanges with the other processes. In COMM mode there is no
 * process-level channel, so every thread instead runs a small NCCL collective over its own
 * ranks (all ranks of the job take part, so the result is global).
 */
#ifndef BENCH_WORLD_H
#define BENCH_WORLD_H

#include <pthread.h>
#include <stdint.h>

#include "nccl.h"
#include "opts.h"

enum bench_world_kind { BENCH_WORLD_SINGLE, BENCH_WORLD_FORK, BENCH_WORLD_MPI, BENCH_WORLD_COMM };

/* How values from all threads are combined: nccl-tests' -a codes, plus SUM. */
enum bench_red { BENCH_RED_RANK0 = 0, BENCH_RED_AVG = 1, BENCH_RED_MIN = 2, BENCH_RED_MAX = 3, BENCH_RED_SUM = 4 };

struct bench_shm; /* world_fork.c */

struct bench_world {
  enum bench_world_kind kind;
  int nprocs, proc; /* processes sharing the NCCL communicators, and our index */
  int total_procs;  /* all processes of the launch (MPI: colors included) */
  int world_proc;   /* index among total_procs (prints when 0) */
  int local_rank;   /* index among the processes on this host */
  int color;        /* NCCL_TESTS_SPLIT group (MPI), else 0 */
  int nthreads;
  struct bench_shm* shm; /* FORK */
  void* mpi_comm;        /* MPI: the split communicator (MPI_Comm*) */
  /* Thread meeting point, double-buffered by epoch as nccl-tests' Allreduce. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int counter[2];
  double dacc[2];
  int64_t iacc[2];
};

/*
 * One participant in a combination: a thread (comms = its G communicators) or, before the
 * threads start and after they end, the whole process (comms = all T*G).
 */
struct bench_member {
  struct bench_world* w;
  int thread;        /* 0..T-1; -1 for the whole process */
  int epoch;         /* flips at each thread-level combination */
  ncclComm_t* comms; /* COMM mode: the communicators this member drives */
  int ncomms;
  int first_rank; /* global rank of comms[0] */
  char* scratch;  /* COMM mode: per-communicator staging, 64 bytes each */
};

/*
 * Decide the launch from `o` and the environment, start MPI or fork the -P children (the
 * parent never returns from here). 0 on success; on error a message was printed and the
 * return value is the exit status.
 */
int bench_world_init(struct bench_world* w, const struct bench_opts* o, int* argc, char*** argv);
void bench_world_finalize(struct bench_world* w);

/* The job's ncclUniqueId: created by process 0 and shared (COMM: from NCCL_COMM_ID). */
ncclResult_t bench_world_unique_id(struct bench_world* w, ncclUniqueId* id);

/* Members: thread = -1 for the process. Sets up the COMM-mode scratch. */
int bench_member_init(struct bench_member* m, struct bench_world* w, int thread, ncclComm_t* comms, int ncomms,
                      int first_rank);
void bench_member_free(struct bench_member* m);

/* All members of the job meet. */
void bench_barrier(struct bench_member* m);
/* Combine one double from every thread of the job; returns the result everywhere. */
double bench_allreduce_f64(struct bench_member* m, double v, enum bench_red red);
/* Sum one int64 from every member of the job. */
int64_t bench_allreduce_i64(struct bench_member* m, int64_t v);
/*
 * Process 0 receives the "#  Rank ..." blocks of every process, in rank order; it prints
 * them. Non-COMM worlds: called by the process member before communicators exist.
 * COMM worlds: called by members after communicators exist, one line per rank.
 */
void bench_print_device_lines(struct bench_member* m, const char* mine, int is_main);

#endif /* BENCH_WORLD_H */
