/*
 * nccl_net_abi.h - NCCL's external net plugin ABI, versions 6 to 12, as facts: the exported
 * symbol of each version (ncclNetPlugin_vN, ncclCollNetPlugin_vN), the field order and types
 * of its property struct and the slot order and signatures of its table. Written from
 * NVIDIA's published headers (src/include/plugin/net/net_vN.h of NCCL 2.30.7); no code of
 * theirs. braid's own names: struct nccl_net_vN, struct nccl_net_props_vN.
 *
 * Differences between versions that the adapter (nccl_adapt.c) bridges:
 *   v6  process-wide init(log); sizes are int; no device handles; 8 requests per comm.
 *   v7  + netDeviceType/netDeviceVersion; connect/accept take a device handle; getDeviceMr,
 *         irecvConsumed.
 *   v8  + regIsGlobal; regMr takes size_t.
 *   v9  + forceFlush, vProps, maxP2pBytes, maxCollBytes; isend/irecv take size_t; makeVDevice.
 *   v10 init(log, profiler callback); connect takes a per-comm config (trafficClass);
 *         isend/irecv take profiler handles.
 *   v11 init(&ctx, commId, config, log, profiler) once per communicator; listen and connect
 *         take that ctx; + maxMultiRequestSize; finalize(ctx), setNetAttr(ctx, attr).
 *   v12 (NCCL 2.30) the v11 table; its properties' vProps hold 8 devices (not 4) and end
 *         with railId, planeId (int16_t, NCCL_NET_ID_UNDEF -1).
 * Every version: test() and iflush() report sizes as int; the handle is at most 128 bytes.
 */
#ifndef BRAID_NCCL_NET_ABI_H
#define BRAID_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define NCCL_ABI_NET_HANDLE_MAXSIZE 128
#define NCCL_ABI_NET_MAX_REQUESTS_V6 8
#define NCCL_ABI_NET_MAX_DEVS_PER_NIC 4 /* vProps.devs[] of v9..v11 */
#define NCCL_ABI_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_ABI_NET_ID_UNDEF -1   /* v12 railId / planeId: not known */
#define NCCL_ABI_NET_DEVICE_HOST 0 /* netDeviceType: no device offload */
#define NCCL_ABI_NET_TRAFFIC_CLASS_UNDEF -1

/* ncclDebugLogger_t: (ncclDebugLogLevel level, unsigned long flags, file, line, fmt, ...). */
typedef void (*nccl_abi_logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
/* ncclProfilerCallback_t: a network plugin's events (v10+). */
typedef ncclResult_t (*nccl_abi_prof_cb_t)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

/* ncclNetDeviceHandle_v7_t .. _v12_t (one layout). */
struct nccl_net_dev_handle {
  int netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

struct nccl_net_vprops {
  int ndevs;
  int devs[NCCL_ABI_NET_MAX_DEVS_PER_NIC];
};

struct nccl_net_vprops_v12 {
  int ndevs;
  int devs[NCCL_ABI_NET_MAX_DEVS_PER_NIC_V12];
};

struct nccl_net_comm_config {
  int trafficClass;
};

/* ncclNetAttr_v11_t, _v12_t (one layout) */
struct nccl_net_comm_attr {
  int32_t maxConcurrentPeers, minConcurrentPeers, maxFlowsPerPeer, minFlowsPerPeer;
};
struct nccl_net_attr_v11 {
  struct nccl_net_comm_attr sendCommAttr, recvCommAttr;
  uint32_t op, algo, proto;
};

struct nccl_net_props_v6 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, speed, port;
  float latency;
  int maxComms, maxRecvs;
};

struct nccl_net_props_v7 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, speed, port;
  float latency;
  int maxComms, maxRecvs;
  int netDeviceType, netDeviceVersion;
};

struct nccl_net_props_v8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, speed, port;
  float latency;
  int maxComms, maxRecvs;
  int netDeviceType, netDeviceVersion;
};

/* v9 and v10 */
struct nccl_net_props_v9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, forceFlush, speed, port;
  float latency;
  int maxComms, maxRecvs;
  int netDeviceType, netDeviceVersion;
  struct nccl_net_vprops vProps;
  size_t maxP2pBytes, maxCollBytes;
};

struct nccl_net_props_v11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, forceFlush, speed, port;
  float latency;
  int maxComms, maxRecvs;
  int netDeviceType, netDeviceVersion;
  struct nccl_net_vprops vProps;
  size_t maxP2pBytes, maxCollBytes;
  int maxMultiRequestSize;
};

struct nccl_net_props_v12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, forceFlush, speed, port;
  float latency;
  int maxComms, maxRecvs;
  int netDeviceType, netDeviceVersion;
  struct nccl_net_vprops_v12 vProps;
  size_t maxP2pBytes, maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId, planeId;
};

/* Slots every version shares, in order after accept (the sizes' types differ, see below). */
#define NCCL_ABI_NET_CLOSE_SLOTS             \
  ncclResult_t (*closeSend)(void* sendComm); \
  ncclResult_t (*closeRecv)(void* recvComm); \
  ncclResult_t (*closeListen)(void* listenComm);
#define NCCL_ABI_NET_DEVICE_SLOTS                                              \
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle); \
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);

struct nccl_net_v6 {
  const char* name;
  ncclResult_t (*init)(nccl_abi_logger_t log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v6* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
};

struct nccl_net_v7 {
  const char* name;
  ncclResult_t (*init)(nccl_abi_logger_t log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v7* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, struct nccl_net_dev_handle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, struct nccl_net_dev_handle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
  NCCL_ABI_NET_DEVICE_SLOTS
};

struct nccl_net_v8 {
  const char* name;
  ncclResult_t (*init)(nccl_abi_logger_t log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v8* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, struct nccl_net_dev_handle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, struct nccl_net_dev_handle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
  NCCL_ABI_NET_DEVICE_SLOTS
};

struct nccl_net_v9 {
  const char* name;
  ncclResult_t (*init)(nccl_abi_logger_t log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, struct nccl_net_dev_handle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, struct nccl_net_dev_handle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
  NCCL_ABI_NET_DEVICE_SLOTS
  ncclResult_t (*makeVDevice)(int* d, struct nccl_net_vprops* props);
};

struct nccl_net_v10 {
  const char* name;
  ncclResult_t (*init)(nccl_abi_logger_t log, nccl_abi_prof_cb_t prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, struct nccl_net_comm_config* config, void* handle, void** sendComm,
                          struct nccl_net_dev_handle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, struct nccl_net_dev_handle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
  NCCL_ABI_NET_DEVICE_SLOTS
  ncclResult_t (*makeVDevice)(int* d, struct nccl_net_vprops* props);
};

struct nccl_net_v11 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, struct nccl_net_comm_config* config, nccl_abi_logger_t log,
                       nccl_abi_prof_cb_t prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v11* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, struct nccl_net_dev_handle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, struct nccl_net_dev_handle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
  NCCL_ABI_NET_DEVICE_SLOTS
  ncclResult_t (*makeVDevice)(int* d, struct nccl_net_vprops* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, struct nccl_net_attr_v11* attr);
};

/* v11's slots; getProperties and makeVDevice take v12's structs. */
struct nccl_net_v12 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, struct nccl_net_comm_config* config, nccl_abi_logger_t log,
                       nccl_abi_prof_cb_t prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, struct nccl_net_props_v12* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, struct nccl_net_dev_handle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, struct nccl_net_dev_handle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  NCCL_ABI_NET_CLOSE_SLOTS
  NCCL_ABI_NET_DEVICE_SLOTS
  ncclResult_t (*makeVDevice)(int* d, struct nccl_net_vprops_v12* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, struct nccl_net_attr_v11* attr);
};

/* braid's optional extension a NCCL-ABI library may export next to its table
 * (BRAID_NET_EXT_SYMBOL): the slots of struct braid_net_v1 that NCCL's ABI has no room for,
 * on the same comms as the table's. libnccl-net-braid.so exports it; NCCL never looks. */
#define BRAID_NET_EXT_SYMBOL "braidNetExt_v1"
struct braid_net_status;
struct pollfd;
struct braid_net_ext_v1 {
  int size; /* sizeof(struct braid_net_ext_v1) of the library */
  ncclResult_t (*waitFds)(void* comm, struct pollfd* fds, int maxFds, int* nFds);
  ncclResult_t (*finishSend)(void* sendComm);
  ncclResult_t (*abortSend)(void* sendComm, int code);
  ncclResult_t (*getStatus)(void* comm, struct braid_net_status* status);
  ncclResult_t (*recvInline)(void* recvComm, int* yes);
};

#endif /* BRAID_NCCL_NET_ABI_H */
