/*
 * sendrecv_perf.c - ncclSend/ncclRecv, as nccl-tests' sendrecv_perf: in one group every rank
 * sends `count` elements to rank+1 and receives from rank-1 (a ring shift); busbw = algbw.
 * As nccl-tests, it iterates and prints the -o ops (which do not affect it) and does not
 * check in-place results (#wrong N/A).
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  c->send = c->recv = c->param = count;
  c->send_inplace = c->recv_inplace = 0;
}

static void init_data(const struct bench_rank_data* d) {
  int from = (d->rank - 1 + d->nranks) % d->nranks;
  bench_zero(d, d->recv, d->counts.recv);
  bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->rank);
  bench_input(d, d->expected, d->counts.recv, 0, from);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt) / 1.0e9 / sec;
  *busbw = *algbw;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  int rank, nranks;
  ncclResult_t res = ncclCommUserRank(comm, &rank);
  if (res == ncclSuccess) res = ncclCommCount(comm, &nranks);
  if (res != ncclSuccess) return res;
  ncclGroupStart();
  ncclResult_t s = ncclSend(sendbuff, count, type, (rank + 1) % nranks, comm, bench_stream());
  ncclResult_t r = ncclRecv(recvbuff, count, type, (rank - 1 + nranks) % nranks, comm, bench_stream());
  res = ncclGroupEnd();
  return s != ncclSuccess ? s : r != ncclSuccess ? r : res;
}

const struct bench_coll bench_coll = {"SendRecv", 2, 0, 0, get_counts, init_data, get_bw, run};
