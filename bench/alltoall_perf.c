/*
 * alltoall_perf.c - ncclAlltoAll, as nccl-tests' alltoall_perf: each rank sends chunk p of
 * count/n elements (rounded down to 16 bytes) to rank p; the size column is the per-rank
 * total, algbw = total/t, busbw = algbw * (n-1)/n. As in nccl-tests, in-place results are not
 * checked (#wrong N/A): nccl-tests does not support alltoall in place.
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  c->param = bench_chunk(count, elt, nranks);
  c->send = c->recv = c->param * (size_t)nranks;
  c->send_inplace = c->recv_inplace = 0;
}

static void init_data(const struct bench_rank_data* d) {
  size_t chunk = d->counts.param;
  bench_zero(d, d->recv, d->counts.recv);
  bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->rank);
  /* Chunk r of the result is chunk `rank` of rank r's input. */
  for (int r = 0; r < d->nranks; r++)
    bench_input(d, d->expected + (size_t)r * chunk * d->elt, chunk, (size_t)d->rank * chunk, r);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt * (size_t)nranks) / 1.0e9 / sec;
  *busbw = *algbw * (double)(nranks - 1) / nranks;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclAlltoAll(sendbuff, recvbuff, count, type, comm, bench_stream());
}

const struct bench_coll bench_coll = {"AlltoAll", 0, 0, 0, get_counts, init_data, get_bw, run};
