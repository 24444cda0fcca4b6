/*
 * gather_perf.c - ncclGather, as nccl-tests' gather_perf: every rank's chunk of count/n
 * elements (rounded down to 16 bytes) lands at chunk `rank` on the root; other ranks'
 * receive buffers must stay untouched. algbw = total/t, busbw = algbw * (n-1)/n.
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  size_t chunk = bench_chunk(count, elt, nranks);
  c->send = c->param = chunk;
  c->recv = chunk * (size_t)nranks;
  c->send_inplace = chunk;
  c->recv_inplace = 0;
}

static void init_data(const struct bench_rank_data* d) {
  size_t chunk = d->counts.send;
  bench_zero(d, d->recv, d->counts.recv);
  bench_input(d, d->in_place ? d->recv + (size_t)d->rank * chunk * d->elt : d->send, chunk, 0, d->rank);
  if (d->rank != d->root) {
    memcpy(d->expected, d->recv, d->counts.recv * d->elt); /* unchanged */
    return;
  }
  for (int r = 0; r < d->nranks; r++) bench_input(d, d->expected + (size_t)r * chunk * d->elt, chunk, 0, r);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt * (size_t)nranks) / 1.0e9 / sec;
  *busbw = *algbw * (double)(nranks - 1) / nranks;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclGather(sendbuff, recvbuff, count, type, root, comm, bench_stream());
}

const struct bench_coll bench_coll = {"Gather", 0, 1, 1, get_counts, init_data, get_bw, run};
