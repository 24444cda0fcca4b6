/*
 * param.h - every environment parameter braid knows, declared once, as data (docs/CONVENTIONS.md 7).
 *
 * One row per variable:  X(id, name, status, type, default, doc)
 *   id       BRAID_PARAM_<id>, what code passes to the accessors below
 *   name     the variable: NCCL's name for NCCL's knobs, BRAID_* for braid's own
 *   status   LIVE      braid reads it; loaded once per process (and again in a forked child)
 *            PER_USE   braid reads it; looked up again at each use, as NCCL reads it with
 *                      ncclGetEnv at call time (NCCL_HOSTID, NCCL_COMM_ID, NCCL_ALGO, ...)
 *            ACCEPTED  NCCL's knob, accepted for compatibility: braid ignores it, and says so
 *                      (one INFO line) when it is set
 *   type     INT(lo, hi)   integer, decimal or 0x hex, in [lo, hi]
 *            SIZE          byte count >= 0: an integer with an optional binary unit K, M, G, T
 *                          (also KB/KiB...). NCCL itself reads digits only (strtoll: "4M" is 4)
 *            BOOL          1/T/TRUE or 0/F/FALSE, any case (NCCL 2.30's bool parser)
 *            ENUM("A|B")   one of the words, any case; braid_param_int() is its index and
 *                          braid_param_str() the word as written here
 *            LIST("A|B")   comma list of the words, '^' first inverts, ALL is every word;
 *                          braid_param_int() is the mask (word i = bit i; an empty word keeps
 *                          a bit unused), unknown words are reported and skipped
 *            STR           text, read as is
 *   default  INT, SIZE, BOOL: a number or BRAID_PARAM_UNSET ("auto"); ENUM, LIST, STR: a
 *            string or NULL ("auto")
 *   doc      one line: what it does (for an ACCEPTED row: what it does in NCCL)
 *
 * A value that does not fit its type is reported once (a WARN naming variable, value and
 * source) and the default is used. Values come, first one wins, from the NCCL_ENV_PLUGIN env
 * plugin, the environment, NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf (param.c); an empty
 * value counts as unset. Adding a variable is adding a row; a name NCCL reads that braid has
 * no row for sits in param_nccl.h (accepted, ignored): when you add a row for one of those,
 * delete it there (test_param fails on a name declared twice).
 * Accessors: braid_param_int(BRAID_PARAM_X), braid_param_str(BRAID_PARAM_X). Only param.c
 * reads the environment.
 */
#ifndef BRAID_PARAM_H
#define BRAID_PARAM_H

#include <stddef.h>
#include <stdint.h>

#include "base/debug.h"

#define BRAID_PARAM_UNSET INT64_MIN
/* The logger's words, from its lists (debug.h): "NONE|VERSION|...|", "INIT|COLL|...|", and
 * the levels of a timestamp list, where NONE is no word ("|VERSION|...|"). */
#define BRAID_PARAM_WORD(name, value) #name "|"
#define BRAID_PARAM_LEVEL_WORDS BRAID_LOG_LEVELS(BRAID_PARAM_WORD)
#define BRAID_PARAM_SUBSYS_WORDS BRAID_LOG_SUBSYS(BRAID_PARAM_WORD)
#define BRAID_PARAM_TS_WORD(name, value) BRAID_PARAM_TS_WORD_##value(name)
#define BRAID_PARAM_TS_WORD_0(name) "|"
#define BRAID_PARAM_TS_WORD_1(name) #name "|"
#define BRAID_PARAM_TS_WORD_2(name) #name "|"
#define BRAID_PARAM_TS_WORD_3(name) #name "|"
#define BRAID_PARAM_TS_WORD_4(name) #name "|"
#define BRAID_PARAM_TS_WORD_5(name) #name "|"
#define BRAID_PARAM_TS_WORDS BRAID_LOG_LEVELS(BRAID_PARAM_TS_WORD)

#define BRAID_PARAMS(X)                                                                                                \
  /* logging and the parameter system */                                                                               \
  X(DEBUG, "NCCL_DEBUG", LIVE, ENUM(BRAID_PARAM_LEVEL_WORDS), "NONE",                                                  \
    "log level: VERSION, WARN, INFO, ABORT or TRACE")                                                                  \
  X(DEBUG_SUBSYS, "NCCL_DEBUG_SUBSYS", LIVE, LIST(BRAID_PARAM_SUBSYS_WORDS), "INIT,BOOTSTRAP,ENV",                     \
    "subsystems logged at INFO (comma list, ^ inverts)")                                                               \
  X(DEBUG_FILE, "NCCL_DEBUG_FILE", LIVE, STR, NULL, "log to this file instead of stdout (%h host, %p pid)")            \
  X(DEBUG_TIMESTAMP_LEVELS, "NCCL_DEBUG_TIMESTAMP_LEVELS", LIVE, LIST(BRAID_PARAM_TS_WORDS), "WARN",                   \
    "levels whose lines carry a timestamp")                                                                            \
  X(DEBUG_TIMESTAMP_FORMAT, "NCCL_DEBUG_TIMESTAMP_FORMAT", LIVE, STR, "[%F %T] ", "strftime format of the timestamp")  \
  X(WARN_ENABLE_DEBUG_INFO, "NCCL_WARN_ENABLE_DEBUG_INFO", LIVE, BOOL, 0, "after the first WARN, log at INFO level")   \
  X(CONF_FILE, "NCCL_CONF_FILE", LIVE, STR, NULL, "file of NAME=value lines read after the environment")               \
  X(ENV_PLUGIN, "NCCL_ENV_PLUGIN", LIVE, STR, NULL,                                                                    \
    "env plugin library (name, libnccl-env-<name>.so or path; none: off) asked before the environment")                \
  X(NO_CACHE, "NCCL_NO_CACHE", LIVE, STR, NULL, "comma list of variables (or ALL) to look up again at each use")       \
  X(PARAM_DUMP_ALL, "NCCL_PARAM_DUMP_ALL", LIVE, BOOL, 0,                                                              \
    "ncclParamDumpAll/ncclParamGetAllParameterKeys also list the names braid has no row for")                          \
  X(SET_THREAD_NAME, "NCCL_SET_THREAD_NAME", ACCEPTED, BOOL, 0, "name NCCL's threads (pthread_setname_np)")            \
  /* bootstrap and identity */                                                                                         \
  X(COMM_ID, "NCCL_COMM_ID", PER_USE, STR, NULL, "host:port of a bootstrap root hosted by rank 0")                     \
  X(SOCKET_IFNAME, "NCCL_SOCKET_IFNAME", LIVE, STR, NULL, "interfaces for sockets: prefixes, ^ excludes, = exact")     \
  X(SOCKET_FAMILY, "NCCL_SOCKET_FAMILY", LIVE, ENUM("AF_INET|AF_INET6"), NULL, "AF_INET or AF_INET6 only")             \
  X(SOCKET_RETRY_CNT, "NCCL_SOCKET_RETRY_CNT", LIVE, INT(0, INT32_MAX), 34,                                            \
    "connect retries before a peer counts as unreachable")                                                             \
  X(SOCKET_RETRY_SLEEP_MSEC, "NCCL_SOCKET_RETRY_SLEEP_MSEC", LIVE, INT(0, INT32_MAX), 100,                             \
    "sleep step between connect retries (ms)")                                                                         \
  X(HOSTID, "NCCL_HOSTID", PER_USE, STR, NULL,                                                                         \
    "host identity (default hostname + boot id); ranks with equal ids share a node")                                   \
  X(INIT_TIMEOUT, "BRAID_INIT_TIMEOUT", LIVE, INT(0, INT32_MAX), 300,                                                  \
    "seconds init, window registration, suspend, grow wait for missing ranks")                                         \
  X(TIMEOUT, "BRAID_TIMEOUT", LIVE, INT(0, INT32_MAX), 0, "seconds a collective may wait for a peer (0: no limit)")    \
  X(FLIGHT_CALLS, "BRAID_FLIGHT_CALLS", LIVE, INT(0, 4096), 64,                                                        \
    "calls each communicator's flight recorder keeps (0: off); dumped on failure, SIGUSR1, braid-info --dump")         \
  X(CHECK_MISMATCH, "BRAID_CHECK_MISMATCH", LIVE, BOOL, 0,                                                             \
    "1: ranks compare each group's collectives (function, type, count, op, root) before running them")                 \
  X(COMM_BLOCKING, "NCCL_COMM_BLOCKING", LIVE, BOOL, BRAID_PARAM_UNSET, "default of config.blocking")                  \
  X(HOST_MODE, "BRAID_HOST_MODE", LIVE, BOOL, 0, "1: run on host memory even when a GPU is usable")                    \
  X(GPU_SHARING, "BRAID_GPU_SHARING", LIVE, BOOL, 0, "1: allow several ranks on one GPU")                              \
  X(NET_DIRECT, "BRAID_NET_DIRECT", LIVE, BOOL, 1,                                                                     \
    "host mode: network steps read and write user memory (0: through the FIFO)")                                       \
  X(FAKE_GPU, "BRAID_FAKE_GPU", LIVE, INT(0, 64), 0, "tests: N > 0 poses N fake GPUs (host memory, stream threads)")   \
  X(FAKE_GPU_MULTICAST, "BRAID_FAKE_GPU_MULTICAST", PER_USE, STR, NULL,                                                \
    "tests: fake GPUs have multicast (1; with faults: 1,bindfail:D,joinfail:D,mapfail:D,gran:BYTES)")                  \
  X(WORK_INLINE, "BRAID_WORK_INLINE", LIVE, BOOL, 1,                                                                   \
    "0: always pass work items through a device buffer (tests the overflow path)")                                     \
  /* transports */                                                                                                     \
  X(P2P_DISABLE, "NCCL_P2P_DISABLE", LIVE, BOOL, 0, "1: never use peer-to-peer (CUDA IPC) connections")                \
  X(P2P_LEVEL, "NCCL_P2P_LEVEL", LIVE, STR, NULL, "farthest path for P2P: LOC NVL NVB PIX PXB PHB SYS (or 0-5)")       \
  X(P2P_READ_ENABLE, "NCCL_P2P_READ_ENABLE", ACCEPTED, BOOL, BRAID_PARAM_UNSET, "P2P read mode instead of write")      \
  X(P2P_USE_CUDA_MEMCPY, "NCCL_P2P_USE_CUDA_MEMCPY", ACCEPTED, BOOL, 0, "copy engines for P2P")                        \
  X(SHM_DISABLE, "NCCL_SHM_DISABLE", LIVE, BOOL, 0, "1: never use shared-memory connections")                          \
  X(REDUCE_ISA, "BRAID_REDUCE_ISA", LIVE, ENUM("AUTO|SSE2|AVX2|AVX512"), "AUTO",                                       \
    "host mode: vector loops of reductions and copies (AUTO: the widest the CPU has)")                                 \
  X(STREAM_BYTES, "BRAID_STREAM_BYTES", LIVE, SIZE, BRAID_PARAM_UNSET,                                                 \
    "host mode: calls whose output is this large write it with non-temporal stores (auto: LLC/4; 0: never)")           \
  X(SHM_DIRECT, "BRAID_SHM_DIRECT", LIVE, ENUM("AUTO|ON|OFF"), "AUTO",                                                 \
    "host mode: receivers read large steps from the sender's buffer (ON: every step; OFF: FIFO)")                      \
  X(SHM_LOCALITY, "BRAID_SHM_LOCALITY", LIVE, ENUM("AUTO|NEAR|FAR"), "AUTO",                                           \
    "host mode: local pairs' cores share a cache (AUTO: topology, else a ping-pong at init)")                          \
  X(SHM_PIECE, "BRAID_SHM_PIECE", LIVE, SIZE, BRAID_PARAM_UNSET,                                                       \
    "host mode: bytes a one-pass reduction copies per process_vm_readv (auto: from near/far)")                         \
  X(SHM_PUSH, "BRAID_SHM_PUSH", LIVE, BOOL, 1,                                                                         \
    "host mode, 2-rank ring all-reduce, direct shm: each rank also writes its reduced half into the peer's output")    \
  X(SHM_DIRECT_REDUCE, "BRAID_SHM_DIRECT_REDUCE", LIVE, BOOL, 0,                                                       \
    "host mode, a Reduce's chain over direct shm: senders send by pointer, the receiver reduces from them in one "     \
    "pass (0: through the FIFO slot, so the sender's core makes the copy)")                                            \
  X(SHM_A2A_STEP, "BRAID_SHM_A2A_STEP", LIVE, SIZE, 32768,                                                             \
    "host mode, direct shm: an AlltoAll's messages up to BRAID_SHM_A2A_MAX go in steps of this many bytes through "    \
    "the FIFO, pipelined, instead of whole slots by pointer (0: off)")                                                 \
  X(SHM_A2A_MAX, "BRAID_SHM_A2A_MAX", LIVE, SIZE, 1048576,                                                             \
    "host mode: the largest AlltoAll message (bytes per peer) that BRAID_SHM_A2A_STEP applies to")                     \
  X(REDUCE_SPLIT_BYTES, "BRAID_REDUCE_SPLIT_BYTES", LIVE, SIZE, 0,                                                     \
    "host mode, 2 ranks, direct shm: Reduces this large reduce half on each rank (ring.h split; 0: never)")            \
  X(REDUCE_STORE, "BRAID_REDUCE_STORE", LIVE, BOOL, 1,                                                                 \
    "host mode, split Reduce: the non-root writes its half into the root's output (0: through the FIFO slot)")         \
  X(GATHER_STORE, "BRAID_GATHER_STORE", LIVE, BOOL, 1,                                                                 \
    "host mode, Gather over direct shm: senders write into the root's output (0: the root reads each block)")          \
  X(NET, "NCCL_NET", PER_USE, STR, NULL, "network plugin to use, by name (Socket; UCX when built)")                    \
  X(NET_PLUGIN, "NCCL_NET_PLUGIN", LIVE, STR, NULL, "net plugin libraries: names, paths, a comma list")                \
  X(IB_DISABLE, "NCCL_IB_DISABLE", LIVE, BOOL, 0, "1: do not use InfiniBand (the IB network)")                         \
  X(IB_VERBS_LIBRARY, "BRAID_IB_VERBS_LIBRARY", LIVE, STR, NULL,                                                       \
    "tests: the verbs library to dlopen instead of libibverbs.so.1 (tests/ibemu/)")                                    \
  X(IB_HCA, "NCCL_IB_HCA", LIVE, STR, NULL, "InfiniBand devices: name[:port] prefixes, ^ excludes, = exact")           \
  X(IB_GID_INDEX, "NCCL_IB_GID_INDEX", LIVE, INT(-1, 255), -1, "RoCE GID index (-1: automatic)")                       \
  X(IB_TIMEOUT, "NCCL_IB_TIMEOUT", LIVE, INT(0, 31), 20, "IB QP timeout exponent (4.096 us x 2^n)")                    \
  X(IB_RETRY_CNT, "NCCL_IB_RETRY_CNT", LIVE, INT(0, 7), 7, "IB QP retry count")                                        \
  X(IB_QPS_PER_CONNECTION, "NCCL_IB_QPS_PER_CONNECTION", LIVE, INT(1, 128), 1, "queue pairs per connection")           \
  X(IB_SPLIT_DATA_ON_QPS, "NCCL_IB_SPLIT_DATA_ON_QPS", LIVE, BOOL, 0,                                                  \
    "1: every message is split over the connection's QPs; 0: messages take turns")                                     \
  X(IB_SL, "NCCL_IB_SL", LIVE, INT(-1, 15), -1, "IB service level")                                                    \
  X(IB_TC, "NCCL_IB_TC", LIVE, INT(-1, 255), -1, "IB traffic class")                                                   \
  X(IB_ROCE_VERSION_NUM, "NCCL_IB_ROCE_VERSION_NUM", LIVE, INT(1, 2), 2, "RoCE version for GID selection")             \
  X(IB_ADDR_FAMILY, "NCCL_IB_ADDR_FAMILY", LIVE, ENUM("AF_INET|AF_INET6"), "AF_INET", "RoCE GID address family")       \
  X(IB_ADDR_RANGE, "NCCL_IB_ADDR_RANGE", LIVE, STR, NULL, "RoCE GIDs inside this prefix only (a.b.c.d/n, IPv6/n)")     \
  X(IB_ROUTABLE_FLID_GID_INDEX, "NCCL_IB_ROUTABLE_FLID_GID_INDEX", LIVE, INT(0, 255), 1,                               \
    "InfiniBand: this GID index when its GID has a routable FLID")                                                     \
  X(IB_PCI_RELAXED_ORDERING, "NCCL_IB_PCI_RELAXED_ORDERING", LIVE, INT(0, 2), 2,                                       \
    "PCIe relaxed ordering for IB (2: auto)")                                                                          \
  X(IB_ADAPTIVE_ROUTING, "NCCL_IB_ADAPTIVE_ROUTING", LIVE, BOOL, BRAID_PARAM_UNSET, "IB adaptive routing")             \
  X(NET_GDR_LEVEL, "NCCL_NET_GDR_LEVEL", LIVE, STR, NULL, "farthest path for GPUDirect RDMA (as NCCL_P2P_LEVEL)")      \
  X(NET_GDR_READ, "NCCL_NET_GDR_READ", LIVE, BOOL, BRAID_PARAM_UNSET,                                                  \
    "GPUDirect RDMA for sends (unset: on from sm_80, or with NVLink peers)")                                           \
  X(GDR_FLUSH_DISABLE, "NCCL_GDR_FLUSH_DISABLE", LIVE, BOOL, 0, "1: no flush after GPUDirect RDMA receives")           \
  X(NET_FORCE_FLUSH, "NCCL_NET_FORCE_FLUSH", LIVE, BOOL, 0, "1: flush GPUDirect RDMA receives on sm_90+ too")          \
  X(SOCKET_NTHREADS, "NCCL_SOCKET_NTHREADS", LIVE, INT(INT32_MIN, INT32_MAX), BRAID_PARAM_UNSET,                       \
    "helper threads per socket connection (0..16)")                                                                    \
  X(NSOCKS_PERTHREAD, "NCCL_NSOCKS_PERTHREAD", LIVE, INT(INT32_MIN, INT32_MAX), BRAID_PARAM_UNSET,                     \
    "sockets per helper thread")                                                                                       \
  X(CROSS_NIC, "NCCL_CROSS_NIC", LIVE, INT(0, 2), 2, "0: rings keep one NIC, 1: may change, 2: automatic")             \
  X(PXN_DISABLE, "NCCL_PXN_DISABLE", LIVE, BOOL, 0, "disable sends through a NIC of another local GPU")                \
  X(P2P_PXN_LEVEL, "NCCL_P2P_PXN_LEVEL", ACCEPTED, INT(0, 2), 2,                                                       \
    "PXN for send/recv: 0 never, 1 when needed, 2 always")                                                             \
  X(DMABUF_ENABLE, "NCCL_DMABUF_ENABLE", ACCEPTED, BOOL, 1, "DMA-BUF memory registration")                             \
  X(IGNORE_DISABLED_P2P, "NCCL_IGNORE_DISABLED_P2P", ACCEPTED, BOOL, 0, "ignore NVLink pairs NVML reports disabled")   \
  /* buffers, channels, threads */                                                                                     \
  X(BUFFSIZE, "NCCL_BUFFSIZE", LIVE, SIZE, 4194304, "Simple protocol buffer per connection (bytes)")                   \
  X(LL_BUFFSIZE, "NCCL_LL_BUFFSIZE", LIVE, SIZE, BRAID_PARAM_UNSET, "LL protocol buffer per connection (bytes)")       \
  X(LL128_BUFFSIZE, "NCCL_LL128_BUFFSIZE", LIVE, SIZE, BRAID_PARAM_UNSET,                                              \
    "LL128 protocol buffer per connection (bytes)")                                                                    \
  X(NTHREADS, "NCCL_NTHREADS", LIVE, INT(64, 1024), BRAID_PARAM_UNSET, "threads per block for Simple and LL")          \
  X(LL128_NTHREADS, "NCCL_LL128_NTHREADS", LIVE, INT(64, 1024), BRAID_PARAM_UNSET, "threads per block for LL128")      \
  X(MIN_NCHANNELS, "NCCL_MIN_NCHANNELS", LIVE, INT(INT32_MIN, INT32_MAX), BRAID_PARAM_UNSET,                           \
    "fewest channels a collective uses")                                                                               \
  X(MAX_NCHANNELS, "NCCL_MAX_NCHANNELS", LIVE, INT(INT32_MIN, INT32_MAX), BRAID_PARAM_UNSET,                           \
    "most channels a collective uses")                                                                                 \
  X(MIN_CTAS, "NCCL_MIN_CTAS", LIVE, INT(1, INT32_MAX), BRAID_PARAM_UNSET, "default of config.minCTAs")                \
  X(MAX_CTAS, "NCCL_MAX_CTAS", LIVE, INT(1, INT32_MAX), BRAID_PARAM_UNSET, "default of config.maxCTAs")                \
  X(MAX_P2P_NCHANNELS, "NCCL_MAX_P2P_NCHANNELS", ACCEPTED, INT(1, 64), 64, "most channels for send/recv")              \
  X(P2P_NET_CHUNKSIZE, "NCCL_P2P_NET_CHUNKSIZE", ACCEPTED, SIZE, 131072, "send/recv chunk over the network")           \
  X(P2P_PCI_CHUNKSIZE, "NCCL_P2P_PCI_CHUNKSIZE", LIVE, SIZE, 131072,                                                   \
    "send/recv chunk over PCIe/shared memory (unset: host-mode shm steps sent by pointer take whole slots)")           \
  X(P2P_NVL_CHUNKSIZE, "NCCL_P2P_NVL_CHUNKSIZE", ACCEPTED, SIZE, 524288, "send/recv chunk over NVLink")                \
  X(P2P_LL_THRESHOLD, "NCCL_P2P_LL_THRESHOLD", ACCEPTED, SIZE, 16384,                                                  \
    "send/recv bytes per channel up to which LL is used")                                                              \
  /* algorithm choice and topology */                                                                                  \
  X(ALGO, "NCCL_ALGO", PER_USE, STR, NULL, "allowed algorithms: list, ^list, or func:list;...")                        \
  X(PROTO, "NCCL_PROTO", PER_USE, STR, NULL, "allowed protocols: LL, LL128, Simple (same syntax)")                     \
  X(NVLS_ENABLE, "NCCL_NVLS_ENABLE", LIVE, INT(0, 2), 2, "NVLink SHARP: 0 off, 1 on, 2 automatic")                     \
  X(NVLS_NCHANNELS, "NCCL_NVLS_NCHANNELS", ACCEPTED, INT(1, 64), 16, "channels for NVLS")                              \
  X(LSA_MAX_BYTES, "BRAID_LSA_MAX_BYTES", LIVE, SIZE, 524288,                                                          \
    "host mode, one node: largest all-reduce for one-/two-shot (scratch: 4x per rank; 0 off)")                         \
  X(LSA_LINE_BYTES, "BRAID_LSA_LINE_BYTES", LIVE, INT(0, 4096), 4096,                                                  \
    "host mode: largest one-shot all-reduce sent as lines carrying their call number (0 off)")                         \
  X(LSA_FLAT_BYTES, "BRAID_LSA_FLAT_BYTES", LIVE, INT(0, 4096), 512,                                                   \
    "host mode: line all-reduces from this size carry one call number, not one per line (0 never; same on all ranks)") \
  X(LSA_FLAT_NT, "BRAID_LSA_FLAT_NT", LIVE, INT(0, 2), 2,                                                              \
    "host mode: those calls' payload stores: 0 plain, 1 non-temporal (x86-64), 2 per rank the faster, measured")       \
  X(LSA_VARIANT, "BRAID_LSA_VARIANT", LIVE, ENUM("AUTO|ONESHOT|TWOSHOT"), "AUTO",                                      \
    "one-/two-shot all-reduce: the tuner's pick per size, or always one of them")                                      \
  X(COLLNET_ENABLE, "NCCL_COLLNET_ENABLE", ACCEPTED, BOOL, 0, "CollNet (in-network reduction)")                        \
  X(PAT_ENABLE, "NCCL_PAT_ENABLE", LIVE, INT(0, 2), 2, "PAT algorithm: 0 off, 1 on, 2 automatic")                      \
  X(TOPO_FILE, "NCCL_TOPO_FILE", PER_USE, STR, NULL, "XML file describing the system topology")                        \
  X(TOPO_DUMP_FILE, "NCCL_TOPO_DUMP_FILE", PER_USE, STR, NULL, "write the detected topology as XML here")              \
  X(GRAPH_FILE, "NCCL_GRAPH_FILE", PER_USE, STR, NULL, "XML file of channels to use instead of searching")             \
  X(GRAPH_DUMP_FILE, "NCCL_GRAPH_DUMP_FILE", PER_USE, STR, NULL, "write the searched channels as XML here")            \
  X(TOPO_DUMP_FILE_RANK, "NCCL_TOPO_DUMP_FILE_RANK", LIVE, INT(INT32_MIN, INT32_MAX), 0,                               \
    "the rank that writes NCCL_TOPO_DUMP_FILE")                                                                        \
  X(GRAPH_DUMP_FILE_RANK, "NCCL_GRAPH_DUMP_FILE_RANK", LIVE, INT(INT32_MIN, INT32_MAX), 0,                             \
    "the rank that writes NCCL_GRAPH_DUMP_FILE")                                                                       \
  X(NVB_DISABLE, "NCCL_NVB_DISABLE", LIVE, BOOL, 0, "no NVLink paths through an intermediate GPU")                     \
  /* plugins */                                                                                                        \
  X(TUNER_PLUGIN, "NCCL_TUNER_PLUGIN", LIVE, STR, NULL, "tuner plugin library: a name, a path, none")                  \
  X(PROFILER_PLUGIN, "NCCL_PROFILER_PLUGIN", LIVE, STR, NULL, "profiler plugin library: a name, a path, none")         \
  /* other NCCL knobs */                                                                                               \
  X(LAUNCH_MODE, "NCCL_LAUNCH_MODE", ACCEPTED, ENUM("PARALLEL|GROUP"), "PARALLEL",                                     \
    "PARALLEL or GROUP kernel launches")                                                                               \
  X(CUMEM_ENABLE, "NCCL_CUMEM_ENABLE", PER_USE, INT(-2, 1), BRAID_PARAM_UNSET,                                         \
    "0: ncclMemAlloc uses cudaMalloc (CUDA IPC, no multicast windows); 1: cuMem even under Yama ptrace_scope >= 1")    \
  X(CHECK_POINTERS, "NCCL_CHECK_POINTERS", ACCEPTED, BOOL, 0, "check user pointers on every call")                     \
  X(RUNTIME_CONNECT, "NCCL_RUNTIME_CONNECT", ACCEPTED, BOOL, 1,                                                        \
    "connect peers at the first call that needs them (braid always does)")                                             \
  X(IGNORE_CPU_AFFINITY, "NCCL_IGNORE_CPU_AFFINITY", ACCEPTED, BOOL, 0, "ignore the process CPU mask")                 \
  X(CGA_CLUSTER_SIZE, "NCCL_CGA_CLUSTER_SIZE", ACCEPTED, INT(0, 8), BRAID_PARAM_UNSET,                                 \
    "default of config.cgaClusterSize")                                                                                \
  X(GRAPH_REGISTER, "NCCL_GRAPH_REGISTER", ACCEPTED, BOOL, 1, "register buffers captured in CUDA graphs")              \
  X(RAS_ENABLE, "NCCL_RAS_ENABLE", ACCEPTED, BOOL, 1, "reliability service")                                           \
  X(RAS_ADDR, "NCCL_RAS_ADDR", ACCEPTED, STR, NULL, "reliability service address")                                     \
  X(RAS_TIMEOUT_FACTOR, "NCCL_RAS_TIMEOUT_FACTOR", ACCEPTED, INT(1, INT32_MAX), 1, "reliability service timeouts")     \
  /* braid's host executor and test hooks */                                                                           \
  X(SPIN_COUNT, "BRAID_SPIN_COUNT", LIVE, INT(0, INT32_MAX), 32, "polls before a waiting host thread starts to yield") \
  X(SPIN_SLEEP_AFTER, "BRAID_SPIN_SLEEP_AFTER", LIVE, INT(0, 1 << 30), 200000,                                         \
    "yielding polls before a host wait without progress sleeps between polls (10 us doubling to 1 ms; 0: never)")      \
  X(P2P_ROUND_GROUP, "BRAID_P2P_ROUND_GROUP", LIVE, INT(0, INT32_MAX), 0,                                              \
    "p2p rounds a rank progresses together (1: one at a time, NCCL's schedule; 0: all when host ranks outnumber "      \
    "cores, else 1)")                                                                                                  \
  X(P2P_SELF_COPY, "BRAID_P2P_SELF_COPY", LIVE, ENUM("AUTO|FIRST|WAIT|SENDS"), "AUTO",                                 \
    "host mode: sends to self are made before the call (FIRST), in polls where no p2p op moves (WAIT), in those "      \
    "where only sends are left (SENDS; else after the ops); AUTO: core/plan.c")                                        \
  X(PROXY_SPIN_US, "BRAID_PROXY_SPIN_US", LIVE, INT(0, INT32_MAX), 0,                                                  \
    "microseconds the net proxy thread keeps polling after its last work before it sleeps")                            \
  X(FAULT_INJECT, "BRAID_FAULT_INJECT", LIVE, STR, NULL,                                                               \
    "tests: fail, kill or stop at a named point or call: POINT[@function][#N|#*][:fail|kill|stop],... (fault.h)")

#include "base/param_nccl.h"

enum braid_param {
#define BRAID_X(id, name, status, type, def, doc) BRAID_PARAM_##id,
  BRAID_PARAMS(BRAID_X)
#undef BRAID_X
#define BRAID_Y(id) BRAID_PARAM_NCCL_##id,
      BRAID_PARAMS_NCCL(BRAID_Y)
#undef BRAID_Y
          BRAID_PARAM_COUNT
};

enum braid_param_status { BRAID_PARAM_LIVE, BRAID_PARAM_PER_USE, BRAID_PARAM_ACCEPTED };
enum braid_param_type {
  BRAID_PARAM_T_INT,
  BRAID_PARAM_T_SIZE,
  BRAID_PARAM_T_BOOL,
  BRAID_PARAM_T_ENUM,
  BRAID_PARAM_T_LIST,
  BRAID_PARAM_T_STR
};

/* What a row says (the static part of the table). */
struct braid_param_row {
  const char* name;
  const char* doc;
  enum braid_param_status status;
  enum braid_param_type type;
  int64_t lo, hi;      /* INT: bounds */
  const char* words;   /* ENUM, LIST: "A|B|C" */
  int64_t def_int;     /* INT, SIZE, BOOL: the default (BRAID_PARAM_UNSET: auto) */
  const char* def_str; /* ENUM, LIST, STR: the default (NULL: auto) */
  int declared;        /* 1: a row of BRAID_PARAMS; 0: a name of param_nccl.h */
};

/* The value, from the env plugin, the environment, a conf file, or the default. INT, SIZE,
 * BOOL, ENUM and LIST rows have an int; STR, ENUM and LIST rows a string (NULL: unset). */
int64_t braid_param_int(enum braid_param id);
const char* braid_param_str(enum braid_param id);
/* braid_param_int for a read on every call: the answer kept in *memo stands while the table
 * does (no reload, fork or first read since; a row read at each use, PER_USE or named by
 * NCCL_NO_CACHE, is looked up every time). A memo is a thread's own (two words, not shared):
 * `static __thread struct braid_param_memo m;`. */
struct braid_param_memo {
  const void* state; /* the table it was read from; NULL: none yet */
  int64_t value;
};
int64_t braid_param_int_memo(enum braid_param id, struct braid_param_memo* memo);
/* Where the value came from: "default", "environment", "env plugin <name>" or a conf file's
 * path. */
const char* braid_param_source(enum braid_param id);
const char* braid_param_name(enum braid_param id);
/* A variable outside the table that braid reads as NCCL does (TMPDIR, HOME, NCCL_CONF_FILE):
 * the environment's value or NULL. Keeps every read of the environment in param.c. */
const char* braid_param_env_raw(const char* name);
const char* braid_param_doc(enum braid_param id);
/* The default as text ("auto" for unset). Fills buf. */
const char* braid_param_default_str(enum braid_param id, char* buf, int len);
/* 1 for the rows braid_param_int() reads (INT, SIZE, BOOL, ENUM, LIST). */
int braid_param_is_int(enum braid_param id);
/* The row of `id` (NULL for a bad id), and the row named `name` (-1: none). */
const struct braid_param_row* braid_param_row(enum braid_param id);
int braid_param_lookup(const char* name, size_t len);
/* The current value as text, whatever the type (ENUM: the word; BOOL: TRUE/FALSE; LIST: its
 * words, ALL or NONE, as NCCL prints a bitset; unset: ""),
 * into buf. The value is looked up as braid_param_int/str would (PER_USE rows again). */
const char* braid_param_text(enum braid_param id, char* buf, size_t len);
/* "LIVE", "PER_USE" or "ACCEPTED" (braid-info). */
const char* braid_param_status_name(enum braid_param id);
/* The names of the variables other programs read under NCCL_ (PyTorch's), and whose. */
const char* braid_param_foreign_owner(const char* name, size_t len);
/* Re-read everything (tests change the environment between cases; ncclResetDebugInit). */
void braid_param_reload(void);

/* The parser, callable on any string (fuzzers, tests): reads `text` as `row` says. Returns 0
 * when it fits, 1 when it fits after skipping unknown LIST words (named in `why`), -1 when it
 * does not (why: what is wrong). *value_p: the number, index or mask; unchanged for STR. */
int braid_param_parse(const struct braid_param_row* row, const char* text, int64_t* value_p, char* why, size_t whylen);
/* The conf file syntax on a buffer: calls `fn` for each `NAME=value` line (blanks around both
 * trimmed, `#` lines and blank lines skipped) and with name NULL for a line without '='. */
typedef void (*braid_param_conf_fn)(void* arg, int lineno, const char* name, size_t name_len, const char* value,
                                    size_t value_len);
void braid_param_conf_parse(const char* text, size_t len, braid_param_conf_fn fn, void* arg);
/* The i-th word of an ENUM/LIST row into buf ("" when out of range). */
const char* braid_param_word(const struct braid_param_row* row, int64_t i, char* buf, size_t len);

#endif /* BRAID_PARAM_H */
