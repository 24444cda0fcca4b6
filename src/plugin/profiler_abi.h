/*
 * profiler_abi.h - NCCL's profiler plugin ABI, versions 1 to 6, as facts (NVIDIA's
 * src/include/plugin/nccl_profiler.h and profiler/profiler_vN.h of NCCL 2.30.7; no code of
 * theirs): the symbol ncclProfiler_vN, the table's slots, each version's event descriptor and
 * state arguments. The table is the same five slots in every version:
 *   name, init, startEvent(ctx, &handle, descr), stopEvent(handle),
 *   recordEventState(handle, state, args), finalize(ctx)
 * and init differs:
 *   v1-v3  init(&ctx, &mask)
 *   v4     init(&ctx, &mask, commName, commHash, nNodes, nRanks, rank, log)
 *   v5-v6  init(&ctx, commId, &mask, commName, nNodes, nRanks, rank, log)
 * Descriptors: v1 names function, datatype, algorithm and protocol by number (NCCL's enums),
 * v2+ by string; v1-v3 carry the communicator's name and hash per event; the type is a uint8_t
 * up to v4, a uint64_t from v5 (which adds the API events and moves the group of a collective
 * or p2p into coll.parentGroup / p2p.parentGroup, parentObj being the API event); v6 adds the
 * copy-engine events (same layout otherwise).
 */
#ifndef BRAID_PROFILER_ABI_H
#define BRAID_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"

/* Event types (the activation mask's bits). */
enum {
  NCCL_PROF_GROUP = 1 << 0,
  NCCL_PROF_COLL = 1 << 1,
  NCCL_PROF_P2P = 1 << 2,
  NCCL_PROF_PROXY_OP = 1 << 3,
  NCCL_PROF_PROXY_STEP = 1 << 4,
  NCCL_PROF_PROXY_CTRL = 1 << 5,
  NCCL_PROF_KERNEL_CH = 1 << 6,
  NCCL_PROF_NET_PLUGIN = 1 << 7,
  NCCL_PROF_GROUP_API = 1 << 8,
  NCCL_PROF_COLL_API = 1 << 9,
  NCCL_PROF_P2P_API = 1 << 10,
  NCCL_PROF_KERNEL_LAUNCH = 1 << 11,
  NCCL_PROF_CE_COLL = 1 << 12,
  NCCL_PROF_CE_SYNC = 1 << 13,
  NCCL_PROF_CE_BATCH = 1 << 14,
};

typedef void (*nccl_abi_prof_logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt,
                                       ...);

/* ---- v1 ------------------------------------------------------------------------------------ */
struct nccl_prof_descr_v1 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      uint8_t func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype;
      uint32_t op;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;
      uint8_t proto;
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      uint8_t func;
      void* buff;
      uint8_t datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer, nSteps, chunkSize, isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
};

/* ---- v2 and v3 (v3 drops coll.trafficBytes and adds kernelCh, netPlugin) ------------------ */
struct nccl_prof_descr_v2 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer, nSteps, chunkSize, isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
};

struct nccl_prof_descr_v3 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer, nSteps, chunkSize, isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

/* ---- v4 ------------------------------------------------------------------------------------ */
struct nccl_prof_descr_v4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer, nSteps, chunkSize, isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

/* ---- v5 and v6 (v6: the same union plus the CE descriptors, larger) ------------------------ */
struct nccl_prof_descr_v5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer, nSteps, chunkSize, isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    /* v6 only: ceColl, ceCollSync, ceCollBatch; the largest is ceColl (13 fields) */
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize, numBatches, ceSeqNum;
      void* stream;
    } ceColl;
  };
};

/* State arguments: v1-v3 {proxyOp{transSize, steps}, proxyCtrl{appendedProxyOps}}; v4+
 * {proxyStep{transSize}, proxyCtrl, netPlugin{data}, kernelCh{pTimer}}: every first field at
 * offset 0, so one union serves all (braid_prof_record fills transSize / steps or data). */
union nccl_prof_state_args {
  struct {
    size_t transSize;
    int steps;
  } proxy;
  void* data;
  uint64_t pTimer;
};

/* The table: slot types differ only in init and in the descriptor's version. */
struct nccl_profiler_v1 { /* v1, v2, v3 */
  const char* name;
  ncclResult_t (*init)(void** ctx, int* mask);
  ncclResult_t (*startEvent)(void* ctx, void** handle, void* descr);
  ncclResult_t (*stopEvent)(void* handle);
  ncclResult_t (*recordEventState)(void* handle, int state, union nccl_prof_state_args* args);
  ncclResult_t (*finalize)(void* ctx);
};
struct nccl_profiler_v4 {
  const char* name;
  ncclResult_t (*init)(void** ctx, int* mask, const char* commName, uint64_t commHash, int nNodes, int nRanks, int rank,
                       nccl_abi_prof_logger_t log);
  ncclResult_t (*startEvent)(void* ctx, void** handle, void* descr);
  ncclResult_t (*stopEvent)(void* handle);
  ncclResult_t (*recordEventState)(void* handle, int state, union nccl_prof_state_args* args);
  ncclResult_t (*finalize)(void* ctx);
};
struct nccl_profiler_v5 { /* v5, v6 */
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks, int rank,
                       nccl_abi_prof_logger_t log);
  ncclResult_t (*startEvent)(void* ctx, void** handle, void* descr);
  ncclResult_t (*stopEvent)(void* handle);
  ncclResult_t (*recordEventState)(void* handle, int state, union nccl_prof_state_args* args);
  ncclResult_t (*finalize)(void* ctx);
};

#endif /* BRAID_PROFILER_ABI_H */
