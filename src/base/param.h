/*
 * param.h - every environment parameter braid reads, declared once, as data (STYLE.md 7).
 *
 * One row per variable: id, name, type (INT or STR), default, one line of doc. The rows
 * generate the enum below, the table in param.c (read from the environment, then from
 * NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf) and the listing `braid-info` prints.
 * Accessors: braid_param_int(BRAID_PARAM_X), braid_param_str(BRAID_PARAM_X). A value of
 * BRAID_PARAM_UNSET (INT) or NULL (STR) means "not set, use automatic behaviour".
 * Only param.c reads the environment.
 */
#ifndef BRAID_PARAM_H
#define BRAID_PARAM_H

#include <stdint.h>

#define BRAID_PARAM_UNSET INT64_MIN

/* X(id, name, type, default, doc) */
#define BRAID_PARAMS(X)                                                                                                \
  /* logging */                                                                                                        \
  X(DEBUG, "NCCL_DEBUG", STR, NULL, "log level: VERSION, WARN, INFO, ABORT or TRACE")                                  \
  X(DEBUG_SUBSYS, "NCCL_DEBUG_SUBSYS", STR, "INIT,BOOTSTRAP,ENV", "subsystems logged at INFO (comma list, ^ inverts)") \
  X(DEBUG_FILE, "NCCL_DEBUG_FILE", STR, NULL, "log to this file instead of stdout (%h host, %p pid)")                  \
  X(DEBUG_TIMESTAMP_LEVELS, "NCCL_DEBUG_TIMESTAMP_LEVELS", STR, "WARN", "levels whose lines carry a timestamp")        \
  X(DEBUG_TIMESTAMP_FORMAT, "NCCL_DEBUG_TIMESTAMP_FORMAT", STR, "[%F %T] ", "strftime format of the timestamp")        \
  X(CONF_FILE, "NCCL_CONF_FILE", STR, NULL, "file of NAME=value lines read after the environment")                     \
  /* bootstrap and identity */                                                                                         \
  X(COMM_ID, "NCCL_COMM_ID", STR, NULL, "host:port of a bootstrap root hosted by rank 0")                              \
  X(SOCKET_IFNAME, "NCCL_SOCKET_IFNAME", STR, NULL, "interfaces for sockets: prefixes, ^ excludes, = exact")           \
  X(SOCKET_FAMILY, "NCCL_SOCKET_FAMILY", STR, NULL, "AF_INET or AF_INET6 only")                                        \
  X(SOCKET_RETRY_CNT, "NCCL_SOCKET_RETRY_CNT", INT, 34, "connect retries before a peer counts as unreachable")         \
  X(SOCKET_RETRY_SLEEP_MSEC, "NCCL_SOCKET_RETRY_SLEEP_MSEC", INT, 100, "sleep step between connect retries (ms)")      \
  X(HOSTID, "NCCL_HOSTID", STR, NULL, "host identity (default hostname + boot id); ranks with equal ids share a node") \
  X(INIT_TIMEOUT, "BRAID_INIT_TIMEOUT", INT, 300, "seconds init waits for missing ranks before failing")               \
  X(TIMEOUT, "BRAID_TIMEOUT", INT, 0, "seconds a collective may wait for a peer (0: no limit)")                        \
  X(COMM_BLOCKING, "NCCL_COMM_BLOCKING", INT, BRAID_PARAM_UNSET, "default of config.blocking")                         \
  X(HOST_MODE, "BRAID_HOST_MODE", INT, 0, "1: run on host memory even when a GPU is usable")                           \
  X(GPU_SHARING, "BRAID_GPU_SHARING", INT, 0, "1: allow several ranks on one GPU")                                     \
  X(NET_DIRECT, "BRAID_NET_DIRECT", INT, 1,                                                                            \
    "host mode: network steps read and write user memory (0: through the FIFO)")                                       \
  X(FAKE_GPU, "BRAID_FAKE_GPU", INT, 0, "tests: N > 0 poses N fake GPUs (host memory, stream threads)")                \
  X(WORK_INLINE, "BRAID_WORK_INLINE", INT, 1,                                                                          \
    "0: always pass work items through a device buffer (tests the overflow path)")                                     \
  /* transports */                                                                                                     \
  X(P2P_DISABLE, "NCCL_P2P_DISABLE", INT, 0, "1: never use peer-to-peer (CUDA IPC) connections")                       \
  X(P2P_LEVEL, "NCCL_P2P_LEVEL", STR, NULL, "farthest path for P2P: LOC NVL NVB PIX PXB PHB SYS")                      \
  X(P2P_READ_ENABLE, "NCCL_P2P_READ_ENABLE", INT, BRAID_PARAM_UNSET, "P2P read mode instead of write")                 \
  X(P2P_USE_CUDA_MEMCPY, "NCCL_P2P_USE_CUDA_MEMCPY", INT, 0, "copy engines for P2P")                                   \
  X(SHM_DISABLE, "NCCL_SHM_DISABLE", INT, 0, "1: never use shared-memory connections")                                 \
  X(NET, "NCCL_NET", STR, NULL, "network plugin to use, by name (Socket, IB, UCX)")                                    \
  X(NET_PLUGIN, "NCCL_NET_PLUGIN", STR, NULL, "external plugin library libnccl-net-<name>.so")                         \
  X(IB_DISABLE, "NCCL_IB_DISABLE", INT, 0, "1: do not use InfiniBand")                                                 \
  X(IB_HCA, "NCCL_IB_HCA", STR, NULL, "InfiniBand devices: name[:port] prefixes, ^ excludes, = exact")                 \
  X(IB_GID_INDEX, "NCCL_IB_GID_INDEX", INT, -1, "RoCE GID index (-1: automatic)")                                      \
  X(IB_TIMEOUT, "NCCL_IB_TIMEOUT", INT, 20, "IB QP timeout exponent (4.096 us x 2^n)")                                 \
  X(IB_RETRY_CNT, "NCCL_IB_RETRY_CNT", INT, 7, "IB QP retry count")                                                    \
  X(IB_QPS_PER_CONNECTION, "NCCL_IB_QPS_PER_CONNECTION", INT, 1, "queue pairs per connection")                         \
  X(IB_SL, "NCCL_IB_SL", INT, -1, "IB service level")                                                                  \
  X(IB_TC, "NCCL_IB_TC", INT, -1, "IB traffic class")                                                                  \
  X(NET_GDR_LEVEL, "NCCL_NET_GDR_LEVEL", STR, NULL, "farthest path for GPUDirect RDMA")                                \
  X(NET_GDR_READ, "NCCL_NET_GDR_READ", INT, BRAID_PARAM_UNSET, "GPUDirect RDMA for sends")                             \
  X(SOCKET_NTHREADS, "NCCL_SOCKET_NTHREADS", INT, BRAID_PARAM_UNSET, "helper threads per socket connection")           \
  X(NSOCKS_PERTHREAD, "NCCL_NSOCKS_PERTHREAD", INT, BRAID_PARAM_UNSET, "sockets per helper thread")                    \
  X(CROSS_NIC, "NCCL_CROSS_NIC", INT, 2, "0: rings keep one NIC, 1: may change, 2: automatic")                         \
  /* buffers, channels, threads */                                                                                     \
  X(BUFFSIZE, "NCCL_BUFFSIZE", INT, 4194304, "Simple protocol buffer per connection (bytes)")                          \
  X(LL_BUFFSIZE, "NCCL_LL_BUFFSIZE", INT, BRAID_PARAM_UNSET, "LL protocol buffer per connection (bytes)")              \
  X(LL128_BUFFSIZE, "NCCL_LL128_BUFFSIZE", INT, BRAID_PARAM_UNSET, "LL128 protocol buffer per connection (bytes)")     \
  X(NTHREADS, "NCCL_NTHREADS", INT, BRAID_PARAM_UNSET, "threads per block for Simple and LL")                          \
  X(LL128_NTHREADS, "NCCL_LL128_NTHREADS", INT, BRAID_PARAM_UNSET, "threads per block for LL128")                      \
  X(MIN_NCHANNELS, "NCCL_MIN_NCHANNELS", INT, BRAID_PARAM_UNSET, "fewest channels a collective uses")                  \
  X(MAX_NCHANNELS, "NCCL_MAX_NCHANNELS", INT, BRAID_PARAM_UNSET, "most channels a collective uses")                    \
  X(MIN_CTAS, "NCCL_MIN_CTAS", INT, BRAID_PARAM_UNSET, "default of config.minCTAs")                                    \
  X(MAX_CTAS, "NCCL_MAX_CTAS", INT, BRAID_PARAM_UNSET, "default of config.maxCTAs")                                    \
  X(MAX_P2P_NCHANNELS, "NCCL_MAX_P2P_NCHANNELS", INT, 64, "most channels for send/recv")                               \
  X(P2P_NET_CHUNKSIZE, "NCCL_P2P_NET_CHUNKSIZE", INT, 131072, "send/recv chunk over the network")                      \
  X(P2P_PCI_CHUNKSIZE, "NCCL_P2P_PCI_CHUNKSIZE", INT, 131072, "send/recv chunk over PCIe/shared memory")               \
  X(P2P_NVL_CHUNKSIZE, "NCCL_P2P_NVL_CHUNKSIZE", INT, 524288, "send/recv chunk over NVLink")                           \
  X(P2P_LL_THRESHOLD, "NCCL_P2P_LL_THRESHOLD", INT, 16384, "send/recv bytes per channel up to which LL is used")       \
  /* algorithm choice */                                                                                               \
  X(ALGO, "NCCL_ALGO", STR, NULL, "allowed algorithms: list, ^list, or func:list;...")                                 \
  X(PROTO, "NCCL_PROTO", STR, NULL, "allowed protocols: LL, LL128, Simple (same syntax)")                              \
  X(NVLS_ENABLE, "NCCL_NVLS_ENABLE", INT, 2, "NVLink SHARP: 0 off, 1 on, 2 automatic")                                 \
  X(NVLS_NCHANNELS, "NCCL_NVLS_NCHANNELS", INT, 16, "channels for NVLS")                                               \
  X(COLLNET_ENABLE, "NCCL_COLLNET_ENABLE", INT, 0, "CollNet (in-network reduction)")                                   \
  X(PAT_ENABLE, "NCCL_PAT_ENABLE", INT, 2, "PAT algorithm: 0 off, 1 on, 2 automatic")                                  \
  X(TOPO_FILE, "NCCL_TOPO_FILE", STR, NULL, "XML file describing the system topology")                                 \
  X(TOPO_DUMP_FILE, "NCCL_TOPO_DUMP_FILE", STR, NULL, "write the detected topology as XML here")                       \
  X(GRAPH_FILE, "NCCL_GRAPH_FILE", STR, NULL, "XML file of channels to use instead of searching")                      \
  X(GRAPH_DUMP_FILE, "NCCL_GRAPH_DUMP_FILE", STR, NULL, "write the searched channels as XML here")                     \
  X(TOPO_DUMP_FILE_RANK, "NCCL_TOPO_DUMP_FILE_RANK", INT, 0, "the rank that writes NCCL_TOPO_DUMP_FILE")               \
  X(GRAPH_DUMP_FILE_RANK, "NCCL_GRAPH_DUMP_FILE_RANK", INT, 0, "the rank that writes NCCL_GRAPH_DUMP_FILE")            \
  X(NVB_DISABLE, "NCCL_NVB_DISABLE", INT, 0, "no NVLink paths through an intermediate GPU")                            \
  X(TUNER_PLUGIN, "NCCL_TUNER_PLUGIN", STR, NULL, "external tuner plugin library")                                     \
  /* misc NCCL knobs accepted for compatibility */                                                                     \
  X(LAUNCH_MODE, "NCCL_LAUNCH_MODE", STR, "PARALLEL", "PARALLEL or GROUP kernel launches")                             \
  X(CUMEM_ENABLE, "NCCL_CUMEM_ENABLE", INT, BRAID_PARAM_UNSET, "cuMem allocations and handles")                        \
  X(CHECK_POINTERS, "NCCL_CHECK_POINTERS", INT, 0, "check user pointers on every call")                                \
  X(RUNTIME_CONNECT, "NCCL_RUNTIME_CONNECT", INT, 1, "connect peers at the first call that needs them")                \
  X(IGNORE_CPU_AFFINITY, "NCCL_IGNORE_CPU_AFFINITY", INT, 0, "ignore the process CPU mask")                            \
  X(RAS_ENABLE, "NCCL_RAS_ENABLE", INT, 1, "reliability service (accepted, not used)")                                 \
  X(PXN_DISABLE, "NCCL_PXN_DISABLE", INT, 0, "disable sends through a NIC of another local GPU")                       \
  X(P2P_PXN_LEVEL, "NCCL_P2P_PXN_LEVEL", INT, 2, "PXN for send/recv: 0 never, 1 when needed, 2 always")                \
  X(IB_ROCE_VERSION_NUM, "NCCL_IB_ROCE_VERSION_NUM", INT, 2, "RoCE version for GID selection")                         \
  X(IB_PCI_RELAXED_ORDERING, "NCCL_IB_PCI_RELAXED_ORDERING", INT, 2, "PCIe relaxed ordering for IB (2: auto)")         \
  X(IB_ADAPTIVE_ROUTING, "NCCL_IB_ADAPTIVE_ROUTING", INT, BRAID_PARAM_UNSET, "IB adaptive routing")                    \
  X(DMABUF_ENABLE, "NCCL_DMABUF_ENABLE", INT, 1, "DMA-BUF memory registration")                                        \
  X(CGA_CLUSTER_SIZE, "NCCL_CGA_CLUSTER_SIZE", INT, BRAID_PARAM_UNSET, "default of config.cgaClusterSize")             \
  X(RAS_ADDR, "NCCL_RAS_ADDR", STR, NULL, "reliability service address (accepted, not used)")                          \
  X(RAS_TIMEOUT_FACTOR, "NCCL_RAS_TIMEOUT_FACTOR", INT, 1, "reliability service timeouts (accepted, not used)")        \
  X(PROFILER_PLUGIN, "NCCL_PROFILER_PLUGIN", STR, NULL, "external profiler plugin (accepted, not loaded)")             \
  X(GRAPH_REGISTER, "NCCL_GRAPH_REGISTER", INT, 1, "register buffers captured in CUDA graphs")                         \
  X(IGNORE_DISABLED_P2P, "NCCL_IGNORE_DISABLED_P2P", INT, 0, "ignore NVLink pairs NVML reports disabled")              \
  /* braid host executor */                                                                                            \
  X(SPIN_COUNT, "BRAID_SPIN_COUNT", INT, 32, "polls before a waiting host thread starts to yield")                     \
  X(PROXY_SPIN_US, "BRAID_PROXY_SPIN_US", INT, 0,                                                                      \
    "microseconds the net proxy thread keeps polling after its last work before it sleeps")                            \
  X(FAULT_INJECT, "BRAID_FAULT_INJECT", STR, NULL, "test hook: name of an allocation or call to fail on purpose")

enum braid_param {
#define BRAID_X(id, name, type, def, doc) BRAID_PARAM_##id,
  BRAID_PARAMS(BRAID_X)
#undef BRAID_X
      BRAID_PARAM_COUNT
};

/* The value, from the environment, a conf file, or the default. */
int64_t braid_param_int(enum braid_param id);
const char* braid_param_str(enum braid_param id);
/* Where the value came from: "default", "environment" or the conf file's path. */
const char* braid_param_source(enum braid_param id);
const char* braid_param_name(enum braid_param id);
const char* braid_param_doc(enum braid_param id);
/* The default as text ("auto" for unset). Fills buf. */
const char* braid_param_default_str(enum braid_param id, char* buf, int len);
int braid_param_is_int(enum braid_param id);
/* Re-read everything (tests change the environment between cases). */
void braid_param_reload(void);

#endif /* BRAID_PARAM_H */
