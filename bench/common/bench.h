/*
 * bench.h - what one benchmark program (bench/<coll>_perf.c) tells the shared engine in
 * bench/common/: how to size its buffers, how to fill inputs and the expected result, how
 * bandwidth is computed, and how to call the collective. Mirrors nccl-tests' per-collective
 * files; everything else (flags, launch, timing, checking, output) lives in the engine.
 *
 * Each *_perf.c defines exactly one `const struct bench_coll bench_coll`.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stddef.h>
#include <string.h>

#include "nccl.h"
#include "verify.h"

/* Element counts of one rank for one message size, as nccl-tests' getCollByteCount. */
struct bench_counts {
  size_t send;         /* elements in the send buffer */
  size_t recv;         /* elements in the receive buffer (= checked against expected) */
  size_t param;        /* the count argument of the NCCL call */
  size_t send_inplace; /* in place: sendbuff = recvbuff + send_inplace * rank elements */
  size_t recv_inplace; /* in place: recvbuff = recvbuff + recv_inplace * rank elements */
};

/* One rank's buffers while its inputs and expected result are prepared. */
struct bench_rank_data {
  const struct bench_gen* gen; /* datatype, op, nranks, seed */
  int rank, nranks, root, in_place;
  size_t elt; /* bytes per element */
  struct bench_counts counts;
  char* send;     /* send buffer (unused in place) */
  char* recv;     /* receive buffer; in place it also holds the input */
  char* expected; /* counts.recv elements the checked region must equal */
};

struct bench_coll {
  const char* name;   /* e.g. "AllReduce" */
  int ops;            /* 0: no op, the redop column says "none"; 1: a reduction, iterate
                       * -o ops; 2: iterate and print -o ops but only move data (sendrecv,
                       * as nccl-tests) */
  int rooted;         /* 1: iterate -r roots (-1 = all); 0: the root column says -1 */
  int check_in_place; /* 0: in-place results are not checked, #wrong says N/A (alltoall and
                       * sendrecv: nccl-tests does not support them in place) */
  /* Counts for a message of `count` elements of `elt` bytes on `nranks` ranks. */
  void (*get_counts)(struct bench_counts* c, size_t count, size_t elt, int nranks);
  /* Fill d->send or d->recv with this rank's input, and d->expected. */
  void (*init_data)(const struct bench_rank_data* d);
  /* nccl-tests' bandwidths for `count` = counts.param elements taking `sec` seconds. */
  void (*get_bw)(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw);
  /* One call on one rank. Pass bench_stream() as the stream: the rank's stream in GPU mode,
   * NULL in host mode. */
  ncclResult_t (*run)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                      ncclComm_t comm);
};

extern const struct bench_coll bench_coll;

/* The engine's stream for the call being made (engine.c). Weak, so the programs that link the
 * *_perf.c files without the engine (the MPI peer) see NULL. */
cudaStream_t bench_engine_stream(void) __attribute__((weak));
/* The stream argument of every NCCL call in bench_coll.run: the calling rank's stream in GPU
 * mode, NULL in host mode. */
static inline cudaStream_t bench_stream(void) {
  return bench_engine_stream ? bench_engine_stream() : NULL;
}

/* Helpers for init_data. Input of `rank` at indices offset.. into dst. */
static inline void bench_input(const struct bench_rank_data* d, void* dst, size_t count, size_t offset, int rank) {
  bench_gen_input(d->gen, dst, count, offset, rank);
}
/* The reduction over all ranks of their inputs at indices offset.. into dst. */
static inline void bench_reduced(const struct bench_rank_data* d, void* dst, size_t count, size_t offset) {
  bench_gen_expected(d->gen, dst, count, offset);
}
/* Zero `count` elements. */
static inline void bench_zero(const struct bench_rank_data* d, void* dst, size_t count) {
  memset(dst, 0, count * d->elt);
}
/* nccl-tests' per-rank chunk for all_gather, reduce_scatter, alltoall, gather, scatter:
 * count / nranks rounded down to a multiple of 16 bytes. */
static inline size_t bench_chunk(size_t count, size_t elt, int nranks) {
  return (count / (size_t)nranks) & ~(16 / elt - 1);
}

#endif /* BENCH_BENCH_H */
