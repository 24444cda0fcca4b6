/*
 * broadcast_perf.c - ncclBroadcast, as nccl-tests' broadcast_perf: the root's `count`
 * elements reach every rank; busbw = algbw. -r picks the root (-1: every root in turn).
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  c->send = c->recv = c->param = count;
  c->send_inplace = c->recv_inplace = 0;
}

static void init_data(const struct bench_rank_data* d) {
  bench_zero(d, d->recv, d->counts.recv);
  if (d->rank == d->root) bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->root);
  bench_input(d, d->expected, d->counts.recv, 0, d->root);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt) / 1.0e9 / sec;
  *busbw = *algbw;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclBroadcast(sendbuff, recvbuff, count, type, root, comm, bench_stream());
}

const struct bench_coll bench_coll = {"Broadcast", 0, 1, 1, get_counts, init_data, get_bw, run};
