/*
 * coll_api.c - the public collective and point-to-point calls. Each checks its arguments
 * (bad input: a WARN naming the argument and value, ncclInvalidArgument, nothing enqueued),
 * resolves the reduction operator, and appends a task to the calling thread's group.
 * AlltoAll, Gather and Scatter expand into sends and receives inside a group of their own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/check.h"
#include "core/group.h"
#include "core/redop.h"
#include "topo/tuner.h"

/* 2^57: the largest user address space of any 64-bit Linux (x86-64 with 5-level paging). */
#define BRAID_MAX_CALL_BYTES ((size_t)1 << 57)

/* Checks common to every call (the communicator first: nothing else is read before it is
 * known to be live). `per_rank`: a buffer holds nranks times `count` elements. Inlined, as
 * add_task: every call runs both, and their calls and frames were a tenth of a small host-mode
 * all-reduce's instructions outside the data path. */
static inline __attribute__((always_inline)) ncclResult_t check_common(const char* fn, ncclComm_t handle, size_t count,
                                                                       ncclDataType_t dtype, int per_rank) {
  BRAID_CHECK(braid_comm_check(handle, fn));
  size_t scale = per_rank ? (size_t)braid_comm_of(handle)->nranks : 1;
  if ((int)dtype < 0 || (int)dtype >= ncclNumTypes) {
    BRAID_WARN("%s: invalid datatype %d", fn, (int)dtype);
    return ncclInvalidArgument;
  }
  size_t es = (size_t)braid_dtype_size(dtype);
  /* Past BRAID_MAX_CALL_BYTES no buffer can exist, and sizes computed from the count (chunks
   * rounded up, offsets) stay far from wrapping around. count * es * scale > the limit, without
   * wrapping (count <= 2^57 and es <= 16 first) and with a division only for per-rank buffers
   * (two 64-bit divisions on every call were a measurable part of a small call). */
  size_t bytes = count * es;
  if (count > BRAID_MAX_CALL_BYTES || bytes > (per_rank ? BRAID_MAX_CALL_BYTES / scale : BRAID_MAX_CALL_BYTES)) {
    BRAID_WARN("%s: count %zu of datatype %d (%zu bytes) times %zu is more than any address space holds (%llu bytes)",
               fn, count, (int)dtype, es, scale, (unsigned long long)BRAID_MAX_CALL_BYTES);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t check_buf(const char* fn, const char* name, const void* buf, size_t count) {
  if (buf == NULL && count > 0) {
    BRAID_WARN("%s: %s argument is NULL with count %zu", fn, name, count);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t check_root(const char* fn, const char* name, int root, int nranks) {
  if (root < 0 || root >= nranks) {
    BRAID_WARN("%s: invalid %s %d (nranks %d)", fn, name, root, nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* Set while expand() queues an ncclGather's sends and receives, which it makes through the
 * public ncclSend / ncclRecv (their checks, logs and profiler events): their tasks say so. */
static __thread int expanding_gather;
static __thread int expanding_a2a; /* and an ncclAlltoAll's */

static inline __attribute__((always_inline)) ncclResult_t add_task(int kind, int func, struct braid_comm* comm,
                                                                   const void* sendbuff, void* recvbuff, size_t count,
                                                                   ncclDataType_t dtype, struct braid_redop redop,
                                                                   int op, int root, cudaStream_t stream) {
  struct braid_task lone = {0};
  struct braid_task* t = &lone;
  /* Outside a group the task runs before this returns: no allocation needed. */
  if (braid_group_depth() == 0)
    lone.on_stack = 1;
  else if ((t = calloc(1, sizeof(*t))) == NULL) {
    BRAID_WARN("Failed to allocate a task");
    return ncclSystemError;
  }
  t->comm = comm;
  t->comm_gen = comm->handle_gen;
  t->kind = kind;
  t->func = func;
  t->sendbuff = sendbuff;
  t->recvbuff = recvbuff;
  t->count = count;
  t->dtype = dtype;
  t->op = op;
  t->root = root;
  t->redop = redop;
  t->stream = stream;
  t->gather = kind != BRAID_TASK_COLL && expanding_gather;
  t->a2a = kind != BRAID_TASK_COLL && expanding_a2a;
  if (kind == BRAID_TASK_COLL) {
    BRAID_INFO(BRAID_LOG_COLL,
               "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] "
               "stream %p",
               braid_tuner_func_name(func), (unsigned long)comm->op_count, sendbuff, (void*)recvbuff, count, (int)dtype,
               op, root, (void*)comm, comm->nranks, (void*)stream);
    comm->op_count++;
  }
  return braid_group_add(t);
}

/* A collective with a reduction. */
static ncclResult_t reduce_coll(const char* fn, int func, const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t dtype, ncclRedOp_t op, int root, ncclComm_t handle,
                                cudaStream_t stream) {
  struct braid_comm* comm = braid_comm_of(handle);
  struct braid_redop redop;
  BRAID_CHECK(check_common(fn, handle, count, dtype, func == BRAID_FUNC_ReduceScatter));
  if (func == BRAID_FUNC_Reduce) BRAID_CHECK(check_root(fn, "root", root, comm->nranks));
  size_t in_count = func == BRAID_FUNC_ReduceScatter ? count * comm->nranks : count;
  BRAID_CHECK(check_buf(fn, "sendbuff", sendbuff, in_count));
  if (func != BRAID_FUNC_Reduce || root == comm->rank) BRAID_CHECK(check_buf(fn, "recvbuff", recvbuff, count));
  BRAID_CHECK(braid_redop_resolve(comm, fn, op, dtype, &redop));
  return add_task(BRAID_TASK_COLL, func, comm, sendbuff, recvbuff, count, dtype, redop, op, root, stream);
}

static struct braid_redop copy_op(ncclDataType_t dtype) {
  struct braid_redop r = {.kind = BRAID_RED_SUM, .dtype = (uint8_t)dtype};
  return r;
}

BRAID_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return reduce_coll("ncclAllReduce", BRAID_FUNC_AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclAllReduce)

BRAID_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduce_coll("ncclReduce", BRAID_FUNC_Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclReduce)

BRAID_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream) {
  return reduce_coll("ncclReduceScatter", BRAID_FUNC_ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0,
                     comm, stream);
}
BRAID_PROFILE_ALIAS(ncclReduceScatter)

BRAID_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                     ncclComm_t handle, cudaStream_t stream) {
  const char* fn = "ncclAllGather";
  struct braid_comm* comm = braid_comm_of(handle);
  BRAID_CHECK(check_common(fn, handle, sendcount, datatype, 1));
  BRAID_CHECK(check_buf(fn, "sendbuff", sendbuff, sendcount));
  BRAID_CHECK(check_buf(fn, "recvbuff", recvbuff, sendcount));
  return add_task(BRAID_TASK_COLL, BRAID_FUNC_AllGather, comm, sendbuff, recvbuff, sendcount, datatype,
                  copy_op(datatype), ncclSum, 0, stream);
}
BRAID_PROFILE_ALIAS(ncclAllGather)

BRAID_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t handle, cudaStream_t stream) {
  const char* fn = "ncclBroadcast";
  struct braid_comm* comm = braid_comm_of(handle);
  BRAID_CHECK(check_common(fn, handle, count, datatype, 0));
  BRAID_CHECK(check_root(fn, "root", root, comm->nranks));
  if (root == comm->rank) BRAID_CHECK(check_buf(fn, "sendbuff", sendbuff, count));
  BRAID_CHECK(check_buf(fn, "recvbuff", recvbuff, count));
  return add_task(BRAID_TASK_COLL, BRAID_FUNC_Broadcast, comm, sendbuff, recvbuff, count, datatype, copy_op(datatype),
                  ncclSum, root, stream);
}
BRAID_PROFILE_ALIAS(ncclBroadcast)

BRAID_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclBcast)

static ncclResult_t p2p(const char* fn, int kind, void* buff, size_t count, ncclDataType_t datatype, int peer,
                        ncclComm_t handle, cudaStream_t stream) {
  struct braid_comm* comm = braid_comm_of(handle);
  BRAID_CHECK(check_common(fn, handle, count, datatype, 0));
  BRAID_CHECK(check_root(fn, "peer", peer, comm->nranks));
  BRAID_CHECK(check_buf(fn, kind == BRAID_TASK_SEND ? "sendbuff" : "recvbuff", buff, count));
  return add_task(kind, BRAID_FUNC_SendRecv, comm, kind == BRAID_TASK_SEND ? buff : NULL,
                  kind == BRAID_TASK_RECV ? buff : NULL, count, datatype, copy_op(datatype), ncclSum, peer, stream);
}

BRAID_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                cudaStream_t stream) {
  return p2p("ncclSend", BRAID_TASK_SEND, (void*)sendbuff, count, datatype, peer, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclSend)

BRAID_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                cudaStream_t stream) {
  return p2p("ncclRecv", BRAID_TASK_RECV, recvbuff, count, datatype, peer, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclRecv)

/* AlltoAll, Gather and Scatter: sends and receives in a group of their own. `root` < 0 means
 * every rank sends to and receives from everyone. */
static ncclResult_t expand(const char* fn, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, int gather, ncclComm_t handle, cudaStream_t stream) {
  struct braid_comm* comm = braid_comm_of(handle);
  BRAID_CHECK(check_common(fn, handle, count, datatype, 1));
  if (root >= 0) BRAID_CHECK(check_root(fn, "root", root, comm->nranks));
  int n = comm->nranks, me = comm->rank;
  size_t bytes = count * braid_dtype_size(datatype);
  /* Who moves what: AlltoAll everyone to everyone; Gather everyone to the root; Scatter the
   * root to everyone. */
  int sends_all = root < 0 || (!gather && me == root), sends_root = root >= 0 && gather;
  int recvs_all = root < 0 || (gather && me == root), recvs_root = root >= 0 && !gather;
  BRAID_CHECK(check_buf(fn, "sendbuff", sendbuff, sends_all || sends_root ? count : 0));
  BRAID_CHECK(check_buf(fn, "recvbuff", recvbuff, recvs_all || recvs_root ? count : 0));
  ncclResult_t res = ncclGroupStart(), r2;
  expanding_gather = gather;
  expanding_a2a = root < 0;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (sends_all)
      res = ncclSend((const char*)sendbuff + p * bytes, count, datatype, p, handle, stream);
    else if (sends_root && p == root)
      res = ncclSend(sendbuff, count, datatype, p, handle, stream);
    if (res != ncclSuccess) break;
    if (recvs_all)
      res = ncclRecv((char*)recvbuff + p * bytes, count, datatype, p, handle, stream);
    else if (recvs_root && p == root)
      res = ncclRecv(recvbuff, count, datatype, p, handle, stream);
  }
  expanding_gather = expanding_a2a = 0;
  r2 = ncclGroupEnd();
  return res != ncclSuccess ? res : r2;
}

/* In place (sendbuff == recvbuff), block j is overwritten by rank j's data in one round and
 * sent to rank j in another, possibly later: the sends read a copy, taken now and freed when
 * the group has run (group.c). A host-mode group runs by the time its ncclGroupEnd returns;
 * device work does not, so on a device in-place is refused rather than corrupted. */
static ncclResult_t alltoall_in_place(const void* buff, size_t count, ncclDataType_t datatype, ncclComm_t handle,
                                      cudaStream_t stream) {
  const char* fn = "ncclAlltoAll";
  struct braid_comm* comm = braid_comm_of(handle);
  size_t bytes = count * (size_t)braid_dtype_size(datatype) * (size_t)comm->nranks;
  if (!comm->host_mode) {
    BRAID_WARN(
        "%s: in-place operation (sendbuff == recvbuff = %p) is not supported on a GPU communicator; use "
        "separate send and receive buffers",
        fn, buff);
    return ncclInvalidArgument;
  }
  void* copy = malloc(bytes);
  if (copy == NULL) {
    BRAID_WARN("%s: failed to allocate %zu bytes for the in-place copy", fn, bytes);
    return ncclSystemError;
  }
  memcpy(copy, buff, bytes);
  ncclResult_t res = ncclGroupStart(), r2;
  if (res == ncclSuccess && (res = braid_group_keep(copy)) != ncclSuccess) free(copy);
  if (res == ncclSuccess) res = expand(fn, copy, (void*)buff, count, datatype, -1, 0, handle, stream);
  r2 = ncclGroupEnd();
  return res != ncclSuccess ? res : r2;
}

BRAID_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclComm_t comm, cudaStream_t stream) {
  if (sendbuff == recvbuff && sendbuff != NULL && count > 0 && braid_comm_check(comm, "ncclAlltoAll") == ncclSuccess &&
      braid_comm_of(comm)->nranks > 1 && (int)datatype >= 0 && (int)datatype < ncclNumTypes)
    return alltoall_in_place(sendbuff, count, datatype, comm, stream);
  return expand("ncclAlltoAll", sendbuff, recvbuff, count, datatype, -1, 0, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclAlltoAll)

BRAID_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  if (root < 0) {
    BRAID_WARN("ncclGather: invalid root %d", root);
    return ncclInvalidArgument;
  }
  return expand("ncclGather", sendbuff, recvbuff, count, datatype, root, 1, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclGather)

BRAID_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   int root, ncclComm_t comm, cudaStream_t stream) {
  if (root < 0) {
    BRAID_WARN("ncclScatter: invalid root %d", root);
    return ncclInvalidArgument;
  }
  return expand("ncclScatter", sendbuff, recvbuff, count, datatype, root, 0, comm, stream);
}
BRAID_PROFILE_ALIAS(ncclScatter)
