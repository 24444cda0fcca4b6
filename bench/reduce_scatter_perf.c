/*
 * reduce_scatter_perf.c - ncclReduceScatter, as nccl-tests' reduce_scatter_perf: each rank
 * reduces n chunks of count/n elements (rounded down to 16 bytes) and keeps its own; the size
 * column is the input total, algbw = total/t, busbw = algbw * (n-1)/n.
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  size_t chunk = bench_chunk(count, elt, nranks);
  c->send = chunk * (size_t)nranks;
  c->recv = c->param = chunk;
  c->send_inplace = 0;
  c->recv_inplace = chunk; /* in place, rank r's result lands at chunk r of its input */
}

static void init_data(const struct bench_rank_data* d) {
  size_t chunk = d->counts.recv;
  bench_zero(d, d->recv, d->counts.recv);
  bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->rank);
  bench_reduced(d, d->expected, chunk, (size_t)d->rank * chunk);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt * (size_t)nranks) / 1.0e9 / sec;
  *busbw = *algbw * (double)(nranks - 1) / nranks;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclReduceScatter(sendbuff, recvbuff, count, type, op, comm, bench_stream());
}

const struct bench_coll bench_coll = {"ReduceScatter", 1, 0, 1, get_counts, init_data, get_bw, run};
