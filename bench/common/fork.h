/*
 * fork.h - braid's -P N launch (world_fork.c): N local processes forked before any NCCL
 * call, sharing one MAP_SHARED region for the unique id, a barrier, result exchange and the
 * device lines. The parent is only a supervisor: it waits for the children, and when one
 * fails or dies it raises an abort flag the others poll, kills whoever is still stuck after a
 * grace period, reports, and exits with the first failure's status (128+signal for a death).
 */
#ifndef BENCH_FORK_H
#define BENCH_FORK_H

#include <stdint.h>

#include "nccl.h"
#include "world.h"

/* Most processes -P accepts. */
#define BENCH_FORK_MAX 1024

/* Fork w->nprocs children; returns 0 in each child (w->proc, w->shm set). The parent does
 * not return. Nonzero: the fork could not start (message printed; exit status). */
int bench_fork_start(struct bench_world* w, int nprocs);

/* Process-level operations among the children. */
void bench_shm_barrier(struct bench_world* w);
/* In place: d combined by `red` (RANK0 means: process 0's value), i summed. */
void bench_shm_exchange(struct bench_world* w, double* d, int64_t* i, enum bench_red red);
/* Process 0's *id reaches everyone. */
void bench_shm_bcast_id(struct bench_world* w, ncclUniqueId* id);
/* Process 0 gets every process's block (BENCH_LINES_MAX each) in `all` (NULL elsewhere). */
void bench_shm_gather_lines(struct bench_world* w, const char* mine, char* all);

#endif /* BENCH_FORK_H */
