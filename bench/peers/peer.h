/*
 * peer.h - the collective library under a peer program of bench/compare.sh. peer_main.c is
 * the program (options, sizes, written buffers, timing, checks, output: the same as braid's
 * bench/<coll>_perf); each library implements this table in one file: mpi_coll_perf.c (Open
 * MPI, MPICH), gloo_coll_perf.cc (Gloo), oneccl_coll_perf.cc (Intel oneCCL).
 */
#ifndef BRAID_BENCH_PEER_H
#define BRAID_BENCH_PEER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The order of bench/compare.sh's collectives (and of peer_main.c's table). */
enum peer_coll {
  PEER_ALL_REDUCE,
  PEER_ALL_GATHER,
  PEER_REDUCE_SCATTER,
  PEER_BROADCAST,
  PEER_REDUCE,
  PEER_ALLTOALL,
  PEER_GATHER,
  PEER_SCATTER,
  PEER_SENDRECV,
  PEER_NCOLLS
};

/* What a time is reduced with across ranks (nccl-tests' -a: 0 rank 0's, 1 mean, 2 min, 3 max). */
enum peer_time_op { PEER_TIME_SUM, PEER_TIME_MIN, PEER_TIME_MAX };

struct peer_lib {
  const char* name;         /* program prefix: "mpi" -> mpi_all_reduce_perf in the header and footer */
  size_t max_count;         /* largest element count one call takes (MPI: INT_MAX) */
  int rs_in_place_at_start; /* an in-place reduce-scatter leaves the result at the buffer's
                             * start (MPI_IN_PLACE's rule), not at rank x count (NCCL's) */
  /* Joins the job (the library's own launcher or rendezvous); 0 on success. */
  int (*init)(int* argc, char*** argv, int* rank, int* nranks);
  void (*version)(char* buf, size_t len); /* "Open MPI v4.1.4", "Gloo (tcp, 127.0.0.1)" */
  /* NULL when the library has the collective for this bench datatype and op (BENCH_OP_NONE
   * for data movers), else the reason, printed once ("Gloo has no gather of int8"). */
  const char* (*lacks)(int coll, int dt, int op);
  /* NULL when a call of `count` elements of `elt` bytes works, else the reason: those sizes
   * are skipped (said once). May be NULL itself: every size works. */
  const char* (*lacks_size)(int coll, size_t count, size_t elt);
  /* One collective, laid out as the NCCL call of the same name (in place: send points into
   * recv as ncclXxx expects); 0 on success. elt: bytes per element. */
  int (*run)(int coll, const void* send, void* recv, size_t count, size_t elt, int dt, int op, int root, int in_place);
  void (*barrier)(void);
  void (*bcast_time)(double* t); /* rank 0's value everywhere */
  void (*reduce_time)(double* t, enum peer_time_op op);
  void (*sum_i64)(int64_t* v);
  /* Rank 0 receives every rank's `len` bytes, in rank order, into `all`. */
  void (*gather_bytes)(const void* mine, void* all, size_t len);
  void (*abort)(int code);
  void (*finalize)(void);
};

extern const struct peer_lib peer_lib;

#ifdef __cplusplus
}
#endif
#endif
