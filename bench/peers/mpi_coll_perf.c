/*
 * mpi_coll_perf.c - the MPI library under the peer program (peer.h, peer_main.c): built with
 * Open MPI's mpicc, and with mpicc.mpich when MPICH is installed (bench/peers/build.sh). Each
 * operation is the MPI collective: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Sendrecv to rank+1.
 *
 *   mpirun -np 2 build/bench/mpi_coll_perf all_reduce -b 8 -e 256M -f 2
 *
 * In place means MPI_IN_PLACE; reduce_scatter's in-place result is at the start of the buffer
 * (MPI's rule) and out-of-place broadcast copies the root's send buffer to its receive buffer
 * first (ncclBroadcast's semantics). Open MPI 4.1's AVX reduction component saturates 8-bit
 * integer sums instead of wrapping (open-mpi/ompi#8045, "wontfix"), so `-d int8 -o sum`
 * reports wrong elements there.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "peer.h"
#include "verify.h"

/* MPI datatype of each ncclDataType_t, MPI_DATATYPE_NULL where MPI has none. */
static MPI_Datatype mpi_type(int dt) {
  switch (dt) {
    case 0:
      return MPI_INT8_T;
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_INT32_T;
    case 3:
      return MPI_UINT32_T;
    case 4:
      return MPI_INT64_T;
    case 5:
      return MPI_UINT64_T;
    case 7:
      return MPI_FLOAT;
    case 8:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(int op) {
  switch (op) {
    case BENCH_OP_PROD:
      return MPI_PROD;
    case BENCH_OP_MAX:
      return MPI_MAX;
    case BENCH_OP_MIN:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

static int rank_, nranks_;

static int mpi_init(int* argc, char*** argv, int* rank, int* nranks) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, nranks);
  rank_ = *rank;
  nranks_ = *nranks;
  return 0;
}

static void mpi_version(char* buf, size_t len) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen = 0;
  MPI_Get_library_version(v, &vlen);
  v[strcspn(v, ",\n")] = '\0';
  snprintf(buf, len, "%s", v);
}

static const char* mpi_lacks(int coll, int dt, int op) {
  (void)coll;
  (void)op;
  return mpi_type(dt) == MPI_DATATYPE_NULL ? "MPI has no such datatype" : NULL;
}

static int mpi_run(int coll, const void* send, void* recv, size_t count, size_t elt, int dt, int op, int root,
                   int in_place) {
  int n = (int)count, me = rank_;
  MPI_Datatype t = mpi_type(dt);
  MPI_Op mop = mpi_op(op);
  MPI_Comm w = MPI_COMM_WORLD;
  int rc;
  switch (coll) {
    case PEER_ALL_REDUCE:
      rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, n, t, mop, w);
      break;
    case PEER_ALL_GATHER:
      rc = in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, w)
                    : MPI_Allgather(send, n, t, recv, n, t, w);
      break;
    case PEER_REDUCE_SCATTER:
      rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, n, t, mop, w);
      break;
    case PEER_BROADCAST:
      if (me == root && !in_place) memcpy(recv, send, count * elt);
      rc = MPI_Bcast(recv, n, t, root, w);
      break;
    case PEER_REDUCE:
      rc = MPI_Reduce(in_place && me == root ? MPI_IN_PLACE : send, recv, n, t, mop, root, w);
      break;
    case PEER_ALLTOALL:
      rc = in_place ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, w)
                    : MPI_Alltoall(send, n, t, recv, n, t, w);
      break;
    case PEER_GATHER:
      rc = MPI_Gather(in_place && me == root ? MPI_IN_PLACE : send, n, t, recv, n, t, root, w);
      break;
    case PEER_SCATTER:
      rc = MPI_Scatter(send, n, t, in_place && me == root ? MPI_IN_PLACE : recv, n, t, root, w);
      break;
    default: {
      int next = (me + 1) % nranks_, prev = (me - 1 + nranks_) % nranks_;
      if (in_place)
        rc = MPI_Sendrecv_replace(recv, n, t, next, 0, prev, 0, w, MPI_STATUS_IGNORE);
      else
        rc = MPI_Sendrecv(send, n, t, next, 0, recv, n, t, prev, 0, w, MPI_STATUS_IGNORE);
    }
  }
  return rc != MPI_SUCCESS;
}

static void mpi_barrier(void) {
  MPI_Barrier(MPI_COMM_WORLD);
}
static void mpi_bcast_time(double* t) {
  MPI_Bcast(t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}
static void mpi_reduce_time(double* t, enum peer_time_op op) {
  MPI_Allreduce(MPI_IN_PLACE, t, 1, MPI_DOUBLE,
                op == PEER_TIME_MIN   ? MPI_MIN
                : op == PEER_TIME_MAX ? MPI_MAX
                                      : MPI_SUM,
                MPI_COMM_WORLD);
}
static void mpi_sum_i64(int64_t* v) {
  MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
}
static void mpi_gather_bytes(const void* mine, void* all, size_t len) {
  MPI_Gather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
}
static void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}
static void mpi_finalize(void) {
  MPI_Finalize();
}

const struct peer_lib peer_lib = {
    .name = "mpi",
    .max_count = INT_MAX,
    .rs_in_place_at_start = 1,
    .init = mpi_init,
    .version = mpi_version,
    .lacks = mpi_lacks,
    .lacks_size = NULL,
    .run = mpi_run,
    .barrier = mpi_barrier,
    .bcast_time = mpi_bcast_time,
    .reduce_time = mpi_reduce_time,
    .sum_i64 = mpi_sum_i64,
    .gather_bytes = mpi_gather_bytes,
    .abort = mpi_abort,
    .finalize = mpi_finalize,
};
