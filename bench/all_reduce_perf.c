/*
 * all_reduce_perf.c - ncclAllReduce, as nccl-tests' all_reduce_perf: every rank sends and
 * receives `count` elements; busbw = algbw * 2(n-1)/n ((n-1)/(n+1) under NCCL_ALGO=NVLS or
 * NVLSTree, as nccl-tests). The engine is in bench/common/.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void get_counts(struct bench_counts* c, size_t count, size_t elt, int nranks) {
  c->send = c->recv = c->param = count;
  c->send_inplace = c->recv_inplace = 0;
}

static void init_data(const struct bench_rank_data* d) {
  bench_zero(d, d->recv, d->counts.recv);
  bench_input(d, d->in_place ? d->recv : d->send, d->counts.send, 0, d->rank);
  bench_reduced(d, d->expected, d->counts.recv, 0);
}

static void get_bw(size_t count, size_t elt, double sec, int nranks, double* algbw, double* busbw) {
  const char* algo = getenv("NCCL_ALGO");
  int nvls = algo && (strcmp(algo, "NVLS") == 0 || strcmp(algo, "NVLSTREE") == 0);
  *algbw = (double)(count * elt) / 1.0e9 / sec;
  *busbw = *algbw * (nvls ? (double)(nranks - 1) / (nranks + 1) : 2.0 * (nranks - 1) / nranks);
}

static ncclResult_t run(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm) {
  return ncclAllReduce(sendbuff, recvbuff, count, type, op, comm, bench_stream());
}

const struct bench_coll bench_coll = {"AllReduce", 1, 0, 1, get_counts, init_data, get_bw, run};
