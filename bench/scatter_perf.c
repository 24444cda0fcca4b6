/*
 * scatter_perf.c - ncclScatter, as nccl-tests' scatter_perf: chunk r of the root's buffer
 * (count/n elements, rounded down to 16 bytes) reaches rank r. algbw = total/t,
 * busbw = algbw * (n-1)/n.
 */
#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  size_t chunk = bench_chunk(count, elt, nranks);
  c->recv = c->param = chunk;
  c->send = chunk * (size_t)nranks;
  c->send_inplace = 0;
  c->recv_inplace = chunk; /* in place, rank r receives into chunk r of the root's layout */
}

static void init_data(const struct bench_rank_data* d) {
  size_t chunk = d->counts.recv;
  bench_zero(d, d->recv, d->counts.recv);
  if (d->rank == d->root) bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->root);
  bench_input(d, d->expected, chunk, (size_t)d->rank * chunk, d->root);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  *algbw = (double)(count * elt * (size_t)nranks) / 1.0e9 / sec;
  *busbw = *algbw * (double)(nranks - 1) / nranks;
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclScatter(sendbuff, recvbuff, count, type, root, comm, bench_stream());
}

const struct bench_coll bench_coll = {"Scatter", 0, 1, 1, get_counts, init_data, get_bw, run};
