/*
 * gloo_coll_perf.cc - Gloo under the peer program (peer.h, peer_main.c): Gloo's TCP pairs
 * (what PyTorch's CPU backend uses between local processes: no shared memory), full mesh
 * over 127.0.0.1, met through a gloo::rendezvous::FileStore in $PEER_RENDEZVOUS_DIR; ranks
 * from $RANK and $WORLD_SIZE (bench/peers/launch.sh sets all three).
 *
 *   bench/peers/launch.sh 2 build/bench/gloo_coll_perf all_reduce -b 64K -e 64M -f 2
 *
 * Calls: gloo::allreduce, allgather, broadcast, reduce, alltoall, gather, scatter (the
 * options API); reduce_scatter is gloo::ReduceScatterHalvingDoubling (Gloo's only one, an
 * algorithm object that reduces in place in its input: out of place it works in the send
 * buffer, which it clobbers, and copies this rank's block (which it leaves at the start, as
 * MPI_IN_PLACE does, also in place) to the receive buffer; objects are
 * kept per buffer and size, as Gloo's users keep them); sendrecv is a pair of unbound
 * buffers (send to rank+1, receive from rank-1). Gloo has no in-place alltoall or sendrecv:
 * in place, those two receive into a scratch buffer and copy it back (the copy is timed).
 * Gloo's reduce uses every rank's output as its ring's workspace: a non-root's is scratch.
 */
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <typeinfo>
#include <vector>

#include "peer.h"

namespace {

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_NONE = 6 }; /* bench/common/verify.h's values */

std::shared_ptr<gloo::rendezvous::Context> ctx;
int rank_, nranks_;
std::vector<char> scratch;
/* reduce-scatter objects by buffer, count, op and element type */
std::map<std::tuple<void*, size_t, int, size_t>, std::unique_ptr<gloo::Algorithm>> rs_algos;

/* The element type T of a bench datatype: F(T) for the peer datatypes, 0 otherwise. */
#define BY_TYPE(dt, F)    \
  switch (dt) {           \
    case 0:               \
      return F(int8_t);   \
    case 1:               \
      return F(uint8_t);  \
    case 2:               \
      return F(int32_t);  \
    case 3:               \
      return F(uint32_t); \
    case 4:               \
      return F(int64_t);  \
    case 5:               \
      return F(uint64_t); \
    case 7:               \
      return F(float);    \
    case 8:               \
      return F(double);   \
    default:              \
      return 0;           \
  }

template <typename T>
gloo::AllreduceOptions::Func reduce_fn(int op) {
  void (*f)(void*, const void*, const void*, size_t) = &gloo::sum<T>;
  if (op == OP_PROD) f = &gloo::product<T>;
  if (op == OP_MAX) f = &gloo::max<T>;
  if (op == OP_MIN) f = &gloo::min<T>;
  return f;
}

template <typename T>
const gloo::ReductionFunction<T>* reduction(int op) {
  if (op == OP_PROD) return gloo::ReductionFunction<T>::product;
  if (op == OP_MAX) return gloo::ReductionFunction<T>::max;
  if (op == OP_MIN) return gloo::ReductionFunction<T>::min;
  return gloo::ReductionFunction<T>::sum;
}

char* scratch_of(size_t bytes) {
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

template <typename T>
int reduce_scatter(const void* send, void* recv, size_t n, int op, int in_place) {
  /* in place, send and recv are the whole buffer: the algorithm leaves this rank's block
   * at its start (rs_in_place_at_start, MPI_IN_PLACE's rule) */
  T* base = const_cast<T*>(static_cast<const T*>(send));
  auto key = std::make_tuple(static_cast<void*>(base), n, op, typeid(T).hash_code());
  auto& algo = rs_algos[key];
  if (!algo) {
    std::vector<int> counts(nranks_, (int)n);
    algo.reset(new gloo::ReduceScatterHalvingDoubling<T>(ctx, std::vector<T*>{base}, (int)(n * nranks_), counts,
                                                         reduction<T>(op)));
  }
  algo->run();
  if (!in_place) memcpy(recv, base, n * sizeof(T)); /* the result is at its start */
  return 0;
}

template <typename T>
int run_typed(int coll, const void* sendc, void* recv, size_t n, int op, int root, int in_place) {
  T* send = const_cast<T*>(static_cast<const T*>(sendc));
  T* out = static_cast<T*>(recv);
  switch (coll) {
    case PEER_ALL_REDUCE: {
      gloo::AllreduceOptions o(ctx);
      if (!in_place) o.setInput(send, n);
      o.setOutput(out, n);
      o.setReduceFunction(reduce_fn<T>(op));
      gloo::allreduce(o);
      return 0;
    }
    case PEER_ALL_GATHER: {
      gloo::AllgatherOptions o(ctx);
      if (!in_place) o.setInput(send, n);
      o.setOutput(out, n * nranks_);
      gloo::allgather(o);
      return 0;
    }
    case PEER_REDUCE_SCATTER:
      return reduce_scatter<T>(send, recv, n, op, in_place);
    case PEER_BROADCAST: {
      gloo::BroadcastOptions o(ctx);
      if (rank_ == root && !in_place) o.setInput(send, n);
      o.setOutput(out, n);
      o.setRoot(root);
      gloo::broadcast(o);
      return 0;
    }
    case PEER_REDUCE: {
      gloo::ReduceOptions o(ctx);
      if (!(in_place && rank_ == root)) o.setInput(send, n);
      /* Gloo's ring reduce writes every rank's output; NCCL's leaves a non-root's alone */
      o.setOutput(rank_ == root ? out : reinterpret_cast<T*>(scratch_of(n * sizeof(T))), n);
      o.setRoot(root);
      o.setReduceFunction(reduce_fn<T>(op));
      gloo::reduce(o);
      return 0;
    }
    case PEER_ALLTOALL: {
      gloo::AlltoallOptions o(ctx);
      T* in = send;
      if (in_place) in = reinterpret_cast<T*>(scratch_of(n * nranks_ * sizeof(T)));
      if (in_place) memcpy(in, out, n * nranks_ * sizeof(T));
      o.setInput(in, n * nranks_);
      o.setOutput(out, n * nranks_);
      gloo::alltoall(o);
      return 0;
    }
    case PEER_GATHER: {
      gloo::GatherOptions o(ctx);
      o.setInput(send, n); /* in place at the root: its slice of the output */
      if (rank_ == root) o.setOutput(out, n * nranks_);
      o.setRoot(root);
      gloo::gather(o);
      return 0;
    }
    case PEER_SCATTER: {
      gloo::ScatterOptions o(ctx);
      if (rank_ == root) {
        std::vector<T*> ins;
        for (int r = 0; r < nranks_; r++) ins.push_back(send + n * r);
        o.setInputs(ins, n);
      }
      o.setOutput(out, n); /* in place at the root: its slice of the input */
      o.setRoot(root);
      gloo::scatter(o);
      return 0;
    }
    default: {
      size_t bytes = n * sizeof(T);
      char* into = in_place ? scratch_of(bytes) : static_cast<char*>(recv);
      auto tx = ctx->createUnboundBuffer(send, bytes);
      auto rx = ctx->createUnboundBuffer(into, bytes);
      rx->recv((rank_ - 1 + nranks_) % nranks_, 0);
      tx->send((rank_ + 1) % nranks_, 0);
      rx->waitRecv();
      tx->waitSend();
      if (in_place) memcpy(recv, into, bytes);
      return 0;
    }
  }
}

int gloo_init(int*, char***, int* rank, int* nranks) {
  const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE"), *dir = getenv("PEER_RENDEZVOUS_DIR");
  if (!r || !w || !dir) {
    fprintf(stderr, "gloo_coll_perf: set RANK, WORLD_SIZE and PEER_RENDEZVOUS_DIR (bench/peers/launch.sh does)\n");
    return 1;
  }
  rank_ = atoi(r);
  nranks_ = atoi(w);
  if (nranks_ < 1 || rank_ < 0 || rank_ >= nranks_) {
    fprintf(stderr, "gloo_coll_perf: RANK %s of WORLD_SIZE %s\n", r, w);
    return 1;
  }
  try {
    gloo::transport::tcp::attr attr("127.0.0.1");
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    ctx = std::make_shared<gloo::rendezvous::Context>(rank_, nranks_);
    ctx->setTimeout(std::chrono::seconds(600));
    ctx->connectFullMesh(store, dev);
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo_coll_perf: rendezvous failed: %s\n", e.what());
    return 1;
  }
  *rank = rank_;
  *nranks = nranks_;
  return 0;
}

void gloo_version(char* buf, size_t len) {
  snprintf(buf, len, "Gloo (Debian libgloo, tcp pairs over 127.0.0.1)");
}

const char* gloo_lacks(int coll, int dt, int op) {
#define OK(T) 1
  auto has_type = [](int d) -> int { BY_TYPE(d, OK) };
#undef OK
  (void)coll;
  (void)op;
  return has_type(dt) ? nullptr : "Gloo peer: no such datatype";
}

/* Gloo 2022 (Debian 12's) divides by zero in allgather below 16 bytes per rank. */
const char* gloo_lacks_size(int coll, size_t count, size_t elt) {
  if (coll == PEER_ALL_GATHER && count * elt < 16) return "Gloo's allgather crashes (SIGFPE) below 16 bytes per rank";
  return nullptr;
}

int gloo_run(int coll, const void* send, void* recv, size_t count, size_t, int dt, int op, int root, int in_place) {
  try {
#define RUN(T) run_typed<T>(coll, send, recv, count, op, root, in_place)
    BY_TYPE(dt, RUN)
#undef RUN
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo_coll_perf: %s\n", e.what());
    return 1;
  }
}

void gloo_barrier() {
  gloo::BarrierOptions o(ctx);
  gloo::barrier(o);
}

void gloo_bcast_time(double* t) {
  gloo::BroadcastOptions o(ctx);
  o.setOutput(t, 1);
  o.setRoot(0);
  gloo::broadcast(o);
}

void gloo_reduce_time(double* t, enum peer_time_op op) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(t, 1);
  o.setReduceFunction(reduce_fn<double>(op == PEER_TIME_MIN ? OP_MIN : op == PEER_TIME_MAX ? OP_MAX : OP_SUM));
  gloo::allreduce(o);
}

void gloo_sum_i64(int64_t* v) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(v, 1);
  o.setReduceFunction(reduce_fn<int64_t>(OP_SUM));
  gloo::allreduce(o);
}

void gloo_gather_bytes(const void* mine, void* all, size_t len) {
  gloo::GatherOptions o(ctx);
  o.setInput(static_cast<char*>(const_cast<void*>(mine)), len);
  if (rank_ == 0) o.setOutput(static_cast<char*>(all), len * nranks_);
  o.setRoot(0);
  gloo::gather(o);
}

void gloo_abort(int code) {
  _exit(code);
}

void gloo_finalize() {
  rs_algos.clear();
  gloo_barrier();
  ctx.reset();
}

}  // namespace

extern "C" const struct peer_lib peer_lib = {
    "gloo",
    (size_t)INT32_MAX,
    1,
    gloo_init,
    gloo_version,
    gloo_lacks,
    gloo_lacks_size,
    gloo_run,
    gloo_barrier,
    gloo_bcast_time,
    gloo_reduce_time,
    gloo_sum_i64,
    gloo_gather_bytes,
    gloo_abort,
    gloo_finalize,
};
