/*
 * reduce_perf.c - ncclReduce, as nccl-tests' reduce_perf: `count` elements of every rank are
 * reduced onto the root; other ranks' receive buffers must stay untouched. busbw = algbw.
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  c->send = c->recv = c->param = count;
  c->send_inplace = c->recv_inplace = 0;
}

static void init_data(const struct bench_rank_data* d) {
  bench_zero(d, d->recv, d->counts.recv);
  bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->rank);
  if (d->rank == d->root)
    bench_reduced(d, d->expected, d->counts.recv, 0);
  else
    memcpy(d->expected, d->recv, d->counts.recv * d->elt); /* unchanged */
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt) / 1.0e9 / sec;
  *busbw = *algbw;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclReduce(sendbuff, recvbuff, count, type, op, root, comm, bench_stream());
}

const struct bench_coll bench_coll = {"Reduce", 1, 1, 1, get_counts, init_data, get_bw, run};
