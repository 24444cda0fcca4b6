/*
 * oneccl_coll_perf.cc - Intel oneCCL under the peer program (peer.h, peer_main.c): its C++ API
 * (ccl::allreduce etc., host buffers, the default CPU stream), ranks from $RANK and
 * $WORLD_SIZE, the communicator made from oneCCL's own KVS: rank 0 creates the main KVS and
 * writes its address to $PEER_RENDEZVOUS_DIR/kvs, the others read it (bench/peers/launch.sh
 * sets all three). The KVS listens on loopback (CCL_KVS_IFACE=lo unless set); the data
 * path is oneCCL's default (CCL_ATL_TRANSPORT=ofi, libfabric's provider choice; the
 * environment's CCL_* and FI_* settings apply; CCL_WORKER_OFFLOAD=0 unless set, see
 * oneccl_init). Built against PyPI's oneccl-cpu-devel
 * (bench/peers/build.sh oneccl).
 *
 *   bench/peers/launch.sh 2 build/bench/oneccl_coll_perf all_reduce -b 64K -e 64M -f 2
 *
 * oneCCL has no gather: said and skipped. Its send/recv are separate operations: sendrecv
 * posts the receive from rank-1 and the send to rank+1 and waits for both; in place, it
 * receives into a scratch buffer and copies it back (the copy is timed). Out-of-place
 * broadcast copies the root's send buffer to its receive buffer first (oneCCL's broadcast
 * is in place only; ncclBroadcast's semantics).
 */
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <oneapi/ccl.hpp>
#include <string>
#include <thread>
#include <vector>

#include "peer.h"

namespace {

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_NONE = 6 }; /* bench/common/verify.h's values */

std::unique_ptr<ccl::communicator> comm;
std::shared_ptr<ccl::kvs> kvs;
int rank_, nranks_;
std::vector<char> scratch;

bool ccl_type(int dt, ccl::datatype* t) {
  switch (dt) {
    case 0:
      *t = ccl::datatype::int8;
      return true;
    case 1:
      *t = ccl::datatype::uint8;
      return true;
    case 2:
      *t = ccl::datatype::int32;
      return true;
    case 3:
      *t = ccl::datatype::uint32;
      return true;
    case 4:
      *t = ccl::datatype::int64;
      return true;
    case 5:
      *t = ccl::datatype::uint64;
      return true;
    case 7:
      *t = ccl::datatype::float32;
      return true;
    case 8:
      *t = ccl::datatype::float64;
      return true;
    default:
      return false;
  }
}

ccl::reduction ccl_op(int op) {
  if (op == OP_PROD) return ccl::reduction::prod;
  if (op == OP_MAX) return ccl::reduction::max;
  if (op == OP_MIN) return ccl::reduction::min;
  return ccl::reduction::sum;
}

/* Rank 0's KVS address, through a file in the rendezvous directory. */
bool exchange_kvs(const std::string& dir) {
  std::string path = dir + "/kvs";
  if (rank_ == 0) {
    kvs = ccl::create_main_kvs();
    ccl::kvs::address_type a = kvs->get_address();
    std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(a.data(), (std::streamsize)a.size());
    return rename(tmp.c_str(), path.c_str()) == 0;
  }
  for (int i = 0; i < 12000; i++) { /* 120 s */
    std::ifstream in(path, std::ios::binary);
    ccl::kvs::address_type a;
    if (in && in.read(a.data(), (std::streamsize)a.size())) {
      kvs = ccl::create_kvs(a);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fprintf(stderr, "oneccl_coll_perf: rank %d: no KVS address in %s after 120 s\n", rank_, path.c_str());
  return false;
}

int oneccl_init(int*, char***, int* rank, int* nranks) {
  const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE"), *dir = getenv("PEER_RENDEZVOUS_DIR");
  if (!r || !w || !dir) {
    fprintf(stderr, "oneccl_coll_perf: set RANK, WORLD_SIZE and PEER_RENDEZVOUS_DIR (bench/peers/launch.sh does)\n");
    return 1;
  }
  rank_ = atoi(r);
  nranks_ = atoi(w);
  if (nranks_ < 1 || rank_ < 0 || rank_ >= nranks_) {
    fprintf(stderr, "oneccl_coll_perf: RANK %s of WORLD_SIZE %s\n", r, w);
    return 1;
  }
  setenv("CCL_KVS_IFACE", "lo", 0);
  /* oneCCL's default runs each operation in a worker thread that spins beside the rank's
   * own waiting thread: on a 2-core machine two ranks then fight four spinning threads (1 KiB
   * all-reduce: ~50 ms). The caller's thread does the work instead, unless the environment
   * says otherwise. */
  setenv("CCL_WORKER_OFFLOAD", "0", 0);
  try {
    ccl::init();
    if (!exchange_kvs(dir)) return 1;
    comm.reset(new ccl::communicator(ccl::create_communicator(nranks_, rank_, kvs)));
  } catch (const std::exception& e) {
    fprintf(stderr, "oneccl_coll_perf: init failed: %s\n", e.what());
    return 1;
  }
  *rank = rank_;
  *nranks = nranks_;
  return 0;
}

void oneccl_version(char* buf, size_t len) {
  ccl::library_version v = ccl::get_library_version();
  const char* atl = getenv("CCL_ATL_TRANSPORT");
  const char* fi = getenv("FI_PROVIDER");
  snprintf(buf, len, "Intel oneCCL %s (%s%s%s)", v.full, atl ? atl : "ofi", fi ? ", FI_PROVIDER=" : "", fi ? fi : "");
}

const char* oneccl_lacks(int coll, int dt, int) {
  ccl::datatype t;
  if (coll == PEER_GATHER) return "oneCCL has no gather";
  return ccl_type(dt, &t) ? nullptr : "oneCCL peer: no such datatype";
}

int run_coll(int coll, const void* sendc, void* recv, size_t n, size_t elt, ccl::datatype t, int op, int root,
             int in_place) {
  void* send = const_cast<void*>(sendc);
  ccl::communicator& c = *comm;
  switch (coll) {
    case PEER_ALL_REDUCE:
      ccl::allreduce(send, recv, n, t, ccl_op(op), c).wait();
      return 0;
    case PEER_ALL_GATHER:
      ccl::allgather(send, recv, n, t, c).wait();
      return 0;
    case PEER_REDUCE_SCATTER:
      ccl::reduce_scatter(send, recv, n, t, ccl_op(op), c).wait();
      return 0;
    case PEER_BROADCAST:
      if (rank_ == root && !in_place) memcpy(recv, send, n * elt);
      ccl::broadcast(recv, n, t, root, c).wait();
      return 0;
    case PEER_REDUCE:
      ccl::reduce(send, recv, n, t, ccl_op(op), root, c).wait();
      return 0;
    case PEER_ALLTOALL:
      ccl::alltoall(send, recv, n, t, c).wait();
      return 0;
    case PEER_SCATTER:
      ccl::scatter(send, recv, n, t, root, c).wait();
      return 0;
    case PEER_SENDRECV: {
      size_t bytes = n * elt;
      if (in_place && scratch.size() < bytes) scratch.resize(bytes);
      void* into = in_place ? scratch.data() : recv;
      auto rx = ccl::recv(into, n, t, (rank_ - 1 + nranks_) % nranks_, c);
      auto tx = ccl::send(send, n, t, (rank_ + 1) % nranks_, c);
      rx.wait();
      tx.wait();
      if (in_place) memcpy(recv, into, bytes);
      return 0;
    }
    default:
      return 1;
  }
}

int oneccl_run(int coll, const void* send, void* recv, size_t count, size_t elt, int dt, int op, int root,
               int in_place) {
  ccl::datatype t;
  if (!ccl_type(dt, &t)) return 1;
  try {
    return run_coll(coll, send, recv, count, elt, t, op, root, in_place);
  } catch (const std::exception& e) {
    fprintf(stderr, "oneccl_coll_perf: %s\n", e.what());
    return 1;
  }
}

void oneccl_barrier() {
  ccl::barrier(*comm).wait();
}

void oneccl_bcast_time(double* t) {
  ccl::broadcast(t, 1, ccl::datatype::float64, 0, *comm).wait();
}

void oneccl_reduce_time(double* t, enum peer_time_op op) {
  ccl::reduction r = op == PEER_TIME_MIN   ? ccl::reduction::min
                     : op == PEER_TIME_MAX ? ccl::reduction::max
                                           : ccl::reduction::sum;
  ccl::allreduce(t, t, 1, ccl::datatype::float64, r, *comm).wait();
}

void oneccl_sum_i64(int64_t* v) {
  ccl::allreduce(v, v, 1, ccl::datatype::int64, ccl::reduction::sum, *comm).wait();
}

/* No gather in oneCCL: an all-gather, of which rank 0 keeps what it needs. */
void oneccl_gather_bytes(const void* mine, void* all, size_t len) {
  std::vector<char> every(len * nranks_);
  ccl::allgather(const_cast<void*>(mine), every.data(), len, ccl::datatype::int8, *comm).wait();
  if (rank_ == 0) memcpy(all, every.data(), every.size());
}

void oneccl_abort(int code) {
  _exit(code);
}

void oneccl_finalize() {
  oneccl_barrier();
  comm.reset();
  kvs.reset();
}

}  // namespace

extern "C" const struct peer_lib peer_lib = {
    "oneccl",
    (size_t)-1,
    0,
    oneccl_init,
    oneccl_version,
    oneccl_lacks,
    nullptr,
    oneccl_run,
    oneccl_barrier,
    oneccl_bcast_time,
    oneccl_reduce_time,
    oneccl_sum_i64,
    oneccl_gather_bytes,
    oneccl_abort,
    oneccl_finalize,
};
