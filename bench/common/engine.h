/*
 * engine.h - the measuring loop of the benchmarks, per thread, as nccl-tests' TimeTest and
 * BenchTime: warm up every size, then for each size time `iters` x `agg_iters` calls out of
 * place and in place, combine the time over all threads of the job (-a), check the result
 * (-c) and print one row. main.c sets up processes, buffers and communicators around it.
 */
#ifndef BENCH_ENGINE_H
#define BENCH_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "bench.h"
#include "fail.h"
#include "gpu.h"
#include "opts.h"
#include "world.h"

/* State of one process, shared by its threads. */
struct bench_run {
  const struct bench_opts* o;
  const struct bench_coll* coll;
  struct bench_world* w;
  int nranks;       /* nprocs x nthreads x ngpus */
  size_t min_bytes; /* -b, at most max_bytes */
  size_t max_bytes; /* -e, after the memory limit */
  ncclUniqueId id;
  ncclComm_t* comms; /* nthreads x ngpus, thread-major */
  char** send;       /* per local rank, max_bytes each: host memory (GPU mode: staging) */
  char** recv;
  char** expected;
  struct bench_gpu gpu;  /* gpu.rt NULL: host mode */
  char** dsend;          /* the buffers the calls get: device memory in GPU mode, else send */
  char** drecv;          /* ... else recv */
  int* devs;             /* per local rank: its CUDA device (GPU mode) */
  cudaStream_t* streams; /* per local rank: its stream (GPU mode; NULL in host mode) */
  int shared_device;     /* GPU mode: two local ranks use one device (the NULL stream would deadlock) */
  void** send_reg;       /* -R handles (ncclCommRegister or window) */
  void** recv_reg;
  struct bench_thread* threads;
  atomic_int corrupt;     /* BRAID_BENCH_CORRUPT: checks left to corrupt on rank 0 */
  int die_proc;           /* BRAID_BENCH_DIE: this process kills itself (-1: none) */
  int print_table_header; /* thread 0 prints the table header (COMM mode with -p) */
};

/* One thread of a process and the ngpus ranks it drives. */
struct bench_thread {
  struct bench_run* run;
  struct bench_member m; /* its place in combinations */
  int thread;
  int is_main;       /* thread 0 of process 0: prints */
  int first_rank;    /* global rank of comms[0] */
  ncclComm_t* comms; /* ngpus communicators */
  char **send, **recv, **expected;
  char **dsend, **drecv; /* what the calls get (device buffers in GPU mode) */
  int* devs;
  cudaStream_t* streams;
  /* The current message (nccl-tests' setupArgs). */
  struct bench_counts counts;
  size_t elt;
  /* Results of this thread. */
  int errors;    /* checks that found wrong elements on its ranks */
  double bw_sum; /* sum of busbw over printed results */
  int bw_count;
  int rep; /* check seed */
  pthread_t tid;
  _Atomic double busy_since; /* -T: when the current blocking call began (0: idle) */
};

/* Create communicators comms[0..n) for global ranks first_rank.. in one group. */
enum bench_result bench_comms_init(struct bench_run* r, ncclComm_t* comms, int n, int first_rank);
/* Register (or window-register) each rank's buffers with its communicator (-R). */
enum bench_result bench_buffers_register(struct bench_run* r, int first, int n);
/* A thread's whole run: communicators (with -p), then every type x op x root. Exits the
 * process with the failure's status if anything fails. */
void* bench_thread_main(void* arg);

#endif /* BENCH_ENGINE_H */
